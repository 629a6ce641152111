//! Running a call that may become a task: in its request until the task
//! starts, then on its own, parking whenever it needs input.

use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use serde_json::{Map, Value};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;
use toolgate_protocol::RequestId;
use toolgate_protocol::RpcError;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::{CallToolResult, DetailedTask, TaskStatus};

use super::{Live, NotCreated};
use crate::context::{RequestContext, Round};
use crate::dispatch::{TransportContext, error_frame, request_token};
use crate::exchange::{Exchange, Frame, Reply};
use crate::frame_queue;
use crate::methods::tools::{Audit, Executed, encode, spend};
use crate::methods::{Ended, guarded};
use crate::mrtr::Binding;
use crate::tool::RegisteredTool;
use crate::{CallOutcome, Server};

/// A validated call to a task-supporting tool from a client that declared
/// the extension.
pub(crate) struct Call {
    pub(crate) tool: Arc<RegisteredTool>,
    pub(crate) id: RequestId,
    pub(crate) meta: RequestMeta,
    pub(crate) binding: Binding,
    pub(crate) round: Round,
    /// The single-use nonce the request's round spends before it runs.
    pub(crate) once: Option<String>,
    pub(crate) args: Map<String, Value>,
    pub(crate) audit: Option<Audit>,
}

/// The task a call may become. Shared by the call's work and its
/// [`RequestContext`].
pub(crate) struct Slot {
    server: Server,
    request_id: RequestId,
    owner: Option<String>,
    /// Where the request's answer goes: the `CreateTaskResult` once the task
    /// starts, else the final response. Taken by whichever comes first.
    answer: Mutex<Option<oneshot::Sender<Frame>>>,
    /// The task, once started.
    task: OnceLock<(Arc<Live>, String)>,
    started: Notify,
}

impl Slot {
    /// The task's id, once it started.
    pub(crate) fn task_id(&self) -> Option<&str> {
        self.task.get().map(|(_, id)| id.as_str())
    }

    fn live(&self) -> Option<&Arc<Live>> {
        self.task.get().map(|(live, _)| live)
    }

    fn take_answer(&self) -> Option<oneshot::Sender<Frame>> {
        self.answer.lock().take()
    }

    /// Start the task (once): create it durably, then answer the request
    /// with it. `Ok(false)`: the request was already answered.
    pub(crate) async fn start(&self) -> Result<bool, NotCreated> {
        if self.task.get().is_some() {
            return Ok(true);
        }
        let Some(answer) = self.take_answer() else {
            return Ok(false);
        };
        let tasks = &self.server.inner.tasks;
        let (live, task) = match tasks.create(self.owner.clone()).await {
            Ok(created) => created,
            Err(e) => {
                *self.answer.lock() = Some(answer);
                return Err(e);
            }
        };
        let id = task.task.task_id.clone();
        let _ = self.task.set((live, id));
        self.started.notify_waiters();
        let mut result = match serde_json::to_value(&task.task) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        result.insert("resultType".into(), Value::from("task"));
        // The client may already be gone; the task runs regardless.
        let _ = answer.send(self.server.result_frame(&self.request_id, &result));
        Ok(true)
    }

    /// Set the task's `statusMessage` (progress reported by the handler).
    pub(crate) async fn status_message(&self, message: String) {
        self.modify(|task| task.task.status_message = Some(message))
            .await;
    }

    /// Change the task, unless it ended: read it, apply `change`, save it
    /// and tell listeners, under the task's write lock. `false` when the
    /// task has not started, ended, is gone, or could not be saved.
    async fn modify(&self, change: impl FnOnce(&mut DetailedTask)) -> bool {
        let (Some(live), Some(id)) = (self.live(), self.task_id()) else {
            return false;
        };
        let tasks = &self.server.inner.tasks;
        let _guard = live.write.lock().await;
        let Ok(mut record) = tasks.find(id, self.owner.as_deref()).await else {
            return false;
        };
        if record.task.task.status.is_terminal() {
            return false;
        }
        change(&mut record.task);
        tasks.save(live, record.task).await
    }
}

/// How a task ended.
enum End {
    /// With the call's result (a tool error included).
    Completed(Map<String, Value>, Option<String>),
    /// With a JSON-RPC error.
    Failed(Map<String, Value>, Option<String>),
    /// Cancelled (or expired).
    Cancelled,
}

/// Answer a call that may become a task. The handler runs on a task of its
/// own so that it can outlive the request.
pub(crate) fn call(server: &Server, call: Call, transport: &TransportContext) -> Reply {
    let (sink, notes) = frame_queue::queue();
    let request_cancel = request_token();
    let (answer, answered) = oneshot::channel();
    let slot = Arc::new(Slot {
        server: server.clone(),
        request_id: call.id.clone(),
        owner: call.binding.subject.clone(),
        answer: Mutex::new(Some(answer)),
        task: OnceLock::new(),
        started: Notify::new(),
    });
    let work_cancel = CancellationToken::new();
    let ctx = RequestContext::new(
        call.id.clone(),
        call.meta.clone(),
        transport.auth.clone(),
        sink,
        work_cancel.clone(),
        call.round.clone(),
    )
    .with_states(server.inner.states.clone())
    .in_task(slot.clone());
    let driver = Driver {
        server: server.clone(),
        slot,
        request_cancel: request_cancel.clone(),
        work_cancel,
    };
    tokio::spawn(driver.drive(call, ctx));
    let work = async move { answered.await.ok() };
    Reply::Streaming(Exchange::new(notes, Box::pin(work), request_cancel))
}

struct Driver {
    server: Server,
    slot: Arc<Slot>,
    /// Cancelled when the request's exchange goes away.
    request_cancel: CancellationToken,
    /// What the handler's context watches.
    work_cancel: CancellationToken,
}

/// Why the work stopped early.
enum Stop {
    /// The client left before the task started.
    RequestGone,
    /// `tasks/cancel`, or the task expired.
    TaskCancelled,
}

impl Driver {
    async fn drive(self, call: Call, mut ctx: RequestContext) {
        let Call {
            tool,
            id,
            meta: _,
            binding,
            mut round,
            once,
            args,
            mut audit,
        } = call;
        // A replayed round is refused before any task exists.
        if let Err((frame, outcome)) = spend(&self.server, &tool, &id, once).await {
            let frame = match audit.take() {
                Some(audit) => {
                    audit
                        .finish(frame, outcome, Map::new(), &self.server, &id)
                        .await
                }
                None => frame,
            };
            self.answer(frame);
            return;
        }
        if !tool.task_from_handler {
            match self.slot.start().await {
                Ok(_) => {}
                Err(NotCreated::Full(limit)) => {
                    let text = format!(
                        "The server is running as many tasks as it may ({limit}); the tool {} was not started. Try again once earlier tasks have finished.",
                        quote(&tool.tool.name)
                    );
                    let frame = self.server.result_frame(&id, &CallToolResult::error(text));
                    self.answer(frame);
                    return;
                }
                Err(NotCreated::Store) => {
                    self.answer(error_frame(Some(&id), RpcError::internal()));
                    return;
                }
            }
        }
        loop {
            let run = guarded(
                &tool.tool.name,
                tool.handler.call(args.clone(), ctx.clone()),
            );
            let executed = tokio::select! {
                ended = run => Executed::Ended(ended),
                limit = self.deadline(&tool) => Executed::TimedOut(limit),
                stop = self.stopped() => {
                    self.work_cancel.cancel();
                    if let Stop::TaskCancelled = stop {
                        self.settle(End::Cancelled).await;
                    }
                    return;
                }
            };
            let pending = match executed {
                Executed::Ended(Ended::NeedsInput(pending)) if self.slot.live().is_some() => {
                    pending
                }
                executed => {
                    let (frame, outcome) = encode(&self.server, &tool, &id, &binding, executed);
                    let frame = match audit.take() {
                        Some(audit) => {
                            let notes = ctx.take_notes();
                            audit.finish(frame, outcome, notes, &self.server, &id).await
                        }
                        None => frame,
                    };
                    self.finish(frame, outcome).await;
                    return;
                }
            };
            // Keep every answer so far: the handler runs again from the top.
            let keys: Vec<String> = pending.requests.keys().cloned().collect();
            round.app = pending.app;
            if !self.park(pending.requests).await {
                return;
            }
            let answers = tokio::select! {
                answers = self.answers(&keys) => answers,
                _ = self.stopped() => {
                    self.work_cancel.cancel();
                    self.settle(End::Cancelled).await;
                    return;
                }
            };
            round.responses.extend(answers);
            ctx = ctx.next_round(round.clone());
        }
    }

    /// Send the request's answer, if it still has none.
    fn answer(&self, frame: Frame) {
        if let Some(answer) = self.slot.take_answer() {
            let _ = answer.send(frame);
        }
    }

    /// Resolves when the work must stop: the client left before the task
    /// started, or the task was cancelled or expired.
    async fn stopped(&self) -> Stop {
        loop {
            // Created before the check, so a start in between is not missed.
            let started = self.slot.started.notified();
            if let Some(live) = self.slot.live() {
                live.cancel.cancelled().await;
                return Stop::TaskCancelled;
            }
            tokio::select! {
                _ = self.request_cancel.cancelled() => {
                    // The exchange also goes away right after delivering the
                    // task; only a request left before that stops the work.
                    if self.slot.live().is_none() {
                        return Stop::RequestGone;
                    }
                }
                _ = started => {}
            }
        }
    }

    /// The time limit: the tool's timeout while in the request, the task's
    /// lifetime once it started.
    async fn deadline(&self, tool: &RegisteredTool) -> std::time::Duration {
        if self.slot.live().is_none() {
            tokio::time::sleep(tool.timeout).await;
        }
        let Some(live) = self.slot.live() else {
            return tool.timeout;
        };
        match live.expires_at {
            Some(at) => {
                let left = at.duration_since(SystemTime::now()).unwrap_or_default();
                tokio::time::sleep(left).await;
                self.server.inner.tasks.ttl.unwrap_or(tool.timeout)
            }
            None => std::future::pending().await,
        }
    }

    /// The call ended: answer the request, or settle the task.
    async fn finish(&self, frame: Frame, outcome: CallOutcome) {
        if self.slot.live().is_none() {
            self.answer(frame);
            return;
        }
        let body: Value = serde_json::from_slice(frame.bytes()).unwrap_or(Value::Null);
        match (body.get("result"), body.get("error")) {
            (Some(Value::Object(result)), _) if outcome != CallOutcome::InputRequired => {
                let message = result
                    .get("isError")
                    .and_then(Value::as_bool)
                    .filter(|e| *e)
                    .map(|_| "The tool reported an error; see the result.".to_owned());
                self.settle(End::Completed(result.clone(), message)).await;
            }
            (_, Some(Value::Object(error))) => {
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.settle(End::Failed(error.clone(), message)).await;
            }
            _ => {
                // A dynamic handler built its own input_required result: that
                // shape has no place in a task.
                tracing::error!("a task's handler answered input_required itself; task failed");
                let error = serde_json::to_value(RpcError::internal())
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                self.settle(End::Failed(error, None)).await;
            }
        }
    }

    /// Move the task to its end (never out of one).
    async fn settle(&self, end: End) {
        self.slot
            .modify(|task| {
                task.input_requests = None;
                // A progress message no longer describes a task that ended.
                task.task.status_message = match end {
                    End::Completed(result, message) => {
                        task.task.status = TaskStatus::Completed;
                        task.result = Some(result);
                        message
                    }
                    End::Failed(error, message) => {
                        task.task.status = TaskStatus::Failed;
                        task.error = Some(error);
                        message
                    }
                    End::Cancelled => {
                        task.task.status = TaskStatus::Cancelled;
                        Some("Cancelled at the client's request.".to_owned())
                    }
                };
            })
            .await;
    }

    /// Park the task as `input_required` with these questions. `false`: it
    /// is gone.
    async fn park(&self, requests: Map<String, Value>) -> bool {
        self.slot
            .modify(|task| {
                task.task.status = TaskStatus::InputRequired;
                task.task.status_message = Some(format!(
                    "Waiting for {} answer{} (inputRequests; send them with tasks/update).",
                    requests.len(),
                    if requests.len() == 1 { "" } else { "s" }
                ));
                task.input_requests = Some(requests);
            })
            .await
    }

    /// Wait until `tasks/update` has answered every key, and take the answers.
    async fn answers(&self, keys: &[String]) -> Map<String, Value> {
        let Some(live) = self.slot.live() else {
            return std::future::pending().await;
        };
        loop {
            {
                let mut inbox = live.inbox.lock();
                if keys.iter().all(|k| inbox.contains_key(k)) {
                    return std::mem::take(&mut *inbox);
                }
            }
            live.wake.notified().await;
        }
    }
}
