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

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use toolgate_server::CallRecord;

use toolgate_server::{NonceStore, SpendFuture};

use crate::StoreError;
use crate::audit_writer::{Job, Reply};

pub use crate::audit_query::{Filter, query};
pub(crate) use crate::audit_query::{newest, not_a_store, open_for_reading, reading};
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
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || crate::audit_writer::write_loop(conn, rx, shown))
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

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
