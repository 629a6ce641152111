//! Unlisted tools and routers: a tool offered without being listed is
//! reached only through a router; a router's call is the call of the tool it names —
//! validated against that tool's schema, bound to it across rounds,
//! recorded under its name with the router's `via`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_server::tool::Route;
use toolgate_server::{
    AuthContext, CallLog, CallOutcome, CallRecord, Recorded, RequestContext, Server, ToolDef,
    TransportContext,
};

#[derive(Default)]
struct Kept(Mutex<Vec<CallRecord>>);

impl CallLog for Kept {
    fn record(&self, record: CallRecord) -> Recorded {
        self.0.lock().unwrap().push(record);
        Box::pin(async { Ok(()) })
    }
}

#[derive(Deserialize, JsonSchema)]
struct Count {
    n: u32,
}

/// `count` is unlisted; `call_tool` routes to whatever `name` says, with
/// `arguments`; `secret` is for bob only; `ask` asks once.
fn server(log: Arc<Kept>) -> Server {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}});
    Server::builder("s", "1")
        .call_log(log)
        .state_key(toolgate_server::StateKey::new([7; 32]))
        .tool(
            ToolDef::new("count")
                .description("Echoes n.")
                .unlisted()
                .handler(|args: Count| async move { Ok(args.n.to_string()) }),
        )
        .tool(
            ToolDef::new("secret")
                .description("For bob.")
                .unlisted()
                .visible_when(|a| a.and_then(AuthContext::subject) == Some("bob"))
                .handler(|| async { "the secret" }),
        )
        .tool(
            ToolDef::new("ask")
                .description("Asks first.")
                .unlisted()
                .handler(|ctx: RequestContext| async move {
                    let mut input = ctx.inputs();
                    let form = json!({"type": "object", "properties": {}});
                    let Some(_) = input.elicit("q", "Sure?", form)? else {
                        return Err(input.ask());
                    };
                    Ok("asked and done".to_owned())
                }),
        )
        .tool(ToolDef::new("call_tool").router(
            "search",
            schema.as_object().cloned().unwrap(),
            |args: &Map<String, Value>, _caller| {
                let name = args.get("name").and_then(Value::as_str);
                let name = name.ok_or("Give the tool's name as \"name\".")?;
                let arguments = match args.get("arguments") {
                    Some(Value::Object(a)) => a.clone(),
                    _ => Map::new(),
                };
                Ok(Route {
                    tool: name.to_owned(),
                    arguments,
                })
            },
        ))
        .build()
        .unwrap()
}

fn as_who(who: &str) -> TransportContext {
    TransportContext {
        auth: Some(AuthContext::new(who)),
        ..TransportContext::default()
    }
}

async fn send(server: &Server, who: &str, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    common::answer(server, &message, &as_who(who)).await
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn an_unlisted_tool_is_reached_only_through_a_router() {
    let s = server(Arc::default());
    let list = send(&s, "alice", "tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["call_tool"]);
    // tools/list is the set of tools a client can call: by its own name an
    // unlisted tool is unknown.
    let direct = send(
        &s,
        "alice",
        "tools/call",
        json!({"name": "count", "arguments": {"n": 4}}),
    )
    .await;
    assert_eq!(direct["error"]["code"], -32602, "{direct}");
    let routed = send(
        &s,
        "alice",
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "count", "arguments": {"n": 4}}}),
    )
    .await;
    assert_eq!(text(&routed), "4");
    // One name, one tool: an unlisted tool cannot take a listed one's name.
    let again = ToolDef::new("call_tool")
        .unlisted()
        .handler(|| async { "x" });
    assert!(s.add_tool(again).is_err());
    assert!(s.remove_tool("count"));
    let gone = send(
        &s,
        "alice",
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "count", "arguments": {"n": 4}}}),
    )
    .await;
    assert_eq!(gone["error"]["code"], -32602);
}

#[tokio::test]
async fn a_routed_call_is_the_call_of_the_tool_it_names() {
    let log = Arc::new(Kept::default());
    let s = server(log.clone());
    let ok = send(
        &s,
        "alice",
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "count", "arguments": {"n": 5}}}),
    )
    .await;
    assert_eq!(text(&ok), "5");
    // Checked against count's schema, naming count's field.
    let bad = send(
        &s,
        "alice",
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "count", "arguments": {"n": "five"}}}),
    )
    .await;
    assert_eq!(bad["result"]["isError"], true);
    assert!(
        text(&bad).contains("count") && text(&bad).contains("n"),
        "{}",
        text(&bad)
    );
    // What the router refuses, it says.
    let unnamed = send(
        &s,
        "alice",
        "tools/call",
        json!({"name": "call_tool", "arguments": {}}),
    )
    .await;
    assert_eq!(unnamed["result"]["isError"], true);
    assert!(text(&unnamed).contains("\"name\""), "{}", text(&unnamed));
    // A router naming a router, itself included, is refused.
    let nested = send(&s, "alice", "tools/call", json!({"name": "call_tool", "arguments": {"name": "call_tool", "arguments": {"name": "count", "arguments": {"n": 1}}}})).await;
    assert_eq!(nested["result"]["isError"], true);
    assert!(
        text(&nested).contains("call it directly"),
        "{}",
        text(&nested)
    );
    // A tool hidden from the caller is as unknown through the router.
    let hidden = send(
        &s,
        "alice",
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "secret"}}),
    )
    .await;
    assert_eq!(hidden["error"]["code"], -32602);
    assert!(
        hidden["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown tool")
    );
    let shown = send(
        &s,
        "bob",
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "secret"}}),
    )
    .await;
    assert_eq!(text(&shown), "the secret");
    let records = log.0.lock().unwrap();
    let seen: Vec<(&str, CallOutcome, Option<&Value>)> = records
        .iter()
        .map(|r| (r.tool.as_str(), r.outcome, r.notes.get("via")))
        .collect();
    let search = json!("search");
    assert_eq!(
        seen,
        [
            ("count", CallOutcome::Ok, Some(&search)),
            ("count", CallOutcome::InvalidArguments, Some(&search)),
            ("call_tool", CallOutcome::InvalidArguments, None),
            ("call_tool", CallOutcome::InvalidArguments, None),
            ("secret", CallOutcome::Hidden, Some(&search)),
            ("secret", CallOutcome::Ok, Some(&search)),
        ]
    );
    assert_eq!(
        records[0].arguments_digest,
        toolgate_server::arguments_digest(&json!({"n": 5}))
    );
}

#[tokio::test]
async fn a_routed_round_binds_to_the_tool_it_names() {
    let log = Arc::new(Kept::default());
    let s = server(log.clone());
    let route = json!({"name": "call_tool", "arguments": {"name": "ask", "arguments": {}}});
    let first = send(&s, "alice", "tools/call", route.clone()).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].clone();
    let key = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let answers = json!({ key.clone(): {"action": "accept", "content": {}} });
    let mut retry = json!({"name": "ask", "arguments": {}, "requestState": state.clone(), "inputResponses": answers.clone()});
    // By its own name the unlisted tool is unknown, round or not.
    let direct = send(&s, "alice", "tools/call", retry.clone()).await;
    assert_eq!(direct["error"]["code"], -32602, "{direct}");
    // Its state does not fit another tool's call.
    retry["name"] = json!("call_tool");
    retry["arguments"] = json!({"name": "count", "arguments": {"n": 1}});
    let moved = send(&s, "alice", "tools/call", retry).await;
    assert!(
        moved.get("error").is_some() || moved["result"]["isError"] == true,
        "{moved}"
    );
    let mut routed = route;
    routed["requestState"] = state;
    routed["inputResponses"] = answers;
    let done = send(&s, "alice", "tools/call", routed).await;
    assert_eq!(text(&done), "asked and done", "{done}");
    let records = log.0.lock().unwrap();
    assert_eq!(records[0].tool, "ask");
    assert_eq!(records[0].outcome, CallOutcome::InputRequired);
}
