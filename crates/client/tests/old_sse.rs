//! The deprecated HTTP+SSE transport (2024-11-05): detected as the spec's
//! backwards-compatibility section describes, or chosen; requests posted,
//! answers and the server's own requests read from the event stream; a
//! session that ends fails what waits on it.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgate_client::transport::http::{HttpOptions, HttpTransport, SseMode};
use toolgate_client::{BoxFuture, CallOptions, Client, ClientError, InputHandler};
use toolgate_protocol::types::ClientCapabilities;
use toolgate_server::{RequestContext, Server, ToolDef};

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

/// A toolgate server with `add`, `ask` (asks the client a question) and
/// `hang` (says it started on `hung`, then never answers).
fn tools(hung: Arc<tokio::sync::Notify>) -> Server {
    Server::builder("old", "1")
        .tool(
            ToolDef::new("add")
                .description("Adds two integers.")
                .handler(|args: Add| async move { (args.a + args.b).to_string() }),
        )
        .tool(ToolDef::new("ask").description("Asks a name.").handler(
            |_: toolgate_server::NoArgs, ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let form = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
                let Some(answer) = input.elicit("who", "Name?", form)? else {
                    return Err(input.ask());
                };
                let name = answer.content.and_then(|c| c.get("name").cloned()).unwrap_or_default();
                Ok(format!("hi {}", name.as_str().unwrap_or_default()))
            },
        ))
        .tool(ToolDef::new("hang").description("Never answers.").handler(
            move |_: toolgate_server::NoArgs| {
                let hung = hung.clone();
                async move {
                    hung.notify_one();
                    std::future::pending::<()>().await;
                    String::new()
                }
            },
        ))
        .build()
        .unwrap()
}

/// A 2024-11-05 HTTP+SSE server around [`tools`]: `GET /sse` starts a
/// session (the server's stdio loop on a pipe) whose first event is
/// `endpoint`; `POST /messages?session=N` feeds it; each line the server
/// writes is a `message` event.
#[derive(Clone)]
struct OldServer {
    sessions: Arc<Mutex<HashMap<String, mpsc::Sender<Vec<u8>>>>>,
    /// Ends every session's stream.
    end: CancellationToken,
    /// What the endpoint event says (`{id}` is the session).
    endpoint: &'static str,
    /// `POST /sse`: what a client trying Streamable HTTP first sends.
    posts_to_sse: Arc<AtomicUsize>,
    /// A call of `hang` reached the server.
    hung: Arc<tokio::sync::Notify>,
}

#[derive(Deserialize)]
struct SessionQuery {
    session: String,
}

async fn open(
    State(s): State<OldServer>,
) -> Sse<impl futures::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let id = s.sessions.lock().unwrap().len().to_string();
    let (to_server, from_client) = tokio::io::duplex(1 << 20);
    let (to_client, from_server) = tokio::io::duplex(1 << 20);
    tokio::spawn(toolgate_server::transport::stdio::serve_stream(
        tools(s.hung.clone()),
        from_client,
        to_client,
    ));
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let mut to_server = to_server;
        while let Some(mut line) = rx.recv().await {
            line.push(b'\n');
            if to_server.write_all(&line).await.is_err() {
                break;
            }
        }
    });
    s.sessions.lock().unwrap().insert(id.clone(), tx);
    let first = Event::default()
        .event("endpoint")
        .data(s.endpoint.replace("{id}", &id));
    let lines = tokio::io::BufReader::new(from_server).lines();
    let end = s.end.clone();
    let stream = futures::stream::unfold(
        (Some(first), lines, end),
        |(first, mut lines, end)| async move {
            if let Some(first) = first {
                return Some((Ok(first), (None, lines, end)));
            }
            let line = tokio::select! {
                _ = end.cancelled() => return None,
                line = lines.next_line() => line.ok().flatten()?,
            };
            Some((
                Ok(Event::default().event("message").data(line)),
                (None, lines, end),
            ))
        },
    );
    Sse::new(stream)
}

async fn message(
    State(s): State<OldServer>,
    Query(q): Query<SessionQuery>,
    body: axum::body::Bytes,
) -> StatusCode {
    let Some(tx) = s.sessions.lock().unwrap().get(&q.session).cloned() else {
        return StatusCode::NOT_FOUND;
    };
    if tx.send(body.to_vec()).await.is_err() {
        return StatusCode::GONE;
    }
    StatusCode::ACCEPTED
}

async fn start(endpoint: &'static str) -> (String, OldServer) {
    let state = OldServer {
        sessions: Arc::default(),
        end: CancellationToken::new(),
        endpoint,
        posts_to_sse: Arc::default(),
        hung: Arc::default(),
    };
    let counted = state.posts_to_sse.clone();
    let app = Router::new()
        .route(
            "/sse",
            get(open).post(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::METHOD_NOT_ALLOWED }
            }),
        )
        .route("/messages", post(message))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/sse", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, state)
}

struct Ada;

impl InputHandler for Ada {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        _request: toolgate_protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>> {
        Box::pin(async {
            Ok(
                serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada"}}))
                    .unwrap(),
            )
        })
    }
}

fn client(url: &str, sse: SseMode) -> Client {
    let options = HttpOptions {
        sse,
        ..HttpOptions::default()
    };
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(Ada)
        .build(HttpTransport::new(url, options).unwrap())
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[tokio::test]
async fn an_http_sse_server_is_detected_and_serves_calls_and_questions() {
    let (url, server) = start("/messages?session={id}").await;
    let c = client(&url, SseMode::Detect);
    let names: Vec<String> = c
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["add", "ask", "hang"]);
    // Streamable HTTP was tried first, once, as the spec says.
    assert_eq!(server.posts_to_sse.load(Ordering::SeqCst), 1);
    let sum = c
        .call_tool(
            "add",
            args(json!({"a": 2, "b": 3})),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(sum.content[0].as_text(), Some("5"));
    // The server's question arrives on the stream; the answer is posted.
    let hi = c
        .call_tool("ask", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(hi.content[0].as_text(), Some("hi Ada"));
    // Bad arguments are the server's answer, and the session goes on.
    assert!(
        c.call_tool("add", args(json!({"a": "x"})), &CallOptions::default())
            .await
            .is_err()
    );
    let again = c
        .call_tool(
            "add",
            args(json!({"a": 1, "b": 1})),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(again.content[0].as_text(), Some("2"));
    assert_eq!(server.posts_to_sse.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn chosen_it_opens_the_stream_at_once_and_refused_it_is_never_tried() {
    let (url, server) = start("/messages?session={id}").await;
    let only = client(&url, SseMode::Only);
    assert_eq!(only.list_tools().await.unwrap().len(), 3);
    assert_eq!(server.posts_to_sse.load(Ordering::SeqCst), 0);
    let never = client(&url, SseMode::Never);
    match never.list_tools().await {
        Err(e) => assert!(e.to_string().contains("405"), "{e}"),
        Ok(tools) => panic!("listed {tools:?} over Streamable HTTP"),
    }
    assert_eq!(server.sessions.lock().unwrap().len(), 1, "no second stream");
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    let (url, _) = start("http://elsewhere.example/messages?session={id}").await;
    match client(&url, SseMode::Only).list_tools().await {
        Err(e) => assert!(
            e.to_string().contains(
                "the endpoint event points to another origin (http://elsewhere.example); messages are only posted within the server's own"
            ),
            "{e}"
        ),
        Ok(_) => panic!("posted to another origin"),
    }
}

#[tokio::test]
async fn when_the_stream_ends_waiting_calls_fail_and_later_ones_say_why() {
    let (url, server) = start("/messages?session={id}").await;
    let c = client(&url, SseMode::Detect);
    assert_eq!(c.list_tools().await.unwrap().len(), 3);
    let hanging = {
        let c = c.clone();
        tokio::spawn(async move {
            c.call_tool("hang", Map::new(), &CallOptions::default())
                .await
        })
    };
    // The call waits on the stream when it ends.
    server.hung.notified().await;
    server.end.cancel();
    let ended = "the server closed the HTTP+SSE session's event stream";
    match hanging.await.unwrap() {
        Err(e) => assert!(e.to_string().contains(ended), "{e}"),
        Ok(r) => panic!("{r:?}"),
    }
    match c
        .call_tool(
            "add",
            args(json!({"a": 1, "b": 2})),
            &CallOptions::default(),
        )
        .await
    {
        Err(e) => assert!(e.to_string().contains(ended), "{e}"),
        Ok(r) => panic!("{r:?}"),
    }
}

#[tokio::test]
async fn a_modern_refusal_is_not_taken_for_an_http_sse_server() {
    let gets = Arc::new(AtomicUsize::new(0));
    let counted = gets.clone();
    let app = Router::new().route(
        "/mcp",
        post(|| async {
            (
                StatusCode::NOT_FOUND,
                [("content-type", "application/json")],
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#,
            )
        })
        .get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { StatusCode::METHOD_NOT_ALLOWED }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let _ = client(&url, SseMode::Detect).list_tools().await;
    assert_eq!(gets.load(Ordering::SeqCst), 0);
}
