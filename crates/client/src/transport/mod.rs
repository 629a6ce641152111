//! How requests reach a server. A transport sends one serialized request
//! and hands back its [`Pending`] answer: request-scoped notifications, then
//! the response. Dropping a `Pending` cancels the request on the server
//! (closing the stream on HTTP, `notifications/cancelled` on stdio).

#[cfg(feature = "http")]
pub mod http;
mod limits;
mod lines;
mod response;
mod router;
pub mod stdio;

pub use limits::Limits;
pub(crate) use limits::busy;
pub(crate) use response::Answer;
pub use response::Response;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use tokio::sync::mpsc;
use toolgate_protocol::RequestId;

use crate::ClientError;

/// An access token that one request carries instead of the transport's
/// own credentials: a gateway sends each call with a token obtained for
/// its caller (token exchange, or the caller's linked account). It never
/// shows in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Bearer(std::sync::Arc<str>);

impl Bearer {
    /// Wrap `token`.
    pub fn new(token: impl Into<std::sync::Arc<str>>) -> Self {
        Self(token.into())
    }

    /// The token, to send.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(…)")
    }
}

/// One request on its way.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// Its id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// `params.name` or `params.uri` (for `Mcp-Name`).
    pub name: Option<String>,
    /// The protocol version in its `_meta`.
    pub version: String,
    /// Extra headers (`Mcp-Param-*`), for HTTP.
    pub headers: Vec<(String, String)>,
    /// The negotiated legacy version, when the server speaks an
    /// initialize-handshake revision (HTTP then sends it and the session id).
    pub legacy: Option<String>,
    /// The serialized JSON-RPC request.
    pub body: Vec<u8>,
    /// The token this request carries instead of the transport's own
    /// (HTTP only; a `401` or `403` is then the caller's answer, not a
    /// reason to authorize anew).
    pub bearer: Option<Bearer>,
}

/// A message received for a request.
#[derive(Clone, Debug)]
pub enum Inbound {
    /// A notification about the request.
    Notification(Value),
    /// The response (result or error object).
    Response(Response),
}

/// The answer to a request, still arriving.
pub struct Pending {
    /// A message already here (a plain JSON answer needs no channel).
    pub(crate) ready: Option<Result<Inbound, ClientError>>,
    pub(crate) rx: Option<mpsc::Receiver<Result<Inbound, ClientError>>>,
    pub(crate) on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Pending {
    /// Messages arriving on `rx`; `on_drop` cancels the request.
    pub(crate) fn stream(
        rx: mpsc::Receiver<Result<Inbound, ClientError>>,
        on_drop: Option<Box<dyn FnOnce() + Send>>,
    ) -> Self {
        Self {
            ready: None,
            rx: Some(rx),
            on_drop,
        }
    }

    /// The whole answer, already here.
    // Without the `http` feature, only the HTTP transport makes these.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn answered(message: Result<Inbound, ClientError>) -> Self {
        Self {
            ready: Some(message),
            rx: None,
            on_drop: None,
        }
    }

    /// The next message; `None` when the transport gave up without a response.
    pub async fn next(&mut self) -> Option<Result<Inbound, ClientError>> {
        if let Some(message) = self.ready.take() {
            return Some(message);
        }
        match &mut self.rx {
            Some(rx) => rx.recv().await,
            None => None,
        }
    }

    /// Mark the request finished so dropping it does not cancel anything.
    pub(crate) fn finished(&mut self) {
        self.on_drop = None;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(cancel) = self.on_drop.take() {
            cancel();
        }
    }
}

/// The transport family, which decides a few protocol details (header
/// mirroring applies to HTTP only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    /// Streamable HTTP.
    Http,
    /// A child process over stdio.
    Stdio,
    /// The deprecated HTTP+SSE transport of 2024-11-05: messages posted to
    /// an endpoint, answers on one event stream (an initialize-handshake
    /// server only).
    Sse,
}

/// The future a transport returns.
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<Pending, ClientError>> + Send + 'a>>;

/// The future of a notification.
pub type NotifyFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ClientError>> + Send + 'a>>;

/// Answers requests a legacy server sends to the client (ping, roots,
/// sampling, elicitation): `(method, params, related) -> result or error`,
/// where `related` is the id of the client's request whose response stream
/// carried it (`None` when the transport cannot tell: stdio, or a legacy
/// session's standalone stream).
pub type ServerRequestHandler = std::sync::Arc<
    dyn Fn(
            String,
            Value,
            Option<String>,
        )
            -> Pin<Box<dyn Future<Output = Result<Value, toolgate_protocol::RpcError>> + Send>>
        + Send
        + Sync,
>;

mod sealed {
    /// Only this crate's transports implement [`super::Transport`].
    pub trait Sealed {}
    impl Sealed for super::stdio::StdioTransport {}
    #[cfg(feature = "http")]
    impl Sealed for super::http::HttpTransport {}
}

/// A way to reach a server: [`stdio::StdioTransport`] or
/// [`http::HttpTransport`] (which also speaks the deprecated HTTP+SSE
/// transport).
///
/// The trait is sealed: besides sending, a transport takes part in the
/// legacy handshake, routes a legacy server's own requests and session
/// notifications, and orders answers against later requests, and those
/// contracts are this crate's to keep. A server reached some other way is
/// started as a command (stdio) or put behind Streamable HTTP; to test
/// against a server in-process, serve it on a loopback port.
pub trait Transport: sealed::Sealed + Send + Sync + 'static {
    /// Send one request.
    fn send(&self, request: Outgoing) -> SendFuture<'_>;
    /// The family.
    fn kind(&self) -> TransportKind;
    /// An identity for caches of `private` results (the authorization context).
    fn auth_scope(&self) -> String {
        String::new()
    }
    /// Send a notification (legacy handshake only).
    fn notify(&self, body: Vec<u8>, legacy: Option<String>) -> NotifyFuture<'_>;
    /// Where requests from a legacy server go.
    fn on_server_request(&self, _handler: ServerRequestHandler) {}
    /// Notifications the server sent outside any request (a legacy
    /// session's `notifications/tools/list_changed`): each to every
    /// receiver. `None` when the transport carries none.
    fn session_notifications(&self) -> Option<tokio::sync::broadcast::Receiver<serde_json::Value>> {
        None
    }
    /// Resolves once every request the server has sent so far has been
    /// answered, and (stdio) the answers are queued ahead of whatever the
    /// client sends next. The default resolves at once.
    fn server_requests_answered(&self) -> NotifyFuture<'_> {
        Box::pin(async { Ok(()) })
    }
    /// The legacy handshake completed with `version` (HTTP opens the
    /// session's stream for server-initiated messages, and resolves once
    /// the server accepted or refused it).
    fn legacy_session_started(&self, _version: &str) -> NotifyFuture<'_> {
        Box::pin(async { Ok(()) })
    }
}
