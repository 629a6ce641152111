//! The endpoint's request handler.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request as HttpRequest;
use axum::response::Response;
use futures::StreamExt as _;
use futures::stream::Stream;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt as _;
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::{Incoming, encode_error, parse_message};

use super::checks::{
    check_accept, check_content_type, check_host, check_mirrored_headers, check_origin,
};
use super::{HttpConfig, legacy};
use crate::auth::Refusal;
use crate::dispatch::{TransportContext, http_status_for};
use crate::exchange::{Frame, Reply};
use crate::legacy::Sessions;
use crate::{AuthContext, ResourceServer, Server};

/// What every request to the endpoint shares.
pub(super) struct Shared {
    pub(super) server: Server,
    pub(super) config: HttpConfig,
    /// Legacy sessions (empty unless the server serves legacy clients).
    pub(super) sessions: Sessions,
    /// Permits for requests being handled ([`HttpConfig::max_in_flight`]).
    pub(super) in_flight: Arc<tokio::sync::Semaphore>,
}

#[derive(Clone)]
pub(super) struct State(Arc<Shared>);

impl State {
    /// The state of one endpoint of those on a listener, which share
    /// `in_flight`.
    pub(super) fn sharing(
        server: Server,
        config: HttpConfig,
        in_flight: Arc<tokio::sync::Semaphore>,
    ) -> Self {
        let c = server.config();
        let sessions = Sessions::new(
            c.legacy_idle,
            c.max_legacy_sessions,
            c.max_legacy_sessions_per_principal,
        );
        Self(Arc::new(Shared {
            server,
            config,
            sessions,
            in_flight,
        }))
    }
}

impl State {
    /// The server it serves.
    pub(super) fn server(&self) -> &Server {
        &self.0.server
    }

    /// The endpoint's token verifier, if any.
    pub(super) fn auth(&self) -> Option<Arc<ResourceServer>> {
        self.0.config.auth.clone()
    }

    /// Whether this endpoint's metadata document is served at `path`.
    pub(super) fn serves_metadata_at(&self, path: &str) -> bool {
        self.0.config.auth.as_ref().is_some_and(|auth| {
            auth.serves_metadata_at(path) && path != "/.well-known/oauth-protected-resource"
        })
    }
}

/// Frames on their way into an SSE body.
pub(super) type FrameSource = Pin<Box<dyn Stream<Item = Frame> + Send>>;

pub(super) fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A transport-level refusal, with a JSON-RPC error body that has no id.
pub(super) fn refuse(status: StatusCode, code: i64, message: String) -> Response {
    json_response(status, encode_error(None, &RpcError::new(code, message)))
}

fn frame_response(frame: Frame, auth: Option<&ResourceServer>) -> Response {
    match frame {
        Frame::Response { body, error_code } => {
            let status =
                StatusCode::from_u16(http_status_for(error_code)).unwrap_or(StatusCode::OK);
            let step_up = match (error_code, auth) {
                (Some(crate::INSUFFICIENT_SCOPE), Some(auth)) => {
                    Some(auth.step_up(&needed_scopes(&body)))
                }
                _ => None,
            };
            let mut response = json_response(status, body);
            if let Some(challenge) = step_up.and_then(|c| HeaderValue::from_str(&c).ok()) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, challenge);
            }
            response
        }
        Frame::Notification(body) => json_response(StatusCode::OK, body),
    }
}

/// The scopes an `INSUFFICIENT_SCOPE` error names (in its `data`).
fn needed_scopes(body: &[u8]) -> Vec<String> {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/data/requiredScopes").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// A `401` (or `503` when tokens cannot be checked now) with its challenge.
fn unauthorized(auth: &ResourceServer, refusal: &Refusal) -> Response {
    let (status, message) = match refusal {
        Refusal::Unavailable(why) => {
            tracing::error!(error = %why, "access tokens cannot be checked");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the server cannot check access tokens right now; try again later",
            )
        }
        Refusal::Missing => (
            StatusCode::UNAUTHORIZED,
            "authorization required: send an access token for this resource as Authorization: Bearer",
        ),
        Refusal::Invalid(why) => {
            // Why, for the operator; never the token itself.
            tracing::info!(reason = %why, "access token refused");
            (
                StatusCode::UNAUTHORIZED,
                "the access token is missing, malformed, expired or not for this resource",
            )
        }
    };
    let mut response = refuse(
        status,
        toolgate_protocol::codes::INVALID_REQUEST,
        message.into(),
    );
    if status == StatusCode::UNAUTHORIZED
        && let Ok(challenge) = HeaderValue::from_str(&auth.challenge(refusal))
    {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

/// The Protected Resource Metadata document (see [`super::router`]).
pub(super) async fn metadata(axum::extract::State(state): axum::extract::State<State>) -> Response {
    match &state.0.config.auth {
        Some(auth) => json_response(StatusCode::OK, auth.metadata()),
        None => not_found(),
    }
}

/// A request to a path other than the endpoint's: the metadata document
/// when authentication is on and it is asked for, the extra routes of
/// [`HttpConfig::routes`], else `404`.
pub(super) async fn other_path<B>(state: &State, request: http::Request<B>) -> Response
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let config = &state.0.config;
    match &config.auth {
        Some(auth)
            if request.method() == Method::GET && auth.serves_metadata_at(request.uri().path()) =>
        {
            return json_response(StatusCode::OK, auth.metadata());
        }
        _ => {}
    }
    match &config.routes {
        Some(routes) => {
            use tower::ServiceExt as _;
            let request = request.map(axum::body::Body::new);
            match routes.clone().oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
        None => not_found(),
    }
}

/// The endpoint as an axum handler (see [`super::router`]).
pub(super) async fn handle(
    axum::extract::State(state): axum::extract::State<State>,
    request: HttpRequest,
) -> Response {
    serve(&state, request).await
}

/// Serve one HTTP request to the MCP endpoint, whatever its body type.
pub(super) async fn serve<B>(state: &State, request: http::Request<B>) -> Response
where
    B: HttpBody<Data = Bytes> + Send,
{
    let shared = &*state.0;
    let (server, config) = (&shared.server, &shared.config);
    let (parts, body) = request.into_parts();

    let forbidden = |m: String| {
        refuse(
            StatusCode::FORBIDDEN,
            toolgate_protocol::codes::INVALID_REQUEST,
            m,
        )
    };
    if let Err(m) = check_origin(&parts.headers, &config.origins) {
        return forbidden(m);
    }
    if let Err(m) = check_host(&parts.headers, &parts.uri, config.hosts.as_deref()) {
        return forbidden(m);
    }
    let auth = match &config.auth {
        Some(resource) => match resource.authenticate(&parts.headers).await {
            Ok(auth) => Some(auth),
            Err(refusal) => return unauthorized(resource, &refusal),
        },
        None => parts.extensions.get::<AuthContext>().cloned(),
    };
    if server.serves_legacy() {
        // A legacy session's stream and its ending; without a session
        // header these methods are refused like on a modern-only server.
        let legacy = match parts.method {
            Method::GET => {
                legacy::open_stream(shared, &parts.headers, auth.as_ref(), config.keep_alive)
            }
            Method::DELETE => legacy::end_session(shared, &parts.headers, auth.as_ref()),
            _ => None,
        };
        if let Some(response) = legacy {
            return response;
        }
    }
    if parts.method != Method::POST {
        let mut response = refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            toolgate_protocol::codes::INVALID_REQUEST,
            format!(
                "{} is not supported; send each JSON-RPC message as a POST",
                parts.method
            ),
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    if let Err(m) = check_content_type(&parts.headers) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            toolgate_protocol::codes::INVALID_REQUEST,
            m,
        );
    }
    if let Err(m) = check_accept(&parts.headers) {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            toolgate_protocol::codes::INVALID_REQUEST,
            m,
        );
    }

    let bytes: Bytes =
        match crate::time_limit::within(config.body_timeout, read_body(body, config.body_limit))
            .await
        {
            Err(_) => {
                return refuse(
                    StatusCode::REQUEST_TIMEOUT,
                    toolgate_protocol::codes::INVALID_REQUEST,
                    format!(
                        "the request body did not arrive within {:?}",
                        config.body_timeout
                    ),
                );
            }
            Ok(Err(BodyError::TooLarge)) => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    toolgate_protocol::codes::INVALID_REQUEST,
                    format!(
                        "the request body exceeds the limit of {} bytes",
                        config.body_limit
                    ),
                );
            }
            Ok(Err(BodyError::Broken)) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    toolgate_protocol::codes::INVALID_REQUEST,
                    "the request body could not be read".into(),
                );
            }
            Ok(Ok(bytes)) => bytes,
        };

    let mut incoming = parse_message(&bytes);
    if server.serves_legacy()
        && let Ok(message) = incoming
    {
        match legacy::route(shared, &parts.headers, auth.clone(), message).await {
            legacy::Routed::Done(response) => return response,
            legacy::Routed::Modern(message) => incoming = Ok(message),
        }
    }
    let headers = Arc::new(parts.headers);
    let transport = TransportContext {
        auth,
        stream_per_request: true,
        http_headers: Some(headers.clone()),
    };
    let req = match incoming {
        Ok(Incoming::Request(req)) => req,
        Ok(Incoming::Notification(n)) => {
            // Cancellation on HTTP is closing the stream; other client
            // notifications carry nothing for a stateless server.
            let _ = server.classify_notification(&n);
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::ACCEPTED;
            return response;
        }
        Ok(Incoming::Response(r)) => {
            let error = RpcError::invalid_request("servers do not accept JSON-RPC responses");
            return json_response(StatusCode::BAD_REQUEST, encode_error(r.id.as_ref(), &error));
        }
        Err(rejected) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                encode_error(rejected.id.as_ref(), &rejected.error),
            );
        }
    };

    let long_lived = req.method == "subscriptions/listen";
    // Held until the response (or its stream) ends.
    let permit = if long_lived {
        None
    } else {
        match shared.in_flight.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                let mut response = refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    toolgate_protocol::codes::INTERNAL_ERROR,
                    format!(
                        "the server is handling {} requests already; retry shortly",
                        config.max_in_flight
                    ),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                return response;
            }
        }
    };
    let check = move |r: &_, m: &_| check_mirrored_headers(&headers, r, m);
    match server.handle_request(req, &transport, Some(&check)) {
        Reply::Nothing => StatusCode::ACCEPTED.into_response_empty(),
        Reply::Done(frame) => frame_response(frame, config.auth.as_deref()),
        Reply::Streaming(mut exchange) => {
            if long_lived {
                return sse_response(Box::pin(exchange), None, Some(config.keep_alive));
            }
            // JSON unless a notification comes before the final response.
            match exchange.next().await {
                Some(frame @ Frame::Response { .. }) => {
                    frame_response(frame, config.auth.as_deref())
                }
                Some(first @ Frame::Notification(_)) => {
                    // One box: the exchange is a stream itself.
                    let frames = exchange.map(move |frame| {
                        let _held = &permit;
                        frame
                    });
                    sse_response(Box::pin(frames), Some(first), None)
                }
                None => {
                    tracing::error!("a request ended without a response");
                    frame_response(
                        crate::dispatch::error_frame(None, RpcError::internal()),
                        None,
                    )
                }
            }
        }
    }
}

enum BodyError {
    TooLarge,
    Broken,
}

/// Read a whole body, refusing more than `limit` bytes. A body that arrives
/// in one frame (the usual case) is handed over without a copy.
async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, BodyError>
where
    B: HttpBody<Data = Bytes>,
{
    if body.size_hint().upper().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut more: Option<bytes::BytesMut> = None;
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| BodyError::Broken)?.into_data() else {
            continue;
        };
        total += data.len();
        if total > limit {
            return Err(BodyError::TooLarge);
        }
        match (&mut first, &mut more) {
            (None, _) => first = Some(data),
            (Some(head), None) => {
                let mut joined = bytes::BytesMut::with_capacity(total);
                joined.extend_from_slice(head);
                joined.extend_from_slice(&data);
                more = Some(joined);
            }
            (Some(_), Some(joined)) => joined.extend_from_slice(&data),
        }
    }
    Ok(match (first, more) {
        (_, Some(joined)) => joined.freeze(),
        (Some(one), None) => one,
        (None, None) => Bytes::new(),
    })
}

/// Any path but the endpoint's.
pub(super) fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response_empty()
}

trait EmptyResponse {
    fn into_response_empty(self) -> Response;
}

impl EmptyResponse for StatusCode {
    fn into_response_empty(self) -> Response {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = self;
        response
    }
}

pub(super) fn sse_event(bytes: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(bytes.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend_from_slice(bytes);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// An SSE response carrying `first` (if any) and then every frame of the
/// exchange. Dropping the body (client gone) drops the exchange, which
/// cancels the work.
pub(super) fn sse_response(
    exchange: FrameSource,
    first: Option<Frame>,
    keep_alive: Option<Duration>,
) -> Response {
    let body = Body::from_stream(frames(exchange, first, keep_alive));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn frames(exchange: FrameSource, first: Option<Frame>, keep_alive: Option<Duration>) -> SseFrames {
    let ticker = keep_alive.map(|period| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    SseFrames {
        exchange,
        first,
        ticker,
        done: false,
    }
}

/// The events of an SSE body: a hand-written stream rather than an
/// `unfold`, which would keep a second copy of this state in its waiting
/// future for every open stream.
struct SseFrames {
    exchange: FrameSource,
    first: Option<Frame>,
    ticker: Option<tokio::time::Interval>,
    /// The final response went out: nothing follows it.
    done: bool,
}

impl Stream for SseFrames {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let frame = match this.first.take() {
            Some(frame) => frame,
            None => match this.exchange.as_mut().poll_next(cx) {
                Poll::Ready(Some(frame)) => frame,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {
                    return match this.ticker.as_mut().map(|t| t.poll_tick(cx)) {
                        // Keep-alive: an SSE comment.
                        Some(Poll::Ready(_)) => {
                            Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))))
                        }
                        _ => Poll::Pending,
                    };
                }
            },
        };
        this.done = frame.is_final();
        Poll::Ready(Some(Ok(sse_event(frame.bytes()))))
    }
}
