//! The request pipeline: parse → check → dispatch → validate → encode.
//!
//! Every incoming message goes through [`Server::handle_message`] (or
//! [`Server::handle_request`] when a transport already parsed it). The order
//! of checks is fixed here and nowhere else:
//!
//! 1. JSON-RPC envelope (`-32700`, `-32600`);
//! 2. required `_meta` (`-32602`);
//! 3. transport header checks, supplied by the transport (`-32020`);
//! 4. protocol version (`-32022`, listing the supported versions);
//! 5. method dispatch (`-32601` for unknown methods and for capabilities
//!    this server does not offer).
//!
//! Results carry `resultType` and the server's identity in
//! `_meta.io.modelcontextprotocol/serverInfo`. Nothing is remembered between
//! requests.

use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolgate_protocol::jsonrpc::{
    Incoming, Notification, Request, encode_error, encode_result, parse_message,
};
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::types::{CancelledNotificationParams, methods as notifications};
use toolgate_protocol::version::{
    LATEST_PROTOCOL_VERSION, LEGACY_SERVED, LEGACY_VERSIONS, MODERN_VERSIONS, is_modern,
};
use toolgate_protocol::{RequestId, RpcError, codes};

use crate::exchange::{Frame, Reply};
use crate::{AuthContext, Server, methods};

/// What a transport knows about a request beyond its body.
#[derive(Clone, Debug, Default)]
pub struct TransportContext {
    /// The caller's authorization, if any.
    pub auth: Option<AuthContext>,
    /// Whether each request has its own response stream (HTTP). On a shared
    /// channel (stdio) a subscription torn down by the server is also
    /// announced with `notifications/cancelled`.
    pub stream_per_request: bool,
    /// The HTTP request headers, when the transport is HTTP: `tools/call`
    /// compares the tool's `Mcp-Param-*` headers with the arguments.
    pub http_headers: Option<std::sync::Arc<http::HeaderMap>>,
}

/// A transport-supplied check run after `_meta` is read and before the
/// version check (the HTTP transport compares its headers with the body).
pub type HeaderCheck<'a> = &'a (dyn Fn(&Request, &RequestMeta) -> Result<(), RpcError> + Sync);

/// What dispatch made of a notification.
#[derive(Clone, Debug, PartialEq)]
pub enum NotificationAction {
    /// Cancel the in-flight request with this id.
    Cancel(RequestId),
    /// Nothing to do.
    Ignore,
}

impl Server {
    /// Handle one serialized message. Notifications yield
    /// [`Reply::Nothing`]; use [`Server::classify_notification`] to act on them.
    pub fn handle_message(&self, bytes: &[u8], transport: &TransportContext) -> Reply {
        match parse_message(bytes) {
            Ok(Incoming::Request(req)) => self.handle_request(req, transport, None),
            Ok(Incoming::Notification(_)) => Reply::Nothing,
            Ok(Incoming::Response(r)) => Reply::Done(error_frame(
                r.id.as_ref(),
                RpcError::invalid_request("servers do not accept JSON-RPC responses"),
            )),
            Err(rejected) => Reply::Done(error_frame(rejected.id.as_ref(), rejected.error)),
        }
    }

    /// Decide what a client notification means. Malformed or unknown
    /// notifications are ignored, as the protocol asks.
    pub fn classify_notification(&self, notification: &Notification) -> NotificationAction {
        if notification.method != notifications::CANCELLED {
            return NotificationAction::Ignore;
        }
        let Some(params) = &notification.params else {
            return NotificationAction::Ignore;
        };
        match serde_json::from_value::<CancelledNotificationParams>(Value::Object(params.clone())) {
            Ok(p) => {
                tracing::debug!(request = %p.request_id, reason = p.reason.as_deref().unwrap_or(""), "cancel requested");
                NotificationAction::Cancel(p.request_id)
            }
            Err(_) => NotificationAction::Ignore,
        }
    }

    /// Handle one parsed request.
    pub fn handle_request(
        &self,
        req: Request,
        transport: &TransportContext,
        header_check: Option<HeaderCheck<'_>>,
    ) -> Reply {
        match self.check_and_dispatch(req, transport, header_check) {
            Ok(reply) => reply,
            Err((id, error)) => Reply::Done(error_frame(Some(&id), error)),
        }
    }

    fn check_and_dispatch(
        &self,
        req: Request,
        transport: &TransportContext,
        header_check: Option<HeaderCheck<'_>>,
    ) -> Result<Reply, (RequestId, RpcError)> {
        if req.method == "initialize" {
            // A legacy (handshake) client: it has no way to move forward, so
            // the error must name what this server does speak.
            return Err((req.id, legacy_initialize_error(self.serves_legacy())));
        }
        let meta = RequestMeta::from_raw(req.meta.as_deref()).map_err(|e| (req.id.clone(), e))?;
        if let Some(check) = header_check {
            check(&req, &meta).map_err(|e| (req.id.clone(), e))?;
        }
        if !is_modern(&meta.protocol_version) {
            return Err((
                req.id,
                RpcError::unsupported_version(&meta.protocol_version, MODERN_VERSIONS),
            ));
        }
        methods::dispatch(self, req, meta, transport)
    }

    /// Encode a successful result, adding `resultType` when missing and the
    /// server's identity to `_meta`.
    pub(crate) fn result_frame<T: Serialize>(&self, id: &RequestId, result: &T) -> Frame {
        match self.encode_stamped(id, result) {
            Some(body) => Frame::Response {
                body,
                error_code: None,
            },
            None => {
                tracing::error!("a result did not serialize to a JSON object");
                error_frame(Some(id), RpcError::internal())
            }
        }
    }

    /// The response bytes for `result`. The common case — a result with
    /// neither `resultType` nor `_meta` of its own — is written straight to
    /// bytes and closed with the stamp serialized once per server; anything
    /// else goes through a JSON value to merge the two.
    fn encode_stamped<T: Serialize>(&self, id: &RequestId, result: &T) -> Option<Vec<u8>> {
        let mut body = Vec::with_capacity(192);
        body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        serde_json::to_writer(&mut body, id).ok()?;
        body.extend_from_slice(b",\"result\":");
        let start = body.len();
        serde_json::to_writer(&mut body, result).ok()?;
        let written = &body[start..];
        // A key appears unescaped only as a real key (or as a string value
        // equal to it, which merely takes the slow path). A `resultType`
        // written first (typed results such as `CallToolResult`) is surely
        // a top-level key, so only `_meta` is spliced after it.
        let tail = &self.inner.stamp_tail;
        let tail: Option<&[u8]> =
            if written.first() != Some(&b'{') || contains(written, b"\"_meta\"") {
                None
            } else if written.starts_with(b"{\"resultType\":") {
                Some(&tail[STAMP_META_AT..])
            } else if contains(written, b"\"resultType\"") {
                None
            } else {
                Some(tail)
            };
        if let Some(tail) = tail {
            body.pop();
            if body.len() > start + 1 {
                body.push(b',');
            }
            body.extend_from_slice(tail);
            // Close the result object, then the envelope.
            body.extend_from_slice(b"}}");
            return Some(body);
        }
        let Ok(Value::Object(mut map)) = serde_json::from_slice::<Value>(written) else {
            return None;
        };
        self.stamp(&mut map);
        Some(encode_result(id, &map))
    }

    pub(crate) fn stamp(&self, map: &mut Map<String, Value>) {
        map.entry("resultType")
            .or_insert_with(|| Value::from("complete"));
        let meta = map
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            for (k, v) in &self.inner.result_meta {
                meta.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

/// Where `_meta` starts in the stamp tail (after `"resultType":"complete",`).
const STAMP_META_AT: usize = STAMP_RESULT_TYPE.len();

/// The first part of the stamp tail.
pub(crate) const STAMP_RESULT_TYPE: &[u8] = b"\"resultType\":\"complete\",";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// Encode an error response.
pub(crate) fn error_frame(id: Option<&RequestId>, error: RpcError) -> Frame {
    Frame::Response {
        body: encode_error(id, &error),
        error_code: Some(error.code),
    }
}

fn legacy_initialize_error(serves_legacy: bool) -> RpcError {
    let mut error = RpcError::method_not_found("initialize");
    let mut supported: Vec<&str> = MODERN_VERSIONS.to_vec();
    error.message = if serves_legacy {
        supported.extend(LEGACY_SERVED);
        format!(
            "Method not found: initialize is not part of MCP {LATEST_PROTOCOL_VERSION}, which this request's _meta selects. To open a legacy session ({}), send initialize without the modern _meta",
            LEGACY_SERVED.join(", "),
        )
    } else {
        format!(
            "Method not found: initialize. This server speaks MCP {} without an initialize handshake (supported protocol versions: {}); legacy versions such as {} are not served",
            LATEST_PROTOCOL_VERSION,
            MODERN_VERSIONS.join(", "),
            LEGACY_VERSIONS[0],
        )
    };
    error.with_data(serde_json::json!({ "supported": supported }))
}

/// The HTTP status for a response carrying `code` (`None`: success).
///
/// The mapping follows the code, so one code always gets one status: the
/// codes that mean "this request cannot be served as sent" (parse, invalid
/// request, invalid params — which includes a missing `_meta`, an unknown
/// tool or a bad cursor —, header mismatch, missing capability, unsupported
/// version) are `400`; an unknown method is `404`; an internal failure
/// `500`. Codes this server never emits itself (a gateway relaying another
/// server's error) travel in a `200`.
pub fn http_status_for(code: Option<i64>) -> u16 {
    match code {
        None => 200,
        Some(codes::METHOD_NOT_FOUND) => 404,
        Some(codes::INTERNAL_ERROR) => 500,
        Some(crate::INSUFFICIENT_SCOPE) => 403,
        Some(
            codes::PARSE_ERROR
            | codes::INVALID_REQUEST
            | codes::INVALID_PARAMS
            | codes::HEADER_MISMATCH
            | codes::MISSING_REQUIRED_CLIENT_CAPABILITY
            | codes::UNSUPPORTED_PROTOCOL_VERSION,
        ) => 400,
        Some(_) => 200,
    }
}

/// A fresh cancellation token for a request. Deliberately not a child of
/// the server's shutdown token: linking it would take a lock shared by
/// every request, and in-flight requests are meant to finish during the
/// shutdown grace period anyway (long-lived subscriptions watch shutdown
/// themselves).
pub(crate) fn request_token() -> CancellationToken {
    CancellationToken::new()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn server() -> Server {
        match Server::builder("stamp-test", "1.0.0").build() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    fn encoded<T: Serialize>(result: &T) -> Value {
        let frame = server().result_frame(&RequestId::Number(7), result);
        serde_json::from_slice(frame.bytes())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {frame:?}"))
    }

    #[test]
    fn results_are_stamped_on_both_paths() {
        let info = json!({"io.modelcontextprotocol/serverInfo": {"name": "stamp-test", "version": "1.0.0"}});
        // Fast path: neither resultType nor _meta.
        let v = encoded(&json!({"completion": {"values": ["a"]}}));
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["completion"]["values"][0], "a");
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(v["result"]["_meta"], info);
        let v = encoded(&json!({}));
        assert_eq!(v["result"]["resultType"], "complete");
        // Slow path: the result's own _meta and resultType are kept and merged.
        let v = encoded(&json!({"resultType": "input_required", "_meta": {"x": 1}}));
        assert_eq!(v["result"]["resultType"], "input_required");
        assert_eq!(v["result"]["_meta"]["x"], 1);
        assert_eq!(
            v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "stamp-test"
        );
        // A string value that looks like a key only takes the slow path.
        let v = encoded(&json!({"text": "_meta"}));
        assert_eq!(v["result"]["text"], "_meta");
        assert_eq!(v["result"]["_meta"], info);
    }

    #[test]
    fn typed_results_with_result_type_first_get_only_meta_spliced() {
        use toolgate_protocol::types::CallToolResult;
        let info = json!({"io.modelcontextprotocol/serverInfo": {"name": "stamp-test", "version": "1.0.0"}});
        // A tool whose text mentions both keys: the keys must still appear once.
        let result = CallToolResult::text("\"resultType\" and \"_meta\"");
        let frame = server().result_frame(&RequestId::Number(8), &result);
        let raw = String::from_utf8_lossy(frame.bytes()).into_owned();
        assert_eq!(raw.matches("\"resultType\":").count(), 1, "{raw}");
        let v = encoded(&result);
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(
            v["result"]["content"][0]["text"],
            "\"resultType\" and \"_meta\""
        );
        assert_eq!(v["result"]["_meta"], info);
        // Plain text without either key takes the splice.
        let v = encoded(&CallToolResult::text("hello"));
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(v["result"]["content"][0]["text"], "hello");
        assert_eq!(v["result"]["_meta"], info);
        // An input_required result keeps its own resultType.
        let mut asking = CallToolResult::text("x");
        asking.result_type = toolgate_protocol::types::ResultType::InputRequired;
        let v = encoded(&asking);
        assert_eq!(v["result"]["resultType"], "input_required");
        assert_eq!(v["result"]["_meta"], info);
    }
}
