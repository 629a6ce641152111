//! An MCP (revision 2026-07-28) client for tools.
//!
//! # A guided tour
//!
//! **Reach a server.** Over Streamable HTTP, or a program started over
//! stdio (with a minimal environment, not yours). Either era: a server
//! that only speaks the 2025 handshake is detected and served too.
//!
//! ```no_run
//! # async fn run() -> Result<(), toolgate_client::ClientError> {
//! use toolgate_client::transport::http::{HttpOptions, HttpTransport};
//! use toolgate_client::{CallOptions, Client};
//!
//! let client = Client::builder("my-app", "1.0")
//!     .build(HttpTransport::new("http://127.0.0.1:8080/mcp", HttpOptions::default())?);
//! for tool in client.list_tools().await? {
//!     println!("{}: {}", tool.name, tool.description.unwrap_or_default());
//! }
//! let result = client.call_tool("get_current_time", Default::default(), &CallOptions::default()).await?;
//! println!("{:?}", result.content);
//! # Ok(()) }
//! ```
//!
//! **Lists are cached as the server says.** `ttlMs` and `cacheScope` are
//! honoured, every cursor followed (up to [`ClientBuilder::max_pages`]),
//! and [`Client::watch_tools`] invalidates the cache when the server
//! announces a change.
//!
//! **Calls are checked.** Arguments mirrored into `Mcp-Param-*` headers
//! where the tool asks for it; a timeout (60 s by default) that cancels on
//! the server; the result checked against the tool's `outputSchema`. A
//! tool's own failure is [`ClientError::Tool`], apart from protocol errors.
//!
//! **Answer the server's questions.** An [`InputHandler`] answers
//! elicitations, sampling and roots, typed; the client retries the
//! multi-round request with the answers.
//!
//! **Ask before sending.** An [`Approval`] hook sees every call with a
//! [`Risk`] class that ignores annotations unless the server is trusted
//! ([`ClientBuilder::trusted`]); each call is logged for audit
//! (`toolgate_client::audit`).
//!
//! **Follow long calls.** [`ClientBuilder::tasks`] declares the tasks
//! extension: [`Client::call_tool`] then polls a task to its result, and
//! [`Client::start_tool_call`], [`Client::wait_task`],
//! [`Client::listen_task`] and [`Client::cancel_task`] expose the
//! lifecycle.
//!
//! ```no_run
//! # async fn run(client: toolgate_client::Client) -> Result<(), toolgate_client::ClientError> {
//! use toolgate_client::{CallOptions, CallStart};
//!
//! match client.start_tool_call("export_report", Default::default(), &CallOptions::default()).await? {
//!     CallStart::Task(task) => {
//!         println!("running as {}", task.task_id); // keep it: wait_task resumes by id
//!         let result = client.wait_task(&task.task_id, &CallOptions::default()).await?;
//!         println!("{result}");
//!     }
//!     CallStart::Complete(result) => println!("{result}"),
//!     _ => {}
//! }
//! # Ok(()) }
//! ```
//!
//! **Servers that require OAuth.** Attach an [`auth::OAuth`] to the
//! HTTP transport: the first `401` starts discovery, registration and the
//! configured grant (a person's authorization code, client credentials,
//! workload identity, enterprise-managed), tokens are kept in a
//! [`auth::TokenStore`] and renewed before they expire, and a `403
//! insufficient_scope` steps up.
//!
//! **Several servers.** [`MultiClient`] lists and calls the tools of many
//! servers under `prefix.tool` names.
//!
//! **Nothing a server sends exhausts the client.** Bodies, SSE events,
//! stdio lines, stderr, concurrent server requests and pages are bounded
//! ([`transport::Limits`]).
#![forbid(unsafe_code)]

#[cfg(feature = "oauth")]
pub mod auth;
mod cache;
mod client;
mod envelope;
mod error;
mod input;
mod multi;
#[cfg(feature = "http")]
mod tls;
pub mod transport;
mod watch;

pub use cache::ListHints;
pub use client::{
    CallEnd, CallOptions, CallRound, CallStart, Client, ClientBuilder, LogFn, ProgressFn,
    QuestionFn, Round, RoundInput, TaskFn, TaskGuard, TaskUpdates, suggested_poll, task_outcome,
    to_params,
};
pub use error::ClientError;
pub use input::{Approval, ApprovalRequest, BoxFuture, InputHandler, NoInput, Risk, classify};
pub use multi::{MultiClient, MultiError, QualifiedTool};
#[cfg(feature = "http")]
pub use tls::{install_default_tls_provider, rustls_config, with_tls};
pub use watch::ToolWatch;

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
