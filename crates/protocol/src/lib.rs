//! Wire types for the Model Context Protocol, revision 2026-07-28.
//!
//! This crate owns everything that is *on the wire* and nothing that decides
//! what to do with it:
//!
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope as MCP constrains it (integer or
//!   string ids, never `null`; object params; no batches), parsing of incoming
//!   messages and encoding of responses and notifications.
//! - [`error`]: [`RpcError`] and the error codes of the base protocol and of
//!   MCP's reserved range (`-32020` … `-32022`).
//! - [`meta`]: the reserved `_meta` keys and the per-request metadata every
//!   2026-07-28 request must carry.
//! - [`methods`]: the method catalogue, one type per request method with
//!   its name, params and result types, and which param routes it.
//! - [`types`]: tools, content blocks, resources, prompts, capabilities,
//!   results and notifications, with serde names exactly as in the schema.
//! - [`header`]: the Base64 sentinel codec (`=?base64?…?=`) used by the
//!   Streamable HTTP transport for `Mcp-Name` and `Mcp-Param-*` values.
//! - [`names`]: the tool-name rules (1–128 characters of `[A-Za-z0-9_.-]`).
//! - [`version`]: protocol versions this implementation speaks.
//! - [`quote`]: short quotations of peer-supplied values for error messages.
//! - [`sanitize`]: removing escape sequences and hidden characters from text
//!   a model or a terminal will read.
//!
//! ```
//! use toolgate_protocol::jsonrpc::{parse_message, Incoming};
//!
//! let raw = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
//! match parse_message(raw) {
//!     Ok(Incoming::Request(req)) => assert_eq!(req.method, "tools/list"),
//!     other => panic!("unexpected: {other:?}"),
//! }
//! ```
#![forbid(unsafe_code)]

pub mod error;
pub mod header;
pub mod jsonrpc;
#[cfg(feature = "logging")]
pub mod logging;
pub mod meta;
pub mod methods;
pub mod names;
pub mod quote;
pub mod redact;
pub mod sanitize;
#[cfg(feature = "tls")]
pub mod tls;
pub mod trace;
pub mod types;
pub mod version;
#[cfg(feature = "wire-check")]
pub mod wire_check;

pub use error::{RpcError, codes};
pub use jsonrpc::RequestId;
pub use serde_json::{Map, Value};

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
