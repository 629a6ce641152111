//! `[policy]`: which calls run, which are refused, which a person approves first.
//!
//! Layer: `config`.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_review::Effect;

use super::ConfigError;
use crate::base::duration::parse_duration;

/// The longest `remember` a rule may have: an approval that outlives a
/// working day is a policy decision, written as an `allow` rule.
pub const LONGEST: Duration = Duration::from_secs(24 * 3600);

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

impl PolicyConfig {
    /// Refuse, naming the rule, a glob that would not compile or would
    /// match nothing, and a `remember` that is not a span of 1m to 24h on
    /// a `confirm` rule.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        for (i, rule) in self.rules.iter().enumerate() {
            rule.tool_globs(i)?;
            rule.subject_globs(i)?;
            rule.remember_span(i)?;
        }
        Ok(())
    }
}

impl RuleConfig {
    /// `tools`, compiled; `i` is the rule's index, for messages.
    pub(crate) fn tool_globs(&self, i: usize) -> Result<Vec<glob::Pattern>, ConfigError> {
        globs(&self.tools, |what| rule_error(i, what))
    }

    /// `subjects`, compiled.
    pub(crate) fn subject_globs(&self, i: usize) -> Result<Vec<glob::Pattern>, ConfigError> {
        globs(&self.subjects, |what| rule_error(i, what))
    }

    /// How long a remembered approval lasts, when the rule offers one.
    pub(crate) fn remember_span(&self, i: usize) -> Result<Option<Duration>, ConfigError> {
        let Some(text) = &self.remember else {
            return Ok(None);
        };
        if self.action != Action::Confirm {
            return Err(rule_error(
                i,
                format!(
                    "remember applies to approvals, so only to action = \"confirm\" (this rule says {:?})",
                    self.action.to_string()
                ),
            ));
        }
        let span = parse_duration(text).map_err(|e| rule_error(i, format!("remember: {e}")))?;
        if span < Duration::from_secs(60) || span > LONGEST {
            return Err(rule_error(
                i,
                format!(
                    "remember = {text:?}: give between 1m and 24h (a longer approval is an allow rule)"
                ),
            ));
        }
        Ok(Some(span))
    }
}

fn rule_error(i: usize, what: String) -> ConfigError {
    ConfigError::new(format!("policy rule {}: {what}", i + 1))
}

/// `globs`, compiled; a bad one is said by `at` (given what is wrong).
pub(crate) fn globs(
    globs: &[String],
    at: impl Fn(String) -> ConfigError,
) -> Result<Vec<glob::Pattern>, ConfigError> {
    globs
        .iter()
        .map(|g| {
            if let Some(why) = unsupported(g) {
                return Err(at(format!("glob {g:?}: {why}")));
            }
            glob::Pattern::new(g).map_err(|e| at(format!("glob {g:?}: {e}")))
        })
        .collect()
}

/// Why `glob` is refused although the glob crate would compile it: syntax
/// of other glob dialects that this one reads as literal characters, so
/// the rule would silently match nothing.
pub(crate) fn unsupported(glob: &str) -> Option<&'static str> {
    if glob.contains('{') || glob.contains('}') {
        return Some(
            "braces are not supported (the pattern would match only a name with a literal brace); write one glob per alternative, e.g. [\"rec.wipe\", \"rec.delete_all\"]",
        );
    }
    None
}
