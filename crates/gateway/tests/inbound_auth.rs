//! `[auth]`: verified callers, policy rules on subjects and scopes, and
//! lists that show each caller only what it may call.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{Client, ClientError};
use toolgate_gateway::store::AuditRow;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_server::transport::http::{HttpConfig, serve_listener};

use support::{ISSUER, config, http, serve, shop, token, tool_names};

fn caller(url: &str, token: Option<String>) -> Client {
    let options = HttpOptions {
        bearer_token: token,
        ..HttpOptions::default()
    };
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .build(HttpTransport::new(url, options).unwrap())
}

/// A caller whose client can answer questions (it never gets to here).
fn asking_caller(url: &str, token: String) -> Client {
    let options = HttpOptions {
        bearer_token: Some(token),
        ..HttpOptions::default()
    };
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(support::Yes)
        .build(HttpTransport::new(url, options).unwrap())
}

/// The audit store's newest row.
fn last_row(db: &std::path::Path) -> AuditRow {
    query(db, &Filter::default()).unwrap().pop().unwrap()
}

/// A row's caller, tool and status.
fn who_what_how(row: &AuditRow) -> (Option<&str>, &str, &str) {
    (
        row.caller.as_deref(),
        row.tool.as_str(),
        row.status.as_str(),
    )
}

#[tokio::test]
async fn callers_are_verified_and_see_only_the_tools_their_rules_allow() {
    let upstream = serve(shop(Arc::default(), "Orders an item.")).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let jwks =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/auth/jwks.json");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let toml = format!(
        r#"[servers.shop]
url = "{upstream}"
[audit]
path = {db}
[auth]
issuer = "{ISSUER}"
audience = "{url}"
jwks = {jwks}
scopes_supported = ["shop:buy"]
[policy]
default = "allow"
[[policy.rules]]
tools = ["shop.pay"]
subjects = ["alice"]
scopes = ["shop:buy"]
action = "allow"
[[policy.rules]]
tools = ["shop.pay"]
action = "deny"
"#,
        jwks = support::toml_string(&jwks.display().to_string()),
        db = support::toml_string(&db.display().to_string()),
    );
    let config = config(&toml);
    let rs = config.auth.as_ref().unwrap().resource_server().unwrap();
    let gateway = Gateway::start(config, GatewayOptions::default())
        .await
        .unwrap();
    let http_config = HttpConfig {
        auth: Some(Arc::new(rs)),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(gateway.server(), http_config, listener));

    // No token: 401 with the challenge, and the metadata that explains it.
    let anonymous = caller(&url, None);
    match anonymous.list_tools().await {
        Err(ClientError::LoginRequired(text)) => assert!(text.contains("HTTP 401"), "{text}"),
        other => panic!("{other:?}"),
    }
    let metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    let (status, body) = http("GET", &metadata, &[], None).await;
    assert_eq!(status, 200);
    assert!(body.contains(ISSUER) && body.contains("shop:buy"), "{body}");

    // A token for another audience is refused like no token at all.
    let stranger = caller(
        &url,
        Some(token(
            "alice",
            "https://elsewhere.example.com/mcp",
            "shop:buy",
        )),
    );
    assert!(matches!(
        stranger.list_tools().await,
        Err(ClientError::LoginRequired(_))
    ));

    // Bob may not pay: the tool is not even listed for him.
    let bob = caller(&url, Some(token("bob", &url, "shop:buy")));
    let names = tool_names(&bob).await;
    assert!(
        names.contains(&"shop.order".to_owned()) && !names.contains(&"shop.pay".to_owned()),
        "{names:?}"
    );
    // Alice without the scope neither; with it, she sees and calls it.
    let alice_plain = caller(&url, Some(token("alice", &url, "")));
    assert!(
        !tool_names(&alice_plain)
            .await
            .contains(&"shop.pay".to_owned())
    );
    let alice = caller(&url, Some(token("alice", &url, "shop:buy")));
    assert!(tool_names(&alice).await.contains(&"shop.pay".to_owned()));
    let raw = alice
        .request(
            "tools/list",
            support::args(json!({})),
            &toolgate_client::CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(raw["cacheScope"], "private", "lists differ per caller");
    // Bob still gets served after all this.
    assert!(tool_names(&bob).await.contains(&"shop.order".to_owned()));

    // Bob calls the tool hidden from him anyway: it is unknown to him, and
    // the refusal is recorded with the rule that made it.
    let options = toolgate_client::CallOptions::default();
    let pay = support::args(json!({"name": "shop.pay", "arguments": {}}));
    match bob.request("tools/call", pay, &options).await {
        Err(ClientError::Protocol(e)) => {
            assert_eq!(
                (e.code, e.message.as_str()),
                (-32602, "Unknown tool: \"shop.pay\"")
            );
        }
        other => panic!("{other:?}"),
    }
    let row = last_row(&db);
    assert_eq!(
        (row.decision.as_deref(), row.rule.as_deref()),
        (Some("deny"), Some("rule 2 (tools [\"shop.pay\"])"))
    );
    assert_eq!(who_what_how(&row), (Some("bob"), "shop.pay", "denied"));
    assert_eq!(row.upstream.as_deref(), Some("shop"));

    // A state issued to Alice, presented by Bob: refused, and recorded as
    // moved, under Bob's name.
    let alice = asking_caller(&url, token("alice", &url, ""));
    let state = match alice
        .call_tool_round("shop.greet", serde_json::Map::new(), None, &options)
        .await
        .unwrap()
    {
        toolgate_client::CallRound::InputRequired { request_state, .. } => request_state.unwrap(),
        other => panic!("not asked: {other:?}"),
    };
    let bob = asking_caller(&url, token("bob", &url, ""));
    let retry = toolgate_client::RoundInput {
        input_responses: serde_json::Map::new(),
        request_state: Some(state),
    };
    match bob
        .call_tool_round("shop.greet", serde_json::Map::new(), Some(retry), &options)
        .await
    {
        Err(ClientError::Protocol(e)) => {
            assert_eq!(e.code, -32602);
            assert!(
                e.message.contains("issued to a different caller"),
                "{}",
                e.message
            );
        }
        other => panic!("{other:?}"),
    }
    let row = last_row(&db);
    assert_eq!(who_what_how(&row), (Some("bob"), "shop.greet", "moved"));
    // And Bob is still served.
    assert!(tool_names(&bob).await.contains(&"shop.order".to_owned()));
    gateway.stop();
}

#[test]
fn an_auth_section_that_cannot_work_is_refused_at_start() {
    let bad = [
        (
            "[auth]\nissuer = \"https://a\"\naudience = \"not a url\"\njwks = \"/nonexistent/jwks.json\"\n",
            "jwks /nonexistent/jwks.json",
        ),
        (
            "[auth]\nissuer = \"https://a\"\njwks = \"x\"\n",
            "missing field `audience`",
        ),
    ];
    for (toml, expected) in bad {
        let error = match toolgate_gateway::config::GatewayConfig::parse_toml(toml, |_| None) {
            Ok(c) => c.auth.unwrap().resource_server().unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(expected), "{error}");
    }
}
