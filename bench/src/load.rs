//! The HTTP load generator: a fixed number of HTTP/1.1 keep-alive
//! connections, each sending its next request as soon as the previous
//! response has been read to the end, for a fixed time. Latencies go into
//! an HDR histogram (microseconds).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// What to send.
#[derive(Clone, Debug)]
pub struct Target {
    /// Server address.
    pub addr: SocketAddr,
    /// A second instance: odd connections go there (a round-robin load
    /// balancer, per connection).
    pub also: Option<SocketAddr>,
    /// The request body (a JSON-RPC request).
    pub body: Bytes,
    /// Headers beyond `Content-Type` and `Accept`.
    pub headers: Vec<(String, String)>,
    /// Follow `nextCursor` until the list ends: one sample is a whole walk.
    pub walk: bool,
    /// Give every request its own JSON-RPC id (the body's `"id":1` is
    /// replaced): a proxy that keeps a session routes answers by id.
    pub fresh_ids: bool,
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// Completed samples (requests, or walks).
    pub samples: u64,
    /// HTTP requests sent (more than samples when walking pages).
    pub requests: u64,
    /// Samples that failed (non-200, or no JSON-RPC result).
    pub errors: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Latency of each sample, in microseconds.
    pub latency: Histogram<u64>,
}

impl Outcome {
    /// Samples per second.
    pub fn rate(&self) -> f64 {
        self.samples as f64 / self.elapsed.as_secs_f64()
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    // 1 µs to 60 s at 3 significant figures.
    match Histogram::new_with_bounds(1, 60_000_000, 3) {
        Ok(h) => h,
        Err(_) => unreachable!("constant, valid bounds"),
    }
}

/// The JSON-RPC message in a response body: plain JSON, or the last
/// `data:` line of an SSE stream.
pub fn message_of(body: &[u8]) -> Option<Value> {
    if body.first() == Some(&b'{') {
        return serde_json::from_slice(body).ok();
    }
    let text = std::str::from_utf8(body).ok()?;
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| d.starts_with('{'))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
}

/// The `nextCursor` of a list response (cursors are plain base64url).
fn next_cursor(body: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"nextCursor\":\"";
    let at = memchr::memmem::rfind(body, KEY)? + KEY.len();
    let len = memchr::memchr(b'"', &body[at..])?;
    std::str::from_utf8(&body[at..at + len]).ok()
}

fn with_cursor(body: &Bytes, cursor: &str) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return body.clone();
    };
    if let Some(params) = v.get_mut("params").and_then(Value::as_object_mut) {
        params.insert("cursor".into(), Value::from(cursor));
    }
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

struct Worker {
    samples: u64,
    requests: u64,
    errors: u64,
    latency: Histogram<u64>,
}

/// The body of request `n` of connection `conn`: `body` with its `"id":1`
/// replaced by an id no other request of the run has.
fn with_id(body: &Bytes, conn: u64, n: u64) -> Bytes {
    const ID: &[u8] = b"\"id\":1,";
    let Some(at) = memchr::memmem::find(body, ID) else {
        return body.clone();
    };
    let mut out = Vec::with_capacity(body.len() + 16);
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(format!("\"id\":{},", conn * 1_000_000_000 + n).as_bytes());
    out.extend_from_slice(&body[at + ID.len()..]);
    Bytes::from(out)
}

/// Open a legacy (2025-11-25) session at `addr`: `initialize`, then
/// `notifications/initialized`; the session id, for `Mcp-Session-Id`.
pub async fn open_session(addr: SocketAddr) -> anyhow::Result<String> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let post = |body: &'static str, session: Option<&str>| {
        let mut request = Request::post("/mcp")
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = session {
            request = request
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.body(Full::new(Bytes::from_static(body.as_bytes())))
    };
    let response = sender
        .send_request(post(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolgate-bench","version":"1"}}}"#,
            None,
        )?)
        .await?;
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no Mcp-Session-Id from {addr}"))?;
    response.into_body().collect().await?;
    sender.ready().await?;
    let response = sender
        .send_request(post(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            Some(&session),
        )?)
        .await?;
    response.into_body().collect().await?;
    Ok(session)
}

async fn connection(target: Target, deadline: Instant, index: u64) -> anyhow::Result<Worker> {
    let addr = match target.also {
        Some(other) if index % 2 == 1 => other,
        _ => target.addr,
    };
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut worker = Worker {
        samples: 0,
        requests: 0,
        errors: 0,
        latency: histogram(),
    };
    let host = addr.to_string();
    let mut sent = 0u64;
    while Instant::now() < deadline {
        let started = Instant::now();
        let mut body = if target.fresh_ids {
            sent += 1;
            with_id(&target.body, index, sent)
        } else {
            target.body.clone()
        };
        let mut ok = true;
        loop {
            let mut request = Request::post("/mcp")
                .header("host", &host)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            for (k, v) in &target.headers {
                request = request.header(k, v);
            }
            let request = request.body(Full::new(body.clone()))?;
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            worker.requests += 1;
            // Byte searches, not a parse: the generator shares the CPUs with
            // the server, and must spend as little of them as it can.
            if status != 200 || memchr::memmem::find(&bytes, b"\"result\":").is_none() {
                ok = false;
                break;
            }
            if !target.walk {
                break;
            }
            match next_cursor(&bytes) {
                Some(cursor) => body = with_cursor(&target.body, cursor),
                None => break,
            }
        }
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        if ok {
            worker.samples += 1;
            let _ = worker.latency.record(micros.max(1));
        } else {
            worker.errors += 1;
        }
    }
    Ok(worker)
}

/// Run `concurrency` connections against `target` for `duration`.
pub async fn run(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(concurrency);
    for conn in 0..concurrency {
        tasks.push(tokio::spawn(connection(
            target.clone(),
            deadline,
            conn as u64,
        )));
    }
    let mut outcome = Outcome {
        samples: 0,
        requests: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
    };
    for task in tasks {
        let worker = task.await??;
        outcome.samples += worker.samples;
        outcome.requests += worker.requests;
        outcome.errors += worker.errors;
        outcome.latency.add(&worker.latency)?;
    }
    outcome.elapsed = started.elapsed();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_from_json_and_from_sse() {
        let json = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert!(message_of(json).is_some());
        let sse = b"id: 0\nretry: 3000\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":1}}\n\n";
        let m = message_of(sse).unwrap();
        assert_eq!(m["result"]["a"], 1);
        assert!(message_of(b"garbage").is_none());
        let page =
            br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":"dGcxOmE","ttlMs":1}}"#;
        assert_eq!(next_cursor(page), Some("dGcxOmE"));
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"m"}"#);
        assert_eq!(
            with_id(&body, 2, 7).as_ref(),
            br#"{"jsonrpc":"2.0","id":2000000007,"method":"m"}"#
        );
        assert_eq!(next_cursor(br#"{"result":{"tools":[]}}"#), None);
    }
}
