//! `tasks/get`, `tasks/update` and `tasks/cancel`.
//!
//! All three need the extension declared on the request (`-32021`
//! otherwise) and answer an unknown, expired or someone else's task with
//! `-32602`. Updates and cancellations are acknowledged with an empty
//! result; their effect shows in the next `tasks/get`.

use std::future::Future;

use serde_json::{Map, Value, json};
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::types::{TASKS_EXTENSION, TaskIdParams, TaskStatus, UpdateTaskParams};

use crate::Server;
use crate::dispatch::{TransportContext, error_frame};
use crate::exchange::{Exchange, Frame, Reply};
use crate::methods::{Failure, params};

/// `-32021` naming the extension.
pub(crate) fn extension_required(what: &str) -> RpcError {
    let mut error =
        RpcError::missing_client_capability(json!({ "extensions": { TASKS_EXTENSION: {} } }));
    error.message = format!(
        "Missing required client capability: {what} needs the extension {TASKS_EXTENSION} declared in io.modelcontextprotocol/clientCapabilities"
    );
    error
}

/// The checks every tasks method shares.
fn admit(server: &Server, req: &Request, meta: &RequestMeta) -> Result<(), Failure> {
    if !server.inner.tasks.enabled() {
        return Err((req.id.clone(), RpcError::method_not_found(&req.method)));
    }
    if !meta.client_capabilities.has_extension(TASKS_EXTENSION) {
        return Err((req.id.clone(), extension_required(&req.method)));
    }
    Ok(())
}

/// Serve a tasks method: admit the request, read its params `P`, and
/// answer once `work(server, params, owner)` has read or written the store.
fn serve<P, W, Fut>(
    server: &Server,
    req: Request,
    meta: &RequestMeta,
    transport: &TransportContext,
    work: W,
) -> Result<Reply, Failure>
where
    P: serde::de::DeserializeOwned,
    W: FnOnce(Server, P, Option<String>) -> Fut,
    Fut: Future<Output = Result<Map<String, Value>, RpcError>> + Send + 'static,
{
    admit(server, &req, meta)?;
    let p: P = params(&req)?;
    let owner = transport
        .auth
        .as_ref()
        .and_then(|a| a.subject())
        .map(str::to_owned);
    let (id, answering) = (req.id, server.clone());
    let work = work(server.clone(), p, owner);
    let answer = async move {
        match work.await {
            Ok(result) => answering.result_frame(&id, &result),
            Err(error) => error_frame(Some(&id), error),
        }
    };
    Ok(Reply::Streaming(Exchange::from_stream(Box::pin(
        futures::stream::once(answer),
    ))))
}

/// `tasks/get`: the task as it stands, with what its status carries.
pub(crate) fn get(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    serve(
        server,
        req,
        &meta,
        transport,
        |srv, p: TaskIdParams, owner| async move {
            let record = srv.inner.tasks.find(&p.task_id, owner.as_deref()).await?;
            match serde_json::to_value(&record.task) {
                Ok(Value::Object(map)) => Ok(map),
                _ => Err(RpcError::internal()),
            }
        },
    )
}

/// `tasks/update`: answers to the task's outstanding input requests.
/// Answers to keys that are not outstanding are ignored; the task stays
/// `input_required` until every question has its answer.
pub(crate) fn update(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    serve(
        server,
        req,
        &meta,
        transport,
        |srv, p: UpdateTaskParams, owner| async move {
            let tasks = &srv.inner.tasks;
            let Some(live) = tasks.live(&p.task_id, owner.as_deref()) else {
                // Not run here: unknown, finished, or run by another process
                // (route updates by the Mcp-Name header).
                let record = tasks.find(&p.task_id, owner.as_deref()).await?;
                if record.task.task.status.is_terminal() {
                    return Ok(Map::new());
                }
                return Err(RpcError::invalid_params(format!(
                    "Task {} is not running on this server instance; send tasks/update with the Mcp-Name header set to the task id so it reaches the instance running it",
                    toolgate_protocol::quote::quote(&p.task_id)
                )));
            };
            let _guard = live.write.lock().await;
            // Read under the lock: the work may move on meanwhile.
            let mut task = tasks.find(&p.task_id, owner.as_deref()).await?.task;
            if task.task.status != TaskStatus::InputRequired {
                return Ok(Map::new());
            }
            let Some(outstanding) = task.input_requests.as_mut() else {
                return Ok(Map::new());
            };
            let mut accepted = Map::new();
            for (key, answer) in p.input_responses {
                if outstanding.remove(&key).is_some() {
                    accepted.insert(key, answer);
                }
            }
            if accepted.is_empty() {
                return Ok(Map::new());
            }
            if outstanding.is_empty() {
                task.input_requests = None;
                task.task.status = TaskStatus::Working;
                task.task.status_message = Some("Answers received; working.".to_owned());
            }
            if !tasks.save(&live, task).await {
                return Err(RpcError::internal());
            }
            live.inbox.lock().extend(accepted);
            live.wake.notify_one();
            Ok(Map::new())
        },
    )
}

/// `tasks/cancel`: ask for the work to stop. Acknowledged for any task the
/// caller may see, finished ones included; a running one ends `cancelled`.
pub(crate) fn cancel(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    serve(
        server,
        req,
        &meta,
        transport,
        |srv, p: TaskIdParams, owner| async move {
            let tasks = &srv.inner.tasks;
            tasks.find(&p.task_id, owner.as_deref()).await?;
            if let Some(live) = tasks.live(&p.task_id, owner.as_deref()) {
                live.cancel.cancel();
            }
            Ok(Map::new())
        },
    )
}

/// The `notifications/tasks` frame for `task`, tagged for a subscription.
pub(crate) fn notification(
    task: &toolgate_protocol::types::DetailedTask,
    tag: &Map<String, Value>,
) -> Option<Frame> {
    let Ok(Value::Object(mut params)) = serde_json::to_value(task) else {
        return None;
    };
    params.insert("_meta".into(), Value::Object(tag.clone()));
    Some(Frame::Notification(
        toolgate_protocol::jsonrpc::encode_notification(
            toolgate_protocol::types::task_methods::STATUS_NOTIFICATION,
            Some(&params),
        ),
    ))
}
