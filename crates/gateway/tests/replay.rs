//! A person's approval lets exactly one call through, whatever is
//! replayed: every round the gateway seals is forwarded once — on this
//! instance, on another sharing the store, and after a restart.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use support::{args, serve};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallEnd, CallOptions, CallRound, Client, RoundInput};
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::types::CallToolResult;
use toolgate_server::{RequestContext, Server, ToolDef};

#[derive(Deserialize, JsonSchema)]
struct Checkout {
    /// How many questions the shop asks before it pays (1 or 2).
    steps: u8,
}

/// What the shop saw: handler runs, and payments made.
#[derive(Clone, Default)]
struct Till {
    runs: Arc<AtomicUsize>,
    paid: Arc<AtomicUsize>,
}

/// A shop whose `checkout` asks `steps` questions, one round each, and
/// pays when all are answered.
fn shop(till: Till) -> Server {
    Server::builder("shop", "1")
        .tool(
            ToolDef::new("checkout")
                .description("Pays for the basket after the user confirms.")
                .handler(move |args: Checkout, ctx: RequestContext| {
                    let till = till.clone();
                    async move {
                        till.runs.fetch_add(1, Ordering::SeqCst);
                        let mut input = ctx.inputs();
                        let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                        for step in 1..=args.steps {
                            let key = format!("step{step}");
                            let asked = format!("Confirm step {step}?");
                            if input.elicit(&key, &asked, form.clone())?.is_none() {
                                return Err(input.ask());
                            }
                        }
                        let n = till.paid.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok(format!("Paid. Order {n} is confirmed."))
                    }
                }),
        )
        .tool(
            ToolDef::new("refund")
                .description("Refunds an order.")
                .handler(|args: Checkout| async move { format!("refunded {}", args.steps) }),
        )
        .build()
        .unwrap()
}

/// A gateway config: confirm every call, a shared state key and audit file.
fn config(upstream: &str, dir: &Path) -> GatewayConfig {
    let key = dir.join("state.key");
    if !key.exists() {
        std::fs::write(&key, "0123456789abcdef".repeat(4)).unwrap();
    }
    let text = format!(
        "[servers.shop]\nurl = \"{upstream}\"\n[policy]\ndefault = \"confirm\"\n[state]\nkey_file = {}\n[audit]\npath = {}\ndurability = \"commit\"\n",
        support::toml_string(&key.display().to_string()),
        support::toml_string(&dir.join("audit.db").display().to_string()),
    );
    GatewayConfig::parse_toml(&text, |_| None).unwrap()
}

async fn start(upstream: &str, dir: &Path) -> (Gateway, Client) {
    let gateway = Gateway::start(config(upstream, dir), GatewayOptions::default())
        .await
        .unwrap();
    let url = serve(gateway.server()).await;
    let client = Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(support::Yes)
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    (gateway, client)
}

/// One retry as sent: the answers and the state they go with.
#[derive(Clone)]
struct Retry {
    answers: Map<String, Value>,
    state: String,
}

/// Answers that approve the gateway's question and accept the shop's.
fn yes_to(requests: &Map<String, Value>) -> Map<String, Value> {
    requests
        .keys()
        .map(|k| {
            let yes = json!({"action": "accept", "content": {"approve": true, "ok": true}});
            (k.clone(), yes)
        })
        .collect()
}

async fn round(c: &Client, steps: u8, retry: Option<Retry>) -> CallRound {
    let input = retry.map(|r| RoundInput {
        input_responses: r.answers,
        request_state: Some(r.state),
    });
    c.call_tool_round(
        "shop.checkout",
        args(json!({ "steps": steps })),
        input,
        &CallOptions::default(),
    )
    .await
    .unwrap()
}

/// Run a checkout to the end, answering yes: every retry it sent, and the
/// final result.
async fn checkout(c: &Client, steps: u8) -> (Vec<Retry>, CallToolResult) {
    let mut sent = Vec::new();
    let mut next = None;
    loop {
        match round(c, steps, next.clone()).await {
            CallRound::InputRequired {
                input_requests,
                request_state,
            } => {
                let retry = Retry {
                    answers: yes_to(&input_requests),
                    state: request_state.unwrap(),
                };
                sent.push(retry.clone());
                next = Some(retry);
            }
            CallRound::Complete(CallEnd::Result(result)) => return (sent, result),
            CallRound::Complete(CallEnd::Task(t)) => panic!("a task: {t:?}"),
        }
    }
}

/// The whole path up to, not including, the last retry.
async fn all_but_the_last(c: &Client, steps: u8) -> Retry {
    let mut next = None;
    for _ in 0..=steps {
        match round(c, steps, next.clone()).await {
            CallRound::InputRequired {
                input_requests,
                request_state,
            } => {
                next = Some(Retry {
                    answers: yes_to(&input_requests),
                    state: request_state.unwrap(),
                });
            }
            other => panic!("ended early: {other:?}"),
        }
    }
    next.unwrap()
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().unwrap_or_default().to_owned()
}

const REPLAYED: &str = "This round of \"shop.checkout\" was already answered: each requestState is good for one retry, so the tool did not run again. Call \"shop.checkout\" again without requestState to start over.";

/// A replay is refused with the exact answer, before the upstream.
async fn refused_as_replay(c: &Client, steps: u8, retry: Retry) {
    match round(c, steps, Some(retry)).await {
        CallRound::Complete(CallEnd::Result(r)) => {
            assert_eq!(r.is_error, Some(true));
            assert_eq!(text(&r), REPLAYED);
        }
        other => panic!("a replay went through: {other:?}"),
    }
}

/// The statuses of the audit store's last `n` rows.
fn last_statuses(dir: &Path, n: usize) -> Vec<(String, Option<String>, String)> {
    let filter = Filter {
        limit: Some(n),
        ..Default::default()
    };
    query(&dir.join("audit.db"), &filter)
        .unwrap()
        .into_iter()
        .map(|r| (r.tool, r.upstream, r.status))
        .collect()
}

fn replayed(n: usize) -> Vec<(String, Option<String>, String)> {
    vec![
        (
            "shop.checkout".into(),
            Some("shop".into()),
            "replayed".into()
        );
        n
    ]
}

#[tokio::test]
async fn every_round_of_a_two_and_a_three_round_call_is_forwarded_once() {
    for steps in [1u8, 2] {
        let dir = tempfile::tempdir().unwrap();
        let till = Till::default();
        let upstream = serve(shop(till.clone())).await;
        let (gateway, c) = start(&upstream, dir.path()).await;
        let (sent, result) = checkout(&c, steps).await;
        // The approval, then each of the shop's questions.
        assert_eq!(sent.len(), 1 + usize::from(steps));
        assert_eq!(text(&result), "Paid. Order 1 is confirmed.");
        let runs = till.runs.load(Ordering::SeqCst);
        assert_eq!(runs, usize::from(steps) + 1);
        // Each round again, answers and all: refused, never forwarded.
        for retry in sent.iter().cloned() {
            refused_as_replay(&c, steps, retry).await;
        }
        assert_eq!(till.runs.load(Ordering::SeqCst), runs, "steps={steps}");
        assert_eq!(till.paid.load(Ordering::SeqCst), 1);
        assert_eq!(last_statuses(dir.path(), sent.len()), replayed(sent.len()));
        // Other calls keep working: a fresh checkout pays once more.
        let (_, again) = checkout(&c, steps).await;
        assert_eq!(text(&again), "Paid. Order 2 is confirmed.");
        gateway.stop();
    }
}

#[tokio::test]
async fn of_concurrent_replays_of_one_round_exactly_one_is_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let till = Till::default();
    let upstream = serve(shop(till.clone())).await;
    let (gateway, c) = start(&upstream, dir.path()).await;
    let last = all_but_the_last(&c, 2).await;
    let runs = till.runs.load(Ordering::SeqCst);
    let mut racing = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (c, last) = (c.clone(), last.clone());
        racing.spawn(async move { round(&c, 2, Some(last)).await });
    }
    let mut paid = 0;
    let mut refused = 0;
    while let Some(done) = racing.join_next().await {
        match done.unwrap() {
            CallRound::Complete(CallEnd::Result(r)) if r.is_error.is_none() => {
                assert_eq!(text(&r), "Paid. Order 1 is confirmed.");
                paid += 1;
            }
            CallRound::Complete(CallEnd::Result(r)) => {
                assert_eq!(text(&r), REPLAYED);
                refused += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((paid, refused), (1, 7));
    assert_eq!(till.paid.load(Ordering::SeqCst), 1);
    assert_eq!(till.runs.load(Ordering::SeqCst), runs + 1);
    let rows = last_statuses(dir.path(), 8);
    assert_eq!(rows.iter().filter(|r| r.2 == "replayed").count(), 7);
    assert_eq!(rows.iter().filter(|r| r.2 == "ok").count(), 1);
    gateway.stop();
}

#[tokio::test]
async fn a_round_answered_on_one_instance_is_refused_on_another_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let till = Till::default();
    let upstream = serve(shop(till.clone())).await;
    let (a, on_a) = start(&upstream, dir.path()).await;
    let (b, on_b) = start(&upstream, dir.path()).await;
    // A flow begun on one instance completes on the other (shared key)…
    let last = all_but_the_last(&on_a, 1).await;
    match round(&on_b, 1, Some(last.clone())).await {
        CallRound::Complete(CallEnd::Result(r)) => {
            assert_eq!(text(&r), "Paid. Order 1 is confirmed.")
        }
        other => panic!("{other:?}"),
    }
    let runs = till.runs.load(Ordering::SeqCst);
    // …and its rounds, answered, are refused on both.
    refused_as_replay(&on_a, 1, last.clone()).await;
    refused_as_replay(&on_b, 1, last.clone()).await;
    a.stop();
    b.stop();
    // A restarted gateway with the same store still refuses it.
    let (restarted, c) = start(&upstream, dir.path()).await;
    refused_as_replay(&c, 1, last).await;
    assert_eq!(till.runs.load(Ordering::SeqCst), runs);
    assert_eq!(till.paid.load(Ordering::SeqCst), 1);
    assert_eq!(last_statuses(dir.path(), 3), replayed(3));
    restarted.stop();
}

/// Send `state` with a call of `tool` with `steps`; the protocol error.
async fn refused_state(c: &Client, tool: &str, steps: u8, state: String) -> String {
    let retry = RoundInput {
        input_responses: Map::new(),
        request_state: Some(state),
    };
    let call = c
        .call_tool_round(
            tool,
            args(json!({ "steps": steps })),
            Some(retry),
            &CallOptions::default(),
        )
        .await;
    match call {
        Err(toolgate_client::ClientError::Protocol(e)) => {
            assert_eq!(e.code, -32602, "{}", e.message);
            e.message
        }
        other => panic!("accepted: {other:?}"),
    }
}

#[tokio::test]
async fn a_forged_or_moved_state_is_refused_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let till = Till::default();
    let upstream = serve(shop(till.clone())).await;
    let (gateway, c) = start(&upstream, dir.path()).await;
    let state = all_but_the_last(&c, 1).await.state;
    // Altered: one character of the payload changed.
    let mut forged = state.clone().into_bytes();
    forged[3] = if forged[3] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    let said = refused_state(&c, "shop.checkout", 1, forged).await;
    assert!(said.contains("integrity check failed"), "{said}");
    // Moved to other arguments, and to another tool.
    let said = refused_state(&c, "shop.checkout", 2, state.clone()).await;
    assert!(said.contains("belongs to a different request"), "{said}");
    let said = refused_state(&c, "shop.refund", 1, state.clone()).await;
    assert!(said.contains("belongs to a different request"), "{said}");
    let rows: Vec<_> = last_statuses(dir.path(), 3)
        .into_iter()
        .map(|(tool, _, status)| (tool, status))
        .collect();
    let row = |t: &str, s: &str| (t.to_owned(), s.to_owned());
    assert_eq!(
        rows,
        [
            row("shop.checkout", "tampered"),
            row("shop.checkout", "moved"),
            row("shop.refund", "moved")
        ]
    );
    // Nothing reached the shop, and the genuine state still works once.
    let runs = till.runs.load(Ordering::SeqCst);
    let answers = yes_to(&Map::from_iter([("step1".to_owned(), Value::Null)]));
    let genuine = Retry { answers, state };
    match round(&c, 1, Some(genuine)).await {
        CallRound::Complete(CallEnd::Result(r)) => {
            assert_eq!(text(&r), "Paid. Order 1 is confirmed.")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(till.runs.load(Ordering::SeqCst), runs + 1);
    gateway.stop();
}
