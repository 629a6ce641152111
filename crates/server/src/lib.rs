//! Stateless MCP (revision 2026-07-28) tool servers.
//!
//! # A guided tour
//!
//! **Define tools as typed functions.** An argument struct deriving
//! `Deserialize` and `JsonSchema` becomes the tool's `inputSchema`; every
//! call is validated against it before the handler runs, and a violation is
//! returned to the model as an `isError` result naming each bad field.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use toolgate_server::{Server, Structured, ToolDef, ToolError};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Add { a: i64, b: i64 }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Sum { sum: i64 }
//!
//! let server = Server::builder("calc", "1.0.0")
//!     .tool(ToolDef::new("add").description("Adds two integers.").read_only().handler(
//!         |args: Add| async move {
//!             let sum = args.a.checked_add(args.b).ok_or_else(|| ToolError::new("the sum overflows a 64-bit integer"))?;
//!             Ok(Structured(Sum { sum }))
//!         },
//!     ))
//!     .build()
//!     .unwrap();
//! # let _ = server;
//! ```
//!
//! **Return structured results.** [`Structured<T>`] puts `T` in
//! `structuredContent`, mirrors it as JSON text for older clients, and
//! advertises `T`'s schema as the `outputSchema`. Output that breaks the
//! declared schema never reaches the wire.
//!
//! **Report errors in the right layer.** A [`ToolError`] (any error via `?`)
//! is a tool execution error the model can read; unknown tools, malformed
//! requests and panics are JSON-RPC errors, and a panic never leaks its
//! message.
//!
//! **Ask the user.** [`RequestContext::elicit`] turns a struct into a
//! form and hands back the user's answer as that struct.
//!
//! **Talk back while working.** [`RequestContext::progress`] and
//! [`RequestContext::log`] send notifications the client asked for;
//! [`RequestContext::cancelled`] resolves when the client gives up.
//!
//! **Run long calls as tasks.** [`ToolDef::task_support`] lets a client
//! that declared the tasks extension get a task at once and poll it; see
//! [`tasks`].
//!
//! **Serve it.** [`transport::stdio::serve_stdio`] or
//! [`transport::http::serve_http`]; or call [`Server::handle_message`] from
//! a transport of your own. The server keeps no per-client state.
//!
//! **Change it at run time.** [`Server::add_tool`] and
//! [`Server::remove_tool`] notify every `subscriptions/listen` stream that
//! asked for `toolsListChanged`.
#![forbid(unsafe_code)]

mod auth;
mod call_log;
mod context;
mod dispatch;
mod elicit;
mod exchange;
mod frame_queue;
mod handles;
mod legacy;
mod methods;
mod mrtr;
mod prompt;
mod rate_limit;
mod registry;
mod resource;
mod sanitizing;
mod server;
mod state;
pub mod tasks;
mod tls;
pub mod tool;
pub mod transport;

pub use auth::resource_codes::INSUFFICIENT_SCOPE;
pub use auth::{
    AuthContext, JwtVerifier, ResourceServer, ScopeHierarchy, TokenError, TokenVerifier,
    VerifyFuture,
};
pub use call_log::{CallLog, CallOutcome, CallRecord, Recorded};
pub use context::{ClientCapability, RequestContext};
pub use dispatch::{HeaderCheck, NotificationAction, TransportContext, http_status_for};
pub use elicit::Elicitation;
pub use exchange::{Exchange, Frame, Reply};
pub use handles::Handles;
pub use mrtr::{ElicitAction, Elicited, Inputs, arguments_digest};
pub use prompt::{AsyncCompleter, Completer, PromptEntry};
pub use rate_limit::RateLimit;
pub use registry::Change;
pub use resource::{ResourceEntry, TemplateEntry};
pub use server::{Server, ServerBuilder, ServerConfig, UnlistedAnswer};
pub use state::StateKey;
#[doc(hidden)]
pub use state::fuzz_open as fuzz_open_state;
pub use tool::{
    Args, DynToolHandler, FromCall, IntoToolReply, IntoToolResult, NoArgs, RegistrationError,
    State, Structured, ToolDef, ToolEntry, ToolError, ToolHandler, ToolReply,
};

/// The `schemars` the server derives schemas with, so a server never ends
/// up with two versions of it.
pub use schemars;
/// `#[toolgate_server::tools]` on an `impl` block makes its `#[tool]`
/// methods tools (feature `macros`, on by default); see [`toolgate_macros`].
#[cfg(feature = "macros")]
pub use toolgate_macros::{tool, tools};

/// Re-exported protocol types.
pub use toolgate_protocol as protocol;
