//! Budgets' ledger in the PostgreSQL store (layer `store`): one function
//! (`toolgate_reserve`, migration 7) checks every cap and reserves under
//! all of them at once, with the rows locked in key order.

use crate::decide::budget::{Balance, Held, Hold, SLACK, SpendKey};
use crate::store::StoreFuture;
use crate::store::ledger::Ledger;

use super::PgStore;

impl Ledger for PgStore {
    fn reserve(&self, hold: Hold) -> StoreFuture<Held> {
        let store = self.clone();
        Box::pin(async move {
            let client = store.client().await?;
            let (mut budgets, mut scopes, mut periods, mut caps) = (vec![], vec![], vec![], vec![]);
            for (k, cap) in &hold.keys {
                budgets.push(k.budget.as_str());
                scopes.push(k.scope.as_str());
                periods.push(k.period.as_str());
                caps.push(*cap);
            }
            // One statement, so one implicit transaction: all or none.
            let over = client
                .query_opt(
                    "SELECT o_index, o_spent, o_reserved FROM toolgate_reserve($1, $2, $3, $4, $5, $6)",
                    &[&budgets, &scopes, &periods, &caps, &hold.amount, &SLACK],
                )
                .await
                .map_err(|e| store.inner.fail(e))?;
            Ok(match over {
                None => Held::Taken,
                Some(row) => Held::Over {
                    index: usize::try_from(row.get::<_, i32>(0)).unwrap_or(0),
                    spent: row.get(1),
                    reserved: row.get(2),
                },
            })
        })
    }

    fn settle(&self, keys: Vec<SpendKey>, held: f64, cost: f64) -> StoreFuture<()> {
        let store = self.clone();
        Box::pin(async move {
            let client = store.client().await?;
            // One statement per key: each is atomic, so instances settling
            // together never lose one another's spending.
            for k in &keys {
                client
                    .execute(
                        "INSERT INTO toolgate_spend (budget, scope, period, amount, reserved) VALUES ($1, $2, $3, $4, 0) ON CONFLICT (budget, scope, period) DO UPDATE SET amount = toolgate_spend.amount + EXCLUDED.amount, reserved = GREATEST(toolgate_spend.reserved - $5, 0)",
                        &[&k.budget, &k.scope, &k.period, &cost, &held],
                    )
                    .await
                    .map_err(|e| store.inner.fail(e))?;
            }
            Ok(())
        })
    }

    fn balances(&self) -> StoreFuture<Vec<Balance>> {
        let store = self.clone();
        Box::pin(async move {
            let client = store.client().await?;
            let rows = client
                .query(
                    "SELECT budget, scope, period, amount, reserved FROM toolgate_spend ORDER BY period DESC, budget, scope",
                    &[],
                )
                .await
                .map_err(|e| store.inner.fail(e))?;
            Ok(rows
                .iter()
                .map(|r| Balance {
                    key: SpendKey {
                        budget: r.get(0),
                        scope: r.get(1),
                        period: r.get(2),
                    },
                    spent: r.get(3),
                    reserved: r.get(4),
                })
                .collect())
        })
    }
}
