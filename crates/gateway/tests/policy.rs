//! The gateway's policy: denied tools, a person's approval through the
//! protocol, approvals that count once, rate limits, and the audit store
//! that records every decision.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use support::{Person, Pipe, args, config, refused, serve, shop, tool_names};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallEnd, CallOptions, CallRound, Client, ClientError, RoundInput};
use toolgate_gateway::store::AuditRow;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::types::CallToolResult;

async fn client(gateway: &Gateway, answer: Option<Value>) -> (Client, Arc<Mutex<Vec<Value>>>) {
    let url = serve(gateway.server()).await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let builder = Client::builder("test", "1").timeout(Duration::from_secs(10));
    let builder = match answer {
        Some(answer) => builder.input_handler(Person {
            answer,
            asked: asked.clone(),
        }),
        None => builder,
    };
    let c = builder.build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    (c, asked)
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap().to_string()
}

/// The result, whether the tool succeeded or reported an error.
fn answer(r: Result<CallToolResult, ClientError>) -> CallToolResult {
    match r {
        Ok(r) => r,
        Err(ClientError::Tool { result, .. }) => *result,
        Err(e) => panic!("{e}"),
    }
}

fn approve() -> Value {
    json!({"action": "accept", "content": {"approve": true}})
}

const POLICY: &str = "[policy]\ndefault = \"confirm\"\n[[policy.rules]]\ntools = [\"shop.greet\"]\naction = \"allow\"\n[[policy.rules]]\ntools = [\"*.pay\"]\naction = \"deny\"\n";

async fn gateway(extra: &str) -> (Gateway, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = serve(shop(calls.clone(), "Orders an item.")).await;
    let gateway = support::start(
        config(&format!("[servers.shop]\nurl = \"{url}\"\n{POLICY}{extra}")),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    (gateway, calls)
}

#[tokio::test]
async fn a_risky_call_runs_once_a_person_approves_it_and_they_saw_exactly_what_runs() {
    let (gateway, calls) = gateway("").await;
    let (c, asked) = client(&gateway, Some(approve())).await;
    let order = args(json!({"sku": "SKU-0042"}));
    let result = answer(
        c.call_tool("shop.order", order, &CallOptions::default())
            .await,
    );
    assert_eq!(result.is_error, None, "{}", text(&result));
    assert!(text(&result).contains("ordered SKU-0042"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let message = asked[0]["message"].as_str().unwrap();
    for part in [
        "Server: shop\n",
        "Tool: shop.order\n",
        "Description: Orders an item.\n",
        "Risk: ",
        "\"sku\": \"SKU-0042\"",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["approve"]["type"],
        "boolean"
    );
    // An allowed tool asks nothing.
    let before = calls.load(Ordering::SeqCst);
    let (c2, asked2) = client(&gateway, Some(approve())).await;
    let greeted = answer(
        c2.call_tool("shop.greet", Map::new(), &CallOptions::default())
            .await,
    );
    assert!(text(&greeted).contains("hello"), "{}", text(&greeted));
    // greet itself asks its own question (relayed), but not the approval.
    assert!(
        asked2
            .lock()
            .unwrap()
            .iter()
            .all(|q| q["message"] == "Friend?")
    );
    assert_eq!(calls.load(Ordering::SeqCst), before);
    gateway.stop();
}

#[tokio::test]
async fn a_declined_or_dismissed_call_never_reaches_the_upstream() {
    let (gateway, calls) = gateway("").await;
    for (reply, word) in [
        (json!({"action": "decline"}), "declined"),
        (json!({"action": "cancel"}), "cancelled"),
        (
            json!({"action": "accept", "content": {"approve": false}}),
            "declined",
        ),
    ] {
        let (c, _) = client(&gateway, Some(reply)).await;
        let result = answer(
            c.call_tool(
                "shop.order",
                args(json!({"sku": "SKU-0001"})),
                &CallOptions::default(),
            )
            .await,
        );
        assert_eq!(result.is_error, Some(true));
        let said = text(&result);
        assert!(
            said.contains(&format!("The person {word} the call to"))
                && said.contains("not forwarded"),
            "{said}"
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    // Still serving: an approved call goes through.
    let (c, _) = client(&gateway, Some(approve())).await;
    let result = answer(
        c.call_tool(
            "shop.order",
            args(json!({"sku": "SKU-0002"})),
            &CallOptions::default(),
        )
        .await,
    );
    assert_eq!(result.is_error, None);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}

/// The first round of `shop.order` with `sku`: the approval question and
/// the sealed state.
async fn first_round(c: &Client, sku: &str) -> (Map<String, Value>, String) {
    match c
        .call_tool_round(
            "shop.order",
            args(json!({ "sku": sku })),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap()
    {
        CallRound::InputRequired {
            input_requests,
            request_state,
        } => (input_requests, request_state.unwrap()),
        other => panic!("not asked: {other:?}"),
    }
}

fn approval_of(requests: &Map<String, Value>) -> Map<String, Value> {
    let mut responses = Map::new();
    for key in requests.keys() {
        responses.insert(key.clone(), approve());
    }
    responses
}

#[tokio::test]
async fn an_approval_lets_one_call_through_for_those_arguments_only() {
    let (gateway, calls) = gateway("").await;
    let (c, _) = client(&gateway, Some(approve())).await;
    let (requests, state) = first_round(&c, "SKU-0007").await;
    assert_eq!(requests.len(), 1);
    let round = |sku: &str, state: Option<String>| {
        let c = c.clone();
        let responses = approval_of(&requests);
        let sku = sku.to_owned();
        async move {
            c.call_tool_round(
                "shop.order",
                args(json!({ "sku": sku })),
                Some(RoundInput {
                    input_responses: responses,
                    request_state: state,
                }),
                &CallOptions::default(),
            )
            .await
        }
    };
    // Other arguments: the state is bound to the approved ones.
    match round("SKU-9999", Some(state.clone())).await {
        Err(ClientError::Protocol(e)) => assert_eq!(e.code, -32602, "{}", e.message),
        other => panic!("moved to other arguments: {other:?}"),
    }
    // The approved call runs once...
    match round("SKU-0007", Some(state.clone())).await.unwrap() {
        CallRound::Complete(CallEnd::Result(r)) => assert!(text(&r).contains("ordered SKU-0007")),
        other => panic!("asked again: {other:?}"),
    }
    // ...and a replay of the same approval is refused.
    match round("SKU-0007", Some(state)).await.unwrap() {
        CallRound::Complete(CallEnd::Result(r)) => {
            assert_eq!(r.is_error, Some(true));
            assert!(text(&r).contains("already answered"), "{}", text(&r));
        }
        other => panic!("asked again: {other:?}"),
    }
    // An approval nobody asked for (no state) counts for nothing.
    match round("SKU-0007", None).await.unwrap() {
        CallRound::Complete(CallEnd::Result(r)) => {
            assert_eq!(r.is_error, Some(true));
            assert!(text(&r).contains("answers no question"), "{}", text(&r));
        }
        other => panic!("asked again: {other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}

#[tokio::test]
async fn denied_tools_are_not_listed_and_a_call_says_the_policy_denies_it() {
    let (gateway, calls) = gateway("").await;
    let (c, _) = client(&gateway, Some(approve())).await;
    let names = tool_names(&c).await;
    assert_eq!(names, ["shop.greet", "shop.order"]);
    let said = refused(&c, "shop.pay", json!({})).await;
    assert!(
        said.contains("shop.pay") && said.contains("policy denies it (rule 2)"),
        "{said}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    gateway.stop();
}

#[tokio::test]
async fn a_client_that_cannot_answer_is_told_what_would_let_it_through() {
    let (gateway, calls) = gateway("").await;
    let (c, _) = client(&gateway, None).await;
    let refused = answer(
        c.call_tool(
            "shop.order",
            args(json!({"sku": "SKU-0001"})),
            &CallOptions::default(),
        )
        .await,
    );
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(
        text(&refused),
        json!([{"type": "text", "text": "This call of \"shop.order\" needs a person's approval, and this client cannot ask for one (it declares no form elicitation), so it was not forwarded. Tell the user: the gateway's operator can turn on the approval page (`[approval] page = true`) to approve calls in a browser, or allow \"shop.order\" in `[policy]`."}]).to_string()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    // The allowed tool still works for it.
    let ok = answer(
        c.call_tool("shop.greet", Map::new(), &CallOptions::default())
            .await,
    );
    assert!(text(&ok).contains("hello, stranger"));
    gateway.stop();
}

fn statuses(rows: &[AuditRow]) -> Vec<(String, Option<String>, Option<String>, String)> {
    rows.iter()
        .map(|r| {
            (
                r.tool.clone(),
                r.decision.clone(),
                r.confirmation.clone(),
                r.status.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_decision_and_call_is_in_the_audit_store_and_limits_apply_per_caller() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let extra = format!(
        "[audit]\npath = \"{}\"\n[[ratelimit.rules]]\ntools = [\"shop.greet\"]\nper_minute = 1\n",
        db.display()
    );
    let (gateway, _calls) = gateway(&extra).await;
    assert_eq!(gateway.audit_path(), Some(db.as_path()));
    let (yes, _) = client(&gateway, Some(approve())).await;
    let (no, _) = client(&gateway, Some(json!({"action": "decline"}))).await;
    let options = CallOptions::default();
    answer(
        yes.call_tool("shop.order", args(json!({"sku": "SKU-0001"})), &options)
            .await,
    );
    answer(
        no.call_tool("shop.order", args(json!({"sku": "SKU-0002"})), &options)
            .await,
    );
    // Invalid arguments are refused before the policy is even asked.
    refused(&yes, "shop.order", json!({"sku": "nope"})).await;
    refused(&yes, "shop.pay", json!({})).await;
    // greet asks a question of its own when it can: one round for a
    // client that cannot be asked.
    let (plain, _) = client(&gateway, None).await;
    let first = answer(plain.call_tool("shop.greet", Map::new(), &options).await);
    assert_eq!(first.is_error, None);
    let limited = answer(plain.call_tool("shop.greet", Map::new(), &options).await);
    assert_eq!(limited.is_error, Some(true));
    assert!(text(&limited).contains("Rate limit"), "{}", text(&limited));
    // Every answer above was sent after its row was committed.
    let rows = query(&db, &Filter::default()).unwrap();
    let s = |t: &str, d: Option<&str>, c: Option<&str>, st: &str| {
        (
            t.to_owned(),
            d.map(str::to_owned),
            c.map(str::to_owned),
            st.to_owned(),
        )
    };
    assert_eq!(
        statuses(&rows),
        [
            s(
                "shop.order",
                Some("confirm"),
                Some("asked"),
                "input_required"
            ),
            s("shop.order", Some("confirm"), Some("approved"), "ok"),
            s(
                "shop.order",
                Some("confirm"),
                Some("asked"),
                "input_required"
            ),
            s("shop.order", Some("confirm"), Some("declined"), "declined"),
            s("shop.order", None, None, "invalid_arguments"),
            s("shop.pay", Some("deny"), None, "denied"),
            s("shop.greet", Some("allow"), None, "ok"),
            s("shop.greet", None, None, "rate_limited"),
        ]
    );
    assert!(rows.iter().all(|r| r.arguments.is_none()));
    // A refusal names the rule that made it, by its place and patterns.
    assert_eq!(rows[5].rule.as_deref(), Some("rule 2 (tools [\"*.pay\"])"));
    assert_eq!(rows[1].rule.as_deref(), Some("default (confirm)"));
    assert_eq!(rows[1].upstream.as_deref(), Some("shop"));
    assert_eq!(rows[0].arguments_digest, rows[1].arguments_digest);
    assert_ne!(rows[1].arguments_digest, rows[3].arguments_digest);
    gateway.stop();
}

#[tokio::test]
async fn an_upstream_budget_is_shared_by_all_callers_and_spent_only_on_forwarded_calls() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = serve(shop(calls.clone(), "Orders an item.")).await;
    let gateway = support::start(
        config(&format!(
            "[servers.shop]\nurl = \"{url}\"\nper_minute = 1\n{POLICY}"
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let options = CallOptions::default();
    // A declined call never reaches the upstream, so it spends nothing.
    let (no, _) = client(&gateway, Some(json!({"action": "decline"}))).await;
    let declined = answer(
        no.call_tool("shop.order", args(json!({"sku": "SKU-0001"})), &options)
            .await,
    );
    assert!(text(&declined).contains("declined"));
    let (a, _) = client(&gateway, None).await;
    let first = answer(a.call_tool("shop.greet", Map::new(), &options).await);
    assert_eq!(first.is_error, None, "{}", text(&first));
    // Another caller, another tool: the same upstream budget.
    let (b, _) = client(&gateway, Some(approve())).await;
    let refused = answer(
        b.call_tool("shop.order", args(json!({"sku": "SKU-0002"})), &options)
            .await,
    );
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("at most 1 calls per minute through this gateway"),
        "{}",
        text(&refused)
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "greet does not count itself"
    );
    gateway.stop();
}

#[tokio::test]
async fn a_legacy_session_is_asked_the_same_question_as_an_elicitation_request() {
    let (gateway, calls) = gateway("").await;
    let mut p = Pipe::legacy_session(gateway.server()).await;
    for (id, answer, ran) in [
        (
            2,
            json!({"action": "accept", "content": {"approve": true}}),
            true,
        ),
        (3, json!({"action": "decline"}), false),
    ] {
        p.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "shop.order", "arguments": {"sku": "SKU-0009"}}}))
            .await;
        let ask = p.recv().await;
        assert_eq!(ask["method"], "elicitation/create", "{ask}");
        let message = ask["params"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Approve this tool call?") && message.contains("SKU-0009"),
            "{message}"
        );
        assert_eq!(
            ask["params"]["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
        p.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": answer}))
            .await;
        let done = p.recv().await;
        assert_eq!(done["id"], id);
        let text = done["result"]["content"][0]["text"].as_str().unwrap();
        if ran {
            assert_eq!(text, "ordered SKU-0009");
        } else {
            assert_eq!(done["result"]["isError"], true);
            assert!(text.contains("declined"), "{text}");
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}
