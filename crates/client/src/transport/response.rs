//! A response as a transport received it, and the result object in it.
//!
//! A plain JSON answer over HTTP stays the bytes it came in until a reader
//! asks for it: a typed reader ([`Client::send`](crate::Client::send), a
//! relayed tool call) then reads its result straight from the text, rather
//! than building a `Value` tree and converting that (which was 7 % of a
//! gateway's CPU per relayed call). Responses that were parsed to be routed
//! (stdio, event streams) stay the `Value` they became.

use std::borrow::Cow;

use http::StatusCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use toolgate_protocol::RpcError;

use crate::ClientError;

/// A JSON-RPC response (result or error object), as it arrived.
#[derive(Clone, Debug)]
pub struct Response(Body);

#[derive(Clone, Debug)]
enum Body {
    Parsed(Value),
    /// A successful HTTP answer's body, not parsed yet.
    // Without the `http` feature, only the HTTP transport makes these.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Text {
        status: StatusCode,
        bytes: Vec<u8>,
    },
}

impl Response {
    /// A response already parsed.
    pub fn from_value(value: Value) -> Self {
        Self(Body::Parsed(value))
    }

    /// The body of a successful HTTP answer, read when first needed.
    // Without the `http` feature, only the HTTP transport makes these.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn from_http(status: StatusCode, bytes: Vec<u8>) -> Self {
        Self(Body::Text { status, bytes })
    }

    /// The whole response as JSON.
    ///
    /// # Errors
    /// [`ClientError::InvalidResponse`] when the body is not JSON.
    pub fn into_value(self) -> Result<Value, ClientError> {
        match self.0 {
            Body::Parsed(value) => Ok(value),
            Body::Text { status, bytes } => {
                serde_json::from_slice(&bytes).map_err(|_| not_json(status, &bytes))
            }
        }
    }

    /// The result object, or the error the server answered with.
    pub(crate) fn into_result(self) -> Result<Answer, ClientError> {
        let (status, bytes) = match self.0 {
            Body::Parsed(value) => return result_of_value(value).map(Answer::Value),
            Body::Text { status, bytes } => (status, bytes),
        };
        // Anything but a plain object with unique members (an array, a
        // repeated `result`) is read as a `Value`, so that it is judged
        // exactly as a parsed response is.
        let envelope = match bytes.trim_ascii_start().first() {
            Some(b'{') => serde_json::from_slice::<Envelope<'_>>(&bytes).ok(),
            _ => None,
        };
        let Some(envelope) = envelope else {
            let value = serde_json::from_slice(&bytes).map_err(|_| not_json(status, &bytes))?;
            return result_of_value(value).map(Answer::Value);
        };
        if let Some(error) = envelope.error {
            return Err(protocol_error(&error));
        }
        match envelope.result {
            Some(result) if result.get().starts_with('{') => Ok(Answer::Text(result.to_owned())),
            _ => Err(ClientError::InvalidResponse(format!(
                "a response without a result object: {}",
                String::from_utf8_lossy(&bytes)
            ))),
        }
    }
}

/// The members of a response a reader needs; the rest (`jsonrpc`, `id`)
/// the transport has checked or routed by already.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<Value>,
}

fn not_json(status: StatusCode, bytes: &[u8]) -> ClientError {
    let shown: String = String::from_utf8_lossy(bytes).chars().take(200).collect();
    ClientError::InvalidResponse(format!(
        "HTTP {status} with a body that is not JSON: {shown:?}"
    ))
}

fn protocol_error(error: &Value) -> ClientError {
    match RpcError::deserialize(error) {
        Ok(error) => ClientError::Protocol(error),
        Err(_) => ClientError::InvalidResponse(format!("malformed error object: {error}")),
    }
}

fn result_of_value(mut response: Value) -> Result<Value, ClientError> {
    if let Some(error) = response.get("error") {
        return Err(protocol_error(error));
    }
    match response.get_mut("result") {
        // Taken, not cloned: a result may be large.
        Some(result @ Value::Object(_)) => Ok(result.take()),
        _ => Err(ClientError::InvalidResponse(format!(
            "a response without a result object: {response}"
        ))),
    }
}

/// A result object: parsed already, or its text.
#[derive(Debug)]
pub(crate) enum Answer {
    Value(Value),
    Text(Box<RawValue>),
}

impl Answer {
    /// The result as JSON.
    pub(crate) fn into_value(self) -> Result<Value, ClientError> {
        match self {
            Self::Value(value) => Ok(value),
            Self::Text(text) => serde_json::from_str(text.get())
                .map_err(|e| ClientError::InvalidResponse(format!("result: {e}"))),
        }
    }

    /// The result read as `T`; `what` names it in the error (and is only
    /// formatted then).
    pub(crate) fn parse<T: DeserializeOwned>(
        self,
        what: impl std::fmt::Display,
    ) -> Result<T, ClientError> {
        let read = match self {
            Self::Value(value) => serde_json::from_value(value),
            // A result that repeats a member fails a typed read where a
            // `Value` keeps the last; read it as before then.
            Self::Text(text) => serde_json::from_str(text.get()).or_else(|e| {
                serde_json::from_str::<Value>(text.get())
                    .and_then(serde_json::from_value)
                    .map_err(|_| e)
            }),
        };
        read.map_err(|e| ClientError::InvalidResponse(format!("{what}: {e}")))
    }

    /// The result read as `T` in one pass, when it reads as one and `keep`
    /// accepts it; otherwise the answer, untouched, for a reader that
    /// classifies it first. Only a result still in its text is tried: one
    /// parsed already costs no second pass to classify.
    pub(crate) fn read_if<T: DeserializeOwned>(
        self,
        keep: impl FnOnce(&T) -> bool,
    ) -> Result<T, Self> {
        match &self {
            Self::Text(text) => match serde_json::from_str::<T>(text.get()) {
                Ok(read) if keep(&read) => Ok(read),
                _ => Err(self),
            },
            Self::Value(_) => Err(self),
        }
    }

    /// Its `resultType`, when it has one that is a string.
    pub(crate) fn result_type(&self) -> Option<Cow<'_, str>> {
        match self {
            Self::Value(value) => value
                .get("resultType")
                .and_then(Value::as_str)
                .map(Cow::Borrowed),
            // A result whose members do not parse as this shape has no
            // usable `resultType`, as a `Value` whose member is not a
            // string has none; reading the result itself then says what
            // is wrong with it.
            Self::Text(text) => match serde_json::from_str::<Kind<'_>>(text.get()) {
                Ok(kind) => kind.result_type,
                // A repeated member: the last one, as a `Value` reads it.
                Err(_) => serde_json::from_str::<Value>(text.get())
                    .ok()?
                    .get("resultType")?
                    .as_str()
                    .map(|s| Cow::Owned(s.to_owned())),
            },
        }
    }
}

/// A result's `resultType`, every other member skipped unread.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_protocol::types::{CallToolResult, ResultType};

    use super::*;

    fn text(body: &str) -> Response {
        Response::from_http(StatusCode::OK, body.as_bytes().to_vec())
    }

    /// `response` is refused as invalid, with a message that starts so.
    fn refused(response: Response, start: &str, body: &str) {
        match response.into_result() {
            Err(ClientError::InvalidResponse(m)) => assert!(m.starts_with(start), "{body}: {m}"),
            other => panic!("{body}: {other:?}"),
        }
    }

    /// Both shapes of a response must read the same.
    fn both(body: &str) -> [Response; 2] {
        let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        [text(body), Response::from_value(value)]
    }

    #[test]
    fn a_result_reads_the_same_from_text_and_from_a_value() {
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi \u00e9"}],"isError":false}}"#;
        for response in both(body) {
            let result: CallToolResult = response
                .into_result()
                .and_then(|a| a.parse("tools/call result"))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                serde_json::to_value(&result).ok(),
                Some(json!({
                    "resultType": "complete",
                    "content": [{"type": "text", "text": "hi é"}],
                    "isError": false
                }))
            );
        }
    }

    #[test]
    fn an_error_object_is_the_servers_error() {
        let body = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no such tool"}}"#;
        for response in both(body) {
            match response.into_result() {
                Err(ClientError::Protocol(e)) => {
                    assert_eq!((e.code, e.message.as_str()), (-32602, "no such tool"));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_malformed_error_object_is_named() {
        let body = r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#;
        for response in both(body) {
            refused(response, "malformed error object", body);
        }
    }

    #[test]
    fn a_result_that_is_not_an_object_is_refused() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"result":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            for response in both(body) {
                refused(response, "a response without a result object", body);
            }
        }
    }

    #[test]
    fn odd_but_parseable_bodies_read_as_their_value_does() {
        // An array is no response, even one whose first element looks
        // like a result; a repeated member keeps the last, as a `Value`.
        for body in [r#"[{"content":[]}]"#, r#" [1, 2]"#] {
            refused(text(body), "a response without a result object", body);
        }
        let repeated = r#"{"jsonrpc":"2.0","id":1,"result":{"content":7},"result":{"content":[],"resultType":"task","resultType":"complete"}}"#;
        for response in both(repeated) {
            let Ok(answer) = response.into_result() else {
                panic!("{repeated}")
            };
            assert_eq!(answer.result_type().as_deref(), Some("complete"));
            let result: CallToolResult = answer
                .parse("tools/call result")
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(result.content.is_empty());
        }
        // The same inside a result kept as text.
        let Ok(raw) = RawValue::from_string(
            r#"{"content":7,"resultType":"task","content":[],"resultType":"complete"}"#.to_owned(),
        ) else {
            panic!()
        };
        let answer = Answer::Text(raw);
        assert_eq!(answer.result_type().as_deref(), Some("complete"));
        let result: CallToolResult = answer
            .parse("tools/call result")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(result.content.is_empty());
    }

    #[test]
    fn a_body_that_is_not_json_says_so_with_the_status() {
        match text("<html>oops</html>").into_result() {
            Err(ClientError::InvalidResponse(m)) => {
                assert_eq!(
                    m,
                    r#"HTTP 200 OK with a body that is not JSON: "<html>oops</html>""#
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            text("{\"result\":").into_value(),
            Err(ClientError::InvalidResponse(_))
        ));
    }

    #[test]
    fn the_result_type_is_read_without_the_rest() {
        let cases = [
            (
                r#"{"resultType":"task","task":{"a":[1,{"b":2}]}}"#,
                Some("task"),
            ),
            (
                r#"{"content":[],"resultType":"input_\u0072equired"}"#,
                Some("input_required"),
            ),
            (r#"{"content":[]}"#, None),
            (r#"{"resultType":7}"#, None),
        ];
        for (result, expected) in cases {
            let Ok(raw) = RawValue::from_string(result.to_owned()) else {
                panic!("{result}");
            };
            let value: Value = serde_json::from_str(result).unwrap_or(Value::Null);
            for answer in [Answer::Text(raw.clone()), Answer::Value(value)] {
                assert_eq!(answer.result_type().as_deref(), expected, "{result}");
            }
        }
    }

    #[test]
    fn only_a_complete_result_is_read_in_one_pass() {
        let complete = |r: &CallToolResult| r.result_type == ResultType::Complete;
        let raw = |text: &str| RawValue::from_string(text.to_owned()).map(Answer::Text);
        for text in [
            r#"{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}"#,
            r#"{"content":[]}"#,
        ] {
            let Ok(answer) = raw(text) else {
                panic!("{text}")
            };
            assert!(answer.read_if(complete).is_ok(), "{text}");
        }
        // Anything else comes back as it was, for the reader that
        // classifies it: other kinds, a repeated member (which a typed
        // read refuses and a `Value` reads as its last), a parsed answer.
        for (text, kind) in [
            (
                r#"{"resultType":"input_required","inputRequests":{}}"#,
                Some("input_required"),
            ),
            (
                r#"{"resultType":"task","task":{"taskId":"t"}}"#,
                Some("task"),
            ),
            (
                r#"{"content":7,"resultType":"task","content":[],"resultType":"complete"}"#,
                Some("complete"),
            ),
            (r#"{"content":"x"}"#, None),
        ] {
            let Ok(answer) = raw(text) else {
                panic!("{text}")
            };
            match answer.read_if(complete) {
                Err(answer) => assert_eq!(answer.result_type().as_deref(), kind, "{text}"),
                Ok(read) => panic!("{text} read as {read:?}"),
            }
        }
        let parsed = Answer::Value(json!({"content": []}));
        assert!(parsed.read_if(complete).is_err());
    }

    #[test]
    fn a_result_that_does_not_fit_the_type_names_what() {
        let Ok(raw) = RawValue::from_string(r#"{"content":7}"#.to_owned()) else {
            panic!()
        };
        match Answer::Text(raw).parse::<CallToolResult>("tools/call result") {
            Err(ClientError::InvalidResponse(m)) => {
                assert!(m.starts_with("tools/call result: "), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }
}
