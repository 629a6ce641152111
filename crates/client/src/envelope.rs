//! The params of an outgoing request, with the request's own `_meta`.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use toolgate_protocol::RequestId;
use toolgate_protocol::meta;
use toolgate_protocol::trace::TraceContext;
use toolgate_protocol::types::{ClientCapabilities, Implementation, LoggingLevel};

/// Request params with the request's `_meta` in place of any the caller
/// put there, serialized without copying the params (they may be large,
/// and a retry needs them again).
pub(crate) struct WithMeta<'a> {
    pub(crate) params: &'a Map<String, Value>,
    pub(crate) meta: Option<&'a RawValue>,
}

/// What one request's `_meta` says beyond what every request of the client
/// says.
pub(crate) struct RequestMeta<'a> {
    /// The protocol version; `None` for a legacy session, whose server
    /// learned the version, the client and its capabilities at
    /// `initialize`.
    pub(crate) version: Option<&'a str>,
    pub(crate) progress_token: Option<&'a RequestId>,
    /// Capabilities declared for this request instead of the client's.
    pub(crate) capabilities: Option<&'a ClientCapabilities>,
    pub(crate) log_level: Option<LoggingLevel>,
    pub(crate) trace: Option<&'a TraceContext>,
}

/// The client's part of every modern request's `_meta`, serialized once:
/// building it as a `Value` per request, then serializing that, cost 2 % of
/// a gateway's CPU per relayed call.
pub(crate) struct MetaText {
    info: String,
    capabilities: String,
}

impl MetaText {
    pub(crate) fn new(info: &Implementation, capabilities: &ClientCapabilities) -> Self {
        Self {
            info: serde_json::to_string(info).unwrap_or_else(|_| "null".into()),
            capabilities: serde_json::to_string(capabilities).unwrap_or_else(|_| "{}".into()),
        }
    }

    /// The request's `_meta` object, or `None` when it would be empty.
    pub(crate) fn render(&self, request: &RequestMeta<'_>) -> Option<Box<RawValue>> {
        let mut out = Members(Vec::with_capacity(
            96 + self.info.len() + self.capabilities.len(),
        ));
        if let Some(version) = request.version {
            out.value(meta::PROTOCOL_VERSION, &version);
            out.text(meta::CLIENT_INFO, &self.info);
            match request.capabilities {
                Some(capabilities) => out.value(meta::CLIENT_CAPABILITIES, capabilities),
                None => out.text(meta::CLIENT_CAPABILITIES, &self.capabilities),
            }
        }
        if let Some(token) = request.progress_token {
            out.value(meta::PROGRESS_TOKEN, token);
        }
        if let (Some(level), Some(_)) = (request.log_level, request.version) {
            out.value(meta::LOG_LEVEL, &level);
        }
        if let Some(trace) = request.trace {
            let mut members = Map::new();
            trace.write(&mut members);
            for (key, value) in &members {
                out.value(key, value);
            }
        }
        out.finish()
    }
}

/// The members of a JSON object, written one after another.
struct Members(Vec<u8>);

impl Members {
    fn key(&mut self, key: &str) {
        self.0.push(if self.0.is_empty() { b'{' } else { b',' });
        // Keys are the protocol's own names; serialized anyway, so that
        // one needing an escape would still come out right.
        let _ = serde_json::to_writer(&mut self.0, key);
        self.0.push(b':');
    }

    fn value(&mut self, key: &str, value: &impl Serialize) {
        let mark = self.0.len();
        self.key(key);
        if serde_json::to_writer(&mut self.0, value).is_err() {
            self.0.truncate(mark);
        }
    }

    /// A member whose value is JSON text already.
    fn text(&mut self, key: &str, json: &str) {
        self.key(key);
        self.0.extend_from_slice(json.as_bytes());
    }

    fn finish(mut self) -> Option<Box<RawValue>> {
        if self.0.is_empty() {
            return None;
        }
        self.0.push(b'}');
        let text = String::from_utf8(self.0).ok()?;
        RawValue::from_string(text).ok()
    }
}

impl serde::Serialize for WithMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in self.params {
            if self.meta.is_none() || k != "_meta" {
                map.serialize_entry(k, v)?;
            }
        }
        if let Some(meta) = self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_protocol::types::ClientCapabilities;

    fn encoded(params: Value, meta: Option<Value>) -> Value {
        let params = params.as_object().cloned().unwrap_or_default();
        let meta = meta.and_then(|m| serde_json::value::to_raw_value(&m).ok());
        let with = WithMeta {
            params: &params,
            meta: meta.as_deref(),
        };
        serde_json::to_value(&with).unwrap_or(Value::Null)
    }

    fn rendered(text: &MetaText, request: &RequestMeta<'_>) -> Value {
        text.render(request)
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null)
    }

    fn client() -> MetaText {
        let info = Implementation {
            name: "c\"lient".into(),
            version: "1.0".into(),
            ..Default::default()
        };
        let capabilities = ClientCapabilities {
            extensions: Some(Map::from_iter([("x".to_owned(), json!({}))])),
            ..Default::default()
        };
        MetaText::new(&info, &capabilities)
    }

    fn bare() -> RequestMeta<'static> {
        RequestMeta {
            version: Some("2026-07-28"),
            progress_token: None,
            capabilities: None,
            log_level: None,
            trace: None,
        }
    }

    #[test]
    fn a_modern_request_names_the_version_the_client_and_its_capabilities() {
        assert_eq!(
            rendered(&client(), &bare()),
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "c\"lient", "version": "1.0"},
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {"x": {}}},
            })
        );
    }

    #[test]
    fn a_request_adds_its_own_members_and_may_declare_other_capabilities() {
        let id = RequestId::Number(7);
        let declared = ClientCapabilities::default();
        let trace = json!({
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
        });
        let trace = trace.as_object().and_then(TraceContext::from_meta);
        let request = RequestMeta {
            progress_token: Some(&id),
            capabilities: Some(&declared),
            log_level: Some(LoggingLevel::Debug),
            trace: trace.as_ref(),
            ..bare()
        };
        let meta = rendered(&client(), &request);
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        assert_eq!(meta["progressToken"], json!(7));
        assert_eq!(meta["io.modelcontextprotocol/logLevel"], json!("debug"));
        assert_eq!(
            meta["traceparent"],
            json!("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01")
        );
    }

    #[test]
    fn a_legacy_request_carries_only_its_progress_token_and_trace() {
        let legacy = RequestMeta {
            version: None,
            log_level: Some(LoggingLevel::Debug),
            ..bare()
        };
        assert!(client().render(&legacy).is_none());
        let id = RequestId::Number(3);
        let with_token = RequestMeta {
            progress_token: Some(&id),
            ..legacy
        };
        assert_eq!(
            rendered(&client(), &with_token),
            json!({"progressToken": 3})
        );
    }

    #[test]
    fn the_requests_meta_replaces_the_callers() {
        let out = encoded(
            json!({"name": "t", "_meta": {"caller": 1}}),
            Some(json!({"v": 2})),
        );
        assert_eq!(out, json!({"name": "t", "_meta": {"v": 2}}));
    }

    #[test]
    fn without_a_meta_the_callers_stays() {
        let out = encoded(json!({"name": "t", "_meta": {"caller": 1}}), None);
        assert_eq!(out, json!({"name": "t", "_meta": {"caller": 1}}));
        assert_eq!(encoded(json!({}), None), json!({}));
    }
}
