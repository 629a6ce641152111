//! Streamable HTTP: each request is a POST; the answer is JSON or an SSE stream.
//!
//! With a legacy server (2025-03-26 to 2025-11-25) the transport also keeps
//! the `Mcp-Session-Id` the server assigned, answers the server's requests
//! that arrive on a response stream (elicitation, sampling, roots, ping) by
//! POSTing the response, and resumes a response stream that ends before its
//! response: after the server's `retry` delay it reconnects with `GET` and
//! `Last-Event-ID`, as those revisions specify.
//!
//! Requests travel over HTTP/1.1 connections of the transport's own,
//! kept alive and reused (see `wire.rs`): `https://` URLs are verified
//! against the platform's roots (`SSL_CERT_FILE` adds others on Linux), and
//! a proxy named by `HTTP_PROXY`, `HTTPS_PROXY` or `ALL_PROXY` is used,
//! with `NO_PROXY` honoured.

mod old_sse;
mod sse;
mod wire;

/// The SSE reader's fuzz entry point (feature `fuzzing`): not part of the API.
#[cfg(feature = "fuzzing")]
pub use sse::fuzz_events;

use std::time::Duration;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::RpcError;
use toolgate_protocol::header::{
    METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER, SESSION_HEADER, encode_header_value,
};
use toolgate_protocol::jsonrpc::{RequestId, encode_error, encode_result};
use toolgate_protocol::methods::{Discover, Method as _};

use self::sse::{Cursor, Events};
pub(crate) use self::wire::Outbound;
use self::wire::{Reply, Wire};
use super::{
    Inbound, Limits, Outgoing, Pending, Response, SendFuture, ServerRequestHandler, Transport,
    TransportKind,
};
use crate::ClientError;
use http::{Method, header};

// The protocol's headers, parsed once: every request carries some of them,
// and naming a header by `&str` parses the name each time.
const PROTOCOL_VERSION_NAME: header::HeaderName =
    header::HeaderName::from_static(PROTOCOL_VERSION_HEADER);
const METHOD_NAME: header::HeaderName = header::HeaderName::from_static(METHOD_HEADER);
const NAME_NAME: header::HeaderName = header::HeaderName::from_static(NAME_HEADER);
const SESSION_NAME: header::HeaderName = header::HeaderName::from_static(SESSION_HEADER);

/// Settings of the HTTP transport.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// `Authorization: Bearer …`.
    pub bearer_token: Option<String>,
    /// Extra headers on every request.
    pub headers: Vec<(String, String)>,
    /// How long opening a connection may take, the TLS handshake included
    /// (default 10 s).
    pub connect_timeout: Option<Duration>,
    /// Bounds on what the server can make the client hold or wait for.
    pub limits: Limits,
    /// OAuth: tokens obtained, renewed and stepped up as the server asks
    /// (instead of `bearer_token`). The `oauth` feature.
    #[cfg(feature = "oauth")]
    pub oauth: Option<crate::auth::OAuth>,
    /// Whether the URL may be a server on the deprecated 2024-11-05
    /// HTTP+SSE transport (default: detected).
    pub sse: SseMode,
}

/// Whether an endpoint may speak the deprecated HTTP+SSE transport of
/// 2024-11-05.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SseMode {
    /// Detected as the spec's backwards-compatibility section describes:
    /// when the first `POST` is answered `400`, `404` or `405` without a
    /// modern JSON-RPC error, a `GET` that opens an event stream whose
    /// first event is `endpoint` switches the transport to HTTP+SSE.
    #[default]
    Detect,
    /// The URL is such a server's event stream: HTTP+SSE from the start.
    Only,
    /// Streamable HTTP only.
    Never,
}

/// How often a legacy response stream is resumed before giving up.
const MAX_RESUMES: u32 = 5;
/// The reconnection delay when the server named none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// The Streamable HTTP transport.
pub struct HttpTransport {
    shared: Arc<Shared>,
    /// The HTTP+SSE session, once the server turned out to need one.
    old: tokio::sync::OnceCell<old_sse::Session>,
    /// Whether the URL was tried for HTTP+SSE already (it is tried once).
    probed: std::sync::atomic::AtomicBool,
    /// Stops the legacy session's standalone stream when the transport goes.
    stop: CancellationToken,
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What the transport and its stream readers share.
struct Shared {
    /// The URL as errors name the server.
    server: Arc<str>,
    /// Permits for answering the server's requests at once.
    answering: Arc<tokio::sync::Semaphore>,
    wire: Arc<Wire>,
    options: HttpOptions,
    /// This server's OAuth, when configured.
    #[cfg(feature = "oauth")]
    auth: Option<crate::auth::Session>,
    /// The legacy session, once a legacy server assigned one.
    session: Mutex<Option<String>>,
    /// Answers a legacy server's requests.
    requests: Mutex<Option<ServerRequestHandler>>,
    /// Legacy requests still waiting on a stream, by id: a server may
    /// deliver their response on the session's standalone stream instead.
    waiting: Mutex<HashMap<String, mpsc::Sender<Result<Inbound, ClientError>>>>,
    /// Notifications on the legacy session's standalone stream.
    notes: tokio::sync::broadcast::Sender<Value>,
}

/// Forgets a waiting request when its reader ends.
struct Waiting {
    shared: Arc<Shared>,
    key: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.shared.waiting.lock().remove(&self.key);
    }
}

impl HttpTransport {
    /// A transport for the MCP endpoint at `url`.
    pub fn new(url: impl Into<String>, options: HttpOptions) -> Result<Self, ClientError> {
        let url: String = url.into();
        // What errors and logs call the endpoint: its credentials masked.
        let server: Arc<str> = toolgate_protocol::redact::url(&url).into();
        #[cfg(feature = "oauth")]
        let auth = options
            .oauth
            .clone()
            .map(|o| crate::auth::Session::new(o, &url))
            .transpose()?;
        let url = url::Url::parse(&url)
            .map_err(|e| ClientError::unreachable(format!("{server}: not a URL: {e}")))?;
        let connect_timeout = options.connect_timeout.unwrap_or(Duration::from_secs(10));
        let wire = Arc::new(Wire::new(&url, server.clone(), connect_timeout)?);
        Ok(Self {
            shared: Arc::new(Shared {
                server,
                answering: Arc::new(tokio::sync::Semaphore::new(
                    options.limits.max_concurrent_server_requests,
                )),
                wire,
                options,
                #[cfg(feature = "oauth")]
                auth,
                session: Mutex::new(None),
                requests: Mutex::new(None),
                waiting: Mutex::new(HashMap::new()),
                notes: tokio::sync::broadcast::channel(64).0,
            }),
            stop: CancellationToken::new(),
            old: tokio::sync::OnceCell::new(),
            probed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The HTTP+SSE session: opened now with [`SseMode::Only`], else the
    /// one detected, if any.
    async fn old_session(&self) -> Result<Option<&old_sse::Session>, ClientError> {
        if self.shared.options.sse != SseMode::Only || self.old.initialized() {
            return Ok(self.old.get());
        }
        // Boxed: opening a session is a large future, needed once, that
        // every request's future would otherwise carry (and copy).
        Box::pin(self.old.get_or_try_init(|| async {
            match self.open_old().await? {
                old_sse::Opened::Session(session) => Ok(session),
                old_sse::Opened::NotSse(why) => Err(ClientError::unreachable(format!(
                    "{} is not an HTTP+SSE (2024-11-05) endpoint: {why}",
                    self.shared.server
                ))),
            }
        }))
        .await
        .map(Some)
    }

    async fn open_old(&self) -> Result<old_sse::Opened, ClientError> {
        let wait = self
            .shared
            .options
            .connect_timeout
            .unwrap_or(Duration::from_secs(10));
        old_sse::Session::open(&self.shared, wait, self.stop.child_token()).await
    }

    /// After a first `POST` answered `status` with `body`: whether the
    /// server is an HTTP+SSE one (then the session is open).
    async fn detect_old(&self, status: http::StatusCode, body: &[u8]) -> Option<&old_sse::Session> {
        let may_be_old = self.shared.options.sse == SseMode::Detect
            && matches!(status.as_u16(), 400 | 404 | 405)
            && self.shared.session().is_none()
            && !is_modern_refusal(body);
        if !may_be_old || self.probed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return self.old.get();
        }
        // Boxed, as in `old_session`: a probe happens at most once.
        match Box::pin(self.open_old()).await {
            Ok(old_sse::Opened::Session(session)) => {
                let _ = self.old.set(session);
            }
            Ok(old_sse::Opened::NotSse(why)) => {
                tracing::debug!(server = %self.shared.server, %why, "not an HTTP+SSE server either");
            }
            Err(e) => {
                tracing::debug!(server = %self.shared.server, error = %e, "not an HTTP+SSE server either");
            }
        }
        self.old.get()
    }
}

/// A request with its own token, to an HTTP+SSE server (whose session
/// carries the transport's credentials only).
fn per_call_refused(server: &str) -> ClientError {
    ClientError::Authorization(format!(
        "{server} speaks the HTTP+SSE transport of 2024-11-05, whose session cannot carry a token per request"
    ))
}

/// Whether `body` is a JSON-RPC error a modern server sends (unsupported
/// version, unknown method, a header that does not match): then the
/// endpoint is no HTTP+SSE server.
fn is_modern_refusal(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| serde_json::from_value::<RpcError>(v.get("error")?.clone()).ok())
        .is_some_and(|e| {
            e.is_modern_protocol_error() || e.code == toolgate_protocol::codes::METHOD_NOT_FOUND
        })
}

impl Transport for HttpTransport {
    fn kind(&self) -> TransportKind {
        if self.old.initialized() || self.shared.options.sse == SseMode::Only {
            TransportKind::Sse
        } else {
            TransportKind::Http
        }
    }

    fn on_server_request(&self, handler: ServerRequestHandler) {
        if let Some(session) = self.old.get() {
            session.router().on_server_request(handler.clone());
        }
        *self.shared.requests.lock() = Some(handler);
    }

    fn server_requests_answered(&self) -> super::NotifyFuture<'_> {
        Box::pin(async move {
            match self.old.get() {
                Some(session) => session.router().server_requests_answered().await,
                None => Ok(()),
            }
        })
    }

    fn session_notifications(&self) -> Option<tokio::sync::broadcast::Receiver<Value>> {
        Some(self.shared.notes.subscribe())
    }

    fn legacy_session_started(&self, version: &str) -> super::NotifyFuture<'_> {
        // An HTTP+SSE session's stream is open already.
        if self.old.initialized() {
            return Box::pin(async { Ok(()) });
        }
        let (opened, ready) = tokio::sync::oneshot::channel();
        tokio::spawn(standalone(
            self.shared.clone(),
            version.to_owned(),
            self.stop.clone(),
            opened,
        ));
        Box::pin(async move {
            // Wait until the server answered the GET, so the stream is in
            // place before the first request can need it; a server that
            // never answers only costs this bounded wait.
            let _ = tokio::time::timeout(Duration::from_secs(5), ready).await;
            Ok(())
        })
    }

    fn auth_scope(&self) -> String {
        #[cfg(feature = "oauth")]
        if let Some(auth) = &self.shared.auth {
            return auth.scope_id();
        }
        // Never keep the token itself around in cache keys.
        self.shared
            .options
            .bearer_token
            .as_ref()
            .map_or_else(String::new, |t| {
                let digest = Sha256::digest(t.as_bytes());
                digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
            })
    }

    fn notify(&self, body: Vec<u8>, legacy: Option<String>) -> super::NotifyFuture<'_> {
        Box::pin(async move {
            if let Some(session) = self.old_session().await? {
                return Box::pin(session.notify(&self.shared, body)).await;
            }
            self.shared.post_message(body, legacy.as_deref()).await
        })
    }

    fn send(&self, mut request: Outgoing) -> SendFuture<'_> {
        Box::pin(async move {
            if let Some(session) = self.old_session().await? {
                // The HTTP+SSE session posts with the transport's own
                // credentials: a request meant to carry another's token
                // must not go out as the transport's.
                if request.bearer.is_some() {
                    return Err(per_call_refused(&self.shared.server));
                }
                return Box::pin(session.send(&self.shared, request)).await;
            }
            let version = request
                .legacy
                .clone()
                .unwrap_or_else(|| request.version.clone());
            let shared = &self.shared;
            let name = request.name.as_deref().map(encode_header_value);
            let session = request.legacy.as_ref().and_then(|_| shared.session());
            let body = bytes::Bytes::from(std::mem::take(&mut request.body));
            // Built for each attempt (almost always one) rather than built
            // once and copied for each.
            let build = || {
                let mut out = Outbound::new(Method::POST);
                out.set(header::CONTENT_TYPE, "application/json");
                out.set(header::ACCEPT, "application/json, text/event-stream");
                out.add_named(PROTOCOL_VERSION_NAME, &version)?;
                out.add_named(METHOD_NAME, &request.method)?;
                if let Some(session) = &session {
                    out.add_named(SESSION_NAME, session)?;
                }
                if let Some(name) = &name {
                    out.add_named(NAME_NAME, name)?;
                }
                for (k, v) in request.headers.iter() {
                    out.add(k, v)?;
                }
                out.body = body.clone();
                Ok(out)
            };
            let response = match &request.bearer {
                Some(bearer) => shared.execute_as(build, bearer).await?,
                None => shared.execute_built(build, None).await?,
            };
            let status = response.status();
            shared.refused(&response)?;
            if let Some(session) = response.header(SESSION_HEADER) {
                *shared.session.lock() = Some(session.to_owned());
            }
            let is_sse = response
                .header("content-type")
                .is_some_and(|ct| ct.starts_with("text/event-stream"));
            if is_sse {
                let (tx, rx) = mpsc::channel(64);
                let waiting = request.legacy.as_ref().map(|_| {
                    let key = request.id.to_string();
                    shared.waiting.lock().insert(key.clone(), tx.clone());
                    Waiting {
                        shared: shared.clone(),
                        key,
                    }
                });
                let related = request.id.to_string();
                let task = tokio::spawn(pump(
                    shared.clone(),
                    response,
                    tx,
                    request.legacy,
                    waiting,
                    related,
                ));
                return Ok(Pending::stream(rx, Some(Box::new(move || task.abort()))));
            }
            let bytes = shared.body(response).await?;
            if let Some(session) = self.detect_old(status, &bytes).await {
                // Such a server knows only the initialize handshake, and
                // some never answer a method they do not know: say so here
                // rather than wait for it.
                if request.method == Discover::NAME {
                    let refusal = RpcError::method_not_found(&request.method);
                    let value = serde_json::from_slice(&encode_error(Some(&request.id), &refusal))
                        .unwrap_or(Value::Null);
                    return Ok(Pending::answered(Ok(Inbound::Response(
                        Response::from_value(value),
                    ))));
                }
                if request.bearer.is_some() {
                    return Err(per_call_refused(&shared.server));
                }
                request.body = body.to_vec();
                return Box::pin(session.send(shared, request)).await;
            }
            // Read when the caller reads it, typed if the caller is.
            if status.is_success() {
                return Ok(Pending::answered(Ok(Inbound::Response(
                    Response::from_http(status, bytes),
                ))));
            }
            let value: Value = serde_json::from_slice(&bytes).map_err(|_| {
                let shown: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
                ClientError::transport(format!("HTTP {status}: {shown:?}"))
            })?;
            Ok(Pending::answered(Ok(Inbound::Response(
                Response::from_value(value),
            ))))
        })
    }
}

impl Shared {
    fn session(&self) -> Option<String> {
        self.session.lock().clone()
    }

    /// Headers every request carries: the configured extras and the
    /// static token (OAuth adds its own in [`Shared::execute`]).
    fn common(&self, out: &mut Outbound) -> Result<(), ClientError> {
        for (k, v) in &self.options.headers {
            out.add(k, v)?;
        }
        if let Some(token) = self
            .options
            .bearer_token
            .as_ref()
            .filter(|_| !self.has_oauth())
        {
            out.add("authorization", &format!("Bearer {token}"))?;
        }
        Ok(())
    }

    /// Send what `build` makes with `bearer` as its only credentials (the
    /// transport's own token and OAuth stay out of it), following the
    /// redirects [`Wire::redirect`] allows. A `401` or `403` is returned
    /// as it came: the token is the caller's, so is the refusal.
    async fn execute_as<F>(&self, build: F, bearer: &super::Bearer) -> Result<Reply, ClientError>
    where
        F: Fn() -> Result<Outbound, ClientError> + Send + Sync,
    {
        let mut location: Option<url::Url> = None;
        let mut hops = 0;
        loop {
            let mut this = build()?;
            for (k, v) in &self.options.headers {
                if !k.eq_ignore_ascii_case("authorization") {
                    this.add(k, v)?;
                }
            }
            this.add("authorization", &format!("Bearer {}", bearer.expose()))?;
            let method = this.method.clone();
            let response = self.wire.send(this, location.as_ref()).await?;
            match self
                .wire
                .redirect(&response, &method, location.as_ref(), hops)?
            {
                Some(next) => {
                    response.discard().await;
                    location = Some(next);
                    hops += 1;
                }
                None => return Ok(response),
            }
        }
    }

    /// Whether OAuth supplies this transport's tokens.
    fn has_oauth(&self) -> bool {
        #[cfg(feature = "oauth")]
        return self.auth.is_some();
        #[cfg(not(feature = "oauth"))]
        return false;
    }

    /// Send `out` with the headers every request carries, following the
    /// redirects [`Wire::redirect`] allows. With OAuth, each request carries
    /// the current token (and a DPoP proof for the URL it goes to), and a
    /// `401` or `403` is answered by authorizing and sending again, a
    /// bounded number of times.
    fn execute(
        &self,
        out: Outbound,
    ) -> impl Future<Output = Result<Reply, ClientError>> + Send + '_ {
        self.execute_at(out, None)
    }

    /// [`Shared::execute`], to `at` (within the endpoint's origin) rather
    /// than the endpoint.
    async fn execute_at(&self, out: Outbound, at: Option<url::Url>) -> Result<Reply, ClientError> {
        self.execute_built(|| Ok(out.clone()), at).await
    }

    /// [`Shared::execute_at`] with the request made by `build`, once for
    /// each attempt (a redirect or a renewed authorization sends it again).
    async fn execute_built<F>(&self, build: F, at: Option<url::Url>) -> Result<Reply, ClientError>
    where
        F: Fn() -> Result<Outbound, ClientError> + Send + Sync,
    {
        #[cfg(feature = "oauth")]
        let mut attempt = crate::auth::Attempt::default();
        let mut location: Option<url::Url> = at;
        let mut hops = 0;
        loop {
            let mut this = build()?;
            self.common(&mut this)?;
            let method = this.method.clone();
            #[cfg(feature = "oauth")]
            let presented = match &self.auth {
                Some(auth) => {
                    // Boxed (here and below) so that a call without OAuth
                    // does not carry the size of its futures.
                    let presented = Box::pin(auth.presented()).await?;
                    let url = location.as_ref().unwrap_or(self.wire.url());
                    auth.apply(&mut this, presented.as_ref(), url)?;
                    presented
                }
                None => None,
            };
            let response = self.wire.send(this, location.as_ref()).await?;
            if let Some(next) = self
                .wire
                .redirect(&response, &method, location.as_ref(), hops)?
            {
                response.discard().await;
                location = Some(next);
                hops += 1;
                continue;
            }
            #[cfg(not(feature = "oauth"))]
            return Ok(response);
            #[cfg(feature = "oauth")]
            {
                let Some(auth) = &self.auth else {
                    return Ok(response);
                };
                let verdict = Box::pin(auth.judge(
                    response.status(),
                    response.headers(),
                    presented.as_ref(),
                    &mut attempt,
                ))
                .await?;
                if matches!(verdict, crate::auth::Verdict::Use) {
                    return Ok(response);
                }
            }
        }
    }

    /// A `401` or `403` that reached the caller, as the error it is.
    fn refused(&self, response: &Reply) -> Result<(), ClientError> {
        let status = response.status().as_u16();
        if status != 401 && status != 403 {
            return Ok(());
        }
        #[cfg(feature = "oauth")]
        let error = {
            let (_, challenge) = crate::auth::challenges_in(response.headers());
            challenge
                .error()
                .map(str::to_owned)
                .map(|e| format!(": {}", crate::auth::shown(&e)))
                .unwrap_or_default()
        };
        #[cfg(not(feature = "oauth"))]
        let error = String::new();
        Err(if status == 401 {
            ClientError::LoginRequired(format!(
                "{} requires authorization (HTTP 401{error})",
                self.server
            ))
        } else {
            ClientError::Authorization(format!(
                "{} refused the request (HTTP 403{error})",
                self.server
            ))
        })
    }

    /// The legacy session's headers: the negotiated version and the session id.
    fn in_session(&self, out: &mut Outbound, legacy: Option<&str>) -> Result<(), ClientError> {
        if let Some(version) = legacy {
            out.add_named(PROTOCOL_VERSION_NAME, version)?;
        }
        if let Some(session) = self.session() {
            out.add_named(SESSION_NAME, &session)?;
        }
        Ok(())
    }

    fn over(&self, limit: &'static str, detail: String) -> ClientError {
        ClientError::LimitExceeded {
            server: self.server.to_string(),
            limit,
            detail,
        }
    }

    /// A JSON response body, read up to [`Limits::max_message_bytes`]: a
    /// declared length over it is refused before reading, and reading stops
    /// as soon as the body grows past it.
    async fn body(&self, mut response: Reply) -> Result<Vec<u8>, ClientError> {
        let cap = self.options.limits.max_message_bytes;
        let too_big = || {
            self.over(
                "max_message_bytes",
                format!("a response body larger than {cap} bytes"),
            )
        };
        let declared = response.content_length();
        if declared.is_some_and(|n| n > cap as u64) {
            return Err(too_big());
        }
        let mut body = Vec::with_capacity(declared.map_or(0, |n| n as usize));
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            ClientError::transport_because(format!("reading from {}", self.server), e)
        })? {
            if body.len() + chunk.len() > cap {
                return Err(too_big());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// POST a notification or a response (legacy sessions): the server
    /// answers `202` with no body.
    async fn post_message(&self, body: Vec<u8>, legacy: Option<&str>) -> Result<(), ClientError> {
        let mut out = Outbound::new(Method::POST);
        out.set(header::CONTENT_TYPE, "application/json");
        out.set(header::ACCEPT, "application/json, text/event-stream");
        self.in_session(&mut out, legacy)?;
        out.body = bytes::Bytes::from(body);
        let response = self.execute(out).await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(ClientError::transport(format!(
                "a message was refused with HTTP {}",
                response.status()
            )))
        }
    }

    /// Open (or, after `last_id`, resume) a legacy session's stream.
    async fn resume(
        &self,
        last_id: Option<&str>,
        legacy: Option<&str>,
    ) -> Result<Reply, ClientError> {
        let mut out = Outbound::new(Method::GET);
        out.set(header::ACCEPT, "text/event-stream");
        if let Some(last_id) = last_id {
            out.add("last-event-id", last_id)?;
        }
        self.in_session(&mut out, legacy)?;
        let response = self.execute(out).await?;
        if !response.status().is_success() {
            return Err(ClientError::transport(format!(
                "resuming the event stream was refused with HTTP {}",
                response.status()
            )));
        }
        Ok(response)
    }

    /// A response that arrived on the standalone stream: hand it to the
    /// request waiting for it, if any.
    async fn deliver_stray(&self, response: Value) {
        let key = serde_json::from_value::<RequestId>(response["id"].clone())
            .map(|id| id.to_string())
            .ok();
        let waiter = key.and_then(|k| self.waiting.lock().get(&k).cloned());
        match waiter {
            Some(tx) => {
                let _ = tx
                    .send(Ok(Inbound::Response(Response::from_value(response))))
                    .await;
            }
            None => tracing::debug!("a response nobody waits for on the standalone stream"),
        }
    }

    /// Answer a server's request that arrived on a stream, in the
    /// background; over [`Limits::max_concurrent_server_requests`] the
    /// request is refused at once, and the stream waits for that refusal to
    /// be delivered (so a flood slows the server, not this client).
    async fn answer(
        self: &Arc<Self>,
        request: Value,
        legacy: Option<String>,
        related: Option<String>,
    ) {
        let Ok(id) = serde_json::from_value::<RequestId>(request["id"].clone()) else {
            return;
        };
        let Ok(permit) = self.answering.clone().try_acquire_owned() else {
            let limit = self.options.limits.max_concurrent_server_requests;
            let body = encode_error(Some(&id), &crate::transport::busy(limit));
            if let Err(e) = self.post_message(body, legacy.as_deref()).await {
                tracing::warn!(error = %e, "could not refuse a server request");
            }
            return;
        };
        let shared = self.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let method = request["method"].as_str().unwrap_or_default().to_owned();
            let params = request.get("params").cloned().unwrap_or(Value::Null);
            let handler = shared.requests.lock().clone();
            let outcome = match handler {
                Some(handler) => handler(method.clone(), params, related).await,
                None => Err(RpcError::method_not_found(&method)),
            };
            let body = match outcome {
                Ok(result) => encode_result(&id, &result),
                Err(error) => encode_error(Some(&id), &error),
            };
            if let Err(e) = shared.post_message(body, legacy.as_deref()).await {
                tracing::warn!(%method, error = %e, "could not deliver the answer to a server request");
            }
        });
    }
}

/// What one event carried.
enum Message {
    Request(Value),
    Notification(Value),
    Response(Value),
}

fn classify(data: &str) -> Result<Message, ClientError> {
    let value: Value = serde_json::from_str(data)
        .map_err(|e| ClientError::InvalidResponse(format!("an event is not JSON: {e}")))?;
    Ok(
        match (value.get("method").is_some(), value.get("id").is_some()) {
            (true, true) => Message::Request(value),
            (true, false) => Message::Notification(value),
            _ => Message::Response(value),
        },
    )
}

/// Read a response stream to its response, answering server requests on
/// the way and resuming a legacy stream that ends early.
async fn pump(
    shared: Arc<Shared>,
    response: Reply,
    tx: mpsc::Sender<Result<Inbound, ClientError>>,
    legacy: Option<String>,
    _waiting: Option<Waiting>,
    related: String,
) {
    let mut cursor = Cursor::default();
    let mut response = response;
    let mut resumed = 0;
    loop {
        let mut events = Events::new(
            response.into_stream(),
            &shared.options.limits,
            shared.server.clone(),
        );
        let broke = loop {
            match events.next(&mut cursor).await {
                Ok(Some(event)) => match classify(&event.data) {
                    Ok(Message::Request(request)) => {
                        shared
                            .answer(request, legacy.clone(), Some(related.clone()))
                            .await
                    }
                    Ok(Message::Notification(n)) => {
                        if tx.send(Ok(Inbound::Notification(n))).await.is_err() {
                            return;
                        }
                    }
                    Ok(Message::Response(r)) => {
                        let _ = tx
                            .send(Ok(Inbound::Response(Response::from_value(r))))
                            .await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                },
                Ok(None) => break None,
                Err(ClientError::Transport { message, .. }) => break Some(message),
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        };
        // The stream ended before the response. A legacy server that gave
        // event ids promised the rest on a resumed stream.
        let resumable = legacy.is_some() && resumed < MAX_RESUMES;
        let Some(last_id) = cursor.last_id.clone().filter(|_| resumable) else {
            let why = broke.unwrap_or_else(|| "the event stream ended before the response".into());
            let _ = tx.send(Err(ClientError::transport(why))).await;
            return;
        };
        resumed += 1;
        let delay = cursor.retry.unwrap_or(DEFAULT_RETRY);
        tracing::debug!(%last_id, ?delay, "resuming the response stream");
        tokio::time::sleep(delay).await;
        match shared.resume(Some(&last_id), legacy.as_deref()).await {
            Ok(next) => response = next,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        }
    }
}

/// A legacy session's standalone stream (`GET`): server requests that
/// belong to no client request arrive here. A server without one answers
/// `405`, which ends this quietly; a dropped stream is resumed.
async fn standalone(
    shared: Arc<Shared>,
    version: String,
    stop: CancellationToken,
    opened: tokio::sync::oneshot::Sender<()>,
) {
    let mut signal = Some(opened);
    let mut cursor = Cursor::default();
    let mut failures = 0;
    while failures < MAX_RESUMES {
        let opened = tokio::select! {
            _ = stop.cancelled() => return,
            response = shared.resume(cursor.last_id.as_deref(), Some(&version)) => response,
        };
        if let Some(signal) = signal.take() {
            let _ = signal.send(());
        }
        let response = match opened {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "no standalone stream from the legacy server");
                return;
            }
        };
        let mut events = Events::new(
            response.into_stream(),
            &shared.options.limits,
            shared.server.clone(),
        );
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return,
                next = events.next(&mut cursor) => next,
            };
            match next {
                Ok(Some(event)) => {
                    failures = 0;
                    match classify(&event.data) {
                        Ok(Message::Request(request)) => {
                            shared.answer(request, Some(version.clone()), None).await
                        }
                        Ok(Message::Notification(n)) => {
                            tracing::debug!(method = ?n.get("method"), "server notification");
                            let _ = shared.notes.send(n);
                        }
                        Ok(Message::Response(response)) => shared.deliver_stray(response).await,
                        Err(_) => {}
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        failures += 1;
        let delay = cursor.retry.unwrap_or(DEFAULT_RETRY);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}
