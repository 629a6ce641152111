//! Grants in the SQLite audit store (layer `store`): their table, and
//! what `toolgate grants` lists and revokes in a file.

use std::path::Path;
use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};

use crate::base::time::now_ms;
use crate::decide::grants::Grant;
use crate::decide::grants::Revoked;
use crate::decide::grants::revoked_rule;
use crate::store::StoreError;

/// The SQLite table (schema version 2).
pub(crate) const TABLE: &str = "
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    revoked_ms INTEGER,
    caller TEXT,
    upstream TEXT,
    tool TEXT NOT NULL,
    rule TEXT NOT NULL,
    upstream_tool TEXT,
    digest TEXT,
    revoked_by TEXT
);
CREATE INDEX IF NOT EXISTS grants_tool ON grants(tool);
";

/// The columns schema version 5 added to `grants`.
pub(crate) const BOUND_COLUMNS: [&str; 3] = ["upstream_tool", "digest", "revoked_by"];

/// Add the grant `g` to the database at `path` (created if missing): a
/// grant only, no row of calls, so it takes no writers' lock — what an
/// approval for a span leaves, written from outside a gateway (tests, and
/// tools that seed grants).
pub fn add(path: &Path, g: &Grant) -> Result<(), StoreError> {
    let conn = crate::store::sqlite::open_for_writing(path)?;
    insert(&conn, g).map_err(|source| StoreError::Sqlite {
        context: format!("the audit store {}", path.display()),
        source,
    })
}

pub(crate) fn insert(conn: &Connection, g: &Grant) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO grants (id, created_ms, expires_ms, revoked_ms, caller, upstream, tool, rule, upstream_tool, digest, revoked_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        g.id,
        g.created_ms,
        g.expires_ms,
        g.revoked_ms,
        g.caller,
        g.upstream,
        g.tool,
        g.rule,
        g.upstream_tool,
        g.digest,
        g.revoked_by
    ])
    .map(drop)
}

/// The newest grant that holds now for `caller` calling `tool` (whether
/// it is for the tool as it is now is [`Grant::ended_by`]'s to say).
pub(crate) fn find(
    conn: &Connection,
    caller: Option<&str>,
    tool: &str,
    now: i64,
) -> rusqlite::Result<Option<Grant>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM grants WHERE tool = ?1 AND caller IS ?2 AND revoked_ms IS NULL AND expires_ms > ?3 ORDER BY expires_ms DESC LIMIT 1"
    ))?
    .query_row(params![tool, caller, now], of_row)
    .optional()
}

fn of_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Grant> {
    Ok(Grant {
        id: r.get(0)?,
        created_ms: r.get(1)?,
        expires_ms: r.get(2)?,
        revoked_ms: r.get(3)?,
        caller: r.get(4)?,
        upstream: r.get(5)?,
        tool: r.get(6)?,
        rule: r.get(7)?,
        upstream_tool: r.get(8)?,
        digest: r.get(9)?,
        revoked_by: r.get(10)?,
    })
}

const COLUMNS: &str = "id, created_ms, expires_ms, revoked_ms, caller, upstream, tool, rule, upstream_tool, digest, revoked_by";

fn has_grants(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'grants'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// The grants in the database at `path`, oldest first: those that hold
/// now, or with `all` every one kept. Opened read-only.
pub fn list(path: &Path, all: bool) -> Result<Vec<Grant>, StoreError> {
    let shown = crate::store::sqlite::reading(path);
    let conn = crate::store::sqlite::open_for_reading(path)?;
    // A store written before grants existed has none.
    if !has_grants(&conn).map_err(crate::store::sqlite::not_a_store(path))? {
        return Ok(Vec::new());
    }
    let now = now_ms(SystemTime::now());
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM grants WHERE ?1 OR (revoked_ms IS NULL AND expires_ms > ?2) ORDER BY created_ms, rowid"
        ))
        .map_err(&shown)?;
    let rows = stmt.query_map(params![all, now], of_row).map_err(&shown)?;
    rows.map(|r| r.map_err(&shown)).collect()
}

/// Revoke the grant `id` in the database at `path` as `by` (a console
/// session's subject, or `cli`), and record the revocation there as a row
/// (`toolgate.grant`, status `revoked`, `by` its caller).
///
/// It writes beside running gateways, a call log's too (its row takes an
/// id above those the log has reserved).
pub fn revoke(path: &Path, id: &str, by: &str) -> Result<Revoked, StoreError> {
    revoke_recording(path, id, by, true)
}

/// [`revoke`]; with `row` false, the revocation's row is left to the
/// caller (the call log, which gives rows their ids).
pub(crate) fn revoke_recording(
    path: &Path,
    id: &str,
    by: &str,
    row: bool,
) -> Result<Revoked, StoreError> {
    let shown = |source: rusqlite::Error| StoreError::Sqlite {
        context: format!("the audit store {}", path.display()),
        source,
    };
    if !path.exists() {
        return Err(StoreError::Other(format!(
            "no audit store at {}",
            path.display()
        )));
    }
    let mut conn = crate::store::sqlite::open_for_writing(path)?;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(shown)?;
    let found = tx
        .query_row(
            &format!("SELECT {COLUMNS} FROM grants WHERE id = ?1"),
            params![id],
            of_row,
        )
        .optional()
        .map_err(shown)?;
    let now = now_ms(SystemTime::now());
    let outcome = match found {
        None => Revoked::Unknown,
        Some(g) if g.state(now) != "active" => Revoked::Already(g),
        Some(mut g) => {
            tx.execute(
                "UPDATE grants SET revoked_ms = ?1, revoked_by = ?3 WHERE id = ?2",
                params![now, id, by],
            )
            .map_err(shown)?;
            if row {
                tx.execute(
                    &format!("INSERT INTO calls (id, time_ms, caller, upstream, tool, arguments_digest, rule, status, latency_ms, grant_id) VALUES ({}, ?1, ?2, ?3, 'toolgate.grant', '', ?4, 'revoked', 0, ?5)", crate::store::sqlite::NEXT_ID),
                    params![now, by, g.upstream, revoked_rule(&g), g.id],
                )
                .map_err(shown)?;
            }
            g.revoked_ms = Some(now);
            g.revoked_by = Some(by.to_owned());
            Revoked::Now(g)
        }
    };
    tx.commit().map_err(shown)?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::grants::*;
    use std::time::Duration;

    #[test]
    fn a_grant_holds_for_its_caller_and_tool_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let conn = crate::store::sqlite::open_for_writing(&path).unwrap();
        let g = Grant::new(
            Some("alice"),
            BOUND,
            "shop.pay",
            "rule 1",
            Duration::from_secs(3600),
        );
        insert(&conn, &g).unwrap();
        let now = now_ms(SystemTime::now());
        assert_eq!(
            find(&conn, Some("alice"), "shop.pay", now).unwrap(),
            Some(g.clone())
        );
        assert_eq!(find(&conn, Some("bob"), "shop.pay", now).unwrap(), None);
        assert_eq!(find(&conn, None, "shop.pay", now).unwrap(), None);
        assert_eq!(
            find(&conn, Some("alice"), "shop.refund", now).unwrap(),
            None
        );
        assert_eq!(
            find(&conn, Some("alice"), "shop.pay", g.expires_ms).unwrap(),
            None
        );
        assert_eq!(list(&path, false).unwrap(), std::slice::from_ref(&g));
        let Revoked::Now(r) = revoke(&path, &g.id, "cli").unwrap() else {
            panic!("not revoked");
        };
        assert_eq!(r.state(now), "revoked");
        assert_eq!(find(&conn, Some("alice"), "shop.pay", now).unwrap(), None);
        assert!(list(&path, false).unwrap().is_empty());
        assert_eq!(list(&path, true).unwrap().len(), 1);
        assert_eq!(r.revoked_by.as_deref(), Some("cli"));
        assert!(matches!(
            revoke(&path, &g.id, "cli").unwrap(),
            Revoked::Already(_)
        ));
        assert_eq!(revoke(&path, "g-nope", "cli").unwrap(), Revoked::Unknown);
        // The revocation is in the log.
        let rows =
            crate::store::sqlite::query(&path, &crate::store::sqlite::Filter::default()).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].status, "revoked");
        assert_eq!(rows[0].grant.as_deref(), Some(g.id.as_str()));
        assert_eq!(rows[0].caller.as_deref(), Some("cli"), "who revoked");
        assert_eq!(
            rows[0].rule.as_deref(),
            Some("revoked grant for shop.pay of alice")
        );
    }

    const BOUND: Bound<'static> = Bound {
        upstream: "shop",
        upstream_tool: "pay",
        digest: "sha256:aa",
    };

    #[test]
    fn a_grant_ends_when_its_tool_moves_or_changes() {
        let g = Grant::new(None, BOUND, "shop.pay", "rule 1", Duration::from_secs(60));
        assert_eq!(g.ended_by(BOUND), None);
        let moved = Bound {
            upstream: "other",
            ..BOUND
        };
        assert!(
            g.ended_by(moved)
                .unwrap()
                .contains("it now comes from server other")
        );
        let renamed = Bound {
            upstream_tool: "refund",
            ..BOUND
        };
        assert!(g.ended_by(renamed).unwrap().contains("\"refund\""));
        let changed = Bound {
            digest: "sha256:bb",
            ..BOUND
        };
        assert!(
            g.ended_by(changed)
                .unwrap()
                .starts_with("the tool's definition changed since you approved it")
        );
        // A grant kept before grants were bound holds for nothing.
        let old = Grant {
            upstream_tool: None,
            digest: None,
            ..g
        };
        assert!(old.ended_by(BOUND).is_some());
    }

    #[test]
    fn a_grant_without_a_caller_is_for_callers_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::store::sqlite::open_for_writing(&dir.path().join("a.db")).unwrap();
        let g = Grant::new(None, BOUND, "shop.pay", "rule 1", Duration::from_secs(60));
        insert(&conn, &g).unwrap();
        let now = now_ms(SystemTime::now());
        assert_eq!(find(&conn, None, "shop.pay", now).unwrap(), Some(g));
        assert_eq!(find(&conn, Some("alice"), "shop.pay", now).unwrap(), None);
    }
}
