//! Prometheus metrics: calls by upstream, tool and status; latency;
//! confirmations; validation failures; upstream restarts.
//!
//! Fed by the same [`CallLog`] hook as the audit store ([`Recorder`]), so
//! a call counts exactly when it is recorded. `toolgate serve --metrics
//! ADDR` serves [`Metrics::encode`] at `/metrics`.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use toolgate_server::{Begun, CallLog, CallRecord, Recorded};

use crate::audit::{AuditRow, AuditSink, row_of};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
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
            "Tool calls by upstream, tool and status",
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
            "What calls cost under their [[budget]], by upstream and tool (in each budget's unit)",
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
        self.count(&row_of(record), record.elapsed);
    }

    /// Count one call from its audit row.
    fn count(&self, row: &AuditRow, elapsed: std::time::Duration) {
        let upstream = row.upstream.clone().unwrap_or_default();
        self.calls
            .get_or_create(&CallLabels {
                upstream: upstream.clone(),
                tool: row.tool.clone(),
                status: row.status.clone(),
            })
            .inc();
        self.latency
            .get_or_create(&UpstreamLabels {
                upstream: upstream.clone(),
            })
            .observe(elapsed.as_secs_f64());
        if let Some(outcome) = &row.confirmation {
            self.confirmations
                .get_or_create(&OutcomeLabels {
                    outcome: outcome.clone(),
                })
                .inc();
        }
        if let Some(cost) = row.cost.filter(|c| *c > 0.0) {
            self.spent
                .get_or_create(&SpendLabels {
                    upstream: upstream.clone(),
                    tool: row.tool.clone(),
                })
                .inc_by(cost);
        }
        if matches!(row.status.as_str(), "invalid_arguments" | "output_invalid") {
            self.validation
                .get_or_create(&ValidationLabels {
                    upstream,
                    kind: row.status.clone(),
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
    pub store: Option<Arc<dyn AuditSink>>,
    /// What is counted.
    pub metrics: Arc<Metrics>,
    /// Names the upstream of calls refused before the gateway's handler
    /// ran (invalid arguments, rate limits, withheld tools).
    pub upstream_of: UpstreamOf,
    /// Where failures are counted (`[loops]`).
    pub loops: Arc<crate::loops::Loops>,
}

impl CallLog for Recorder {
    fn wants_arguments(&self) -> bool {
        self.store.as_ref().is_some_and(|s| s.keeps_arguments())
    }

    fn record(&self, mut record: CallRecord) -> Recorded {
        if !record.notes.contains_key("upstream")
            && let Some(upstream) = (self.upstream_of)(&record.tool)
        {
            record.notes.insert("upstream".into(), upstream.into());
        }
        let row = row_of(&record);
        self.metrics.count(&row, record.elapsed);
        self.loops.observe(
            row.caller.as_deref(),
            &row.tool,
            &row.arguments_digest,
            &row.status,
            record
                .notes
                .get("failure")
                .and_then(serde_json::Value::as_str),
        );
        let written = match (&self.store, record.begun) {
            (Some(store), Some(id)) => store.complete(id, row),
            (Some(store), None) => store.write(row),
            (None, _) => return Box::pin(async { Ok(()) }),
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
        let text = metrics.encode();
        for line in [
            "toolgate_calls_total{upstream=\"shop\",tool=\"shop.order\",status=\"ok\"} 1",
            "toolgate_confirmations_total{outcome=\"approved\"} 1",
            "toolgate_validation_failures_total{upstream=\"shop\",kind=\"invalid_arguments\"} 1",
            "toolgate_upstream_restarts_total{upstream=\"shop\"} 1",
            "toolgate_call_duration_seconds_count{upstream=\"shop\"} 2",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}
