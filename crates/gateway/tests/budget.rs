//! `[[budget]]`: what calls cost, told to the model with the description;
//! a call that would go over a cap is not forwarded and the model is told
//! what is spent, what is left and when it resets; a failed call costs
//! nothing; spending survives a restart (the audit store keeps it).
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use support::{config, downstream, serve};
use toolgate_client::{CallOptions, Client, ClientError};
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_server::{Server, ToolDef, ToolError};

#[derive(Deserialize, JsonSchema)]
struct Lookup {
    phone: String,
}

/// A paid lookup: finds `555-…` numbers (a hit), nothing else (a miss);
/// counts the calls that reach it. `report` adds what it cost to `_meta`.
fn lookup(calls: Arc<AtomicUsize>) -> Server {
    Server::builder("rich", "1")
        .tool(
            ToolDef::new("lookup")
                .description("Finds a person by phone number.")
                .handler(move |a: Lookup| {
                    let calls = calls.clone();
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        if a.phone.starts_with("555-") {
                            Ok(format!("found {}", a.phone))
                        } else {
                            Err(ToolError::new(format!("nobody has {}", a.phone)))
                        }
                    }
                }),
        )
        .build()
        .unwrap()
}

const BUDGET: &str = "[[budget]]\ntools = [\"rich.*\"]\ncost = 25\nper_caller = { amount = 60, per = \"day\" }\ntotal = { amount = 1000, per = \"month\" }\n";

async fn start(upstream: &str, db: &Path) -> (Gateway, Client) {
    let gateway = Gateway::start(
        config(&format!(
            "[servers.rich]\nurl = \"{upstream}\"\n[audit]\npath = {}\n{BUDGET}",
            support::toml_string(&db.display().to_string())
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;
    (gateway, c)
}

async fn call(c: &Client, phone: &str) -> (bool, String) {
    support::outcome_of(c, "rich.lookup", json!({ "phone": phone })).await
}

#[tokio::test]
async fn calls_are_charged_misses_are_free_and_a_call_over_the_cap_is_not_sent() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = serve(lookup(calls.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let (gateway, c) = start(&upstream, &db).await;

    // The model reads the terms with the description.
    let tools = c.list_tools().await.unwrap();
    assert_eq!(
        tools[0].description.as_deref(),
        Some(
            "Finds a person by phone number.\n\nCosts 25 credits per successful call; nothing when the call fails. Budget: 60 credits per day for each caller; 1000 credits per month in all."
        )
    );

    // Try the phone first: a miss costs nothing; two hits cost 50.
    assert!(!call(&c, "nope").await.0);
    assert!(call(&c, "555-0100").await.0);
    assert!(call(&c, "555-0101").await.0);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let costs: Vec<Option<f64>> = query(&db, &Filter::default())
        .unwrap()
        .iter()
        .map(|r| r.cost)
        .collect();
    assert_eq!(costs, [None, Some(25.0), Some(25.0)]);

    // A third hit would cost 75 of 60: not sent, and the model is told.
    let (ok, text) = call(&c, "555-0102").await;
    assert!(!ok);
    assert!(
        text.starts_with("The budget \"rich.*\" is spent: 50 of 60 credits per day for callers without credentials (left: 10; a call costs 25), so this call of \"rich.lookup\" was not forwarded. It resets at "),
        "{text}"
    );
    assert!(
        text.ends_with(" 00:00:00 UTC. Tell the user, or wait until then."),
        "{text}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let last = query(&db, &Filter::default()).unwrap().pop().unwrap();
    assert_eq!((last.status.as_str(), last.cost), ("over_budget", None));
    assert!(
        gateway.metrics().encode().contains(
            "toolgate_spent_total{endpoint=\"\",upstream=\"rich\",tool=\"rich.lookup\"} 50.0"
        ),
        "{}",
        gateway.metrics().encode()
    );
    gateway.stop();

    // A restart in the middle of the day: what was spent is still spent.
    let (gateway, c) = start(&upstream, &db).await;
    let (ok, text) = call(&c, "555-0103").await;
    assert!(!ok && text.contains("is spent: 50 of 60"), "{text}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    gateway.stop();
}

#[tokio::test]
async fn a_cost_the_result_reports_is_charged() {
    let upstream = serve(
        Server::builder("meter", "1")
            .tool(ToolDef::new("query").description("Runs a query.").handler(
                |_: toolgate_server::NoArgs| async move {
                    let mut result = toolgate_protocol::types::CallToolResult::text("rows");
                    result.meta =
                        Some(serde_json::from_value(json!({"com.example/credits": 4})).unwrap());
                    result
                },
            ))
            .build()
            .unwrap(),
    )
    .await;
    let gateway = Gateway::start(
        config(&format!(
            "[servers.m]\nurl = \"{upstream}\"\n[[budget]]\ntools = [\"m.*\"]\ncost_from = \"_meta/com.example/credits\"\nunit = \"credits\"\ntotal = {{ amount = 10, per = \"hour\" }}\n"
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;
    let options = CallOptions::default();
    let run = || c.call_tool("m.query", serde_json::Map::new(), &options);
    // 4, 8, 12: the third goes over, so the fourth is refused (a reported
    // cost is known only afterwards).
    for _ in 0..3 {
        assert!(run().await.is_ok());
    }
    match run().await {
        Err(ClientError::Tool { text, .. }) => assert!(
            text.starts_with("The budget \"m.*\" is spent: 12 of 10 credits per hour for all callers together (left: 0), so this call of \"m.query\" was not forwarded."),
            "{text}"
        ),
        other => panic!("{other:?}"),
    }
    gateway.stop();
}

/// Thirty calls at once against a cap of five: exactly five reach the
/// upstream, the other twenty-five are told the budget is spent (counting
/// what the five in flight hold), and the five are charged once they end.
async fn thirty_at_once_against_five(store: &str) -> Gateway {
    let calls = support::Reached::default();
    let (gate, open) = tokio::sync::watch::channel(false);
    let upstream = serve(support::gated(calls.clone(), open)).await;
    let gateway = Gateway::start(
        config(&format!(
            "[servers.gate]\nurl = \"{upstream}\"\n{store}\n[[budget]]\ntools = [\"gate.*\"]\ncost = 1\nper_caller = {{ amount = 5, per = \"hour\" }}\n"
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;
    let answers = support::at_once(&[&c], "gate.pass", 30, &calls, &gate).await;
    assert_eq!(calls.count(), 5, "exactly the cap reached the upstream");
    let passed: Vec<&(bool, String)> = answers.iter().filter(|(ok, _)| *ok).collect();
    assert_eq!(passed.len(), 5);
    assert!(passed.iter().all(|(_, text)| text == "passed"));
    for (ok, text) in answers.iter().filter(|(ok, _)| !*ok) {
        assert!(!ok);
        assert!(
            text.starts_with("The budget \"gate.*\" is spent: 5 of 5 credits per hour for callers without credentials"),
            "{text}"
        );
    }
    // All five are charged now, and the next call is refused for what is
    // spent, with nothing held.
    let (ok, text) = call_gate(&c).await;
    assert!(!ok);
    assert!(
        text.starts_with("The budget \"gate.*\" is spent: 5 of 5 credits per hour for callers without credentials (left: 0; a call costs 1)"),
        "{text}"
    );
    gateway
}

async fn call_gate(c: &Client) -> (bool, String) {
    support::outcome_of(c, "gate.pass", json!({})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_never_overspend_a_budget_kept_in_memory() {
    thirty_at_once_against_five("").await.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_never_overspend_a_budget_kept_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = format!(
        "[audit]\npath = {}",
        support::toml_string(&db.display().to_string())
    );
    let gateway = thirty_at_once_against_five(&store).await;
    gateway.stop();
    let rows = query(&db, &Filter::default()).unwrap();
    let charged = rows.iter().filter(|r| r.cost == Some(1.0)).count();
    let refused = rows.iter().filter(|r| r.status == "over_budget").count();
    assert_eq!((charged, refused), (5, 26));
    let balances = toolgate_gateway::store::sqlite::ledger::balances(&db).unwrap();
    assert_eq!(balances.len(), 1);
    assert_eq!((balances[0].spent, balances[0].reserved), (5.0, 0.0));
}

#[tokio::test]
async fn a_reservation_left_by_a_stopped_gateway_stays_counted() {
    // A gateway that stopped between reserving and settling: its hold is
    // still in the store (fail closed), and the next gateway counts it.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let upstream = serve(lookup(Arc::new(AtomicUsize::new(0)))).await;
    let (gateway, c) = start(&upstream, &db).await;
    assert!(call(&c, "555-0100").await.0);
    gateway.stop();
    {
        let conn = rusqlite_open(&db);
        conn.execute("UPDATE spend SET reserved = 25 WHERE scope = '-'", [])
            .unwrap();
    }
    let (gateway, c) = start(&upstream, &db).await;
    let (ok, text) = call(&c, "555-0101").await;
    assert!(!ok);
    assert!(
        text.starts_with("The budget \"rich.*\" is spent: 50 of 60 credits per day for callers without credentials, 25 of it held by calls in flight (left: 10; a call costs 25)"),
        "{text}"
    );
    gateway.stop();
    let held: Vec<(String, f64, f64)> = toolgate_gateway::store::sqlite::ledger::balances(&db)
        .unwrap()
        .into_iter()
        .map(|b| (b.key.scope, b.spent, b.reserved))
        .collect();
    assert!(held.contains(&("-".to_owned(), 25.0, 25.0)), "{held:?}");
}

fn rusqlite_open(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

/// An upstream that asks its caller something mid-call (`input_required`)
/// is charged once, for the call that completes: the round that carried
/// the question gives its reservation back.
#[tokio::test]
async fn a_call_whose_upstream_asks_first_is_charged_once() {
    let asked = Arc::new(AtomicUsize::new(0));
    let upstream = serve(support::shop(asked.clone(), "Orders an item.")).await;
    let gateway = Gateway::start(
        config(&format!(
            "[servers.shop]\nurl = \"{upstream}\"\n[[budget]]\ntools = [\"shop.pay\"]\ncost = 1\nper_caller = {{ amount = 2, per = \"hour\" }}\n"
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;
    for _ in 0..2 {
        let (ok, text) = support::outcome_of(&c, "shop.pay", json!({})).await;
        assert!(ok, "{text}");
        assert_eq!(text, "paid");
    }
    // Two payments, each asked once: four rounds reached the upstream.
    assert_eq!(asked.load(Ordering::SeqCst), 4);
    let (ok, text) = support::outcome_of(&c, "shop.pay", json!({})).await;
    assert!(!ok);
    assert!(
        text.starts_with("The budget \"shop.pay\" is spent: 2 of 2 credits per hour"),
        "{text}"
    );
    gateway.stop();
}
