//! The call log's one writer: a thread that appends whatever is waiting
//! with one write, and answers each appender once its bytes are in the
//! file (`durability = "process"`: a SIGKILL loses nothing answered) or
//! synced to the disk (`"sync"`: a power loss neither). In `"process"`
//! mode what was written is synced at most [`SYNC_EVERY`] later, so a power
//! loss or a kernel crash loses at most that window.
//!
//! A write that fails (the disk is full) is undone — the file is cut back
//! to where it ended, so no torn record stays in it — and every appender of
//! that batch is told; the next batch tries again, so the log recovers when
//! space returns.
//!
//! Layer: `store`.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::segment::{Appender, Position};

/// How long written bytes may wait for a sync in `"process"` mode.
pub const SYNC_EVERY: Duration = Duration::from_millis(10);

/// The most bytes one batch gathers before it is written.
const BATCH_BYTES: usize = 1024 * 1024;

/// When an appender is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Once its bytes are written (`write(2)` done).
    #[default]
    Process,
    /// Once they are synced (`fdatasync`), with the others of its batch.
    Sync,
}

/// Why an append failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The file could not be written (the disk is full, say).
    #[error("the call log cannot be written: {0}")]
    Write(String),
    /// The writer is gone (the gateway is stopping).
    #[error("the call log's writer stopped")]
    Stopped,
}

type Reply = tokio::sync::oneshot::Sender<Result<Position, LogError>>;

struct Job {
    bytes: Vec<u8>,
    /// Whether, in `"sync"` mode, its answer waits for the sync (a call's
    /// first record does; its outcome, like the store's, need not: the
    /// call's row is durable already, and the next sync covers it).
    sync: bool,
    reply: Reply,
}

/// Where the log has been written to, for the indexer to follow.
#[derive(Default)]
pub struct Written {
    at: Mutex<Position>,
    moved: Condvar,
}

impl Written {
    /// Where the log ends now.
    pub fn now(&self) -> Position {
        *self.at.lock()
    }

    /// Wait (at most `up_to`) until the log ends past `seen`.
    pub fn wait_past(&self, seen: Position, up_to: Duration) -> Position {
        let mut at = self.at.lock();
        if *at == seen {
            let _ = self.moved.wait_for(&mut at, up_to);
        }
        *at
    }

    fn set(&self, to: Position) {
        *self.at.lock() = to;
        self.moved.notify_all();
    }

    /// Move on to `to` (the indexer's progress).
    pub fn advance(&self, to: Position) {
        self.set(to);
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

/// The handle appenders use.
#[derive(Clone)]
pub struct LogWriter {
    jobs: mpsc::SyncSender<Job>,
    written: Arc<Written>,
}

impl LogWriter {
    /// Start the writer thread over `appender`.
    pub fn start(appender: Appender, durability: Durability) -> std::io::Result<Self> {
        let (jobs, rx) = mpsc::sync_channel(4096);
        let written = Arc::new(Written::default());
        written.set(appender.position());
        let shared = written.clone();
        std::thread::Builder::new()
            .name("toolgate-call-log".into())
            .spawn(move || run(appender, &rx, durability, &shared))?;
        Ok(Self { jobs, written })
    }

    /// Append `bytes` (whole records): where the log ends after them, once
    /// they are as durable as the setting promises.
    pub fn append(
        &self,
        bytes: Vec<u8>,
    ) -> impl std::future::Future<Output = Result<Position, LogError>> + Send + 'static {
        self.append_as(bytes, true)
    }

    /// [`LogWriter::append`]; with `sync` false, a `"sync"` writer answers
    /// once the bytes are written (an outcome whose call is durable).
    pub fn append_as(
        &self,
        bytes: Vec<u8>,
        sync: bool,
    ) -> impl std::future::Future<Output = Result<Position, LogError>> + Send + 'static {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let queued = self.jobs.try_send(Job { bytes, sync, reply });
        let jobs = self.jobs.clone();
        async move {
            match queued {
                Ok(()) => {}
                // A full queue: wait for room off the async threads.
                Err(mpsc::TrySendError::Full(job)) => {
                    tokio::task::spawn_blocking(move || jobs.send(job))
                        .await
                        .map_err(|_| LogError::Stopped)?
                        .map_err(|_| LogError::Stopped)?;
                }
                Err(mpsc::TrySendError::Disconnected(_)) => return Err(LogError::Stopped),
            }
            answer.await.map_err(|_| LogError::Stopped)?
        }
    }

    /// Where the log has been written to.
    pub fn written(&self) -> Arc<Written> {
        self.written.clone()
    }
}

fn run(
    mut appender: Appender,
    rx: &mpsc::Receiver<Job>,
    durability: Durability,
    written: &Written,
) {
    // When bytes were first written since the last sync.
    let mut dirty: Option<Instant> = None;
    loop {
        let first = match dirty {
            Some(since) => match rx.recv_timeout(SYNC_EVERY.saturating_sub(since.elapsed())) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    sync(&mut appender, &mut dirty);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
        };
        let mut batch = vec![first];
        let mut size = batch[0].bytes.len();
        while size < BATCH_BYTES {
            match rx.try_recv() {
                Ok(job) => {
                    size += job.bytes.len();
                    batch.push(job);
                }
                Err(_) => break,
            }
        }
        let mut bytes = Vec::with_capacity(size);
        for job in &batch {
            bytes.extend_from_slice(&job.bytes);
        }
        let mut outcome = appender
            .append(&bytes)
            .map_err(|e| LogError::Write(e.to_string()));
        if outcome.is_ok() {
            dirty.get_or_insert_with(Instant::now);
            let due = dirty.is_some_and(|since| since.elapsed() >= SYNC_EVERY);
            let wanted = durability == Durability::Sync && batch.iter().any(|j| j.sync);
            if wanted || due {
                if let Err(e) = appender.sync() {
                    outcome = Err(LogError::Write(e.to_string()));
                }
                dirty = None;
            }
        }
        if let Ok(at) = &outcome {
            written.set(*at);
        } else if let Err(e) = &outcome {
            tracing::error!(error = %e, "the call log could not be written; calls are refused until it can");
        }
        for job in batch {
            let _ = job.reply.send(outcome.clone());
        }
    }
    sync(&mut appender, &mut dirty);
}

fn sync(appender: &mut Appender, dirty: &mut Option<Instant>) {
    if dirty.take().is_some()
        && let Err(e) = appender.sync()
    {
        tracing::error!(error = %e, "the call log could not be synced");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::calllog::record::records_for_tests;
    use crate::store::calllog::segment::{list, read};

    fn bytes(id: i64) -> Vec<u8> {
        records_for_tests(id..id + 1)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_all_land_whole_and_each_is_answered_after_its_write() {
        for durability in [Durability::Process, Durability::Sync] {
            let dir = tempfile::tempdir().unwrap();
            let (appender, _) = Appender::open(dir.path()).unwrap();
            let log = LogWriter::start(appender, durability).unwrap();
            let mut tasks = tokio::task::JoinSet::new();
            for id in 0..200 {
                let log = log.clone();
                tasks.spawn(async move {
                    let at = log.append(bytes(id)).await.unwrap();
                    // Answered: the log is written past it already (what
                    // the indexer follows).
                    assert!(log.written().now() >= at);
                    at
                });
            }
            let mut last = Position::default();
            while let Some(done) = tasks.join_next().await {
                last = last.max(done.unwrap());
            }
            assert_eq!(log.written().now(), last);
            let segments = list(dir.path()).unwrap();
            let mut ids: Vec<i64> = segments
                .iter()
                .flat_map(|n| read(dir.path(), *n, 0).unwrap().0)
                .map(|(r, _)| r.row.id)
                .collect();
            ids.sort_unstable();
            assert_eq!(ids, (0..200).collect::<Vec<_>>(), "{durability:?}");
        }
    }
}
