//! The stdio transport over an in-memory pipe.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{assert_wire, request, test_server};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use toolgate_server::transport::stdio::serve_stream;

struct Pipe {
    to_server: DuplexStream,
    from_server: tokio::io::Lines<BufReader<DuplexStream>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
    probe: common::Probe,
}

fn start() -> Pipe {
    let (server, probe) = test_server(100);
    let (client_in, server_out) = tokio::io::duplex(1 << 16);
    let (server_in, client_out) = tokio::io::duplex(1 << 16);
    let done = tokio::spawn(serve_stream(server, server_in, server_out));
    Pipe {
        to_server: client_out,
        from_server: BufReader::new(client_in).lines(),
        done,
        probe,
    }
}

impl Pipe {
    async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.to_server.write_all(&line).await.unwrap();
    }

    async fn send_raw(&mut self, raw: &str) {
        self.to_server.write_all(raw.as_bytes()).await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.from_server.next_line())
            .await
            .expect("no message within 5 s")
            .unwrap()
            .expect("stream ended");
        serde_json::from_str(&line).unwrap()
    }
}

#[tokio::test]
async fn serves_requests_and_bad_lines_without_stopping() {
    let mut p = start();
    p.send_raw("{oops\n").await;
    let v = p.recv().await;
    assert_eq!(v["error"]["code"], -32700);
    assert!(v.get("id").is_none());
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
        .await;
    let v = p.recv().await;
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(1), json!(-32602))
    );
    p.send(&request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    ))
    .await;
    let v = p.recv().await;
    assert_wire("tools/call", &v);
    assert_eq!(v["result"]["content"][0]["text"], "hi");
}

#[tokio::test]
async fn progress_interleaves_and_requests_run_concurrently() {
    let mut p = start();
    let mut m = common::meta();
    m["progressToken"] = json!(7);
    p.send(&request(
        1,
        "tools/call",
        json!({"name": "slow", "_meta": m}),
    ))
    .await;
    p.send(&request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "fast"}}),
    ))
    .await;
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|v: &&Value| v.get("id").is_some())
        .count()
        < 2
    {
        let v = p.recv().await;
        assert_wire("tools/call", &v);
        seen.push(v);
    }
    let progress = seen
        .iter()
        .filter(|v| v["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 2);
    assert!(
        seen.iter()
            .any(|v| v["id"] == 2 && v["result"]["content"][0]["text"] == "fast")
    );
}

#[tokio::test]
async fn cancellation_stops_the_handler_and_suppresses_the_response() {
    let mut p = start();
    p.send(&request(1, "tools/call", json!({"name": "slow"})))
        .await;
    for _ in 0..100 {
        if p.probe.entered() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user"}})).await;
    // Malformed and unknown cancellations are ignored.
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})).await;
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled"}))
        .await;
    p.send(&request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "after"}}),
    ))
    .await;
    let v = p.recv().await;
    assert_eq!(v["id"], 2, "the cancelled request must not answer: {v}");
    for _ in 0..100 {
        if p.probe.cancelled() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(p.probe.cancelled(), 1);
}

#[tokio::test]
async fn end_of_input_finishes_in_flight_work_and_closes_subscriptions() {
    let mut p = start();
    p.send(&request(
        5,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ))
    .await;
    let ack = p.recv().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        5
    );
    p.send(&request(
        6,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "last"}}),
    ))
    .await;
    p.to_server.shutdown().await.unwrap();
    let mut rest = Vec::new();
    while let Ok(Some(line)) = p.from_server.next_line().await {
        rest.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    assert!(rest.iter().any(|v| v["id"] == 6), "{rest:?}");
    let closing = rest
        .iter()
        .find(|v| v["id"] == 5)
        .expect("graceful listen result");
    assert_wire("subscriptions/listen", closing);
    assert!(
        rest.iter()
            .any(|v| v["method"] == "notifications/cancelled" && v["params"]["requestId"] == 5)
    );
    tokio::time::timeout(Duration::from_secs(5), p.done)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A host ends a stdio server by closing its input; after `initialize`
/// the process is one legacy session, whose notifications also go to
/// stdout, and that must not keep the server running.
#[tokio::test]
async fn end_of_input_ends_a_legacy_session_too() {
    let mut p = start();
    p.send(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "host", "version": "1"}
        }}),
    )
    .await;
    let init = p.recv().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert_eq!(p.recv().await["id"], 1);
    p.to_server.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), p.done)
        .await
        .expect("the server still runs after its input closed")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn duplicate_in_flight_ids_are_refused() {
    let mut p = start();
    p.send(&request(1, "tools/call", json!({"name": "slow"})))
        .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    p.send(&request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    ))
    .await;
    let v = p.recv().await;
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(1), json!(-32600))
    );
}
