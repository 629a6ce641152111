//! Prometheus metrics: calls by upstream, tool and status; latency;
//! confirmations; validation failures; upstream restarts.
//!
//! Fed by the same [`CallLog`] hook as the audit store ([`Recorder`]), so
//! a call counts exactly when it is recorded. `toolgate serve --metrics
//! ADDR` serves [`Metrics::encode`] at `/metrics`.
//!
//! Layer: `call`.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use toolgate_server::{Begun, CallLog, CallRecord, Recorded};

use crate::store::AuditRows;

use crate::store::audit::row_of;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    /// The named endpoint the call came through; empty on the default one.
    endpoint: String,
    upstream: String,
    tool: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ValidationLabels {
    upstream: String,
    kind: String,
}

/// What the metrics and the loop breaker look at in a recorded call,
/// borrowed from it (its audit row would copy every field), read as
/// [`row_of`] reads it.
struct Seen<'a> {
    caller: Option<&'a str>,
    endpoint: &'a str,
    upstream: &'a str,
    tool: &'a str,
    digest: &'a str,
    status: &'a str,
    confirmation: Option<&'a str>,
    cost: Option<f64>,
    failure: Option<&'a str>,
}

impl<'a> Seen<'a> {
    fn of(record: &'a CallRecord) -> Self {
        let note = |key: &str| record.notes.get(key).and_then(serde_json::Value::as_str);
        Seen {
            caller: record.caller.as_deref(),
            endpoint: note("endpoint").unwrap_or_default(),
            upstream: note("upstream").unwrap_or_default(),
            tool: &record.tool,
            digest: &record.arguments_digest,
            status: note("status").unwrap_or(record.outcome.as_str()),
            confirmation: note("confirmation"),
            cost: record.notes.get("cost").and_then(serde_json::Value::as_f64),
            failure: note("failure"),
        }
    }
}

/// The gateway's metrics.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    latency: Family<UpstreamLabels, Histogram>,
    confirmations: Family<OutcomeLabels, Counter>,
    validation: Family<ValidationLabels, Counter>,
    restarts: Family<UpstreamLabels, Counter>,
    spent: Family<SpendLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpendLabels {
    endpoint: String,
    upstream: String,
    tool: String,
}

fn latency_histogram() -> Histogram {
    // 0.25 ms to about 8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("toolgate");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls by endpoint (empty: the default one), upstream, tool and status",
            calls.clone(),
        );
        let latency = Family::<UpstreamLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "call_duration_seconds",
            "Time from taking a call to its answer, by upstream",
            latency.clone(),
        );
        let confirmations = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "confirmations",
            "Approval questions by outcome: asked, approved, declined, cancelled, unsolicited (replayed rounds are calls of status replayed)",
            confirmations.clone(),
        );
        let validation = Family::<ValidationLabels, Counter>::default();
        registry.register(
            "validation_failures",
            "Calls refused for invalid arguments, and results withheld for breaking their outputSchema",
            validation.clone(),
        );
        let restarts = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "upstream_restarts",
            "Connections to an upstream after its first",
            restarts.clone(),
        );
        let spent = Family::<SpendLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "spent",
            "What calls cost under their [[budget]], by endpoint, upstream and tool (in each budget's unit)",
            spent.clone(),
        );
        Self {
            registry,
            calls,
            latency,
            confirmations,
            validation,
            restarts,
            spent,
        }
    }
}

impl Metrics {
    /// Count one recorded call.
    pub fn observe(&self, record: &CallRecord) {
        self.count(&Seen::of(record), record.elapsed);
    }

    /// Count one call from what was seen of it.
    fn count(&self, seen: &Seen<'_>, elapsed: std::time::Duration) {
        let upstream = seen.upstream;
        self.calls
            .get_or_create(&CallLabels {
                endpoint: seen.endpoint.to_owned(),
                upstream: upstream.to_owned(),
                tool: seen.tool.to_owned(),
                status: seen.status.to_owned(),
            })
            .inc();
        self.latency
            .get_or_create(&UpstreamLabels {
                upstream: upstream.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
        if let Some(outcome) = seen.confirmation {
            self.confirmations
                .get_or_create(&OutcomeLabels {
                    outcome: outcome.to_owned(),
                })
                .inc();
        }
        if let Some(cost) = seen.cost.filter(|c| *c > 0.0) {
            self.spent
                .get_or_create(&SpendLabels {
                    endpoint: seen.endpoint.to_owned(),
                    upstream: upstream.to_owned(),
                    tool: seen.tool.to_owned(),
                })
                .inc_by(cost);
        }
        if matches!(seen.status, "invalid_arguments" | "output_invalid") {
            self.validation
                .get_or_create(&ValidationLabels {
                    upstream: upstream.to_owned(),
                    kind: seen.status.to_owned(),
                })
                .inc();
        }
    }

    /// Count a reconnection to `upstream`.
    pub fn restarted(&self, upstream: &str) {
        self.restarts
            .get_or_create(&UpstreamLabels {
                upstream: upstream.to_owned(),
            })
            .inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Which upstream serves a gateway tool.
pub type UpstreamOf = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The gateway's [`CallLog`]: metrics, then the audit store (if any),
/// whose commit the answer waits for.
pub struct Recorder {
    /// Where rows go.
    pub store: Option<Arc<dyn AuditRows>>,
    /// What is counted.
    pub metrics: Arc<Metrics>,
    /// Names the upstream of calls refused before the gateway's handler
    /// ran (invalid arguments, rate limits, withheld tools).
    pub upstream_of: UpstreamOf,
    /// Where failures are counted (`[loops]`).
    pub loops: Arc<crate::decide::loops::Loops>,
    /// The endpoint whose calls these are, when not the default one.
    pub endpoint: Option<EndpointTag>,
}

/// What a named endpoint's records carry: its name, and the gateway tool
/// behind each name its tools are called by.
#[derive(Clone)]
pub struct EndpointTag {
    /// `[endpoints.NAME]`.
    pub name: Arc<str>,
    /// The gateway tool name (`prefix.tool`) of a tool as called there.
    pub gateway_of: UpstreamOf,
}

impl Recorder {
    /// A call through an endpoint is counted and kept under the gateway
    /// tool it reached, with the endpoint and the name it was called by
    /// beside.
    fn tag(&self, record: &mut CallRecord) {
        let Some(endpoint) = &self.endpoint else {
            return;
        };
        record
            .notes
            .insert("endpoint".into(), endpoint.name.as_ref().into());
        if let Some(tool) = (endpoint.gateway_of)(&record.tool)
            && tool != record.tool
        {
            let shown = std::mem::replace(&mut record.tool, tool);
            record.notes.insert("shown".into(), shown.into());
        }
    }
}

impl CallLog for Recorder {
    fn wants_arguments(&self) -> bool {
        self.store.as_ref().is_some_and(|s| s.keeps_arguments())
    }

    fn record(&self, mut record: CallRecord) -> Recorded {
        self.tag(&mut record);
        if !record.notes.contains_key("upstream")
            && let Some(upstream) = (self.upstream_of)(&record.tool)
        {
            record.notes.insert("upstream".into(), upstream.into());
        }
        let seen = Seen::of(&record);
        self.metrics.count(&seen, record.elapsed);
        self.loops.observe(
            seen.caller,
            seen.tool,
            seen.digest,
            seen.status,
            seen.failure,
        );
        // The row copies the record: built only when there is a store.
        let Some(store) = &self.store else {
            return Box::pin(async { Ok(()) });
        };
        let row = row_of(&record);
        let written = match record.begun {
            Some(id) => store.complete(id, row),
            None => store.write(row),
        };
        Box::pin(async move { Ok(written.await?) })
    }

    fn writes_ahead(&self) -> bool {
        self.store.is_some()
    }

    /// A forwarded call's row, `forwarded` until its outcome completes it.
    fn begin(&self, mut record: CallRecord) -> Begun {
        let Some(store) = &self.store else {
            return Box::pin(async { Ok(None) });
        };
        self.tag(&mut record);
        if !record.notes.contains_key("upstream")
            && let Some(upstream) = (self.upstream_of)(&record.tool)
        {
            record.notes.insert("upstream".into(), upstream.into());
        }
        let mut row = row_of(&record);
        row.status = FORWARDED.to_owned();
        let written = store.begin(row);
        Box::pin(async move { Ok(Some(written.await?)) })
    }
}

/// The status of a row written ahead of its forward: it stays so when the
/// gateway stopped before the answer came back.
pub const FORWARDED: &str = "forwarded";

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use serde_json::{Map, json};
    use toolgate_server::CallOutcome;

    use super::*;

    #[test]
    fn a_recorded_call_is_counted_by_status_and_confirmation() {
        let metrics = Metrics::default();
        let mut notes = Map::new();
        notes.insert("upstream".into(), json!("shop"));
        notes.insert("confirmation".into(), json!("approved"));
        let record = CallRecord {
            started: SystemTime::now(),
            elapsed: Duration::from_millis(3),
            tool: "shop.order".into(),
            caller: None,
            arguments_digest: "d".into(),
            arguments: None,
            outcome: CallOutcome::Ok,
            notes,
            begun: None,
        };
        metrics.observe(&record);
        let mut invalid = record.clone();
        invalid.outcome = CallOutcome::InvalidArguments;
        invalid.notes.remove("confirmation");
        metrics.observe(&invalid);
        metrics.restarted("shop");
        let mut through = record.clone();
        through.notes.insert("endpoint".into(), json!("coding"));
        metrics.observe(&through);
        let text = metrics.encode();
        for line in [
            "toolgate_calls_total{endpoint=\"\",upstream=\"shop\",tool=\"shop.order\",status=\"ok\"} 1",
            "toolgate_calls_total{endpoint=\"coding\",upstream=\"shop\",tool=\"shop.order\",status=\"ok\"} 1",
            "toolgate_confirmations_total{outcome=\"approved\"} 2",
            "toolgate_validation_failures_total{upstream=\"shop\",kind=\"invalid_arguments\"} 1",
            "toolgate_upstream_restarts_total{upstream=\"shop\"} 1",
            "toolgate_call_duration_seconds_count{upstream=\"shop\"} 3",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }

    #[test]
    fn what_the_metrics_see_is_what_the_audit_row_says() {
        let mut notes = Map::new();
        for (key, value) in [
            ("upstream", json!("shop")),
            ("status", json!("loop")),
            ("confirmation", json!("declined")),
            ("cost", json!(2.5)),
            ("failure", json!("no such city")),
        ] {
            notes.insert(key.into(), value);
        }
        let record = CallRecord {
            started: SystemTime::now(),
            elapsed: Duration::from_millis(3),
            tool: "shop.order".into(),
            caller: Some("ann".into()),
            arguments_digest: "d".into(),
            arguments: None,
            outcome: CallOutcome::ToolError,
            notes,
            begun: None,
        };
        let (seen, row) = (Seen::of(&record), row_of(&record));
        assert_eq!(seen.caller, row.caller.as_deref());
        assert_eq!(Some(seen.upstream), row.upstream.as_deref());
        assert_eq!(
            (seen.tool, seen.digest),
            (&*row.tool, &*row.arguments_digest)
        );
        assert_eq!(seen.status, row.status);
        assert_eq!(seen.confirmation, row.confirmation.as_deref());
        assert_eq!(seen.cost, row.cost);
        assert_eq!(seen.failure, Some("no such city"));
        // Without notes: no upstream, and the outcome is the status.
        let mut bare = record.clone();
        bare.notes.clear();
        let (seen, row) = (Seen::of(&bare), row_of(&bare));
        assert_eq!((seen.upstream, row.upstream), ("", None));
        assert_eq!((seen.status, &*row.status), ("tool_error", "tool_error"));
    }
}
