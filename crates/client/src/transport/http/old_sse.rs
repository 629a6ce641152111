//! The deprecated HTTP+SSE transport of protocol version 2024-11-05, for
//! servers that still offer only it.
//!
//! The client opens one event stream with `GET`; its first event,
//! `endpoint`, names where to `POST` messages (within the same origin, or
//! it is refused). Every message the client sends — requests, responses
//! to the server's requests, notifications — is a `POST` there, answered
//! `202 Accepted`; every message of the server arrives as a `message` event
//! on the stream, routed as on stdio ([`Router`]). The stream is the
//! session: when it ends, pending requests fail and later ones are refused
//! until a new transport connects.
//!
//! The spec (2026-07-28, Streamable HTTP, "Backwards compatibility")
//! deprecates this transport; clients wanting to reach older servers
//! detect it: a `POST` answered `400`, `404` or `405` without a modern
//! JSON-RPC error is followed by a `GET` that must open an event stream
//! whose first event is `endpoint`.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, header};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::sse::{Cursor, Events};
use super::wire::Outbound;
use crate::ClientError;
use crate::transport::router::Router;
use crate::transport::{Outgoing, Pending};

/// One HTTP+SSE session.
pub(super) struct Session {
    router: Router,
    /// Where messages are posted.
    post_to: url::Url,
    /// Why the session ended, once it did.
    ended: Arc<Mutex<Option<String>>>,
}

/// What opening found at the URL.
pub(super) enum Opened {
    /// An HTTP+SSE server: the session.
    Session(Session),
    /// Something else, and why it is not such a server.
    NotSse(String),
}

impl Session {
    /// `GET` the event stream at the transport's URL and wait (at most
    /// `wait`) for its `endpoint` event; the session reads the stream and
    /// posts the client's messages until `stop`.
    pub(super) async fn open(
        shared: &Arc<Shared>,
        wait: Duration,
        stop: CancellationToken,
    ) -> Result<Opened, ClientError> {
        let mut out = Outbound::new(Method::GET);
        out.set(header::ACCEPT, "text/event-stream");
        let response = shared.execute(out).await?;
        shared.refused(&response)?;
        let status = response.status();
        let is_sse = response
            .header("content-type")
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if !status.is_success() || !is_sse {
            response.discard().await;
            return Ok(Opened::NotSse(format!(
                "GET answered HTTP {} without an event stream",
                status.as_u16()
            )));
        }
        let mut events = Events::new(
            response.into_stream(),
            &shared.options.limits,
            shared.server.clone(),
        )
        .lasting();
        let mut cursor = Cursor::default();
        let first = match tokio::time::timeout(wait, events.next(&mut cursor)).await {
            Ok(first) => first?,
            Err(_) => {
                return Ok(Opened::NotSse(format!(
                    "the event stream sent no endpoint event within {} s",
                    wait.as_secs()
                )));
            }
        };
        let Some(first) = first.filter(|e| e.kind.as_deref() == Some("endpoint")) else {
            return Ok(Opened::NotSse(
                "the event stream's first event is not `endpoint`".into(),
            ));
        };
        let base = shared.wire.url();
        let post_to = base.join(first.data.trim()).map_err(|e| {
            ClientError::InvalidResponse(format!(
                "{}: the endpoint event names no usable URL ({e})",
                shared.server
            ))
        })?;
        if post_to.origin() != base.origin() {
            return Err(ClientError::InvalidResponse(format!(
                "{}: the endpoint event points to another origin ({}); messages are only posted within the server's own",
                shared.server,
                post_to.origin().ascii_serialization()
            )));
        }
        let (writer, queue) = mpsc::channel::<Vec<u8>>(256);
        let router = Router::new(writer, &shared.options.limits).notifying(shared.notes.clone());
        if let Some(handler) = shared.requests.lock().clone() {
            router.on_server_request(handler);
        }
        let ended: Arc<Mutex<Option<String>>> = Arc::default();
        tokio::spawn(post_queued(
            shared.clone(),
            post_to.clone(),
            queue,
            stop.clone(),
        ));
        tokio::spawn(read(events, cursor, router.clone(), ended.clone(), stop));
        tracing::info!(server = %shared.server, endpoint = %toolgate_protocol::redact::url(post_to.as_str()), "the server speaks the 2024-11-05 HTTP+SSE transport");
        Ok(Opened::Session(Session {
            router,
            post_to,
            ended,
        }))
    }

    /// The session's message routes.
    pub(super) fn router(&self) -> &Router {
        &self.router
    }

    fn ended(&self) -> Option<ClientError> {
        self.ended.lock().clone().map(ClientError::transport)
    }

    /// Send a request: post it; its answer arrives on the stream.
    pub(super) async fn send(
        &self,
        shared: &Shared,
        request: Outgoing,
    ) -> Result<Pending, ClientError> {
        if let Some(ended) = self.ended() {
            return Err(ended);
        }
        let rx = self.router.expect(request.id.clone());
        if let Err(e) = post(shared, &self.post_to, request.body).await {
            self.router.forget(&request.id);
            return Err(e);
        }
        Ok(Pending::stream(
            rx,
            Some(self.router.cancel_on_drop(request.id)),
        ))
    }

    /// Post a notification.
    pub(super) async fn notify(&self, shared: &Shared, body: Vec<u8>) -> Result<(), ClientError> {
        if let Some(ended) = self.ended() {
            return Err(ended);
        }
        post(shared, &self.post_to, body).await
    }
}

/// Post one message; the server answers `202 Accepted` (any success will
/// do).
async fn post(shared: &Shared, to: &url::Url, body: Vec<u8>) -> Result<(), ClientError> {
    let mut out = Outbound::new(Method::POST);
    out.set(header::CONTENT_TYPE, "application/json");
    out.body = bytes::Bytes::from(body);
    let response = shared.execute_at(out, Some(to.clone())).await?;
    shared.refused(&response)?;
    let status = response.status();
    if status.is_success() {
        response.discard().await;
        return Ok(());
    }
    let said = shared.body(response).await.unwrap_or_default();
    let shown: String = String::from_utf8_lossy(&said).chars().take(200).collect();
    Err(ClientError::transport(format!(
        "{}: a message was refused with HTTP {}: {:?}",
        shared.server,
        status.as_u16(),
        shown.trim()
    )))
}

/// Post what the router queued (answers to the server's requests,
/// cancellations), in order.
async fn post_queued(
    shared: Arc<Shared>,
    to: url::Url,
    mut queue: mpsc::Receiver<Vec<u8>>,
    stop: CancellationToken,
) {
    loop {
        let body = tokio::select! {
            _ = stop.cancelled() => return,
            next = queue.recv() => match next {
                Some(body) => body,
                None => return,
            },
        };
        if let Err(e) = post(&shared, &to, body).await {
            tracing::warn!(error = %e, "a message to the HTTP+SSE server was not delivered");
        }
    }
}

/// Read the session's stream: each `message` event to its route; when it
/// ends, so does the session.
async fn read<S, E>(
    mut events: Events<S>,
    mut cursor: Cursor,
    router: Router,
    ended: Arc<Mutex<Option<String>>>,
    stop: CancellationToken,
) where
    S: futures::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let why = loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next(&mut cursor) => next,
        };
        match next {
            Ok(Some(event)) if matches!(event.kind.as_deref(), None | Some("message")) => {
                match serde_json::from_str::<Value>(&event.data) {
                    Ok(value) => router.dispatch(value).await,
                    Err(e) => tracing::warn!(error = %e, "an event that is not JSON; ignored"),
                }
            }
            Ok(Some(event)) => {
                tracing::debug!(kind = ?event.kind, "an event of another kind; ignored")
            }
            Ok(None) => break "the server closed the HTTP+SSE session's event stream".to_owned(),
            Err(e) => break e.to_string(),
        }
    };
    *ended.lock() = Some(why.clone());
    router
        .fail_all(|| ClientError::transport(why.clone()))
        .await;
}
