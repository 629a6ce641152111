//! The stdio transport: one JSON-RPC message per line.
//!
//! Requests are served concurrently; their notifications and responses are
//! written by a single writer, one whole line at a time, so messages never
//! interleave mid-line. `notifications/cancelled` aborts the request it names
//! and nothing more is written for it. At end of input the server stops
//! reading, lets in-flight requests finish for
//! [`ServerConfig::shutdown_grace`](crate::ServerConfig), ends open
//! subscriptions gracefully, and returns. Logs go to stderr, never stdout.
//!
//! A legacy client opens with `initialize`; the process then holds its
//! session (see the `legacy` module): requests without the modern `_meta`
//! are served in that session, and the client's JSON-RPC responses answer
//! the server's input requests.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt as _;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use toolgate_protocol::jsonrpc::{Incoming, parse_message};
use toolgate_protocol::{RequestId, RpcError};

use crate::Server;
use crate::dispatch::{NotificationAction, TransportContext, error_frame};
use crate::exchange::Reply;
use crate::legacy::{self, Session};

/// The longest line accepted (4 MiB); a longer one is answered with an
/// error and skipped.
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// Serve `server` on this process's stdin and stdout until stdin closes.
pub async fn serve_stdio(server: Server) -> std::io::Result<()> {
    serve_stream(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serve on any pair of byte streams (a socket, a pipe, a test duplex).
pub async fn serve_stream<R, W>(server: Server, reader: R, writer: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(256);
    let writer_task = tokio::spawn(write_lines(writer, out_rx));
    let in_flight: Arc<Mutex<HashMap<RequestId, tokio::task::AbortHandle>>> = Arc::default();
    let mut tasks = JoinSet::new();
    // stdio has no HTTP authorization: the principal is whoever started
    // the process, as its environment says (TOOLGATE_SUBJECT/SCOPES).
    let transport = TransportContext {
        auth: crate::AuthContext::from_env(),
        stream_per_request: false,
        http_headers: None,
    };
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE));
    // Set by `initialize`: the whole process is then one legacy session.
    let mut session: Option<Arc<Session>> = None;

    while let Some(line) = lines.next().await {
        let line = match line {
            Ok(line) => line,
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                let error =
                    RpcError::invalid_request(format!("message longer than {MAX_LINE} bytes"));
                send(&out_tx, error_frame(None, error).bytes().to_vec()).await;
                continue;
            }
            Err(LinesCodecError::Io(e)) => {
                tracing::warn!(error = %e, "stdin read failed; shutting down");
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match parse_message(line.as_bytes()) {
            Ok(Incoming::Request(req)) => {
                let id = req.id.clone();
                if in_flight.lock().contains_key(&id) {
                    let error = RpcError::invalid_request(format!(
                        "request id {id} is already in use by a request in flight"
                    ));
                    send(&out_tx, error_frame(Some(&id), error).bytes().to_vec()).await;
                    continue;
                }
                let reply = if req.method == "initialize"
                    && server.serves_legacy()
                    && !legacy::is_modern_request(&req)
                {
                    legacy_initialize(&server, &mut session, &req, &out_tx)
                } else {
                    match session.as_ref() {
                        Some(s) if !legacy::is_modern_request(&req) => {
                            server.handle_legacy(s, req, &transport)
                        }
                        _ => server.handle_request(req, &transport, None),
                    }
                };
                match reply {
                    Reply::Nothing => {}
                    Reply::Done(frame) => send(&out_tx, frame.bytes().to_vec()).await,
                    Reply::Streaming(mut exchange) => {
                        let out = out_tx.clone();
                        let registry = in_flight.clone();
                        let key = id.clone();
                        // Holding the lock across spawn+insert keeps a fast
                        // task from removing its entry before it exists.
                        let mut guard = in_flight.lock();
                        let handle = tasks.spawn(async move {
                            while let Some(frame) = exchange.next().await {
                                if out.send(frame.bytes().to_vec()).await.is_err() {
                                    break;
                                }
                            }
                            registry.lock().remove(&key);
                        });
                        guard.insert(id, handle);
                    }
                }
            }
            Ok(Incoming::Notification(n)) => {
                if n.method == "notifications/initialized"
                    && let Some(s) = &session
                {
                    s.mark_initialized();
                }
                if let NotificationAction::Cancel(id) = server.classify_notification(&n)
                    && let Some(handle) = in_flight.lock().remove(&id)
                {
                    handle.abort();
                }
            }
            Ok(Incoming::Response(response)) => match &session {
                // The answer to an input request of a legacy session.
                Some(s) => s.deliver(response),
                None => tracing::debug!("ignoring a JSON-RPC response from the client"),
            },
            Err(rejected) => {
                send(
                    &out_tx,
                    error_frame(rejected.id.as_ref(), rejected.error)
                        .bytes()
                        .to_vec(),
                )
                .await;
            }
        }
        // Reap finished tasks so the set does not grow without bound.
        while tasks.try_join_next().is_some() {}
    }

    // End of input: let requests in flight finish, close subscriptions.
    server.shutdown();
    let grace = server.config().shutdown_grace;
    if tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        tracing::warn!("requests still running after the shutdown grace period; aborting them");
        tasks.abort_all();
    }
    // The session sends its notifications to stdout too: let go of that
    // sender, or the writer would wait for it forever and the process
    // would outlive its input.
    if let Some(session) = session.take() {
        session.detach();
    }
    drop(out_tx);
    match writer_task.await {
        Ok(result) => result,
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// `initialize` on stdio: the first one opens the process's legacy session.
fn legacy_initialize(
    server: &Server,
    session: &mut Option<Arc<Session>>,
    req: &toolgate_protocol::jsonrpc::Request,
    out: &mpsc::Sender<Vec<u8>>,
) -> Reply {
    if session.is_some() {
        let error = RpcError::invalid_request(
            "this process is already initialized; restart the server to initialize again",
        );
        return Reply::Done(error_frame(Some(&req.id), error));
    }
    match server.legacy_initialize(req, String::new(), None, Some(out.clone())) {
        Ok((opened, frame)) => {
            *session = Some(opened);
            Reply::Done(frame)
        }
        Err(frame) => Reply::Done(frame),
    }
}

async fn send(out: &mpsc::Sender<Vec<u8>>, bytes: Vec<u8>) {
    let _ = out.send(bytes).await;
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
) -> std::io::Result<()> {
    while let Some(mut line) = rx.recv().await {
        line.push(b'\n');
        writer.write_all(&line).await?;
        // Flush only when nothing else is queued: batches bursts, never delays
        // a lone message.
        while let Ok(mut next) = rx.try_recv() {
            next.push(b'\n');
            writer.write_all(&next).await?;
        }
        writer.flush().await?;
    }
    writer.flush().await
}
