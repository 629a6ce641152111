//! Multi round-trip requests: rounds, sealed state, and every way a retry
//! can be wrong.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};
use toolgate_server::transport::http_status_for;
use toolgate_server::{RequestContext, Server, StateKey, ToolDef, TransportContext};

fn server(key: StateKey) -> Server {
    server_with(|b| b.state_key(key))
}

fn server_with(
    configure: impl FnOnce(toolgate_server::ServerBuilder) -> toolgate_server::ServerBuilder,
) -> Server {
    let form = |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
    let (f1, f2) = (form("name"), form("color"));
    configure(Server::builder("mrtr", "1"))
        .tool(ToolDef::new("greet").description("Two rounds").handler(
            move |ctx: RequestContext| {
                let (f1, f2) = (f1.clone(), f2.clone());
                async move {
                    let mut input = ctx.inputs();
                    let Some(name) = input.elicit("name", "Name?", f1)? else {
                        return Err(input.ask());
                    };
                    let Some(color) = input.elicit("color", "Color?", f2)? else {
                        return Err(input.ask());
                    };
                    let get = |e: &toolgate_server::Elicited, k: &str| {
                        e.content.as_ref().unwrap()[k].as_str().unwrap().to_owned()
                    };
                    Ok(format!(
                        "{} likes {}",
                        get(&name, "name"),
                        get(&color, "color")
                    ))
                }
            },
        ))
        .tool(ToolDef::new("model").description("Sampling").handler(
            |ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let Some(_) = input.sample("q", json!({"messages": [], "maxTokens": 5}))? else {
                    return Err(input.ask());
                };
                Ok("sampled")
            },
        ))
        .build()
        .unwrap()
}

fn meta(caps: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps})
}

async fn call(server: &Server, id: i64, params: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    common::answer(server, &message, &TransportContext::default()).await
}

/// `r` is a `-32602` error whose message contains `says`.
fn assert_invalid_params(r: &Value, says: &str) {
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(says), "{r}");
}

fn elicit_caps() -> Value {
    json!({"elicitation": {}})
}

fn answer(field: &str, value: &str) -> Value {
    json!({"action": "accept", "content": {field: value}})
}

#[tokio::test]
async fn rounds_accumulate_answers_across_two_server_processes() {
    let key = StateKey::new([7; 32]);
    let (a, b) = (server(key.clone()), server(key));
    let r1 = call(
        &a,
        1,
        json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps())}),
    )
    .await;
    assert_eq!(r1["result"]["resultType"], "input_required");
    assert_eq!(
        r1["result"]["inputRequests"]["name"]["method"],
        "elicitation/create"
    );
    let state1 = r1["result"]["requestState"].as_str().unwrap().to_owned();
    // Round 2 on the other process.
    let r2 = call(
        &b,
        2,
        json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps()),
        "inputResponses": {"name": answer("name", "Alice")}, "requestState": state1}),
    )
    .await;
    assert_eq!(r2["result"]["resultType"], "input_required");
    assert!(
        r2["result"]["inputRequests"].get("name").is_none(),
        "answered inputs are not asked again"
    );
    let state2 = r2["result"]["requestState"].as_str().unwrap().to_owned();
    // Round 3 back on the first: the name travels in the state.
    let r3 = call(&a, 3, json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps()),
        "inputResponses": {"color": answer("color", "green"), "unrelated": 1}, "requestState": state2})).await;
    assert_eq!(r3["result"]["content"][0]["text"], "Alice likes green");
}

#[tokio::test]
async fn encrypted_state_hides_answers_and_survives_a_key_rotation() {
    use base64::Engine as _;
    let old = StateKey::new([1; 32]).with_id("old");
    let new = StateKey::new([2; 32]).with_id("new");
    let before = server_with(|b| b.state_key(old.clone()).encrypt_state());
    let after = server_with(|b| {
        b.state_key(new.clone())
            .retired_state_key(old.clone())
            .encrypt_state()
    });
    let first = json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps())});
    let r1 = call(&before, 1, first.clone()).await;
    let state1 = r1["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(state1.starts_with("e1.old."), "{state1}");
    // The rotated server continues the flow the old key sealed.
    let r2 = call(
        &after,
        2,
        json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps()),
        "inputResponses": {"name": answer("name", "Alice")}, "requestState": state1}),
    )
    .await;
    let state2 = r2["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(state2.starts_with("e1.new."), "{state2}");
    // Alice's answer travels in the state, but not readably.
    let body = state2.rsplit('.').next().unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains("Alice"));
    let r3 = call(
        &after,
        3,
        json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps()),
        "inputResponses": {"color": answer("color", "green")}, "requestState": state2.clone()}),
    )
    .await;
    assert_eq!(r3["result"]["content"][0]["text"], "Alice likes green");
    // The old server, without the new key, refuses the new state clearly.
    let r = call(
        &before,
        4,
        json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps()),
        "inputResponses": {"color": answer("color", "green")}, "requestState": state2}),
    )
    .await;
    assert_invalid_params(&r, "a key this server does not have");
    // And it still serves a fresh flow.
    let fresh = call(&before, 5, first).await;
    assert_eq!(fresh["result"]["resultType"], "input_required");
}

#[tokio::test]
async fn bad_state_is_refused_with_a_clear_error() {
    let s = server(StateKey::random());
    let r1 = call(
        &s,
        1,
        json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps())}),
    )
    .await;
    let state = r1["result"]["requestState"].as_str().unwrap().to_owned();
    let retry = |state: Value, args: Value| {
        json!({"name": "greet", "arguments": args, "_meta": meta(elicit_caps()),
        "inputResponses": {"name": answer("name", "A")}, "requestState": state})
    };

    let mut tampered = state.clone().into_bytes();
    tampered[5] ^= 1;
    let r = call(
        &s,
        2,
        retry(json!(String::from_utf8(tampered).unwrap()), json!({})),
    )
    .await;
    assert_invalid_params(&r, "Invalid requestState");

    let r = call(&s, 3, retry(json!(state), json!({"other": true}))).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("different request"),
        "{r}"
    );

    let r = call(
        &server(StateKey::random()),
        4,
        retry(json!(state), json!({})),
    )
    .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("integrity"),
        "{r}"
    );

    let r = call(&s, 5, retry(json!(42), json!({}))).await;
    assert_eq!(r["error"]["code"], -32602);
    // The server still serves the flow from the start.
    let r = call(
        &s,
        6,
        json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps())}),
    )
    .await;
    assert_eq!(r["result"]["resultType"], "input_required");
}

#[tokio::test]
async fn malformed_input_responses_are_invalid_params() {
    let s = server(StateKey::random());
    let cases = [
        (json!(null), "inputResponses must be an object"),
        (
            json!({"name": 12345}),
            "inputResponses.name must be an ElicitResult",
        ),
        (
            json!({"name": {"action": "maybe"}}),
            "\"accept\", \"decline\" or \"cancel\"",
        ),
        (json!({"name": {"action": "accept"}}), "no content"),
        (
            json!({"name": {"action": "accept", "content": {"name": 5}}}),
            "does not match the requested schema",
        ),
    ];
    for (responses, needle) in cases {
        let r = call(&s, 1, json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps()), "inputResponses": responses})).await;
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(needle),
            "{needle}: {r}"
        );
    }
    // A declined elicitation is a valid answer.
    let r = call(&s, 2, json!({"name": "greet", "arguments": {}, "_meta": meta(elicit_caps()), "inputResponses": {"name": {"action": "decline"}}})).await;
    assert!(r.get("result").is_some(), "{r}");
}

#[tokio::test]
async fn asking_without_the_capability_is_32021() {
    let s = server(StateKey::random());
    let r = call(
        &s,
        1,
        json!({"name": "greet", "arguments": {}, "_meta": meta(json!({}))}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32021);
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {"form": {}}})
    );
    assert_eq!(http_status_for(Some(-32021)), 400);
    let r = call(
        &s,
        2,
        json!({"name": "model", "arguments": {}, "_meta": meta(json!({"elicitation": {}}))}),
    )
    .await;
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    let r = call(
        &s,
        3,
        json!({"name": "model", "arguments": {}, "_meta": meta(json!({"sampling": {}}))}),
    )
    .await;
    assert_eq!(
        r["result"]["inputRequests"]["q"]["method"],
        "sampling/createMessage"
    );
    // A malformed sampling answer is refused.
    let r = call(&s, 4, json!({"name": "model", "arguments": {}, "_meta": meta(json!({"sampling": {}})), "inputResponses": {"q": {"text": "hi"}}})).await;
    assert_eq!(r["error"]["code"], -32602);
}

#[tokio::test]
async fn with_every_round_single_use_a_prompt_round_answers_once() {
    use toolgate_server::PromptEntry;
    use toolgate_server::protocol::types::{GetPromptResult, ResultType};
    let rendered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = rendered.clone();
    let server = Server::builder("s", "1")
        .single_use_rounds()
        .prompt(PromptEntry::new("greeting", move |_, ctx| {
            let count = count.clone();
            async move {
                let mut input = ctx.inputs();
                let form = json!({"type": "object", "properties": {"name": {"type": "string"}}});
                let Some(_) = input.elicit("who", "Your name?", form)? else {
                    return Err(input.ask());
                };
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(GetPromptResult {
                    result_type: ResultType::Complete,
                    description: None,
                    messages: Vec::new(),
                    meta: None,
                })
            }
        }))
        .build()
        .unwrap();
    let get = |id: i64, extra: Value| {
        let mut params = json!({"name": "greeting", "_meta": meta(elicit_caps())});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let message =
            json!({"jsonrpc": "2.0", "id": id, "method": "prompts/get", "params": params});
        let server = server.clone();
        async move { common::answer(&server, &message, &TransportContext::default()).await }
    };
    let asked = get(1, json!({})).await;
    let state = asked["result"]["requestState"].clone();
    let retry = json!({"requestState": state, "inputResponses": {"who": answer("name", "Ada")}});
    let done = get(2, retry.clone()).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let again = get(3, retry).await;
    assert_invalid_params(&again, "this round of \"greeting\" was already answered");
    assert_eq!(rendered.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A new request starts over.
    assert_eq!(
        get(4, json!({})).await["result"]["resultType"],
        "input_required"
    );
}
