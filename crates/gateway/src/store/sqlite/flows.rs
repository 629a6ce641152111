//! Flow labels in the SQLite audit store (layer `store`): their table, and
//! reading and adding them on the writer's connection.

use rusqlite::{Connection, params};

use crate::decide::flows::Label;
use crate::store::flows::{MAX_LABELS, class_of};

/// The SQLite table (schema version 7).
pub(crate) const TABLE: &str = "
CREATE TABLE IF NOT EXISTS flow_labels (
    key TEXT NOT NULL,
    class TEXT NOT NULL,
    tool TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    origin TEXT,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (key, class, tool)
);
CREATE INDEX IF NOT EXISTS flow_labels_expiry ON flow_labels(expires_ms);
";

/// The labels of flow `key` not expired by `now`.
pub(crate) fn labels(conn: &Connection, key: &str, now: i64) -> rusqlite::Result<Vec<Label>> {
    let mut stmt = conn.prepare_cached(
        "SELECT class, tool, time_ms, origin FROM flow_labels WHERE key = ?1 AND expires_ms > ?2 ORDER BY time_ms LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![key, now, MAX_LABELS as i64], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, Option<String>>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (class, tool, time_ms, from) = row?;
        // A class this version does not know is not one it can act on.
        if let Some(class) = class_of(&class) {
            out.push(Label {
                class,
                tool,
                time_ms,
                from,
            });
        }
    }
    Ok(out)
}

/// Add `label` to flow `key` until `expires` (once per class and tool, its
/// expiry moved on); expired labels of every flow go now and then.
pub(crate) fn add(
    conn: &Connection,
    key: &str,
    label: &Label,
    expires: i64,
) -> rusqlite::Result<()> {
    let count: i64 = conn
        .prepare_cached("SELECT count(*) FROM flow_labels WHERE key = ?1")?
        .query_row([key], |r| r.get(0))?;
    if count >= MAX_LABELS as i64 {
        conn.prepare_cached(
            "UPDATE flow_labels SET expires_ms = max(expires_ms, ?4) WHERE key = ?1 AND class = ?2 AND tool = ?3",
        )?
        .execute(params![key, label.class.label(), label.tool, expires])?;
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT INTO flow_labels (key, class, tool, time_ms, origin, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (key, class, tool) DO UPDATE SET expires_ms = max(expires_ms, excluded.expires_ms)",
    )?
    .execute(params![
        key,
        label.class.label(),
        label.tool,
        label.time_ms,
        label.from,
        expires
    ])?;
    // Bounded: whatever has expired goes with a write that finds any.
    conn.prepare_cached("DELETE FROM flow_labels WHERE expires_ms <= ?1")?
        .execute([label.time_ms])?;
    Ok(())
}
