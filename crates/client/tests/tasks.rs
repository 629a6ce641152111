//! The client following tool calls a toolgate server runs as tasks.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, CallOptions, CallStart, Client, ClientError, InputHandler};
use toolgate_server::protocol::RpcError;
use toolgate_server::protocol::types::{ClientCapabilities, DetailedTask, TaskStatus};
use toolgate_server::tasks::TaskSupport;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{RequestContext, Server, ServerConfig, ToolDef, ToolError};

/// Counts handlers stopped before they finished, and says when one was.
struct Stopped(Arc<AtomicUsize>, Arc<Notify>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_one();
    }
}

struct Fixture {
    url: String,
    release: Arc<Notify>,
    stopped: Arc<AtomicUsize>,
    stop_seen: Arc<Notify>,
}

async fn fixture() -> Fixture {
    let release = Arc::new(Notify::new());
    let stopped = Arc::new(AtomicUsize::new(0));
    let stop_seen = Arc::new(Notify::new());
    let (r, s, seen) = (release.clone(), stopped.clone(), stop_seen.clone());
    let config = ServerConfig::default().with_task_poll_interval(Duration::from_millis(50));
    let server = Server::builder("tasks", "1")
        .config(config)
        .tool(
            ToolDef::new("build")
                .description("Builds when released")
                .task_support(TaskSupport::Optional)
                .handler(move |ctx: RequestContext| {
                    let r = r.clone();
                    async move {
                        ctx.progress(1.0, Some(2.0), Some("halfway")).await;
                        r.notified().await;
                        Ok("built")
                    }
                }),
        )
        .tool(
            ToolDef::new("confirm")
                .description("Asks first")
                .task_support(TaskSupport::Optional)
                .handler(|ctx: RequestContext| async move {
                    let mut inputs = ctx.inputs();
                    let schema =
                        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
                    let Some(answer) = inputs.elicit("ok", "Proceed?", schema)? else {
                        return Err(inputs.ask());
                    };
                    Ok(format!(
                        "answer: {}",
                        Value::Object(answer.content.unwrap_or_default())
                    ))
                }),
        )
        .tool(
            ToolDef::new("boom")
                .description("Protocol error")
                .task_support(TaskSupport::Optional)
                .handler(|| async { Err::<String, _>(ToolError::protocol(RpcError::internal())) }),
        )
        .tool(
            ToolDef::new("forever")
                .description("Runs until stopped")
                .task_support(TaskSupport::Optional)
                .handler(move || {
                    let guard = Stopped(s.clone(), seen.clone());
                    async move {
                        let _guard = guard;
                        std::future::pending::<()>().await;
                        Ok("never")
                    }
                }),
        )
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_listener(server, HttpConfig::default(), listener));
    Fixture {
        url,
        release,
        stopped,
        stop_seen,
    }
}

struct Yes;

impl InputHandler for Yes {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        request: toolgate_server::protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_server::protocol::types::ElicitResult, ClientError>> {
        assert_eq!(request.message, "Proceed?");
        Box::pin(async {
            Ok(
                serde_json::from_value(json!({"action": "accept", "content": {"ok": true}}))
                    .unwrap(),
            )
        })
    }
}

fn client(url: &str, tasks: bool) -> Client {
    let builder = Client::builder("test", "1").input_handler(Yes);
    let builder = if tasks { builder.tasks() } else { builder };
    builder.build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

/// Call options whose `on_task` reports every state seen.
fn watching() -> (CallOptions, mpsc::UnboundedReceiver<DetailedTask>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let options = CallOptions {
        on_task: Some(Arc::new(move |task: &DetailedTask| {
            let _ = tx.send(task.clone());
        })),
        ..CallOptions::default()
    };
    (options, rx)
}

#[tokio::test]
async fn call_tool_follows_a_task_to_its_result() {
    let f = fixture().await;
    let c = client(&f.url, true);
    let (options, mut states) = watching();
    let call = tokio::spawn(async move { c.call_tool("build", Map::new(), &options).await });
    // The status message the handler's progress set shows up while working.
    loop {
        let state = states.recv().await.unwrap();
        assert_eq!(state.task.status, TaskStatus::Working);
        if state.task.status_message.as_deref() == Some("halfway") {
            break;
        }
    }
    f.release.notify_one();
    let result = call.await.unwrap().unwrap();
    assert_eq!(result.content[0].as_text(), Some("built"));
    let last = states.recv().await.unwrap();
    assert_eq!(last.task.status, TaskStatus::Completed);
}

#[tokio::test]
async fn task_input_requests_are_answered_through_the_handler() {
    let f = fixture().await;
    let (options, mut states) = watching();
    let result = client(&f.url, true)
        .call_tool("confirm", Map::new(), &options)
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("answer: {\"ok\":true}"));
    let mut seen = Vec::new();
    while let Ok(state) = states.try_recv() {
        seen.push(state.task.status);
    }
    assert!(seen.contains(&TaskStatus::InputRequired), "{seen:?}");
}

#[tokio::test]
async fn without_tasks_declared_the_call_answers_in_the_request() {
    let f = fixture().await;
    let (options, mut states) = watching();
    let result = client(&f.url, false)
        .call_tool("confirm", Map::new(), &options)
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("answer: {\"ok\":true}"));
    assert!(states.try_recv().is_err(), "no task was made");
}

#[tokio::test]
async fn a_failed_task_is_its_protocol_error_and_a_cancelled_one_says_so() {
    let f = fixture().await;
    let c = client(&f.url, true);
    match c
        .call_tool("boom", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::Protocol(e)) => assert_eq!(e.code, -32603),
        other => panic!("{other:?}"),
    }
    let CallStart::Task(task) = c
        .start_tool_call("forever", Map::new(), &CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("a task")
    };
    assert_eq!(
        c.get_task(&task.task_id).await.unwrap().task.status,
        TaskStatus::Working
    );
    c.cancel_task(&task.task_id).await.unwrap();
    match c.wait_task(&task.task_id, &CallOptions::default()).await {
        Err(ClientError::TaskEnded { status, .. }) => assert_eq!(status, "cancelled"),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.stopped.load(Ordering::SeqCst), 1);
    match c.get_task("task-unknown").await {
        Err(ClientError::Protocol(e)) => assert_eq!(e.code, -32602),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn giving_up_on_a_call_cancels_its_task() {
    let f = fixture().await;
    let c = client(&f.url, true);
    let (options, mut states) = watching();
    let call = tokio::spawn(async move { c.call_tool("forever", Map::new(), &options).await });
    let first = states.recv().await.unwrap();
    assert_eq!(first.task.status, TaskStatus::Working);
    call.abort();
    f.stop_seen.notified().await;
    assert_eq!(f.stopped.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_task_can_be_followed_by_notification() {
    let f = fixture().await;
    let c = client(&f.url, true);
    let CallStart::Task(task) = c
        .start_tool_call("build", Map::new(), &CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("a task");
    };
    let mut updates = c
        .listen_task(&task.task_id)
        .await
        .unwrap()
        .expect("followed");
    let first = updates.next().await.unwrap().unwrap();
    assert_eq!(first.task.task_id, task.task_id);
    f.release.notify_one();
    loop {
        let state = updates.next().await.unwrap().unwrap();
        if state.task.status == TaskStatus::Completed {
            assert_eq!(state.result.unwrap()["content"][0]["text"], "built");
            break;
        }
    }
    // A task the server does not know is not followed.
    assert!(c.listen_task("task-unknown").await.unwrap().is_none());
    // Without the extension declared, the server refuses.
    let plain = client(&f.url, false);
    match plain.listen_task(&task.task_id).await {
        Err(ClientError::Protocol(e)) => assert_eq!(e.code, -32021),
        other => panic!("{:?}", other.map(|u| u.is_some())),
    }
}
