//! `[ratelimit]`, `[loops]` and `[[budget]]`: how often a caller may call,
//! what repeated failures and what calls cost may do.
//!
//! Layer: `config`.

use std::collections::HashSet;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConfigError, err};
use crate::base::duration::parse_duration;

/// The `[loops]` window when none is given.
const DEFAULT_WINDOW: Duration = Duration::from_secs(600);

/// `[loops]` (off unless a limit is given).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopsConfig {
    /// The same caller, tool and arguments failing this many times within
    /// `window`: the next identical call is not forwarded.
    pub identical_failures: Option<u32>,
    /// One caller's failures of one tool, whatever the arguments, within
    /// `window`: past this many, no call of the tool by that caller is
    /// forwarded until the window moves on or a call succeeds.
    pub tool_failures: Option<u32>,
    /// How far back failures count (`90s`, `10m`, `1h`; default `10m`).
    pub window: Option<String>,
}

/// One `[[budget]]`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Globs on the gateway tool name; the first budget whose globs match
    /// a tool is its budget.
    pub tools: Vec<String>,
    /// What the budget is called in answers and in the store (default: its
    /// globs, joined with commas). Spending is kept under this name, so
    /// keep it when editing the globs.
    pub name: Option<String>,
    /// What one successful call costs.
    pub cost: Option<f64>,
    /// Where the result says what it cost instead: `_meta/KEY`, a number
    /// in the result's `_meta` (a missing or unreadable one costs 0, and is
    /// logged).
    pub cost_from: Option<String>,
    /// The unit, in answers and descriptions (default `credits`).
    pub unit: Option<String>,
    /// The most one caller may spend per period (callers without a verified
    /// subject share one).
    pub per_caller: Option<Cap>,
    /// The most all callers together may spend per period.
    pub total: Option<Cap>,
}

/// A cap: `{ amount = 1000, per = "day" }`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cap {
    /// The most that may be spent in one period.
    pub amount: f64,
    /// The period (UTC, calendar-aligned).
    pub per: Period,
}

/// A budget's period, in UTC: a day starts at midnight, a month on the 1st.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// A clock minute.
    Minute,
    /// A clock hour.
    Hour,
    /// A UTC day.
    Day,
    /// A calendar month.
    Month,
}

impl LoopsConfig {
    /// How far back failures count, once the section is checked: a window
    /// that is not a duration of 1s or more, or a limit of 0, is an error
    /// naming it.
    pub(crate) fn checked_window(&self) -> Result<Duration, ConfigError> {
        let window = match &self.window {
            Some(text) => parse_duration(text)
                .map_err(|e| ConfigError::new(format!("[loops] window: {e}")))?,
            None => DEFAULT_WINDOW,
        };
        if window.is_zero() {
            return Err(ConfigError::new("[loops] window must be at least 1s"));
        }
        for (key, value) in [
            ("identical_failures", self.identical_failures),
            ("tool_failures", self.tool_failures),
        ] {
            if value == Some(0) {
                return Err(ConfigError::new(format!(
                    "[loops] {key} must be at least 1 (leave it out to not count)"
                )));
            }
        }
        Ok(window)
    }
}

/// What a budgeted call costs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cost {
    /// The same for every successful call.
    Fixed(f64),
    /// A key of the result's `_meta`.
    Reported(String),
}

/// One `[[budget]]`, checked: its globs compiled, its cost and caps read.
#[derive(Debug)]
pub(crate) struct CheckedBudget {
    pub(crate) name: String,
    pub(crate) tools: Vec<glob::Pattern>,
    pub(crate) cost: Cost,
    pub(crate) unit: String,
    pub(crate) per_caller: Option<Cap>,
    pub(crate) total: Option<Cap>,
}

/// Check `[[budget]]`: each names its tools, gives one cost and a cap of
/// more than 0, and has a name no other budget has.
pub(crate) fn check_budgets(configs: &[BudgetConfig]) -> Result<Vec<CheckedBudget>, ConfigError> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    for (i, c) in configs.iter().enumerate() {
        let at = |what: String| ConfigError::new(format!("budget {}: {what}", i + 1));
        if c.tools.is_empty() {
            return Err(at("tools is empty; name the tools it covers".into()));
        }
        let tools = super::policy::globs(&c.tools, at)?;
        let cost = match (c.cost, &c.cost_from) {
            (Some(n), None) if n.is_finite() && n >= 0.0 => Cost::Fixed(n),
            (Some(n), None) => return Err(at(format!("cost {n} is not a number of 0 or more"))),
            (None, Some(path)) => match path.strip_prefix("_meta/") {
                Some(key) if !key.is_empty() => Cost::Reported(key.to_owned()),
                _ => {
                    return Err(at(format!(
                        "cost_from {path:?}: write _meta/KEY, a key of the result's _meta"
                    )));
                }
            },
            (Some(_), Some(_)) => return Err(at("give cost or cost_from, not both".into())),
            (None, None) => return Err(at("give cost (per successful call) or cost_from".into())),
        };
        if c.per_caller.is_none() && c.total.is_none() {
            return Err(at(
                "give per_caller or total (or both): a budget caps spending".into(),
            ));
        }
        for cap in [c.per_caller, c.total].into_iter().flatten() {
            if !(cap.amount.is_finite() && cap.amount > 0.0) {
                return Err(at(format!("amount {} must be more than 0", cap.amount)));
            }
        }
        let name = c.name.clone().unwrap_or_else(|| c.tools.join(","));
        if !names.insert(name.clone()) {
            return Err(at(format!("the name {name:?} is another budget's too")));
        }
        out.push(CheckedBudget {
            name,
            tools,
            cost,
            unit: c.unit.clone().unwrap_or_else(|| "credits".into()),
            per_caller: c.per_caller,
            total: c.total,
        });
    }
    Ok(out)
}

/// `[ratelimit]`.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Checked in order; the first whose globs match a tool sets its limit.
    #[serde(default)]
    pub rules: Vec<RateLimitRule>,
    /// `redis://[:password@]host[:port][/db]`: every budget (these rules'
    /// and each upstream's `per_minute`) is kept there, shared by every
    /// instance. Write the password as `${VAR}`.
    pub redis: Option<String>,
    /// What happens to a call while Redis cannot be asked: `refuse` (the
    /// default: fail closed) or `allow` (unlimited until it is back).
    #[serde(default)]
    pub on_outage: OnOutage,
}

/// `[ratelimit] on_outage`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnOutage {
    /// Refuse the call (fail closed).
    #[default]
    Refuse,
    /// Let it through, unlimited, and log that it was.
    Allow,
}

impl std::fmt::Debug for RateLimitConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitConfig")
            .field("rules", &self.rules)
            .field(
                "redis",
                &self.redis.as_deref().map(crate::base::redact::store_url),
            )
            .field("on_outage", &self.on_outage)
            .finish()
    }
}

impl RateLimitConfig {
    /// The rate limit of the gateway tool `name`, per caller: the first
    /// matching rule's.
    pub fn per_minute(&self, name: &str) -> Option<u32> {
        first_rule(&self.rules, name)
    }
}

/// The calls per minute of the first of `rules` whose globs match `name`.
pub(super) fn first_rule(rules: &[RateLimitRule], name: &str) -> Option<u32> {
    rules
        .iter()
        .find(|r| {
            r.tools
                .iter()
                .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(name)))
        })
        .map(|r| r.per_minute)
}

/// Refuse rate-limit rules that cannot work: no calls at all, a bad glob.
/// `what` names them (`ratelimit rule`), numbered from 1.
pub(super) fn check_rate_rules(rules: &[RateLimitRule], what: &str) -> Result<(), ConfigError> {
    for (i, rule) in rules.iter().enumerate() {
        if rule.per_minute == 0 {
            return Err(err(format!(
                "{what} {}: per_minute must be at least 1 (deny the tools in [policy] instead)",
                i + 1
            )));
        }
        for g in &rule.tools {
            glob::Pattern::new(g).map_err(|e| err(format!("{what} {}: glob {g:?}: {e}", i + 1)))?;
        }
    }
    Ok(())
}

/// One `[[ratelimit.rules]]` entry.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitRule {
    /// Globs on the gateway tool name.
    pub tools: Vec<String>,
    /// Calls per minute per caller and tool: a burst of this many, refilled
    /// at this rate (GCRA). Callers without a verified subject share one
    /// budget.
    pub per_minute: u32,
}
