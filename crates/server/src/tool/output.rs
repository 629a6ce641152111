//! What a tool handler returns, and how it becomes a `CallToolResult`.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use toolgate_protocol::types::{CallToolResult, ContentBlock, InputRequiredResult};

use super::schema_gen::schema_for;
use crate::error::ToolError;

/// The outcome of a tool call, before it is sent.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolReply {
    /// The call finished (successfully or with `isError`).
    Complete(CallToolResult),
    /// The call needs more input from the client (multi round-trip request).
    InputRequired(InputRequiredResult),
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
