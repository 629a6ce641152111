//! The stdio transport against misbehaving child processes.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::Map;
use toolgate_client::transport::stdio::{StdioCommand, StdioTransport};
use toolgate_client::{CallOptions, Client, ClientError};

fn shell(script: &str) -> Client {
    let command = StdioCommand {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        ..Default::default()
    };
    Client::builder("test", "1")
        .timeout(Duration::from_secs(5))
        .build(StdioTransport::spawn(&command).unwrap())
}

#[tokio::test]
async fn a_crash_fails_pending_calls_with_the_exit_status() {
    let c = shell("read line; exit 3");
    match c
        .request("tools/list", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::ServerExited(status)) => assert!(status.contains('3'), "{status}"),
        other => panic!("{other:?}"),
    }
    // Later requests fail at once, with the same cause.
    assert!(matches!(
        c.request("tools/list", Map::new(), &CallOptions::default())
            .await,
        Err(ClientError::ServerExited(_))
    ));
}

#[tokio::test]
async fn malformed_lines_are_skipped_and_the_real_answer_still_arrives() {
    // Answers every request (the era probe included), each after a garbage line.
    let c = shell(
        r#"while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); echo 'this is not json'; [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"tools":[],"ttlMs":0,"cacheScope":"public"}}\n' "$id"; done"#,
    );
    let page = c
        .request("tools/list", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(page["tools"], serde_json::json!([]));
}

#[tokio::test]
async fn a_hung_server_times_out() {
    let c = shell("sleep 30");
    let options = CallOptions {
        timeout: Some(Duration::from_millis(200)),
        progress: None,
        ..Default::default()
    };
    assert!(matches!(
        c.request("tools/list", Map::new(), &options).await,
        Err(ClientError::Timeout(_))
    ));
}

#[tokio::test]
async fn a_missing_program_is_a_clear_error() {
    let command = StdioCommand {
        program: "/nonexistent/toolgate-test".into(),
        ..Default::default()
    };
    match StdioTransport::spawn(&command) {
        Err(ClientError::Transport { message: m, .. }) => {
            assert!(m.contains("cannot start"), "{m}")
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("spawned a missing program"),
    }
}

#[tokio::test]
async fn an_oversized_message_fails_its_request_and_the_server_stays_usable() {
    // The first tools/list is answered with a 100 kB line; everything else
    // with a proper (empty) result.
    let script = r#"big=1; while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); case "$line" in *tools/list*) if [ $big = 1 ]; then big=0; head -c 100000 /dev/zero | tr '\0' x; echo; continue; fi;; esac; [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"tools":[],"ttlMs":0,"cacheScope":"public"}}\n' "$id"; done"#;
    let command = StdioCommand {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        ..Default::default()
    };
    let limits = toolgate_client::transport::Limits {
        max_message_bytes: 64 * 1024,
        ..Default::default()
    };
    let c = Client::builder("test", "1")
        .timeout(Duration::from_secs(5))
        .build(StdioTransport::spawn_with(&command, limits).unwrap());
    match c
        .request("tools/list", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::LimitExceeded { server, limit, .. }) => {
            assert_eq!((server.as_str(), limit), ("/bin/sh", "max_message_bytes"));
        }
        other => panic!("{other:?}"),
    }
    let page = c
        .request("tools/list", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(page["tools"], serde_json::json!([]));
}

/// Declares elicitation and never answers: every request it takes stays open.
struct NeverAnswers;

impl toolgate_client::InputHandler for NeverAnswers {
    fn capabilities(&self) -> toolgate_server::protocol::types::ClientCapabilities {
        serde_json::from_value(serde_json::json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        _request: toolgate_protocol::types::ElicitRequestParams,
    ) -> toolgate_client::BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>>
    {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn server_requests_over_the_cap_are_refused_at_once() {
    // On tools/list the server sends three elicitation requests, reads the
    // two answers that come back at once, and reports how many of them
    // were refusals.
    let script = r#"while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); case "$line" in *tools/list*) for n in 101 102 103; do printf '{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"mode":"form","message":"?","requestedSchema":{"type":"object","properties":{}}}}\n' "$n"; done; read a; read b; seen=$(printf '%s\n%s\n' "$a" "$b" | grep -c 'already answering 1 requests'); printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","tools":[],"refused":%s}}\n' "$id" "$seen";; *) [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"tools":[],"ttlMs":0,"cacheScope":"public"}}\n' "$id";; esac; done"#;
    let command = StdioCommand {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        ..Default::default()
    };
    let limits = toolgate_client::transport::Limits {
        max_concurrent_server_requests: 1,
        ..Default::default()
    };
    let c = Client::builder("test", "1")
        .timeout(Duration::from_secs(5))
        .input_handler(NeverAnswers)
        .build(StdioTransport::spawn_with(&command, limits).unwrap());
    let page = c
        .request("tools/list", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(page["refused"], 2, "{page}");
}

/// A server whose one tool's description shows three variables of its
/// environment.
const ENV_SERVER: &str = r#"while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public","tools":[{"name":"env","description":"pkg=[%s] path=[%s] mine=[%s]","inputSchema":{"type":"object"}}]}}\n' "$id" "$CARGO_PKG_NAME" "${PATH:+set}" "$MINE"; done"#;

async fn described_env(inherit_env: bool) -> String {
    let command = StdioCommand {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), ENV_SERVER.into()],
        env: vec![("MINE".into(), "given".into())],
        inherit_env,
        ..Default::default()
    };
    let c = Client::builder("test", "1").build(StdioTransport::spawn(&command).unwrap());
    let tools = c.list_tools().await.unwrap();
    tools[0].description.clone().unwrap()
}

#[tokio::test]
async fn a_started_server_gets_a_minimal_environment_unless_told_to_inherit() {
    // cargo sets CARGO_PKG_NAME for every test process: a variable of the
    // parent that is not in the minimal set.
    let pkg = std::env::var("CARGO_PKG_NAME").unwrap();
    assert_eq!(described_env(false).await, "pkg=[] path=[set] mine=[given]");
    assert_eq!(
        described_env(true).await,
        format!("pkg=[{pkg}] path=[set] mine=[given]")
    );
}

/// Offers one root.
struct OneRoot;

impl toolgate_client::InputHandler for OneRoot {
    fn capabilities(&self) -> toolgate_server::protocol::types::ClientCapabilities {
        serde_json::from_value(serde_json::json!({"roots": {}})).unwrap()
    }
    fn roots(
        &self,
    ) -> toolgate_client::BoxFuture<
        '_,
        Result<toolgate_protocol::types::ListRootsResult, ClientError>,
    > {
        Box::pin(async {
            Ok(
                serde_json::from_value(serde_json::json!({"roots": [{"uri": "file:///srv/data"}]}))
                    .unwrap(),
            )
        })
    }
}

/// A legacy server that, as server-filesystem does, asks for the roots
/// right after `notifications/initialized` and serves each call with the
/// roots it holds then: none, if the call overtook the answer.
const ROOTS_SERVER: &str = r#"
import json, sys
roots = None
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method is None:
        if id == "roots-1":
            roots = [r["uri"] for r in message["result"]["roots"]]
        continue
    if method == "notifications/initialized":
        send({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "roots", "version": "1"}}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "where", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        text = "roots: " + ", ".join(roots or [])
        send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
    elif id is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
"#;

#[tokio::test]
async fn a_legacy_server_asking_for_roots_after_initialized_has_them_before_the_first_call() {
    let command = StdioCommand {
        program: "python3".into(),
        args: vec!["-c".into(), ROOTS_SERVER.into()],
        ..Default::default()
    };
    let c = Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(OneRoot)
        .build(StdioTransport::spawn(&command).unwrap());
    let result = c
        .call_tool("where", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    let text = serde_json::to_value(&result.content).unwrap()[0]["text"].clone();
    assert_eq!(text, "roots: file:///srv/data");
}
