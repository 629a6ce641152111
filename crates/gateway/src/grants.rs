//! Grants: a person's approval of one tool, for one caller, for a while.
//!
//! A policy rule with `remember = "1h"` lets the approval form offer, next
//! to "this call only", "this tool, any arguments, for this caller, for the
//! next hour". Taking it writes a [`Grant`] to the audit store; while it
//! holds, calls of that tool by that caller that the policy still confirms
//! under a rule with `remember` go through without a question, each one
//! recorded with the grant's id. Grants live in the audit store, so
//! instances sharing PostgreSQL share them, and `toolgate grants` lists
//! and revokes them (a revocation is checked on the very next call).
//!
//! A grant is bound to what the person saw: the upstream, the tool's name
//! there and the digest of its definition (as the lock file computes it).
//! A reload that gives the gateway name to another upstream, or a
//! definition that changes (a rug pull), ends it: the next call asks
//! again, saying why ([`Grant::ended_by`]).
//!
//! This module owns the grant's shape and its SQLite side; the PostgreSQL
//! side is in [`crate::audit_pg`].

use std::path::Path;
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::audit::now_ms;

use crate::StoreError;

/// The longest `remember` a rule may have: an approval that outlives a
/// working day is a policy decision, written as an `allow` rule.
pub const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// One grant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// `g-` and 16 hex digits.
    pub id: String,
    /// When the person granted it (ms since the Unix epoch).
    pub created_ms: i64,
    /// When it ends.
    pub expires_ms: i64,
    /// When it was revoked, if it was.
    pub revoked_ms: Option<i64>,
    /// The caller's verified subject; none for a gateway without `[auth]`
    /// (then every caller of the gateway is the same caller).
    pub caller: Option<String>,
    /// The upstream server's name.
    pub upstream: Option<String>,
    /// The gateway tool name.
    pub tool: String,
    /// The rule that allowed remembering (as the audit rows name rules).
    pub rule: String,
    /// The tool's name at its upstream.
    #[serde(default)]
    pub upstream_tool: Option<String>,
    /// The digest of the definition the person approved (`sha256:…`, as
    /// in lock files).
    #[serde(default)]
    pub digest: Option<String>,
    /// Who revoked it: a console session's subject, or `cli`.
    #[serde(default)]
    pub revoked_by: Option<String>,
}

/// What a grant is for: the tool as the person saw it.
#[derive(Clone, Copy, Debug)]
pub struct Bound<'a> {
    /// The upstream server's name.
    pub upstream: &'a str,
    /// The tool's name there.
    pub upstream_tool: &'a str,
    /// The digest of its definition.
    pub digest: &'a str,
}

impl Grant {
    /// A grant of `tool`, as `bound`, starting now, for `span`.
    pub fn new(
        caller: Option<&str>,
        bound: Bound<'_>,
        tool: &str,
        rule: &str,
        span: Duration,
    ) -> Self {
        let now = now_ms(SystemTime::now());
        let id = crate::confirm::new_nonce();
        Self {
            id: format!("g-{}", &id[..16]),
            created_ms: now,
            expires_ms: now.saturating_add(span.as_millis() as i64),
            revoked_ms: None,
            caller: caller.map(str::to_owned),
            upstream: Some(bound.upstream.to_owned()),
            tool: tool.to_owned(),
            rule: rule.to_owned(),
            upstream_tool: Some(bound.upstream_tool.to_owned()),
            digest: Some(bound.digest.to_owned()),
            revoked_by: None,
        }
    }

    /// Why this grant does not hold for the tool as it is now (`bound`),
    /// in words for the person asked again; `None` when it holds.
    pub fn ended_by(&self, bound: Bound<'_>) -> Option<String> {
        let upstream = self.upstream.as_deref().unwrap_or("?");
        if upstream != bound.upstream {
            return Some(format!(
                "the approval you gave earlier (grant {}) was for this tool on server {upstream}; it now comes from server {}, so it is asked again",
                self.id, bound.upstream
            ));
        }
        if self.upstream_tool.as_deref() != Some(bound.upstream_tool) {
            return Some(format!(
                "the approval you gave earlier (grant {}) was for another tool of server {upstream}; this name now leads to its tool {:?}",
                self.id, bound.upstream_tool
            ));
        }
        if self.digest.as_deref() != Some(bound.digest) {
            return Some(format!(
                "the tool's definition changed since you approved it (grant {}), so it is asked again",
                self.id
            ));
        }
        None
    }

    /// `active`, `expired` or `revoked`, at `now_ms`.
    pub fn state(&self, now_ms: i64) -> &'static str {
        if self.revoked_ms.is_some() {
            "revoked"
        } else if self.expires_ms <= now_ms {
            "expired"
        } else {
            "active"
        }
    }
}

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
    let shown = crate::audit::reading(path);
    let conn = crate::audit::open_for_reading(path)?;
    // A store written before grants existed has none.
    if !has_grants(&conn).map_err(crate::audit::not_a_store(path))? {
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

/// What revoking found.
#[derive(Debug, PartialEq, Eq)]
pub enum Revoked {
    /// It held, and holds no more.
    Now(Grant),
    /// It had already ended (`expired` or `revoked`).
    Already(Grant),
    /// No grant has this id.
    Unknown,
}

/// Revoke the grant `id` in the database at `path` as `by` (a console
/// session's subject, or `cli`), and record the revocation there as a row
/// (`toolgate.grant`, status `revoked`, `by` its caller).
pub fn revoke(path: &Path, id: &str, by: &str) -> Result<Revoked, StoreError> {
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
    let mut conn = crate::audit::open_for_writing(path)?;
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
            tx.execute(
                "INSERT INTO calls (time_ms, caller, upstream, tool, arguments_digest, rule, status, latency_ms, grant_id) VALUES (?1, ?2, ?3, 'toolgate.grant', '', ?4, 'revoked', 0, ?5)",
                params![now, by, g.upstream, revoked_rule(&g), g.id],
            )
            .map_err(shown)?;
            g.revoked_ms = Some(now);
            g.revoked_by = Some(by.to_owned());
            Revoked::Now(g)
        }
    };
    tx.commit().map_err(shown)?;
    Ok(outcome)
}

/// The revocation row's `rule`: whose grant of what.
pub(crate) fn revoked_rule(g: &Grant) -> String {
    match &g.caller {
        Some(caller) => format!("revoked grant for {} of {caller}", g.tool),
        None => format!("revoked grant for {}", g.tool),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_holds_for_its_caller_and_tool_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let conn = crate::audit::open_for_writing(&path).unwrap();
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
        let rows = crate::audit::query(&path, &crate::audit::Filter::default()).unwrap();
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
        let conn = crate::audit::open_for_writing(&dir.path().join("a.db")).unwrap();
        let g = Grant::new(None, BOUND, "shop.pay", "rule 1", Duration::from_secs(60));
        insert(&conn, &g).unwrap();
        let now = now_ms(SystemTime::now());
        assert_eq!(find(&conn, None, "shop.pay", now).unwrap(), Some(g));
        assert_eq!(find(&conn, Some("alice"), "shop.pay", now).unwrap(), None);
    }
}
