//! `[policy]`: which calls run, which are refused, which a person approves first.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_review::Effect;

/// What happens to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Forwarded at once.
    Allow,
    /// Forwarded once a person approves it.
    Confirm,
    /// Refused; the tool is not listed when the refusal does not depend on
    /// the caller.
    Deny,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Allow => "allow",
            Action::Confirm => "confirm",
            Action::Deny => "deny",
        })
    }
}

/// `[policy]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// What happens when no rule matches. Without it: allowed when the
    /// upstream is `trusted` and the tool says `readOnlyHint: true`,
    /// confirmed otherwise.
    pub default: Option<Action>,
    /// Checked in order; the first that matches decides.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

/// One `[[policy.rules]]` entry. Every condition given must hold; a
/// condition left out holds for every call.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Globs on the gateway tool name (`prefix.tool`); any of them.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Effect classes the audit crate finds in the tool's name and
    /// description; any of them.
    #[serde(default)]
    pub effects: Vec<Effect>,
    /// Globs on the caller's verified subject; any of them. A caller
    /// without a subject matches none.
    #[serde(default)]
    pub subjects: Vec<String>,
    /// Scopes the caller must all hold.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// What a matching call gets.
    pub action: Action,
    /// With `action = "confirm"`: the approval form also offers "this
    /// tool, any arguments, for this caller, for the next …" (`15m`, `1h`,
    /// at most `24h`). The grant is kept in the audit store and revoked
    /// with `toolgate grants --revoke ID`.
    pub remember: Option<String>,
}
