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
    let response = sender.send_request(listen_request(addr, body)?).await?;
    let body = acknowledged(response).await?;
    Ok(Stream {
        _sender: sender,
        _body: body,
    })
}

fn listen_body() -> anyhow::Result<Bytes> {
    Ok(Bytes::from(serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}, "_meta": crate::request_meta()}
    }))?))
}

fn listen_request(addr: SocketAddr, body: Bytes) -> anyhow::Result<Request<Full<Bytes>>> {
    Ok(Request::post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(Full::new(body))?)
}

async fn acknowledged(
    response: hyper::Response<hyper::body::Incoming>,
) -> anyhow::Result<hyper::body::Incoming> {
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
    Ok(body)
}

/// Streams multiplexed on HTTP/2 connections (h2c with prior knowledge).
pub struct Multiplexed {
    _senders: Vec<hyper::client::conn::http2::SendRequest<Full<Bytes>>>,
    _bodies: Vec<hyper::body::Incoming>,
}

/// Open `count` listen streams over HTTP/2, `per_connection` on each
/// connection — how a gateway or browser holds many subscriptions.
pub async fn open_h2(
    addr: SocketAddr,
    count: usize,
    per_connection: usize,
) -> anyhow::Result<Multiplexed> {
    let body = listen_body()?;
    let mut senders = Vec::new();
    let mut bodies = Vec::with_capacity(count);
    let mut left = count;
    while left > 0 {
        let n = left.min(per_connection.max(1));
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            TokioIo::new(tcp),
        )
        .await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut pending = Vec::with_capacity(n);
        for _ in 0..n {
            let mut sender = sender.clone();
            let request = listen_request(addr, body.clone())?;
            pending.push(tokio::spawn(async move {
                let response = sender.send_request(request).await?;
                acknowledged(response).await
            }));
        }
        for p in pending {
            bodies.push(p.await??);
        }
        senders.push(sender);
        left -= n;
    }
    Ok(Multiplexed {
        _senders: senders,
        _bodies: bodies,
    })
}

/// Open `count` listen streams to the server at `addr`, one HTTP/1.1
/// connection each (at most 256 being opened at once).
pub async fn open(addr: SocketAddr, count: usize) -> anyhow::Result<Vec<Stream>> {
    let body = listen_body()?;
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
