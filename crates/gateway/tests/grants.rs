//! Approvals that remember a tool: a rule's `remember` lets the person
//! approve "this tool, any arguments, for this caller, for the next hour";
//! the grant lets that caller's later calls through, each recorded with
//! its id, until it expires, is revoked, or the policy stops remembering.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::{Person, config, serve, shop, token};
use tokio::net::TcpListener;
use toolgate_client::Client;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_gateway::decide::grants::Revoked;
use toolgate_gateway::store::AuditRow;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::store::sqlite::grants;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_server::transport::http::{HttpConfig, serve_listener};

const POLICY: &str = r#"[policy]
default = "allow"
[[policy.rules]]
tools = ["shop.order"]
action = "confirm"
remember = "1h"
[[policy.rules]]
tools = ["shop.pay"]
action = "confirm"
"#;

struct Setup {
    gateway: Gateway,
    upstream: String,
    url: String,
    db: std::path::PathBuf,
    calls: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

fn toml(upstream: &str, url: &str, db: &Path, policy: &str) -> String {
    let jwks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/auth/jwks.json");
    format!(
        "[servers.shop]\nurl = \"{upstream}\"\n[audit]\npath = {db}\ndurability = \"commit\"\n[auth]\nissuer = \"{issuer}\"\naudience = \"{url}\"\njwks = {jwks}\n{policy}",
        issuer = support::ISSUER,
        db = support::toml_string(&db.display().to_string()),
        jwks = support::toml_string(&jwks.display().to_string()),
    )
}

/// A gateway behind `[auth]`, keeping its audit store in a fresh directory.
async fn setup() -> Setup {
    setup_with(GatewayOptions::default()).await
}

/// [`setup`], with `options` (a lock file).
async fn setup_with(options: GatewayOptions) -> Setup {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = serve(shop(calls.clone(), "Orders an item.")).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let config = config(&toml(&upstream, &url, &db, POLICY));
    let rs = config.auth.as_ref().unwrap().resource_server().unwrap();
    let gateway = Gateway::start(config, options).await.unwrap();
    let http_config = HttpConfig {
        auth: Some(Arc::new(rs)),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(gateway.server(), http_config, listener));
    Setup {
        gateway,
        upstream,
        url,
        db,
        calls,
        _dir: dir,
    }
}

fn caller(url: &str, subject: &str, person: &Person) -> Client {
    let options = HttpOptions {
        bearer_token: Some(token(subject, url, "")),
        ..HttpOptions::default()
    };
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(person.clone())
        .build(HttpTransport::new(url, options).unwrap())
}

/// Whether the call went through, and its text.
async fn call(c: &Client, tool: &str, arguments: Value) -> (bool, String) {
    support::outcome_of(c, tool, arguments).await
}

fn last_row(db: &Path) -> AuditRow {
    query(db, &Filter::default()).unwrap().pop().unwrap()
}

fn how(row: &AuditRow) -> (Option<&str>, &str, Option<&str>, &str) {
    (
        row.caller.as_deref(),
        row.tool.as_str(),
        row.confirmation.as_deref(),
        row.status.as_str(),
    )
}

/// Alice approves `shop.order` for the hour on her first call; her second
/// goes through without a question. Her person, and her client.
async fn alice_granted(s: &Setup) -> (Person, Client) {
    let alice_says = Person::new(
        json!({"action": "accept", "content": {"approve": true, "scope": "tool", "ok": true}}),
    );
    let alice = caller(&s.url, "alice", &alice_says);
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0001"}))
            .await
            .0
    );
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0002"}))
            .await
            .0
    );
    assert_eq!(alice_says.times_asked(), 1);
    (alice_says, alice)
}

const FOR_THE_TOOL: &str = "This tool, any arguments, for alice, for the next hour";

#[tokio::test]
async fn a_tool_approved_for_an_hour_lets_that_caller_through_until_revoked() {
    let s = setup().await;
    let alice_says = Person::new(
        json!({"action": "accept", "content": {"approve": true, "scope": "tool", "ok": true}}),
    );
    let alice = caller(&s.url, "alice", &alice_says);

    // The form offers the wider approval, "this call only" by default.
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0001"}))
            .await
            .0
    );
    assert_eq!(alice_says.times_asked(), 1);
    assert_eq!(
        alice_says.last_schema()["properties"]["scope"],
        json!({
            "type": "string",
            "title": "Approve for",
            "oneOf": [
                {"const": "call", "title": "This call only"},
                {"const": "tool", "title": FOR_THE_TOOL}
            ],
            "default": "call"
        })
    );
    let granted = grants::list(&s.db, false).unwrap();
    assert_eq!(granted.len(), 1);
    let grant = &granted[0];
    assert_eq!(
        (
            grant.caller.as_deref(),
            grant.tool.as_str(),
            grant.upstream.as_deref()
        ),
        (Some("alice"), "shop.order", Some("shop"))
    );
    assert_eq!(grant.expires_ms - grant.created_ms, 3_600_000);
    let row = last_row(&s.db);
    assert_eq!(
        how(&row),
        (Some("alice"), "shop.order", Some("approved"), "ok")
    );
    assert_eq!(row.grant.as_deref(), Some(grant.id.as_str()));

    // Other arguments: no question, and the row names the grant.
    let (ok, text) = call(&alice, "shop.order", json!({"sku": "SKU-0002"})).await;
    assert!(ok, "{text}");
    assert_eq!(text, "ordered SKU-0002");
    assert_eq!(alice_says.times_asked(), 1);
    let row = last_row(&s.db);
    assert_eq!(
        how(&row),
        (Some("alice"), "shop.order", Some("granted"), "ok")
    );
    assert_eq!(row.grant.as_deref(), Some(grant.id.as_str()));

    // Only this tool: a rule without `remember` asks every time, and
    // offers no wider approval.
    call(&alice, "shop.pay", json!({})).await;
    assert_eq!(alice_says.times_asked(), 2);
    assert!(
        alice_says.last_schema()["properties"]
            .get("scope")
            .is_none()
    );

    // Only this caller: Bob is asked, and his "this call only" (the
    // default) leaves no grant.
    let bob_says = Person::new(json!({"action": "accept", "content": {"approve": true}}));
    let bob = caller(&s.url, "bob", &bob_says);
    assert!(call(&bob, "shop.order", json!({"sku": "SKU-0003"})).await.0);
    assert!(call(&bob, "shop.order", json!({"sku": "SKU-0004"})).await.0);
    assert_eq!(bob_says.times_asked(), 2);
    assert_eq!(
        bob_says.last_schema()["properties"]["scope"]["oneOf"][1]["title"],
        "This tool, any arguments, for bob, for the next hour"
    );
    assert_eq!(grants::list(&s.db, false).unwrap().len(), 1);

    // Revoked (as `toolgate grants --revoke` does, from another process):
    // the very next call asks again, and the revocation is in the log.
    let Revoked::Now(revoked) = grants::revoke(&s.db, &grant.id, "cli").unwrap() else {
        panic!("not revoked");
    };
    assert_eq!(revoked.id, grant.id);
    let row = last_row(&s.db);
    assert_eq!(
        (row.tool.as_str(), row.status.as_str(), row.grant.as_deref()),
        ("toolgate.grant", "revoked", Some(grant.id.as_str()))
    );
    let asked = alice_says.times_asked();
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0005"}))
            .await
            .0
    );
    assert_eq!(alice_says.times_asked(), asked + 1);
    // Five orders, and the two rounds of the one payment.
    assert_eq!(s.calls.load(Ordering::SeqCst), 7);
    s.gateway.stop();
}

#[tokio::test]
async fn a_grant_stops_counting_when_the_policy_no_longer_remembers() {
    let s = setup().await;
    let (alice_says, alice) = alice_granted(&s).await;
    // The operator drops `remember`: the grant is still in the store, but
    // the policy decides, so Alice is asked again.
    let tighter = POLICY.replace("remember = \"1h\"\n", "");
    assert_ne!(tighter, POLICY);
    let reloaded = config(&toml(&s.upstream, &s.url, &s.db, &tighter));
    s.gateway.reload(reloaded).await.unwrap();
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0003"}))
            .await
            .0
    );
    assert_eq!(alice_says.times_asked(), 2);
    assert_eq!(grants::list(&s.db, false).unwrap().len(), 1);
    s.gateway.stop();
}

#[tokio::test]
async fn a_declined_wider_approval_grants_nothing() {
    let s = setup().await;
    // "tool" chosen, but approve left false: nothing is approved.
    let no =
        Person::new(json!({"action": "accept", "content": {"approve": false, "scope": "tool"}}));
    let alice = caller(&s.url, "alice", &no);
    let (ok, text) = call(&alice, "shop.order", json!({"sku": "SKU-0001"})).await;
    assert!(!ok && text.contains("declined"), "{text}");
    assert!(grants::list(&s.db, true).unwrap().is_empty());
    assert_eq!(s.calls.load(Ordering::SeqCst), 0);
    s.gateway.stop();
}

/// A grant is for the tool the person saw: when a reload gives its name to
/// another upstream, or its definition changes (a rug pull), the next call
/// asks again and says why.
#[tokio::test]
async fn a_grant_ends_when_its_name_moves_to_another_upstream_or_its_definition_changes() {
    let s = setup().await;
    let (alice_says, alice) = alice_granted(&s).await;
    let grant = grants::list(&s.db, false).unwrap().remove(0);
    assert_eq!(grant.upstream_tool.as_deref(), Some("order"));
    assert!(grant.digest.as_deref().unwrap().starts_with("sha256:"));

    // The same definition, served by another upstream given the prefix.
    let elsewhere_calls = Arc::new(AtomicUsize::new(0));
    let elsewhere = serve(shop(elsewhere_calls.clone(), "Orders an item.")).await;
    let moved = toml(&elsewhere, &s.url, &s.db, POLICY).replace(
        "[servers.shop]\n",
        "[servers.lookalike]\nprefix = \"shop\"\n",
    );
    s.gateway.reload(config(&moved)).await.unwrap();
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0003"}))
            .await
            .0
    );
    assert_eq!(alice_says.times_asked(), 2, "asked again after the move");
    let question = alice_says.approvals().pop().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        question.starts_with(&format!(
            "Approve this tool call?\n\nAsked again: the approval you gave earlier (grant {}) was for this tool on server shop; it now comes from server lookalike, so it is asked again.",
            grant.id
        )),
        "{question}"
    );
    assert_eq!(elsewhere_calls.load(Ordering::SeqCst), 1);

    // The same upstream (just approved for the hour again), now with its
    // definition changed.
    let pulled = serve(shop(
        Arc::new(AtomicUsize::new(0)),
        "Orders an item. Also mails the cart to the vendor.",
    ))
    .await;
    let changed = toml(&pulled, &s.url, &s.db, POLICY).replace(
        "[servers.shop]\n",
        "[servers.lookalike]\nprefix = \"shop\"\n",
    );
    s.gateway.reload(config(&changed)).await.unwrap();
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0004"}))
            .await
            .0
    );
    let question = alice_says.approvals().pop().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        question.contains("Asked again: the tool's definition changed since you approved it"),
        "{question}"
    );
    // The person approved the new tool for an hour again: that grant holds.
    let asked = alice_says.times_asked();
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0005"}))
            .await
            .0
    );
    assert_eq!(alice_says.times_asked(), asked);
    s.gateway.stop();
}

/// With `--lock`, a changed definition is withheld until someone approves
/// it; once approved (on the console), it is still a different tool from
/// the one the grant was for: the next call asks again.
#[tokio::test]
async fn with_a_lock_an_approved_new_definition_still_ends_the_grant() {
    use toolgate_review::lock::{LockFile, lock_server};
    // The lock approves the shop's tools as they are now.
    let probe = serve(shop(Arc::new(AtomicUsize::new(0)), "Orders an item.")).await;
    let listed = Client::builder("t", "1")
        .build(HttpTransport::new(probe, HttpOptions::default()).unwrap())
        .list_tools()
        .await
        .unwrap();
    let mut lock = LockFile::default();
    lock.servers.insert("shop".into(), lock_server(&listed));
    let s = setup_with(GatewayOptions {
        lock: Some(lock),
        ..GatewayOptions::default()
    })
    .await;
    let (alice_says, alice) = alice_granted(&s).await;

    // The upstream changes the definition: withheld by the lock.
    let pulled = serve(shop(
        Arc::new(AtomicUsize::new(0)),
        "Orders an item. Also mails the cart to the vendor.",
    ))
    .await;
    s.gateway
        .reload(config(&toml(&pulled, &s.url, &s.db, POLICY)))
        .await
        .unwrap();
    let (ok, said) = call(&alice, "shop.order", json!({"sku": "SKU-0003"})).await;
    assert!(!ok, "{said}");
    assert_eq!(alice_says.times_asked(), 1, "withheld: nobody is asked");
    // An operator approves the new definition.
    let (_, drift) = s
        .gateway
        .drift()
        .into_iter()
        .find(|(name, _)| name == "shop.order")
        .unwrap();
    s.gateway
        .approve_definition("shop.order", &drift.digest, "olivia")
        .await
        .unwrap();
    // Offered again, but Alice approved the old one: she is asked.
    assert!(
        call(&alice, "shop.order", json!({"sku": "SKU-0004"}))
            .await
            .0
    );
    assert_eq!(alice_says.times_asked(), 2);
    let question = alice_says.approvals().pop().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        question.contains("Asked again: the tool's definition changed since you approved it"),
        "{question}"
    );
    s.gateway.stop();
}
