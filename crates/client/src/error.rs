//! Everything that can go wrong on the client side, kept apart by kind so a
//! caller can react: a tool's own error is not a protocol error, and neither
//! is a result that breaks the tool's declared output schema.

use toolgate_protocol::RpcError;
use toolgate_protocol::types::CallToolResult;
use toolgate_schema::Violation;

/// A client failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with a JSON-RPC error.
    #[error("the server refused the request: {0}")]
    Protocol(RpcError),
    /// The tool ran and reported an error (`isError: true`); its text is for the model.
    #[error("tool error: {text}")]
    Tool {
        /// The tool's text content, joined.
        text: String,
        /// The whole result.
        result: Box<CallToolResult>,
    },
    /// The result breaks the tool's `outputSchema`.
    #[error("tool {tool:?} returned a result that breaks its outputSchema: {}", describe(.violations))]
    OutputSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        violations: Vec<Violation>,
    },
    /// No answer within the timeout; the request was cancelled on the server.
    #[error("no answer within {0:?}; the request was cancelled")]
    Timeout(std::time::Duration),
    /// The stdio server process exited.
    #[error("the server process exited ({0}); pending requests failed")]
    ServerExited(String),
    /// The server could not be reached: connection refused, name not
    /// resolved, TLS handshake failed. Nothing was delivered.
    #[error("cannot reach the server: {message}")]
    Unreachable {
        /// What failed, said for a person.
        message: String,
        /// The error underneath (I/O, TLS, HTTP), when there was one.
        #[source]
        source: Option<BoxError>,
    },
    /// The connection or HTTP exchange failed.
    #[error("transport failure: {message}")]
    Transport {
        /// What failed, said for a person.
        message: String,
        /// The error underneath (I/O, TLS, HTTP), when there was one.
        #[source]
        source: Option<BoxError>,
    },
    /// The server sent more than a [`Limits`](crate::transport::Limits)
    /// bound allows (or, for lists, kept paging); the exchange was abandoned.
    #[error("{server} went over the client's {limit} limit: {detail}")]
    LimitExceeded {
        /// The server (its URL or program).
        server: String,
        /// The bound, as named in `Limits` or the builder.
        limit: &'static str,
        /// What the server sent.
        detail: String,
    },
    /// The request could not be encoded (params that are not a JSON
    /// object); nothing was sent.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The server sent something that is not a valid MCP message.
    #[error("invalid response from the server: {0}")]
    InvalidResponse(String),
    /// No protocol version both sides speak.
    #[error("the server supports {server:?}; this client speaks {client:?}")]
    NoCommonVersion {
        /// The server's versions.
        server: Vec<String>,
        /// Ours.
        client: Vec<String>,
    },
    /// The tool is not in the server's (valid) tool list.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// The approval hook denied the call; nothing was sent.
    #[error("the call to {0:?} was not approved; nothing was sent")]
    Denied(String),
    /// The server kept asking for input past the round limit.
    #[error("the server asked for input more than {0} times")]
    TooManyRounds(usize),
    /// The task the call ran as ended without a result (`cancelled`).
    #[error("task {task_id} was {status}{}", if .message.is_empty() { String::new() } else { format!(": {}", .message) })]
    TaskEnded {
        /// The task.
        task_id: String,
        /// How it ended.
        status: String,
        /// The server's status message, if any.
        message: String,
    },
    /// Authorization failed: discovery, registration, a grant, or the
    /// server refused the token it was given. The text says which, and why.
    #[error("authorization failed: {0}")]
    Authorization(String),
    /// The server needs authorization this client cannot obtain by itself:
    /// a person has to authorize it (in a browser) first.
    #[error("{0}; authorize this client first")]
    LoginRequired(String),
    /// The server asked for input the application cannot give.
    #[error("the server asked for {0}, which this client does not provide")]
    InputUnavailable(String),
}

/// An error underneath a client failure.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl ClientError {
    /// [`ClientError::Transport`] saying `message`.
    pub fn transport(message: impl Into<String>) -> Self {
        ClientError::Transport {
            message: message.into(),
            source: None,
        }
    }

    /// [`ClientError::Transport`] saying `message`, caused by `source`.
    pub fn transport_because(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        ClientError::Transport {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// [`ClientError::Unreachable`] saying `message`.
    pub fn unreachable(message: impl Into<String>) -> Self {
        ClientError::Unreachable {
            message: message.into(),
            source: None,
        }
    }

    /// [`ClientError::Unreachable`] saying `message`, caused by `source`.
    pub fn unreachable_because(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        ClientError::Unreachable {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
