//! Appending to the call log: each record is written (`write(2)`) by the
//! task that made it, under one lock, before its answer leaves — no hand-off
//! to another thread on the call's path. A syncer thread makes what was
//! written durable (`fdatasync`): in `durability = "process"` at most
//! [`SYNC_EVERY`] after the first unsynced write, so a power loss or a
//! kernel crash loses at most that window; in `"sync"` as soon as someone
//! waits, every write made meanwhile sharing the next sync (group commit).
//!
//! What was written and is not indexed yet stays here, in log order, as
//! parsed rows ([`Entry`], in a queue): the indexer takes its batches from it (it
//! never reads back what was just written), and readers add it to what the
//! store answers, so a reader after an answer sees that call.
//!
//! A write that fails (the disk is full) is undone — the file is cut back
//! to where it ended, so no torn record stays in it — and refused; the next
//! append tries again, so the log recovers when space returns. Past the
//! backlog bound (the store has not been taking records), new calls are
//! refused the same way, outcomes of calls already forwarded still kept.
//!
//! Layer: `store`.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::record::{Kind, Record, encode};
use super::segment::{Appender, Position};

/// How long written bytes may wait for a sync in `"process"` mode.
pub const SYNC_EVERY: Duration = Duration::from_millis(10);

/// When an appender is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Once its bytes are written (`write(2)` done).
    #[default]
    Process,
    /// Once they are synced (`fdatasync`), with the others of its group.
    Sync,
}

/// Why an append failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The file could not be written or synced (the disk is full, say).
    #[error("the call log cannot be written: {0}")]
    Write(String),
    /// More is waiting to be indexed than the bound allows (the indexed
    /// store has not been taking records).
    #[error("the call log holds {0} bytes not yet in the audit store, past its backlog bound")]
    Backlog(u64),
    /// The writer is gone (the gateway is stopping).
    #[error("the call log's writer stopped")]
    Stopped,
}

/// A record written and not yet indexed.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The record, as parsed (shared with readers while it waits).
    pub record: Arc<Record>,
    /// Where the log ends just past it.
    pub at: Position,
    bytes: u32,
}

impl Entry {
    /// A record read back from the log (at start), ending at `at`.
    pub fn read_back(record: Record, at: Position) -> Self {
        Self {
            record: Arc::new(record),
            at,
            bytes: 0,
        }
    }
}

/// A position that moves forward, and waiting for it.
#[derive(Default)]
pub struct Written {
    at: Mutex<Position>,
    moved: Condvar,
}

impl Written {
    /// Where it is now.
    pub fn now(&self) -> Position {
        *self.at.lock()
    }

    /// Move on to `to`.
    pub fn advance(&self, to: Position) {
        *self.at.lock() = to;
        self.moved.notify_all();
    }

    /// Wait (at most `up_to`) until it is at or past `target`: whether it
    /// got there.
    pub fn wait_for(&self, target: Position, up_to: Duration) -> bool {
        let deadline = Instant::now() + up_to;
        let mut at = self.at.lock();
        while *at < target {
            if self.moved.wait_until(&mut at, deadline).timed_out() {
                return *at >= target;
            }
        }
        true
    }
}

/// What the syncer has made durable, for `"sync"` appenders to wait on.
#[derive(Clone, Debug, Default)]
struct Synced {
    at: Position,
    /// The furthest a failed sync covered, and why it failed: bytes before
    /// it are never said to be durable (a failed `fdatasync` may have
    /// dropped them, and a later one succeeding does not bring them back).
    failed: Option<(Position, String)>,
}

struct State {
    appender: Appender,
    pending: VecDeque<Entry>,
    pending_bytes: u64,
    /// How many at the front of `pending` the indexer is applying.
    taken: usize,
    /// When bytes were first written since the last sync.
    dirty: Option<Instant>,
    /// A `"sync"` appender waits for the next sync.
    wanted: bool,
    stopping: bool,
}

struct Shared {
    state: Mutex<State>,
    durability: Durability,
    backlog: u64,
    /// Wakes the syncer.
    to_sync: Condvar,
    /// Wakes the indexer.
    to_index: Condvar,
    synced: tokio::sync::watch::Sender<Synced>,
}

/// The most records the indexer takes at once.
const INDEX_BATCH: usize = 4096;

/// How long the indexer lets records gather before it takes them (unless a
/// whole batch is waiting): fewer, larger transactions. Readers see the
/// records meanwhile.
const INDEX_EVERY: Duration = Duration::from_millis(20);

/// The call log's appending side, and the records it holds for the indexer.
pub struct LogWriter {
    shared: Arc<Shared>,
    syncer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl LogWriter {
    /// Start appending with `appender`; `recovered` are the records the
    /// log holds beyond the indexed store (read at start, from `from`),
    /// and `backlog` the most bytes that may wait to be indexed before new
    /// calls are refused.
    pub fn start(
        appender: Appender,
        (from, recovered): (Position, Vec<(Record, Position)>),
        durability: Durability,
        backlog: u64,
    ) -> std::io::Result<Self> {
        let mut pending = VecDeque::with_capacity(recovered.len());
        let mut before = from;
        let mut pending_bytes = 0;
        for (record, at) in recovered {
            // Each record's size, from where the one before it ended (a
            // record in a later segment starts at its beginning).
            let bytes = if at.segment == before.segment {
                at.offset.saturating_sub(before.offset)
            } else {
                at.offset
            };
            pending_bytes += bytes;
            before = at;
            pending.push_back(Entry {
                record: Arc::new(record),
                at,
                bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
            });
        }
        let at = appender.position();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                appender,
                pending,
                pending_bytes,
                taken: 0,
                dirty: None,
                wanted: false,
                stopping: false,
            }),
            durability,
            backlog,
            to_sync: Condvar::new(),
            to_index: Condvar::new(),
            synced: tokio::sync::watch::Sender::new(Synced { at, failed: None }),
        });
        let syncing = shared.clone();
        let syncer = std::thread::Builder::new()
            .name("toolgate-call-log-sync".into())
            .spawn(move || run_syncer(&syncing))?;
        Ok(Self {
            shared,
            syncer: Mutex::new(Some(syncer)),
        })
    }

    /// Append `record` now (the write is done when this returns): where the
    /// log ends after it, once it is as durable as the setting promises. In
    /// `"sync"` mode an outcome (`Kind::Outcome`) does not wait for the
    /// sync: its call's first record is durable already, and the next sync
    /// covers it.
    pub fn append(
        &self,
        record: Record,
    ) -> impl std::future::Future<Output = Result<Position, LogError>> + Send + use<> {
        self.shared.append(record)
    }

    /// A handle that appends, for a future that outlives the borrow.
    pub fn handle(&self) -> LogHandle {
        LogHandle {
            shared: self.shared.clone(),
        }
    }

    /// Where the log ends now.
    pub fn position(&self) -> Position {
        self.shared.state.lock().appender.position()
    }

    /// The rows written and not yet indexed, newest first.
    pub fn unindexed(&self) -> Vec<crate::store::audit::AuditRow> {
        let state = self.shared.state.lock();
        let mut seen = std::collections::HashSet::new();
        // Newest first: a call's outcome before its begun record.
        state
            .pending
            .iter()
            .rev()
            .filter(|e| seen.insert(e.record.row.id))
            .map(|e| e.record.row.clone())
            .collect()
    }

    /// The highest call id written and not yet indexed.
    pub fn max_unindexed_id(&self) -> Option<i64> {
        let state = self.shared.state.lock();
        state.pending.iter().map(|e| e.record.row.id).max()
    }

    /// The indexer's side of the records waiting.
    pub fn feed(&self) -> Feed {
        Feed {
            shared: self.shared.clone(),
        }
    }
}

impl LogWriter {
    /// Refuse further appends, sync what was written, and let the indexer
    /// end once it has taken what waits.
    pub fn stop(&self) {
        self.shared.state.lock().stopping = true;
        self.shared.to_sync.notify_all();
        self.shared.to_index.notify_all();
        // The syncer makes the last writes durable before it ends.
        let syncer = self.syncer.lock().take();
        if let Some(syncer) = syncer {
            let _ = syncer.join();
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Appends to the call log; cloned freely.
#[derive(Clone)]
pub struct LogHandle {
    shared: Arc<Shared>,
}

impl LogHandle {
    /// [`LogWriter::append`].
    pub fn append(
        &self,
        record: Record,
    ) -> impl std::future::Future<Output = Result<Position, LogError>> + Send + use<> {
        self.shared.append(record)
    }
}

impl Shared {
    fn append(
        &self,
        record: Record,
    ) -> impl std::future::Future<Output = Result<Position, LogError>> + Send + use<> {
        let waits = self.durability == Durability::Sync && record.kind != Kind::Outcome;
        let written = self.write(record, waits);
        let synced = waits.then(|| self.synced.subscribe());
        async move {
            let at = written?;
            if let Some(mut synced) = synced {
                let seen = synced
                    .wait_for(|s| s.at >= at || s.failed.as_ref().is_some_and(|(f, _)| *f >= at))
                    .await
                    .map_err(|_| LogError::Stopped)?;
                if let Some((failed, why)) = &seen.failed
                    && *failed >= at
                {
                    return Err(LogError::Write(why.clone()));
                }
            }
            Ok(at)
        }
    }

    fn write(&self, record: Record, waits: bool) -> Result<Position, LogError> {
        let mut bytes = Vec::with_capacity(512);
        encode(&record, &mut bytes);
        let shared = self;
        let mut state = shared.state.lock();
        if state.stopping {
            return Err(LogError::Stopped);
        }
        if record.kind != Kind::Outcome && state.pending_bytes > shared.backlog {
            return Err(LogError::Backlog(state.pending_bytes));
        }
        let at = state
            .appender
            .append(&bytes)
            .map_err(|e| LogError::Write(e.to_string()))?;
        let waiting = state.pending.len() - state.taken;
        state.pending_bytes += bytes.len() as u64;
        state.pending.push_back(Entry {
            record: Arc::new(record),
            at,
            bytes: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
        });
        let first_dirty = state.dirty.is_none();
        state.dirty.get_or_insert_with(Instant::now);
        state.wanted |= waits;
        let wake_syncer = first_dirty || waits;
        drop(state);
        // Wakes only a thread that waits: nothing to do for the others.
        if wake_syncer {
            shared.to_sync.notify_one();
        }
        if waiting == 0 || waiting + 1 == INDEX_BATCH {
            shared.to_index.notify_one();
        }
        Ok(at)
    }
}

/// What the indexer takes records from.
pub struct Feed {
    shared: Arc<Shared>,
}

impl Feed {
    /// The next records to index, oldest first: waits until some are
    /// written (and, unless a whole batch is waiting, 20 ms for
    /// more to gather). `None` once the writer is gone and nothing waits.
    pub fn take(&self) -> Option<Vec<Entry>> {
        let shared = &*self.shared;
        let mut state = shared.state.lock();
        while state.pending.len() == state.taken {
            if state.stopping {
                return None;
            }
            shared.to_index.wait(&mut state);
        }
        let deadline = Instant::now() + INDEX_EVERY;
        while !state.stopping && state.pending.len() - state.taken < INDEX_BATCH {
            if shared.to_index.wait_until(&mut state, deadline).timed_out() {
                break;
            }
        }
        let from = state.taken;
        let to = state.pending.len().min(from + INDEX_BATCH);
        let batch: Vec<Entry> = state.pending.range(from..to).cloned().collect();
        state.taken = to;
        Some(batch)
    }

    /// The first `n` taken are in the store: readers get them from it now.
    pub fn indexed(&self, n: usize) {
        let mut state = self.shared.state.lock();
        let n = n.min(state.pending.len());
        let freed: u64 = state.pending.drain(..n).map(|e| u64::from(e.bytes)).sum();
        state.pending_bytes = state.pending_bytes.saturating_sub(freed);
        state.taken = state.taken.saturating_sub(n);
    }

    /// What was taken could not be applied: take it again next time.
    pub fn retry(&self) {
        self.shared.state.lock().taken = 0;
    }

    /// Wait (at most `up_to`, less if the writer stops) before trying again.
    pub fn pause(&self, up_to: Duration) {
        let mut state = self.shared.state.lock();
        if !state.stopping {
            let _ = self.shared.to_index.wait_for(&mut state, up_to);
        }
    }

    /// Whether the writer is gone.
    pub fn stopping(&self) -> bool {
        self.shared.state.lock().stopping
    }
}

fn run_syncer(shared: &Shared) {
    loop {
        let mut state = shared.state.lock();
        loop {
            match state.dirty {
                None if state.stopping => return,
                None => shared.to_sync.wait(&mut state),
                Some(since) => {
                    let due = since + SYNC_EVERY;
                    if state.wanted || state.stopping || Instant::now() >= due {
                        break;
                    }
                    let _ = shared.to_sync.wait_until(&mut state, due);
                }
            }
        }
        let at = state.appender.position();
        let file: Arc<File> = state.appender.file();
        state.dirty = None;
        state.wanted = false;
        drop(state);
        // Off the lock: appenders go on writing while this syncs, and the
        // next sync covers them (group commit).
        match file.sync_data() {
            Ok(()) => shared.synced.send_modify(|s| s.at = s.at.max(at)),
            Err(e) => {
                tracing::error!(error = %e, "the call log could not be synced; calls waiting for it are refused");
                shared
                    .synced
                    .send_modify(|s| s.failed = Some((at, e.to_string())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::calllog::record::record_for_tests as record;
    use crate::store::calllog::segment::{list, read};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_all_land_whole_and_in_the_order_the_indexer_takes_them() {
        for durability in [Durability::Process, Durability::Sync] {
            let dir = tempfile::tempdir().unwrap();
            let (appender, _) = Appender::open(dir.path()).unwrap();
            let log = Arc::new(
                LogWriter::start(
                    appender,
                    (Position::default(), Vec::new()),
                    durability,
                    u64::MAX,
                )
                .unwrap(),
            );
            let mut tasks = tokio::task::JoinSet::new();
            for id in 0..200 {
                let log = log.clone();
                tasks.spawn(async move { log.append(record(id)).await.unwrap() });
            }
            let mut last = Position::default();
            while let Some(done) = tasks.join_next().await {
                last = last.max(done.unwrap());
            }
            assert_eq!(log.position(), last);
            let segments = list(dir.path()).unwrap();
            let on_disk: Vec<(i64, Position)> = segments
                .iter()
                .flat_map(|n| {
                    read(dir.path(), *n, 0)
                        .unwrap()
                        .0
                        .into_iter()
                        .map(|(r, offset)| {
                            (
                                r.row.id,
                                Position {
                                    segment: *n,
                                    offset,
                                },
                            )
                        })
                })
                .collect();
            let mut ids: Vec<i64> = on_disk.iter().map(|(id, _)| *id).collect();
            ids.sort_unstable();
            assert_eq!(ids, (0..200).collect::<Vec<_>>(), "{durability:?}");
            // What the indexer is given is what is in the file, in its order.
            let feed = log.feed();
            let taken: Vec<(i64, Position)> = feed
                .take()
                .unwrap()
                .iter()
                .map(|e| (e.record.row.id, e.at))
                .collect();
            assert_eq!(taken, on_disk, "{durability:?}");
            feed.indexed(taken.len());
            assert!(log.unindexed().is_empty());
        }
    }

    #[tokio::test]
    async fn past_the_backlog_bound_new_calls_are_refused_and_outcomes_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (appender, _) = Appender::open(dir.path()).unwrap();
        let log = LogWriter::start(
            appender,
            (Position::default(), Vec::new()),
            Durability::Process,
            150,
        )
        .unwrap();
        log.append(record(1)).await.unwrap();
        log.append(record(2)).await.unwrap();
        let refused = log.append(record(3)).await.unwrap_err();
        assert!(matches!(refused, LogError::Backlog(_)), "{refused}");
        let outcome = Record {
            kind: Kind::Outcome,
            ..record(2)
        };
        log.append(outcome).await.unwrap();
        // Indexed: room again.
        let feed = log.feed();
        let n = feed.take().unwrap().len();
        feed.indexed(n);
        log.append(record(3)).await.unwrap();
    }

    #[tokio::test]
    async fn a_tail_recovered_late_in_a_segment_counts_its_own_bytes_only() {
        let dir = tempfile::tempdir().unwrap();
        let (appender, _) = Appender::open(dir.path()).unwrap();
        let mut one = Vec::new();
        encode(&record(1), &mut one);
        // Indexed up to 1,000 bytes into the segment; one record after it.
        let from = Position {
            segment: 0,
            offset: 1000,
        };
        let at = Position {
            segment: 0,
            offset: 1000 + one.len() as u64,
        };
        let log = LogWriter::start(
            appender,
            (from, vec![(record(1), at)]),
            Durability::Process,
            150,
        )
        .unwrap();
        // The backlog holds that one record's bytes, not the segment's.
        log.append(record(2)).await.unwrap();
    }
}
