//! The indexer: feeds the SQLite audit store from the call log, in the
//! background, and removes the log behind it.
//!
//! It takes the records just written from the writer ([`Feed`]: parsed
//! already, never read back from the file; at start, what the log holds
//! past the store's recorded position is read with a [`Follower`]),
//! applies each batch in one transaction, and records the position after
//! it in the same transaction — so a record is applied once however often
//! the indexer stops and starts (and each statement is idempotent besides:
//! a begun call is inserted only if absent, an outcome updates its row).
//!
//! The store's commits are not synced (`synchronous = NORMAL`): the log is
//! what is durable, and a commit lost to a power loss takes its recorded
//! position with it, so the records are applied again from the log. The
//! one commit that is synced is the one before a segment is deleted.
//!
//! Layer: `store`.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension as _, params};

use super::record::{self, Bad, Kind, Record};
use super::segment::{self, Position};
use super::writer::{Entry, Feed, Written};

/// Where the store is indexed to.
pub fn progress(conn: &Connection) -> rusqlite::Result<Position> {
    conn.query_row(
        "SELECT segment, offset FROM log_progress WHERE one = 1",
        [],
        |r| {
            Ok(Position {
                segment: r.get::<_, i64>(0)? as u64,
                offset: r.get::<_, i64>(1)? as u64,
            })
        },
    )
    .optional()
    .map(Option::unwrap_or_default)
}

/// Reads whole records from the log, onwards from a position.
pub struct Follower {
    dir: PathBuf,
    at: Position,
    file: Option<File>,
    pending: Vec<u8>,
}

impl Follower {
    /// Follow the log in `dir` from `at`.
    pub fn new(dir: &Path, at: Position) -> Self {
        Self {
            dir: dir.to_owned(),
            at,
            file: None,
            pending: Vec::new(),
        }
    }

    /// Where it has read to (past the last whole record returned).
    pub fn position(&self) -> Position {
        self.at
    }

    /// The whole records written since, each with the position after it
    /// (at most `most`); moves to the next segment once this one is done
    /// and a newer one exists.
    pub fn next(&mut self, most: usize) -> std::io::Result<Vec<(Record, Position)>> {
        let mut out = Vec::new();
        loop {
            if self.file.is_none() {
                match File::open(segment::path_of(&self.dir, self.at.segment)) {
                    Ok(mut f) => {
                        f.seek(SeekFrom::Start(self.at.offset))?;
                        self.file = Some(f);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        // Not begun yet, or set aside: the next one, if any.
                        if segment::list(&self.dir)?
                            .iter()
                            .any(|n| *n > self.at.segment)
                        {
                            self.at = Position {
                                segment: self.at.segment + 1,
                                offset: 0,
                            };
                            continue;
                        }
                        return Ok(out);
                    }
                    Err(e) => return Err(e),
                }
            }
            let Some(file) = self.file.as_mut() else {
                return Ok(out);
            };
            let mut fresh = Vec::new();
            file.read_to_end(&mut fresh)?;
            self.pending.extend_from_slice(&fresh);
            let mut used = 0;
            while out.len() < most {
                match record::decode(&self.pending[used..]) {
                    Ok((record, n)) => {
                        used += n;
                        self.at.offset += n as u64;
                        out.push((record, self.at));
                    }
                    Err(Bad::Short) => break,
                    Err(Bad::Corrupt) => {
                        // The writer writes whole records: a bad one here
                        // was altered after it was written. Nothing after
                        // it can be trusted in this segment.
                        tracing::error!(
                            segment = self.at.segment,
                            offset = self.at.offset,
                            "the call log holds a record that does not check out; the rest of that segment is not indexed (see `toolgate log --verify`)"
                        );
                        self.pending.clear();
                        used = 0;
                        self.at = Position {
                            segment: self.at.segment + 1,
                            offset: 0,
                        };
                        self.file = None;
                        break;
                    }
                }
            }
            self.pending.drain(..used);
            if out.len() >= most || self.file.is_none() {
                return Ok(out);
            }
            // This segment is read to its end: is there a newer one?
            let newer = segment::list(&self.dir)?
                .iter()
                .any(|n| *n > self.at.segment);
            if newer && self.pending.is_empty() {
                self.at = Position {
                    segment: self.at.segment + 1,
                    offset: 0,
                };
                self.file = None;
                continue;
            }
            return Ok(out);
        }
    }
}

/// Apply `records` to the store and record `to` as indexed, in one
/// transaction.
pub fn apply(conn: &mut Connection, records: &[Entry], to: Position) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let mut insert = tx.prepare_cached(
            "INSERT OR IGNORE INTO calls (id, time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, grant_id, cost, result, trace_id, endpoint, shown, flow, flow_labels, identity, via) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
        )?;
        let mut replace = tx.prepare_cached(
            "INSERT OR REPLACE INTO calls (id, time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, grant_id, cost, result, trace_id, endpoint, shown, flow, flow_labels, identity, via) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
        )?;
        let mut update = tx.prepare_cached(
            "UPDATE calls SET time_ms = ?2, caller = ?3, upstream = ?4, tool = ?5, arguments_digest = ?6, arguments = ?7, decision = ?8, rule = ?9, confirmation = ?10, status = ?11, latency_ms = ?12, grant_id = ?13, cost = ?14, result = ?15, trace_id = ?16, endpoint = ?17, shown = ?18, flow = ?19, flow_labels = ?20, identity = ?21, via = ?22 WHERE id = ?1",
        )?;
        // One statement per call: a call begun and ended in this batch is
        // inserted once, as it ended (half the work of an insert and an
        // update).
        let mut calls: Vec<(Kind, &Record)> = Vec::with_capacity(records.len());
        let mut at: std::collections::HashMap<i64, usize> =
            std::collections::HashMap::with_capacity(records.len());
        for entry in records {
            let record = &*entry.record;
            match at.get(&record.row.id) {
                Some(&i) => calls[i].1 = record,
                None => {
                    at.insert(record.row.id, calls.len());
                    calls.push((record.kind, record));
                }
            }
        }
        for (first, record) in calls {
            let r = &record.row;
            let values = params![
                r.id,
                r.time_ms,
                r.caller,
                r.upstream,
                r.tool,
                r.arguments_digest,
                r.arguments,
                r.decision,
                r.rule,
                r.confirmation,
                r.status,
                r.latency_ms,
                r.grant,
                r.cost,
                r.result,
                r.trace_id,
                r.endpoint,
                r.shown,
                r.flow,
                r.flow_labels,
                r.identity,
                r.via
            ];
            match (first, record.kind) {
                // Begun, no outcome yet: never over a row that has one.
                (Kind::Begin, Kind::Begin) => insert.execute(values)?,
                // The outcome of a call begun in an earlier batch.
                (Kind::Outcome, _) => update.execute(values)?,
                // Begun and ended here, or recorded whole.
                _ => replace.execute(values)?,
            };
        }
        tx.execute(
            "INSERT INTO log_progress (one, segment, offset) VALUES (1, ?1, ?2)
             ON CONFLICT (one) DO UPDATE SET segment = excluded.segment, offset = excluded.offset",
            params![to.segment as i64, to.offset as i64],
        )?;
    }
    tx.commit()
}

/// Delete the segments before `indexed`'s: every record in them is in the
/// store.
pub fn remove_behind(dir: &Path, indexed: Position) {
    let Ok(segments) = segment::list(dir) else {
        return;
    };
    for n in segments.into_iter().filter(|n| *n < indexed.segment) {
        if let Err(e) = std::fs::remove_file(segment::path_of(dir, n)) {
            tracing::warn!(segment = n, error = %e, "an indexed call log segment could not be removed");
        }
    }
}

/// Run the indexer until the writer is gone: take what was written, apply
/// it, tell the writer (readers find it in the store now), remove indexed
/// segments. `indexed` follows its progress.
pub fn run(mut conn: Connection, dir: &Path, feed: &Feed, indexed: &Written) {
    if let Err(e) = conn.pragma_update(None, "synchronous", "NORMAL") {
        tracing::warn!(error = %e, "the audit store's indexer cannot relax its syncs; it syncs each batch");
    }
    let mut segment = indexed.now().segment;
    while let Some(batch) = feed.take() {
        let Some(to) = batch.last().map(|e| e.at) else {
            continue;
        };
        // Before the segments behind it go, the store holds their records
        // durably: this commit is synced, and covers every earlier one.
        let leaving = to.segment > segment;
        if leaving {
            let _ = conn.pragma_update(None, "synchronous", "FULL");
        }
        let applied = apply(&mut conn, &batch, to);
        if leaving {
            let _ = conn.pragma_update(None, "synchronous", "NORMAL");
        }
        match applied {
            Ok(()) => {
                feed.indexed(batch.len());
                indexed.advance(to);
                if leaving {
                    remove_behind(dir, to);
                    segment = to.segment;
                }
            }
            Err(e) => {
                // The store is busy or failing: the records stay with the
                // writer (and in the log); take them again shortly.
                tracing::warn!(error = %e, "the audit store could not be fed from the call log; trying again");
                feed.retry();
                if feed.stopping() {
                    return;
                }
                feed.pause(Duration::from_millis(500));
            }
        }
    }
}
