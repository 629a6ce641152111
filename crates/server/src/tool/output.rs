//! What a tool handler returns, and how it becomes a `CallToolResult`.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use toolgate_protocol::RpcError;
use toolgate_protocol::types::{CallToolResult, ContentBlock, InputRequiredResult};

use super::schema_gen::schema_for;

/// The outcome of a tool call, before it is sent.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolReply {
    /// The call finished (successfully or with `isError`).
    Complete(CallToolResult),
    /// The call needs more input from the client (multi round-trip request).
    InputRequired(InputRequiredResult),
}

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
    InputRequired(Box<crate::mrtr::Pending>),
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

/// Structured output: serialized into `structuredContent` (and mirrored as
/// JSON text), with the type's JSON Schema advertised as the tool's
/// `outputSchema`.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Serialize;
/// use toolgate_server::Structured;
///
/// #[derive(Serialize, JsonSchema)]
/// struct Weather { temperature: f64, conditions: String }
///
/// let reply = Structured(Weather { temperature: 22.5, conditions: "Sunny".into() });
/// # let _ = reply;
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Structured<T>(pub T);

/// Anything a tool handler may return on success.
pub trait IntoToolReply: Send + 'static {
    /// Convert into the reply.
    fn into_reply(self) -> Result<ToolReply, ToolError>;

    /// The `outputSchema` this return type implies, if any.
    fn output_schema() -> Option<Map<String, Value>> {
        None
    }
}

impl IntoToolReply for ToolReply {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        Ok(self)
    }
}

impl IntoToolReply for CallToolResult {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        Ok(ToolReply::Complete(self))
    }
}

impl IntoToolReply for InputRequiredResult {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        Ok(ToolReply::InputRequired(self))
    }
}

impl IntoToolReply for String {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        Ok(ToolReply::Complete(CallToolResult::text(self)))
    }
}

impl IntoToolReply for &'static str {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        Ok(ToolReply::Complete(CallToolResult::text(self)))
    }
}

impl IntoToolReply for ContentBlock {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        Ok(ToolReply::Complete(CallToolResult::new(vec![self])))
    }
}

impl IntoToolReply for Vec<ContentBlock> {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        Ok(ToolReply::Complete(CallToolResult::new(self)))
    }
}

impl<T: Serialize + JsonSchema + Send + 'static> IntoToolReply for Structured<T> {
    fn into_reply(self) -> Result<ToolReply, ToolError> {
        let value = serde_json::to_value(&self.0).map_err(|e| {
            ToolError::new(format!("the tool's result could not be serialized: {e}"))
        })?;
        Ok(ToolReply::Complete(CallToolResult {
            structured_content: Some(value),
            ..Default::default()
        }))
    }

    fn output_schema() -> Option<Map<String, Value>> {
        Some(schema_for::<T>())
    }
}
