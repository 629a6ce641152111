//! Reserved `_meta` keys and the metadata every 2026-07-28 request carries.
//!
//! The protocol is stateless: version, client identity and client
//! capabilities arrive with each request, never from an earlier one.
//! [`RequestMeta::from_params`] is the single place they are read and checked.

use serde::Deserialize as _;
use serde_json::{Map, Value};

use crate::error::RpcError;
use crate::types::{ClientCapabilities, Implementation, LoggingLevel, ProgressToken};

/// `_meta` key: the request's protocol version (required).
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: client name and version (recommended).
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: client capabilities for this request (required).
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: minimum level of log notifications wanted for this request.
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key: server name and version, on results.
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key: the subscription a notification belongs to.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// `_meta` key: opt-in to progress notifications.
pub const PROGRESS_TOKEN: &str = "progressToken";

/// The per-request metadata, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub protocol_version: String,
    /// `io.modelcontextprotocol/clientInfo`, when sent.
    pub client_info: Option<Implementation>,
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub client_capabilities: ClientCapabilities,
    /// `progressToken`, when the client wants progress.
    pub progress_token: Option<ProgressToken>,
    /// `io.modelcontextprotocol/logLevel`, when the client wants log messages.
    pub log_level: Option<LoggingLevel>,
    /// W3C trace context (`traceparent`, `tracestate`, `baggage`), when
    /// sent and well formed.
    pub trace: Option<crate::trace::TraceContext>,
}

impl RequestMeta {
    /// Read the metadata from a request's `params`.
    ///
    /// A missing `_meta`, protocol version or capabilities object is a
    /// `-32602` error that names what is missing; so is a reserved key of the
    /// wrong type. Unknown keys are ignored (they belong to extensions).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate_protocol::meta::RequestMeta;
    /// let params = json!({"_meta": {
    ///     "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    ///     "io.modelcontextprotocol/clientCapabilities": {}
    /// }});
    /// let meta = RequestMeta::from_params(params.as_object()).unwrap();
    /// assert_eq!(meta.protocol_version, "2026-07-28");
    /// assert_eq!(RequestMeta::from_params(None).unwrap_err().code, -32602);
    /// ```
    pub fn from_params(params: Option<&Map<String, Value>>) -> Result<Self, RpcError> {
        let meta = match params.and_then(|p| p.get("_meta")) {
            Some(Value::Object(meta)) => meta,
            Some(_) => return Err(RpcError::invalid_params("\"_meta\" must be an object")),
            None => {
                return Err(RpcError::invalid_params(format!(
                    "Missing params._meta: every request must carry \"{PROTOCOL_VERSION}\" and \"{CLIENT_CAPABILITIES}\""
                )));
            }
        };
        let protocol_version = match meta.get(PROTOCOL_VERSION) {
            Some(Value::String(v)) => v.clone(),
            Some(_) => return Err(field_error(PROTOCOL_VERSION, "a string")),
            None => return Err(missing(PROTOCOL_VERSION)),
        };
        let client_capabilities = match meta.get(CLIENT_CAPABILITIES) {
            Some(v @ Value::Object(_)) => ClientCapabilities::deserialize_value(v)
                .map_err(|_| field_error(CLIENT_CAPABILITIES, "a ClientCapabilities object"))?,
            Some(_) => return Err(field_error(CLIENT_CAPABILITIES, "an object")),
            None => return Err(missing(CLIENT_CAPABILITIES)),
        };
        let client_info = match meta.get(CLIENT_INFO) {
            None => None,
            Some(v) => Some(Implementation::deserialize(v).map_err(|_| {
                field_error(
                    CLIENT_INFO,
                    "an object with string \"name\" and \"version\"",
                )
            })?),
        };
        let progress_token = match meta.get(PROGRESS_TOKEN) {
            None => None,
            Some(Value::String(s)) => Some(ProgressToken::String(s.clone())),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(n) => Some(ProgressToken::Number(n)),
                None => return Err(field_error(PROGRESS_TOKEN, "a string or an integer")),
            },
            Some(_) => return Err(field_error(PROGRESS_TOKEN, "a string or an integer")),
        };
        let log_level = match meta.get(LOG_LEVEL) {
            None => None,
            Some(v) => Some(LoggingLevel::deserialize(v).map_err(|_| {
                field_error(
                    LOG_LEVEL,
                    "one of debug, info, notice, warning, error, critical, alert, emergency",
                )
            })?),
        };
        Ok(Self {
            protocol_version,
            client_info,
            client_capabilities,
            progress_token,
            log_level,
            trace: crate::trace::TraceContext::from_meta(meta),
        })
    }
}

impl ClientCapabilities {
    fn deserialize_value(v: &Value) -> Result<Self, serde_json::Error> {
        serde::Deserialize::deserialize(v)
    }
}

fn missing(key: &str) -> RpcError {
    RpcError::invalid_params(format!("Missing required _meta field \"{key}\""))
}

fn field_error(key: &str, expected: &str) -> RpcError {
    RpcError::invalid_params(format!("_meta field \"{key}\" must be {expected}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Result<RequestMeta, RpcError> {
        RequestMeta::from_params(json!({ "_meta": v }).as_object())
    }

    #[test]
    fn names_what_is_missing() {
        let e = meta(json!({ CLIENT_CAPABILITIES: {} })).unwrap_err();
        assert!(e.message.contains(PROTOCOL_VERSION), "{}", e.message);
        let e = meta(json!({ PROTOCOL_VERSION: "2026-07-28" })).unwrap_err();
        assert!(e.message.contains(CLIENT_CAPABILITIES), "{}", e.message);
        assert_eq!(e.code, -32602);
    }

    #[test]
    fn rejects_wrong_types() {
        for bad in [
            json!({ PROTOCOL_VERSION: 1, CLIENT_CAPABILITIES: {} }),
            json!({ PROTOCOL_VERSION: "v", CLIENT_CAPABILITIES: [] }),
            json!({ PROTOCOL_VERSION: "v", CLIENT_CAPABILITIES: {}, PROGRESS_TOKEN: 1.5 }),
            json!({ PROTOCOL_VERSION: "v", CLIENT_CAPABILITIES: {}, LOG_LEVEL: "loud" }),
            json!({ PROTOCOL_VERSION: "v", CLIENT_CAPABILITIES: {}, CLIENT_INFO: "me" }),
        ] {
            assert_eq!(meta(bad.clone()).unwrap_err().code, -32602, "{bad}");
        }
    }

    #[test]
    fn reads_optional_fields() {
        let m = meta(json!({
            PROTOCOL_VERSION: "2026-07-28",
            CLIENT_CAPABILITIES: { "elicitation": {} },
            CLIENT_INFO: { "name": "c", "version": "1" },
            PROGRESS_TOKEN: "tok",
            LOG_LEVEL: "warning",
        }))
        .unwrap();
        assert!(m.client_capabilities.supports_elicitation_form());
        assert_eq!(m.progress_token, Some(ProgressToken::String("tok".into())));
        assert_eq!(m.log_level, Some(LoggingLevel::Warning));
        assert_eq!(m.client_info.map(|c| c.name).as_deref(), Some("c"));
    }
}
