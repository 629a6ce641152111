//! W3C trace context in `_meta` (`traceparent`, `tracestate`, `baggage`):
//! the keys the specification reserves for OpenTelemetry propagation. A
//! value that does not follow its W3C format is dropped, never passed on.

use serde_json::{Map, Value};

/// `_meta` key: the W3C `traceparent`.
pub const TRACEPARENT: &str = "traceparent";
/// `_meta` key: the W3C `tracestate`.
pub const TRACESTATE: &str = "tracestate";
/// `_meta` key: W3C baggage.
pub const BAGGAGE: &str = "baggage";

/// The longest `tracestate` or `baggage` kept (the W3C limits).
const MAX_STATE: usize = 512;
const MAX_BAGGAGE: usize = 8192;

/// A request's trace context.
///
/// ```
/// use toolgate_protocol::trace::TraceContext;
/// let t = TraceContext::parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01").unwrap();
/// assert_eq!(t.trace_id(), "0af7651916cd43dd8448eb211c80319c");
/// assert!(TraceContext::parse_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// `traceparent`: version, trace id, parent id, flags.
    pub traceparent: String,
    /// `tracestate`, if any.
    pub tracestate: Option<String>,
    /// `baggage`, if any.
    pub baggage: Option<String>,
}

fn hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl TraceContext {
    /// A context from a `traceparent` alone, if it is well formed (a
    /// version other than `ff`, non-zero ids, lowercase hex).
    pub fn parse_traceparent(value: &str) -> Option<Self> {
        let mut parts = value.split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let known = version == "00";
        // Version 00 has exactly four parts; later versions may add more.
        if (known && parts.next().is_some()) || !hex(version, 2) || version == "ff" {
            return None;
        }
        if !hex(trace, 32) || !hex(parent, 16) || !hex(flags, 2) {
            return None;
        }
        if trace.bytes().all(|b| b == b'0') || parent.bytes().all(|b| b == b'0') {
            return None;
        }
        Some(Self {
            traceparent: value.to_owned(),
            tracestate: None,
            baggage: None,
        })
    }

    /// A context for a new span `span_id` of trace `trace_id` (hex).
    pub fn child(trace_id: &str, span_id: &str, sampled: bool) -> Option<Self> {
        Self::parse_traceparent(&format!(
            "00-{trace_id}-{span_id}-{:02x}",
            u8::from(sampled)
        ))
    }

    /// The trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        self.traceparent.get(3..35).unwrap_or_default()
    }

    /// The parent span id (16 hex digits).
    pub fn parent_id(&self) -> &str {
        self.traceparent.get(36..52).unwrap_or_default()
    }

    /// Whether the caller sampled the trace.
    pub fn sampled(&self) -> bool {
        self.traceparent
            .get(53..55)
            .and_then(|f| u8::from_str_radix(f, 16).ok())
            .is_some_and(|f| f & 1 == 1)
    }

    /// The context in a request's `_meta`, if there is a valid one.
    pub fn from_meta(meta: &Map<String, Value>) -> Option<Self> {
        let mut context = Self::parse_traceparent(meta.get(TRACEPARENT)?.as_str()?)?;
        let text = |key: &str, max: usize| {
            meta.get(key)
                .and_then(Value::as_str)
                .filter(|v| v.len() <= max && v.bytes().all(|b| (0x20..0x7f).contains(&b)))
                .map(str::to_owned)
        };
        context.tracestate = text(TRACESTATE, MAX_STATE);
        context.baggage = text(BAGGAGE, MAX_BAGGAGE);
        Some(context)
    }

    /// Put the context into a `_meta` object.
    pub fn write(&self, meta: &mut Map<String, Value>) {
        meta.insert(TRACEPARENT.into(), self.traceparent.clone().into());
        if let Some(state) = &self.tracestate {
            meta.insert(TRACESTATE.into(), state.clone().into());
        }
        if let Some(baggage) = &self.baggage {
            meta.insert(BAGGAGE.into(), baggage.clone().into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_well_formed_contexts_are_read_and_passed_on() {
        let meta = json!({
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
            "tracestate": "vendor=value",
            "baggage": "user=\u{1b}[2J",
        });
        let t =
            TraceContext::from_meta(meta.as_object().unwrap_or(&Map::new())).unwrap_or_default();
        assert_eq!(t.parent_id(), "00f067aa0ba902b7");
        assert!(t.sampled());
        assert_eq!(t.tracestate.as_deref(), Some("vendor=value"));
        assert_eq!(t.baggage, None, "control characters: dropped");
        for bad in [
            "00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-extra",
            "00-0af7651916cd43dd-00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert!(TraceContext::parse_traceparent(bad).is_none(), "{bad}");
        }
        let mut out = Map::new();
        t.write(&mut out);
        assert_eq!(out["traceparent"], meta["traceparent"]);
        assert!(!out.contains_key("baggage"));
    }
}
