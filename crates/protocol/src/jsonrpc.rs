//! The JSON-RPC 2.0 envelope as MCP uses it.
//!
//! MCP narrows JSON-RPC: ids are strings or integers and never `null`,
//! `params` is an object, and batches do not exist. [`parse_message`] applies
//! those rules once, so everything after it can rely on them; the encoders
//! here produce the only shapes a server ever writes.

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
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
///
/// `params._meta` is kept apart, as the JSON text it was sent as: every
/// request carries it, and reading it straight into
/// [`RequestMeta`](crate::meta::RequestMeta) is cheaper than building it as
/// a JSON value first. [`Request::meta_value`] gives it back as a value.
#[derive(Clone, Debug)]
pub struct Request {
    /// The id the response must echo.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The parameters other than `_meta`, if any (always an object).
    pub params: Option<Map<String, Value>>,
    /// `params._meta` as sent, when present (any JSON value: whether it is
    /// an object is checked where it is read).
    pub meta: Option<Box<RawValue>>,
}

impl Request {
    /// `params._meta` as a JSON value, when present and readable.
    pub fn meta_value(&self) -> Option<Value> {
        serde_json::from_str(self.meta.as_ref()?.get()).ok()
    }

    /// The whole `params` as sent: the other parameters with `_meta` put
    /// back (for code that forwards or re-reads a request as a value).
    pub fn params_with_meta(&self) -> Option<Map<String, Value>> {
        let mut params = self.params.clone();
        if let Some(meta) = self.meta_value() {
            params
                .get_or_insert_with(Map::new)
                .insert("_meta".into(), meta);
        }
        params
    }
}

/// Two requests are equal when they say the same: `_meta` is compared as
/// JSON, not as text.
impl PartialEq for Request {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.method == other.method
            && self.params == other.params
            && self.meta.is_some() == other.meta.is_some()
            && self.meta_value() == other.meta_value()
    }
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
/// The envelope is read field by field, straight from the bytes: only
/// `params` (and a response's `result` or `error`) become JSON values,
/// `params._meta` of a request is kept as text for
/// [`RequestMeta::from_raw`](crate::meta::RequestMeta::from_raw), and
/// members MCP does not define are skipped without being built. As with a
/// JSON object, the last of a repeated member wins.
///
/// ```
/// use toolgate_protocol::jsonrpc::parse_message;
/// let err = parse_message(b"[]").unwrap_err();
/// assert_eq!(err.error.code, -32600);
/// let err = parse_message(b"{nope").unwrap_err();
/// assert_eq!(err.error.code, -32700);
/// ```
pub fn parse_message(bytes: &[u8]) -> Result<Incoming, Rejected> {
    match serde_json::from_slice::<Top>(bytes) {
        Ok(Top {
            shape: Shape::Object,
            fields,
        }) => fields.check(),
        Ok(Top {
            shape: Shape::Array,
            ..
        }) => Err(not_batch()),
        Ok(Top { .. }) => Err(not_object()),
        Err(e) => Err(reject(None, RpcError::parse_error(e))),
    }
}

/// Like [`parse_message`], for an already-parsed JSON value.
pub fn parse_value(value: Value) -> Result<Incoming, Rejected> {
    match value {
        Value::Object(mut obj) => Fields {
            jsonrpc: Some(
                matches!(obj.get("jsonrpc"), Some(Value::String(v)) if v == JSONRPC_VERSION),
            ),
            id: obj.remove("id"),
            method: obj.remove("method"),
            params: obj.remove("params").map(Params::from_value),
            result: obj.remove("result"),
            error: obj.remove("error"),
        }
        .check(),
        Value::Array(_) => Err(not_batch()),
        _ => Err(not_object()),
    }
}

fn not_batch() -> Rejected {
    reject(
        None,
        RpcError::invalid_request(
            "batches are not supported; send one JSON-RPC message per request",
        ),
    )
}

fn not_object() -> Rejected {
    reject(
        None,
        RpcError::invalid_request("a JSON-RPC message must be a JSON object"),
    )
}

/// A message's top level, as far as the envelope rules care: what it was,
/// and an object's members.
struct Top {
    shape: Shape,
    fields: Fields,
}

enum Shape {
    Object,
    Array,
    Other,
}

impl Top {
    fn other(shape: Shape) -> Self {
        Top {
            shape,
            fields: Fields::default(),
        }
    }
}

/// The members of a message object that MCP defines, not yet checked.
#[derive(Default)]
struct Fields {
    /// Whether `jsonrpc` was present (`Some`) and exactly `"2.0"`.
    jsonrpc: Option<bool>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Params>,
    result: Option<Value>,
    error: Option<Value>,
}

impl Fields {
    /// Apply MCP's envelope rules, in the order that lets every rejection
    /// echo the id when it could be read.
    fn check(self) -> Result<Incoming, Rejected> {
        let id = match self.id {
            None => None,
            Some(Value::Null) => {
                return Err(reject(
                    None,
                    RpcError::invalid_request("\"id\" must not be null"),
                ));
            }
            Some(Value::String(s)) => Some(RequestId::String(s)),
            Some(v) => match v.as_i64() {
                Some(n) if v.is_number() => Some(RequestId::Number(n)),
                _ => {
                    return Err(reject(
                        None,
                        RpcError::invalid_request("\"id\" must be a string or an integer"),
                    ));
                }
            },
        };
        if self.jsonrpc != Some(true) {
            return Err(reject(
                id,
                RpcError::invalid_request("\"jsonrpc\" must be \"2.0\""),
            ));
        }
        let method = match self.method {
            Some(Value::String(m)) => m,
            Some(_) => {
                return Err(reject(
                    id,
                    RpcError::invalid_request("\"method\" must be a string"),
                ));
            }
            // Without a method this can only be a response.
            None => return response(id, self.result, self.error),
        };
        let (params, meta) = match self.params {
            None => (None, None),
            Some(Params::Object { params, meta }) => (Some(params), meta),
            Some(Params::Other) => {
                return Err(reject(
                    id,
                    RpcError::invalid_params("\"params\" must be an object"),
                ));
            }
        };
        Ok(match id {
            Some(id) => Incoming::Request(Request {
                id,
                method,
                params,
                meta,
            }),
            None => {
                // A notification keeps its `_meta` among its params: none
                // is read on a hot path.
                let mut params = params;
                if let Some(meta) = meta {
                    let meta = serde_json::from_str(meta.get())
                        .map_err(|e| reject(None, RpcError::parse_error(e)))?;
                    params
                        .get_or_insert_with(Map::new)
                        .insert("_meta".into(), meta);
                }
                Incoming::Notification(Notification { method, params })
            }
        })
    }
}

/// `params` as read: an object's members with `_meta` kept apart as text,
/// or anything else (an error once the id is known).
enum Params {
    Object {
        params: Map<String, Value>,
        meta: Option<Box<RawValue>>,
    },
    Other,
}

impl Params {
    fn from_value(value: Value) -> Self {
        match value {
            Value::Object(mut params) => {
                let meta = params
                    .shift_remove("_meta")
                    .and_then(|m| serde_json::value::to_raw_value(&m).ok());
                Params::Object { params, meta }
            }
            _ => Params::Other,
        }
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ParamsVisitor)
    }
}

/// Reads `params` member by member: `_meta` is captured as text, the rest
/// become values; a non-object is skipped to learn only that it was one.
struct ParamsVisitor;

impl<'de> Visitor<'de> for ParamsVisitor {
    type Value = Params;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request params")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
        let mut params = Map::new();
        let mut meta = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "_meta" {
                // As with any member, the last of a repeated `_meta` wins.
                meta = Some(map.next_value::<Box<RawValue>>()?);
            } else {
                params.insert(key, map.next_value()?);
            }
        }
        Ok(Params::Object { params, meta })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Params, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Params::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Params, E> {
        Ok(Params::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Params, E> {
        Ok(Params::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Params, E> {
        Ok(Params::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Params, E> {
        Ok(Params::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Params, E> {
        Ok(Params::Other)
    }
    fn visit_unit<E>(self) -> Result<Params, E> {
        Ok(Params::Other)
    }
}

/// A message without a method: a response, with exactly one of `result`
/// and `error`.
fn response(
    id: Option<RequestId>,
    result: Option<Value>,
    error: Option<Value>,
) -> Result<Incoming, Rejected> {
    match (result, error) {
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
    }
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

/// Reads the top level without building it: an object member by member,
/// anything else skipped to learn only what it was.
struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<Member>()? {
            match key {
                Member::Jsonrpc => fields.jsonrpc = Some(map.next_value::<IsVersion>()?.0),
                Member::Id => fields.id = Some(map.next_value()?),
                Member::Method => fields.method = Some(map.next_value()?),
                Member::Params => fields.params = Some(map.next_value()?),
                Member::Result => fields.result = Some(map.next_value()?),
                Member::Error => fields.error = Some(map.next_value()?),
                Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Top {
            shape: Shape::Object,
            fields,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Top::other(Shape::Array))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Top, E> {
        Ok(Top::other(Shape::Other))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Top, E> {
        Ok(Top::other(Shape::Other))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Top, E> {
        Ok(Top::other(Shape::Other))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Top, E> {
        Ok(Top::other(Shape::Other))
    }
    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top::other(Shape::Other))
    }
    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top::other(Shape::Other))
    }
}

/// A member name of the envelope, matched without allocating.
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = Member;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E>(self, name: &str) -> Result<Member, E> {
                Ok(match name {
                    "jsonrpc" => Member::Jsonrpc,
                    "id" => Member::Id,
                    "method" => Member::Method,
                    "params" => Member::Params,
                    "result" => Member::Result,
                    "error" => Member::Error,
                    _ => Member::Other,
                })
            }
        }
        deserializer.deserialize_identifier(Name)
    }
}

/// Whether a value is exactly the string `"2.0"`; any other JSON value
/// (read and dropped) is not.
struct IsVersion(bool);

impl<'de> Deserialize<'de> for IsVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Version;
        impl<'de> Visitor<'de> for Version {
            type Value = IsVersion;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"2.0\"")
            }
            fn visit_str<E>(self, v: &str) -> Result<IsVersion, E> {
                Ok(IsVersion(v == JSONRPC_VERSION))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IsVersion, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IsVersion(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IsVersion, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IsVersion(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IsVersion, E> {
                Ok(IsVersion(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<IsVersion, E> {
                Ok(IsVersion(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<IsVersion, E> {
                Ok(IsVersion(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IsVersion, E> {
                Ok(IsVersion(false))
            }
            fn visit_unit<E>(self) -> Result<IsVersion, E> {
                Ok(IsVersion(false))
            }
        }
        deserializer.deserialize_any(Version)
    }
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
    fn a_request_keeps_its_meta_apart_as_sent() {
        let raw = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"_meta":{"k" : [1, 2]},"b":2}}"#;
        let Ok(Incoming::Request(req)) = parse_message(raw) else {
            panic!("not a request")
        };
        assert_eq!(
            req.meta.as_ref().map(|m| m.get()),
            Some(r#"{"k" : [1, 2]}"#)
        );
        let params = req.params.clone().unwrap_or_default();
        assert_eq!(params.keys().collect::<Vec<_>>(), ["a", "b"]);
        let whole = req.params_with_meta().unwrap_or_default();
        assert_eq!(whole.get("_meta"), Some(&serde_json::json!({"k": [1, 2]})));
        // The last of a repeated `_meta` wins, as with any member.
        let raw =
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":1,"_meta":{"x":true}}}"#;
        let Ok(Incoming::Request(req)) = parse_message(raw) else {
            panic!("not a request")
        };
        assert_eq!(req.meta.as_ref().map(|m| m.get()), Some(r#"{"x":true}"#));
        // Whatever `_meta` is, the envelope does not judge it: the id is
        // known and the error (-32602) comes from where it is read.
        for meta in ["null", "\"x\"", "[1]"] {
            let raw =
                format!(r#"{{"jsonrpc":"2.0","id":7,"method":"m","params":{{"_meta":{meta}}}}}"#);
            assert!(
                matches!(parse_message(raw.as_bytes()), Ok(Incoming::Request(_))),
                "{raw}"
            );
        }
    }

    #[test]
    fn a_notification_keeps_its_meta_among_its_params() {
        let raw = br#"{"jsonrpc":"2.0","method":"n","params":{"_meta":{"k":1},"x":2}}"#;
        let Ok(Incoming::Notification(n)) = parse_message(raw) else {
            panic!("not a notification")
        };
        let params = n.params.unwrap_or_default();
        assert_eq!(params.get("_meta"), Some(&serde_json::json!({"k": 1})));
        assert_eq!(params.get("x"), Some(&Value::from(2)));
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

    /// Reading the envelope member by member says what building the whole
    /// value and taking it apart says, for every shape of message.
    #[test]
    fn the_streaming_reader_agrees_with_the_value_reader() {
        let cases = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[1,{"b":null}]}}}"#,
            r#"{"method":"m","id":"x","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b","params":{},"params":{"k":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","extra":{"deep":[[[]]]},"more":"x"}"#,
            r#"{"\u006asonrpc":"2.0","\u0069d":5,"m\u0065thod":"m"}"#,
            r#"{"jsonrpc":2.0,"id":1,"method":"m"}"#,
            r#"{"jsonrpc":{"v":"2.0"},"id":1,"method":"m"}"#,
            r#"{"jsonrpc":["2.0"],"id":1,"method":"m"}"#,
            r#"{"jsonrpc":null,"id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0 ","id":1,"method":"m"}"#,
            r#"{"id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":-9007199254740993,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a" :1},"x":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"s"}}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":{"_meta":{"a":{"b":null}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0"}"#,
            r#"{}"#,
            r#"[]"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            r#""text""#,
            r#"42"#,
            r#"-1.5"#,
            r#"true"#,
            r#"null"#,
        ];
        for raw in cases {
            let value: Value = serde_json::from_str(raw).expect(raw);
            assert_eq!(parse_message(raw.as_bytes()), parse_value(value), "{raw}");
        }
    }

    #[test]
    fn broken_json_anywhere_is_a_parse_error() {
        for raw in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","extra":[1,}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m"} trailing"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m""#,
            r#"[1,2"#,
            "",
        ] {
            assert_eq!(rejected(raw).error.code, codes::PARSE_ERROR, "{raw}");
        }
        // Nesting past serde_json's limit in what becomes a value is
        // refused, not a stack overflow; in a member that is skipped it is
        // passed over without recursion.
        let nested = |member: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","{member}":{{"a":{}{}}}}}"#,
                "[".repeat(10_000),
                "]".repeat(10_000)
            )
        };
        assert_eq!(rejected(&nested("params")).error.code, codes::PARSE_ERROR);
        assert!(matches!(
            parse_message(nested("extra").as_bytes()),
            Ok(Incoming::Request(_))
        ));
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
