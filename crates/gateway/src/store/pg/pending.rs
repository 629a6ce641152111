//! Pending approvals in the PostgreSQL store every instance shares: a call
//! asked on one instance is shown on every instance's page, decided on any,
//! and taken by one call on any.
//!
//! Taking is a single `DELETE … RETURNING`: of two instances retrying the
//! same call at once, one gets the decision and the other finds nothing.
//!
//! Layer: `store`.

use std::time::Duration;

use tokio_postgres::Row;

use crate::store::StoreFuture;
use crate::store::pending::Status;
use crate::store::pending::{Pending, Waiting, cutoff, offered};
use crate::store::pg::PgStore;

/// Pending approvals in PostgreSQL (table `toolgate_approvals`).
pub struct PgPending {
    store: PgStore,
    ttl: Duration,
}

impl PgPending {
    /// Entries of `store`, kept for `ttl`.
    pub fn new(store: PgStore, ttl: Duration) -> Self {
        Self { store, ttl }
    }
}

const COLUMNS: &str = "id, caller, tool, server, digest, question, remember, opened_ms, status";

fn waiting(r: &Row) -> Option<Waiting> {
    Some(Waiting {
        id: r.get(0),
        caller: r.get(1),
        tool: r.get(2),
        server: r.get(3),
        digest: r.get(4),
        question: r.get(5),
        remember: r.get(6),
        opened_ms: r.get(7),
        status: Status::parse(r.get(8))?,
    })
}

impl Pending for PgPending {
    fn open(&self, entry: Waiting) -> StoreFuture<String> {
        let store = self.store.clone();
        let oldest = cutoff(self.ttl);
        Box::pin(async move {
            let client = store.client().await?;
            let fail = |e: tokio_postgres::Error| store.fail(e);
            client
                .execute(
                    "DELETE FROM toolgate_approvals WHERE opened_ms < $1",
                    &[&oldest],
                )
                .await
                .map_err(fail)?;
            // One waiting entry per call: the unique index makes a second
            // instance's insert of the same call do nothing.
            client
                .execute(
                    &format!("INSERT INTO toolgate_approvals ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'waiting') ON CONFLICT DO NOTHING"),
                    &[
                        &entry.id,
                        &entry.caller,
                        &entry.tool,
                        &entry.server,
                        &entry.digest,
                        &entry.question,
                        &entry.remember,
                        &entry.opened_ms,
                    ],
                )
                .await
                .map_err(fail)?;
            let row = client
                .query_opt(
                    "SELECT id FROM toolgate_approvals WHERE tool = $1 AND digest = $2 AND caller IS NOT DISTINCT FROM $3 AND status = 'waiting' LIMIT 1",
                    &[&entry.tool, &entry.digest, &entry.caller],
                )
                .await
                .map_err(fail)?;
            // Decided between the insert and the select: the call's own
            // entry is the one to show.
            Ok(row.map_or(entry.id, |r| r.get(0)))
        })
    }

    fn take(
        &self,
        caller: Option<String>,
        tool: String,
        digest: String,
    ) -> StoreFuture<Option<Status>> {
        let store = self.store.clone();
        let oldest = cutoff(self.ttl);
        Box::pin(async move {
            let client = store.client().await?;
            let row = client
                .query_opt(
                    "DELETE FROM toolgate_approvals WHERE id = (SELECT id FROM toolgate_approvals WHERE tool = $1 AND digest = $2 AND caller IS NOT DISTINCT FROM $3 AND status <> 'waiting' AND opened_ms >= $4 ORDER BY opened_ms LIMIT 1) RETURNING status",
                    &[&tool, &digest, &caller, &oldest],
                )
                .await
                .map_err(|e| store.fail(e))?;
            Ok(row.and_then(|r| Status::parse(r.get(0))))
        })
    }

    fn decide(&self, id: String, status: Status) -> StoreFuture<bool> {
        let store = self.store.clone();
        let oldest = cutoff(self.ttl);
        Box::pin(async move {
            if !offered(true, status) {
                return Ok(false);
            }
            let client = store.client().await?;
            let changed = client
                .execute(
                    "UPDATE toolgate_approvals SET status = $2 WHERE id = $1 AND status = 'waiting' AND opened_ms >= $3 AND ($2 <> 'remembered' OR remember IS NOT NULL)",
                    &[&id, &status.as_str(), &oldest],
                )
                .await
                .map_err(|e| store.fail(e))?;
            Ok(changed == 1)
        })
    }

    fn all(&self) -> StoreFuture<Vec<Waiting>> {
        let store = self.store.clone();
        let oldest = cutoff(self.ttl);
        Box::pin(async move {
            let client = store.client().await?;
            let rows = client
                .query(
                    &format!("SELECT {COLUMNS} FROM toolgate_approvals WHERE opened_ms >= $1 ORDER BY opened_ms, id"),
                    &[&oldest],
                )
                .await
                .map_err(|e| store.fail(e))?;
            Ok(rows.iter().filter_map(waiting).collect())
        })
    }
}
