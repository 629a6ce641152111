//! The server's error types, in one module that imports nothing of the
//! server's own: what a tool handler fails with ([`ToolError`]), why a
//! tool cannot be registered ([`RegistrationError`]), and which setting a
//! server cannot work with ([`ConfigError`], [`UrlError`]).

mod config;

use std::fmt;

use serde_json::{Map, Value};
use toolgate_protocol::RpcError;

pub use config::{ConfigError, UrlError};

/// A failed tool call.
///
/// Most failures are *tool execution errors*: the model sees the message in
/// an `isError: true` result and can correct itself. Anything displayable
/// converts with `?` — a `std::io::Error`, an `anyhow::Error`, a
/// `Box<dyn Error>`, a `String` — using its `Display` text, so write
/// messages that say what went wrong and how to fix it. A few failures are protocol errors (a missing
/// client capability); those become JSON-RPC errors.
///
/// ```
/// use toolgate_server::ToolError;
/// fn parse(sku: &str) -> Result<u32, ToolError> {
///     let n: u32 = sku.strip_prefix("SKU-")
///         .ok_or_else(|| ToolError::new(format!("SKU {sku:?} must look like SKU-1001")))?
///         .parse()?; // a ParseIntError becomes an isError result too
///     Ok(n)
/// }
/// assert!(parse("1001").is_err());
/// ```
pub struct ToolError(pub(crate) ErrorKind);

pub(crate) enum ErrorKind {
    Execution(String),
    Protocol(RpcError),
    /// Input is missing: end the round with `input_required`.
    InputRequired(Box<Pending>),
}

impl ToolError {
    /// A tool execution error with a message for the model.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(ErrorKind::Execution(message.into()))
    }

    /// A protocol-level failure, answered as a JSON-RPC error.
    pub fn protocol(error: RpcError) -> Self {
        ToolError(ErrorKind::Protocol(error))
    }

    /// The message.
    pub fn message(&self) -> &str {
        match &self.0 {
            ErrorKind::Execution(m) => m,
            ErrorKind::Protocol(e) => &e.message,
            ErrorKind::InputRequired(_) => "input required",
        }
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ErrorKind::Execution(m) => f.debug_tuple("ToolError").field(m).finish(),
            ErrorKind::Protocol(e) => f.debug_tuple("ToolError::Protocol").field(e).finish(),
            ErrorKind::InputRequired(p) => {
                f.debug_tuple("ToolError::InputRequired").field(p).finish()
            }
        }
    }
}

// No `Display` for `ToolError` itself (read it with `message()`): that is
// what lets the conversion below take *every* displayable error —
// `std::io::Error`, `anyhow::Error`, `Box<dyn Error>`, a `String` — without
// overlapping the reflexive `From<ToolError>`.
impl<E: fmt::Display> From<E> for ToolError {
    fn from(error: E) -> Self {
        ToolError::new(error.to_string())
    }
}

/// A round that ended because input is missing.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) requests: Map<String, Value>,
    pub(crate) responses: Map<String, Value>,
    pub(crate) app: Option<Value>,
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The name breaks the tool-name rules.
    #[error("tool name {name:?} is invalid: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// The rule broken.
        reason: String,
    },
    /// Another tool already has this name.
    #[error("a tool named {0:?} is already registered; tool names must be unique within a server")]
    Duplicate(String),
    /// The input schema's root is not `type: "object"`.
    #[error(
        "tool {name:?}: inputSchema must be a JSON Schema object with \"type\": \"object\" at its root (a typed handler's arguments must be a struct deriving Deserialize and JsonSchema; a tool without arguments takes no arguments parameter)"
    )]
    InputNotObject {
        /// The tool.
        name: String,
    },
    /// A schema does not compile.
    #[error("tool {name:?}: {which} is not a valid JSON Schema: {reason}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// `inputSchema` or `outputSchema`.
        which: &'static str,
        /// The compiler's message.
        reason: String,
    },
    /// An `x-mcp-header` annotation breaks the rules.
    #[error("tool {name:?}: {error}")]
    HeaderRule {
        /// The tool.
        name: String,
        /// The rule broken and where.
        error: toolgate_schema::header_rules::HeaderRuleError,
    },
    /// A prompt or resource definition is invalid.
    #[error("{0}")]
    Invalid(String),
    /// A setting the server cannot work with.
    #[error(transparent)]
    Config(#[from] ConfigError),
}
