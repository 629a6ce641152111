//! Task passthrough: a call an upstream runs as a task becomes a gateway
//! task; its questions, answers, result and cancellation cross the gateway.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{Yes, config, serve};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, CallStart, Client, ClientError};
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::types::TaskStatus;
use toolgate_server::tasks::TaskSupport;
use toolgate_server::{RequestContext, Server, ToolDef};

/// Counts upstream handlers stopped before they finished.
struct Stopped(Arc<AtomicUsize>, Arc<Notify>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_one();
    }
}

struct Upstream {
    url: String,
    stopped: Arc<AtomicUsize>,
    stop_seen: Arc<Notify>,
}

async fn upstream() -> Upstream {
    let stopped = Arc::new(AtomicUsize::new(0));
    let stop_seen = Arc::new(Notify::new());
    let (s, seen) = (stopped.clone(), stop_seen.clone());
    let server = Server::builder("jobs", "1")
        .tool(
            ToolDef::new("export")
                .description("Exports after a confirmation; only as a task.")
                .read_only()
                .task_support(TaskSupport::Required)
                .handler(|ctx: RequestContext| async move {
                    let mut inputs = ctx.inputs();
                    let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                    let Some(answer) = inputs.elicit("ok", "Export?", form)? else {
                        return Err(inputs.ask());
                    };
                    ctx.progress(1.0, None, Some("exporting")).await;
                    let ok = answer.content.unwrap_or_default()["ok"].clone();
                    Ok(format!("exported, ok={ok}"))
                }),
        )
        .tool(
            ToolDef::new("hang")
                .description("Runs until cancelled.")
                .read_only()
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
    Upstream {
        url: serve(server).await,
        stopped,
        stop_seen,
    }
}

async fn gateway(upstream: &Upstream) -> Gateway {
    let toml = format!("[servers.jobs]\nurl = \"{}\"\n", upstream.url);
    Gateway::start(config(&toml), GatewayOptions::default())
        .await
        .unwrap()
}

async fn downstream(gateway: &Gateway, tasks: bool) -> Client {
    let url = serve(gateway.server()).await;
    let builder = Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(Yes);
    let builder = if tasks { builder.tasks() } else { builder };
    builder.build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

#[tokio::test]
async fn an_upstream_task_becomes_a_gateway_task_with_its_questions() {
    let up = upstream().await;
    let g = gateway(&up).await;
    let c = downstream(&g, true).await;
    let CallStart::Task(task) = c
        .start_tool_call("jobs.export", Map::new(), &CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("a gateway task");
    };
    // The upstream's question, under the gateway's key.
    let mut parked = c.get_task(&task.task_id).await.unwrap();
    while parked.task.status == TaskStatus::Working {
        tokio::task::yield_now().await;
        parked = c.get_task(&task.task_id).await.unwrap();
    }
    assert_eq!(parked.task.status, TaskStatus::InputRequired);
    let requests = parked.input_requests.unwrap();
    assert_eq!(requests["task/ok"]["params"]["message"], "Export?");
    // Answered at the gateway, passed upstream; the result comes back.
    let result = c
        .wait_task(&task.task_id, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "exported, ok=true");
}

#[tokio::test]
async fn a_caller_without_tasks_gets_the_upstreams_refusal() {
    let up = upstream().await;
    let g = gateway(&up).await;
    let c = downstream(&g, false).await;
    match c
        .call_tool("jobs.export", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::Protocol(e)) => {
            assert_eq!(e.code, -32021, "{e:?}");
            let data: Value = e.data.unwrap();
            assert!(
                data["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
                    .is_object()
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn cancelling_the_gateway_task_cancels_the_upstream_one() {
    let up = upstream().await;
    let g = gateway(&up).await;
    let c = downstream(&g, true).await;
    let CallStart::Task(task) = c
        .start_tool_call("jobs.hang", Map::new(), &CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("a gateway task");
    };
    c.cancel_task(&task.task_id).await.unwrap();
    match c.wait_task(&task.task_id, &CallOptions::default()).await {
        Err(ClientError::TaskEnded { status, .. }) => assert_eq!(status, "cancelled"),
        other => panic!("{other:?}"),
    }
    up.stop_seen.notified().await;
    assert_eq!(
        up.stopped.load(Ordering::SeqCst),
        1,
        "the upstream's work stopped"
    );
}

/// Approves the gateway's question and says yes to the upstream's.
struct ApproveAll(Arc<AtomicUsize>);

impl toolgate_client::InputHandler for ApproveAll {
    fn capabilities(&self) -> toolgate_protocol::types::ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        _request: toolgate_protocol::types::ElicitRequestParams,
    ) -> toolgate_client::BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>>
    {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Ok(serde_json::from_value(
                json!({"action": "accept", "content": {"approve": true, "ok": true}}),
            )
            .unwrap())
        })
    }
}

#[tokio::test]
async fn an_approved_call_stays_approved_through_its_tasks_questions() {
    let up = upstream().await;
    let toml = format!(
        "[servers.jobs]\nurl = \"{}\"\n[policy]\ndefault = \"confirm\"\n",
        up.url
    );
    let g = Gateway::start(config(&toml), GatewayOptions::default())
        .await
        .unwrap();
    let url = serve(g.server()).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let c = Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(ApproveAll(asked.clone()))
        .tasks()
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    let result = c
        .call_tool("jobs.export", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("exported, ok=true"));
    // Once for the approval (in the request), once for the upstream's
    // question (in the task): the approval is not asked for again.
    assert_eq!(asked.load(Ordering::SeqCst), 2);
}
