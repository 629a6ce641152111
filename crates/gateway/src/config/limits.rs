//! `[loops]` and `[[budget]]`: what repeated failures and what calls cost may do.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
