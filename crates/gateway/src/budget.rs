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
//! Spending is kept in a [`Ledger`]: the audit store (SQLite, or
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

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::CallToolResult;

use crate::StoreError;
use crate::audit::StoreFuture;
use crate::config::{ConfigError, Cost, check_budgets};

pub use crate::config::{BudgetConfig, Cap, Period};
use crate::duration::{civil_from_days, days_from_civil};

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

/// A reservation asked of a [`Ledger`]: `amount` under every key, each
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

/// Where spending is kept.
pub trait Ledger: Send + Sync {
    /// Reserve `hold.amount` under every key of `hold` if each has room
    /// ([`Hold::fits`]), atomically: all or none, whatever else runs at the
    /// same time against the same store.
    fn reserve(&self, hold: Hold) -> StoreFuture<Held>;
    /// Release `held` under each key and charge `cost` there, atomically
    /// per key.
    fn settle(&self, keys: Vec<SpendKey>, held: f64, cost: f64) -> StoreFuture<()>;
    /// Every key's balance, newest period first.
    fn balances(&self) -> StoreFuture<Vec<Balance>>;
}

/// Spending kept in this process (no audit store).
#[derive(Default)]
pub struct MemoryLedger(Mutex<HashMap<SpendKey, (f64, f64)>>);

impl Ledger for MemoryLedger {
    fn reserve(&self, hold: Hold) -> StoreFuture<Held> {
        let mut map = self.0.lock();
        let over = hold.keys.iter().enumerate().find_map(|(index, (k, cap))| {
            let (spent, reserved) = map.get(k).copied().unwrap_or_default();
            (!Hold::fits(hold.amount, spent, reserved, *cap)).then_some(Held::Over {
                index,
                spent,
                reserved,
            })
        });
        let held = match over {
            Some(over) => over,
            None => {
                for (k, _) in hold.keys {
                    map.entry(k).or_default().1 += hold.amount;
                }
                Held::Taken
            }
        };
        Box::pin(async move { Ok(held) })
    }

    fn settle(&self, keys: Vec<SpendKey>, held: f64, cost: f64) -> StoreFuture<()> {
        let mut map = self.0.lock();
        for k in keys {
            let (spent, reserved) = map.entry(k).or_default();
            *spent += cost;
            *reserved = (*reserved - held).max(0.0);
        }
        Box::pin(async { Ok(()) })
    }

    fn balances(&self) -> StoreFuture<Vec<Balance>> {
        let mut out: Vec<Balance> = self
            .0
            .lock()
            .iter()
            .map(|(key, (spent, reserved))| Balance {
                key: key.clone(),
                spent: *spent,
                reserved: *reserved,
            })
            .collect();
        out.sort_by(|a, b| b.key.period.cmp(&a.key.period).then(a.key.cmp(&b.key)));
        Box::pin(async move { Ok(out) })
    }
}

/// A call's cost held under its budget's caps until the call's outcome
/// is known.
///
/// [`settle`](Reservation::settle) it with what the call cost. One dropped
/// unsettled (the caller went away mid-call, a stage returned early) is
/// settled by a task of its own: released when the call was never sent,
/// charged in full once it was ([`Reservation::sent`]), since the upstream
/// may have done the work and a budget fails closed.
pub struct Reservation {
    ledger: Arc<dyn Ledger>,
    keys: Vec<SpendKey>,
    held: f64,
    sent: bool,
    settled: bool,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("keys", &self.keys)
            .field("held", &self.held)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Reservation {
    /// The call is going to the upstream: from now on its outcome decides.
    pub fn sent(&mut self) {
        self.sent = true;
    }

    /// Release the reservation and charge `cost` (0 for a failed call).
    pub async fn settle(mut self, cost: f64) -> Result<(), StoreError> {
        self.settled = true;
        let keys = std::mem::take(&mut self.keys);
        self.ledger.settle(keys, self.held, cost).await
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.settled || self.keys.is_empty() {
            return;
        }
        let cost = if self.sent { self.held } else { 0.0 };
        let settle = self
            .ledger
            .settle(std::mem::take(&mut self.keys), self.held, cost);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = settle.await {
                        tracing::warn!(error = %e, "a budget reservation was not settled; it stays reserved");
                    }
                });
            }
            Err(_) => {
                tracing::warn!(
                    "a budget reservation was dropped outside the runtime; it stays reserved"
                )
            }
        }
    }
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

    /// Before a call: reserve its cost under every cap, or `Err` with the
    /// model's answer when it would go over one (a fixed cost that does not
    /// fit beside what is spent and held, or a reported one with the cap
    /// already reached), or when the ledger cannot say (fail closed).
    pub async fn admit(
        &self,
        ledger: &Arc<dyn Ledger>,
        tool: &str,
        caller: Option<&str>,
        now_ms: i64,
    ) -> Result<Reservation, OverBudget> {
        let scoped = self.scoped(caller, now_ms);
        let held = match self.cost {
            Cost::Fixed(n) => n,
            Cost::Reported(_) => 0.0,
        };
        let hold = Hold {
            keys: scoped
                .iter()
                .map(|s| (s.key.clone(), s.cap.amount))
                .collect(),
            amount: held,
        };
        let over = ledger.reserve(hold).await.map_err(|e| {
            tracing::warn!(error = %e, "budget spending could not be reserved; the call is refused");
            OverBudget(format!(
                "The gateway cannot check the budget of {} right now (its store is unavailable), so the call was not forwarded. Try again shortly.",
                quote(tool)
            ))
        })?;
        let (index, spent, reserved) = match over {
            Held::Taken => {
                return Ok(Reservation {
                    ledger: ledger.clone(),
                    keys: scoped.into_iter().map(|s| s.key).collect(),
                    held,
                    sent: false,
                    settled: false,
                });
            }
            Held::Over {
                index,
                spent,
                reserved,
            } => (index, spent, reserved),
        };
        let Some(s) = scoped.get(index) else {
            return Err(OverBudget(format!(
                "The budget {:?} is spent, so this call of {} was not forwarded.",
                self.name,
                quote(tool)
            )));
        };
        // What calls in flight hold counts as spent: they may all succeed.
        let taken = spent + reserved;
        let left = (s.cap.amount - taken).max(0.0);
        let in_flight = if reserved > 0.0 {
            format!(", {} of it held by calls in flight", amount(reserved))
        } else {
            String::new()
        };
        Err(OverBudget(format!(
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
            crate::duration::utc(s.reset_ms, false),
            unit = self.unit,
        )))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn budgets(text: &str) -> Result<Budgets, String> {
        #[derive(serde::Deserialize)]
        struct File {
            budget: Vec<BudgetConfig>,
        }
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        Budgets::new(&file.budget).map_err(|e| e.message().to_owned())
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

    #[tokio::test]
    async fn a_call_that_does_not_fit_is_refused_with_what_is_spent_and_when_it_resets() {
        let b = budgets(
            "[[budget]]\ntools = [\"rich.*\"]\ncost = 25\nper_caller = { amount = 60, per = \"day\" }\ntotal = { amount = 1000, per = \"month\" }\n",
        )
        .unwrap();
        let budget = b.of("rich.lookup").unwrap();
        assert!(b.of("poor.lookup").is_none());
        let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::default());
        let now = days_from_civil(2026, 12, 3) * 86_400_000 + 3_600_000;
        for _ in 0..2 {
            let held = budget
                .admit(&ledger, "rich.lookup", Some("alice"), now)
                .await
                .unwrap();
            held.settle(25.0).await.unwrap();
        }
        let said = budget
            .admit(&ledger, "rich.lookup", Some("alice"), now)
            .await
            .unwrap_err();
        assert_eq!(
            said.0,
            "The budget \"rich.*\" is spent: 50 of 60 credits per day for this caller (alice) (left: 10; a call costs 25), so this call of \"rich.lookup\" was not forwarded. It resets at 2026-12-04 00:00:00 UTC. Tell the user, or wait until then."
        );
        // Another caller has a budget of their own; the total still counts
        // both. A failed call (settled at 0) gives its reservation back.
        let bob = budget
            .admit(&ledger, "rich.lookup", Some("bob"), now)
            .await
            .unwrap();
        bob.settle(0.0).await.unwrap();
        // The next day, Alice's budget is whole again (the month's total is not).
        let tomorrow = now + 86_400_000;
        let held = budget
            .admit(&ledger, "rich.lookup", Some("alice"), tomorrow)
            .await
            .unwrap();
        assert_eq!(held.keys[0].period, "2026-12-04");
        assert_eq!(held.keys[1].period, "2026-12");
        held.settle(25.0).await.unwrap();
        let balances = ledger.balances().await.unwrap();
        let month = balances
            .iter()
            .find(|b| b.key.scope == "*" && b.key.period == "2026-12")
            .unwrap();
        assert_eq!((month.spent, month.reserved), (75.0, 0.0));
        assert_eq!(
            budget.terms(),
            "Costs 25 credits per successful call; nothing when the call fails. Budget: 60 credits per day for each caller; 1000 credits per month in all."
        );
    }

    #[tokio::test]
    async fn calls_in_flight_hold_their_cost_and_a_dropped_reservation_fails_closed() {
        let b = budgets(
            "[[budget]]\ntools = [\"*\"]\ncost = 1\ntotal = { amount = 2, per = \"day\" }\n",
        )
        .unwrap();
        let budget = b.of("x.y").unwrap();
        let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::default());
        let now = days_from_civil(2026, 12, 3) * 86_400_000;
        let first = budget.admit(&ledger, "x.y", None, now).await.unwrap();
        let mut second = budget.admit(&ledger, "x.y", None, now).await.unwrap();
        // Two calls in flight hold the whole cap: a third is refused before
        // either finishes.
        let said = budget.admit(&ledger, "x.y", None, now).await.unwrap_err();
        assert!(
            said.0.starts_with("The budget \"*\" is spent: 2 of 2 credits per day for all callers together, 2 of it held by calls in flight (left: 0; a call costs 1)"),
            "{said}"
        );
        // One never sent gives its unit back when dropped; one sent and then
        // dropped (the caller went away) is charged.
        drop(first);
        second.sent();
        drop(second);
        // (The memory ledger settles as the drop asks, not when the task runs.)
        let balances = ledger.balances().await.unwrap();
        assert_eq!((balances[0].spent, balances[0].reserved), (1.0, 0.0));
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
