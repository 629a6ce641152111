//! Bounded resources: a call that runs too long ends with an `isError`
//! result and its handler is dropped; requests over the in-flight cap get
//! `503` with `Retry-After`; connections over the cap wait their turn; and
//! the server serves normally afterwards.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::request;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use toolgate_server::transport::Reply;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{Server, ToolDef, TransportContext};

/// Sets its flag when dropped: proof that a handler was cancelled.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_over_its_timeout_ends_with_an_error_and_its_handler_is_dropped() {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let server = Server::builder("s", "1")
        .tool(
            ToolDef::new("hangs")
                .timeout(Duration::from_secs(2))
                .handler(move || {
                    let guard = Dropped(flag.clone());
                    async move {
                        let _guard = guard;
                        std::future::pending::<()>().await;
                        Ok("never")
                    }
                }),
        )
        .tool(ToolDef::new("ok").handler(|| async { Ok("ok") }))
        .build()
        .unwrap();
    let call = |name: &str| {
        let message = request(1, "tools/call", json!({"name": name}));
        let reply = server.handle_message(
            &serde_json::to_vec(&message).unwrap(),
            &TransportContext::default(),
        );
        async move {
            let frame = match reply {
                Reply::Done(frame) => frame,
                Reply::Streaming(mut exchange) => exchange.next().await.unwrap(),
                Reply::Nothing => panic!("no reply"),
            };
            serde_json::from_slice::<Value>(frame.bytes()).unwrap()
        }
    };
    let r = call("hangs").await;
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(
        r["result"]["content"][0]["text"],
        "The tool \"hangs\" did not finish within 2 s and was stopped. Try again with a smaller request, or later."
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the handler was not dropped"
    );
    assert_eq!(call("ok").await["result"]["content"][0]["text"], "ok");
}

async fn post(client: &reqwest::Client, url: &str, name: &str) -> reqwest::Response {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .json(&request(1, "tools/call", json!({"name": name})))
        .send()
        .await
        .unwrap()
}

/// `wait` tells `started` it runs, then waits for `gate`.
fn gated_server(gate: Arc<Notify>, started: Arc<Notify>) -> Server {
    Server::builder("s", "1")
        .tool(ToolDef::new("wait").handler(move || {
            let (gate, started) = (gate.clone(), started.clone());
            async move {
                started.notify_one();
                gate.notified().await;
                Ok("released")
            }
        }))
        .tool(ToolDef::new("ok").handler(|| async { Ok("ok") }))
        .build()
        .unwrap()
}

#[tokio::test]
async fn requests_over_the_in_flight_cap_get_503_with_retry_after() {
    let gate = Arc::new(Notify::new());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let config = HttpConfig {
        max_in_flight: 1,
        ..HttpConfig::default()
    };
    let started = Arc::new(Notify::new());
    let server = gated_server(gate.clone(), started.clone());
    tokio::spawn(serve_listener(server, config, listener));
    let client = common::http_client().build().unwrap();
    let first = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { post(&client, &url, "wait").await.status() }
    });
    // While the first runs, holding the only permit, a second is refused.
    started.notified().await;
    let refused = post(&client, &url, "ok").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry shortly")
    );
    gate.notify_one();
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(post(&client, &url, "ok").await.status(), 200);
}

#[tokio::test]
async fn connections_over_the_cap_wait_for_a_free_one() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}/mcp");
    let config = HttpConfig {
        max_connections: 1,
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(
        gated_server(Arc::new(Notify::new()), Arc::new(Notify::new())),
        config,
        listener,
    ));
    // One idle connection takes the only place.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let client = common::http_client().build().unwrap();
    let waiting = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { post(&client, &url, "ok").await.status() }
    });
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        while !waiting.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        early.is_err(),
        "a second connection was served beside the first"
    );
    drop(idle);
    assert_eq!(waiting.await.unwrap(), 200);
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed() {
    use http_body_util::{BodyExt as _, Full};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = HttpConfig {
        idle_timeout: Some(Duration::from_millis(200)),
        ..HttpConfig::default()
    };
    let (gate, started) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let server = gated_server(gate.clone(), started.clone());
    tokio::spawn(serve_listener(server, config, listener));
    let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .unwrap();
    let connection = tokio::spawn(conn);
    let call = |name: &str| {
        let body = serde_json::to_vec(&request(1, "tools/call", json!({"name": name}))).unwrap();
        http::Request::post(format!("http://{addr}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .body(Full::new(bytes::Bytes::from(body)))
            .unwrap()
    };
    // A stream open for longer than the idle timeout keeps the connection.
    let waiting = send.send_request(call("wait"));
    let release = async {
        started.notified().await;
        // Not synchronisation: the behaviour under test is time passing
        // while a stream is open.
        tokio::time::sleep(Duration::from_millis(600)).await;
        gate.notify_one();
    };
    let (response, ()) = tokio::join!(waiting, release);
    assert_eq!(response.unwrap().status(), 200);
    let response = send.send_request(call("ok")).await.unwrap();
    assert_eq!(response.status(), 200);
    let answer = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "ok");
    // Nothing more is asked: the server says goodbye and the connection ends.
    let ended = tokio::time::timeout(Duration::from_secs(10), connection).await;
    assert!(ended.is_ok(), "an idle HTTP/2 connection stayed open");
}
