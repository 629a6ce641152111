//! Legacy Streamable HTTP (revisions 2025-03-26 to 2025-11-25) on the same
//! endpoint as modern service.
//!
//! `initialize` opens a session and answers with its `Mcp-Session-Id`; later
//! requests of the session carry that header and are served in it (an
//! unknown or ended session gets `404`, and the client starts over). `GET`
//! with the header opens the session's stream of unsolicited notifications;
//! `DELETE` ends the session. A request with the modern `_meta` is always
//! served statelessly, whatever headers it carries. JSON-RPC errors inside a
//! session travel with status `200`, as legacy clients expect.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::stream;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use tokio::sync::mpsc;
use toolgate_protocol::jsonrpc::{Incoming, Request, encode_error};
use toolgate_protocol::types::CancelledNotificationParams;
use toolgate_protocol::version::is_legacy_served;
use toolgate_protocol::{RpcError, codes};

use super::checks::PROTOCOL_VERSION_HEADER;
use super::handler::{Shared, json_response, refuse, sse_response};
use crate::dispatch::TransportContext;
use crate::exchange::{Frame, Reply};
use crate::legacy::{Session, is_modern_request, new_session_id};
use crate::{AuthContext, Server};

/// The legacy session header.
pub use toolgate_protocol::header::SESSION_HEADER;

// Parsed once: looking a header up by `&str` parses the name every time,
// and every request on a dual-era endpoint is looked at for a session.
const SESSION_NAME: http::HeaderName = http::HeaderName::from_static(SESSION_HEADER);

/// Where a POST goes.
pub(super) enum Routed {
    /// Answered here, in the legacy era.
    Done(Response),
    /// Not legacy traffic: serve it statelessly.
    Modern(Incoming),
}

fn subject(auth: Option<&AuthContext>) -> Option<String> {
    auth.and_then(|a| a.subject()).map(str::to_owned)
}

fn not_found() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        codes::INVALID_REQUEST,
        "Session not found: it ended or never existed; send initialize to start a new session"
            .into(),
    )
}

fn session_of(
    shared: &Shared,
    headers: &HeaderMap,
    auth: Option<&AuthContext>,
) -> Option<Result<Arc<Session>, Response>> {
    let id = headers.get(SESSION_NAME)?;
    let Ok(id) = id.to_str() else {
        return Some(Err(not_found()));
    };
    Some(
        shared
            .sessions
            .get(id, subject(auth).as_deref())
            .ok_or_else(not_found),
    )
}

/// Route a POSTed message of a dual-era server.
pub(super) async fn route(
    shared: &Shared,
    headers: &HeaderMap,
    auth: Option<AuthContext>,
    incoming: Incoming,
) -> Routed {
    if let Incoming::Request(req) = &incoming {
        // Modern `_meta` wins even on `initialize`: such a request is served
        // by this revision's rules, which know no `initialize` (-32601).
        // Only `initialize` and requests naming a session can be legacy
        // traffic; anything else is served statelessly below without
        // reading `_meta` here.
        let legacy_shaped = req.method == "initialize" || headers.contains_key(SESSION_NAME);
        if legacy_shaped && is_modern_request(req) {
            return Routed::Modern(incoming);
        }
        if req.method == "initialize" {
            return Routed::Done(initialize(&shared.server, shared, req, auth.as_ref()));
        }
    }
    let session = match session_of(shared, headers, auth.as_ref()) {
        None => return Routed::Modern(incoming),
        Some(Err(response)) => return Routed::Done(response),
        Some(Ok(session)) => session,
    };
    if let Some(version) = headers.get(PROTOCOL_VERSION_HEADER) {
        let version = version.to_str().unwrap_or_default();
        if !is_legacy_served(version) {
            return Routed::Done(refuse(
                StatusCode::BAD_REQUEST,
                codes::INVALID_REQUEST,
                format!(
                    "MCP-Protocol-Version {version:?} is not valid in this session, which negotiated {}",
                    session.version
                ),
            ));
        }
    }
    let accepted = || Routed::Done(empty(StatusCode::ACCEPTED));
    match incoming {
        Incoming::Request(req) => Routed::Done(serve(&shared.server, &session, req, auth).await),
        Incoming::Notification(n) => {
            match n.method.as_str() {
                "notifications/initialized" => session.mark_initialized(),
                "notifications/cancelled" => {
                    let params = serde_json::Value::Object(n.params.unwrap_or_default());
                    if let Ok(p) = serde_json::from_value::<CancelledNotificationParams>(params) {
                        session.cancel(&p.request_id);
                    }
                }
                _ => {}
            }
            accepted()
        }
        Incoming::Response(response) => {
            session.deliver(response);
            accepted()
        }
    }
}

fn initialize(
    server: &Server,
    shared: &Shared,
    req: &Request,
    auth: Option<&AuthContext>,
) -> Response {
    let id = new_session_id();
    match server.legacy_initialize(req, id.clone(), subject(auth), None) {
        Ok((session, frame)) => {
            shared.sessions.insert(session);
            let mut response = json_response(StatusCode::OK, frame.bytes().to_vec());
            if let Ok(value) = HeaderValue::from_str(&id) {
                response.headers_mut().insert(SESSION_HEADER, value);
            }
            response
        }
        Err(frame) => json_response(StatusCode::OK, frame.bytes().to_vec()),
    }
}

async fn serve(
    server: &Server,
    session: &Arc<Session>,
    req: Request,
    auth: Option<AuthContext>,
) -> Response {
    let transport = TransportContext {
        auth,
        stream_per_request: true,
        http_headers: None,
    };
    let (cancelled, in_flight) = session.track(&req.id);
    match server.handle_legacy(session, req, &transport) {
        Reply::Nothing => empty(StatusCode::ACCEPTED),
        Reply::Done(frame) => json_response(StatusCode::OK, frame.bytes().to_vec()),
        Reply::Streaming(mut exchange) => {
            let first = tokio::select! {
                frame = exchange.next() => frame,
                // Cancelled by the client: no response is owed; end the body.
                _ = cancelled.cancelled() => return empty_stream(),
            };
            match first {
                Some(frame @ Frame::Response { .. }) => {
                    json_response(StatusCode::OK, frame.bytes().to_vec())
                }
                Some(first) => {
                    // Dropping the stream drops the exchange, which stops the
                    // work; cancellation ends the stream the same way.
                    let exchange = CancellableExchange {
                        exchange,
                        cancelled,
                        _in_flight: in_flight,
                    };
                    sse_response(exchange.into_stream(), Some(first), None)
                }
                None => json_response(StatusCode::OK, encode_error(None, &RpcError::internal())),
            }
        }
    }
}

struct CancellableExchange {
    exchange: crate::exchange::Exchange,
    cancelled: tokio_util::sync::CancellationToken,
    _in_flight: crate::legacy::InFlight,
}

impl CancellableExchange {
    fn into_stream(self) -> super::handler::FrameSource {
        Box::pin(stream::unfold(self, |mut this| async move {
            let frame = tokio::select! {
                frame = this.exchange.next() => frame?,
                _ = this.cancelled.cancelled() => return None,
            };
            Some((frame, this))
        }))
    }
}

fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

fn empty_stream() -> Response {
    let mut response = Response::new(Body::empty());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

/// `GET` with a session id: the session's stream of unsolicited messages.
/// `None` when the request has no session header (not legacy traffic).
pub(super) fn open_stream(
    shared: &Shared,
    headers: &HeaderMap,
    auth: Option<&AuthContext>,
    keep_alive: Duration,
) -> Option<Response> {
    let session = match session_of(shared, headers, auth)? {
        Ok(session) => session,
        Err(response) => return Some(response),
    };
    let wants_sse = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream") || v.contains("*/*"));
    if !wants_sse {
        return Some(refuse(
            StatusCode::NOT_ACCEPTABLE,
            codes::INVALID_REQUEST,
            "the session stream is text/event-stream; accept it".into(),
        ));
    }
    let (tx, rx) = mpsc::channel(64);
    session.attach(tx);
    let ended = session.ended.clone();
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let events = stream::unfold(
        (rx, ticker, ended),
        |(mut rx, mut ticker, ended)| async move {
            let chunk = tokio::select! {
                message = rx.recv() => super::handler::sse_event(&message?),
                _ = ticker.tick() => Bytes::from_static(b": keep-alive\n\n"),
                _ = ended.cancelled() => return None,
            };
            Some((Ok::<_, Infallible>(chunk), (rx, ticker, ended)))
        },
    );
    let mut response = Response::new(Body::from_stream(events));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Some(response)
}

/// `DELETE` with a session id: end the session. `None` without the header.
pub(super) fn end_session(
    shared: &Shared,
    headers: &HeaderMap,
    auth: Option<&AuthContext>,
) -> Option<Response> {
    let id = headers.get(SESSION_NAME)?.to_str().unwrap_or_default();
    if shared.sessions.remove(id, subject(auth).as_deref()) {
        tracing::info!(session = %id, "legacy session ended by the client");
        Some(empty(StatusCode::OK))
    } else {
        Some(not_found())
    }
}
