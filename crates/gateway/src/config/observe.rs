//! `[audit]` and `[telemetry]`: where calls are recorded and traced.
//!
//! Layer: `config`.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[audit]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// The database file (default `toolgate-audit.db` beside the
    /// configuration file).
    pub path: Option<PathBuf>,
    /// Keep each call's arguments, not only their digest (default false:
    /// arguments may hold personal data or secrets).
    #[serde(default)]
    pub arguments: bool,
    /// Keep no audit store at all (default false).
    #[serde(default)]
    pub disabled: bool,
    /// When a call's row is kept. `process` (the default): appended to the
    /// call log beside the SQLite store (`write(2)` done) before its answer
    /// leaves, so killing the gateway loses no answered call, and synced
    /// within 10 ms (a power loss loses at most that window); the store is
    /// fed from the log in the background. `sync`: the answer waits for the
    /// log's sync too (shared by the calls of its group). `commit`: no call
    /// log; each row committed to SQLite before its answer. A store keeps
    /// one call log: unset, a gateway that finds another's log on its store
    /// (hosts that each start `serve --stdio` on one configuration) commits
    /// each row beside it; `process` or `sync` set is refused then. The
    /// PostgreSQL store commits each row.
    pub durability: Option<AuditDurability>,
    /// The most of the call log that may wait to be indexed (default
    /// "64 MiB"): past it — the store has not been taking records — new
    /// calls are refused until it catches up.
    pub backlog: Option<crate::config::ByteSize>,
}

/// `[audit] durability`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuditDurability {
    /// Written before the answer; synced within 10 ms.
    Process,
    /// Synced before the answer (with the others of its group).
    Sync,
    /// No call log: committed to SQLite before the answer.
    Commit,
}

/// `[telemetry]`.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP collector (`http://host:4318`; `/v1/traces` is
    /// appended unless the URL already ends with it). Without it, no
    /// traces are exported.
    pub otlp: Option<String>,
    /// `service.name` of the spans (default `toolgate-gateway`).
    pub service_name: Option<String>,
}

/// The collector's URL with its credentials masked, as every URL a
/// configuration prints.
impl std::fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryConfig")
            .field(
                "otlp",
                &self.otlp.as_deref().map(toolgate_protocol::redact::url),
            )
            .field("service_name", &self.service_name)
            .finish()
    }
}
