//! How long auditing 1,000 tools takes once the list has arrived (release
//! build): `cargo run --release -p toolgate-review --example audit_speed`.
//! Fails if it takes a second or more.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_protocol::types::Tool;
use toolgate_review::{ServerTools, audit};

fn main() {
    let tools: Vec<Tool> = (0..1_000)
        .map(|i| {
            serde_json::from_value(json!({
                "name": format!("service.do_thing_{i}"),
                "title": format!("Thing {i}"),
                "description": format!("Updates thing {i} in the inventory and returns the new record. Use it after reading the record; it does not delete. See https://example.com/docs/{i}"),
                "inputSchema": {"type": "object", "properties": {
                    "id": {"type": "string", "maxLength": 64},
                    "mode": {"type": "string"},
                    "note": {"type": "string", "x-mcp-header": format!("Note{i}")},
                    "nested": {"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}
                }, "required": ["id"]},
                "annotations": {"readOnlyHint": i % 3 == 0}
            }))
            .unwrap()
        })
        .collect();
    let servers = [ServerTools {
        server: "bench".into(),
        tools,
    }];
    let started = Instant::now();
    let findings = audit(&servers);
    let took = started.elapsed();
    println!(
        "audited 1,000 tools in {:.1} ms: {} findings",
        took.as_secs_f64() * 1000.0,
        findings.len()
    );
    if took >= Duration::from_secs(1) {
        eprintln!("too slow: auditing 1,000 tools must take well under a second");
        std::process::exit(1);
    }
}
