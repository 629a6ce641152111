//! Many idle `subscriptions/listen` streams: what each open stream costs
//! the server in memory.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::Semaphore;

/// An open stream: dropping it closes the connection.
pub struct Stream {
    _sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    _body: hyper::body::Incoming,
}

async fn open_one(addr: SocketAddr, body: Bytes) -> anyhow::Result<Stream> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = Request::post("/mcp")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(Full::new(body))?;
    let response = sender.send_request(request).await?;
    anyhow::ensure!(
        response.status() == 200,
        "listen answered {}",
        response.status()
    );
    let mut body = response.into_body();
    // Wait for the acknowledgement: the subscription is then in place.
    let frame = body
        .frame()
        .await
        .ok_or_else(|| anyhow::anyhow!("the stream ended before its acknowledgement"))??;
    anyhow::ensure!(frame.is_data(), "no acknowledgement");
    Ok(Stream {
        _sender: sender,
        _body: body,
    })
}

/// Open `count` listen streams to the server at `addr` (at most 256 being
/// opened at once).
pub async fn open(addr: SocketAddr, count: usize) -> anyhow::Result<Vec<Stream>> {
    let body = Bytes::from(serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": true},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "toolgate-bench", "version": "1"}
            }
        }
    }))?);
    let gate = Arc::new(Semaphore::new(256));
    let mut tasks = Vec::with_capacity(count);
    for _ in 0..count {
        let permit = gate.clone().acquire_owned().await?;
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let stream = open_one(addr, body).await;
            drop(permit);
            stream
        }));
    }
    let mut streams = Vec::with_capacity(count);
    for task in tasks {
        streams.push(task.await??);
    }
    Ok(streams)
}
