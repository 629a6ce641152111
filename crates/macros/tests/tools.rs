//! `#[toolgate_server::tools]`: the tools it makes, and its errors.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_server::{RequestContext, Server, ToolError, TransportContext};

#[derive(Deserialize, JsonSchema)]
struct Add {
    /// How much to add.
    amount: u64,
}

struct Counter {
    total: AtomicU64,
}

#[toolgate_server::tools]
impl Counter {
    /// Adds to the counter and returns the new total.
    ///
    /// The total never decreases.
    #[tool(destructive = false, open_world = false, title = "Add")]
    async fn add(&self, args: Add) -> Result<String, ToolError> {
        let total = self.total.fetch_add(args.amount, Ordering::SeqCst) + args.amount;
        Ok(total.to_string())
    }

    /// Returns the current total.
    #[tool(read_only, name = "get_total")]
    fn total(&self, _ctx: RequestContext) -> String {
        self.total.load(Ordering::SeqCst).to_string()
    }

    /// Not a tool: no attribute.
    #[allow(dead_code)]
    fn helper(&self) -> u64 {
        0
    }
}

async fn send(server: &Server, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let frame = match server.handle_message(
        &serde_json::to_vec(&message).unwrap(),
        &TransportContext::default(),
    ) {
        toolgate_server::transport::Reply::Done(frame) => frame,
        toolgate_server::transport::Reply::Streaming(mut exchange) => {
            exchange.next().await.unwrap()
        }
        toolgate_server::transport::Reply::Nothing => panic!("no reply"),
    };
    serde_json::from_slice(frame.bytes()).unwrap()
}

#[tokio::test]
async fn methods_become_tools_with_their_docs_and_annotations() {
    let counter = Arc::new(Counter {
        total: AtomicU64::new(0),
    });
    let server = Server::builder("counter", "1")
        .tools(counter.tools())
        .build()
        .unwrap();
    let list = send(&server, "tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{list}");
    let add = &tools[0];
    assert_eq!(add["name"], "add");
    assert_eq!(add["title"], "Add");
    assert_eq!(
        add["description"],
        "Adds to the counter and returns the new total.\n\nThe total never decreases."
    );
    assert_eq!(add["annotations"]["destructiveHint"], false);
    assert_eq!(add["annotations"]["openWorldHint"], false);
    assert_eq!(
        add["inputSchema"]["properties"]["amount"]["description"],
        "How much to add."
    );
    let total = &tools[1];
    assert_eq!(total["name"], "get_total");
    assert_eq!(total["annotations"]["readOnlyHint"], true);
    assert_eq!(total["inputSchema"]["additionalProperties"], false);
    let r = send(
        &server,
        "tools/call",
        json!({"name": "add", "arguments": {"amount": 5}}),
    )
    .await;
    assert_eq!(r["result"]["content"][0]["text"], "5");
    let r = send(
        &server,
        "tools/call",
        json!({"name": "get_total", "arguments": {}}),
    )
    .await;
    assert_eq!(r["result"]["content"][0]["text"], "5");
}

#[test]
fn mistakes_fail_to_compile_with_a_message_that_names_the_fix() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
