//! The embedded audit store (layer `store`): every decision and call in
//! SQLite, durable before its answer is sent.
//!
//! An embedded SQLite database (WAL, `synchronous = FULL`) written by one
//! thread. Calls finishing together share one transaction, so under load
//! one fsync covers many rows — and each call's answer still waits for the
//! commit that holds its row, so `kill -9` at any moment loses no call
//! whose result a client received. A forwarded call's row is written ahead
//! ([`AuditRows::begin`]), beside the forward, and its outcome completes it
//! ([`AuditRows::complete`]) in a commit that does not sync. The same thread spends the nonces of
//! single-use rounds ([`NonceStore`]), so a replayed round is refused even
//! by another process sharing the file.
//!
//! `toolgate log` reads the database ([`query()`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use toolgate_server::{NonceStore, SpendFuture};

mod accounts;
mod flows;
pub mod grants;
pub mod ledger;
pub mod query;
pub(crate) mod writer;

use crate::store::StoreError;
use crate::store::audit::{AuditRow, AuditRows, AuditSink, GrantStore, StoreFuture};
use writer::{Job, Reply};

use crate::decide::budget::Balance;
use crate::decide::budget::Held;
use crate::decide::budget::Hold;
use crate::decide::budget::SpendKey;
use crate::decide::grants::Grant;
use crate::store::ledger::Ledger;
pub use query::{Filter, query};
pub(crate) use query::{not_a_store, open_for_reading, reading};

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

/// How far the call log (`store::calllog`, in front of this store) is
/// indexed here (schema 8).
pub(crate) const LOG_PROGRESS: &str = "
CREATE TABLE IF NOT EXISTS log_progress (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    segment INTEGER NOT NULL,
    offset INTEGER NOT NULL
);
";

/// The ids reserved for calls a call log has given or may give (schema
/// 10): a writer of committed rows takes ids above them, so a call log
/// and committed writers share a store without taking each other's ids.
pub(crate) const CALL_IDS: &str = "
CREATE TABLE IF NOT EXISTS call_ids (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    upto INTEGER NOT NULL
);
";

/// The id a writer of committed rows gives the row it inserts: after every
/// row in the store and every id a call log has reserved (evaluated inside
/// the inserting transaction, which holds the write lock).
pub(crate) const NEXT_ID: &str = "(SELECT MAX(COALESCE((SELECT MAX(id) FROM calls), 0), COALESCE((SELECT upto FROM call_ids WHERE one = 1), 0)) + 1)";

/// Reserve `n` ids for a call log, above every row in the store, every id
/// reserved before and `floor` (asked once the store's write lock is held,
/// so it counts ids given while waiting for it): the ids `first..first + n`.
pub(crate) fn reserve_ids(
    conn: &mut Connection,
    n: i64,
    floor: impl FnOnce() -> i64,
) -> rusqlite::Result<i64> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let floor = floor();
    let upto: i64 = tx.query_row(
        "INSERT INTO call_ids (one, upto) VALUES (1, MAX((SELECT COALESCE(MAX(id), 0) FROM calls), ?2) + ?1)
         ON CONFLICT (one) DO UPDATE SET upto = MAX(upto, (SELECT COALESCE(MAX(id), 0) FROM calls), ?2) + ?1
         RETURNING upto",
        rusqlite::params![n, floor],
        |r| r.get(0),
    )?;
    tx.commit()?;
    Ok(upto - n + 1)
}

/// The schema version this toolgate writes: 2 added grants, 3 budgets,
/// 4 each call's result summary and trace id, 5 budget reservations and
/// grants bound to a definition, 6 each call's endpoint and the name it
/// was called by, 7 flow labels and each call's flow, 8 the identity a
/// call carried upstream and people's linked accounts, 9 how a call
/// reached its tool (`via`).
const VERSION: i32 = 9;

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
        tx.execute_batch(crate::store::sqlite::grants::TABLE)?;
    }
    if version < 3 {
        let has_cost_column = tx
            .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = 'cost'")?
            .exists([])?;
        if !has_cost_column {
            tx.execute_batch("ALTER TABLE calls ADD COLUMN cost REAL;")?;
        }
        tx.execute_batch(crate::store::sqlite::ledger::TABLE)?;
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
        for column in crate::store::sqlite::grants::BOUND_COLUMNS {
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
    if version < 6 {
        for column in ["endpoint", "shown"] {
            let has = tx
                .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = ?1")?
                .exists([column])?;
            if !has {
                tx.execute_batch(&format!("ALTER TABLE calls ADD COLUMN {column} TEXT;"))?;
            }
        }
    }
    if version < 7 {
        for column in ["flow", "flow_labels"] {
            let has = tx
                .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = ?1")?
                .exists([column])?;
            if !has {
                tx.execute_batch(&format!("ALTER TABLE calls ADD COLUMN {column} TEXT;"))?;
            }
        }
        tx.execute_batch(flows::TABLE)?;
    }
    if version < 8 {
        let has = tx
            .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = 'identity'")?
            .exists([])?;
        if !has {
            tx.execute_batch("ALTER TABLE calls ADD COLUMN identity TEXT;")?;
        }
        tx.execute_batch(accounts::TABLE)?;
        tx.execute_batch(LOG_PROGRESS)?;
    }
    if version < 9 {
        let has = tx
            .prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = 'via'")?
            .exists([])?;
        if !has {
            tx.execute_batch("ALTER TABLE calls ADD COLUMN via TEXT;")?;
        }
    }
    if version < 10 {
        tx.execute_batch(CALL_IDS)?;
    }
    if version < VERSION {
        tx.execute_batch(&format!("PRAGMA user_version = {VERSION};"))?;
    }
    tx.commit()
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
    /// Open the store at `path` and start its writer thread. It writes
    /// beside other such stores and beside a gateway's call log, taking
    /// ids above those the log has reserved.
    pub fn open(path: &Path, arguments: bool) -> Result<Self, StoreError> {
        let conn = open_for_writing(path)?;
        let (jobs, rx) = mpsc::channel(4096);
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || crate::store::sqlite::writer::write_loop(conn, rx, shown))
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
    fn ask<T: Send + 'static>(&self, job: impl FnOnce(Reply<T>) -> Job) -> StoreFuture<T> {
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
            rx.await.map_err(|_| stopped())?
        })
    }
}

impl AuditRows for AuditStore {
    fn write(&self, row: AuditRow) -> StoreFuture<()> {
        self.ask(|tx| Job::Row(Box::new(row), tx))
    }

    fn begin(&self, row: AuditRow) -> StoreFuture<i64> {
        self.ask(|tx| Job::Begin(Box::new(row), tx))
    }

    fn complete(&self, id: i64, row: AuditRow) -> StoreFuture<()> {
        self.ask(|tx| Job::Complete(id, Box::new(row), tx))
    }

    fn keeps_arguments(&self) -> bool {
        self.arguments
    }

    fn rows(&self, filter: Filter) -> StoreFuture<Vec<AuditRow>> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || query(&path, &filter))
                .await
                .map_err(|e| StoreError::Other(format!("reading the audit store: {e}")))?
        })
    }
}

impl crate::store::flows::FlowStore for AuditStore {
    fn labels(
        self: Arc<Self>,
        key: String,
        now_ms: i64,
    ) -> StoreFuture<Vec<crate::decide::flows::Label>> {
        self.ask(|reply| Job::FlowLabels { key, now_ms, reply })
    }

    fn add(
        self: Arc<Self>,
        key: String,
        label: crate::decide::flows::Label,
        expires_ms: i64,
    ) -> StoreFuture<()> {
        self.ask(|reply| Job::FlowAdd {
            key,
            label: Box::new(label),
            expires_ms,
            reply,
        })
    }
}

impl GrantStore for AuditStore {
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

    fn grants(&self, all: bool) -> StoreFuture<Vec<Grant>> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || crate::store::sqlite::grants::list(&path, all))
                .await
                .map_err(|e| StoreError::Other(format!("reading the audit store: {e}")))?
        })
    }

    fn revoke(&self, id: String, by: String) -> StoreFuture<crate::decide::grants::Revoked> {
        let path = self.path.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                crate::store::sqlite::grants::revoke(&path, &id, &by)
            })
            .await
            .map_err(|e| StoreError::Other(format!("writing the audit store: {e}")))?
        })
    }
}

impl AuditSink for AuditStore {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn check(&self) -> StoreFuture<()> {
        self.ask(Job::Check)
    }

    fn nonces(self: std::sync::Arc<Self>) -> crate::store::SharedNonces {
        self
    }

    fn ledger(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn Ledger> {
        self
    }

    fn accounts(
        self: std::sync::Arc<Self>,
    ) -> std::sync::Arc<dyn crate::store::accounts::AccountStore> {
        self
    }

    /// Nothing to let go of: a writer of committed rows holds no lock (its
    /// thread ends when the store is dropped).
    fn close(&self) {}
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
            tokio::task::spawn_blocking(move || crate::store::sqlite::ledger::balances(&path))
                .await
                .map_err(|e| StoreError::Other(format!("reading the audit store: {e}")))?
        })
    }
}

impl NonceStore for AuditStore {
    fn spend(&self, nonce: String) -> SpendFuture {
        let spent = self.ask(|tx| Job::Nonce(nonce, tx));
        Box::pin(async move { Ok(spent.await?) })
    }
}

#[cfg(test)]
mod tests;
