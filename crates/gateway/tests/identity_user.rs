//! `[servers.X.identity] mode = "user"`: a person links their own account
//! at an upstream on the gateway's connect page — driven in headless
//! Chromium against npm's oidc-provider — and their calls then carry it;
//! a link opened by someone else links nothing; a revoked authorization
//! asks them to link again.
//!
//! Run by `cargo xtask identity` (part of `cargo xtask ci`), which installs
//! Node, oidc-provider and Chromium; without them each test says so and
//! returns.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/browser.rs"]
mod browser;
#[path = "support/oidc.rs"]
mod oidc;
mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fantoccini::Locator;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, Client, ClientError, InputHandler};
use toolgate_protocol::types::{ClientCapabilities, ElicitRequestParams, ElicitResult};
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{
    JwtVerifier, RequestContext, ResourceServer, Server, TokenError, TokenVerifier, ToolDef,
    VerifyFuture,
};

use support::toml_string;

/// Verifies with `inner`, keeps every token it was shown, and refuses
/// those revoked (as an upstream told of a revocation would).
struct Upstream {
    inner: JwtVerifier,
    seen: Arc<Mutex<Vec<String>>>,
    revoked: Arc<Mutex<HashSet<String>>>,
}

impl TokenVerifier for Upstream {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        self.seen.lock().unwrap().push(token.to_owned());
        if self.revoked.lock().unwrap().contains(token) {
            return Box::pin(async { Err(TokenError::Invalid("revoked".into())) });
        }
        self.inner.verify(token)
    }
}

/// Drives the browser through whatever an authorization server or the
/// gateway shows, signing in as `login`; the gateway's last page's text.
async fn walk(browser: &fantoccini::Client, url: &str, login: &str) -> String {
    browser.goto(url).await.unwrap();
    for _ in 0..12 {
        browser
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::XPath(
                "//h1 | //input[@name='login'] | //button[@type='submit']",
            ))
            .await
            .unwrap();
        let source = browser.source().await.unwrap();
        if source.contains("name=\"login\"") {
            let field = browser
                .find(Locator::Css("input[name=login]"))
                .await
                .unwrap();
            field.send_keys(login).await.unwrap();
            let pass = browser
                .find(Locator::Css("input[name=password]"))
                .await
                .unwrap();
            pass.send_keys("x").await.unwrap();
        } else if !source.contains("value=\"consent\"") {
            return browser
                .find(Locator::Css("body"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
        }
        let button = browser
            .find(Locator::Css("button[type=submit]"))
            .await
            .unwrap();
        button.click().await.unwrap();
        // Until the page the button was on has gone (its element stale):
        // the next page is then the one the redirects ended at.
        for _ in 0..2_000 {
            if button.is_displayed().await.is_err() {
                break;
            }
        }
    }
    panic!("the browser never reached the gateway's answer")
}

/// A caller's client that can open links: each URL elicitation is
/// recorded and, when `follow`, walked in the browser as `login`.
struct Person {
    browser: fantoccini::Client,
    login: String,
    follow: bool,
    links: Arc<Mutex<Vec<String>>>,
    pages: Arc<Mutex<Vec<String>>>,
}

impl InputHandler for Person {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {"url": {}}})).unwrap()
    }

    fn elicit(
        &self,
        request: ElicitRequestParams,
    ) -> BoxFuture<'_, Result<ElicitResult, ClientError>> {
        Box::pin(async move {
            let url = request.url.unwrap_or_default();
            self.links.lock().unwrap().push(url.clone());
            if !self.follow {
                return Ok(serde_json::from_value(json!({"action": "decline"})).unwrap());
            }
            let page = walk(&self.browser, &url, &self.login).await;
            self.pages.lock().unwrap().push(page);
            Ok(serde_json::from_value(json!({"action": "accept"})).unwrap())
        })
    }
}

fn client(url: &str, token: &str, person: Option<Person>) -> Client {
    let options = HttpOptions {
        bearer_token: Some(token.to_owned()),
        ..HttpOptions::default()
    };
    let builder = Client::builder("test", "1").timeout(Duration::from_secs(120));
    let builder = match person {
        Some(p) => builder.input_handler(p),
        None => builder,
    };
    builder.build(HttpTransport::new(url, options).unwrap())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs oidc-provider and Chromium: run `cargo xtask identity`"]
async fn a_person_links_their_account_once_and_their_calls_carry_it() {
    if !oidc::available() {
        eprintln!("skipped: run `cargo xtask identity`");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let gateway_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway_url = format!("http://{}/mcp", gateway_listener.local_addr().unwrap());
    let crm_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let crm_url = format!("http://{}/mcp", crm_listener.local_addr().unwrap());
    let page = format!("http://127.0.0.1:{}", free_port());
    let mut resources = BTreeMap::new();
    resources.insert(gateway_url.clone(), ("mcp".to_owned(), None));
    resources.insert(crm_url.clone(), ("crm.read crm.write".to_owned(), None));
    let setup = oidc::Setup {
        resources,
        // Shorter than the minute a linked token is kept fresh for: every
        // call that reads the store refreshes.
        ttl: 30,
        gateway_redirect: Some(format!("{page}/connect/callback")),
        sign_in_redirect: Some(format!("{page}/connect/signed-in")),
        port: Some(free_port()),
        key_file: Some(dir.path().join("as-key.json")),
        ..oidc::Setup::default()
    };
    let mut auth = oidc::start(&setup).await;
    let issuer = auth.issuer.clone();

    // The upstream: whoami says whose token the call came with.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let revoked = Arc::new(Mutex::new(HashSet::new()));
    let verifier = Upstream {
        inner: JwtVerifier::from_jwks_url(&format!("{issuer}/jwks"), &issuer, &crm_url).unwrap(),
        seen: seen.clone(),
        revoked: revoked.clone(),
    };
    let crm = Server::builder("crm", "1")
        .tool(
            ToolDef::new("whoami")
                .description("Says whom the call is for.")
                .read_only()
                .handler(|ctx: RequestContext| async move {
                    let claims = ctx.auth().and_then(|a| a.claims()).cloned().unwrap_or_default();
                    Ok(json!({"sub": claims.get("sub"), "aud": claims.get("aud"), "client_id": claims.get("client_id")}).to_string())
                }),
        )
        .build()
        .unwrap();
    let rs = ResourceServer::new(&crm_url, verifier)
        .unwrap()
        .authorization_server(&issuer);
    tokio::spawn(serve_listener(
        crm,
        HttpConfig {
            auth: Some(Arc::new(rs)),
            ..HttpConfig::default()
        },
        crm_listener,
    ));

    // The gateway, its page on `page`, accounts sealed in its SQLite store.
    let key_file = dir.path().join("state.key");
    std::fs::write(&key_file, "s".repeat(48)).unwrap();
    let toml = format!(
        r#"[servers.crm]
url = "{crm_url}"
[servers.crm.oauth]
client_id = "gateway"
client_secret = "{secret}"
issuer = "{issuer}"
[servers.crm.identity]
mode = "user"
issuer = "{issuer}"
client_id = "gateway"
client_secret = "{secret}"
scopes = ["crm.read"]
[audit]
path = {db}
[state]
key_file = {key}
[approval]
page = true
listen = "{listen}"
[auth]
issuer = "{issuer}"
audience = "{gateway_url}"
jwks = "{issuer}/jwks"
[auth.sign_in]
client_id = "connect"
"#,
        secret = oidc::GATEWAY_SECRET,
        db = toml_string(&dir.path().join("audit.db").display().to_string()),
        key = toml_string(&key_file.display().to_string()),
        listen = page.trim_start_matches("http://"),
    );
    let _gateway = oidc::serve_gateway(&toml, gateway_listener).await;

    let chrome = browser::chromium(1000, 900).await;
    let alice_token = oidc::sign_in(&issuer, "alice", &gateway_url, "mcp").await;
    let bob_token = oidc::sign_in(&issuer, "bob", &gateway_url, "mcp").await;
    let person = |login: &str, follow: bool| {
        let links = Arc::new(Mutex::new(Vec::new()));
        let pages = Arc::new(Mutex::new(Vec::new()));
        (
            Person {
                browser: chrome.client.clone(),
                login: login.to_owned(),
                follow,
                links: links.clone(),
                pages: pages.clone(),
            },
            links,
            pages,
        )
    };

    // Alice's first call sends her to link her account; once she has,
    // the call goes on, as her.
    let (alice_person, alice_links, alice_pages) = person("alice", true);
    let alice = client(&gateway_url, &alice_token, Some(alice_person));
    let (ok, text) = oidc::call(&alice, "crm.whoami").await;
    assert!(ok, "{text} / pages: {:?}", alice_pages.lock().unwrap());
    let claims: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["aud"], crm_url.as_str());
    assert_eq!(claims["client_id"], "gateway");
    assert_eq!(alice_links.lock().unwrap().len(), 1);
    assert!(alice_pages.lock().unwrap()[0].contains("is linked"));
    chrome.screenshot("connect-linked").await;
    // Her next call needs nothing of her.
    let (ok, _) = oidc::call(&alice, "crm.whoami").await;
    assert!(ok);
    assert_eq!(alice_links.lock().unwrap().len(), 1);

    // Bob declines; his link, opened in a browser signed in as alice,
    // links nothing.
    let (bob_person, bob_links, _) = person("bob", false);
    let bob = client(&gateway_url, &bob_token, Some(bob_person));
    let (ok, text) = oidc::call(&bob, "crm.whoami").await;
    assert!(!ok && text.contains("chose not to link"), "{text}");
    let bobs_link = bob_links.lock().unwrap()[0].clone();
    assert!(bobs_link.starts_with(&format!("{page}/connect/crm?ticket=")));
    assert!(
        !bobs_link.contains("bob"),
        "the subject is sealed: {bobs_link}"
    );
    let stolen = walk(&chrome.client, &bobs_link, "alice").await;
    assert!(stolen.contains("for someone else"), "{stolen}");
    chrome.screenshot("connect-stolen-link").await;
    let (ok, _) = oidc::call(&bob, "crm.whoami").await;
    assert!(!ok, "bob has no account");
    assert_eq!(bob_links.lock().unwrap().len(), 2);

    // A client that cannot open links gets the link in the answer.
    let plain = client(&gateway_url, &bob_token, None);
    let (ok, text) = oidc::call(&plain, "crm.whoami").await;
    assert!(!ok);
    assert!(
        text.contains(&format!("{page}/connect/crm?ticket=")),
        "{text}"
    );

    // The authorization server forgets every grant (its refresh tokens
    // revoked), and the upstream refuses alice's tokens: her next call is
    // refused upstream; the one after asks her to link again, and goes on.
    auth.stop().await;
    let _auth = oidc::start(&setup).await;
    revoked
        .lock()
        .unwrap()
        .extend(seen.lock().unwrap().iter().cloned());
    let (ok, text) = oidc::call(&alice, "crm.whoami").await;
    assert!(!ok, "{text}");
    let (ok, text) = oidc::call(&alice, "crm.whoami").await;
    assert!(ok, "{text} / pages: {:?}", alice_pages.lock().unwrap());
    assert_eq!(parse_sub(&text), "alice");
    assert_eq!(alice_links.lock().unwrap().len(), 2);

    // No upstream saw a caller's token, or one for the gateway.
    for token in seen.lock().unwrap().iter() {
        assert!(token != &alice_token && token != &bob_token);
        assert_ne!(oidc::claims(token)["aud"], gateway_url.as_str());
    }
}

fn parse_sub(text: &str) -> String {
    serde_json::from_str::<Value>(text).unwrap()["sub"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
