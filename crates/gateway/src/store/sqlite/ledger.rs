//! The SQLite audit store's budget ledger: the statements that reserve,
//! settle and read spending in the `spend` table.
//!
//! Layer: a store. Run by the audit store's single writer inside its
//! write transaction ([`crate::store::sqlite`]), which is `IMMEDIATE`, so a
//! reservation's check and its increment see no other process's write in
//! between; each reservation has a savepoint of its own, so one that does
//! not fit under every cap takes nothing from any.
//!
//! Layer: `store`.

use std::path::Path;

use rusqlite::{OptionalExtension, Transaction, params};

use crate::decide::budget::Balance;
use crate::decide::budget::Held;
use crate::decide::budget::Hold;
use crate::decide::budget::SLACK;
use crate::decide::budget::SpendKey;
use crate::store::StoreError;
use crate::store::sqlite::not_a_store;
use crate::store::sqlite::open_for_reading;
use crate::store::sqlite::reading;

/// The `spend` table (schema version 3; `reserved` since version 5).
pub(crate) const TABLE: &str = "
CREATE TABLE IF NOT EXISTS spend (
    budget TEXT NOT NULL,
    scope TEXT NOT NULL,
    period TEXT NOT NULL,
    amount REAL NOT NULL,
    reserved REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (budget, scope, period)
);
";

/// Reserve `hold` in `tx`: all keys or none.
pub(crate) fn reserve(tx: &Transaction<'_>, hold: &Hold) -> rusqlite::Result<Held> {
    tx.execute_batch("SAVEPOINT hold")?;
    match take(tx, hold) {
        Ok(Held::Taken) => {
            tx.execute_batch("RELEASE hold")?;
            Ok(Held::Taken)
        }
        Ok(over) => {
            tx.execute_batch("ROLLBACK TO hold; RELEASE hold")?;
            Ok(over)
        }
        Err(e) => {
            let _ = tx.execute_batch("ROLLBACK TO hold; RELEASE hold");
            Err(e)
        }
    }
}

fn take(tx: &Transaction<'_>, hold: &Hold) -> rusqlite::Result<Held> {
    let mut open = tx.prepare_cached(
        "INSERT OR IGNORE INTO spend (budget, scope, period, amount, reserved) VALUES (?1, ?2, ?3, 0, 0)",
    )?;
    // The rule of `Hold::fits`, in one statement: the row changes only when
    // the amount fits.
    let mut add = tx.prepare_cached(
        "UPDATE spend SET reserved = reserved + ?4 WHERE budget = ?1 AND scope = ?2 AND period = ?3 AND CASE WHEN ?4 > 0 THEN amount + reserved + ?4 <= ?5 + ?6 ELSE amount + reserved < ?5 END",
    )?;
    let mut read = tx.prepare_cached(
        "SELECT amount, reserved FROM spend WHERE budget = ?1 AND scope = ?2 AND period = ?3",
    )?;
    for (index, (k, cap)) in hold.keys.iter().enumerate() {
        open.execute(params![k.budget, k.scope, k.period])?;
        if add.execute(params![
            k.budget,
            k.scope,
            k.period,
            hold.amount,
            cap,
            SLACK
        ])? == 0
        {
            let (spent, reserved) = read
                .query_row(params![k.budget, k.scope, k.period], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?
                .unwrap_or((0.0, 0.0));
            return Ok(Held::Over {
                index,
                spent,
                reserved,
            });
        }
    }
    Ok(Held::Taken)
}

/// Release `held` and charge `cost` under each of `keys`.
pub(crate) fn settle(
    tx: &Transaction<'_>,
    keys: &[SpendKey],
    held: f64,
    cost: f64,
) -> rusqlite::Result<()> {
    let mut settle = tx.prepare_cached(
        "INSERT INTO spend (budget, scope, period, amount, reserved) VALUES (?1, ?2, ?3, ?4, 0) ON CONFLICT (budget, scope, period) DO UPDATE SET amount = amount + excluded.amount, reserved = max(reserved - ?5, 0)",
    )?;
    for k in keys {
        settle.execute(params![k.budget, k.scope, k.period, cost, held])?;
    }
    Ok(())
}

/// Every key's balance in the store at `path`, newest period first.
pub fn balances(path: &Path) -> Result<Vec<Balance>, StoreError> {
    let conn = open_for_reading(path)?;
    let version: i32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(not_a_store(path))?;
    if version < 3 {
        return Ok(Vec::new());
    }
    let reserved = if version >= 5 { "reserved" } else { "0" };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT budget, scope, period, amount, {reserved} FROM spend ORDER BY period DESC, budget, scope"
        ))
        .map_err(not_a_store(path))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Balance {
                key: SpendKey {
                    budget: r.get(0)?,
                    scope: r.get(1)?,
                    period: r.get(2)?,
                },
                spent: r.get(3)?,
                reserved: r.get(4)?,
            })
        })
        .map_err(reading(path))?;
    rows.map(|r| r.map_err(reading(path))).collect()
}
