//! Budgets: what calls cost, and a cap on what callers can spend.
//!
//! A good tool description states what the tool costs, so the model can
//! plan the cheaper path; operators need the other half, a cap. Each
//! `[[budget]]` names tools by glob, what a successful call costs (a fixed
//! `cost`, or `cost_from` the result's `_meta`), and caps per caller and
//! in total, per UTC minute, hour, day or month. A call that would go over
//! a cap is not forwarded: an `isError` says which budget, what is spent,
//! what is left and when it resets. A failed call (`isError`, an upstream
//! error) costs nothing. The terms are appended to the tool's description.
//!
//! Spending is kept in a [`Ledger`](crate::store::ledger::Ledger): the audit store (SQLite, or
//! PostgreSQL shared by instances), or this process's memory without one.
//! A call's cost is **reserved** before it is forwarded, in one atomic
//! step that checks every cap the call falls under and takes the cost from
//! all of them or none (SQLite: one savepoint on the single writer;
//! PostgreSQL: one function that locks the rows; memory: one lock), so
//! calls sent together, to one instance or to several sharing a store,
//! never spend more than the cap. The reservation is settled after the
//! call: kept on success, released when the call fails or is never sent.
//! A cost the upstream reports reserves nothing but is refused once the cap
//! is reached, and is charged atomically when known. A reservation whose
//! call's outcome never becomes known (the caller went away, the process
//! died) stays counted — closed, not open — and `toolgate log --spend`
//! shows it as reserved. Each charged call's row carries its `cost`.
//!
//! Layer: `decide`.

use std::sync::Arc;

use serde_json::Value;
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::CallToolResult;

use crate::config::{ConfigError, Cost, check_budgets};

use crate::base::duration::{civil_from_days, days_from_civil};
pub use crate::config::{BudgetConfig, Cap, Period};

impl Period {
    /// The period holding `now_ms`: its label (`2026-12-03`, `2026-12`,
    /// `2026-12-03T11`, `2026-12-03T11:52`) and when the next begins (ms).
    pub fn at(self, now_ms: i64) -> (String, i64) {
        let secs = now_ms.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        let in_day = secs.rem_euclid(86_400);
        let (hh, mm) = (in_day / 3600, in_day % 3600 / 60);
        match self {
            Period::Minute => (
                format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}"),
                (secs - secs.rem_euclid(60) + 60) * 1000,
            ),
            Period::Hour => (
                format!("{y:04}-{m:02}-{d:02}T{hh:02}"),
                (secs - secs.rem_euclid(3600) + 3600) * 1000,
            ),
            Period::Day => (format!("{y:04}-{m:02}-{d:02}"), (days + 1) * 86_400_000),
            Period::Month => {
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (
                    format!("{y:04}-{m:02}"),
                    days_from_civil(ny, nm, 1) * 86_400_000,
                )
            }
        }
    }

    fn word(self) -> &'static str {
        match self {
            Period::Minute => "minute",
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Month => "month",
        }
    }
}

/// What is spent, where: a budget, a scope (a caller's subject, `-` for
/// callers without one, `*` for everyone), a period label.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct SpendKey {
    /// The budget's name.
    pub budget: String,
    /// Whose spending.
    pub scope: String,
    /// Which period.
    pub period: String,
}

/// A reservation asked of a [`Ledger`](crate::store::ledger::Ledger): `amount` under every key, each
/// with its cap, all or none.
#[derive(Clone, Debug, PartialEq)]
pub struct Hold {
    /// Where the cost is reserved, each with the cap it must stay within.
    pub keys: Vec<(SpendKey, f64)>,
    /// What is reserved: a fixed cost, or 0 for a cost reported afterwards
    /// (which is refused only once the cap is reached).
    pub amount: f64,
}

/// Slack for sums of fractional costs (0.1 + 0.2 fits a cap of 0.3).
pub const SLACK: f64 = 1e-9;

impl Hold {
    /// Whether `amount` more fits under `cap` where `spent` is charged and
    /// `reserved` is held: the one rule every ledger applies (the SQL
    /// stores state it in their statements, the same way).
    pub fn fits(amount: f64, spent: f64, reserved: f64, cap: f64) -> bool {
        if amount > 0.0 {
            spent + reserved + amount <= cap + SLACK
        } else {
            spent + reserved < cap
        }
    }
}

/// What a ledger did with a [`Hold`].
#[derive(Clone, Debug, PartialEq)]
pub enum Held {
    /// Reserved under every key.
    Taken,
    /// Nothing reserved: the key at `index` has no room.
    Over {
        /// Which of the hold's keys.
        index: usize,
        /// What is charged under it.
        spent: f64,
        /// What calls in flight hold under it.
        reserved: f64,
    },
}

/// What is spent and held under one key (`toolgate log --spend`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Balance {
    /// Budget, scope and period.
    #[serde(flatten)]
    pub key: SpendKey,
    /// Charged by finished calls.
    pub spent: f64,
    /// Held by calls in flight, or by calls whose outcome was never
    /// recorded (the process stopped between forwarding and settling).
    pub reserved: f64,
}

/// Why a budgeted call was not forwarded: the model's answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct OverBudget(pub String);

/// One compiled budget.
#[derive(Debug)]
pub struct Budget {
    name: String,
    tools: Vec<glob::Pattern>,
    cost: Cost,
    unit: String,
    per_caller: Option<Cap>,
    total: Option<Cap>,
}

/// `25`, `2.5`.
fn amount(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The caps' scopes and keys for `caller`, at `now_ms`, with each cap and
/// when its period ends.
struct Scoped {
    key: SpendKey,
    cap: Cap,
    reset_ms: i64,
    whose: String,
}

impl Budget {
    fn scoped(&self, caller: Option<&str>, now_ms: i64) -> Vec<Scoped> {
        let mut out = Vec::new();
        if let Some(cap) = self.per_caller {
            let (period, reset_ms) = cap.per.at(now_ms);
            out.push(Scoped {
                key: SpendKey {
                    budget: self.name.clone(),
                    scope: caller.unwrap_or("-").to_owned(),
                    period,
                },
                cap,
                reset_ms,
                whose: match caller {
                    Some(c) => format!("for this caller ({c})"),
                    None => "for callers without credentials".to_owned(),
                },
            });
        }
        if let Some(cap) = self.total {
            let (period, reset_ms) = cap.per.at(now_ms);
            out.push(Scoped {
                key: SpendKey {
                    budget: self.name.clone(),
                    scope: "*".to_owned(),
                    period,
                },
                cap,
                reset_ms,
                whose: "for all callers together".to_owned(),
            });
        }
        out
    }

    /// What a call of this budget reserves for `caller` at `now_ms`:
    /// its cost (nothing yet for a reported one) under each cap's key.
    pub fn hold(&self, caller: Option<&str>, now_ms: i64) -> Hold {
        Hold {
            keys: self
                .scoped(caller, now_ms)
                .into_iter()
                .map(|s| (s.key, s.cap.amount))
                .collect(),
            amount: match self.cost {
                Cost::Fixed(n) => n,
                Cost::Reported(_) => 0.0,
            },
        }
    }

    /// The model's answer when the ledger cannot say whether `tool`'s call
    /// fits (fail closed).
    pub fn unavailable(tool: &str) -> OverBudget {
        OverBudget(format!(
            "The gateway cannot check the budget of {} right now (its store is unavailable), so the call was not forwarded. Try again shortly.",
            quote(tool)
        ))
    }

    /// The model's answer when the `index`-th cap of [`Budget::hold`] has
    /// no room: `spent` charged and `reserved` held there already.
    pub fn refusal(
        &self,
        tool: &str,
        caller: Option<&str>,
        now_ms: i64,
        index: usize,
        spent: f64,
        reserved: f64,
    ) -> OverBudget {
        let scoped = self.scoped(caller, now_ms);
        let Some(s) = scoped.get(index) else {
            return OverBudget(format!(
                "The budget {:?} is spent, so this call of {} was not forwarded.",
                self.name,
                quote(tool)
            ));
        };
        // What calls in flight hold counts as spent: they may all succeed.
        let taken = spent + reserved;
        let left = (s.cap.amount - taken).max(0.0);
        let in_flight = if reserved > 0.0 {
            format!(", {} of it held by calls in flight", amount(reserved))
        } else {
            String::new()
        };
        OverBudget(format!(
            "The budget {:?} is spent: {} of {} {unit} per {} {}{in_flight} (left: {}{}), so this call of {} was not forwarded. It resets at {} UTC. Tell the user, or wait until then.",
            self.name,
            amount(taken),
            amount(s.cap.amount),
            s.cap.per.word(),
            s.whose,
            amount(left),
            match self.cost {
                Cost::Fixed(n) => format!("; a call costs {}", amount(n)),
                Cost::Reported(_) => String::new(),
            },
            quote(tool),
            crate::base::duration::utc(s.reset_ms, false),
            unit = self.unit,
        ))
    }

    /// What a finished call costs: nothing when it failed.
    pub fn cost_of(&self, result: &CallToolResult) -> f64 {
        if result.is_error == Some(true) {
            return 0.0;
        }
        match &self.cost {
            Cost::Fixed(n) => *n,
            Cost::Reported(key) => {
                let found = result
                    .meta
                    .as_ref()
                    .and_then(|m| m.get(key))
                    .and_then(Value::as_f64)
                    .filter(|n| n.is_finite() && *n >= 0.0);
                found.unwrap_or_else(|| {
                    tracing::warn!(budget = %self.name, %key, "the result says no cost in _meta; charged 0");
                    0.0
                })
            }
        }
    }

    /// The terms, as the model reads them after the tool's description.
    pub fn terms(&self) -> String {
        let cost = match &self.cost {
            Cost::Fixed(n) => format!(
                "Costs {} {} per successful call; nothing when the call fails.",
                amount(*n),
                self.unit
            ),
            Cost::Reported(_) => format!(
                "Each successful call costs what the server reports, in {}; nothing when the call fails.",
                self.unit
            ),
        };
        let caps: Vec<String> = [
            self.per_caller.map(|c| {
                format!(
                    "{} {} per {} for each caller",
                    amount(c.amount),
                    self.unit,
                    c.per.word()
                )
            }),
            self.total.map(|c| {
                format!(
                    "{} {} per {} in all",
                    amount(c.amount),
                    self.unit,
                    c.per.word()
                )
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!("{cost} Budget: {}.", caps.join("; "))
    }
}

/// The compiled `[[budget]]` list.
#[derive(Debug, Default)]
pub struct Budgets(Vec<Arc<Budget>>);

impl Budgets {
    /// Compile and check `[[budget]]`.
    pub fn new(configs: &[BudgetConfig]) -> Result<Self, ConfigError> {
        Ok(Self(
            check_budgets(configs)?
                .into_iter()
                .map(|c| {
                    Arc::new(Budget {
                        name: c.name,
                        tools: c.tools,
                        cost: c.cost,
                        unit: c.unit,
                        per_caller: c.per_caller,
                        total: c.total,
                    })
                })
                .collect(),
        ))
    }

    /// The budget of the gateway tool `name`, if any.
    pub fn of(&self, name: &str) -> Option<Arc<Budget>> {
        self.0
            .iter()
            .find(|b| b.tools.iter().any(|p| p.matches(name)))
            .cloned()
    }
}

impl Budgets {
    /// The `[[budget]]` sections of `text` (a TOML file), compiled; the
    /// error's text is what a person reads. For tests of every layer.
    #[cfg(test)]
    pub(crate) fn from_toml(text: &str) -> Result<Self, String> {
        #[derive(serde::Deserialize)]
        struct File {
            budget: Vec<BudgetConfig>,
        }
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        Self::new(&file.budget).map_err(|e| e.message().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgets(text: &str) -> Result<Budgets, String> {
        Budgets::from_toml(text)
    }

    #[test]
    fn periods_are_utc_calendar_periods() {
        // 2026-12-31 23:59:30.500 UTC
        let t =
            days_from_civil(2026, 12, 31) * 86_400_000 + (23 * 3600 + 59 * 60 + 30) * 1000 + 500;
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        let (label, next) = Period::Month.at(t);
        assert_eq!(
            (label.as_str(), next),
            ("2026-12", days_from_civil(2027, 1, 1) * 86_400_000)
        );
        assert_eq!(Period::Day.at(t).0, "2026-12-31");
        assert_eq!(
            Period::Day.at(t).1,
            days_from_civil(2027, 1, 1) * 86_400_000
        );
        assert_eq!(Period::Hour.at(t).0, "2026-12-31T23");
        let (minute, next) = Period::Minute.at(t);
        assert_eq!(minute, "2026-12-31T23:59");
        assert_eq!(next, days_from_civil(2027, 1, 1) * 86_400_000);
    }

    #[test]
    fn a_failed_call_costs_nothing_and_a_reported_cost_is_read_from_meta() {
        let b = budgets(
            "[[budget]]\ntools = [\"*\"]\ncost_from = \"_meta/com.example/credits\"\ntotal = { amount = 5, per = \"hour\" }\n",
        )
        .unwrap();
        let budget = b.of("x.y").unwrap();
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [], "_meta": {"com.example/credits": 3.5}
        }))
        .unwrap();
        assert_eq!(budget.cost_of(&result), 3.5);
        let failed: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [], "isError": true, "_meta": {"com.example/credits": 3.5}
        }))
        .unwrap();
        assert_eq!(budget.cost_of(&failed), 0.0);
        let silent: CallToolResult =
            serde_json::from_value(serde_json::json!({"content": []})).unwrap();
        assert_eq!(budget.cost_of(&silent), 0.0);
    }

    #[test]
    fn bad_budgets_are_named() {
        for (text, says) in [
            (
                "[[budget]]\ntools = [\"a.*\"]\ntotal = { amount = 5, per = \"day\" }\n",
                "budget 1: give cost (per successful call) or cost_from",
            ),
            (
                "[[budget]]\ntools = [\"a.*\"]\ncost = 1\n",
                "budget 1: give per_caller or total (or both): a budget caps spending",
            ),
            (
                "[[budget]]\ntools = [\"a.*\"]\ncost = 1\ncost_from = \"_meta/x\"\ntotal = { amount = 5, per = \"day\" }\n",
                "budget 1: give cost or cost_from, not both",
            ),
            (
                "[[budget]]\ntools = [\"a.*\"]\ncost_from = \"meta.x\"\ntotal = { amount = 5, per = \"day\" }\n",
                "budget 1: cost_from \"meta.x\": write _meta/KEY, a key of the result's _meta",
            ),
            (
                "[[budget]]\ntools = [\"a.*\"]\ncost = 1\ntotal = { amount = 0, per = \"day\" }\n",
                "budget 1: amount 0 must be more than 0",
            ),
            (
                "[[budget]]\ntools = [\"a.*\"]\ncost = 1\ntotal = { amount = 5, per = \"week\" }\n",
                "unknown variant `week`",
            ),
        ] {
            let e = budgets(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
