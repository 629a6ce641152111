//! Where task state lives: the [`TaskStore`] trait and its in-memory default.
//!
//! A store keeps what clients observe — each task's [`DetailedTask`] and the
//! caller it belongs to — and nothing about the work itself, which runs in
//! the process that created the task. A store shared by several processes
//! (a database) therefore lets any of them answer `tasks/get`, while
//! `tasks/update` and `tasks/cancel` must reach the process running the
//! task; the `Mcp-Name` header carries the task id so a load balancer can
//! route them there.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

use toolgate_protocol::types::DetailedTask;

/// A task as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRecord {
    /// What `tasks/get` returns.
    pub task: DetailedTask,
    /// The verified subject of the caller that created it; only that
    /// caller may see or change it. `None` when the server authenticates
    /// nobody (the unguessable id is then the only key).
    pub owner: Option<String>,
    /// When the task may be discarded (`createdAt + ttlMs`); `None`: never.
    pub expires_at: Option<SystemTime>,
}

/// A store operation that could not be carried out (the text is logged,
/// never sent to clients).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("task store: {0}")]
pub struct TaskStoreError(pub String);

/// The future a [`TaskStore`] operation returns.
pub type TaskStoreFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, TaskStoreError>> + Send + 'a>>;

/// Keeps task state. Implement it to keep tasks in a database; the server
/// uses [`MemoryTaskStore`] unless given another
/// ([`ServerBuilder::task_store`](crate::ServerBuilder::task_store)).
///
/// Every method must be durable when it resolves: the server answers a
/// `tools/call` with its task only after [`TaskStore::create`] resolved,
/// because the client may poll at once.
pub trait TaskStore: Send + Sync + 'static {
    /// Keep a new task.
    fn create(&self, record: TaskRecord) -> TaskStoreFuture<'_, ()>;
    /// The task with this id, if kept.
    fn get<'a>(&'a self, task_id: &'a str) -> TaskStoreFuture<'a, Option<TaskRecord>>;
    /// Replace a kept task's record.
    fn update(&self, record: TaskRecord) -> TaskStoreFuture<'_, ()>;
    /// Forget a task (expired).
    fn remove<'a>(&'a self, task_id: &'a str) -> TaskStoreFuture<'a, ()>;
}

/// Tasks in this process's memory: lost on restart, seen by this process
/// only. How many it holds is bounded by the server
/// ([`ServerConfig::max_tasks`](crate::ServerConfig::max_tasks)).
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    tasks: Mutex<HashMap<String, TaskRecord>>,
}

impl MemoryTaskStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<String, TaskRecord>> {
        // Every critical section is one map operation: a panic cannot leave
        // the map half-changed.
        self.tasks.lock()
    }
}

impl TaskStore for MemoryTaskStore {
    fn create(&self, record: TaskRecord) -> TaskStoreFuture<'_, ()> {
        let id = record.task.task.task_id.clone();
        let fresh = self.lock().insert(id.clone(), record).is_none();
        Box::pin(async move {
            if fresh {
                Ok(())
            } else {
                Err(TaskStoreError(format!("task {id} already exists")))
            }
        })
    }

    fn get<'a>(&'a self, task_id: &'a str) -> TaskStoreFuture<'a, Option<TaskRecord>> {
        let found = self.lock().get(task_id).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn update(&self, record: TaskRecord) -> TaskStoreFuture<'_, ()> {
        let id = record.task.task.task_id.clone();
        let mut tasks = self.lock();
        let known = match tasks.get_mut(&id) {
            Some(slot) => {
                *slot = record;
                true
            }
            None => false,
        };
        drop(tasks);
        Box::pin(async move {
            if known {
                Ok(())
            } else {
                Err(TaskStoreError(format!("task {id} is not kept")))
            }
        })
    }

    fn remove<'a>(&'a self, task_id: &'a str) -> TaskStoreFuture<'a, ()> {
        self.lock().remove(task_id);
        Box::pin(async { Ok(()) })
    }
}
