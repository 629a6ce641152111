//! The client against toolgate servers and hostile mock servers over HTTP.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{
    Approval, ApprovalRequest, BoxFuture, CallOptions, Client, ClientError, InputHandler, Risk,
};
use toolgate_server::protocol::types::ClientCapabilities;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{RequestContext, Server, Structured, ToolDef, ToolError};

#[derive(Deserialize, JsonSchema)]
struct Route {
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: String,
}

#[derive(Serialize, JsonSchema)]
struct Count {
    count: u32,
}

async fn serve(server: Server) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_listener(server, HttpConfig::default(), listener));
    url
}

fn toolgate_server(calls: Arc<AtomicUsize>) -> Server {
    let slow_calls = calls.clone();
    Server::builder("s", "1")
        .tool(ToolDef::new("route").description("Mirrored region").read_only().handler(|a: Route| async move {
            Ok(format!("routed to {}", a.region))
        }))
        .tool(ToolDef::new("count").description("Structured").handler(|| async {
            Ok(Structured(Count { count: 3 }))
        }))
        .tool(ToolDef::new("fail").description("Fails").handler(|| async {
            Err::<String, _>(ToolError::new("upstream said no"))
        }))
        .tool(ToolDef::new("slow").description("Slow").handler(move |ctx: RequestContext| {
            let calls = slow_calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                ctx.progress(1.0, None, Some("working")).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok("late")
            }
        }))
        .tool(ToolDef::new("ask").description("Asks the user").handler(|ctx: RequestContext| async move {
            let mut input = ctx.inputs();
            let form = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
            let Some(answer) = input.elicit("name", "Name?", form)? else { return Err(input.ask()) };
            Ok(format!("hi {}", answer.content.unwrap()["name"].as_str().unwrap()))
        }))
        .build()
        .unwrap()
}

fn client(url: &str) -> Client {
    Client::builder("test", "1")
        .timeout(Duration::from_secs(5))
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[tokio::test]
async fn lists_calls_mirrors_headers_and_separates_error_kinds() {
    let url = serve(toolgate_server(Arc::default())).await;
    let c = client(&url);
    let info = c.discover().await.unwrap();
    assert_eq!(info.supported_versions, ["2026-07-28"]);
    let names: Vec<String> = c
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["route", "count", "fail", "slow", "ask"]);
    // The server refuses a missing or wrong Mcp-Param-Region, so success
    // proves the header was mirrored, including Base64 for non-ASCII.
    for region in ["us-west1", "Zürich", " padded "] {
        let r = c
            .call_tool(
                "route",
                args(json!({"region": region})),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            r.content[0].as_text().unwrap(),
            format!("routed to {region}")
        );
    }
    let r = c
        .call_tool("count", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"count": 3})));
    match c
        .call_tool("fail", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::Tool { text, .. }) => assert!(text.contains("upstream said no")),
        other => panic!("{other:?}"),
    }
    match c
        .call_tool("nope", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::UnknownTool(name)) => assert_eq!(name, "nope"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn timeouts_cancel_the_call_and_report_progress() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = serve(toolgate_server(calls.clone())).await;
    let c = client(&url);
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let options = CallOptions {
        timeout: Some(Duration::from_millis(300)),
        progress: Some(Arc::new(move |_p| {
            counter.fetch_add(1, Ordering::SeqCst);
        })),
        ..Default::default()
    };
    match c.call_tool("slow", Map::new(), &options).await {
        Err(ClientError::Timeout(d)) => assert_eq!(d, Duration::from_millis(300)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "progress reached the callback"
    );
    // Other calls are unaffected.
    assert!(
        c.call_tool("count", Map::new(), &CallOptions::default())
            .await
            .is_ok()
    );
}

struct Answers;

impl InputHandler for Answers {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        request: toolgate_protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>> {
        assert_eq!(request.message, "Name?");
        Box::pin(async {
            Ok(
                serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada"}}))
                    .unwrap(),
            )
        })
    }
}

#[tokio::test]
async fn input_rounds_are_driven_through_the_handler() {
    let url = serve(toolgate_server(Arc::default())).await;
    let c = Client::builder("test", "1")
        .input_handler(Answers)
        .build(HttpTransport::new(&url, HttpOptions::default()).unwrap());
    let r = c
        .call_tool("ask", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("hi Ada"));
    // Without a handler, the server's -32021 comes back as a protocol error.
    match client(&url)
        .call_tool("ask", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::Protocol(e)) => assert_eq!(e.code, -32021),
        other => panic!("{other:?}"),
    }
}

struct Deny(Arc<AtomicUsize>);

impl Approval for Deny {
    fn approve(&self, request: &ApprovalRequest<'_>) -> BoxFuture<'_, bool> {
        // Untrusted server: annotations are ignored.
        assert_eq!(request.risk, Risk::Destructive);
        assert!(request.open_world);
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { false })
    }
}

#[tokio::test]
async fn a_denied_call_is_never_sent() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = serve(toolgate_server(calls.clone())).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let c = Client::builder("test", "1")
        .approval(Deny(asked.clone()))
        .build(HttpTransport::new(&url, HttpOptions::default()).unwrap());
    assert!(matches!(
        c.call_tool("slow", Map::new(), &CallOptions::default())
            .await,
        Err(ClientError::Denied(_))
    ));
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler never ran");
}

/// How the mock answers a request: status and body.
type Answer = Arc<dyn Fn(&Value) -> (u16, String) + Send + Sync>;

/// A mock server answering by method; counts requests per method.
#[derive(Clone)]
struct Mock {
    hits: Arc<std::sync::Mutex<Vec<String>>>,
    answer: Answer,
}

async fn mock(answer: impl Fn(&Value) -> (u16, String) + Send + Sync + 'static) -> (String, Mock) {
    let state = Mock {
        hits: Arc::default(),
        answer: Arc::new(answer),
    };
    async fn handle(State(m): State<Mock>, body: axum::body::Bytes) -> axum::response::Response {
        let request: Value = serde_json::from_slice(&body).unwrap();
        m.hits
            .lock()
            .unwrap()
            .push(request["method"].as_str().unwrap_or("").to_owned());
        let (status, body) = (m.answer)(&request);
        axum::response::Response::builder()
            .status(status)
            .header(
                "content-type",
                if body.starts_with('{') {
                    "application/json"
                } else if body.starts_with("data:") || body.starts_with(':') {
                    "text/event-stream"
                } else {
                    "text/html"
                },
            )
            .body(axum::body::Body::from(body))
            .unwrap()
    }
    let app = axum::Router::new()
        .route("/mcp", post(handle))
        .with_state(state.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, state)
}

fn result(request: &Value, result: Value) -> (u16, String) {
    (
        200,
        json!({"jsonrpc": "2.0", "id": request["id"], "result": result}).to_string(),
    )
}

#[tokio::test]
async fn hostile_servers_get_clear_errors() {
    let (url, m) = mock(|r| match r["method"].as_str().unwrap() {
        "tools/list" => result(r, json!({"resultType": "complete", "ttlMs": 60000, "cacheScope": "public", "tools": [
            {"name": "good", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
            {"name": "bad_header", "inputSchema": {"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}}},
            {"name": "html", "inputSchema": {"type": "object"}},
            {"name": "loop", "inputSchema": {"type": "object"}}
        ]})),
        "tools/call" => match r["params"]["name"].as_str().unwrap() {
            "good" => result(r, json!({"resultType": "complete", "content": [], "structuredContent": {"n": "nope"}})),
            "html" => (200, "<html>oops</html>".into()),
            _ => result(r, json!({"resultType": "input_required", "requestState": "s"})),
        },
        _ => (404, json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32601, "message": "nope"}}).to_string()),
    })
    .await;
    let c = client(&url);
    let names: Vec<String> = c
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        ["good", "html", "loop"],
        "the tool with an invalid x-mcp-header is excluded"
    );
    match c
        .call_tool("good", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::OutputSchema { tool, violations }) => {
            assert_eq!(tool, "good");
            assert_eq!(violations[0].pointer, "/n");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.call_tool("html", Map::new(), &CallOptions::default())
            .await,
        Err(ClientError::InvalidResponse(_))
    ));
    assert!(matches!(
        c.call_tool("loop", Map::new(), &CallOptions::default())
            .await,
        Err(ClientError::TooManyRounds(10))
    ));
    // The list was served from the cache (ttl 60 s) every time.
    let lists = m
        .hits
        .lock()
        .unwrap()
        .iter()
        .filter(|h| *h == "tools/list")
        .count();
    assert_eq!(lists, 1);
    c.invalidate("tools/list");
    c.list_tools().await.unwrap();
    assert_eq!(
        m.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|h| *h == "tools/list")
            .count(),
        2
    );
}

#[tokio::test]
async fn a_list_changed_notification_invalidates_the_cache_at_once() {
    let server = toolgate_server(Arc::default());
    let url = serve(server.clone()).await;
    let c = client(&url);
    assert_eq!(c.list_tools().await.unwrap().len(), 5);
    let _watch = c.watch_tools();
    tokio::time::sleep(Duration::from_millis(200)).await;
    server
        .add_tool(
            ToolDef::new("late")
                .description("Added at run time")
                .handler(|| async { Ok("here") }),
        )
        .unwrap();
    let mut seen = false;
    for _ in 0..100 {
        if c.list_tools()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "late")
        {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen, "the cached list (ttl 5 min) was not invalidated");
}

#[tokio::test]
async fn several_servers_share_one_namespace_without_shadowing() {
    use toolgate_client::{MultiClient, MultiError};
    let (a, b) = (
        serve(toolgate_server(Arc::default())).await,
        serve(toolgate_server(Arc::default())).await,
    );
    let multi = MultiClient::new([
        ("shop".to_owned(), client(&a)),
        ("ops".to_owned(), client(&b)),
    ])
    .unwrap();
    let (tools, failures) = multi.list_tools().await;
    assert!(failures.is_empty());
    let names: Vec<&str> = tools.iter().map(|t| t.qualified_name.as_str()).collect();
    assert!(
        names.contains(&"shop.count") && names.contains(&"ops.count"),
        "{names:?}"
    );
    let r = multi
        .call_tool("ops.count", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"count": 3})));
    assert!(matches!(
        multi
            .call_tool("count", Map::new(), &CallOptions::default())
            .await,
        Err(ClientError::UnknownTool(_))
    ));
    assert!(matches!(
        multi
            .call_tool("nope.count", Map::new(), &CallOptions::default())
            .await,
        Err(ClientError::UnknownTool(_))
    ));
    assert!(matches!(
        MultiClient::new([("a.b".to_owned(), client(&a))]),
        Err(MultiError::BadPrefix(_))
    ));
    assert!(matches!(
        MultiClient::new([("x".to_owned(), client(&a)), ("x".to_owned(), client(&b))]),
        Err(MultiError::DuplicatePrefix(_))
    ));
}

#[tokio::test]
async fn a_qualified_name_too_long_is_shortened_as_the_gateway_does_and_still_calls() {
    use toolgate_client::MultiClient;
    let long = "l".repeat(125);
    let server = Server::builder("long", "1")
        .tool(
            ToolDef::new(long.clone())
                .description("Answers ok.")
                .handler(|| async { "ok" }),
        )
        .build()
        .unwrap();
    let url = serve(server).await;
    let multi = MultiClient::new([("shop".to_owned(), client(&url))]).unwrap();
    let (tools, failures) = multi.list_tools().await;
    assert!(failures.is_empty());
    let name = &tools[0].qualified_name;
    assert_eq!(name, &toolgate_protocol::names::qualify("shop", &long));
    assert_eq!(name.len(), 128, "{name}");
    assert!(!name.ends_with('l'), "shortened with a hash: {name}");
    let answer = multi
        .call_tool(name, Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(answer.content[0].as_text(), Some("ok"));
}

#[tokio::test]
async fn header_mismatch_relists_and_retries_once_and_stale_lists_survive_outages() {
    let calls = Arc::new(AtomicUsize::new(0));
    let lists = Arc::new(AtomicUsize::new(0));
    let (c2, l2) = (calls.clone(), lists.clone());
    let (url, _m) = mock(move |r| match r["method"].as_str().unwrap() {
        "tools/list" => {
            // The first listing succeeds (immediately stale); later ones fail.
            if l2.fetch_add(1, Ordering::SeqCst) == 0 {
                result(r, json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                    "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}))
            } else {
                (500, "upstream down".into())
            }
        }
        "tools/call" => {
            if c2.fetch_add(1, Ordering::SeqCst) == 0 {
                (400, json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32020, "message": "Header mismatch"}}).to_string())
            } else {
                result(r, json!({"resultType": "complete", "content": [{"type": "text", "text": "second time lucky"}]}))
            }
        }
        _ => (404, json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32601, "message": "nope"}}).to_string()),
    })
    .await;
    let c = client(&url);
    let r = c
        .call_tool("t", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("second time lucky"));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "retried exactly once");
    assert!(
        lists.load(Ordering::SeqCst) >= 2,
        "re-listed after the mismatch"
    );
    // The server now fails to list; the stale page is served.
    let tools = c.list_tools().await.unwrap();
    assert_eq!(tools[0].name, "t");
}

fn no_such_method(r: &Value) -> (u16, String) {
    let error =
        json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32601, "message": "nope"}});
    (404, error.to_string())
}

fn lists(m: &Mock) -> usize {
    m.hits
        .lock()
        .unwrap()
        .iter()
        .filter(|h| *h == "tools/list")
        .count()
}

fn limited(url: &str, limits: toolgate_client::transport::Limits) -> Client {
    let options = HttpOptions {
        limits,
        ..HttpOptions::default()
    };
    Client::builder("test", "1")
        .name("mock")
        .max_pages(5)
        .timeout(Duration::from_secs(5))
        .build(HttpTransport::new(url, options).unwrap())
}

fn limit_of(outcome: Result<impl std::fmt::Debug, ClientError>) -> &'static str {
    match outcome {
        Err(ClientError::LimitExceeded { limit, .. }) => limit,
        other => panic!("expected a limit error, got {other:?}"),
    }
}

#[tokio::test]
async fn nothing_a_server_sends_exhausts_the_client() {
    let tools = json!([{"name": "big", "inputSchema": {"type": "object"}},
                       {"name": "chatty", "inputSchema": {"type": "object"}},
                       {"name": "fine", "inputSchema": {"type": "object"}}]);
    let (url, _m) = mock(move |r| match r["method"].as_str().unwrap() {
        "tools/list" => result(r, json!({"resultType": "complete", "tools": tools})),
        "tools/call" => match r["params"]["name"].as_str().unwrap() {
            "big" => result(r, json!({"resultType": "complete", "content": [{"type": "text", "text": "b".repeat(4096)}]})),
            "chatty" => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}});
                let mut body = format!("data: {note}\n\n").repeat(10);
                body.push_str(&format!("data: {}\n\n", result(r, json!({"resultType": "complete", "content": []})).1));
                (200, body)
            }
            _ => result(r, json!({"resultType": "complete", "content": [{"type": "text", "text": "ok"}]})),
        },
        _ => no_such_method(r),
    })
    .await;
    let limits = toolgate_client::transport::Limits {
        max_message_bytes: 2048,
        max_events_per_response: 5,
        ..Default::default()
    };
    let c = limited(&url, limits);
    let big = c
        .call_tool("big", Map::new(), &CallOptions::default())
        .await;
    let message = big.as_ref().map(|_| ()).unwrap_err().to_string();
    assert!(
        message.contains(&url) && message.contains("max_message_bytes"),
        "{message}"
    );
    assert_eq!(limit_of(big), "max_message_bytes");
    let chatty = c
        .call_tool("chatty", Map::new(), &CallOptions::default())
        .await;
    assert_eq!(limit_of(chatty), "max_events_per_response");
    // The client still serves.
    let fine = c
        .call_tool("fine", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(fine.content[0].as_text(), Some("ok"));
    // The same tools under the default limits work.
    let c = client(&url);
    assert!(
        c.call_tool("big", Map::new(), &CallOptions::default())
            .await
            .is_ok()
    );
    assert!(
        c.call_tool("chatty", Map::new(), &CallOptions::default())
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_server_cannot_keep_the_client_paging() {
    let page = |r: &Value, next: Value| {
        if r["method"] != "tools/list" {
            return no_such_method(r);
        }
        result(
            r,
            json!({"resultType": "complete", "tools": [{"name": "t", "inputSchema": {"type": "object"}}], "nextCursor": next}),
        )
    };
    // The same cursor again: a loop.
    let (url, _m) = mock(move |r| page(r, json!("again"))).await;
    let err = limited(&url, Default::default())
        .list_tools()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("returned a cursor it had returned before"),
        "{err}"
    );
    // New cursors forever: the page cap.
    let n = Arc::new(AtomicUsize::new(0));
    let (url, m) =
        mock(move |r| page(r, json!(format!("c{}", n.fetch_add(1, Ordering::SeqCst))))).await;
    assert_eq!(
        limit_of(limited(&url, Default::default()).list_tools().await),
        "max_pages"
    );
    assert_eq!(lists(&m), 5);
    // A cursor invalidated every time: one restart, then an error.
    let (url, m) = mock(move |r| {
        if r["method"] == "tools/list" && r["params"].get("cursor").is_some() {
            (200, json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32602, "message": "Invalid cursor"}}).to_string())
        } else {
            page(r, json!("c"))
        }
    })
    .await;
    let err = limited(&url, Default::default())
        .list_tools()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("invalidated its cursor again"),
        "{err}"
    );
    assert_eq!(lists(&m), 4, "two pages, twice");
}

#[tokio::test]
async fn a_silent_http_server_is_a_timeout_not_a_legacy_server() {
    // Every request is recorded and never answered.
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let recorded = seen.clone();
    let app = axum::Router::new().route(
        "/mcp",
        post(move |body: axum::body::Bytes| {
            let recorded = recorded.clone();
            async move {
                let request: Value = serde_json::from_slice(&body).unwrap();
                recorded
                    .lock()
                    .unwrap()
                    .push(request["method"].as_str().unwrap_or("").to_owned());
                std::future::pending::<()>().await;
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let c = Client::builder("test", "1")
        .timeout(Duration::from_millis(300))
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    assert!(matches!(c.list_tools().await, Err(ClientError::Timeout(_))));
    assert_eq!(
        *seen.lock().unwrap(),
        ["server/discover"],
        "no initialize after a timeout"
    );
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_and_names_the_cause() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let c = client(&url);
    match c.list_tools().await {
        Err(ClientError::Unreachable { message: m, .. }) => {
            assert!(
                m.contains(&url) && m.to_lowercase().contains("refused"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn hostile_task_servers_get_clear_errors() {
    let task = |id: &str, status: &str| {
        json!({"resultType": "complete", "taskId": id, "status": status, "createdAt": "2026-12-01T00:00:00Z",
               "lastUpdatedAt": "2026-12-01T00:00:00Z", "ttlMs": 60000, "pollIntervalMs": 1})
    };
    let (url, m) = mock(move |r| match r["method"].as_str().unwrap() {
        "tools/list" => result(
            r,
            json!({"resultType": "complete", "ttlMs": 60000, "cacheScope": "public", "tools": [
                {"name": "empty", "inputSchema": {"type": "object"}},
                {"name": "garbled", "inputSchema": {"type": "object"}}
            ]}),
        ),
        "tools/call" => {
            let id = r["params"]["name"].as_str().unwrap();
            let mut created = task(id, "working");
            created["resultType"] = json!("task");
            result(r, created)
        }
        "tasks/get" => match r["params"]["taskId"].as_str().unwrap() {
            // Completed, but with nothing to show for it.
            "empty" => result(r, task("empty", "completed")),
            _ => result(r, task("garbled", "exploded")),
        },
        _ => (
            404,
            json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32601, "message": "nope"}})
                .to_string(),
        ),
    })
    .await;
    // A task for a client that never declared the extension is invalid.
    let undeclared = client(&url);
    match undeclared
        .call_tool("empty", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::InvalidResponse(why)) => assert!(why.contains("\"task\""), "{why}"),
        other => panic!("{other:?}"),
    }
    let c = Client::builder("test", "1")
        .timeout(Duration::from_secs(5))
        .tasks()
        .build(HttpTransport::new(&url, HttpOptions::default()).unwrap());
    match c
        .call_tool("empty", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::InvalidResponse(why)) => assert!(why.contains("no result"), "{why}"),
        other => panic!("{other:?}"),
    }
    match c
        .call_tool("garbled", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::InvalidResponse(why)) => assert!(why.contains("tasks/get"), "{why}"),
        other => panic!("{other:?}"),
    }
    // The client polled the task rather than giving up at once.
    assert!(m.hits.lock().unwrap().iter().any(|h| h == "tasks/get"));
}

#[tokio::test]
async fn a_task_is_followed_across_failed_polls() {
    let polls = Arc::new(AtomicUsize::new(0));
    let seen = polls.clone();
    let (url, _) = mock(move |r| match r["method"].as_str().unwrap() {
        "tools/list" => result(r, json!({"resultType": "complete", "ttlMs": 60000, "cacheScope": "public", "tools": [
            {"name": "slow", "inputSchema": {"type": "object"}}
        ]})),
        "tools/call" => result(r, json!({"resultType": "task", "taskId": "t1", "status": "working",
            "createdAt": "2026-12-01T00:00:00Z", "lastUpdatedAt": "2026-12-01T00:00:00Z", "ttlMs": 60000, "pollIntervalMs": 1})),
        // The first polls meet a proxy whose upstream is restarting.
        "tasks/get" if seen.fetch_add(1, Ordering::SeqCst) < 3 => (503, "<html>restarting</html>".into()),
        "tasks/get" => result(r, json!({"resultType": "complete", "taskId": "t1", "status": "completed",
            "createdAt": "2026-12-01T00:00:00Z", "lastUpdatedAt": "2026-12-01T00:00:01Z", "ttlMs": 60000,
            "result": {"content": [{"type": "text", "text": "done"}]}})),
        _ => (404, json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32601, "message": "nope"}}).to_string()),
    })
    .await;
    let c = Client::builder("test", "1")
        .tasks()
        .build(HttpTransport::new(&url, HttpOptions::default()).unwrap());
    let r = c
        .call_tool("slow", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("done"));
    assert_eq!(polls.load(Ordering::SeqCst), 4);
}

/// What a server with the one tool `echo` answers to `r`: its list, its
/// result, and "method not found" for anything else.
fn echo_answer(r: &Value) -> (u16, String) {
    match r["method"].as_str().unwrap() {
        "tools/list" => result(
            r,
            json!({"resultType": "complete", "ttlMs": 60000, "cacheScope": "public",
            "tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
        ),
        "tools/call" => result(
            r,
            json!({"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}),
        ),
        _ => (
            404,
            json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32601, "message": "nope"}})
                .to_string(),
        ),
    }
}

/// An answer to every request: `tools/list` lists `echo`, `tools/call`
/// answers it, and the response says `Connection: close` while `close` is
/// set. Also the number of connections the server accepted.
async fn counted(close: Arc<std::sync::atomic::AtomicBool>) -> (String, Arc<AtomicUsize>) {
    use axum::serve::ListenerExt as _;
    async fn handle(
        State(close): State<Arc<std::sync::atomic::AtomicBool>>,
        body: axum::body::Bytes,
    ) -> axum::response::Response {
        let r: Value = serde_json::from_slice(&body).unwrap();
        let (status, answer) = echo_answer(&r);
        let mut response = axum::response::Response::builder()
            .status(status)
            .header("content-type", "application/json");
        if close.load(Ordering::SeqCst) {
            response = response.header("connection", "close");
        }
        response.body(axum::body::Body::from(answer)).unwrap()
    }
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    let app = axum::Router::new()
        .route("/mcp", post(handle))
        .with_state(close);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let listener = listener.tap_io(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, accepted)
}

#[tokio::test]
async fn calls_share_a_connection_and_one_the_server_closes_is_not_reused() {
    let close = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (url, accepted) = counted(close.clone()).await;
    let c = client(&url);
    for _ in 0..4 {
        let result = c
            .call_tool("echo", Map::new(), &CallOptions::default())
            .await
            .unwrap();
        assert_eq!(result.content.len(), 1);
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one kept-alive connection"
    );
    // Each answer now ends its connection: every call after the first
    // needs a new one, and none fails for meeting a closed one.
    close.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        c.call_tool("echo", Map::new(), &CallOptions::default())
            .await
            .unwrap();
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_response_cut_short_fails_that_call_and_the_next_one_works() {
    // The first answer to a call has a body shorter than it declared, and
    // its connection closes; everything else is answered properly.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let uncut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        loop {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let uncut = uncut.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut seen = Vec::new();
                loop {
                    let n = tcp.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    if seen.len() < end + 4 + length {
                        continue;
                    }
                    let request: Value =
                        serde_json::from_slice(&seen[end + 4..end + 4 + length]).unwrap();
                    seen.drain(..end + 4 + length);
                    let (status, body) = echo_answer(&request);
                    let cut =
                        request["method"] == "tools/call" && !uncut.swap(true, Ordering::SeqCst);
                    let shown = if cut { &body[..10] } else { &body[..] };
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    tcp.write_all(head.as_bytes()).await.unwrap();
                    tcp.write_all(shown.as_bytes()).await.unwrap();
                    if cut {
                        return;
                    }
                }
            });
        }
    });
    let c = client(&url);
    let cut = c
        .call_tool("echo", Map::new(), &CallOptions::default())
        .await;
    assert!(
        matches!(&cut, Err(ClientError::Transport { message: m, .. }) if *m == format!("reading from {url}")),
        "{cut:?}"
    );
    // What failed underneath is the error's source, and shows in its chain.
    let chain = toolgate_protocol::error::with_causes(cut.as_ref().unwrap_err());
    assert!(chain.contains("end of file"), "{chain}");
    let next = c
        .call_tool("echo", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(next.content.len(), 1);
}

#[tokio::test]
async fn an_https_server_whose_certificate_is_not_trusted_is_refused() {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    // Issued by a test CA this machine does not trust.
    let cert =
        CertificateDer::from_pem_slice(include_bytes!("../../../testdata/tls/localhost.crt"))
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("../../../testdata/tls/localhost.key"))
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}/mcp",
        listener.local_addr().unwrap().port()
    );
    let handshake = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        acceptor.accept(tcp).await.map(|_| ())
    });
    let c = client(&url);
    match c
        .call_tool("echo", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::Unreachable { message: m, .. }) => {
            assert!(
                m.contains(&url) && m.to_lowercase().contains("certificate"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    // The client broke off the handshake: nothing was sent in the clear.
    assert!(handshake.await.unwrap().is_err());
}

#[test]
fn a_connection_is_not_lent_to_a_task_its_runtime_cannot_serve() {
    let server = tokio::runtime::Runtime::new().unwrap();
    let (url, accepted) = server.block_on(counted(Arc::default()));
    let c = Arc::new(client(&url));
    let current = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    // A single-threaded runtime calls, then its thread blocks: whatever
    // that runtime runs, its connection included, stands still.
    let (called, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let first = c.clone();
    let blocked = std::thread::spawn(move || {
        let runtime = current();
        runtime
            .block_on(first.call_tool("echo", Map::new(), &CallOptions::default()))
            .unwrap();
        called.0.send(()).unwrap();
        release.1.recv().unwrap();
        drop(runtime);
    });
    called.1.recv().unwrap();
    // Another runtime's call gets a connection of its own, not one it
    // would wait on until the client's timeout.
    let second = current().block_on(c.call_tool("echo", Map::new(), &CallOptions::default()));
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    release.0.send(()).unwrap();
    blocked.join().unwrap();
}

/// A server whose `/mcp` answers every request with `status` and
/// `Location: location`, and whose `/mcp/` and `/elsewhere` serve `echo`.
async fn redirecting(status: u16, location: String) -> String {
    async fn serve_echo(body: axum::body::Bytes) -> axum::response::Response {
        let (status, answer) = echo_answer(&serde_json::from_slice(&body).unwrap());
        axum::response::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(answer))
            .unwrap()
    }
    let redirect = move || {
        let location = location.clone();
        async move {
            axum::response::Response::builder()
                .status(status)
                .header("location", location)
                .body(axum::body::Body::from("moved"))
                .unwrap()
        }
    };
    let app = axum::Router::new()
        .route("/mcp", post(redirect))
        .route("/mcp/", post(serve_echo))
        .route("/elsewhere", post(serve_echo));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn redirects_are_followed_only_within_the_servers_origin() {
    let call = |url: String| async move {
        client(&url)
            .call_tool("echo", Map::new(), &CallOptions::default())
            .await
    };
    // A server mounted at /mcp/, and one that moved: followed, same method and body.
    for (status, location) in [(307, "/mcp/"), (308, "elsewhere")] {
        let url = redirecting(status, location.into()).await;
        let result = call(url).await;
        assert!(result.is_ok(), "{status}: {result:?}");
    }
    // Another origin is never contacted.
    let close = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (other, accepted) = counted(close).await;
    let url = redirecting(307, other.clone()).await;
    match call(url.clone()).await {
        Err(ClientError::Unreachable { message: m, .. }) => assert!(
            m.contains(&url)
                && m.contains("HTTP 307")
                && m.contains(&other)
                && m.contains("origin"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    // A redirect that would turn the POST into a GET is refused too.
    let url = redirecting(302, "/mcp/".into()).await;
    match call(url).await {
        Err(ClientError::Unreachable { message: m, .. }) => assert!(m.contains("HTTP 302"), "{m}"),
        other => panic!("{other:?}"),
    }
    // And a loop ends.
    let url = redirecting(307, "/mcp".into()).await;
    match call(url).await {
        Err(ClientError::Unreachable { message: m, .. }) => {
            assert!(m.contains("more than 5 redirects"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}
