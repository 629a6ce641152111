//! The connections the HTTP transport sends on.
//!
//! Requests go over hyper's own HTTP/1.1 client connections, kept per
//! endpoint in a pool of idle ones. A request takes the most recently used
//! idle connection (or opens one, with TLS for `https`); the connection
//! goes back when its response body was read to the end, and a body dropped
//! half-read takes its connection with it. A connection that a
//! single-threaded runtime runs is lent only to tasks on that runtime's
//! thread.
//!
//! The endpoint's URL is parsed once, when the transport is made. A
//! general-purpose client parses it again on every request and passes each
//! one through layers for redirects and retries; on a relaying gateway's
//! hot path that was most of what an upstream request cost. Redirects are
//! still followed (by the transport, which signs each hop's request anew),
//! but only `307` and `308` within the endpoint's origin, at most five; any
//! other is an error naming where it pointed.
//!
//! When the environment names a proxy (`HTTP_PROXY`, `HTTPS_PROXY`,
//! `ALL_PROXY`, in either case), requests go through reqwest instead, which
//! honours those variables and `NO_PROXY` as other HTTP tools do.

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::Stream;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::ClientError;

/// Idle connections kept per endpoint; past it the oldest is closed.
const MAX_IDLE: usize = 256;
/// An idle connection older than this is closed rather than reused: servers
/// drop idle connections on their own schedule, and an old one is likely
/// gone already.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// One request, as the transport builds it.
#[derive(Clone)]
pub(crate) struct Outbound {
    pub(crate) method: Method,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Outbound {
    /// A request without headers or body yet.
    pub(super) fn new(method: Method) -> Self {
        Self {
            method,
            headers: HeaderMap::new(),
            body: Bytes::new(),
        }
    }

    /// Add a header whose value is known to be valid.
    pub(super) fn set(&mut self, name: header::HeaderName, value: &'static str) {
        self.headers.append(name, HeaderValue::from_static(value));
    }

    /// Add a header; a value a header cannot carry (a line break, say) is
    /// refused here rather than sent.
    pub(crate) fn add(&mut self, name: &str, value: &str) -> Result<(), ClientError> {
        let name = header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ClientError::transport(format!("{name:?} is not a valid header name")))?;
        self.add_named(name, value)
    }

    /// [`Outbound::add`] with a name parsed already (the protocol's own
    /// headers, sent with every request).
    pub(crate) fn add_named(
        &mut self,
        name: header::HeaderName,
        value: &str,
    ) -> Result<(), ClientError> {
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            ClientError::transport(format!("the {name} header's value cannot be sent in HTTP"))
        })?;
        // Credentials stay out of `Debug` output and any logs built on it.
        value.set_sensitive(name == header::AUTHORIZATION || name == "dpop");
        self.headers.append(name, value);
        Ok(())
    }
}

/// Redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// Sends requests to one endpoint.
pub(super) struct Wire {
    /// The endpoint.
    url: url::Url,
    /// The endpoint, as errors name it.
    server: Arc<str>,
    route: Route,
}

enum Route {
    Direct(Box<Direct>),
    Proxied(reqwest::Client),
}

/// What opening and reusing connections to the endpoint needs.
struct Direct {
    /// The request target: the endpoint's path and query.
    target: Uri,
    /// The `Host` header.
    host: HeaderValue,
    /// Where to connect.
    address: Address,
    port: u16,
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    connect_timeout: Duration,
    idle: Mutex<Vec<Idle>>,
}

/// A pooled connection, with when it went idle and, when a single-threaded
/// runtime runs it, that runtime's thread: only a task on that thread may
/// take it, since a task elsewhere would wait on a runtime busy with other
/// work to move its connection along.
struct Idle {
    sender: SendRequest<Full<Bytes>>,
    since: Instant,
    owner: Option<std::thread::ThreadId>,
}

/// The thread whose runtime alone drives what is spawned here, if any.
fn runtime_thread() -> Option<std::thread::ThreadId> {
    let single = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
    single.then(|| std::thread::current().id())
}

enum Address {
    Ip(std::net::IpAddr),
    Name(String),
}

impl Wire {
    /// Connections to `url`; none is opened until the first request.
    pub(super) fn new(
        url: &url::Url,
        server: Arc<str>,
        connect_timeout: Duration,
    ) -> Result<Self, ClientError> {
        let proxied = proxy_in_env(|k| std::env::var(k).ok());
        Self::with_route(url, server, connect_timeout, proxied)
    }

    fn with_route(
        url: &url::Url,
        server: Arc<str>,
        connect_timeout: Duration,
        proxied: bool,
    ) -> Result<Self, ClientError> {
        let not_http = || {
            ClientError::unreachable(format!(
                "{server}: only http:// and https:// URLs are served"
            ))
        };
        let https = match url.scheme() {
            "http" => false,
            "https" => true,
            _ => return Err(not_http()),
        };
        if proxied {
            let builder = reqwest::Client::builder()
                .connect_timeout(connect_timeout)
                .redirect(reqwest::redirect::Policy::none())
                .tcp_nodelay(true);
            let client = crate::tls::with_tls(builder)?
                .build()
                .map_err(|e| ClientError::transport_because("cannot build the HTTP client", e))?;
            return Ok(Self {
                url: url.clone(),
                server,
                route: Route::Proxied(client),
            });
        }
        let (address, name) = match url.host() {
            Some(url::Host::Domain(d)) => (Address::Name(d.to_owned()), d.to_owned()),
            Some(url::Host::Ipv4(ip)) => (Address::Ip(ip.into()), ip.to_string()),
            Some(url::Host::Ipv6(ip)) => (Address::Ip(ip.into()), ip.to_string()),
            None => return Err(not_http()),
        };
        let port = url.port_or_known_default().ok_or_else(not_http)?;
        let authority = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_owned(),
        };
        let host = HeaderValue::from_str(&authority)
            .map_err(|_| ClientError::unreachable(format!("{server}: not a usable host")))?;
        let target: Uri = url[url::Position::BeforePath..url::Position::AfterQuery]
            .parse()
            .map_err(|_| ClientError::unreachable(format!("{server}: not a usable path")))?;
        let tls = if https {
            let name = ServerName::try_from(name).map_err(|_| {
                ClientError::unreachable(format!("{server}: not a TLS server name"))
            })?;
            let connector = tokio_rustls::TlsConnector::from(crate::tls::client_config()?);
            Some((connector, name))
        } else {
            None
        };
        Ok(Self {
            url: url.clone(),
            server,
            route: Route::Direct(Box::new(Direct {
                target,
                host,
                address,
                port,
                tls,
                connect_timeout,
                idle: Mutex::new(Vec::new()),
            })),
        })
    }

    /// The endpoint.
    pub(super) fn url(&self) -> &url::Url {
        &self.url
    }

    /// Where a redirect answer leads: `Ok(Some(url))` for a `307` or `308`
    /// within the endpoint's origin (a server mounted at `/mcp/` may
    /// redirect `/mcp` there), `Ok(None)` for an answer that is no redirect,
    /// and an error naming where any other redirect pointed, so that
    /// requests and credentials never travel to an origin nobody
    /// configured. `hops` redirects were followed already.
    pub(super) fn redirect(
        &self,
        reply: &Reply,
        method: &Method,
        location: Option<&url::Url>,
        hops: usize,
    ) -> Result<Option<url::Url>, ClientError> {
        let status = reply.status();
        if !status.is_redirection() {
            return Ok(None);
        }
        let to = reply.header("location");
        let next = to.and_then(|to| location.unwrap_or(&self.url).join(to).ok());
        let followed = matches!(status.as_u16(), 307 | 308)
            && next
                .as_ref()
                .is_some_and(|n| n.origin() == self.url.origin());
        if followed && hops < MAX_REDIRECTS {
            return Ok(next);
        }
        let to = next.map_or_else(|| to.unwrap_or_default().to_owned(), String::from);
        let why = if followed {
            format!("more than {MAX_REDIRECTS} redirects")
        } else {
            "only 307 and 308 redirects within the server's origin are followed; \
             configure the new URL if it is the server's"
                .to_owned()
        };
        Err(ClientError::unreachable(format!(
            "{method} {}: HTTP {} to {to:?}: {why}",
            self.server,
            status.as_u16()
        )))
    }

    /// Send `out` to `location` (after a redirect) or the endpoint; the
    /// answer's body is read from the [`Reply`].
    pub(super) async fn send(
        self: &Arc<Self>,
        out: Outbound,
        location: Option<&url::Url>,
    ) -> Result<Reply, ClientError> {
        let direct = match &self.route {
            Route::Direct(direct) => direct,
            Route::Proxied(client) => {
                let url = location.unwrap_or(&self.url).clone();
                let mut response = client
                    .request(out.method.clone(), url)
                    .headers(out.headers)
                    .body(out.body)
                    .send()
                    .await
                    // reqwest's error names the full URL; `server` is
                    // named already, with its credentials masked.
                    .map_err(|e| self.unreachable(&out.method, &e.without_url()))?;
                return Ok(Reply {
                    status: response.status(),
                    headers: std::mem::take(response.headers_mut()),
                    body: Body::Proxied(response),
                });
            }
        };
        let target = match location {
            None => direct.target.clone(),
            Some(at) => at[url::Position::BeforePath..url::Position::AfterQuery]
                .parse()
                .map_err(|_| {
                    ClientError::unreachable(format!(
                        "{}: redirected to {at}, not a usable path",
                        self.server
                    ))
                })?,
        };
        let method = out.method.clone();
        let mut request = http::Request::new(Full::new(out.body));
        *request.method_mut() = out.method;
        *request.uri_mut() = target;
        *request.headers_mut() = out.headers;
        request
            .headers_mut()
            .insert(header::HOST, direct.host.clone());
        // A pooled connection the server has closed in the meantime gives
        // the request back unsent; then the next one, or a new one, is tried.
        while let Some((mut sender, owner)) = direct.take() {
            if sender.ready().await.is_err() {
                continue;
            }
            match sender.try_send_request(request).await {
                Ok(response) => return Ok(self.reply(response, sender, owner)),
                Err(mut e) => match e.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(self.unreachable(&method, &e.into_error())),
                },
            }
        }
        // Boxed: a new connection's handshake is a large future that would
        // otherwise be part of every call's, and be copied with it.
        let mut sender = Box::pin(direct.connect())
            .await
            .map_err(|e| self.unreachable(&method, &*e))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| self.unreachable(&method, &e))?;
        Ok(self.reply(response, sender, runtime_thread()))
    }

    fn reply(
        self: &Arc<Self>,
        response: http::Response<Incoming>,
        sender: SendRequest<Full<Bytes>>,
        owner: Option<std::thread::ThreadId>,
    ) -> Reply {
        let (parts, incoming) = response.into_parts();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body: Body::Direct {
                incoming,
                lease: Some(Lease {
                    sender,
                    owner,
                    wire: self.clone(),
                }),
            },
        }
    }

    /// A send failure with its causes: a library's own text often stops at
    /// "error sending request", where the cause says "connection refused".
    fn unreachable(
        &self,
        method: &Method,
        error: &(dyn std::error::Error + 'static),
    ) -> ClientError {
        ClientError::unreachable(format!(
            "{method} {}: {}",
            self.server,
            toolgate_protocol::error::with_causes(error)
        ))
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Direct {
    /// The most recently used idle connection still open that this task
    /// may use.
    fn take(&self) -> Option<(SendRequest<Full<Bytes>>, Option<std::thread::ThreadId>)> {
        let here = std::thread::current().id();
        let mut idle = self.idle.lock();
        loop {
            let at = idle
                .iter()
                .rposition(|i| i.owner.is_none_or(|owner| owner == here))?;
            let i = idle.remove(at);
            if !i.sender.is_closed() && i.since.elapsed() < IDLE_TIMEOUT {
                return Some((i.sender, i.owner));
            }
        }
    }

    fn put(&self, sender: SendRequest<Full<Bytes>>, owner: Option<std::thread::ThreadId>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock();
        if idle.len() >= MAX_IDLE {
            // Connections of runtimes that are gone end up closed here.
            idle.retain(|i| !i.sender.is_closed());
            if idle.len() >= MAX_IDLE {
                idle.remove(0);
            }
        }
        idle.push(Idle {
            sender,
            since: Instant::now(),
            owner,
        });
    }

    /// A new connection, within the connect timeout (TLS included).
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, BoxError> {
        let timeout = self.connect_timeout;
        let open = async {
            let tcp = self.tcp().await?;
            tcp.set_nodelay(true)?;
            match &self.tls {
                None => handshake(tcp).await,
                Some((connector, name)) => {
                    let tls = connector.connect(name.clone(), tcp).await?;
                    handshake(tls).await
                }
            }
        };
        tokio::time::timeout(timeout, open)
            .await
            .map_err(|_| format!("no connection within {} ms", timeout.as_millis()))?
    }

    async fn tcp(&self) -> std::io::Result<TcpStream> {
        let name = match &self.address {
            Address::Ip(ip) => return TcpStream::connect(SocketAddr::new(*ip, self.port)).await,
            Address::Name(name) => name,
        };
        let mut last = None;
        for addr in tokio::net::lookup_host((name.as_str(), self.port)).await? {
            match TcpStream::connect(addr).await {
                Ok(tcp) => return Ok(tcp),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{name} resolved to no address"),
            )
        }))
    }
}

/// HTTP/1.1 over `io`; the connection runs in a task of its own, which
/// ends when the server closes it or every handle to it is gone.
async fn handshake<T>(io: T) -> Result<SendRequest<Full<Bytes>>, BoxError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "a connection to the server ended");
        }
    });
    Ok(sender)
}

/// A connection lent to one exchange, back in the pool when its response
/// body has been read to the end.
struct Lease {
    sender: SendRequest<Full<Bytes>>,
    owner: Option<std::thread::ThreadId>,
    wire: Arc<Wire>,
}

impl Lease {
    fn release(self) {
        if let Route::Direct(direct) = &self.wire.route {
            direct.put(self.sender, self.owner);
        }
    }
}

/// A response: status and headers at hand, the body read as it arrives.
pub(super) struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Body,
}

enum Body {
    Direct {
        incoming: Incoming,
        lease: Option<Lease>,
    },
    Proxied(reqwest::Response),
}

impl Reply {
    pub(super) fn status(&self) -> StatusCode {
        self.status
    }

    // Without the `oauth` feature, only OAuth reads them.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(super) fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// A header's value, when it is text.
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The declared body length, if any.
    pub(super) fn content_length(&self) -> Option<u64> {
        self.header("content-length")
            .and_then(|v| v.trim().parse().ok())
    }

    /// The next piece of the body; `None` at its end.
    pub(super) async fn chunk(&mut self) -> Result<Option<Bytes>, String> {
        match &mut self.body {
            Body::Proxied(response) => response
                .chunk()
                .await
                .map_err(|e| toolgate_protocol::error::with_causes(&e)),
            Body::Direct { incoming, lease } => loop {
                match incoming.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data()
                            && !data.is_empty()
                        {
                            return Ok(Some(data));
                        }
                    }
                    Some(Err(e)) => {
                        lease.take();
                        return Err(toolgate_protocol::error::with_causes(&e));
                    }
                    None => {
                        if let Some(lease) = lease.take() {
                            lease.release();
                        }
                        return Ok(None);
                    }
                }
            },
        }
    }

    /// Read a body nobody needs to its end, so that its connection can
    /// serve again; past 64 KiB the connection is closed instead.
    pub(super) async fn discard(mut self) {
        let mut left: usize = 64 * 1024;
        while let Ok(Some(piece)) = self.chunk().await {
            let Some(rest) = left.checked_sub(piece.len()) else {
                return;
            };
            left = rest;
        }
    }

    /// The body as a stream of pieces.
    pub(super) fn into_stream(self) -> impl Stream<Item = Result<Bytes, String>> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut reply| async move {
            match reply.chunk().await {
                Ok(Some(data)) => Some((Ok(data), reply)),
                Ok(None) => None,
                Err(e) => Some((Err(e), reply)),
            }
        }))
    }
}

/// Whether the environment names a proxy, as `var` reads it.
fn proxy_in_env(var: impl Fn(&str) -> Option<String>) -> bool {
    [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|k| var(k).is_some_and(|v| !v.trim().is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_in_the_environment_routes_through_reqwest() {
        let env =
            |set: &'static str| move |k: &str| (k == set).then(|| "http://proxy:3128".to_owned());
        assert!(proxy_in_env(env("https_proxy")));
        assert!(proxy_in_env(env("ALL_PROXY")));
        assert!(!proxy_in_env(env("NO_PROXY")));
        assert!(!proxy_in_env(|_| Some("  ".to_owned())));
    }

    #[test]
    fn the_request_target_and_host_come_from_the_url_once() {
        let url = url::Url::parse("http://[::1]:8080/a/mcp?k=v").unwrap();
        let wire = Wire::with_route(&url, "x".into(), Duration::from_secs(1), false).unwrap();
        let Route::Direct(direct) = &wire.route else {
            panic!("direct route expected");
        };
        assert_eq!(direct.target, "/a/mcp?k=v");
        assert_eq!(direct.host, "[::1]:8080");
        assert_eq!(direct.port, 8080);
        let url = url::Url::parse("https://example.com/mcp").unwrap();
        let wire = Wire::with_route(&url, "x".into(), Duration::from_secs(1), false).unwrap();
        let Route::Direct(direct) = &wire.route else {
            panic!("direct route expected");
        };
        assert_eq!(
            (direct.host.to_str().unwrap(), direct.port),
            ("example.com", 443)
        );
        assert!(direct.tls.is_some());
    }

    /// An open connection over an in-memory pipe (its far end in `ends`),
    /// and the task that runs it.
    async fn line(
        ends: &mut Vec<tokio::io::DuplexStream>,
    ) -> (SendRequest<Full<Bytes>>, tokio::task::JoinHandle<()>) {
        let (near, far) = tokio::io::duplex(1024);
        ends.push(far);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(near))
            .await
            .unwrap();
        (sender, tokio::spawn(async move { drop(conn.await) }))
    }

    #[tokio::test]
    async fn the_pool_sheds_closed_connections_and_then_the_oldest() {
        let url = url::Url::parse("http://127.0.0.1:1/mcp").unwrap();
        let wire = Wire::with_route(&url, "x".into(), Duration::from_secs(1), false).unwrap();
        let Route::Direct(direct) = &wire.route else {
            panic!("direct route expected");
        };
        let elsewhere = std::thread::spawn(|| std::thread::current().id())
            .join()
            .unwrap();
        let mut ends = Vec::new();
        // A full pool of another runtime's connections, which then ends.
        let mut tasks = Vec::new();
        for _ in 0..MAX_IDLE {
            let (sender, task) = line(&mut ends).await;
            direct.put(sender, Some(elsewhere));
            tasks.push(task);
        }
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
        assert!(direct.take().is_none(), "none is this thread's to take");
        let here = std::thread::current().id();
        let (oldest, _running) = line(&mut ends).await;
        direct.put(oldest, Some(here));
        assert_eq!(direct.idle.lock().len(), 1, "the closed ones went");
        // Full of open ones: the oldest makes room.
        for _ in 0..MAX_IDLE {
            let (sender, _running) = line(&mut ends).await;
            direct.put(sender, None);
        }
        let idle = direct.idle.lock();
        assert_eq!(idle.len(), MAX_IDLE);
        assert!(idle.iter().all(|i| i.owner.is_none()), "the oldest went");
    }

    #[test]
    fn credentials_stay_out_of_debug_output_and_bad_values_are_refused() {
        let mut out = Outbound::new(Method::POST);
        out.add("authorization", "Bearer s3cret").unwrap();
        out.add("dpop", "proof.jwt").unwrap();
        out.add("mcp-method", "tools/call").unwrap();
        let shown = format!("{:?}", out.headers);
        assert!(
            !shown.contains("s3cret") && !shown.contains("proof.jwt"),
            "{shown}"
        );
        assert!(shown.contains("tools/call"), "{shown}");
        let refused = out.add("mcp-name", "a\r\nx-injected: 1");
        assert!(
            matches!(&refused, Err(ClientError::Transport { message: m, .. }) if m == "the mcp-name header's value cannot be sent in HTTP"),
            "{refused:?}"
        );
    }

    #[test]
    fn other_schemes_are_refused() {
        let url = url::Url::parse("ftp://example.com/mcp").unwrap();
        let refused = Wire::with_route(
            &url,
            "ftp://example.com/mcp".into(),
            Duration::from_secs(1),
            false,
        );
        assert!(
            matches!(refused, Err(ClientError::Unreachable { message: m, .. }) if m.contains("only http"))
        );
    }
}
