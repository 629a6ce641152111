//! Reserved `_meta` keys and the metadata every 2026-07-28 request carries.
//!
//! The protocol is stateless: version, client identity and client
//! capabilities arrive with each request, never from an earlier one.
//! [`RequestMeta::from_raw`] is the single place they are read and checked:
//! from the text of a request's `_meta`, as the envelope parser keeps it
//! ([`RequestMeta::from_params`] reads a `params` value the same way).

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
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
        let meta = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| serde_json::value::to_raw_value(m).ok());
        Self::from_raw(meta.as_deref())
    }

    /// Read the metadata from a request's `_meta`, as the JSON text it was
    /// sent as (what [`parse_message`](crate::jsonrpc::parse_message) keeps
    /// in [`Request::meta`](crate::jsonrpc::Request::meta)). Only the
    /// reserved keys are read; the rest is passed over without being built.
    /// The rules are those of [`RequestMeta::from_params`].
    ///
    /// ```
    /// use toolgate_protocol::jsonrpc::{Incoming, parse_message};
    /// use toolgate_protocol::meta::RequestMeta;
    /// let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
    ///     "io.modelcontextprotocol/protocolVersion":"2026-07-28",
    ///     "io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    /// let Ok(Incoming::Request(req)) = parse_message(body) else { panic!() };
    /// let meta = RequestMeta::from_raw(req.meta.as_deref()).unwrap();
    /// assert_eq!(meta.protocol_version, "2026-07-28");
    /// ```
    pub fn from_raw(meta: Option<&RawValue>) -> Result<Self, RpcError> {
        // A client sends the same `_meta` with every request unless it asks
        // for progress or carries a trace. A text read twice in a row on
        // this thread is remembered with what it was read as; requiring two
        // sightings with no hit between keeps clients that take turns on one
        // thread from paying for a memo that never serves, or displacing one
        // that does.
        let text = meta.map(RawValue::get);
        let hit = MEMO.with_borrow_mut(|memo| {
            let read = memo
                .read
                .as_ref()
                .filter(|_| Some(memo.text.as_str()) == text)
                .cloned();
            if read.is_some() {
                // A memo that serves is kept: a text must now miss twice
                // with no hit between to replace it.
                memo.missed.clear();
            }
            read
        });
        if let Some(read) = hit {
            return Ok(read);
        }
        let read = Self::read_raw(meta)?;
        if let Some(text) = text.filter(|t| t.len() <= MEMO_MAX && read.is_memoizable()) {
            MEMO.with_borrow_mut(|memo| {
                if memo.missed == text {
                    memo.text.clear();
                    memo.text.push_str(text);
                    memo.read = Some(read.clone());
                } else {
                    memo.missed.clear();
                    memo.missed.push_str(text);
                }
            });
        }
        Ok(read)
    }

    /// Nothing in it is particular to one request.
    fn is_memoizable(&self) -> bool {
        self.progress_token.is_none() && self.trace.is_none()
    }

    fn read_raw(meta: Option<&RawValue>) -> Result<Self, RpcError> {
        let Some(meta) = meta else {
            return Err(RpcError::invalid_params(format!(
                "Missing params._meta: every request must carry \"{PROTOCOL_VERSION}\" and \"{CLIENT_CAPABILITIES}\""
            )));
        };
        let fields = match serde_json::from_str::<Reserved<'_>>(meta.get()) {
            Ok(Reserved::Object(fields)) => fields,
            Ok(Reserved::Other) => {
                return Err(RpcError::invalid_params("\"_meta\" must be an object"));
            }
            Err(_) => {
                return Err(RpcError::invalid_params(
                    "\"_meta\" could not be read (nested too deeply?)",
                ));
            }
        };
        let protocol_version = match fields.protocol_version {
            Some(v) => serde_json::from_str::<String>(v.get())
                .map_err(|_| field_error(PROTOCOL_VERSION, "a string"))?,
            None => return Err(missing(PROTOCOL_VERSION)),
        };
        // Typed straight from the text. Unlike a value, the text may repeat
        // a member; such an object is refused (RFC 8259 leaves its meaning
        // open).
        let client_capabilities = match fields.client_capabilities {
            Some(v) if v.get() == "{}" => ClientCapabilities::default(),
            Some(v) if v.get().starts_with('{') => serde_json::from_str(v.get())
                .map_err(|_| field_error(CLIENT_CAPABILITIES, "a ClientCapabilities object"))?,
            Some(_) => return Err(field_error(CLIENT_CAPABILITIES, "an object")),
            None => return Err(missing(CLIENT_CAPABILITIES)),
        };
        let client_info = match fields.client_info {
            None => None,
            Some(v) => Some(
                serde_json::from_str::<Implementation>(v.get()).map_err(|_| {
                    field_error(
                        CLIENT_INFO,
                        "an object with string \"name\" and \"version\"",
                    )
                })?,
            ),
        };
        let progress_token = match fields.progress_token.map(value) {
            None => None,
            Some(Some(Value::String(s))) => Some(ProgressToken::String(s)),
            Some(Some(Value::Number(n))) => match n.as_i64() {
                Some(n) => Some(ProgressToken::Number(n)),
                None => return Err(field_error(PROGRESS_TOKEN, "a string or an integer")),
            },
            Some(_) => return Err(field_error(PROGRESS_TOKEN, "a string or an integer")),
        };
        let log_level = match fields.log_level {
            None => None,
            Some(v) => Some(serde_json::from_str::<LoggingLevel>(v.get()).map_err(|_| {
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
            trace: fields.trace(),
        })
    }
}

/// Whether `_meta` (as sent) is an object that names a protocol version:
/// what marks a request of the stateless era, whatever else is wrong with
/// it.
pub fn declares_protocol_version(meta: Option<&RawValue>) -> bool {
    meta.is_some_and(|m| {
        matches!(
            serde_json::from_str::<Reserved<'_>>(m.get()),
            Ok(Reserved::Object(fields)) if fields.protocol_version.is_some()
        )
    })
}

/// The longest `_meta` text remembered (a larger one is read every time).
const MEMO_MAX: usize = 2048;

/// The `_meta` this thread remembers.
struct Memo {
    /// The text `read` was read from.
    text: String,
    read: Option<RequestMeta>,
    /// The last memoizable text read and not remembered, since the last hit.
    missed: String,
}

thread_local! {
    static MEMO: std::cell::RefCell<Memo> = const {
        std::cell::RefCell::new(Memo { text: String::new(), read: None, missed: String::new() })
    };
}

/// A reserved key's value as JSON, when it is readable as such.
fn value(raw: &RawValue) -> Option<Value> {
    serde_json::from_str(raw.get()).ok()
}

/// What `_meta` turned out to be: an object (its reserved keys picked out)
/// or anything else.
enum Reserved<'a> {
    Object(Box<Fields<'a>>),
    Other,
}

/// The reserved keys of a `_meta` object, each as sent. As in any JSON
/// object read here, the last of a repeated key wins.
#[derive(Default)]
struct Fields<'a> {
    protocol_version: Option<&'a RawValue>,
    client_capabilities: Option<&'a RawValue>,
    client_info: Option<&'a RawValue>,
    progress_token: Option<&'a RawValue>,
    log_level: Option<&'a RawValue>,
    traceparent: Option<&'a RawValue>,
    tracestate: Option<&'a RawValue>,
    baggage: Option<&'a RawValue>,
}

impl Fields<'_> {
    /// The trace context, read by the one reader of it from the three keys
    /// it uses.
    fn trace(&self) -> Option<crate::trace::TraceContext> {
        let traceparent = self.traceparent?;
        let mut keys = Map::new();
        for (key, raw) in [
            (crate::trace::TRACEPARENT, Some(traceparent)),
            (crate::trace::TRACESTATE, self.tracestate),
            (crate::trace::BAGGAGE, self.baggage),
        ] {
            if let Some(v) = raw.and_then(value) {
                keys.insert(key.to_owned(), v);
            }
        }
        crate::trace::TraceContext::from_meta(&keys)
    }
}

impl<'de> serde::Deserialize<'de> for Reserved<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ReservedVisitor)
    }
}

struct ReservedVisitor;

impl<'de> Visitor<'de> for ReservedVisitor {
    type Value = Reserved<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a _meta object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Box::<Fields<'de>>::default();
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key {
                Key::ProtocolVersion => &mut fields.protocol_version,
                Key::ClientCapabilities => &mut fields.client_capabilities,
                Key::ClientInfo => &mut fields.client_info,
                Key::ProgressToken => &mut fields.progress_token,
                Key::LogLevel => &mut fields.log_level,
                Key::Traceparent => &mut fields.traceparent,
                Key::Tracestate => &mut fields.tracestate,
                Key::Baggage => &mut fields.baggage,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value::<&'de RawValue>()?);
        }
        Ok(Reserved::Object(fields))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Reserved::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Reserved::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Reserved::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Reserved::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Reserved::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Reserved::Other)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Reserved::Other)
    }
}

/// A `_meta` key, matched without allocating (escaped keys included).
enum Key {
    ProtocolVersion,
    ClientCapabilities,
    ClientInfo,
    ProgressToken,
    LogLevel,
    Traceparent,
    Tracestate,
    Baggage,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a _meta key")
            }
            fn visit_str<E>(self, name: &str) -> Result<Key, E> {
                Ok(match name {
                    PROTOCOL_VERSION => Key::ProtocolVersion,
                    CLIENT_CAPABILITIES => Key::ClientCapabilities,
                    CLIENT_INFO => Key::ClientInfo,
                    PROGRESS_TOKEN => Key::ProgressToken,
                    LOG_LEVEL => Key::LogLevel,
                    crate::trace::TRACEPARENT => Key::Traceparent,
                    crate::trace::TRACESTATE => Key::Tracestate,
                    crate::trace::BAGGAGE => Key::Baggage,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(Name)
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
    fn reads_the_text_as_sent() {
        let raw = |text: &str| serde_json::from_str::<Box<RawValue>>(text).unwrap();
        // An escaped key is the same key; other keys, however deep, are
        // passed over.
        let m = RequestMeta::from_raw(Some(&raw(&format!(
            r#"{{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","x":{}{},
                "{CLIENT_CAPABILITIES}":{{}},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}"#,
            "[".repeat(5_000),
            "]".repeat(5_000)
        ))))
        .unwrap();
        assert_eq!(m.protocol_version, "2026-07-28");
        assert!(m.trace.is_some_and(|t| t.tracestate.is_none()));
        // Too deep where it must be read: a -32602 that says so.
        let deep = format!(
            r#"{{"{PROTOCOL_VERSION}":"v","{CLIENT_CAPABILITIES}":{{"experimental":{{"x":{}{}}}}}}}"#,
            "[".repeat(5_000),
            "]".repeat(5_000)
        );
        assert_eq!(
            RequestMeta::from_raw(Some(&raw(&deep))).unwrap_err().code,
            -32602
        );
        for bad in ["null", "[]", "\"v\"", "1"] {
            let e = RequestMeta::from_raw(Some(&raw(bad))).unwrap_err();
            assert_eq!(e.message, "\"_meta\" must be an object", "{bad}");
        }
        assert_eq!(RequestMeta::from_raw(None).unwrap_err().code, -32602);
    }

    #[test]
    fn capabilities_read_from_text_as_from_a_value() {
        let caps = |text: &str| {
            RequestMeta::from_raw(Some(
                &serde_json::from_str::<Box<RawValue>>(&format!(
                    r#"{{"{PROTOCOL_VERSION}":"v","{CLIENT_CAPABILITIES}":{text}}}"#
                ))
                .unwrap(),
            ))
            .map(|m| m.client_capabilities)
        };
        assert_eq!(caps("{}").unwrap(), caps("{ }").unwrap());
        assert_eq!(caps("{}").unwrap(), ClientCapabilities::default());
        assert!(
            caps(r#"{"elicitation":{"form":{}}}"#)
                .unwrap()
                .supports_elicitation_form()
        );
        // A repeated member has no agreed meaning: refused, not guessed.
        let e = caps(r#"{"roots":{},"roots":{}}"#).unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains(CLIENT_CAPABILITIES), "{}", e.message);
    }

    #[test]
    fn a_client_info_that_repeats_a_member_is_refused_by_name() {
        let raw = serde_json::from_str::<Box<RawValue>>(&format!(
            r#"{{"{PROTOCOL_VERSION}":"v","{CLIENT_CAPABILITIES}":{{}},
                "{CLIENT_INFO}":{{"name":"a","version":"1","name":"b"}}}}"#
        ))
        .unwrap();
        let e = RequestMeta::from_raw(Some(&raw)).unwrap_err();
        assert_eq!(e.code, -32602);
        assert_eq!(
            e.message,
            format!(
                "_meta field \"{CLIENT_INFO}\" must be an object with string \"name\" and \"version\""
            )
        );
    }

    #[test]
    fn a_version_key_marks_the_stateless_era() {
        let raw = |text: &str| serde_json::from_str::<Box<RawValue>>(text).unwrap();
        assert!(declares_protocol_version(Some(&raw(&format!(
            r#"{{"{PROTOCOL_VERSION}":1}}"#
        )))));
        assert!(!declares_protocol_version(Some(&raw(
            r#"{"progressToken":1}"#
        ))));
        assert!(!declares_protocol_version(Some(&raw(&format!(
            r#"["{PROTOCOL_VERSION}"]"#
        )))));
        assert!(!declares_protocol_version(None));
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

    /// Reads `text` as a request's `_meta`, through the memo.
    fn read_text(text: &str) -> Result<RequestMeta, RpcError> {
        let raw = serde_json::from_str::<Box<RawValue>>(text).unwrap();
        RequestMeta::from_raw(Some(&raw))
    }

    fn remembered() -> Option<String> {
        MEMO.with_borrow(|memo| memo.read.as_ref().map(|_| memo.text.clone()))
    }

    #[test]
    fn a_meta_read_twice_in_a_row_is_remembered_and_reads_the_same() {
        let a = format!(
            r#"{{"{PROTOCOL_VERSION}":"2026-07-28","{CLIENT_CAPABILITIES}":{{"elicitation":{{}}}},"{CLIENT_INFO}":{{"name":"a","version":"1"}},"{LOG_LEVEL}":"info"}}"#
        );
        let b = a.replace(r#""name":"a""#, r#""name":"b""#);
        let first = read_text(&a).unwrap();
        assert_eq!(remembered(), None, "remembered after one sighting");
        assert_eq!(read_text(&a).unwrap(), first);
        assert_eq!(remembered().as_deref(), Some(a.as_str()));
        // Served from the memo: the same as read.
        let again = read_text(&a).unwrap();
        assert_eq!(again, first);
        assert!(again.client_capabilities.supports_elicitation_form());
        assert_eq!(again.log_level, Some(LoggingLevel::Info));
        // Another text is read, never served the memo.
        let other = read_text(&b).unwrap();
        assert_eq!(other.client_info.unwrap().name, "b");
        // Clients taking turns leave the memo as it was.
        read_text(&a).unwrap();
        read_text(&b).unwrap();
        assert_eq!(remembered().as_deref(), Some(a.as_str()));
    }

    #[test]
    fn clients_taking_turns_from_the_start_leave_nothing_remembered() {
        let text = |name: &str| {
            format!(
                r#"{{"{PROTOCOL_VERSION}":"2026-07-28","{CLIENT_CAPABILITIES}":{{}},"{CLIENT_INFO}":{{"name":"{name}","version":"1"}}}}"#
            )
        };
        for _ in 0..3 {
            assert_eq!(
                read_text(&text("a")).unwrap().client_info.unwrap().name,
                "a"
            );
            assert_eq!(
                read_text(&text("b")).unwrap().client_info.unwrap().name,
                "b"
            );
        }
        assert_eq!(remembered(), None);
    }

    #[test]
    fn what_is_particular_to_a_request_or_refused_is_never_remembered() {
        let progress = format!(
            r#"{{"{PROTOCOL_VERSION}":"2026-07-28","{CLIENT_CAPABILITIES}":{{}},"{PROGRESS_TOKEN}":7}}"#
        );
        let traced = format!(
            r#"{{"{PROTOCOL_VERSION}":"2026-07-28","{CLIENT_CAPABILITIES}":{{}},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}"#
        );
        for text in [&progress, &traced] {
            let first = read_text(text).unwrap();
            assert_eq!(read_text(text).unwrap(), first);
            assert_eq!(remembered(), None, "{text}");
        }
        let refused = format!(r#"{{"{PROTOCOL_VERSION}":1,"{CLIENT_CAPABILITIES}":{{}}}}"#);
        for _ in 0..3 {
            assert_eq!(read_text(&refused).unwrap_err().code, -32602);
        }
        assert_eq!(remembered(), None);
        assert!(
            RequestMeta::from_raw(None).is_err(),
            "a missing _meta is refused"
        );
    }
}
