//! The SQLite audit store's writer: one thread that owns the connection
//! and writes whatever is waiting in one transaction.
//!
//! Layer: a store (below the call path; [`crate::store::sqlite::AuditStore`] hands
//! it jobs and awaits their answers). Outcomes of rows written ahead commit
//! first without a sync; everything else commits with one, so under load
//! one fsync covers many rows. A batch that fails answers each of its jobs
//! with a typed error that keeps SQLite's as its cause.
//!
//! Layer: `store`.

use std::sync::Arc;
use std::time::SystemTime;

use rusqlite::{Connection, params};
use tokio::sync::{mpsc, oneshot};

use crate::base::time::NONCE_MARGIN;
use crate::base::time::now_ms;
use crate::decide::budget::Held;
use crate::decide::budget::Hold;
use crate::decide::budget::SpendKey;
use crate::decide::flows::Label;
use crate::decide::grants::Grant;
use crate::store::AuditRow;
use crate::store::StoreError;

/// Where a job's answer goes.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// What the writer is asked to do, each with where its answer goes.
pub(crate) enum Job {
    Row(Box<AuditRow>, Reply<()>),
    /// A row written ahead: answered with its id once durable.
    Begin(Box<AuditRow>, Reply<i64>),
    /// The outcome of a row written ahead: answered once committed, in a
    /// transaction of outcomes alone that does not sync.
    Complete(i64, Box<AuditRow>, Reply<()>),
    /// Answered with the outcome of the transaction it shares.
    Check(Reply<()>),
    Nonce(String, Reply<bool>),
    Grant(Box<Grant>, Reply<()>),
    Granted {
        caller: Option<String>,
        tool: String,
        reply: Reply<Option<Grant>>,
    },
    Reserve(Box<Hold>, Reply<Held>),
    Settle {
        keys: Vec<SpendKey>,
        held: f64,
        cost: f64,
        reply: Reply<()>,
    },
    FlowLabels {
        key: String,
        now_ms: i64,
        reply: Reply<Vec<Label>>,
    },
    FlowAdd {
        key: String,
        label: Box<Label>,
        expires_ms: i64,
        reply: Reply<()>,
    },
}

/// What a finished job hands back.
enum Done {
    Nothing,
    Fresh(bool),
    Found(Option<Grant>),
    Held(Held),
    Row(i64),
    Labels(Vec<Label>),
}

/// How the writer's connection syncs its commits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Syncing {
    /// Every commit is on disk before it returns (`synchronous = FULL`).
    Durable,
    /// Commits go to the log without a sync (`synchronous = NORMAL`); the
    /// next durable commit's sync covers them, as the log is one file
    /// written in order.
    Deferred,
}

/// Write what arrives, one transaction per batch of what is waiting.
///
/// The outcomes of rows written ahead ([`Job::Complete`]) are committed in
/// a transaction of their own, first, without a sync: their rows are
/// durable already, nobody's answer should wait for a sync again, and the
/// next sync covers them, as the log is one file written in order. Once
/// committed they are what a reader sees, so `toolgate log` run after an
/// answer shows its outcome. The rest of the batch commits with a sync.
pub(crate) fn write_loop(mut conn: Connection, mut rx: mpsc::Receiver<Job>, shown: String) {
    const BATCH: usize = 1024;
    let mut batch = Vec::with_capacity(BATCH);
    let mut outcomes = Vec::new();
    let mut syncing = Syncing::Durable;
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        outcomes.extend(batch.extract_if(.., |j| matches!(j, Job::Complete(..))));
        commit(
            &mut conn,
            &mut outcomes,
            &mut syncing,
            Syncing::Deferred,
            &shown,
        );
        commit(
            &mut conn,
            &mut batch,
            &mut syncing,
            Syncing::Durable,
            &shown,
        );
    }
}

/// Commit `batch` in one transaction, synced as `wanted`, and answer its
/// jobs.
fn commit(
    conn: &mut Connection,
    batch: &mut Vec<Job>,
    syncing: &mut Syncing,
    wanted: Syncing,
    shown: &str,
) {
    if batch.is_empty() {
        return;
    }
    if wanted != *syncing {
        let level = match wanted {
            Syncing::Durable => "FULL",
            Syncing::Deferred => "NORMAL",
        };
        match conn.pragma_update(None, "synchronous", level) {
            Ok(()) => *syncing = wanted,
            Err(e) => {
                tracing::error!(error = %e, "audit store: cannot set synchronous = {level}")
            }
        }
    }
    let mut done: Vec<Done> = batch.iter().map(|_| Done::Nothing).collect();
    // What somebody waits for is never answered from a commit that did not sync.
    let written = if wanted == Syncing::Durable && *syncing != Syncing::Durable {
        Err(Failed::NotDurable)
    } else {
        write_batch(conn, batch, &mut done).map_err(|e| Failed::Sqlite(Arc::new(e)))
    };
    if let Err(e) = &written {
        tracing::error!(error = %e.error(shown), "audit store write failed");
    }
    answer_batch(batch, done, written.as_ref().err().map(|f| (f, shown)));
}

/// The row's columns, in the order of the `INSERT` below.
macro_rules! row_params {
    ($r:expr) => {
        params![
            $r.time_ms,
            $r.caller,
            $r.upstream,
            $r.tool,
            $r.arguments_digest,
            $r.arguments,
            $r.decision,
            $r.rule,
            $r.confirmation,
            $r.status,
            $r.latency_ms,
            $r.grant,
            $r.cost,
            $r.result,
            $r.trace_id,
            $r.endpoint,
            $r.shown,
            $r.flow,
            $r.flow_labels,
            $r.identity,
            $r.via
        ]
    };
}

/// One transaction for `batch`, what each job found in `done`.
fn write_batch(conn: &mut Connection, batch: &[Job], done: &mut [Done]) -> rusqlite::Result<()> {
    // IMMEDIATE: the write lock is taken first, so what a job reads (a
    // budget's room, a nonce) is not changed by another process before the
    // job writes.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let mut insert = tx.prepare_cached(
            &format!("INSERT INTO calls (id, time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, grant_id, cost, result, trace_id, endpoint, shown, flow, flow_labels, identity, via) VALUES ({}, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)", crate::store::sqlite::NEXT_ID),
        )?;
        let mut spend =
            tx.prepare_cached("INSERT OR IGNORE INTO nonces (nonce, spent_ms) VALUES (?1, ?2)")?;
        let now = now_ms(SystemTime::now());
        for (i, job) in batch.iter().enumerate() {
            match job {
                Job::Row(r, _) => {
                    insert.execute(row_params!(r))?;
                }
                Job::Begin(r, _) => {
                    insert.execute(row_params!(r))?;
                    done[i] = Done::Row(tx.last_insert_rowid());
                }
                Job::Complete(id, r, _) => {
                    let mut update = tx.prepare_cached(
                                "UPDATE calls SET upstream = ?2, decision = ?3, rule = ?4, confirmation = ?5, status = ?6, latency_ms = ?7, grant_id = ?8, cost = ?9, result = ?10, trace_id = ?11, arguments_digest = ?12, arguments = ?13, flow = ?14, flow_labels = ?15, identity = ?16, via = ?17 WHERE id = ?1",
                            )?;
                    update.execute(params![
                        id,
                        r.upstream,
                        r.decision,
                        r.rule,
                        r.confirmation,
                        r.status,
                        r.latency_ms,
                        r.grant,
                        r.cost,
                        r.result,
                        r.trace_id,
                        r.arguments_digest,
                        r.arguments,
                        r.flow,
                        r.flow_labels,
                        r.identity,
                        r.via
                    ])?;
                }
                Job::Nonce(nonce, _) => {
                    done[i] = Done::Fresh(spend.execute(params![nonce, now])? == 1);
                }
                Job::Grant(grant, _) => crate::store::sqlite::grants::insert(&tx, grant)?,
                Job::Reserve(hold, _) => {
                    done[i] = Done::Held(crate::store::sqlite::ledger::reserve(&tx, hold)?);
                }
                Job::Settle {
                    keys, held, cost, ..
                } => crate::store::sqlite::ledger::settle(&tx, keys, *held, *cost)?,
                Job::Granted { caller, tool, .. } => {
                    done[i] = Done::Found(crate::store::sqlite::grants::find(
                        &tx,
                        caller.as_deref(),
                        tool,
                        now,
                    )?);
                }
                Job::FlowLabels { key, now_ms, .. } => {
                    done[i] = Done::Labels(crate::store::sqlite::flows::labels(&tx, key, *now_ms)?);
                }
                Job::FlowAdd {
                    key,
                    label,
                    expires_ms,
                    ..
                } => crate::store::sqlite::flows::add(&tx, key, label, *expires_ms)?,
                // Takes the write lock, as a row would.
                Job::Check(_) => {
                    tx.execute("DELETE FROM nonces WHERE spent_ms < 0", [])?;
                }
            }
        }
        if batch.iter().any(|j| matches!(j, Job::Nonce(..))) {
            tx.execute(
                "DELETE FROM nonces WHERE spent_ms < ?1",
                params![now - NONCE_MARGIN.as_millis() as i64],
            )?;
        }
    }
    tx.commit()
}

/// Why a batch was not written: shared by every job of the batch, so each
/// gets an error of its own with the same cause.
enum Failed {
    /// SQLite refused it.
    Sqlite(Arc<rusqlite::Error>),
    /// The connection could not be set to sync its commits.
    NotDurable,
}

impl Failed {
    /// The error a job of the batch is answered with (`shown`: the store).
    fn error(&self, shown: &str) -> StoreError {
        match self {
            Failed::Sqlite(source) => StoreError::SqliteWrite {
                context: format!("the audit store {shown} could not be written"),
                source: source.clone(),
            },
            Failed::NotDurable => StoreError::Other(format!(
                "the audit store {shown} cannot make writes durable (synchronous = FULL)"
            )),
        }
    }
}

/// Tell each job of `batch` how its transaction ended: `failed` (and the
/// store's name) when it was not written.
fn answer_batch(batch: &mut Vec<Job>, done: Vec<Done>, failed: Option<(&Failed, &str)>) {
    for (job, done) in batch.drain(..).zip(done) {
        let failed = || failed.map(|(f, shown)| f.error(shown));
        match job {
            Job::Row(_, reply)
            | Job::Check(reply)
            | Job::Grant(_, reply)
            | Job::Settle { reply, .. }
            | Job::FlowAdd { reply, .. }
            | Job::Complete(_, _, reply) => {
                let _ = reply.send(failed().map_or(Ok(()), Err));
            }
            Job::Begin(_, reply) => {
                let id = match done {
                    Done::Row(id) => id,
                    _ => 0,
                };
                let _ = reply.send(failed().map_or(Ok(id), Err));
            }
            Job::Nonce(_, reply) => {
                let fresh = matches!(done, Done::Fresh(true));
                let _ = reply.send(failed().map_or(Ok(fresh), Err));
            }
            Job::Reserve(_, reply) => {
                let held = match done {
                    Done::Held(held) => held,
                    // Not reached: a reservation's job always says.
                    _ => Held::Over {
                        index: 0,
                        spent: 0.0,
                        reserved: 0.0,
                    },
                };
                let _ = reply.send(failed().map_or(Ok(held), Err));
            }
            Job::FlowLabels { reply, .. } => {
                let labels = match done {
                    Done::Labels(labels) => labels,
                    _ => Vec::new(),
                };
                let _ = reply.send(failed().map_or(Ok(labels), Err));
            }
            Job::Granted { reply, .. } => {
                let found = match done {
                    Done::Found(found) => found,
                    _ => None,
                };
                let _ = reply.send(failed().map_or(Ok(found), Err));
            }
        }
    }
}
