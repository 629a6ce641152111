//! The SQLite audit store with the call log in front of it
//! (`[audit] durability`): calls' rows go to the log, and reach the store
//! through the indexer; everything decided across calls — nonces, grants,
//! budgets, flow labels, linked accounts — stays in the store, synchronous.
//!
//! A call's id is given here, when its first record is appended (from a
//! block reserved in the store, [`super::ids`]), so a row written ahead
//! and its outcome name the same call in the log and in the store. Readers
//! see the store plus the log's unindexed tail: a reader after an answer
//! sees that call, indexed or not.
//!
//! Layer: `store`.

use std::path::Path;
use std::sync::Arc;

use toolgate_server::{NonceStore, SpendFuture};

use super::indexer;
use super::record::{Kind, Record};
use super::segment::{Appender, Opened};
use super::writer::{Durability, LogError, LogWriter, Written};
use crate::store::StoreError;
use crate::store::audit::{AuditRow, AuditRows, AuditSink, GrantStore, StoreFuture};
use crate::store::ledger::Ledger;
use crate::store::sqlite::{AuditStore, Filter};

pub use crate::store::writers::log_dir;

/// The most bytes of records that may wait to be indexed, unless
/// `[audit] backlog` says otherwise.
pub const BACKLOG: u64 = 64 * 1024 * 1024;

/// The store behind its call log.
pub struct LoggedStore {
    /// Declared first: dropped (its last writes synced, the indexer told to
    /// stop) before the store beneath.
    log: LogWriter,
    inner: Arc<AuditStore>,
    ids: super::ids::Ids,
    /// How far the indexer has brought the store.
    indexed: Arc<Written>,
    indexer: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The store's call log lock, held while this appends.
    held: parking_lot::Mutex<Option<crate::store::writers::Held>>,
}

impl LoggedStore {
    /// Open the store at `path` and its log, replaying what the log holds
    /// that the store does not, and start the writer and the indexer.
    pub fn open(
        path: &Path,
        arguments: bool,
        durability: Durability,
        backlog: u64,
    ) -> Result<Self, StoreError> {
        Self::open_unless_held(path, arguments, durability, backlog)?
            .ok_or_else(|| crate::store::writers::held_by_another(path))
    }

    /// [`LoggedStore::open`], or `None` while another gateway's log writes
    /// the store (a store keeps one).
    pub fn open_unless_held(
        path: &Path,
        arguments: bool,
        durability: Durability,
        backlog: u64,
    ) -> Result<Option<Self>, StoreError> {
        let Some(held) = crate::store::writers::hold(path)? else {
            return Ok(None);
        };
        let inner = Arc::new(AuditStore::open(path, arguments)?);
        let io = |what: &str, e: std::io::Error| {
            StoreError::Other(format!(
                "the call log {}: {what}: {e}",
                log_dir(path).display()
            ))
        };
        let dir = log_dir(path);
        let (appender, opened) = Appender::open(&dir).map_err(|e| io("cannot open", e))?;
        let Opened {
            torn_bytes,
            set_aside,
        } = opened;
        if torn_bytes > 0 {
            tracing::warn!(
                bytes = torn_bytes,
                "the call log ended in a record cut short (the process or the machine stopped mid-write); it was dropped, never applied"
            );
        }
        if let Some(aside) = set_aside {
            tracing::error!(file = %aside.display(), "a call log segment holds a record that does not check out (altered?); it was set aside, not applied: `toolgate log --verify` reports it");
        }
        let conn = crate::store::sqlite::open_for_writing(path)?;
        let indexed_at = indexer::progress(&conn).map_err(|source| StoreError::Sqlite {
            context: "the call log's progress".into(),
            source,
        })?;
        // What the log holds beyond the store: readers see it now, the
        // indexer applies it.
        let mut recovered = Vec::new();
        let mut follower = indexer::Follower::new(&dir, indexed_at);
        loop {
            let records = follower.next(4096).map_err(|e| io("cannot read", e))?;
            if records.is_empty() {
                break;
            }
            recovered.extend(records);
        }
        let stored: i64 = conn
            .query_row("SELECT COALESCE(MAX(id), 0) FROM calls", [], |r| r.get(0))
            .map_err(|source| StoreError::Sqlite {
                context: "the audit store's last call".into(),
                source,
            })?;
        let log = LogWriter::start(appender, (indexed_at, recovered), durability, backlog)
            .map_err(|e| io("cannot start its syncer", e))?;
        // Ids above what the store and the log hold (a log written before
        // ids were reserved gave the next after the store's last).
        let floor = stored.max(log.max_unindexed_id().unwrap_or(0));
        let ids = super::ids::Ids::start(path, floor)?;
        let feed = log.feed();
        let indexed = Arc::new(Written::default());
        indexed.advance(indexed_at);
        let progress = indexed.clone();
        let indexer = std::thread::Builder::new()
            .name("toolgate-call-indexer".into())
            .spawn(move || indexer::run(conn, &dir, &feed, &progress))
            .map_err(|e| io("cannot start its indexer", e))?;
        Ok(Some(Self {
            log,
            inner,
            ids,
            indexed,
            indexer: parking_lot::Mutex::new(Some(indexer)),
            held: parking_lot::Mutex::new(Some(held)),
        }))
    }

    /// Wait (at most `up_to`) until everything appended so far is in the
    /// indexed store: whether it is.
    pub async fn indexed(&self, up_to: std::time::Duration) -> bool {
        let target = self.log.position();
        let indexed = self.indexed.clone();
        tokio::task::spawn_blocking(move || indexed.wait_for(target, up_to))
            .await
            .unwrap_or(false)
    }

    /// The indexed store beneath.
    pub fn store(&self) -> &Arc<AuditStore> {
        &self.inner
    }

    /// Append `row` as a record of `kind` now; the future says once it is
    /// as durable as the setting promises (readers see it at once).
    fn append(&self, kind: Kind, row: AuditRow) -> StoreFuture<()> {
        let appended = self.log.append(Record { kind, row });
        Box::pin(async move { appended.await.map(|_| ()).map_err(|e| unrecorded(&e)) })
    }
}

impl LoggedStore {
    /// Stop appending (later rows are refused), sync the log, let the
    /// indexer finish what waits, and let go of the store's lock.
    pub fn close(&self) {
        // The indexer ends once the writer stops; wait for it, so the
        // store and its log are let go of when this returns.
        self.log.stop();
        self.ids.stop();
        let indexer = self.indexer.lock().take();
        if let Some(indexer) = indexer {
            let _ = indexer.join();
        }
        self.held.lock().take();
    }
}

impl Drop for LoggedStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// A call the log could not record: the call is refused (fail closed).
fn unrecorded(e: &LogError) -> StoreError {
    StoreError::Other(format!("the audit store cannot record calls now ({e})"))
}

impl AuditRows for LoggedStore {
    fn write(&self, mut row: AuditRow) -> StoreFuture<()> {
        row.id = self.ids.next();
        self.append(Kind::Row, row)
    }

    fn begin(&self, mut row: AuditRow) -> StoreFuture<i64> {
        let id = self.ids.next();
        row.id = id;
        let appended = self.append(Kind::Begin, row);
        Box::pin(async move { appended.await.map(|()| id) })
    }

    fn complete(&self, id: i64, mut row: AuditRow) -> StoreFuture<()> {
        row.id = id;
        self.append(Kind::Outcome, row)
    }

    fn keeps_arguments(&self) -> bool {
        self.inner.keeps_arguments()
    }

    fn rows(&self, filter: Filter) -> StoreFuture<Vec<AuditRow>> {
        // The log first: a row that leaves it is in the store by then.
        let tail = self.log.unindexed();
        let stored = self.inner.rows(filter.clone());
        Box::pin(async move {
            let stored = stored.await?;
            Ok(merged(tail, stored, &filter))
        })
    }
}

/// Bring what the call log of the store at `db` holds beyond the store
/// into it, when no gateway's log is live there: a gateway with a log
/// stopped before indexing everything it wrote, and a writer of committed
/// rows opening the store (whose own readers read the store alone) brings
/// those calls in first. Applying a record twice applies it once; nothing
/// is deleted (the next gateway with a log does that).
pub fn drain(db: &Path) -> Result<(), StoreError> {
    let dir = log_dir(db);
    if !dir.is_dir() || !db.exists() {
        return Ok(());
    }
    // A live gateway's log is its indexer's to bring in (it removes the
    // segments this would read).
    let Some(_held) = crate::store::writers::hold(db)? else {
        return Ok(());
    };
    let sql = |context: &str| {
        let context = format!("{context} ({})", db.display());
        move |source| StoreError::Sqlite { context, source }
    };
    let mut conn = crate::store::sqlite::open_for_writing(db)?;
    let from = indexer::progress(&conn).map_err(sql("the call log's progress"))?;
    let mut follower = indexer::Follower::new(&dir, from);
    loop {
        let records = follower.next(4096).map_err(|e| {
            StoreError::Other(format!("reading the call log {}: {e}", dir.display()))
        })?;
        let Some(to) = records.last().map(|(_, at)| *at) else {
            return Ok(());
        };
        let entries: Vec<_> = records
            .into_iter()
            .map(|(record, at)| super::writer::Entry::read_back(record, at))
            .collect();
        indexer::apply(&mut conn, &entries, to).map_err(sql("indexing the call log"))?;
    }
}

/// Rows of the SQLite store at `path` as [`crate::store::sqlite::query()`]
/// reads them, plus the calls of its call log not indexed yet (what
/// `toolgate log` reads: a reader after an answer sees that call, even
/// while the gateway's indexer is behind or stopped).
pub fn query(path: &Path, filter: &Filter) -> Result<Vec<AuditRow>, StoreError> {
    // The log first: a record that leaves it is in the store by then.
    let tail = unindexed(path)?;
    let stored = crate::store::sqlite::query(path, filter)?;
    Ok(match tail {
        Some(tail) => merged(tail, stored, filter),
        None => stored,
    })
}

/// The calls of the store's call log beyond what is indexed, each as its
/// last record says (`None` without a log).
fn unindexed(path: &Path) -> Result<Option<Vec<AuditRow>>, StoreError> {
    let dir = log_dir(path);
    if !dir.is_dir() {
        return Ok(None);
    }
    let conn = crate::store::sqlite::open_for_reading(path)?;
    let from = indexer::progress(&conn).unwrap_or_default();
    let mut follower = indexer::Follower::new(&dir, from);
    let mut rows = std::collections::BTreeMap::new();
    loop {
        let records = follower.next(4096).map_err(|e| {
            StoreError::Other(format!("reading the call log {}: {e}", dir.display()))
        })?;
        if records.is_empty() {
            break;
        }
        for (record, _) in records {
            rows.insert(record.row.id, record.row);
        }
    }
    Ok(Some(rows.into_values().rev().collect()))
}

/// The rows of `stored` and of `tail` that `filter` selects, each once,
/// oldest first, at most its limit (the newest).
pub(crate) fn merged(tail: Vec<AuditRow>, stored: Vec<AuditRow>, filter: &Filter) -> Vec<AuditRow> {
    let tool = filter
        .tool
        .as_deref()
        .and_then(|g| glob::Pattern::new(g).ok());
    let mut by_id: std::collections::BTreeMap<i64, AuditRow> =
        stored.into_iter().map(|r| (r.id, r)).collect();
    for row in tail {
        let selected = filter.after_id.is_none_or(|a| row.id > a)
            && filter.before_id.is_none_or(|b| row.id < b)
            && filter.since_ms.is_none_or(|s| row.time_ms >= s)
            && filter
                .caller
                .as_ref()
                .is_none_or(|c| row.caller.as_ref() == Some(c))
            && filter
                .decision
                .as_ref()
                .is_none_or(|d| row.decision.as_ref() == Some(d))
            && filter
                .endpoint
                .as_deref()
                .is_none_or(|e| row.endpoint.as_deref().unwrap_or("-") == e)
            && tool.as_ref().is_none_or(|p| p.matches(&row.tool));
        if selected {
            by_id.insert(row.id, row);
        }
    }
    let mut out: Vec<AuditRow> = by_id.into_values().collect();
    if let Some(n) = filter.limit
        && out.len() > n
    {
        out.drain(..out.len() - n);
    }
    out
}

impl GrantStore for LoggedStore {
    fn grant(&self, grant: crate::decide::grants::Grant) -> StoreFuture<()> {
        self.inner.grant(grant)
    }

    fn granted(
        &self,
        caller: Option<String>,
        tool: String,
    ) -> StoreFuture<Option<crate::decide::grants::Grant>> {
        self.inner.granted(caller, tool)
    }

    fn grants(&self, all: bool) -> StoreFuture<Vec<crate::decide::grants::Grant>> {
        self.inner.grants(all)
    }

    /// The grant is revoked in the store; the revocation's row goes
    /// through the log, which gives rows their ids (a row inserted into
    /// the store directly could take an id the log has given already).
    fn revoke(&self, id: String, by: String) -> StoreFuture<crate::decide::grants::Revoked> {
        use crate::decide::grants::Revoked;
        let path = self.inner.location();
        let next = self.ids.next();
        let log = self.log.handle();
        let revoked = {
            let by = by.clone();
            tokio::task::spawn_blocking(move || {
                crate::store::sqlite::grants::revoke_recording(Path::new(&path), &id, &by, false)
            })
        };
        let append = move |g: &crate::decide::grants::Grant| {
            log.append(Record {
                kind: Kind::Row,
                row: AuditRow {
                    id: next,
                    time_ms: g.revoked_ms.unwrap_or_default(),
                    caller: Some(by.clone()),
                    upstream: g.upstream.clone(),
                    tool: "toolgate.grant".into(),
                    arguments_digest: String::new(),
                    rule: Some(crate::decide::grants::revoked_rule(g)),
                    status: "revoked".into(),
                    grant: Some(g.id.clone()),
                    ..AuditRow::default()
                },
            })
        };
        Box::pin(async move {
            let revoked = revoked
                .await
                .map_err(|e| StoreError::Other(format!("writing the audit store: {e}")))??;
            if let Revoked::Now(g) = &revoked {
                append(g).await.map_err(|e| unrecorded(&e))?;
            }
            Ok(revoked)
        })
    }
}

impl NonceStore for LoggedStore {
    fn spend(&self, nonce: String) -> SpendFuture {
        self.inner.spend(nonce)
    }
}

impl AuditSink for LoggedStore {
    fn location(&self) -> String {
        self.inner.location()
    }

    fn check(&self) -> StoreFuture<()> {
        self.inner.check()
    }

    fn nonces(self: Arc<Self>) -> crate::store::SharedNonces {
        self.inner.clone().nonces()
    }

    fn ledger(self: Arc<Self>) -> Arc<dyn Ledger> {
        self.inner.clone().ledger()
    }

    fn accounts(self: Arc<Self>) -> Arc<dyn crate::store::accounts::AccountStore> {
        self.inner.clone().accounts()
    }

    fn close(&self) {
        LoggedStore::close(self);
    }
}
