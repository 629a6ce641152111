//! Results relayed as sent, as a person sees them: a result with text and
//! `structuredContent` (mcp-server-time's and server-filesystem's shapes)
//! prints its text once, from the server directly and through
//! `toolgate serve`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use support::{serve_in, toolgate_in};
use tokio::net::TcpListener;
use toolgate_protocol::types::CallToolResult;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{Server, ToolDef};

fn shaped(text: &str, structured: serde_json::Value) -> CallToolResult {
    serde_json::from_value(json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
    }))
    .unwrap()
}

/// The two real servers' shapes: mcp-server-time's pretty JSON text, and
/// server-filesystem's prose with `{"content": …}` structured.
const TIME: &str = "{\n  \"timezone\": \"Europe/Paris\",\n  \"is_dst\": false\n}";
const DIRS: &str = "Allowed directories:\n/srv/data";

async fn upstream() -> String {
    let server = Server::builder("shapes", "1")
        .tool(
            ToolDef::new("get_current_time")
                .description("The time in a zone.")
                .read_only()
                .handler(|_: toolgate_server::NoArgs| async {
                    shaped(TIME, json!({"timezone": "Europe/Paris", "is_dst": false}))
                }),
        )
        .tool(
            ToolDef::new("list_allowed_directories")
                .description("Lists the directories it may read.")
                .read_only()
                .handler(|_: toolgate_server::NoArgs| async {
                    shaped(DIRS, json!({"content": DIRS}))
                }),
        )
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_listener(server, HttpConfig::default(), listener));
    url
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_with_its_own_text_prints_once_directly_and_through_the_gateway() {
    let up = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolgate.toml"),
        format!(
            "[servers.s]\nurl = \"{up}\"\n[audit]\ndisabled = true\n[policy]\ndefault = \"allow\"\n"
        ),
    )
    .unwrap();
    let gateway = serve_in(dir.path(), &[]).await;
    for (url, prefix) in [(up.as_str(), ""), (gateway.url.as_str(), "s.")] {
        for (tool, text) in [
            ("get_current_time", TIME),
            ("list_allowed_directories", DIRS),
        ] {
            let name = format!("{prefix}{tool}");
            let r = toolgate_in(dir.path(), &["call", url, &name, "--yes"], &[]).await;
            assert_eq!(r.code, 0, "{}", r.stderr);
            assert_eq!(r.stdout, format!("{text}\n"), "{name} via {url}");
        }
    }
}
