//! `[approval]` and `[console]`: where people approve calls and watch the gateway.
//!
//! Layer: `config`.

use schemars::JsonSchema;
use serde::Deserialize;

/// `[approval]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConfig {
    /// Serve the approval page (default false).
    #[serde(default)]
    pub page: bool,
    /// Where it listens (default `127.0.0.1:8790`; keep it on loopback
    /// unless a proxy in front authenticates people).
    pub listen: Option<String>,
    /// The address people open, when it differs from `http://LISTEN`
    /// (behind a proxy).
    pub url: Option<String>,
    /// Where the one-time login link is written (relative to the
    /// configuration file), readable by its owner only, and rewritten with
    /// a fresh link each time one is used (default: the link is only
    /// printed at start and logged anew).
    pub login_file: Option<std::path::PathBuf>,
}

/// `[console]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Where the console listens (default `127.0.0.1:8791`; keep it on
    /// loopback unless a proxy in front authenticates people). The
    /// approval page is then served here too.
    pub listen: Option<String>,
    /// The address people open, when it differs from `http://LISTEN`.
    pub url: Option<String>,
    /// With `[auth]`: the scope a person's token must carry to log in with
    /// it (at `/login`), beside the one-time link (default
    /// `toolgate:operator`). Their subject is recorded as who acted.
    pub operator_scope: Option<String>,
}
