//! An MCP (revision 2026-07-28) client for tools.
//!
//! - Discovers a server, lists its tools following every cursor and
//!   honouring caching hints, and calls them.
//! - Mirrors `x-mcp-header` parameters into `Mcp-Param-*` headers (HTTP),
//!   and leaves out tools whose annotation breaks the rules.
//! - Times out (60 s by default) and cancels on the server.
//! - Drives multi round-trip requests through an [`InputHandler`].
//! - With [`ClientBuilder::tasks`], follows calls the server runs as tasks
//!   (the tasks extension) to their results.
//! - Asks an [`Approval`] hook before each call, with a risk class that
//!   ignores annotations unless the server is trusted, and logs each call for
//!   audit (`toolgate_client::audit`).
//! - Checks results against the tool's `outputSchema` with the bounded
//!   validator; a tool's own error is [`ClientError::Tool`], apart from
//!   protocol errors.
//!
//! ```no_run
//! # async fn run() -> Result<(), toolgate_client::ClientError> {
//! use toolgate_client::{CallOptions, Client, transport::http::{HttpOptions, HttpTransport}};
//! let client = Client::builder("my-app", "1.0").build(HttpTransport::new("http://127.0.0.1:8080/mcp", HttpOptions::default())?);
//! for tool in client.list_tools().await? {
//!     println!("{}", tool.name);
//! }
//! let result = client.call_tool("get_current_time", Default::default(), &CallOptions::default()).await?;
//! # let _ = result; Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod cache;
mod client;
mod envelope;
mod error;
mod input;
mod multi;
mod tls;
pub mod transport;
mod watch;

pub use cache::ListHints;
pub use client::{
    CallOptions, CallRound, CallStart, Client, ClientBuilder, LogFn, ProgressFn, QuestionFn, Round,
    RoundInput, TaskFn, TaskGuard, TaskUpdates,
};
pub use error::ClientError;
pub use input::{Approval, ApprovalRequest, BoxFuture, InputHandler, NoInput, Risk, classify};
pub use multi::{MultiClient, MultiError, QualifiedTool};
pub use tls::install_default_tls_provider;
pub use watch::ToolWatch;
