//! The audit store: every decision and call, durable before its answer
//! is sent.
//!
//! An embedded SQLite database (WAL, `synchronous = FULL`) written by one
//! thread. Calls finishing together share one transaction, so under load
//! one fsync covers many rows — and each call's answer still waits for the
//! commit that holds its row, so `kill -9` at any moment loses no call
//! whose result a client received. A forwarded call's row is written ahead
//! ([`AuditSink::begin`]), beside the forward, and its outcome completes it
//! ([`AuditSink::complete`]) in a commit that does not sync. The same thread spends the nonces of
//! single-use rounds ([`NonceStore`]), so a replayed round is refused even
//! by another process sharing the file.
//!
//! `toolgate log` reads the database ([`query`]).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use toolgate_server::CallRecord;

use toolgate_server::{NonceStore, SpendFuture};

use crate::StoreError;
use crate::budget::{Balance, Held, Hold, Ledger, SpendKey};
use crate::grants::Grant;

/// One row of the audit store.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditRow {
    /// Row number, increasing.
    pub id: i64,
    /// When the call was taken, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The caller's verified subject.
    pub caller: Option<String>,
    /// The upstream server's name.
    pub upstream: Option<String>,
    /// The gateway tool name.
    pub tool: String,
    /// SHA-256 of the canonical arguments, base64url.
    pub arguments_digest: String,
    /// The arguments, when `[audit] arguments = true`.
    pub arguments: Option<String>,
    /// `allow`, `confirm` or `deny`.
    pub decision: Option<String>,
    /// Which rule decided, by place and conditions (`rule 2 (tools
    /// ["*.pay"])`, `default (confirm)`, `built-in default (…)`), or what
    /// withheld the tool (`lock file: …`).
    pub rule: Option<String>,
    /// `asked`, `approved`, `granted` (let through by a grant),
    /// `declined`, `cancelled` or `unsolicited`.
    pub confirmation: Option<String>,
    /// `ok`, `tool_error`, `invalid_arguments`, `output_invalid`,
    /// `upstream_error`, `timeout`, `forwarded` (written ahead, no outcome
    /// recorded: the gateway stopped first), `denied`, `declined`,
    /// `approval_pending`, `approval_unavailable`, `rate_limited`,
    /// `withheld`, `input_required`,
    /// `failed`; for a refused `requestState`: `replayed`, `moved`,
    /// `tampered` or `expired`; `insufficient_scope`; `loop` (stopped by
    /// `[loops]`); `over_budget` (`[[budget]]`); `reloaded` and
    /// `revoked` for the rows of `toolgate.reload` and `toolgate.grant`;
    /// `locked` for `toolgate.lock` (a definition approved on the console,
    /// `caller` who approved it, `arguments_digest` its digest).
    pub status: String,
    /// Milliseconds from taking the call to its answer.
    pub latency_ms: f64,
    /// The grant this row is about: the one a person gave with this call
    /// (`confirmation` `approved`), the one that let it through
    /// (`granted`), or the one revoked (tool `toolgate.grant`).
    pub grant: Option<String>,
    /// What the call cost, under its `[[budget]]`, when it was charged.
    pub cost: Option<f64>,
    /// What the answer was, without its content: `2 blocks: text (15
    /// chars), image; structured` (and for a tool error, the start of what
    /// it said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The W3C trace id the call ran under (the gateway's span, or the
    /// caller's `traceparent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    caller TEXT,
    upstream TEXT,
    tool TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    arguments TEXT,
    decision TEXT,
    rule TEXT,
    confirmation TEXT,
    status TEXT NOT NULL,
    latency_ms REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_time ON calls(time_ms);
CREATE TABLE IF NOT EXISTS nonces (
    nonce TEXT PRIMARY KEY,
    spent_ms INTEGER NOT NULL
);
";

/// The schema version this toolgate writes: 2 added grants, 3 budgets,
/// 4 each call's result summary and trace id, 5 budget reservations and
/// grants bound to a definition.
const VERSION: i32 = 5;

/// Bring a store to [`VERSION`], one process at a time.
fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: i32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < 2 {
        let has_grant_column = tx
            .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = 'grant_id'")?
            .exists([])?;
        if !has_grant_column {
            tx.execute_batch("ALTER TABLE calls ADD COLUMN grant_id TEXT;")?;
        }
        tx.execute_batch(crate::grants::TABLE)?;
    }
    if version < 3 {
        let has_cost_column = tx
            .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = 'cost'")?
            .exists([])?;
        if !has_cost_column {
            tx.execute_batch("ALTER TABLE calls ADD COLUMN cost REAL;")?;
        }
        tx.execute_batch(crate::ledger_sqlite::TABLE)?;
    }
    if version < 4 {
        for column in ["result", "trace_id"] {
            let has = tx
                .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = ?1")?
                .exists([column])?;
            if !has {
                tx.execute_batch(&format!("ALTER TABLE calls ADD COLUMN {column} TEXT;"))?;
            }
        }
    }
    if version < 5 {
        for column in crate::grants::BOUND_COLUMNS {
            let has = tx
                .prepare("SELECT 1 FROM pragma_table_info('grants') WHERE name = ?1")?
                .exists([column])?;
            if !has {
                tx.execute_batch(&format!("ALTER TABLE grants ADD COLUMN {column} TEXT;"))?;
            }
        }
        let has = tx
            .prepare("SELECT 1 FROM pragma_table_info('spend') WHERE name = 'reserved'")?
            .exists([])?;
        if !has {
            tx.execute_batch("ALTER TABLE spend ADD COLUMN reserved REAL NOT NULL DEFAULT 0;")?;
        }
    }
    if version < VERSION {
        tx.execute_batch(&format!("PRAGMA user_version = {VERSION};"))?;
    }
    tx.commit()
}

/// Nonces older than this are forgotten (a state that old is refused as
/// expired by the server anyway; the margin covers clock skew between
/// instances).
pub(crate) const NONCE_MARGIN: Duration = Duration::from_secs(3600);

/// The future of a store operation.
pub type StoreFuture<T> =
    Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'static>>;

/// Where rows go and approvals are spent: the embedded SQLite store, or
/// PostgreSQL shared by several instances ([`crate::audit_pg`]).
pub trait AuditSink: NonceStore + Send + Sync {
    /// Write `row`; resolves once it is durable.
    fn write(&self, row: AuditRow) -> StoreFuture<()>;
    /// Write `row` ahead of its call's effect; resolves with its id once
    /// it is durable.
    fn begin(&self, row: AuditRow) -> StoreFuture<i64>;
    /// Complete the row `id` written ahead with the call's outcome (every
    /// column but its time, caller, tool and arguments). Resolves once the
    /// outcome is committed and readers see it, without waiting for a sync
    /// of its own where the store can avoid one: the row it completes is
    /// durable already.
    fn complete(&self, id: i64, row: AuditRow) -> StoreFuture<()>;
    /// Whether rows keep the arguments, not only their digest.
    fn keeps_arguments(&self) -> bool;
    /// Where it is, for messages (a file, or a database URL without its
    /// password).
    fn location(&self) -> String;
    /// Whether a row could be written now (for readiness).
    fn check(&self) -> StoreFuture<()>;
    /// The same store, where the gateway's single-use rounds are spent.
    fn nonces(self: std::sync::Arc<Self>) -> crate::confirm::SharedNonces;
    /// Keep `grant`; resolves once it is durable.
    fn grant(&self, grant: Grant) -> StoreFuture<()>;
    /// The newest grant that holds now for `caller` calling `tool`
    /// (revocations by any process included); whether it is for the tool
    /// as it is now is [`Grant::ended_by`]'s to say.
    fn granted(&self, caller: Option<String>, tool: String) -> StoreFuture<Option<Grant>>;
    /// The same store, where budgets' spending is kept.
    fn ledger(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn Ledger>;
    /// Rows, oldest first, as `toolgate log` reads them.
    fn rows(&self, filter: Filter) -> StoreFuture<Vec<AuditRow>>;
    /// The grants that hold now, or with `all` every one kept.
    fn grants(&self, all: bool) -> StoreFuture<Vec<Grant>>;
    /// Revoke the grant `id` as `by` (a console session's subject, or
    /// `cli`), and record it.
    fn revoke(&self, id: String, by: String) -> StoreFuture<crate::grants::Revoked>;
}

enum Job {
    Row(Box<AuditRow>, oneshot::Sender<Result<(), String>>),
    /// A row written ahead: answered with its id once durable.
    Begin(Box<AuditRow>, oneshot::Sender<Result<i64, String>>),
    /// The outcome of a row written ahead: answered once committed, in a
    /// transaction of outcomes alone that does not sync.
    Complete(i64, Box<AuditRow>, oneshot::Sender<Result<(), String>>),
    /// Answered with the outcome of the transaction it shares.
    Check(oneshot::Sender<Result<(), String>>),
    Nonce(String, oneshot::Sender<Result<bool, String>>),
    Grant(Box<Grant>, oneshot::Sender<Result<(), String>>),
    Granted {
        caller: Option<String>,
        tool: String,
        reply: oneshot::Sender<Result<Option<Grant>, String>>,
    },
    Reserve(Box<Hold>, oneshot::Sender<Result<Held, String>>),
    Settle {
        keys: Vec<SpendKey>,
        held: f64,
        cost: f64,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

/// What a finished job hands back.
enum Done {
    Nothing,
    Fresh(bool),
    Found(Option<Grant>),
    Held(Held),
    Row(i64),
}

/// The audit store's writer.
pub struct AuditStore {
    jobs: mpsc::Sender<Job>,
    arguments: bool,
    path: PathBuf,
}

fn stopped() -> StoreError {
    StoreError::Other("the audit writer stopped".to_owned())
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn now_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Open (creating or migrating if needed) the database at `path` for
/// writing.
pub(crate) fn open_for_writing(path: &Path) -> Result<Connection, StoreError> {
    let mut conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
        context: format!("cannot open the audit store {}", path.display()),
        source,
    })?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .and_then(|_| conn.pragma_update(None, "synchronous", "FULL"))
        .and_then(|_| conn.busy_timeout(Duration::from_secs(5)))
        .and_then(|_| conn.execute_batch(SCHEMA))
        .and_then(|_| migrate(&mut conn))
        .map_err(|source| StoreError::Sqlite {
            context: format!("the audit store {}", path.display()),
            source,
        })?;
    Ok(conn)
}

impl AuditStore {
    /// Open the store at `path` and start its writer thread.
    pub fn open(path: &Path, arguments: bool) -> Result<Self, StoreError> {
        let conn = open_for_writing(path)?;
        let (jobs, rx) = mpsc::channel(4096);
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || write_loop(conn, rx))
            .map_err(|e| StoreError::Other(format!("cannot start the audit writer: {e}")))?;
        Ok(Self {
            jobs,
            arguments,
            path: path.to_owned(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AuditStore {
    /// Hand a job to the writer and wait for its answer. The job is queued
    /// now, not when the future is first polled, so the writer takes jobs
    /// in the order they were asked for: a row written ahead before its
    /// call is forwarded, a call's outcome before its answer leaves.
    fn ask<T: Send + 'static>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Job,
    ) -> StoreFuture<T> {
        let (tx, rx) = oneshot::channel();
        let queue_full = match self.jobs.try_send(job(tx)) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(job)) => Some((self.jobs.clone(), job)),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Box::pin(async { Err(stopped()) });
            }
        };
        Box::pin(async move {
            if let Some((jobs, job)) = queue_full {
                jobs.send(job).await.map_err(|_| stopped())?;
            }
            rx.await.map_err(|_| stopped())?.map_err(StoreError::Other)
        })
    }
}

impl AuditSink for AuditStore {
    fn write(&self, row: AuditRow) -> StoreFuture<()> {
        self.ask(|tx| Job::Row(Box::new(row), tx))
    }

    fn begin(&self, row: AuditRow) -> StoreFuture<i64> {
        self.ask(|tx| Job::Begin(Box::new(row), tx))
    }

    fn complete(&self, id: i64, row: AuditRow) -> StoreFuture<()> {
        self.ask(|tx| Job::Complete(id, Box::new(row), tx))
    }

    fn grant(&self, grant: Grant) -> StoreFuture<()> {
        self.ask(|tx| Job::Grant(Box::new(grant), tx))
    }

    fn granted(&self, caller: Option<String>, tool: String) -> StoreFuture<Option<Grant>> {
        self.ask(|reply| Job::Granted {
            caller,
            tool,
            reply,
        })
    }

    fn keeps_arguments(&self) -> bool {
        self.arguments
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn check(&self) -> StoreFuture<()> {
        self.ask(Job::Check)
    }

    fn nonces(self: std::sync::Arc<Self>) -> crate::confirm::SharedNonces {
        self
    }

    fn ledger(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn Ledger> {
        self
    }

    fn rows(&self, filter: Filter) -> StoreFuture<Vec<AuditRow>> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || query(&path, &filter))
                .await
                .map_err(|e| StoreError::Other(format!("reading the audit store: {e}")))?
        })
    }

    fn grants(&self, all: bool) -> StoreFuture<Vec<Grant>> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || crate::grants::list(&path, all))
                .await
                .map_err(|e| StoreError::Other(format!("reading the audit store: {e}")))?
        })
    }

    fn revoke(&self, id: String, by: String) -> StoreFuture<crate::grants::Revoked> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || crate::grants::revoke(&path, &id, &by))
                .await
                .map_err(|e| StoreError::Other(format!("writing the audit store: {e}")))?
        })
    }
}

impl Ledger for AuditStore {
    fn reserve(&self, hold: Hold) -> StoreFuture<Held> {
        self.ask(|tx| Job::Reserve(Box::new(hold), tx))
    }

    fn settle(&self, keys: Vec<SpendKey>, held: f64, cost: f64) -> StoreFuture<()> {
        self.ask(|reply| Job::Settle {
            keys,
            held,
            cost,
            reply,
        })
    }

    fn balances(&self) -> StoreFuture<Vec<Balance>> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || crate::ledger_sqlite::balances(&path))
                .await
                .map_err(|e| StoreError::Other(format!("reading the audit store: {e}")))?
        })
    }
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
fn write_loop(mut conn: Connection, mut rx: mpsc::Receiver<Job>) {
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
        commit(&mut conn, &mut outcomes, &mut syncing, Syncing::Deferred);
        commit(&mut conn, &mut batch, &mut syncing, Syncing::Durable);
    }
}

/// Commit `batch` in one transaction, synced as `wanted`, and answer its
/// jobs.
fn commit(conn: &mut Connection, batch: &mut Vec<Job>, syncing: &mut Syncing, wanted: Syncing) {
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
        Err("audit store: cannot make writes durable (synchronous = FULL)".to_owned())
    } else {
        write_batch(conn, batch, &mut done).map_err(|e| format!("audit store: {e}"))
    };
    if let Err(e) = &written {
        tracing::error!(error = %e, "audit store write failed");
    }
    answer_batch(batch, done, &written);
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
            $r.trace_id
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
                    "INSERT INTO calls (time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, grant_id, cost, result, trace_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
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
                                "UPDATE calls SET upstream = ?2, decision = ?3, rule = ?4, confirmation = ?5, status = ?6, latency_ms = ?7, grant_id = ?8, cost = ?9, result = ?10, trace_id = ?11 WHERE id = ?1",
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
                        r.trace_id
                    ])?;
                }
                Job::Nonce(nonce, _) => {
                    done[i] = Done::Fresh(spend.execute(params![nonce, now])? == 1);
                }
                Job::Grant(grant, _) => crate::grants::insert(&tx, grant)?,
                Job::Reserve(hold, _) => {
                    done[i] = Done::Held(crate::ledger_sqlite::reserve(&tx, hold)?);
                }
                Job::Settle {
                    keys, held, cost, ..
                } => crate::ledger_sqlite::settle(&tx, keys, *held, *cost)?,
                Job::Granted { caller, tool, .. } => {
                    done[i] = Done::Found(crate::grants::find(&tx, caller.as_deref(), tool, now)?);
                }
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

/// Tell each job of `batch` how its transaction ended.
fn answer_batch(batch: &mut Vec<Job>, done: Vec<Done>, written: &Result<(), String>) {
    for (job, done) in batch.drain(..).zip(done) {
        let failed = || written.as_ref().err().cloned();
        match job {
            Job::Row(_, reply)
            | Job::Check(reply)
            | Job::Grant(_, reply)
            | Job::Settle { reply, .. } => {
                let _ = reply.send(failed().map_or(Ok(()), Err));
            }
            Job::Complete(_, _, reply) => {
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

impl NonceStore for AuditStore {
    fn spend(&self, nonce: String) -> SpendFuture {
        let spent = self.ask(|tx| Job::Nonce(nonce, tx));
        Box::pin(async move { Ok(spent.await?) })
    }
}

fn note(notes: &Map<String, Value>, key: &str) -> Option<String> {
    notes.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl AuditRow {
    /// The confirmation with the grant it made or used, as tables show it:
    /// `approved (g-…)`, `granted (g-…)`, a grant alone, or nothing.
    pub fn confirmation_shown(&self) -> String {
        match (&self.confirmation, &self.grant) {
            (Some(c), Some(g)) => format!("{c} ({g})"),
            (Some(c), None) => c.clone(),
            (None, Some(g)) => g.clone(),
            (None, None) => String::new(),
        }
    }
}

/// The row for a call record: the gateway's notes (`upstream`,
/// `decision`, `rule`, `confirmation`, `status`) on top of what the
/// server saw.
pub fn row_of(record: &CallRecord) -> AuditRow {
    let notes = &record.notes;
    AuditRow {
        id: 0,
        time_ms: now_ms(record.started),
        caller: record.caller.clone(),
        upstream: note(notes, "upstream"),
        tool: record.tool.clone(),
        arguments_digest: record.arguments_digest.clone(),
        arguments: record.arguments.as_ref().map(Value::to_string),
        decision: note(notes, "decision"),
        rule: note(notes, "rule"),
        confirmation: note(notes, "confirmation"),
        status: note(notes, "status").unwrap_or_else(|| record.outcome.as_str().to_owned()),
        latency_ms: record.elapsed.as_secs_f64() * 1000.0,
        grant: note(notes, "grant"),
        cost: notes.get("cost").and_then(Value::as_f64),
        result: note(notes, "result"),
        trace_id: note(notes, "trace"),
    }
}

/// At most 64 characters of an upstream's label.
fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

/// What an answer was, without its content (for the `result` column):
/// its blocks by kind and size, and whether it has structured content;
/// for a tool error, the start of what it said, which the model was shown
/// anyway.
pub fn result_summary(result: &toolgate_protocol::types::CallToolResult) -> String {
    use std::fmt::Write as _;
    use toolgate_protocol::types::ContentBlock;
    // Written into one string: this runs for every relayed call.
    let mut out = String::with_capacity(48);
    if result.is_error == Some(true) {
        out.push_str("tool error: ");
    }
    match result.content.len() {
        0 => out.push_str("no content"),
        1 => out.push_str("1 block: "),
        n => {
            let _ = write!(out, "{n} blocks: ");
        }
    }
    for (i, block) in result.content.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = match block {
            ContentBlock::Text(t) => write!(out, "text ({} chars)", t.text.chars().count()),
            ContentBlock::Image(i) => write!(out, "image ({})", short(&i.mime_type)),
            ContentBlock::Audio(a) => write!(out, "audio ({})", short(&a.mime_type)),
            ContentBlock::ResourceLink(_) => write!(out, "resource link"),
            ContentBlock::EmbeddedResource(_) => write!(out, "resource"),
        };
    }
    if result.structured_content.is_some() {
        out.push_str("; structured");
    }
    if result.is_error == Some(true) {
        out.push_str(": ");
        let said = result.content.iter().find_map(|c| c.as_text());
        out.extend(said.unwrap_or_default().chars().take(160));
    }
    out
}

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
    let mut stmt = conn
        .prepare(&format!(
            "SELECT id, time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, {grant}, {cost}, {result}, {trace} FROM calls WHERE id > ?1 AND time_ms >= ?2 AND (?3 IS NULL OR caller = ?3) AND (?4 IS NULL OR decision = ?4) AND id < ?5 ORDER BY id DESC"
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
                })
            },
        )
        .map_err(reading(path))?;
    newest(
        rows.map(|r| r.map_err(reading(path))),
        tool.as_ref(),
        filter.limit,
    )
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
    limit: Option<usize>,
) -> Result<Vec<AuditRow>, E> {
    let mut out = Vec::new();
    for row in rows {
        let row = row?;
        if tool.is_some_and(|p| !p.matches(&row.tool)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_summed_up_without_its_content() {
        use toolgate_protocol::types::{CallToolResult, ContentBlock};
        let mut r = CallToolResult::default();
        assert_eq!(result_summary(&r), "no content");
        r.content = vec![ContentBlock::text("secret order 42")];
        assert_eq!(result_summary(&r), "1 block: text (15 chars)");
        r.structured_content = Some(serde_json::json!({"n": 1}));
        r.content.push(ContentBlock::text("x"));
        assert_eq!(
            result_summary(&r),
            "2 blocks: text (15 chars), text (1 chars); structured"
        );
        r.structured_content = None;
        r.content = vec![ContentBlock::text("no such sku")];
        r.is_error = Some(true);
        assert_eq!(
            result_summary(&r),
            "tool error: 1 block: text (11 chars): no such sku"
        );
    }

    fn row(tool: &str, decision: &str) -> AuditRow {
        AuditRow {
            time_ms: now_ms(SystemTime::now()),
            tool: tool.into(),
            arguments_digest: "d".into(),
            decision: Some(decision.into()),
            status: "ok".into(),
            latency_ms: 1.5,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn rows_written_together_are_all_durable_and_queryable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let store = std::sync::Arc::new(AuditStore::open(&path, false).unwrap());
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..50 {
            let store = store.clone();
            let decision = if i % 2 == 0 { "allow" } else { "confirm" };
            writes.spawn(async move { store.write(row(&format!("a.t{i}"), decision)).await });
        }
        while let Some(done) = writes.join_next().await {
            done.unwrap().unwrap();
        }
        // A second connection (as `toolgate log` opens) sees every row.
        let all = query(&path, &Filter::default()).unwrap();
        assert_eq!(all.len(), 50);
        assert!(all.windows(2).all(|w| w[0].id < w[1].id));
        let confirmed = query(
            &path,
            &Filter {
                decision: Some("confirm".into()),
                tool: Some("a.t1*".into()),
                ..Default::default()
            },
        )
        .unwrap();
        let tools: Vec<&str> = confirmed.iter().map(|r| r.tool.as_str()).collect();
        assert_eq!(tools, ["a.t1", "a.t11", "a.t13", "a.t15", "a.t17", "a.t19"]);
        let last = query(
            &path,
            &Filter {
                limit: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(last.len(), 2);
        assert_eq!(last[1].id, all[49].id);
    }

    #[tokio::test]
    async fn a_nonce_is_spent_once_across_stores_sharing_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let a = AuditStore::open(&path, false).unwrap();
        let b = AuditStore::open(&path, false).unwrap();
        assert!(a.spend("n1".into()).await.unwrap());
        assert!(!b.spend("n1".into()).await.unwrap());
        assert!(!a.spend("n1".into()).await.unwrap());
        assert!(b.spend("n2".into()).await.unwrap());
    }

    #[tokio::test]
    async fn a_store_from_before_grants_is_read_and_then_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            conn.execute_batch("PRAGMA user_version = 1; INSERT INTO calls (time_ms, tool, arguments_digest, status, latency_ms) VALUES (1, 'a.t', 'd', 'ok', 1.0);")
                .unwrap();
        }
        // `toolgate log` reads it as it is.
        let rows = query(&path, &Filter::default()).unwrap();
        assert_eq!((rows.len(), rows[0].grant.clone()), (1, None));
        assert!(crate::grants::list(&path, true).unwrap().is_empty());
        // The gateway brings it up to date, keeping the rows.
        let store = AuditStore::open(&path, false).unwrap();
        let bound = crate::grants::Bound {
            upstream: "a",
            upstream_tool: "t",
            digest: "sha256:00",
        };
        let grant = Grant::new(None, bound, "a.t", "rule 1", Duration::from_secs(60));
        store.grant(grant.clone()).await.unwrap();
        store
            .write(AuditRow {
                grant: Some(grant.id.clone()),
                ..row("a.t", "confirm")
            })
            .await
            .unwrap();
        let rows = query(&path, &Filter::default()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].grant.as_deref(), Some(grant.id.as_str()));
        assert_eq!(
            store.granted(None, "a.t".into()).await.unwrap(),
            Some(grant)
        );
    }

    #[test]
    fn a_file_that_is_not_a_store_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        std::fs::write(&path, b"not sqlite at all, just text").unwrap();
        let e = query(&path, &Filter::default()).unwrap_err();
        assert!(matches!(e, StoreError::Sqlite { .. }), "{e:?}");
        let said = toolgate_protocol::error::with_causes(&e);
        assert!(
            said.contains("x.db") && said.contains("not a toolgate audit store"),
            "{said}"
        );
    }
}
