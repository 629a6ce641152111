//! Grants in the PostgreSQL store (layer `store`): shared by every
//! instance, so a grant made or revoked on one holds on all.

use std::time::SystemTime;

use crate::base::time::now_ms;
use crate::decide::grants::{Grant, Revoked};
use crate::store::StoreError;

use super::PgStore;

const GRANT_COLUMNS: &str = "id, created_ms, expires_ms, revoked_ms, caller, upstream, tool, rule, upstream_tool, digest, revoked_by";

fn grant_of(r: &tokio_postgres::Row) -> Grant {
    Grant {
        id: r.get(0),
        created_ms: r.get(1),
        expires_ms: r.get(2),
        revoked_ms: r.get(3),
        caller: r.get(4),
        upstream: r.get(5),
        tool: r.get(6),
        rule: r.get(7),
        upstream_tool: r.get(8),
        digest: r.get(9),
        revoked_by: r.get(10),
    }
}

impl PgStore {
    pub(super) async fn insert_grant(&self, g: &Grant) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                &format!("INSERT INTO toolgate_grants ({GRANT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"),
                &[
                    &g.id,
                    &g.created_ms,
                    &g.expires_ms,
                    &g.revoked_ms,
                    &g.caller,
                    &g.upstream,
                    &g.tool,
                    &g.rule,
                    &g.upstream_tool,
                    &g.digest,
                    &g.revoked_by,
                ],
            )
            .await
            .map(drop)
            .map_err(|e| self.inner.fail(e))
    }

    pub(super) async fn find_grant(
        &self,
        caller: Option<&str>,
        tool: &str,
    ) -> Result<Option<Grant>, StoreError> {
        let client = self.client().await?;
        let now = now_ms(SystemTime::now());
        client
            .query_opt(
                &format!("SELECT {GRANT_COLUMNS} FROM toolgate_grants WHERE tool = $1 AND caller IS NOT DISTINCT FROM $2 AND revoked_ms IS NULL AND expires_ms > $3 ORDER BY expires_ms DESC LIMIT 1"),
                &[&tool, &caller, &now],
            )
            .await
            .map(|row| row.as_ref().map(grant_of))
            .map_err(|e| self.inner.fail(e))
    }

    /// The grants that hold now, or with `all` every one kept, oldest
    /// first (what `toolgate grants` shows).
    pub async fn grants(&self, all: bool) -> Result<Vec<Grant>, StoreError> {
        let client = self.client().await?;
        let now = now_ms(SystemTime::now());
        let rows = client
            .query(
                &format!("SELECT {GRANT_COLUMNS} FROM toolgate_grants WHERE $1 OR (revoked_ms IS NULL AND expires_ms > $2) ORDER BY created_ms, id"),
                &[&all, &now],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        Ok(rows.iter().map(grant_of).collect())
    }

    /// Revoke the grant `id` as `by`, and record the revocation as a row
    /// (`toolgate.grant`, status `revoked`, `by` its caller), in one
    /// statement.
    pub async fn revoke(&self, id: &str, by: &str) -> Result<Revoked, StoreError> {
        let client = self.client().await?;
        let now = now_ms(SystemTime::now());
        let revoked = client
            .query_opt(
                &format!(
                    "WITH r AS (UPDATE toolgate_grants SET revoked_ms = $1, revoked_by = $3 WHERE id = $2 AND revoked_ms IS NULL AND expires_ms > $1 RETURNING {GRANT_COLUMNS}), \
                     logged AS (INSERT INTO toolgate_calls (time_ms, caller, upstream, tool, arguments_digest, rule, status, latency_ms, grant_id) \
                     SELECT $1, $3, upstream, 'toolgate.grant', '', 'revoked grant for ' || tool || coalesce(' of ' || caller, ''), 'revoked', 0, id FROM r) \
                     SELECT {GRANT_COLUMNS} FROM r"
                ),
                &[&now, &id, &by],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        if let Some(row) = revoked {
            return Ok(Revoked::Now(grant_of(&row)));
        }
        let found = client
            .query_opt(
                &format!("SELECT {GRANT_COLUMNS} FROM toolgate_grants WHERE id = $1"),
                &[&id],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        Ok(found.map_or(Revoked::Unknown, |r| Revoked::Already(grant_of(&r))))
    }
}
