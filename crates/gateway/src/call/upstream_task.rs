//! Task passthrough: when an upstream runs a relayed `tools/call` as a task
//! (the caller declared the tasks extension, so the gateway did too), the
//! gateway's own call becomes a task for its caller, and the upstream's task
//! is followed from it.
//!
//! The upstream's questions become the gateway task's questions (keys
//! `task/<upstream key>`, unique for the task's life as the upstream's
//! are). Once the caller answered them all, the gateway's handler runs
//! again, finds the upstream task in its remembered state, passes the
//! answers on with `tasks/update` and goes on following. Cancelling the
//! gateway's task (or the gateway giving up on it) cancels the upstream's.
//!
//! Layer: `call`.

use std::time::Duration;

use serde_json::{Map, Value, json};
use toolgate_client::{Client, ClientError};
use toolgate_protocol::types::{CallToolResult, DetailedTask, TaskStatus};
use toolgate_server::{Inputs, RequestContext, ToolError};

/// What the gateway remembers of an upstream task between runs of its
/// handler: the task and the questions it passed on.
pub(crate) fn remembered(kept: &Value) -> Option<(String, Map<String, Value>)> {
    let task = kept.get("task")?;
    let id = task.get("id")?.as_str()?.to_owned();
    let requests = task
        .get("requests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    Some((id, requests))
}

/// The gateway's key for an upstream task's question.
fn key(upstream_key: &str) -> String {
    format!("task/{upstream_key}")
}

/// Follow upstream task `task_id` to its end from the gateway's handler.
/// `asked` are the questions passed on in the previous run (their answers
/// are in `input`); `remember` keeps the follow state for the next run.
/// `Err` ends this run asking the caller (the gateway task parks).
pub(crate) async fn follow(
    server: &str,
    (client, bearer): (Client, Option<toolgate_client::transport::Bearer>),
    ctx: &RequestContext,
    mut input: Inputs,
    task_id: String,
    asked: Map<String, Value>,
    remember: impl Fn(&mut Inputs, Value),
) -> Result<Result<CallToolResult, ClientError>, ToolError> {
    // The caller waits on the gateway's task, not on this request.
    ctx.run_as_task().await;
    // Polled, answered and cancelled as whoever started it: the caller's
    // token at an upstream with `identity`, else the gateway's own.
    let options = toolgate_client::CallOptions {
        bearer: bearer.clone(),
        ..Default::default()
    };
    // Dropped with the handler (the gateway task cancelled or expired):
    // the upstream's task is cancelled too.
    let guard = client.cancel_on_drop_as(&task_id, bearer);
    let mut answers = Map::new();
    for (k, request) in &asked {
        if let Some(answer) = input.relay(&key(k), request.clone())? {
            answers.insert(k.clone(), answer);
        }
    }
    if !input.complete() {
        guard.disarm();
        remember(&mut input, json!({"id": task_id, "requests": asked}));
        return Err(input.ask());
    }
    if !answers.is_empty()
        && let Err(e) = client.update_task_with(&task_id, answers, &options).await
    {
        return Ok(Err(e));
    }
    let mut last_message: Option<String> = None;
    loop {
        let task = match client.get_task_with(&task_id, &options).await {
            Ok(task) => task,
            Err(e) => {
                guard.disarm();
                return Ok(Err(e));
            }
        };
        if task.task.status_message != last_message {
            if let Some(message) = &task.task.status_message {
                ctx.progress(0.0, None, Some(message)).await;
            }
            last_message.clone_from(&task.task.status_message);
        }
        let wait = toolgate_client::suggested_poll(&task.task).unwrap_or(Duration::from_secs(1));
        match task.task.status {
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled => {
                guard.disarm();
                return Ok(ended(server, task));
            }
            TaskStatus::InputRequired => {
                let requests = task.input_requests.unwrap_or_default();
                let fresh: Map<String, Value> = requests
                    .into_iter()
                    .filter(|(k, _)| !asked.contains_key(k))
                    .collect();
                if !fresh.is_empty() {
                    for (k, request) in &fresh {
                        input.relay(&key(k), request.clone())?;
                    }
                    guard.disarm();
                    remember(&mut input, json!({"id": task_id, "requests": fresh}));
                    return Err(input.ask());
                }
                // Only questions already answered: the upstream has yet to
                // take the answers in.
            }
            TaskStatus::Working => {}
        }
        tokio::time::sleep(wait).await;
    }
}

/// The outcome of an upstream task that ended, as the gateway's caller
/// sees it: a cancellation upstream is a tool error naming the upstream.
fn ended(server: &str, task: DetailedTask) -> Result<CallToolResult, ClientError> {
    match toolgate_client::task_outcome(task) {
        Ok(result) => serde_json::from_value(result)
            .map_err(|e| ClientError::InvalidResponse(format!("the task's result: {e}"))),
        Err(ClientError::TaskEnded { message, .. }) => Ok(CallToolResult::error(format!(
            "The upstream server {server} cancelled its task for this call{}.",
            if message.is_empty() {
                String::new()
            } else {
                format!(" ({message})")
            }
        ))),
        Err(e) => Err(e),
    }
}
