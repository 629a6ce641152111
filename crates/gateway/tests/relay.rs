//! Results relayed as sent: a result that carries text and
//! `structuredContent` (as mcp-server-time's and server-filesystem's do)
//! reaches the caller through the gateway with the upstream's content
//! alone — no second, structured copy for the model to read twice — and
//! the audit row describes what the caller received.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Map, Value, json};
use support::{config, downstream, serve};
use toolgate_client::CallOptions;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::types::CallToolResult;
use toolgate_server::{Server, ToolDef};

/// A result as the upstream makes it: text blocks, and the same data
/// structured.
fn shaped(text: Vec<String>, structured: Value) -> CallToolResult {
    serde_json::from_value(json!({
        "content": text.iter().map(|t| json!({"type": "text", "text": t})).collect::<Vec<_>>(),
        "structuredContent": structured,
    }))
    .unwrap()
}

/// Tools answering in the shapes of two real servers: mcp-server-time's
/// `get_current_time` (the JSON pretty-printed as its one text block) and
/// server-filesystem's `list_allowed_directories` (prose text, with
/// `{"content": …}` structured).
fn upstream() -> Server {
    let time = json!({"timezone": "Europe/Paris", "datetime": "2026-12-06T18:00:00+01:00", "is_dst": false});
    let time_text = serde_json::to_string_pretty(&time).unwrap();
    let dirs_text = "Allowed directories:\n/srv/data".to_owned();
    let dirs = json!({"content": dirs_text});
    Server::builder("shapes", "1")
        .tool(
            ToolDef::new("get_current_time")
                .description("The time in a zone.")
                .raw_output()
                .handler(move |_: toolgate_server::NoArgs| {
                    let r = shaped(vec![time_text.clone()], time.clone());
                    async move { r }
                }),
        )
        .tool(
            ToolDef::new("list_allowed_directories")
                .description("Lists the directories it may read.")
                .handler(move |_: toolgate_server::NoArgs| {
                    let r = shaped(vec![dirs_text.clone()], dirs.clone());
                    async move { r }
                }),
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_result_with_text_and_structured_content_is_relayed_with_its_own_content_only() {
    let up = serve(upstream()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let gateway = Gateway::start(
        config(&format!(
            "[servers.s]\nurl = \"{up}\"\n[audit]\npath = {}\n",
            support::toml_string(&db.display().to_string())
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;
    for tool in ["s.get_current_time", "s.list_allowed_directories"] {
        // What the upstream itself answers, directly.
        let direct = toolgate_client::Client::builder("t", "1").build(
            toolgate_client::transport::http::HttpTransport::new(up.clone(), Default::default())
                .unwrap(),
        );
        let upstream_name = tool.trim_start_matches("s.");
        let sent = direct
            .call_tool(upstream_name, Map::new(), &CallOptions::default())
            .await
            .unwrap();
        let relayed = c
            .call_tool(tool, Map::new(), &CallOptions::default())
            .await
            .unwrap();
        assert_eq!(relayed.content.len(), 1, "{tool}: {:?}", relayed.content);
        assert_eq!(
            serde_json::to_value(&relayed.content).unwrap(),
            serde_json::to_value(&sent.content).unwrap(),
            "{tool}: relayed as sent"
        );
        assert_eq!(relayed.structured_content, sent.structured_content);
    }
    gateway.stop();
    let rows = query(&db, &Filter::default()).unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let said = row.result.unwrap();
        assert!(said.starts_with("1 block: text"), "{said}");
    }
}
