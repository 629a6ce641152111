//! Where budgets' spending is kept (layer `store`): the [`Ledger`] trait
//! every backend implements (memory here; SQLite in
//! [`crate::store::sqlite::ledger`], PostgreSQL in [`crate::store::pg`]),
//! and the [`Reservation`] a call holds until its outcome is known.
//! What a call costs and which caps it falls under is
//! [`crate::decide::budget`]'s to say.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::decide::budget::Balance;

use crate::decide::budget::Budget;

use crate::decide::budget::Held;

use crate::decide::budget::Hold;

use crate::decide::budget::OverBudget;

use crate::decide::budget::SpendKey;
use crate::store::{StoreError, StoreFuture};

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
    sent: Sent,
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
        self.sent.mark();
    }

    /// Take the call's own [`Sent`]: the stage that sends the call marks
    /// it, however far from the stage holding this reservation.
    pub fn watching(mut self, sent: Sent) -> Self {
        if self.sent.is_set() {
            sent.mark();
        }
        self.sent = sent;
        self
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
        let cost = if self.sent.is_set() { self.held } else { 0.0 };
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

/// Whether a call went to its upstream: set by the stage that sends it,
/// read by a reservation dropped before it was settled.
#[derive(Clone, Debug, Default)]
pub struct Sent(Arc<AtomicBool>);

impl Sent {
    /// The call is going to the upstream.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether it went.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Before a call of `tool` under `budget`: reserve its cost under every
/// cap, or `Err` with the model's answer when it would go over one (a
/// fixed cost that does not fit beside what is spent and held, or a
/// reported one with the cap already reached), or when the ledger cannot
/// say (fail closed).
pub async fn admit(
    ledger: &Arc<dyn Ledger>,
    budget: &Budget,
    tool: &str,
    caller: Option<&str>,
    now_ms: i64,
) -> Result<Reservation, OverBudget> {
    let hold = budget.hold(caller, now_ms);
    let keys: Vec<SpendKey> = hold.keys.iter().map(|(k, _)| k.clone()).collect();
    let held = hold.amount;
    let over = ledger.reserve(hold).await.map_err(|e| {
        tracing::warn!(error = %e, "budget spending could not be reserved; the call is refused");
        Budget::unavailable(tool)
    })?;
    match over {
        Held::Taken => Ok(Reservation {
            ledger: ledger.clone(),
            keys,
            held,
            sent: Sent::default(),
            settled: false,
        }),
        Held::Over {
            index,
            spent,
            reserved,
        } => Err(budget.refusal(tool, caller, now_ms, index, spent, reserved)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::duration::days_from_civil;
    use crate::decide::budget::Budgets;

    fn budgets(text: &str) -> Result<Budgets, String> {
        Budgets::from_toml(text)
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
            let held = admit(&ledger, &budget, "rich.lookup", Some("alice"), now)
                .await
                .unwrap();
            held.settle(25.0).await.unwrap();
        }
        let said = admit(&ledger, &budget, "rich.lookup", Some("alice"), now)
            .await
            .unwrap_err();
        assert_eq!(
            said.0,
            "The budget \"rich.*\" is spent: 50 of 60 credits per day for this caller (alice) (left: 10; a call costs 25), so this call of \"rich.lookup\" was not forwarded. It resets at 2026-12-04 00:00:00 UTC. Tell the user, or wait until then."
        );
        // Another caller has a budget of their own; the total still counts
        // both. A failed call (settled at 0) gives its reservation back.
        let bob = admit(&ledger, &budget, "rich.lookup", Some("bob"), now)
            .await
            .unwrap();
        bob.settle(0.0).await.unwrap();
        // The next day, Alice's budget is whole again (the month's total is not).
        let tomorrow = now + 86_400_000;
        let held = admit(&ledger, &budget, "rich.lookup", Some("alice"), tomorrow)
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
        let first = admit(&ledger, &budget, "x.y", None, now).await.unwrap();
        let mut second = admit(&ledger, &budget, "x.y", None, now).await.unwrap();
        // Two calls in flight hold the whole cap: a third is refused before
        // either finishes.
        let said = admit(&ledger, &budget, "x.y", None, now).await.unwrap_err();
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
}
