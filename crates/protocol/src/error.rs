//! JSON-RPC error objects and the error codes MCP assigns.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Error codes used by MCP 2026-07-28.
///
/// The JSON-RPC 2.0 codes are used for general protocol failures; MCP reserves
/// `-32020` to `-32099` for its own codes, of which three are defined.
pub mod codes {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters (also: unknown tool, bad cursor, missing `_meta`).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// HTTP headers do not match the body, or a required header is missing or malformed.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// Processing needs a client capability the request did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The request's protocol version is not supported by the server.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A JSON-RPC error object (`code`, `message`, optional `data`).
///
/// Constructors exist for every code MCP defines, so each is produced in one
/// place with one wording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Additional information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with the given code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attach `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32700`: the body was not valid JSON.
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(codes::PARSE_ERROR, format!("Parse error: {detail}"))
    }

    /// `-32600`: the message is not a valid JSON-RPC request.
    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(codes::INVALID_REQUEST, format!("Invalid request: {detail}"))
    }

    /// `-32601`: the method is unknown or not offered by this server.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            codes::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    /// `-32602`: the parameters are invalid.
    pub fn invalid_params(detail: impl Into<String>) -> Self {
        Self::new(codes::INVALID_PARAMS, detail)
    }

    /// `-32603`: something failed inside the server. The message never
    /// carries internals; log those instead.
    pub fn internal() -> Self {
        Self::new(codes::INTERNAL_ERROR, "Internal error")
    }

    /// `-32020`: a header is missing, malformed or disagrees with the body.
    pub fn header_mismatch(detail: impl std::fmt::Display) -> Self {
        Self::new(codes::HEADER_MISMATCH, format!("Header mismatch: {detail}"))
    }

    /// `-32021`: the request needs client capabilities it did not declare.
    /// `required` is a `ClientCapabilities` object, e.g. `{"sampling": {}}`.
    pub fn missing_client_capability(required: Value) -> Self {
        let names: Vec<String> = required
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        Self::new(
            codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "Missing required client capability: this request needs {} declared in io.modelcontextprotocol/clientCapabilities",
                names.join(", ")
            ),
        )
        .with_data(json!({ "requiredCapabilities": required }))
    }

    /// `-32022`: the requested protocol version is not supported.
    pub fn unsupported_version(requested: &str, supported: &[&str]) -> Self {
        Self::new(
            codes::UNSUPPORTED_PROTOCOL_VERSION,
            format!(
                "Unsupported protocol version {requested:?}; supported: {}",
                supported.join(", ")
            ),
        )
        .with_data(json!({ "supported": supported, "requested": requested }))
    }

    /// Whether this is one of the error codes only a modern (2026-07-28+)
    /// server emits; a client uses this to tell a modern server from a legacy one.
    pub fn is_modern_protocol_error(&self) -> bool {
        matches!(
            self.code,
            codes::HEADER_MISMATCH
                | codes::MISSING_REQUIRED_CLIENT_CAPABILITY
                | codes::UNSUPPORTED_PROTOCOL_VERSION
        )
    }
}

/// `error` and each of its causes, joined with `: ` (a cause whose text
/// the one before already ends with is not said twice): for a log line or
/// an answer that must show what failed underneath, where an `anyhow`
/// chain is not at hand.
///
/// ```
/// use toolgate_protocol::error::with_causes;
/// let io = std::io::Error::other("disk full");
/// #[derive(Debug, thiserror::Error)]
/// #[error("cannot write the audit store")]
/// struct Write(#[source] std::io::Error);
/// assert_eq!(with_causes(&Write(io)), "cannot write the audit store: disk full");
/// ```
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}
