//! The tasks extension on the client side: a `tools/call` the server
//! answered with a task is polled to its result, its input requests
//! answered through the input handler ([`ClientBuilder::tasks`]).
//! [`Client::start_tool_call`], [`Client::get_task`],
//! [`Client::update_task`], [`Client::cancel_task`], [`Client::wait_task`]
//! and [`Client::listen_task`] expose the lifecycle to programs that want
//! it: to show a task's id, resume after a restart, follow it by
//! notification, or cancel.

use std::collections::HashSet;

use toolgate_protocol::methods::{
    CallTool, CancelTask, GetTask, Method, SubscriptionsListen, UpdateTask,
};
use toolgate_protocol::types::{DetailedTask, Task, TaskIdParams, TaskStatus, UpdateTaskParams};

use super::*;

/// Called with each task state a waiting call observes.
pub type TaskFn = Arc<dyn Fn(&DetailedTask) + Send + Sync>;

/// How a call to a tool began ([`Client::start_tool_call`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CallStart {
    /// The server answered in the request.
    Complete(Value),
    /// The server runs the call as this task.
    Task(Task),
}

/// Polling never goes faster than this, whatever the server suggests.
const MIN_POLL: Duration = Duration::from_millis(50);
/// Nor slower: a finished task is noticed within this.
const MAX_POLL: Duration = Duration::from_secs(30);
/// Polling used when the server suggests nothing.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Failed polls in a row (a dropped connection, a restarting server)
/// before the wait gives up.
const MAX_POLL_FAILURES: u32 = 8;

/// The polling interval `task` suggests (`pollIntervalMs`), kept between
/// 50 ms and 30 s; `None` when it suggests none.
pub fn suggested_poll(task: &Task) -> Option<Duration> {
    task.poll_interval_ms
        .map(|ms| Duration::from_millis(ms).clamp(MIN_POLL, MAX_POLL))
}

/// What a task that ended amounts to: its result once `completed`, its
/// JSON-RPC error once `failed` ([`ClientError::Protocol`]),
/// [`ClientError::TaskEnded`] once `cancelled`. A task still running is
/// [`ClientError::InvalidResponse`]: ask only about ended ones.
pub fn task_outcome(task: DetailedTask) -> Result<Value, ClientError> {
    let DetailedTask {
        task,
        result,
        error,
        ..
    } = task;
    match task.status {
        TaskStatus::Completed => result.map(Value::Object).ok_or_else(|| {
            ClientError::InvalidResponse(format!(
                "task {} completed but carries no result",
                task.task_id
            ))
        }),
        TaskStatus::Failed => {
            let error = error
                .and_then(|e| serde_json::from_value::<RpcError>(Value::Object(e)).ok())
                .unwrap_or_else(|| {
                    RpcError::new(codes::INTERNAL_ERROR, "the task failed without an error")
                });
            Err(ClientError::Protocol(error))
        }
        TaskStatus::Cancelled => Err(ClientError::TaskEnded {
            task_id: task.task_id,
            status: "cancelled".into(),
            message: task.status_message.unwrap_or_default(),
        }),
        TaskStatus::Working | TaskStatus::InputRequired => Err(ClientError::InvalidResponse(
            format!("task {} has not ended", task.task_id),
        )),
    }
}

impl Client {
    /// Call a tool and return its result, or the task the server runs it
    /// as, without waiting for the task. Input rounds before the task
    /// starts are answered through the input handler.
    pub async fn start_tool_call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        options: &CallOptions,
    ) -> Result<CallStart, ClientError> {
        let known = self.known_tool(name).await?;
        let headers = self.mirrored_headers(&known, &arguments);
        let mut params = Map::new();
        params.insert("name".into(), Value::from(name));
        params.insert("arguments".into(), Value::Object(arguments));
        let result = self
            .rounds_until_result(CallTool::NAME, params, headers, options)
            .await?;
        match task_of(&result)? {
            Some(task) => Ok(CallStart::Task(task)),
            None => Ok(CallStart::Complete(result)),
        }
    }

    /// `tasks/get`: the task as it stands.
    pub async fn get_task(&self, task_id: &str) -> Result<DetailedTask, ClientError> {
        self.get_task_with(task_id, &CallOptions::default()).await
    }

    /// [`Client::get_task`] with per-request options (a gateway's
    /// [`CallOptions::bearer`]: a task is polled as whoever started it).
    pub async fn get_task_with(
        &self,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<DetailedTask, ClientError> {
        self.send::<GetTask>(&task_params(task_id), options).await
    }

    /// `tasks/update`: answers to a task's input requests, by key.
    pub async fn update_task(
        &self,
        task_id: &str,
        input_responses: Map<String, Value>,
    ) -> Result<(), ClientError> {
        self.update_task_with(task_id, input_responses, &CallOptions::default())
            .await
    }

    /// [`Client::update_task`] with per-request options.
    pub async fn update_task_with(
        &self,
        task_id: &str,
        input_responses: Map<String, Value>,
        options: &CallOptions,
    ) -> Result<(), ClientError> {
        let params = UpdateTaskParams {
            task_id: task_id.to_owned(),
            input_responses,
            meta: None,
        };
        self.send::<UpdateTask>(&params, options).await.map(drop)
    }

    /// `tasks/cancel`: ask the server to stop a task. The server only
    /// acknowledges; the task may still finish otherwise.
    pub async fn cancel_task(&self, task_id: &str) -> Result<(), ClientError> {
        self.cancel_task_with(task_id, &CallOptions::default())
            .await
    }

    /// [`Client::cancel_task`] with per-request options.
    pub async fn cancel_task_with(
        &self,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<(), ClientError> {
        self.send::<CancelTask>(&task_params(task_id), options)
            .await
            .map(drop)
    }

    /// Wait for a task to end, answering its input requests through the
    /// input handler: its result once `completed`, the JSON-RPC error once
    /// `failed` ([`ClientError::Protocol`]), [`ClientError::TaskEnded`]
    /// once `cancelled` or gone. Polls at the interval the server suggests
    /// (between 50 ms and 30 s), survives a few failed polls in a row (a
    /// dropped connection), and calls `options.on_task` with each state.
    pub async fn wait_task(
        &self,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<Value, ClientError> {
        self.poll_task(task_id, DEFAULT_POLL, options).await
    }

    /// [`Client::wait_task`], polling at `interval` until the server
    /// suggests one.
    async fn poll_task(
        &self,
        task_id: &str,
        mut interval: Duration,
        options: &CallOptions,
    ) -> Result<Value, ClientError> {
        let mut answered: HashSet<String> = HashSet::new();
        let mut failures = 0;
        let mut last_seen: Option<(TaskStatus, Option<String>)> = None;
        let began = Instant::now();
        loop {
            let task = match self.get_task(task_id).await {
                Ok(task) => {
                    failures = 0;
                    task
                }
                Err(
                    e @ (ClientError::Transport { .. }
                    | ClientError::Unreachable { .. }
                    | ClientError::Timeout(_)),
                ) if failures + 1 < MAX_POLL_FAILURES => {
                    failures += 1;
                    tracing::warn!(task = task_id, error = %e, "task poll failed; retrying");
                    tokio::time::sleep(interval.saturating_mul(failures).min(MAX_POLL)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if let Some(suggested) = suggested_poll(&task.task) {
                interval = suggested;
            }
            // The TTL is a backstop: a task still not finished well after
            // it (counted from when this wait began, so never early) is
            // given up.
            let expired = task.task.ttl_ms.is_some_and(|ttl| {
                began.elapsed() > Duration::from_millis(ttl).saturating_add(MAX_POLL)
            });
            if expired && !task.task.status.is_terminal() {
                return Err(ClientError::TaskEnded {
                    task_id: task_id.to_owned(),
                    status: "expired".into(),
                    message: "the task outlived its ttlMs without finishing".into(),
                });
            }
            let seen = (task.task.status, task.task.status_message.clone());
            if last_seen.as_ref() != Some(&seen) {
                if let Some(callback) = &options.on_task {
                    callback(&task);
                }
                last_seen = Some(seen);
            }
            match task.task.status {
                TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled => {
                    return task_outcome(task);
                }
                TaskStatus::InputRequired => {
                    let requests = task.input_requests.unwrap_or_default();
                    let mut responses = Map::new();
                    // A key is answered once, however often it is listed.
                    for (key, request) in requests {
                        if answered.contains(&key) {
                            continue;
                        }
                        responses.insert(key.clone(), self.answer_input(&request).await?);
                        answered.insert(key);
                    }
                    if !responses.is_empty() {
                        self.update_task(task_id, responses).await?;
                        continue;
                    }
                }
                TaskStatus::Working => {}
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// Answer one input request through the input handler.
    pub(super) async fn answer_input(&self, request: &Value) -> Result<Value, ClientError> {
        let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        crate::input::answer(self.inner.handler.as_ref(), method, params).await
    }

    /// Follow a `tools/call` result that is a task to its end; any other
    /// result is returned as it is. A caller that gives up (drops the
    /// future) has the task cancelled on the server.
    pub(super) async fn follow_task(
        &self,
        result: Value,
        options: &CallOptions,
    ) -> Result<Value, ClientError> {
        let Some(task) = task_of(&result)? else {
            return Ok(result);
        };
        let guard = self.cancel_on_drop(&task.task_id);
        // The task was just created: the first poll waits the interval the
        // server suggested, like every later one.
        let interval = suggested_poll(&task).unwrap_or(DEFAULT_POLL);
        tokio::time::sleep(interval).await;
        let outcome = self.poll_task(&task.task_id, interval, options).await;
        guard.disarm();
        outcome
    }
}

/// A task's states as the server pushes them (`notifications/tasks` on a
/// `subscriptions/listen` stream): [`Client::listen_task`]. Dropping it
/// closes the stream.
pub struct TaskUpdates {
    pending: crate::transport::Pending,
}

impl TaskUpdates {
    /// The next state the server sent; `None` once the stream ended (the
    /// server closed it, or the connection dropped: poll then).
    pub async fn next(&mut self) -> Option<Result<DetailedTask, ClientError>> {
        loop {
            match self.pending.next().await? {
                Err(e) => return Some(Err(e)),
                Ok(Inbound::Response(_)) => return None,
                Ok(Inbound::Notification(n)) => {
                    if n.get("method").and_then(Value::as_str) != Some("notifications/tasks") {
                        continue;
                    }
                    let params = n.get("params").cloned().unwrap_or(Value::Null);
                    return Some(serde_json::from_value(params).map_err(|e| {
                        ClientError::InvalidResponse(format!("notifications/tasks: {e}"))
                    }));
                }
            }
        }
    }
}

impl Client {
    /// Follow a task by notification rather than by polling: opens a
    /// `subscriptions/listen` stream for it and returns once the server
    /// acknowledged it. `Ok(None)` when the server does not agree to follow
    /// the task (it sends no task notifications, or does not know the
    /// task); polling ([`Client::wait_task`]) is the way then.
    pub async fn listen_task(&self, task_id: &str) -> Result<Option<TaskUpdates>, ClientError> {
        let mut params = Map::new();
        params.insert("notifications".into(), json!({ "taskIds": [task_id] }));
        let outgoing = self.outgoing(SubscriptionsListen::NAME, params, Vec::new());
        let mut pending = self.transport.send(outgoing).await?;
        let acknowledged = tokio::time::timeout(self.inner.timeout, async {
            loop {
                match pending.next().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(e),
                    Some(Ok(Inbound::Response(response))) => {
                        // An error (such as -32021) or an immediate end.
                        return response.into_result().map(|_| None);
                    }
                    Some(Ok(Inbound::Notification(n))) => {
                        if n.get("method").and_then(Value::as_str)
                            == Some("notifications/subscriptions/acknowledged")
                        {
                            let followed = n
                                .pointer("/params/notifications/taskIds")
                                .and_then(Value::as_array)
                                .is_some_and(|ids| ids.iter().any(|id| id == task_id));
                            return Ok(Some(followed));
                        }
                    }
                }
            }
        })
        .await
        .map_err(|_| ClientError::Timeout(self.inner.timeout))??;
        Ok(match acknowledged {
            Some(true) => Some(TaskUpdates { pending }),
            _ => None,
        })
    }
}

/// Cancels a task on the server when dropped, unless disarmed: held while
/// following a task, so that giving up on it (dropping the future) stops
/// the work too ([`Client::cancel_on_drop`]).
pub struct TaskGuard {
    client: Client,
    task_id: Option<String>,
    /// The token the cancellation carries, when not the transport's own.
    bearer: Option<crate::transport::Bearer>,
}

impl TaskGuard {
    /// The task ended or is left to run on: do not cancel it.
    pub fn disarm(mut self) {
        self.task_id = None;
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        let Some(task_id) = self.task_id.take() else {
            return;
        };
        let client = self.client.clone();
        let options = CallOptions {
            bearer: self.bearer.take(),
            ..CallOptions::default()
        };
        // Without a runtime (the program is ending) nothing can be sent.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = client.cancel_task_with(&task_id, &options).await {
                    tracing::debug!(task = %task_id, error = %e, "abandoned task not cancelled");
                }
            });
        }
    }
}

impl Client {
    /// A guard that sends `tasks/cancel` for `task_id` when dropped, unless
    /// [`TaskGuard::disarm`]ed first.
    pub fn cancel_on_drop(&self, task_id: &str) -> TaskGuard {
        self.cancel_on_drop_as(task_id, None)
    }

    /// [`Client::cancel_on_drop`], the cancellation carrying `bearer`
    /// ([`CallOptions::bearer`]) when given.
    pub fn cancel_on_drop_as(
        &self,
        task_id: &str,
        bearer: Option<crate::transport::Bearer>,
    ) -> TaskGuard {
        TaskGuard {
            client: self.clone(),
            task_id: Some(task_id.to_owned()),
            bearer,
        }
    }
}

fn task_params(task_id: &str) -> TaskIdParams {
    TaskIdParams {
        task_id: task_id.to_owned(),
        meta: None,
    }
}

/// The task a result announces (`resultType: "task"`), if any.
pub(super) fn task_of(result: &Value) -> Result<Option<Task>, ClientError> {
    if result.get("resultType").and_then(Value::as_str) != Some("task") {
        return Ok(None);
    }
    serde_json::from_value(result.clone())
        .map(Some)
        .map_err(|e| ClientError::InvalidResponse(format!("{CREATE_TASK_RESULT}: {e}")))
}

/// How an answer that should be a task is named when it is not one.
pub(super) const CREATE_TASK_RESULT: &str = "CreateTaskResult";
