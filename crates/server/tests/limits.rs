//! Bounded resources: a call that runs too long ends with an `isError`
//! result and its handler is dropped; requests over the in-flight cap get
//! `503` with `Retry-After`; connections over the cap wait their turn; and
//! the server serves normally afterwards; a request head that does not come
//! within the header timeout closes its connection.
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

/// Reads until the server closes the connection; `None` if it is still
/// open after ten seconds (far beyond the timeouts these tests set).
async fn read_to_close(conn: &mut TcpStream) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut seen))
        .await
        .ok()?
        .ok()?;
    Some(seen)
}

/// A server with this header timeout, listening; where it listens.
async fn header_timeout_server(timeout: Duration) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = HttpConfig {
        header_timeout: timeout,
        ..HttpConfig::default()
    };
    let server = gated_server(Arc::new(Notify::new()), Arc::new(Notify::new()));
    tokio::spawn(serve_listener(server, config, listener));
    addr
}

#[tokio::test]
async fn a_request_head_that_stalls_is_cut_off_and_others_are_served() {
    let addr = header_timeout_server(Duration::from_millis(200)).await;
    // Half a head, then nothing (slowloris).
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let seen = read_to_close(&mut stalled).await;
    assert!(seen.is_some(), "a stalled request head kept its connection");
    let client = common::http_client().build().unwrap();
    let url = format!("http://{addr}/mcp");
    assert_eq!(post(&client, &url, "ok").await.status(), 200);
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let addr = header_timeout_server(Duration::from_millis(200)).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(&raw_call()).await.unwrap();
    // The answer comes, then the connection is closed for want of a next
    // request.
    let seen = read_to_close(&mut conn)
        .await
        .expect("an idle keep-alive connection stayed open");
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.starts_with("HTTP/1.1 200 OK"), "{seen}");
    assert!(seen.contains(r#""text":"ok""#), "{seen}");
}

/// One `tools/call` of `ok` as raw HTTP/1.1.
fn raw_call() -> Vec<u8> {
    let body = serde_json::to_vec(&request(1, "tools/call", json!({"name": "ok"}))).unwrap();
    let mut message = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/call\r\nmcp-name: ok\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    message.extend_from_slice(&body);
    message
}

/// Reads one response with a `content-length` body.
async fn read_response(conn: &mut TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed mid-response: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap();
            if seen.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn each_request_head_gets_the_whole_header_timeout() {
    let addr = header_timeout_server(Duration::from_secs(1)).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    // Three requests 600 ms apart on one connection: longer in all than
    // the timeout (and than 1.25 times it), each within it.
    for i in 0..3 {
        if i > 0 {
            // Not synchronisation: the behaviour under test is time passing
            // between requests.
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        conn.write_all(&raw_call()).await.unwrap();
        let answer = read_response(&mut conn).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.contains(r#""text":"ok""#), "{answer}");
    }
}
