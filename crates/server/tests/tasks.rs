//! The tasks extension: tool calls answered with a task, polled, fed
//! input, cancelled — and every way a client can get it wrong.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::Notify;
use toolgate_server::protocol::RpcError;
use toolgate_server::tasks::TaskSupport;
use toolgate_server::transport::Reply;
use toolgate_server::{
    AuthContext, RequestContext, Server, ServerConfig, ToolDef, ToolError, TransportContext,
};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Counts the handlers dropped (stopped) before they finished.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Fixture {
    server: Server,
    /// Lets `gate` calls finish.
    release: Arc<Notify>,
    /// How many `forever` handlers were stopped.
    stopped: Arc<AtomicUsize>,
}

fn fixture(config: ServerConfig) -> Fixture {
    let release = Arc::new(Notify::new());
    let stopped = Arc::new(AtomicUsize::new(0));
    let (r, c) = (release.clone(), stopped.clone());
    let server = Server::builder("tasks", "1")
        .config(config)
        .tool(
            ToolDef::new("gate")
                .description("Finishes when the test says so")
                .task_support(TaskSupport::Optional)
                .handler(move |ctx: RequestContext| {
                    let r = r.clone();
                    async move {
                        ctx.progress(1.0, Some(2.0), Some("halfway")).await;
                        r.notified().await;
                        Ok("released")
                    }
                }),
        )
        .tool(
            ToolDef::new("ask")
                .description("Asks for a confirmation")
                .task_support(TaskSupport::Optional)
                .handler(|ctx: RequestContext| async move {
                    let mut inputs = ctx.inputs();
                    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                    let Some(answer) = inputs.elicit("ok", "Proceed?", schema)? else {
                        return Err(inputs.ask());
                    };
                    let ok = answer.content.and_then(|c| c.get("ok").cloned());
                    Ok(format!("ok={}", ok.unwrap_or(Value::Null)))
                }),
        )
        .tool(
            ToolDef::new("only_task")
                .description("Runs only as a task")
                .task_support(TaskSupport::Required)
                .handler(|| async { Ok("done") }),
        )
        .tool(
            ToolDef::new("boom")
                .description("Ends with a protocol error")
                .task_support(TaskSupport::Optional)
                .handler(|| async {
                    Err::<String, _>(ToolError::protocol(RpcError::internal()))
                }),
        )
        .tool(
            ToolDef::new("forever")
                .description("Runs until cancelled")
                .task_support(TaskSupport::Optional)
                .handler(move || {
                    let dropped = DropCount(c.clone());
                    async move {
                        let _dropped = dropped;
                        std::future::pending::<()>().await;
                        Ok("never")
                    }
                }),
        )
        .tool(
            ToolDef::new("fails")
                .description("Ends with a tool error")
                .task_support(TaskSupport::Optional)
                .handler(|| async {
                    Err::<String, _>(ToolError::new("the input file is empty"))
                }),
        )
        .tool(
            ToolDef::new("plain")
                .description("Never a task")
                .handler(|| async { Ok("plain") }),
        )
        .build()
        .unwrap();
    Fixture {
        server,
        release,
        stopped,
    }
}

fn meta(extension: bool) -> Value {
    let mut caps = json!({"elicitation": {}});
    if extension {
        caps["extensions"] = json!({ TASKS: {} });
    }
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps})
}

async fn send_as(
    server: &Server,
    method: &str,
    mut params: Value,
    ext: bool,
    auth: Option<&str>,
) -> Value {
    params["_meta"] = meta(ext);
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let transport = TransportContext {
        auth: auth.map(AuthContext::new),
        ..Default::default()
    };
    let frame = match server.handle_message(&serde_json::to_vec(&message).unwrap(), &transport) {
        Reply::Done(frame) => frame,
        Reply::Streaming(mut exchange) => exchange.next().await.expect("a response"),
        Reply::Nothing => panic!("no reply"),
    };
    serde_json::from_slice(frame.bytes()).unwrap()
}

async fn send(server: &Server, method: &str, params: Value) -> Value {
    send_as(server, method, params, true, None).await
}

async fn start(server: &Server, tool: &str) -> String {
    let r = send(server, "tools/call", json!({"name": tool, "arguments": {}})).await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    r["result"]["taskId"].as_str().unwrap().to_owned()
}

/// Poll until `done(task)` holds, yielding to the task's work between
/// polls.
async fn poll(server: &Server, task: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100_000 {
        let r = send(server, "tasks/get", json!({"taskId": task})).await;
        if done(&r["result"]) {
            return r["result"].clone();
        }
        tokio::task::yield_now().await;
    }
    panic!("task {task} never got there");
}

/// Poll until the task reaches `status` or a terminal one.
async fn poll_until(server: &Server, task: &str, status: &str) -> Value {
    poll(server, task, |t| {
        let now = t["status"].as_str().unwrap_or_default();
        now == status || ["completed", "failed", "cancelled"].contains(&now)
    })
    .await
}

/// Start `forever` for `who`.
async fn forever_as(server: &Server, who: &str) -> Value {
    let call = json!({"name": "forever", "arguments": {}});
    send_as(server, "tools/call", call, true, Some(who)).await
}

/// A plain call still gets its answer.
async fn still_serves(server: &Server) {
    let r = send(
        server,
        "tools/call",
        json!({"name": "plain", "arguments": {}}),
    )
    .await;
    assert_eq!(r["result"]["content"][0]["text"], "plain", "{r}");
}

fn assert_code(r: &Value, code: i64, says: &str) {
    assert_eq!(r["error"]["code"], code, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(says), "{r}");
}

#[tokio::test]
async fn a_declaring_client_gets_a_task_and_polls_it_to_its_result() {
    let f = fixture(ServerConfig::default());
    let r = send(
        &f.server,
        "tools/call",
        json!({"name": "gate", "arguments": {}}),
    )
    .await;
    let created = &r["result"];
    assert_eq!(created["resultType"], "task");
    assert_eq!(created["status"], "working");
    assert_eq!(created["ttlMs"], 3_600_000);
    assert_eq!(created["pollIntervalMs"], 500);
    assert!(created.get("result").is_none() && created.get("requestState").is_none());
    let id = created["taskId"].as_str().unwrap();
    assert!(id.len() >= 32, "ids are long random strings: {id}");
    // Durable before the answer: an immediate poll finds it.
    let now = send(&f.server, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(now["result"]["resultType"], "complete");
    assert_eq!(now["result"]["taskId"], id);
    // Progress shows as the status message.
    let halfway = poll(&f.server, id, |t| t["statusMessage"] == "halfway").await;
    assert_eq!(halfway["status"], "working");
    f.release.notify_one();
    let done = poll_until(&f.server, id, "completed").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"]["content"][0]["text"], "released");
    assert!(done.get("error").is_none());
    // Kept after completion, and the server still serves.
    let again = send(&f.server, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(again["result"]["status"], "completed");
    still_serves(&f.server).await;
}

#[tokio::test]
async fn without_the_extension_calls_answer_in_the_request_or_need_it() {
    let f = fixture(ServerConfig::default());
    f.release.notify_one();
    let sync = send_as(
        &f.server,
        "tools/call",
        json!({"name": "gate", "arguments": {}}),
        false,
        None,
    )
    .await;
    assert_eq!(sync["result"]["resultType"], "complete", "{sync}");
    assert_eq!(sync["result"]["content"][0]["text"], "released");
    let needs = send_as(
        &f.server,
        "tools/call",
        json!({"name": "only_task", "arguments": {}}),
        false,
        None,
    )
    .await;
    assert_code(&needs, -32021, "runs only as a task");
    assert_eq!(
        needs["error"]["data"]["requiredCapabilities"]["extensions"][TASKS],
        json!({})
    );
    // The tasks methods need the extension too.
    for (method, params) in [
        ("tasks/get", json!({"taskId": "x"})),
        ("tasks/update", json!({"taskId": "x", "inputResponses": {}})),
        ("tasks/cancel", json!({"taskId": "x"})),
    ] {
        let r = send_as(&f.server, method, params, false, None).await;
        assert_code(&r, -32021, TASKS);
    }
    // A legacy `task` hint never makes a plain tool a task.
    let hinted = send(
        &f.server,
        "tools/call",
        json!({"name": "plain", "arguments": {}, "task": {"ttl": 1000}}),
    )
    .await;
    assert_eq!(hinted["result"]["resultType"], "complete");
    // Still serving.
    let ok = send(
        &f.server,
        "tools/call",
        json!({"name": "only_task", "arguments": {}}),
    )
    .await;
    assert_eq!(ok["result"]["resultType"], "task");
}

#[tokio::test]
async fn bad_task_requests_get_specific_errors() {
    let f = fixture(ServerConfig::default());
    let unknown = send(&f.server, "tasks/get", json!({"taskId": "task-nope"})).await;
    assert_code(&unknown, -32602, "Task not found");
    let unknown = send(&f.server, "tasks/cancel", json!({"taskId": "task-nope"})).await;
    assert_code(&unknown, -32602, "Task not found");
    let unknown = send(
        &f.server,
        "tasks/update",
        json!({"taskId": "task-nope", "inputResponses": {}}),
    )
    .await;
    assert_code(&unknown, -32602, "Task not found");
    let malformed = send(&f.server, "tasks/get", json!({"taskId": 5})).await;
    assert_code(&malformed, -32602, "Invalid tasks/get params");
    let malformed = send(
        &f.server,
        "tasks/update",
        json!({"taskId": "x", "inputResponses": []}),
    )
    .await;
    assert_code(&malformed, -32602, "Invalid tasks/update params");
    for removed in ["tasks/result", "tasks/list"] {
        let r = send(&f.server, removed, json!({"taskId": "x"})).await;
        assert_code(&r, -32601, removed);
    }
    // A server whose tools never run as tasks does not offer the methods,
    // nor advertise the extension.
    let plain = Server::builder("plain", "1")
        .tool(ToolDef::new("p").handler(|| async { Ok("p") }))
        .build()
        .unwrap();
    let r = send(&plain, "tasks/get", json!({"taskId": "x"})).await;
    assert_code(&r, -32601, "tasks/get");
    let d = send(&plain, "server/discover", json!({})).await;
    assert!(
        d["result"]["capabilities"].get("extensions").is_none(),
        "{d}"
    );
    let d = send(&f.server, "server/discover", json!({})).await;
    assert_eq!(d["result"]["capabilities"]["extensions"][TASKS], json!({}));
    // Still serving.
    still_serves(&f.server).await;
}

#[tokio::test]
async fn input_parks_the_task_until_every_answer_arrives() {
    let f = fixture(ServerConfig::default());
    let id = start(&f.server, "ask").await;
    let parked = poll_until(&f.server, &id, "input_required").await;
    assert_eq!(parked["status"], "input_required");
    assert_eq!(
        parked["inputRequests"]["ok"]["method"],
        "elicitation/create"
    );
    // Answers to keys never asked are ignored, and acknowledged.
    let stray = send(
        &f.server,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"other": {"action": "accept", "content": {}}}}),
    )
    .await;
    assert_eq!(stray["result"]["resultType"], "complete", "{stray}");
    assert!(stray["result"].get("taskId").is_none());
    let still = send(&f.server, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(still["result"]["status"], "input_required");
    let ack = send(&f.server, "tasks/update", json!({"taskId": id, "inputResponses": {"ok": {"action": "accept", "content": {"ok": true}}}})).await;
    assert_eq!(ack["result"]["resultType"], "complete");
    let done = poll_until(&f.server, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "ok=true", "{done}");
    // A late answer to an answered key changes nothing.
    let late = send(
        &f.server,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"ok": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(late["result"]["resultType"], "complete");
    let after = send(&f.server, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(after["result"]["result"]["content"][0]["text"], "ok=true");
}

#[tokio::test]
async fn cancel_stops_the_work_and_is_idempotent() {
    let f = fixture(ServerConfig::default());
    let id = start(&f.server, "forever").await;
    let ack = send(&f.server, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    for field in ["taskId", "status", "result", "error"] {
        assert!(ack["result"].get(field).is_none(), "{ack}");
    }
    let settled = poll_until(&f.server, &id, "cancelled").await;
    assert_eq!(settled["status"], "cancelled");
    assert!(settled.get("result").is_none());
    assert_eq!(
        f.stopped.load(Ordering::SeqCst),
        1,
        "the handler was stopped"
    );
    let again = send(&f.server, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(again["result"]["resultType"], "complete");
    // A finished task is not cancelled after the fact.
    f.release.notify_one();
    let done_id = start(&f.server, "gate").await;
    let done = poll_until(&f.server, &done_id, "completed").await;
    assert_eq!(done["status"], "completed");
    send(&f.server, "tasks/cancel", json!({"taskId": done_id})).await;
    let still = send(&f.server, "tasks/get", json!({"taskId": done_id})).await;
    assert_eq!(still["result"]["status"], "completed");
}

#[tokio::test]
async fn protocol_errors_fail_the_task_and_tool_errors_complete_it() {
    let f = fixture(ServerConfig::default());
    let id = start(&f.server, "boom").await;
    let failed = poll_until(&f.server, &id, "failed").await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], -32603);
    assert!(failed.get("result").is_none());
    let id = start(&f.server, "fails").await;
    let completed = poll_until(&f.server, &id, "completed").await;
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["result"]["isError"], true);
    assert_eq!(
        completed["result"]["content"][0]["text"],
        "the input file is empty"
    );
    assert!(completed.get("error").is_none());
}

/// The frames of a `subscriptions/listen` stream, as JSON.
struct Listen(toolgate_server::transport::Exchange);

impl Listen {
    async fn open(server: &Server, task_ids: Vec<String>, ext: bool) -> Result<Self, Value> {
        let message = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": task_ids}, "_meta": meta(ext)}});
        match server.handle_message(
            &serde_json::to_vec(&message).unwrap(),
            &TransportContext::default(),
        ) {
            Reply::Streaming(exchange) => Ok(Self(exchange)),
            Reply::Done(frame) => Err(serde_json::from_slice(frame.bytes()).unwrap()),
            Reply::Nothing => panic!("no reply"),
        }
    }

    async fn next(&mut self) -> Value {
        let frame = self.0.next().await.expect("a frame");
        serde_json::from_slice(frame.bytes()).unwrap()
    }
}

#[tokio::test]
async fn listen_streams_the_state_of_the_callers_tasks() {
    let f = fixture(ServerConfig::default());
    let id = start(&f.server, "gate").await;
    let refused = Listen::open(&f.server, vec![id.clone()], false)
        .await
        .err()
        .expect("an error");
    assert_code(&refused, -32021, TASKS);
    let mut stream = Listen::open(&f.server, vec![id.clone(), "task-unknown".into()], true)
        .await
        .unwrap_or_else(|e| panic!("no stream: {e}"));
    let ack = stream.next().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id]),
        "{ack}"
    );
    let first = stream.next().await;
    assert_eq!(first["method"], "notifications/tasks");
    assert_eq!(first["params"]["taskId"], id);
    assert_eq!(
        first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    f.release.notify_one();
    loop {
        let note = stream.next().await;
        assert_eq!(note["method"], "notifications/tasks");
        if note["params"]["status"] == "completed" {
            assert_eq!(note["params"]["result"]["content"][0]["text"], "released");
            break;
        }
    }
}

#[tokio::test]
async fn another_callers_task_does_not_exist_for_them() {
    let f = fixture(ServerConfig::default());
    let r = forever_as(&f.server, "alice").await;
    let id = r["result"]["taskId"].as_str().unwrap().to_owned();
    for who in [Some("bob"), None] {
        let get = send_as(&f.server, "tasks/get", json!({"taskId": id}), true, who).await;
        assert_code(&get, -32602, "Task not found");
        let cancel = send_as(&f.server, "tasks/cancel", json!({"taskId": id}), true, who).await;
        assert_code(&cancel, -32602, "Task not found");
    }
    let mine = send_as(
        &f.server,
        "tasks/get",
        json!({"taskId": id}),
        true,
        Some("alice"),
    )
    .await;
    assert_eq!(mine["result"]["status"], "working");
    send_as(
        &f.server,
        "tasks/cancel",
        json!({"taskId": id}),
        true,
        Some("alice"),
    )
    .await;
}

#[tokio::test]
async fn a_caller_over_its_task_share_is_told_to_wait() {
    let config = ServerConfig::default().with_max_tasks_per_caller(1);
    let f = fixture(config);
    let first = forever_as(&f.server, "alice").await;
    assert_eq!(first["result"]["resultType"], "task");
    let second = forever_as(&f.server, "alice").await;
    assert_eq!(second["result"]["isError"], true, "{second}");
    let text = second["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("as many tasks as it may (1)"), "{text}");
    // Another caller has a share of its own.
    let other = forever_as(&f.server, "bob").await;
    assert_eq!(other["result"]["resultType"], "task");
}

#[tokio::test]
async fn an_expired_task_is_gone_and_its_work_stopped() {
    let config = ServerConfig::default().with_task_ttl(Some(std::time::Duration::from_millis(1)));
    let f = fixture(config);
    let r = send(
        &f.server,
        "tools/call",
        json!({"name": "forever", "arguments": {}}),
    )
    .await;
    assert_eq!(r["result"]["ttlMs"], 1);
    let id = r["result"]["taskId"].as_str().unwrap().to_owned();
    // Poll until the lifetime has passed (a millisecond of wall clock).
    let gone = loop {
        let r = send(&f.server, "tasks/get", json!({"taskId": id})).await;
        if r.get("error").is_some() {
            break r;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let message = gone["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("expired") || message.contains("not found"),
        "{message}"
    );
    for _ in 0..100_000 {
        if f.stopped.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(f.stopped.load(Ordering::SeqCst), 1, "the work stopped");
    // The server serves on, and the expired task no longer counts.
    still_serves(&f.server).await;
}
