//! The Streamable HTTP transport (revision 2026-07-28).
//!
//! One endpoint accepts `POST`; every other method gets `405` (except, on a
//! dual-era server, `GET` and `DELETE` of a legacy session, see below). Before the
//! body is looked at, the request must come from an allowed `Origin` and
//! `Host` (DNS-rebinding protection: `403`), declare a JSON body (`415`),
//! accept both JSON and SSE (`406`), and fit the body limit (`413`) within the
//! body timeout (`408`). The mirrored headers (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`) are compared with the body during dispatch
//! (`400` with `-32020`).
//!
//! Responses are JSON unless the handler sends a notification first
//! (progress, logging) — then the response switches to an SSE stream that
//! ends with the final response. `subscriptions/listen` is always a stream,
//! with keep-alive comments. Closing a stream cancels its request.
//! Legacy clients (2025-03-26 to 2025-11-25) open a session with
//! `initialize` and carry its `Mcp-Session-Id`; requests with the modern
//! `_meta` are always served statelessly on the same endpoint.
//! Every accepted socket has `TCP_NODELAY` set: with Nagle's algorithm and
//! delayed ACKs, small responses otherwise wait tens of milliseconds.
//!
//! ```no_run
//! # async fn run(server: toolgate_server::Server) -> std::io::Result<()> {
//! use toolgate_server::transport::http::{HttpConfig, serve_http};
//! serve_http(server, HttpConfig::default()).await
//! # }
//! ```

mod checks;
mod handler;
mod head_timer;
mod idle;
mod legacy;
mod mounts;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

pub use checks::OriginPolicy;
pub use legacy::SESSION_HEADER;
pub use mounts::{Mount, Mounts};

use crate::Server;

/// Settings of the HTTP transport.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Where to listen. Default `127.0.0.1:3000`: local servers should not
    /// listen on every interface.
    pub bind: SocketAddr,
    /// Path of the MCP endpoint. Default `/mcp`.
    pub path: String,
    /// Allowed `Origin`s. Default: localhost only.
    pub origins: OriginPolicy,
    /// Allowed `Host` values. `Some(vec![])` (the default) means the loopback
    /// names only; `None` disables the check (put the server behind a proxy
    /// that enforces it).
    pub hosts: Option<Vec<String>>,
    /// Largest accepted body. Default 4 MiB.
    pub body_limit: usize,
    /// Time allowed to receive a body. Default 30 s.
    pub body_timeout: Duration,
    /// Time allowed to receive request headers, counted on HTTP/1.1 from
    /// the end of the previous response (so it also closes an idle
    /// keep-alive connection). A connection whose head is late is closed
    /// between one and 1.25 times this after the head began. Default 10 s.
    pub header_timeout: Duration,
    /// Interval of keep-alive comments on long-lived streams. Default 15 s.
    pub keep_alive: Duration,
    /// Require a bearer token on every request and serve the Protected
    /// Resource Metadata (see [`ResourceServer`](crate::ResourceServer)).
    /// Default `None`: no authentication (put the server behind something
    /// that authenticates, or keep it on loopback).
    pub auth: Option<std::sync::Arc<crate::ResourceServer>>,
    /// Connections open at once; further ones wait in the listen backlog
    /// until one closes. Default 4,096.
    pub max_connections: usize,
    /// Requests being handled at once across all connections (`subscriptions/listen`
    /// streams excepted: connections and streams bound those); more are
    /// answered `503` with `Retry-After`. Default 1,024.
    pub max_in_flight: usize,
    /// Concurrent HTTP/2 streams per connection. Default 256.
    pub max_streams_per_connection: u32,
    /// HTTP/2 keep-alive: a PING after this much silence, and the
    /// connection closed if it goes unanswered for as long again. Default
    /// 30 s; `None` sends none.
    pub http2_keep_alive: Option<Duration>,
    /// An HTTP/2 connection with no open stream for this long is closed
    /// (gracefully: GOAWAY). HTTP/1.1 connections are closed by
    /// `header_timeout` when no request follows. Default 5 min; `None`
    /// keeps idle HTTP/2 connections open.
    pub idle_timeout: Option<Duration>,
    /// Paths other than the endpoint on the same listener (health checks,
    /// say), answered by this router. They get none of the endpoint's
    /// checks (origin, host, token): serve only what anyone who can reach
    /// the port may see. The endpoint's path and the metadata paths win.
    /// Default `None`: other paths are `404`.
    pub routes: Option<Router>,
    /// More MCP endpoints on the same listener, each its own [`Server`]
    /// at its own path, checked as this one is (origin, host, its own
    /// token verifier) and sharing its limits (`max_in_flight`,
    /// connections). The listener follows [`Mounts::set`] while it
    /// serves; [`router`] takes them as they are when called. Default:
    /// none.
    pub mounts: Mounts,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 3000)),
            path: "/mcp".into(),
            origins: OriginPolicy::Localhost,
            hosts: Some(Vec::new()),
            body_limit: 4 * 1024 * 1024,
            body_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(15),
            auth: None,
            max_connections: 4096,
            max_in_flight: 1024,
            max_streams_per_connection: 256,
            http2_keep_alive: Some(Duration::from_secs(30)),
            idle_timeout: Some(Duration::from_secs(300)),
            routes: None,
            mounts: Mounts::default(),
        }
    }
}

impl HttpConfig {
    /// Refuse values that would panic or make the endpoint useless: a zero
    /// keep-alive, body limit or timeout, a path that is not absolute.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        if !self.path.starts_with('/') {
            return Err(crate::ConfigError::Path(self.path.clone()));
        }
        if let Some(auth) = &self.auth {
            auth.validate(&self.path)?;
        }
        mounts::check(&self.mounts.get(), Some(&self.path))?;
        for (name, zero) in [
            ("keep_alive", self.keep_alive.is_zero()),
            ("body_timeout", self.body_timeout.is_zero()),
            ("header_timeout", self.header_timeout.is_zero()),
            ("body_limit", self.body_limit == 0),
            ("max_connections", self.max_connections == 0),
            ("max_in_flight", self.max_in_flight == 0),
            (
                "max_streams_per_connection",
                self.max_streams_per_connection == 0,
            ),
            (
                "http2_keep_alive",
                self.http2_keep_alive.is_some_and(|d| d.is_zero()),
            ),
            (
                "idle_timeout",
                self.idle_timeout.is_some_and(|d| d.is_zero()),
            ),
        ] {
            if zero {
                return Err(crate::ConfigError::Zero {
                    field: name,
                    why: "give it a positive value",
                });
            }
        }
        Ok(())
    }

    fn checked(&self) -> std::io::Result<()> {
        self.validate().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("invalid HTTP configuration: {e}"),
            )
        })
    }
}

/// An axum router serving the MCP endpoint, to mount in a larger app. Put an
/// [`AuthContext`](crate::AuthContext) in the request extensions (from your
/// authentication middleware) to scope what each caller sees. An invalid
/// configuration ([`HttpConfig::validate`]) is an `InvalidInput` error.
pub fn router(server: Server, config: HttpConfig) -> std::io::Result<Router> {
    config.checked()?;
    let endpoints = Endpoints::new(&server, &config);
    let state = endpoints.main.clone();
    let mut router = Router::new().route(&config.path, axum::routing::any(handler::handle));
    if let Some(auth) = &config.auth {
        for path in [
            "/.well-known/oauth-protected-resource".to_owned(),
            auth.metadata_path(),
        ] {
            router = router.route(&path, axum::routing::get(handler::metadata));
        }
    }
    let extra = config.routes.clone();
    let mut router = router.with_state(state);
    // Each mounted endpoint has its own state (sessions, verifier); their
    // metadata documents are at their own paths.
    for (path, state) in endpoints.mounts.current().iter() {
        let mut mounted = Router::new().route(path, axum::routing::any(handler::handle));
        if let Some(auth) = &state.auth() {
            mounted = mounted.route(&auth.metadata_path(), axum::routing::get(handler::metadata));
        }
        router = router.merge(mounted.with_state(state.clone()));
    }
    Ok(match extra {
        Some(extra) => router.merge(extra),
        None => router,
    })
}

/// Bind `config.bind` and serve until [`Server::shutdown`]. An invalid
/// configuration ([`HttpConfig::validate`]) is an `InvalidInput` error,
/// before anything is bound.
pub async fn serve_http(server: Server, config: HttpConfig) -> std::io::Result<()> {
    config.checked()?;
    let listener = TcpListener::bind(config.bind).await?;
    serve_listener(server, config, listener).await
}

/// Serve on an already bound listener (e.g. port 0 in tests).
pub async fn serve_listener(
    server: Server,
    config: HttpConfig,
    listener: TcpListener,
) -> std::io::Result<()> {
    config.checked()?;
    // The endpoint is served without a router in front: one path, one
    // handler, no per-request boxing. `router()` is for mounting the same
    // handler in a larger axum app.
    let path = Endpoints::new(&server, &config);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The HTTP/1 timer is each connection's own (`head_timer`), set below.
    builder.http1().header_read_timeout(config.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(config.max_streams_per_connection)
        .keep_alive_interval(config.http2_keep_alive)
        .keep_alive_timeout(config.http2_keep_alive.unwrap_or(Duration::from_secs(20)));
    let connections = std::sync::Arc::new(tokio::sync::Semaphore::new(config.max_connections));
    let tasks = tokio_util::task::TaskTracker::new();
    let limits = Watched {
        idle_timeout: config.idle_timeout,
        header_timeout: config.header_timeout,
    };
    tracing::info!(addr = %listener.local_addr()?, path = %config.path, "serving MCP over HTTP");
    loop {
        // At the connection cap, stop accepting: new connections wait in
        // the kernel's backlog until one closes.
        let permit = tokio::select! {
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = server.shutting_down() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = server.shutting_down() => break,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, %peer, "could not set TCP_NODELAY");
        }
        let endpoints = path.clone();
        let activity = idle::Activity::new();
        let head = head_timer::HeadClock::new();
        let mut builder = builder.clone();
        builder.http1().timer(head_timer::HeadTimer(head.clone()));
        let streams = activity.clone();
        let service =
            hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let path = endpoints.clone();
                let stream = (req.version() == http::Version::HTTP_2).then(|| streams.stream());
                // Boxed: hyper keeps a connection's (HTTP/1) or stream's
                // (HTTP/2) service future allocated for as long as it lives,
                // so an open listen stream would otherwise carry the whole
                // handler's state machine after the handler finished.
                let future: std::pin::Pin<
                    Box<
                        dyn std::future::Future<Output = Result<_, std::convert::Infallible>>
                            + Send,
                    >,
                > = Box::pin(async move {
                    // The handler's state machine (about 2 KiB) is boxed
                    // apart and only once this stream's task first runs:
                    // an HTTP/2 client opening a hundred streams at once
                    // would otherwise have a hundred of them allocated
                    // before the first is polled, and the heap keeps that
                    // high-water mark.
                    let response = Box::pin(respond(path, req)).await;
                    Ok(match stream {
                        // Counted until the body is sent (SSE included).
                        Some(guard) => response.map(|inner| {
                            axum::body::Body::new(idle::Guarded {
                                inner,
                                _guard: guard,
                            })
                        }),
                        None => response,
                    })
                });
                future
            });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        // Whether to close is decided by a watcher task of its own: the
        // connection's task is woken for every request, and would otherwise
        // poll the shutdown signal and the idle timer each time. The
        // watcher says so through a one-shot channel, which is cheap to poll.
        let (close, mut closed) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn(watch(server.clone(), activity, head, limits, peer, close));
        tasks.spawn(async move {
            let _permit = permit;
            let mut conn = std::pin::pin!(conn);
            let mut closing = false;
            loop {
                tokio::select! {
                    ended = conn.as_mut() => {
                        if let Err(e) = ended {
                            tracing::debug!(error = %e, %peer, "connection ended with an error");
                        }
                        break;
                    }
                    _ = &mut closed, if !closing => {
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                }
            }
        });
    }
    // Open requests and streams get the grace period to finish.
    tasks.close();
    let grace = server.config().shutdown_grace;
    let _ = tokio::time::timeout(grace, tasks.wait()).await;
    Ok(())
}

/// What a connection's watcher enforces.
#[derive(Clone, Copy)]
struct Watched {
    idle_timeout: Option<Duration>,
    header_timeout: Duration,
}

/// Watch one connection: say `close` when the server shuts down or the
/// connection has had no open stream for `idle_timeout`, and expire a
/// request head that has not arrived within `header_timeout` (hyper then
/// closes the connection). Ends with the connection (when the other end of
/// `close` is dropped).
async fn watch(
    server: Server,
    activity: std::sync::Arc<idle::Activity>,
    head: std::sync::Arc<head_timer::HeadClock>,
    limits: Watched,
    peer: std::net::SocketAddr,
    mut close: tokio::sync::oneshot::Sender<()>,
) {
    // Checked at a fraction of each timeout: a connection closes between one
    // and 1.25 timeouts after its last stream ended or its head was due.
    let period = limits.idle_timeout.map_or(limits.header_timeout, |idle| {
        idle.min(limits.header_timeout)
    }) / 4;
    let mut check = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = close.closed() => return,
            () = server.shutting_down() => break,
            _ = check.tick() => {
                if head.expire_if_due(std::time::Instant::now()) {
                    tracing::debug!(%peer, "no request head within the header timeout");
                }
                let idle = activity.idle_for();
                if idle.zip(limits.idle_timeout).is_some_and(|(idle, limit)| idle >= limit) {
                    tracing::debug!(%peer, "closing an idle HTTP/2 connection");
                    break;
                }
            }
        }
    }
    let _ = close.send(());
}

/// The MCP endpoints of one listener: the main one at its path, and its
/// [`HttpConfig::mounts`], each with its own state (sessions, verifier)
/// and all with one count of requests in flight.
struct Endpoints {
    main_path: Box<str>,
    main: handler::State,
    mounts: mounts::Served,
}

impl Endpoints {
    fn new(server: &Server, config: &HttpConfig) -> std::sync::Arc<Self> {
        let in_flight = std::sync::Arc::new(tokio::sync::Semaphore::new(config.max_in_flight));
        let main = handler::State::sharing(server.clone(), config.clone(), in_flight.clone());
        std::sync::Arc::new(Self {
            main_path: config.path.as_str().into(),
            main,
            mounts: mounts::Served::new(config, in_flight),
        })
    }

    /// The mounted endpoint served at `path`, if any.
    fn mounted_at(&self, path: &str) -> Option<handler::State> {
        self.mounts
            .current()
            .iter()
            .find_map(|(p, state)| (path == &**p).then(|| state.clone()))
    }
}

/// The response to one HTTP request on the listener: the MCP endpoint at
/// its path, anything else (metadata documents, 404) elsewhere.
async fn respond(
    endpoints: std::sync::Arc<Endpoints>,
    req: http::Request<hyper::body::Incoming>,
) -> axum::response::Response {
    // The main endpoint first, borrowed: the common path takes no count.
    if req.uri().path() == &*endpoints.main_path {
        return handler::serve(&endpoints.main, req).await;
    }
    match endpoints.mounted_at(req.uri().path()) {
        Some(state) => handler::serve(&state, req).await,
        None => {
            // A mounted endpoint's metadata document is its own.
            let path = req.uri().path();
            let mounted = endpoints.mounts.current();
            let owner = mounted
                .iter()
                .map(|(_, state)| state)
                .find(|state| state.serves_metadata_at(path))
                .unwrap_or(&endpoints.main);
            handler::other_path(owner, req).await
        }
    }
}
