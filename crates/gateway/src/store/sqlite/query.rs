//! Reading the SQLite audit store: the rows `toolgate log`, the console
//! and the stores' queries see, opened read-only.
//!
//! Layer: a store (reads only; the writer is `writer.rs`).
//! Re-exported from [`crate::store::sqlite`], where these were first.
//!
//! Layer: `store`.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params};

use crate::store::AuditRow;
use crate::store::StoreError;

/// Which rows [`query`] returns.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Rows after this id (for following).
    pub after_id: Option<i64>,
    /// Rows before this id (for paging back, or one row by its id).
    pub before_id: Option<i64>,
    /// Rows at or after this time (ms since the epoch).
    pub since_ms: Option<i64>,
    /// A glob on the tool name.
    pub tool: Option<String>,
    /// The caller's subject, exactly.
    pub caller: Option<String>,
    /// The decision, exactly (`allow`, `confirm`, `deny`).
    pub decision: Option<String>,
    /// The endpoint, exactly (`-` for the default one).
    pub endpoint: Option<String>,
    /// At most this many rows (the newest), in time order.
    pub limit: Option<usize>,
}

/// Rows of the database at `path`, oldest first. Opened read-only.
pub fn query(path: &Path, filter: &Filter) -> Result<Vec<AuditRow>, StoreError> {
    let conn = open_for_reading(path)?;
    let tool = match &filter.tool {
        Some(g) => Some(
            glob::Pattern::new(g).map_err(|e| StoreError::Other(format!("--tool {g:?}: {e}")))?,
        ),
        None => None,
    };
    // A store written before grants existed has no grant column.
    let version: i32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(not_a_store(path))?;
    let grant = if version >= 2 { "grant_id" } else { "NULL" };
    let cost = if version >= 3 { "cost" } else { "NULL" };
    let (result, trace) = if version >= 4 {
        ("result", "trace_id")
    } else {
        ("NULL", "NULL")
    };
    let (endpoint, shown) = if version >= 6 {
        ("endpoint", "shown")
    } else {
        ("NULL", "NULL")
    };
    let (flow, flow_labels) = if version >= 7 {
        ("flow", "flow_labels")
    } else {
        ("NULL", "NULL")
    };
    let identity = if version >= 8 { "identity" } else { "NULL" };
    let via = if version >= 9 { "via" } else { "NULL" };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT id, time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, {grant}, {cost}, {result}, {trace}, {endpoint}, {shown}, {flow}, {flow_labels}, {identity}, {via} FROM calls WHERE id > ?1 AND time_ms >= ?2 AND (?3 IS NULL OR caller = ?3) AND (?4 IS NULL OR decision = ?4) AND id < ?5 ORDER BY id DESC"
        ))
        .map_err(not_a_store(path))?;
    let rows = stmt
        .query_map(
            params![
                filter.after_id.unwrap_or(0),
                filter.since_ms.unwrap_or(0),
                filter.caller,
                filter.decision,
                filter.before_id.unwrap_or(i64::MAX)
            ],
            |r| {
                Ok(AuditRow {
                    id: r.get(0)?,
                    time_ms: r.get(1)?,
                    caller: r.get(2)?,
                    upstream: r.get(3)?,
                    tool: r.get(4)?,
                    arguments_digest: r.get(5)?,
                    arguments: r.get(6)?,
                    decision: r.get(7)?,
                    rule: r.get(8)?,
                    confirmation: r.get(9)?,
                    status: r.get(10)?,
                    latency_ms: r.get(11)?,
                    grant: r.get(12)?,
                    cost: r.get(13)?,
                    result: r.get(14)?,
                    trace_id: r.get(15)?,
                    endpoint: r.get(16)?,
                    shown: r.get(17)?,
                    flow: r.get(18)?,
                    flow_labels: r.get(19)?,
                    identity: r.get(20)?,
                    via: r.get(21)?,
                })
            },
        )
        .map_err(reading(path))?;
    let stored = newest(
        rows.map(|r| r.map_err(reading(path))),
        tool.as_ref(),
        filter.endpoint.as_deref(),
        filter.limit,
    )?;
    Ok(stored)
}

/// Open the database at `path` read-only, as `toolgate log` and
/// `toolgate grants` do (a writer may be busy: wait for it a while).
pub(crate) fn open_for_reading(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| StoreError::Sqlite {
        context: format!("cannot open the audit store {}", path.display()),
        source,
    })?;
    let _ = conn.busy_timeout(Duration::from_secs(5));
    Ok(conn)
}

/// The error of a file that is not (or not yet) a toolgate audit store.
pub(crate) fn not_a_store(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        context: format!("{}: not a toolgate audit store", path.display()),
        source,
    }
}

/// The error of a row that could not be read.
pub(crate) fn reading(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        context: format!("reading {}", path.display()),
        source,
    }
}

/// Of `rows` (newest first), those matching `tool`, at most `limit` of
/// them (reading stops there), oldest first.
pub(crate) fn newest<E>(
    rows: impl Iterator<Item = Result<AuditRow, E>>,
    tool: Option<&glob::Pattern>,
    endpoint: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<AuditRow>, E> {
    let mut out = Vec::new();
    for row in rows {
        let row = row?;
        if tool.is_some_and(|p| !p.matches(&row.tool)) {
            continue;
        }
        if endpoint.is_some_and(|e| row.endpoint.as_deref().unwrap_or("-") != e) {
            continue;
        }
        out.push(row);
        if limit.is_some_and(|n| out.len() >= n) {
            break;
        }
    }
    out.reverse();
    Ok(out)
}
