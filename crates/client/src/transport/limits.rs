//! Caps on what a server can make this client hold or wait for.
//!
//! A client that talks to servers it does not control must not let one of
//! them exhaust its memory or stall it: every buffer a server fills and
//! every delay a server asks for is bounded here, and going over a bound
//! ends the exchange with [`ClientError::LimitExceeded`](crate::ClientError::LimitExceeded),
//! which names the bound and the server.

use std::time::Duration;

/// Bounds on one transport's traffic. The defaults leave ample room for real
/// servers (a tool list of thousands of tools is a few MiB) while keeping a
/// hostile one from taking more than a few tens of MiB.
///
/// ```
/// use std::time::Duration;
/// use toolgate_client::transport::Limits;
/// let limits = Limits {
///     max_message_bytes: 4 * 1024 * 1024,
///     max_retry_delay: Duration::from_secs(5),
///     ..Limits::default()
/// };
/// # let _ = limits;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single message: an HTTP response body, one SSE event's data,
    /// or one line from a stdio server. Default 32 MiB.
    pub max_message_bytes: usize,
    /// Longest line of an SSE stream (a `data:` line usually carries a
    /// whole message). Default 32 MiB.
    pub max_sse_line_bytes: usize,
    /// Events in one response stream, notifications included. Default 100,000.
    pub max_events_per_response: usize,
    /// Requests from the server (legacy elicitation, sampling, roots, ping)
    /// answered at once; more are refused with a JSON-RPC error. Default 16.
    pub max_concurrent_server_requests: usize,
    /// Longest reconnection delay (SSE `retry`) honoured; a longer one is
    /// cut to this. Default 30 s.
    pub max_retry_delay: Duration,
    /// Longest line kept from a stdio server's stderr; longer ones are cut.
    /// Default 8 KiB.
    pub max_stderr_line_bytes: usize,
    /// Lines of a stdio server's stderr written to the log; later lines are
    /// still read (so the server never blocks) and the last few kept for
    /// error reports, but not logged. Default 1,000.
    pub max_stderr_lines: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: 32 * 1024 * 1024,
            max_sse_line_bytes: 32 * 1024 * 1024,
            max_events_per_response: 100_000,
            max_concurrent_server_requests: 16,
            max_retry_delay: Duration::from_secs(30),
            max_stderr_line_bytes: 8 * 1024,
            max_stderr_lines: 1_000,
        }
    }
}

/// The refusal sent for a server request over
/// [`Limits::max_concurrent_server_requests`].
pub(crate) fn busy(limit: usize) -> toolgate_protocol::RpcError {
    toolgate_protocol::RpcError::new(
        toolgate_protocol::codes::INTERNAL_ERROR,
        format!("the client is already answering {limit} requests from this server; retry later"),
    )
}
