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
    /// Put the call log in front of the SQLite store: calls' rows are
    /// appended to a log beside it and indexed into it in the background.
    /// `process`: a row is written (`write(2)`) before its answer leaves,
    /// so killing the gateway loses no answered call, and synced within
    /// 10 ms; `sync`: the answer waits for the sync too. Unset: each row
    /// is committed to SQLite before its answer (the default, for now).
    pub durability: Option<AuditDurability>,
}

/// `[audit] durability`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuditDurability {
    /// Written before the answer; synced within 10 ms.
    Process,
    /// Synced before the answer (with the others of its group).
    Sync,
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
