//! The tasks extension (`io.modelcontextprotocol/tasks`): tool calls that
//! outlive their request.
//!
//! A tool declares whether it runs as a task ([`TaskSupport`]). When a
//! client declared the extension on a call to such a tool, the server
//! answers with a `CreateTaskResult` and the handler keeps running; the
//! client polls `tasks/get` until the task is `completed` (the tool's
//! result, `isError` included), `failed` (a JSON-RPC error) or `cancelled`.
//! A client that did not declare the extension gets the result in the
//! request as usual, or `-32021` from a tool whose support is
//! [`TaskSupport::Required`].
//!
//! Input works as in a request: a handler asks through
//! [`RequestContext::inputs`](crate::RequestContext::inputs) and ends the
//! round with [`Inputs::ask`](crate::Inputs::ask). In a task that parks it
//! as `input_required`, its questions listed in `inputRequests`; once
//! `tasks/update` has answered every one, the handler runs again from the
//! top with all the answers, exactly as on a multi-round retry. A tool
//! marked [`ToolDef::task_started_by_handler`](crate::ToolDef::task_started_by_handler)
//! first gathers input synchronously (multi round-trip) and becomes a task
//! only when it calls [`RequestContext::run_as_task`](crate::RequestContext::run_as_task).
//!
//! Task ids are 192 random bits and bound to the caller's verified subject:
//! another caller is told the task does not exist. State lives in a
//! [`TaskStore`] ([`MemoryTaskStore`] by default), bounded in number
//! ([`ServerConfig::max_tasks`](crate::ServerConfig::max_tasks)) and kept
//! for [`ServerConfig::task_ttl`](crate::ServerConfig::task_ttl).

mod clock;
mod methods;
mod run;
mod store;

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;
use toolgate_protocol::types::{DetailedTask, Task, TaskStatus};

pub(crate) use methods::{cancel, extension_required, get, notification, update};
pub(crate) use run::{Call, Slot, call};
pub use store::{MemoryTaskStore, TaskRecord, TaskStore, TaskStoreError, TaskStoreFuture};

/// Whether a tool runs as a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskSupport {
    /// Every call is answered in its request (the default).
    #[default]
    Never,
    /// A call runs as a task when the client declared the extension, and
    /// in its request otherwise.
    Optional,
    /// A call runs only as a task: a client that did not declare the
    /// extension gets `-32021` naming it, before the handler runs.
    Required,
}

/// A change of a task, for `subscriptions/listen` streams that asked for it.
#[derive(Debug)]
pub(crate) struct TaskEvent {
    pub(crate) owner: Option<String>,
    pub(crate) task: DetailedTask,
}

/// Why no task was created.
#[derive(Debug)]
pub(crate) enum NotCreated {
    /// The server holds as many tasks as it may (overall or for this caller).
    Full(usize),
    /// The store failed (logged).
    Store,
}

/// A task this process runs: how to reach its work.
pub(crate) struct Live {
    pub(crate) owner: Option<String>,
    /// When the task may be discarded.
    pub(crate) expires_at: Option<SystemTime>,
    /// Ends the work (`tasks/cancel`, expiry, shutdown of the task).
    pub(crate) cancel: CancellationToken,
    /// Serializes every read-modify-write of this task's record.
    pub(crate) write: tokio::sync::Mutex<()>,
    /// Answers `tasks/update` accepted and the work has not taken yet.
    pub(crate) inbox: Mutex<Map<String, Value>>,
    /// Signalled when answers arrive.
    pub(crate) wake: Notify,
}

/// The server's tasks: the store, the tasks this process runs, and the
/// change feed.
pub(crate) struct Tasks {
    pub(crate) store: Arc<dyn TaskStore>,
    live: Mutex<LiveSet>,
    pub(crate) events: broadcast::Sender<Arc<TaskEvent>>,
    /// Whether the server offers the extension (a tool supports tasks).
    enabled: AtomicBool,
    pub(crate) ttl: Option<Duration>,
    pub(crate) poll_interval: Duration,
    max_tasks: usize,
    max_per_owner: usize,
}

#[derive(Default)]
struct LiveSet {
    tasks: HashMap<String, Arc<Live>>,
    /// Ids by expiry, soonest first (the TTL is the same for every task).
    expiry: VecDeque<(Instant, String)>,
    per_owner: HashMap<Option<String>, usize>,
}

impl Tasks {
    pub(crate) fn new(store: Arc<dyn TaskStore>, config: &crate::ServerConfig) -> Self {
        Self {
            store,
            live: Mutex::default(),
            events: broadcast::channel(256).0,
            enabled: AtomicBool::new(false),
            ttl: config.task_ttl,
            poll_interval: config.task_poll_interval,
            max_tasks: config.max_tasks,
            max_per_owner: config.max_tasks_per_caller,
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, LiveSet> {
        // Each critical section leaves the set consistent before it can panic.
        self.live.lock()
    }

    /// The task this process runs with this id, if it belongs to `owner`.
    pub(crate) fn live(&self, task_id: &str, owner: Option<&str>) -> Option<Arc<Live>> {
        self.lock()
            .tasks
            .get(task_id)
            .filter(|l| l.owner.as_deref() == owner)
            .cloned()
    }

    /// Create a task for `owner`, durably, in state `working`.
    pub(crate) async fn create(
        &self,
        owner: Option<String>,
    ) -> Result<(Arc<Live>, DetailedTask), NotCreated> {
        self.sweep().await;
        let task_id = format!(
            "task-{}",
            URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>())
        );
        let now = SystemTime::now();
        let live = Arc::new(Live {
            owner: owner.clone(),
            expires_at: self.ttl.map(|ttl| now + ttl),
            cancel: CancellationToken::new(),
            write: tokio::sync::Mutex::new(()),
            inbox: Mutex::default(),
            wake: Notify::new(),
        });
        {
            let mut set = self.lock();
            if set.tasks.len() >= self.max_tasks {
                return Err(NotCreated::Full(self.max_tasks));
            }
            let mine = set.per_owner.get(&owner).copied().unwrap_or(0);
            if mine >= self.max_per_owner {
                return Err(NotCreated::Full(self.max_per_owner));
            }
            set.tasks.insert(task_id.clone(), live.clone());
            *set.per_owner.entry(owner.clone()).or_default() += 1;
            if let Some(ttl) = self.ttl {
                set.expiry
                    .push_back((Instant::now() + ttl, task_id.clone()));
            }
        }
        let stamp = clock::iso8601(now);
        let task = DetailedTask {
            task: Task {
                task_id: task_id.clone(),
                status: TaskStatus::Working,
                status_message: None,
                created_at: stamp.clone(),
                last_updated_at: stamp,
                ttl_ms: self.ttl.map(clock::millis),
                poll_interval_ms: Some(clock::millis(self.poll_interval).max(1)),
            },
            input_requests: None,
            result: None,
            error: None,
        };
        let record = TaskRecord {
            task: task.clone(),
            owner,
            expires_at: live.expires_at,
        };
        if let Err(e) = self.store.create(record).await {
            tracing::error!(error = %e, "task not created");
            self.forget(&task_id);
            return Err(NotCreated::Store);
        }
        Ok((live, task))
    }

    /// Stop tracking a task (its work is told to stop).
    fn forget(&self, task_id: &str) {
        let mut set = self.lock();
        if let Some(live) = set.tasks.remove(task_id) {
            live.cancel.cancel();
            if let Some(n) = set.per_owner.get_mut(&live.owner) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    set.per_owner.remove(&live.owner);
                }
            }
        }
    }

    /// Discard the tasks whose lifetime ended.
    pub(crate) async fn sweep(&self) {
        let now = Instant::now();
        let expired: Vec<String> = {
            let mut set = self.lock();
            let mut out = Vec::new();
            while set.expiry.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, id)) = set.expiry.pop_front() {
                    out.push(id);
                }
            }
            out
        };
        for id in expired {
            self.forget(&id);
            if let Err(e) = self.store.remove(&id).await {
                tracing::warn!(error = %e, "expired task not removed from the store");
            }
        }
    }

    /// Write `task` for `live`'s owner and tell listeners. The caller holds
    /// `live.write`.
    pub(crate) async fn save(&self, live: &Live, mut task: DetailedTask) -> bool {
        task.task.last_updated_at = clock::iso8601(SystemTime::now());
        let record = TaskRecord {
            task: task.clone(),
            owner: live.owner.clone(),
            expires_at: live.expires_at,
        };
        if let Err(e) = self.store.update(record).await {
            tracing::error!(task = %task.task.task_id, error = %e, "task state not saved");
            return false;
        }
        // Nobody listening is fine.
        let _ = self.events.send(Arc::new(TaskEvent {
            owner: live.owner.clone(),
            task,
        }));
        true
    }

    /// The stored record of a task `owner` may see, unexpired.
    pub(crate) async fn find(
        &self,
        task_id: &str,
        owner: Option<&str>,
    ) -> Result<TaskRecord, toolgate_protocol::RpcError> {
        use toolgate_protocol::RpcError;
        let record = self.store.get(task_id).await.map_err(|e| {
            tracing::error!(error = %e, "task store read failed");
            RpcError::internal()
        })?;
        // Another caller's task is reported as missing, not as forbidden:
        // its existence is not theirs to learn.
        let Some(record) = record.filter(|r| r.owner.as_deref() == owner) else {
            return Err(RpcError::invalid_params(format!(
                "Task not found: {}. Task ids come from the CreateTaskResult of a tools/call; a task is kept for its ttlMs",
                toolgate_protocol::quote::quote(task_id)
            )));
        };
        if record.expires_at.is_some_and(|at| at <= SystemTime::now()) {
            self.sweep().await;
            return Err(RpcError::invalid_params(format!(
                "Task has expired: {}",
                toolgate_protocol::quote::quote(task_id)
            )));
        }
        Ok(record)
    }
}
