//! Handlers of any shape: parameters in any order, shared state, plain and
//! fallible returns, and the registration errors that name the fix.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_server::{
    Args, AuthContext, RegistrationError, RequestContext, Server, State, Structured, ToolDef,
    TransportContext,
};

#[derive(Deserialize, JsonSchema)]
struct Echo {
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Length {
    chars: usize,
}

struct Counter(AtomicU64);

fn non_empty(text: &str) -> std::io::Result<()> {
    if text.is_empty() {
        return Err(std::io::Error::other(
            "the text is empty; send at least one character",
        ));
    }
    Ok(())
}

fn server() -> Server {
    Server::builder("handlers", "1")
        .state(Arc::new(Counter(AtomicU64::new(0))))
        .state(String::from("shared prefix"))
        .tool(
            ToolDef::new("ping")
                .description("No arguments, a plain answer")
                .handler(|| async { "pong" }),
        )
        .tool(
            ToolDef::new("count")
                .description("State first, then the context")
                .handler(
                    |State(counter): State<Arc<Counter>>, ctx: RequestContext| async move {
                        let n = counter.0.fetch_add(1, Ordering::SeqCst) + 1;
                        format!("call {n} (request {})", ctx.request_id())
                    },
                ),
        )
        .tool(
            ToolDef::new("echo")
                .description("Context, arguments, state")
                .handler(
                    |_ctx: RequestContext, args: Echo, State(prefix): State<String>| async move {
                        format!("{prefix}: {}", args.text)
                    },
                ),
        )
        .tool(
            ToolDef::new("length")
                .description("Explicit Args, structured, fallible")
                .handler(|Args(args): Args<Echo>| async move {
                    // `?` on a std error: its text is what the model reads.
                    non_empty(&args.text)?;
                    Ok(Structured(Length {
                        chars: args.text.chars().count(),
                    }))
                }),
        )
        .tool(
            ToolDef::new("whoami")
                .description("Needs a caller")
                .handler(
                    |auth: AuthContext| async move { auth.subject().unwrap_or("").to_owned() },
                ),
        )
        .tool(
            ToolDef::new("maybe")
                .description("Takes a caller if there is one")
                .handler(|auth: Option<AuthContext>| async move {
                    auth.and_then(|a| a.subject().map(str::to_owned))
                        .unwrap_or_else(|| "anonymous".into())
                }),
        )
        .build()
        .unwrap()
}

async fn call(server: &Server, name: &str, arguments: Value, auth: Option<&str>) -> Value {
    let message = common::request(
        1,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    );
    let transport = TransportContext {
        auth: auth.map(AuthContext::new),
        ..Default::default()
    };
    common::answer(server, &message, &transport).await["result"].clone()
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn parameters_come_in_any_order_and_state_is_shared() {
    let s = server();
    assert_eq!(text(&call(&s, "ping", json!({}), None).await), "pong");
    assert_eq!(
        text(&call(&s, "count", json!({}), None).await),
        "call 1 (request 1)"
    );
    assert_eq!(
        text(&call(&s, "count", json!({}), None).await),
        "call 2 (request 1)"
    );
    assert_eq!(
        text(&call(&s, "echo", json!({"text": "hi"}), None).await),
        "shared prefix: hi"
    );
    let length = call(&s, "length", json!({"text": "héllo"}), None).await;
    assert_eq!(length["structuredContent"], json!({"chars": 5}));
    assert_eq!(
        text(&call(&s, "whoami", json!({}), Some("alice")).await),
        "alice"
    );
    assert_eq!(text(&call(&s, "maybe", json!({}), None).await), "anonymous");
    assert_eq!(
        text(&call(&s, "maybe", json!({}), Some("bob")).await),
        "bob"
    );
}

#[tokio::test]
async fn schemas_come_from_the_parameters_and_the_return_type() {
    let s = server();
    let list = common::answer(
        &s,
        &common::request(1, "tools/list", json!({})),
        &TransportContext::default(),
    )
    .await;
    let tool = |name: &str| {
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    // No arguments parameter: only `{}` is accepted.
    assert_eq!(tool("ping")["inputSchema"]["additionalProperties"], false);
    assert_eq!(tool("echo")["inputSchema"]["required"], json!(["text"]));
    assert_eq!(tool("length")["inputSchema"]["required"], json!(["text"]));
    assert_eq!(tool("length")["outputSchema"]["required"], json!(["chars"]));
    assert!(tool("echo").get("outputSchema").is_none());
}

#[tokio::test]
async fn errors_reach_the_model_and_bad_calls_are_refused() {
    let s = server();
    // `?`-style errors of any std error type become the tool's error text.
    let empty = call(&s, "length", json!({"text": ""}), None).await;
    assert_eq!(empty["isError"], true);
    assert_eq!(
        text(&empty),
        "the text is empty; send at least one character"
    );
    // Arguments to a tool that takes none.
    let extra = call(&s, "ping", json!({"x": 1}), None).await;
    assert_eq!(extra["isError"], true, "{extra}");
    // A tool that needs a caller, called anonymously.
    let anonymous = call(&s, "whoami", json!({}), None).await;
    assert_eq!(anonymous["isError"], true);
    assert!(
        text(&anonymous).contains("authenticated caller"),
        "{anonymous}"
    );
    // Still serving.
    assert_eq!(text(&call(&s, "ping", json!({}), None).await), "pong");
}

#[test]
fn registration_names_the_fix() {
    let missing = Server::builder("s", "1")
        .tool(ToolDef::new("t").handler(|State(n): State<u32>| async move { n.to_string() }))
        .build();
    match missing {
        Err(RegistrationError::Invalid(why)) => {
            assert!(
                why.contains("State<u32>") && why.contains("ServerBuilder::state"),
                "{why}"
            );
        }
        other => panic!("{:?}", other.err()),
    }
    let twice = Server::builder("s", "1")
        .tool(ToolDef::new("t").handler(|a: Echo, b: Args<Echo>| async move { a.text + &b.0.text }))
        .build();
    match twice {
        Err(RegistrationError::Invalid(why)) => assert!(why.contains("arguments twice"), "{why}"),
        other => panic!("{:?}", other.err()),
    }
    let unit = Server::builder("s", "1")
        .tool(ToolDef::new("t").handler(|_: ()| async { "x" }))
        .build();
    match unit {
        Err(e @ RegistrationError::InputNotObject { .. }) => {
            assert!(
                e.to_string()
                    .contains("struct deriving Deserialize and JsonSchema"),
                "{e}"
            );
        }
        other => panic!("{:?}", other.err()),
    }
}

#[derive(Deserialize, JsonSchema)]
struct Confirm {
    /// Pay now?
    confirm: bool,
    /// A note for the order.
    note: Option<String>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
struct Nested {
    inner: Echo,
}

fn asking() -> Server {
    use toolgate_server::Elicitation;
    Server::builder("asking", "1")
        .tool(ToolDef::new("pay").description("Asks first").handler(
            |ctx: RequestContext| async move {
                Ok(match ctx.elicit::<Confirm>("Pay 25.00?")? {
                    Elicitation::Accepted(Confirm {
                        confirm: true,
                        note,
                    }) => {
                        format!("paid ({})", note.unwrap_or_default())
                    }
                    Elicitation::Accepted(_) => "not confirmed".to_owned(),
                    Elicitation::Declined => "declined".to_owned(),
                    Elicitation::Cancelled => "cancelled".to_owned(),
                })
            },
        ))
        .tool(
            ToolDef::new("broken")
                .description("A form that cannot be")
                .handler(|ctx: RequestContext| async move {
                    ctx.elicit::<Nested>("Where?")?;
                    Ok("never")
                }),
        )
        .build()
        .unwrap()
}

async fn ask(server: &Server, name: &str, retry: Value) -> Value {
    let mut params = json!({"name": name, "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    if let (Value::Object(p), Value::Object(r)) = (&mut params, retry) {
        p.extend(r);
    }
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    common::answer(server, &message, &TransportContext::default()).await
}

#[tokio::test]
async fn typed_elicitation_asks_a_form_and_reads_the_answer() {
    let s = asking();
    let first = ask(&s, "pay", json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required");
    let requests = first["result"]["inputRequests"].as_object().unwrap();
    let (key, request) = requests.iter().next().unwrap();
    let form = &request["params"]["requestedSchema"];
    assert_eq!(form["properties"]["confirm"]["type"], "boolean");
    assert_eq!(form["properties"]["confirm"]["description"], "Pay now?");
    assert_eq!(form["properties"]["note"]["type"], "string");
    assert_eq!(form["required"], json!(["confirm"]));
    let state = first["result"]["requestState"].clone();
    let answer = |response: Value| json!({"inputResponses": {key.clone(): response}, "requestState": state.clone()});
    let paid = ask(
        &s,
        "pay",
        answer(json!({"action": "accept", "content": {"confirm": true, "note": "gift"}})),
    )
    .await;
    assert_eq!(text(&paid["result"]), "paid (gift)");
    let declined = ask(&s, "pay", answer(json!({"action": "decline"}))).await;
    assert_eq!(text(&declined["result"]), "declined");
    // An answer that breaks the form is refused, naming the question.
    let wrong = ask(
        &s,
        "pay",
        answer(json!({"action": "accept", "content": {"confirm": "yes"}})),
    )
    .await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    assert!(
        wrong["error"]["message"]
            .as_str()
            .unwrap()
            .contains(key.as_str()),
        "{wrong}"
    );
    // A type that cannot be a form is the server's fault, and says nothing more.
    let broken = ask(&s, "broken", json!({})).await;
    assert_eq!(broken["error"]["code"], -32603, "{broken}");
    // Still serving.
    assert_eq!(
        ask(&s, "pay", json!({})).await["result"]["resultType"],
        "input_required"
    );
}

#[derive(Deserialize, JsonSchema)]
struct Which {
    /// anyhow, boxed, io or text.
    kind: String,
}

fn failing(kind: &str) -> Result<String, toolgate_server::ToolError> {
    match kind {
        "anyhow" => Err(anyhow::anyhow!("the report service said no"))?,
        "boxed" => {
            let e: Box<dyn std::error::Error + Send + Sync> = "a boxed failure".into();
            Err(e)?
        }
        "io" => Err(std::io::Error::other("disk full"))?,
        _ => Err(format!("unknown kind {kind:?}; use anyhow, boxed or io"))?,
    }
}

#[tokio::test]
async fn question_mark_takes_any_displayable_error() {
    let s = Server::builder("errors", "1")
        .tool(
            ToolDef::new("fail")
                .description("Fails as asked")
                .handler(|args: Which| async move { failing(&args.kind) }),
        )
        .build()
        .unwrap();
    for (kind, says) in [
        ("anyhow", "the report service said no"),
        ("boxed", "a boxed failure"),
        ("io", "disk full"),
        ("text", "unknown kind \"text\"; use anyhow, boxed or io"),
    ] {
        let r = call(&s, "fail", json!({"kind": kind}), None).await;
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(text(&r), says);
    }
}
