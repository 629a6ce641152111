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
//! **Take only what the handler needs.** A handler's parameters, in any
//! order: the arguments (a bare `T` or [`Args<T>`]), shared [`State<S>`]
//! registered once with [`ServerBuilder::state`], the [`RequestContext`],
//! the caller's [`AuthContext`]. A tool without arguments takes none (see
//! [`FromCall`]):
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use toolgate_server::{Server, State, ToolDef};
//!
//! let server = Server::builder("counter", "1")
//!     .state(Arc::new(AtomicU64::new(0)))
//!     .tool(ToolDef::new("hit").description("Counts calls.").handler(
//!         |State(hits): State<Arc<AtomicU64>>| async move { (hits.fetch_add(1, Ordering::Relaxed) + 1).to_string() },
//!     ))
//!     .build()
//!     .unwrap();
//! # let _ = server;
//! ```
//!
//! **Or write methods.** `#[toolgate_server::tools]` on an `impl` block
//! makes its `#[tool]` methods tools, with the doc comment as description
//! (see [`toolgate_macros`]).
//!
//! **Return structured results.** [`Structured<T>`] puts `T` in
//! `structuredContent`, mirrors it as JSON text for older clients, and
//! advertises `T`'s schema as the `outputSchema`. Output that breaks the
//! declared schema never reaches the wire.
//!
//! **Report errors in the right layer.** A [`ToolError`] (any displayable
//! error via `?`) is a tool execution error the model can read; unknown
//! tools, malformed requests and panics are JSON-RPC errors, and a panic
//! never leaks its message.
//!
//! **Ask the user.** [`RequestContext::elicit`] turns a struct into a
//! form and hands back the user's answer as that struct; [`Inputs`] asks
//! several questions at once, or for sampling and roots.
//!
//! **Keep state behind handles.** The protocol has no sessions: a tool that
//! creates something returns an id, and [`Handles`] keeps the value behind
//! an unguessable id bound to its creator, with a lifetime and a bound on
//! how many exist.
//!
//! **Talk back while working.** [`RequestContext::progress`] and
//! [`RequestContext::log`] send notifications the client asked for;
//! [`RequestContext::cancelled`] resolves when the client gives up.
//!
//! **Run long calls as tasks.** [`ToolDef::task_support`] lets a client
//! that declared the tasks extension get a task at once and poll it; see
//! [`tasks`].
//!
//! **Offer resources and prompts.** [`ResourceEntry`], [`TemplateEntry`]
//! and [`PromptEntry`], with completions ([`Completer`]).
//!
//! **Decide who may call what.** Over HTTP, a [`ResourceServer`] with a
//! [`JwtVerifier`] (or any [`TokenVerifier`]) verifies bearer tokens;
//! [`ToolDef::scopes`] hides a tool from callers without the scopes and
//! refuses their calls with `403 insufficient_scope`; handlers read the
//! caller from [`AuthContext`]. [`RateLimit`] bounds calls per caller
//! ([`ToolDef::rate_limit`], [`ServerBuilder::rate_limit`]).
//!
//! **Serve it.** [`transport::stdio::serve_stdio`] or
//! [`transport::http::serve_http`]; inside an axum application,
//! [`transport::http::router`] is a `Router` to nest; over a transport of
//! your own, [`Server::handle_message`] and the types in [`transport`]. The
//! server keeps no per-client state.
//!
//! **Test it in-process.** [`Server::handle_message`] takes the bytes of a
//! request and answers them, no transport involved:
//!
//! ```
//! # tokio_test_block(async {
//! use serde_json::{Value, json};
//! use toolgate_server::transport::Reply;
//! use toolgate_server::{Server, ToolDef, TransportContext};
//!
//! let server = Server::builder("t", "1")
//!     .tool(ToolDef::new("ping").description("Answers pong.").handler(|| async { "pong" }))
//!     .build()
//!     .unwrap();
//! let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
//!     "name": "ping", "arguments": {},
//!     "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
//!               "io.modelcontextprotocol/clientCapabilities": {}}}});
//! let bytes = serde_json::to_vec(&request).unwrap();
//! let frame = match server.handle_message(&bytes, &TransportContext::default()) {
//!     Reply::Done(frame) => frame,
//!     Reply::Streaming(mut exchange) => exchange.next().await.unwrap(),
//!     Reply::Nothing => unreachable!(),
//! };
//! let answer: Value = serde_json::from_slice(frame.bytes()).unwrap();
//! assert_eq!(answer["result"]["content"][0]["text"], "pong");
//! # });
//! # fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
//! # }
//! ```
//!
//! **Change it at run time.** [`Server::add_tool`] and
//! [`Server::remove_tool`] notify every `subscriptions/listen` stream that
//! asked for `toolsListChanged`.
//!
//! # Features
//!
//! All on by default. A stdio-only tool server can leave out the HTTP, TLS
//! and JWT stacks with `default-features = false, features = ["macros"]`;
//! it then compiles none of axum, hyper, reqwest, rustls or jsonwebtoken
//! (`cargo xtask features` checks this).
//!
//! | feature | what it brings |
//! |---|---|
//! | `macros` | `#[tools]` and `#[tool]` |
//! | `http` | the Streamable HTTP transport (`transport::http`) and `ResourceServer` |
//! | `jwt` | `JwtVerifier`, with keys from a JWKS fetched over HTTPS |
//! | `state-encryption` | `ServerBuilder::encrypt_state` (XChaCha20-Poly1305); without it states are signed |
//! | `fuzzing` | entry points for the fuzz targets; not part of the API |
#![forbid(unsafe_code)]

mod auth;
mod call_log;
mod context;
mod dispatch;
mod elicit;
pub mod error;
mod exchange;
mod frame_queue;
mod handles;
mod legacy;
mod methods;
mod mrtr;
mod nonce;
mod prompt;
mod rate_limit;
mod registry;
mod resource;
mod sanitizing;
mod server;
mod state;
pub mod tasks;
mod time_limit;
#[cfg(feature = "jwt")]
mod tls;
pub mod tool;
pub mod transport;
mod weak;

#[cfg(feature = "jwt")]
pub use auth::JwtVerifier;
#[cfg(feature = "http")]
pub use auth::ResourceServer;
pub use auth::resource_codes::INSUFFICIENT_SCOPE;
pub use auth::{
    AuthContext, PresentedToken, ScopeHierarchy, TokenError, TokenVerifier, VerifyFuture,
};
pub use call_log::{Begun, CallLog, CallOutcome, CallRecord, NotRecorded, Recorded};
pub use context::{ClientCapability, RequestContext};
pub use dispatch::TransportContext;
pub use elicit::Elicitation;
pub use error::{ConfigError, UrlError};
pub use handles::Handles;
pub use mrtr::{ElicitAction, Elicited, Inputs, arguments_digest};
pub use nonce::{BoxError, MemoryNonceStore, NonceStore, SpendFuture};
pub use prompt::{AsyncCompleter, Completer, PromptEntry};
pub use rate_limit::RateLimit;
pub use registry::Change;
pub use resource::{ResourceEntry, TemplateEntry};
pub use server::{Server, ServerBuilder, ServerConfig, UnlistedAnswer, Withheld};
pub use state::StateKey;
pub use weak::WeakServer;
/// Entry points for the fuzz targets (feature `fuzzing`): not part of the API.
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    pub use crate::state::fuzz_open as open_state;
}
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

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
