//! The JSON-RPC 2.0 envelope as MCP uses it.
//!
//! MCP narrows JSON-RPC: ids are strings or integers and never `null`,
//! `params` is an object, and batches do not exist. [`parse_message`] applies
//! those rules once, so everything after it can rely on them; the encoders
//! here produce the only shapes a server ever writes.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::RpcError;

/// The JSON-RPC version string.
pub const JSONRPC_VERSION: &str = "2.0";

/// A request id: a string or an integer, never `null`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(s.to_owned())
    }
}

impl RequestId {
    /// Read an id from JSON, applying MCP's rules.
    pub fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }

    /// The id as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::from(s.as_str()),
        }
    }
}

/// A request: it expects exactly one response.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The id the response must echo.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The parameters, if any (always an object).
    pub params: Option<Map<String, Value>>,
}

/// A notification: no id, no response.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The parameters, if any (always an object).
    pub params: Option<Map<String, Value>>,
}

/// A response received from a peer (a client never sends one to a server, but
/// the parser still recognizes it to answer precisely).
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The id it answers, when readable.
    pub id: Option<RequestId>,
    /// `Ok(result)` or `Err(error)`.
    pub outcome: Result<Value, RpcError>,
}

/// One parsed incoming message.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

/// Why a message could not be accepted, with the id to answer with (if it
/// could be read).
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    /// The id, when it could be read.
    pub id: Option<RequestId>,
    /// The error to send back.
    pub error: RpcError,
}

fn reject(id: Option<RequestId>, error: RpcError) -> Rejected {
    Rejected { id, error }
}

/// Parse one JSON-RPC message from bytes, enforcing MCP's envelope rules.
///
/// ```
/// use toolgate_protocol::jsonrpc::parse_message;
/// let err = parse_message(b"[]").unwrap_err();
/// assert_eq!(err.error.code, -32600);
/// let err = parse_message(b"{nope").unwrap_err();
/// assert_eq!(err.error.code, -32700);
/// ```
pub fn parse_message(bytes: &[u8]) -> Result<Incoming, Rejected> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| reject(None, RpcError::parse_error(e)))?;
    parse_value(value)
}

/// Like [`parse_message`], for an already-parsed JSON value.
pub fn parse_value(value: Value) -> Result<Incoming, Rejected> {
    let mut obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return Err(reject(
                None,
                RpcError::invalid_request(
                    "batches are not supported; send one JSON-RPC message per request",
                ),
            ));
        }
        _ => {
            return Err(reject(
                None,
                RpcError::invalid_request("a JSON-RPC message must be a JSON object"),
            ));
        }
    };

    // Read the id first so that every later rejection can echo it.
    let id = match obj.remove("id") {
        None => None,
        Some(Value::Null) => {
            return Err(reject(
                None,
                RpcError::invalid_request("\"id\" must not be null"),
            ));
        }
        Some(v) => match RequestId::from_value(&v) {
            Some(id) => Some(id),
            None => {
                return Err(reject(
                    None,
                    RpcError::invalid_request("\"id\" must be a string or an integer"),
                ));
            }
        },
    };

    match obj.get("jsonrpc") {
        Some(Value::String(v)) if v == JSONRPC_VERSION => {}
        _ => {
            return Err(reject(
                id,
                RpcError::invalid_request("\"jsonrpc\" must be \"2.0\""),
            ));
        }
    }

    let method = match obj.remove("method") {
        Some(Value::String(m)) => Some(m),
        Some(_) => {
            return Err(reject(
                id,
                RpcError::invalid_request("\"method\" must be a string"),
            ));
        }
        None => None,
    };

    let Some(method) = method else {
        // Without a method this can only be a response.
        let result = obj.remove("result");
        let error = obj.remove("error");
        return match (result, error) {
            (Some(result), None) => Ok(Incoming::Response(Response {
                id,
                outcome: Ok(result),
            })),
            (None, Some(error)) => match serde_json::from_value::<RpcError>(error) {
                Ok(error) => Ok(Incoming::Response(Response {
                    id,
                    outcome: Err(error),
                })),
                Err(_) => Err(reject(
                    id,
                    RpcError::invalid_request(
                        "\"error\" must have an integer \"code\" and a string \"message\"",
                    ),
                )),
            },
            _ => Err(reject(
                id,
                RpcError::invalid_request("a message needs a \"method\" (request or notification)"),
            )),
        };
    };

    let params = match obj.remove("params") {
        None => None,
        Some(Value::Object(p)) => Some(p),
        Some(_) => {
            return Err(reject(
                id,
                RpcError::invalid_params("\"params\" must be an object"),
            ));
        }
    };

    Ok(match id {
        Some(id) => Incoming::Request(Request { id, method, params }),
        None => Incoming::Notification(Notification { method, params }),
    })
}

#[derive(Serialize)]
struct ResultEnvelope<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a T,
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    error: &'a RpcError,
}

#[derive(Serialize)]
struct NotificationEnvelope<'a, T: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a T>,
}

#[derive(Serialize)]
struct RequestEnvelope<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    params: &'a T,
}

/// Encode a result response.
pub fn encode_result<T: Serialize>(id: &RequestId, result: &T) -> Vec<u8> {
    let envelope = ResultEnvelope {
        jsonrpc: JSONRPC_VERSION,
        id,
        result,
    };
    serde_json::to_vec(&envelope).unwrap_or_else(|_| encode_error(Some(id), &RpcError::internal()))
}

/// Encode an error response. `id` is omitted when it could not be read, as
/// the MCP schema does not allow a `null` id.
pub fn encode_error(id: Option<&RequestId>, error: &RpcError) -> Vec<u8> {
    let envelope = ErrorEnvelope {
        jsonrpc: JSONRPC_VERSION,
        id,
        error,
    };
    // An RpcError is plain data; serializing it cannot fail.
    serde_json::to_vec(&envelope).unwrap_or_default()
}

/// Encode a notification.
pub fn encode_notification<T: Serialize>(method: &str, params: Option<&T>) -> Vec<u8> {
    let envelope = NotificationEnvelope {
        jsonrpc: JSONRPC_VERSION,
        method,
        params,
    };
    serde_json::to_vec(&envelope).unwrap_or_default()
}

/// Encode a request (used by clients).
pub fn encode_request<T: Serialize>(id: &RequestId, method: &str, params: &T) -> Vec<u8> {
    let envelope = RequestEnvelope {
        jsonrpc: JSONRPC_VERSION,
        id,
        method,
        params,
    };
    serde_json::to_vec(&envelope).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;

    fn rejected(raw: &str) -> Rejected {
        parse_message(raw.as_bytes()).expect_err("should be rejected")
    }

    #[test]
    fn parses_request_and_notification() {
        let req = parse_message(br#"{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":1}}"#);
        let Ok(Incoming::Request(req)) = req else {
            panic!("{req:?}")
        };
        assert_eq!(req.id, RequestId::String("a".into()));
        assert_eq!(
            req.params.as_ref().and_then(|p| p.get("x")),
            Some(&Value::from(1))
        );
        let n = parse_message(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#);
        assert!(matches!(n, Ok(Incoming::Notification(_))));
    }

    #[test]
    fn rejects_envelope_violations_with_the_right_code_and_id() {
        assert_eq!(rejected("{").error.code, codes::PARSE_ERROR);
        assert_eq!(rejected("[]").error.code, codes::INVALID_REQUEST);
        assert_eq!(rejected("3").error.code, codes::INVALID_REQUEST);
        let r = rejected(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#);
        assert_eq!((r.error.code, r.id), (codes::INVALID_REQUEST, None));
        let r = rejected(r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#);
        assert_eq!(r.error.code, codes::INVALID_REQUEST);
        let r = rejected(r#"{"jsonrpc":"1.0","id":7,"method":"m"}"#);
        assert_eq!(
            (r.error.code, r.id),
            (codes::INVALID_REQUEST, Some(RequestId::Number(7)))
        );
        let r = rejected(r#"{"jsonrpc":"2.0","id":7,"method":3}"#);
        assert_eq!(r.error.code, codes::INVALID_REQUEST);
        let r = rejected(r#"{"jsonrpc":"2.0","id":7,"method":"m","params":[1]}"#);
        assert_eq!(
            (r.error.code, r.id),
            (codes::INVALID_PARAMS, Some(RequestId::Number(7)))
        );
        let r = rejected(r#"{"jsonrpc":"2.0","id":7}"#);
        assert_eq!(r.error.code, codes::INVALID_REQUEST);
    }

    #[test]
    fn recognizes_responses() {
        let r = parse_message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert!(matches!(
            r,
            Ok(Incoming::Response(Response { outcome: Ok(_), .. }))
        ));
        let r = parse_message(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#);
        assert!(matches!(
            r,
            Ok(Incoming::Response(Response {
                outcome: Err(_),
                ..
            }))
        ));
    }

    #[test]
    fn error_without_id_omits_it() {
        let bytes = encode_error(None, &RpcError::parse_error("x"));
        let v: Value = serde_json::from_slice(&bytes).expect("json");
        assert!(v.get("id").is_none());
        assert_eq!(v["error"]["code"], codes::PARSE_ERROR);
    }
}
