//! What the gateway's API speaks in: why it could not start, the options
//! beyond the configuration file, and how each upstream is doing.
//!
//! Layer: `gateway`.

use std::time::Duration;

use toolgate_review::lock::LockFile;
use toolgate_server::{ServerConfig, Withheld};

/// A gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Two upstream tools would share a name.
    #[error(transparent)]
    Collision(#[from] crate::base::names::Collision),
    /// The server refused a registration or its configuration.
    #[error("{0}")]
    Server(#[from] toolgate_server::RegistrationError),
    /// The configuration is inconsistent.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A store could not be opened or reached.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The approval page's or the console's socket could not be bound.
    #[error("{what}")]
    Listen {
        /// Which section, and what address.
        what: String,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
}

/// Options beyond the configuration file.
#[derive(Clone, Default)]
pub struct GatewayOptions {
    /// Approved definitions: tools that differ from it, or are not in it,
    /// are withheld.
    pub lock: Option<LockFile>,
    /// Where the lock file is: approving a definition on the console
    /// writes it back there (without it, the approval lasts until the
    /// gateway stops).
    pub lock_file: Option<std::path::PathBuf>,
    /// The downstream server's settings (limits, timeouts, state key).
    pub server: ServerConfig,
    /// The first wait before restarting a failed upstream (default
    /// 250 ms); it doubles up to 30 s.
    pub restart_backoff: Option<Duration>,
    /// Started only to check the configuration (`toolgate serve --check`):
    /// the audit store is not opened — the gateway it checks for may be
    /// running, and writing it.
    pub check: bool,
    /// The program stdio servers with a `sandbox` are started through: a
    /// `toolgate` binary (its `sandbox exec` mode). `toolgate serve` sets
    /// it to itself; without it such a server is not started.
    pub launcher: Option<std::path::PathBuf>,
}

/// How one upstream is doing, for `toolgate serve --check`.
#[derive(Clone, Debug)]
pub struct UpstreamStatus {
    /// Its name (the configuration key).
    pub name: String,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    /// Started and served (`false`: kept in the configuration, disabled).
    pub enabled: bool,
    /// Tools offered through the gateway.
    pub offered: usize,
    /// Tools withheld for the lock file or an invalid definition.
    pub withheld: usize,
    /// Tools the policy denies to every caller (deliberate, not a fault).
    pub denied: usize,
    /// Why it is failing, if it is.
    pub error: Option<String>,
    /// The last lines a stdio upstream wrote to stderr (what to show when
    /// it fails).
    pub stderr: Vec<String>,
    /// How many times it was restarted since the gateway started.
    pub restarts: u64,
    /// While it is down: the wait before the next attempt to restart it.
    pub retry_in: Option<Duration>,
}

/// The status of an entry kept but not started.
pub(super) fn disabled_status(s: &crate::config::UpstreamConfig) -> UpstreamStatus {
    tracing::info!(server = %s.name, "disabled (enabled = false): not started");
    UpstreamStatus {
        name: s.name.clone(),
        transport: match (&s.url, s.transport) {
            (None, _) => "stdio",
            (Some(_), Some(crate::config::HttpKind::Sse)) => "sse",
            (Some(_), _) => "http",
        },
        enabled: false,
        offered: 0,
        withheld: 0,
        denied: 0,
        error: None,
        stderr: Vec::new(),
        restarts: 0,
        retry_in: None,
    }
}

/// Whether a withheld tool is withheld by the policy (not by the lock).
pub(super) fn is_denial(why: &Withheld) -> bool {
    why.notes.get("status").and_then(serde_json::Value::as_str) == Some("denied")
}
