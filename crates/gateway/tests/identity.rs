//! `[servers.X.identity]`: the caller's identity reaches the upstream by
//! RFC 8693 token exchange at a real authorization server (npm's
//! oidc-provider), and the caller's own token never does.
//!
//! Run by `cargo xtask identity` (part of `cargo xtask ci`), which installs
//! Node and oidc-provider; without them each test says so and returns.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/oidc.rs"]
mod oidc;
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_client::Client;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_gateway::Gateway;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{
    JwtVerifier, RequestContext, ResourceServer, Server, TokenVerifier, ToolDef, VerifyFuture,
};

use support::toml_string;

/// Verifies with `inner`, and keeps every token it was shown.
struct Recording {
    inner: JwtVerifier,
    seen: Arc<Mutex<Vec<String>>>,
}

impl TokenVerifier for Recording {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        self.seen.lock().unwrap().push(token.to_owned());
        self.inner.verify(token)
    }
}

/// What the upstream's tools answer: the subject, audience and scopes of
/// the token the call came with.
fn who(ctx: &RequestContext) -> String {
    let auth = ctx.auth();
    let claims = auth.and_then(|a| a.claims()).cloned().unwrap_or_default();
    json!({
        "sub": auth.and_then(|a| a.subject()),
        "aud": claims.get("aud"),
        "scope": claims.get("scope"),
        "client_id": claims.get("client_id"),
    })
    .to_string()
}

/// An upstream that requires tokens from `issuer` for itself (at
/// `listener`), with `whoami` and `write_note`; the tokens it was shown.
fn upstream(issuer: &str, listener: TcpListener, url: &str) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let verifier = Recording {
        inner: JwtVerifier::from_jwks_url(&format!("{issuer}/jwks"), issuer, url).unwrap(),
        seen: seen.clone(),
    };
    let server = Server::builder("crm", "1")
        .tool(
            ToolDef::new("whoami")
                .description("Says whom the call is for.")
                .read_only()
                .handler(|ctx: RequestContext| async move { Ok(who(&ctx)) }),
        )
        .tool(
            ToolDef::new("write_note")
                .description("Writes a note as the caller.")
                .handler(|ctx: RequestContext| async move { Ok(who(&ctx)) }),
        )
        .build()
        .unwrap();
    let rs = ResourceServer::new(url, verifier)
        .unwrap()
        .authorization_server(issuer);
    let config = HttpConfig {
        auth: Some(Arc::new(rs)),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(server, config, listener));
    seen
}

async fn bound() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    (listener, url)
}

fn caller(url: &str, token: &str) -> Client {
    let options = HttpOptions {
        bearer_token: Some(token.to_owned()),
        ..HttpOptions::default()
    };
    Client::builder("test", "1")
        .timeout(Duration::from_secs(20))
        .build(HttpTransport::new(url, options).unwrap())
}

struct World {
    auth: oidc::AuthServer,
    gateway_url: String,
    crm_url: String,
    /// Tokens each upstream was shown.
    seen: Vec<Arc<Mutex<Vec<String>>>>,
    db: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _gateway: Gateway,
}

/// The authorization server, two upstreams (`crm`, and `odd`, whose
/// tokens the server issues for another audience) and the gateway in
/// front of both with token exchange.
async fn world(deny: &[&str]) -> World {
    let (gateway_listener, gateway_url) = bound().await;
    let (crm_listener, crm_url) = bound().await;
    let (odd_listener, odd_url) = bound().await;
    let mut resources = BTreeMap::new();
    resources.insert(gateway_url.clone(), ("mcp".to_owned(), None));
    resources.insert(
        crm_url.clone(),
        ("crm.read crm.write crm.admin".to_owned(), None),
    );
    resources.insert(
        odd_url.clone(),
        (
            "crm.read".to_owned(),
            Some("http://127.0.0.1:1/elsewhere".to_owned()),
        ),
    );
    let auth = oidc::start(&oidc::Setup {
        resources,
        deny: deny.iter().map(|s| (*s).to_owned()).collect(),
        ..oidc::Setup::default()
    })
    .await;
    let issuer = auth.issuer.clone();
    let seen = vec![
        upstream(&issuer, crm_listener, &crm_url),
        upstream(&issuer, odd_listener, &odd_url),
    ];
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let server = |name: &str, url: &str| {
        format!(
            r#"
[servers.{name}]
url = "{url}"
[servers.{name}.oauth]
client_id = "gateway"
client_secret = "{secret}"
issuer = "{issuer}"
[servers.{name}.identity]
mode = "exchange"
issuer = "{issuer}"
client_id = "gateway"
client_secret = "{secret}"
scopes = ["crm.read"]
[[servers.{name}.identity.tools]]
match = ["write_*"]
scopes = ["crm.read", "crm.write"]
"#,
            secret = oidc::GATEWAY_SECRET,
        )
    };
    let toml = format!(
        r#"{crm}{odd}
[audit]
path = {db}
[auth]
issuer = "{issuer}"
audience = "{gateway_url}"
jwks = "{issuer}/jwks"
"#,
        crm = server("crm", &crm_url),
        odd = server("odd", &odd_url),
        db = toml_string(&db.display().to_string()),
    );
    let gateway = oidc::serve_gateway(&toml, gateway_listener).await;
    World {
        auth,
        gateway_url,
        crm_url,
        seen,
        db,
        _dir: dir,
        _gateway: gateway,
    }
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

#[tokio::test]
#[ignore = "needs oidc-provider: run `cargo xtask identity`"]
async fn each_call_carries_a_token_exchanged_for_its_caller_and_never_the_callers_own() {
    if !oidc::available() {
        eprintln!("skipped: run `cargo xtask identity`");
        return;
    }
    let mut w = world(&["mallory"]).await;
    let issuer = w.auth.issuer.clone();
    let alice_token = oidc::sign_in(&issuer, "alice", &w.gateway_url, "mcp").await;
    let bob_token = oidc::sign_in(&issuer, "bob", &w.gateway_url, "mcp").await;
    let mallory_token = oidc::sign_in(&issuer, "mallory", &w.gateway_url, "mcp").await;
    let alice = caller(&w.gateway_url, &alice_token);

    // The upstream sees alice, for itself, with the scopes of the tool's
    // rule: crm.read for a read, and crm.write only where a rule adds it.
    let (ok, text) = oidc::call(&alice, "crm.whoami").await;
    assert!(ok, "{text}");
    let seen = parsed(&text);
    assert_eq!(seen["sub"], "alice");
    assert_eq!(seen["aud"], w.crm_url.as_str());
    assert_eq!(seen["scope"], "crm.read");
    assert_eq!(seen["client_id"], "gateway");
    let (ok, text) = oidc::call(&alice, "crm.write_note").await;
    assert!(ok, "{text}");
    assert_eq!(parsed(&text)["scope"], "crm.read crm.write");

    // Another caller is another identity upstream.
    let (ok, text) = oidc::call(&caller(&w.gateway_url, &bob_token), "crm.whoami").await;
    assert!(ok, "{text}");
    assert_eq!(parsed(&text)["sub"], "bob");

    // The authorization server refuses mallory: an isError that says so,
    // with no token in it, and nothing reaches the upstream for her.
    let (ok, text) = oidc::call(&caller(&w.gateway_url, &mallory_token), "crm.whoami").await;
    assert!(!ok);
    assert!(
        text.contains("lack access to the upstream server crm"),
        "{text}"
    );
    assert!(!text.contains(&mallory_token[..20]), "{text}");

    // A token issued for another audience is refused, not passed on.
    let (ok, text) = oidc::call(&alice, "odd.whoami").await;
    assert!(!ok);
    assert!(text.contains("another audience"), "{text}");

    // A second read by alice reuses the token obtained for the first.
    let before = w.seen[0].lock().unwrap().len();
    let (ok, _) = oidc::call(&alice, "crm.whoami").await;
    assert!(ok);
    let crm_seen = w.seen[0].lock().unwrap().clone();
    let alice_read: std::collections::BTreeSet<&String> = crm_seen
        .iter()
        .filter(|t| {
            let c = oidc::claims(t);
            c["sub"] == "alice" && c["scope"] == "crm.read"
        })
        .collect();
    assert_eq!(alice_read.len(), 1, "one exchange for alice's reads");
    assert!(crm_seen.len() > before);

    // The authorization server goes down: alice's kept token still serves
    // her reads; a caller with none kept fails at once, saying why.
    w.auth.stop().await;
    let (ok, text) = oidc::call(&alice, "crm.whoami").await;
    assert!(ok, "{text}");
    // (bob's token kept is for reads; a write asks for more scopes.)
    let (ok, text) = oidc::call(&caller(&w.gateway_url, &bob_token), "crm.write_note").await;
    assert!(!ok);
    assert!(text.contains("cannot be reached"), "{text}");

    // No upstream ever received a token for the gateway, nor a caller's.
    let callers = [&alice_token, &bob_token, &mallory_token];
    for seen in &w.seen {
        for token in seen.lock().unwrap().iter() {
            assert!(!callers.contains(&token), "a caller's token went upstream");
            let aud = oidc::claims(token)["aud"].clone();
            assert_ne!(
                aud,
                w.gateway_url.as_str(),
                "a token for the gateway went upstream"
            );
        }
    }

    // The audit store says whose identity each call carried, and why the
    // others ended.
    let rows = query(&w.db, &Filter::default()).unwrap();
    let identities: Vec<Option<&str>> = rows.iter().map(|r| r.identity.as_deref()).collect();
    assert!(
        identities.contains(&Some("alice (exchange)")),
        "{identities:?}"
    );
    assert!(
        identities.contains(&Some("bob (exchange)")),
        "{identities:?}"
    );
    let statuses: Vec<&str> = rows.iter().map(|r| r.status.as_str()).collect();
    assert!(statuses.contains(&"identity_refused"), "{statuses:?}");
    assert!(statuses.contains(&"identity_failed"), "{statuses:?}");
    assert!(statuses.contains(&"identity_unavailable"), "{statuses:?}");
}

/// Without a verified caller there is nothing to act on, and with the
/// authorization server unreachable nothing to send: each call ends at
/// the gateway with an isError that says so, and the upstream is never
/// called. (No authorization server is needed: none is reached.)
#[tokio::test]
async fn a_call_with_no_caller_or_no_reachable_authorization_server_is_refused_saying_why() {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let upstream = support::serve(support::shop(calls.clone(), "Orders an item.")).await;
    let (listener, url) = bound().await;
    let jwks =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/auth/jwks.json");
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let toml = format!(
        r#"[servers.shop]
url = "{upstream}"
[servers.shop.identity]
mode = "exchange"
token_endpoint = "{dead}/token"
client_id = "gateway"
client_secret = "s"
[auth]
issuer = "{issuer}"
audience = "{url}"
jwks = {jwks}
"#,
        issuer = support::ISSUER,
        jwks = toml_string(&jwks.display().to_string()),
    );
    let gateway = oidc::serve_gateway(&toml, listener).await;

    // In process, no token was presented: nothing to exchange.
    let local = support::downstream(&gateway).await;
    let (ok, text) = support::outcome_of(&local, "shop.order", json!({"sku": "SKU-0001"})).await;
    assert!(!ok);
    assert!(text.contains("no verified caller token"), "{text}");

    // A verified caller, and the authorization server is down.
    let token = support::token("alice", &url, "");
    let alice = caller(&url, &token);
    let (ok, text) = support::outcome_of(&alice, "shop.order", json!({"sku": "SKU-0001"})).await;
    assert!(!ok);
    assert!(text.contains("cannot be reached"), "{text}");
    assert!(!text.contains(&token[..24]), "{text}");
    // Asked again within the pause, it is refused without trying.
    let (ok, text) = support::outcome_of(&alice, "shop.order", json!({"sku": "SKU-0001"})).await;
    assert!(!ok && text.contains("cannot be reached"), "{text}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}
