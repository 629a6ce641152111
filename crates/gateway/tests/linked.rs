//! Linked accounts (`[servers.X.identity] mode = "user"`) where no
//! authorization server answers: the connect page refuses what it must
//! not act on, a changed state key makes stored accounts unreadable (the
//! person is asked to link again, nothing crashes), and an unreachable
//! authorization server leaves a still-valid token in use.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use toolgate_gateway::GatewayOptions;
use toolgate_gateway::call::identity::{NoToken, UpstreamIdentity};
use toolgate_gateway::call::linked::{Held, Linking, unix_now};
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::accounts::{AccountStore, MemoryAccounts};
use toolgate_gateway::store::state_key::StateSecret;
use toolgate_server::AuthContext;

use support::{http, toml_string};

/// An address nothing listens on.
fn dead() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

/// A gateway configuration with an upstream in `mode = "user"` whose
/// authorization server is `as_url`, callers from `issuer` for
/// `audience`, a state key in `dir`, and `section` (the page or console).
async fn user_mode(
    dir: &std::path::Path,
    as_url: &str,
    issuer: &str,
    audience: &str,
    section: &str,
) -> String {
    let key = dir.join("state.key");
    std::fs::write(&key, "k".repeat(48)).unwrap();
    let jwks =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/auth/jwks.json");
    let upstream = support::serve(support::shop(Arc::default(), "Orders an item.")).await;
    format!(
        r#"[servers.crm]
url = "{upstream}"
[servers.crm.identity]
mode = "user"
token_endpoint = "{as_url}/token"
authorization_endpoint = "{as_url}/auth"
client_id = "gateway"
[state]
key_file = {key}
{section}[auth]
issuer = "{issuer}"
audience = "{audience}"
jwks = {jwks}
[auth.sign_in]
client_id = "connect"
"#,
        key = toml_string(&key.display().to_string()),
        jwks = toml_string(&jwks.display().to_string()),
    )
}

fn user_identity(issuer: &str) -> UpstreamIdentity {
    let toml = format!(
        r#"[servers.crm]
url = "http://127.0.0.1:9/mcp"
[servers.crm.identity]
mode = "user"
token_endpoint = "{issuer}/token"
authorization_endpoint = "{issuer}/auth"
client_id = "gateway"
scopes = ["crm.read"]
[approval]
page = true
[auth]
issuer = "{issuer}"
audience = "http://127.0.0.1:9/gw"
jwks = "j.json"
[auth.sign_in]
client_id = "connect"
"#
    );
    let config = GatewayConfig::parse_toml(&toml, |_| None).unwrap();
    let crm = &config.servers["crm"];
    UpstreamIdentity::new(
        "crm",
        "http://127.0.0.1:9/mcp",
        crm.identity.as_ref().unwrap(),
    )
}

fn held(expires_in: i64) -> Held {
    Held {
        access_token: "stored-access".into(),
        refresh_token: Some("stored-refresh".into()),
        expires_at: Some((unix_now() as i64 + expires_in) as u64),
        scope: Some("crm.read".into()),
    }
}

#[tokio::test]
async fn a_changed_state_key_makes_accounts_unreadable_and_asks_to_link_again() {
    let store: Arc<dyn AccountStore> = Arc::new(MemoryAccounts::default());
    let before = Linking::new(
        &StateSecret::from_text(&"a".repeat(40)).unwrap(),
        store.clone(),
        "http://127.0.0.1:8790",
    );
    before.save("alice", "crm", &held(600)).await.unwrap();
    let after = Linking::new(
        &StateSecret::from_text(&"b".repeat(40)).unwrap(),
        store.clone(),
        "http://127.0.0.1:8790",
    );
    let identity = user_identity(&dead());
    let alice = AuthContext::new("alice");
    let got = identity
        .token_for(Some(&alice), "whoami", Some(&after))
        .await;
    assert!(
        matches!(&got, Err(NoToken::NotLinked(why)) if why.contains("link it again")),
        "{:?}",
        got.err()
    );
    // The unreadable row is gone: the next call asks to link, plainly.
    assert!(
        store
            .account("alice".into(), "crm".into())
            .await
            .unwrap()
            .is_none()
    );
    let got = identity
        .token_for(Some(&alice), "whoami", Some(&after))
        .await;
    assert!(matches!(got, Err(NoToken::NotLinked(_))));
}

#[tokio::test]
async fn while_the_authorization_server_is_down_a_valid_token_is_still_sent() {
    let store: Arc<dyn AccountStore> = Arc::new(MemoryAccounts::default());
    let linking = Linking::new(
        &StateSecret::from_text(&"a".repeat(40)).unwrap(),
        store,
        "http://127.0.0.1:8790",
    );
    let identity = user_identity(&dead());
    // 30 s left: due for a refresh, which cannot be made; still valid.
    linking.save("alice", "crm", &held(30)).await.unwrap();
    let alice = AuthContext::new("alice");
    let got = identity
        .token_for(Some(&alice), "whoami", Some(&linking))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(got.bearer.expose(), "stored-access");
    assert_eq!(got.label, "alice (user)");
    // Expired: nothing to send, and the caller is told the server is down.
    linking.save("bob", "crm", &held(-10)).await.unwrap();
    let bob = AuthContext::new("bob");
    let got = identity
        .token_for(Some(&bob), "whoami", Some(&linking))
        .await;
    assert!(matches!(got, Err(NoToken::Unavailable)), "{:?}", got.err());
    // No caller, no account.
    let got = identity.token_for(None, "whoami", Some(&linking)).await;
    assert!(matches!(got, Err(NoToken::NoCaller)));
}

#[tokio::test]
async fn the_connect_page_refuses_what_it_must_not_act_on() {
    let dir = tempfile::tempdir().unwrap();
    let as_url = dead();
    let toml = user_mode(
        dir.path(),
        &as_url,
        &as_url,
        "http://127.0.0.1:9/mcp",
        "[approval]\npage = true\nlisten = \"127.0.0.1:0\"\n",
    )
    .await;
    let config = support::config(&toml);
    let gateway = support::start(config, GatewayOptions::default())
        .await
        .unwrap();
    let base = gateway.site().unwrap().base.clone();
    let linking = gateway.linking().unwrap().clone();

    // Not a ticket, a ticket of a megabyte, a ticket for another upstream.
    for ticket in ["nonsense", &"A".repeat(9_000)] {
        let (status, body) = http(
            "GET",
            &format!("{base}/connect/crm?ticket={ticket}"),
            &[],
            None,
        )
        .await;
        assert_eq!(status, 400, "{body:.300}");
        assert!(body.contains("does not work"));
    }
    // A megabyte of it is refused by the HTTP layer, short.
    let (status, _) = http(
        "GET",
        &format!("{base}/connect/crm?ticket={}", "A".repeat(1 << 20)),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 431);
    let good = linking.connect_url("alice", "crm");
    let ticket = good.split("ticket=").nth(1).unwrap();
    let (status, _) = http(
        "GET",
        &format!("{base}/connect/git?ticket={ticket}"),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 400);
    // A good ticket goes on to sign in — at a server that is down: said
    // plainly, nothing linked.
    let (status, body) = http("GET", &good, &[], None).await;
    assert_eq!(status, 502, "{body:.300}");
    assert!(body.contains("Sign-in is unavailable"));
    // The later steps without the flow's cookie, with a forged one, or
    // with another state: refused before any code is used.
    for headers in [vec![], vec![("Cookie", "toolgate_connect=forged")]] {
        for step in ["signed-in", "callback"] {
            let (status, body) = http(
                "GET",
                &format!("{base}/connect/{step}?code=c&state=s"),
                &headers,
                None,
            )
            .await;
            assert_eq!(status, 400, "{step}: {body:.300}");
            assert!(body.contains("did not start here"));
        }
    }
    // Another host (DNS rebinding) is refused.
    let (status, _) = http("GET", &good, &[("Host", "evil.example")], None).await;
    assert_eq!(status, 421);
    // Nothing was linked.
    assert!(linking.load("alice", "crm").await.unwrap().is_none());
    gateway.stop();
}

/// The cookie (`name=value`) a `Set-Cookie` line of `response` sets.
fn cookie_of(response: &str) -> String {
    let line = response
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap();
    let pair = line.split_once(':').unwrap().1.trim();
    pair.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn the_console_shows_a_person_their_own_linked_accounts_and_unlinks_them() {
    const AUDIENCE: &str = "https://gateway.test/mcp";
    let dir = tempfile::tempdir().unwrap();
    let section = format!(
        "[console]\nlisten = \"127.0.0.1:0\"\n[audit]\npath = {}\n",
        toml_string(&dir.path().join("audit.db").display().to_string())
    );
    let toml = user_mode(dir.path(), &dead(), support::ISSUER, AUDIENCE, &section).await;
    let gateway = support::start(support::config(&toml), GatewayOptions::default())
        .await
        .unwrap();
    let site = gateway.site().unwrap().clone();
    let base = site.base.clone();
    let linking = gateway.linking().unwrap().clone();
    // Kept in the SQLite store, sealed.
    linking.save("olivia", "crm", &held(600)).await.unwrap();
    linking.save("bob", "crm", &held(600)).await.unwrap();

    // Logged in with the link: no one in particular, so no accounts.
    let link_session = support::log_in(&site.logins.link()).await;
    let (status, page) = http(
        "GET",
        &format!("{base}/console/accounts"),
        &[("Cookie", &link_session)],
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(page.contains("Log in with your own token"), "{page:.600}");

    // Olivia, with her token: hers, not bob's.
    let origin = support::origin_of(&base);
    let token = support::token("olivia", AUDIENCE, "toolgate:operator");
    let (status, answer) = http(
        "POST",
        &format!("{base}/login"),
        &[("Origin", &origin)],
        Some(&format!("token={token}")),
    )
    .await;
    assert_eq!(status, 303, "{answer:.600}");
    let cookie = cookie_of(&answer);
    let (status, page) = http(
        "GET",
        &format!("{base}/console/accounts"),
        &[("Cookie", &cookie)],
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        page.contains("Accounts of <strong>olivia</strong>"),
        "{page:.800}"
    );
    assert!(page.contains("id=\"unlink-crm\""), "{page:.800}");
    assert!(!page.contains("bob"));
    // Not one token, sealed or not, is on the page.
    assert!(!page.contains("stored-access") && !page.contains("stored-refresh"));

    // Unlinking needs the page's own form (its token, its origin).
    let unlink = format!("{base}/console/accounts/crm/unlink");
    let (status, _) = http(
        "POST",
        &unlink,
        &[("Cookie", &cookie), ("Origin", &origin)],
        Some("token=forged"),
    )
    .await;
    assert_eq!(status, 403);
    let form_token = support::page_token(&format!("{base}/console/accounts"), &cookie).await;
    let (status, _) = http(
        "POST",
        &unlink,
        &[("Cookie", &cookie), ("Origin", &origin)],
        Some(&format!("token={form_token}")),
    )
    .await;
    assert_eq!(status, 303);
    assert!(linking.load("olivia", "crm").await.unwrap().is_none());
    assert!(
        linking.load("bob", "crm").await.unwrap().is_some(),
        "bob's stays"
    );
    // Unlinking again: there is none.
    let (status, _) = http(
        "POST",
        &unlink,
        &[("Cookie", &cookie), ("Origin", &origin)],
        Some(&format!("token={form_token}")),
    )
    .await;
    assert_eq!(status, 404);
    gateway.stop();
}
