//! An upstream that requires OAuth: the gateway authenticates as itself
//! with the configured client credentials, never with a caller's token.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::net::TcpListener;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{AuthContext, ResourceServer, TokenError, TokenVerifier, VerifyFuture};

use support::{config, downstream, serve, shop, tool_names};

fn json_body(v: &serde_json::Value) -> impl IntoResponse + use<> {
    ([("content-type", "application/json")], v.to_string())
}

/// An authorization server for `client_credentials` with
/// `client_secret_basic`; the tokens it issued.
async fn authorization_server(secret: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let issued = Arc::new(Mutex::new(Vec::new()));
    let meta = json!({
        "issuer": base,
        "token_endpoint": format!("{base}/token"),
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    });
    let tokens = issued.clone();
    let app = axum::Router::new()
        .route("/.well-known/oauth-authorization-server", get(move || async move { json_body(&meta) }))
        .route(
            "/token",
            post(move |headers: axum::http::HeaderMap, body: String| async move {
                use base64::Engine as _;
                let expected = base64::engine::general_purpose::STANDARD.encode(format!("gw:{secret}"));
                let given = headers.get("authorization").and_then(|v| v.to_str().ok());
                let resp: Response = if given == Some(&format!("Basic {expected}")) && body.contains("grant_type=client_credentials") {
                    let token = format!("gw-token-{}", tokens.lock().unwrap().len());
                    tokens.lock().unwrap().push(token.clone());
                    json_body(&json!({"access_token": token, "token_type": "Bearer", "expires_in": 600})).into_response()
                } else {
                    (axum::http::StatusCode::UNAUTHORIZED, json_body(&json!({"error": "invalid_client"}))).into_response()
                };
                resp
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, issued)
}

/// Accepts the issued tokens; counts every token it was shown.
struct Issued {
    tokens: Arc<Mutex<Vec<String>>>,
    shown: Arc<Mutex<Vec<String>>>,
}

impl TokenVerifier for Issued {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        Box::pin(async move {
            self.shown.lock().unwrap().push(token.to_owned());
            if self.tokens.lock().unwrap().iter().any(|t| t == token) {
                Ok(AuthContext::new("gateway"))
            } else {
                Err(TokenError::Invalid("unknown".into()))
            }
        })
    }
}

#[tokio::test]
async fn the_gateway_authenticates_to_an_upstream_with_its_own_client_credentials() {
    let (issuer, issued) = authorization_server("s3cret").await;
    let shown = Arc::new(Mutex::new(Vec::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let protected = format!("http://{}/mcp", listener.local_addr().unwrap());
    let verifier = Issued {
        tokens: issued.clone(),
        shown: shown.clone(),
    };
    let rs = ResourceServer::new(&protected, verifier)
        .unwrap()
        .authorization_server(issuer.clone());
    let calls = Arc::new(AtomicUsize::new(0));
    tokio::spawn(serve_listener(
        shop(calls.clone(), "Orders an item."),
        HttpConfig {
            auth: Some(Arc::new(rs)),
            ..HttpConfig::default()
        },
        listener,
    ));
    let open = serve(shop(Arc::default(), "Orders an item.")).await;

    let toml = |secret: &str| {
        format!(
            "[servers.vault]\nurl = \"{protected}\"\n[servers.vault.oauth]\nclient_id = \"gw\"\nclient_secret = \"{secret}\"\nissuer = \"{issuer}\"\n[servers.open]\nurl = \"{open}\"\n"
        )
    };
    let gateway = Gateway::start(config(&toml("s3cret")), GatewayOptions::default())
        .await
        .unwrap();
    let c = downstream(&gateway).await;
    let names = tool_names(&c).await;
    assert!(names.contains(&"vault.order".to_owned()), "{names:?}");
    let ok = c
        .call_tool(
            "vault.order",
            support::args(json!({"sku": "SKU-1001"})),
            &Default::default(),
        )
        .await
        .unwrap();
    assert!(!ok.is_error.unwrap_or(false));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Only tokens the authorization server issued to the gateway reached
    // the upstream (after the first, tokenless, request).
    assert!(
        shown
            .lock()
            .unwrap()
            .iter()
            .all(|t| issued.lock().unwrap().contains(t))
    );
    assert_eq!(issued.lock().unwrap().len(), 1, "one token, reused");

    // A wrong secret: only that upstream's tools are missing, the rest serve.
    let gateway = Gateway::start(config(&toml("wrong")), GatewayOptions::default())
        .await
        .unwrap();
    let c = downstream(&gateway).await;
    let names = tool_names(&c).await;
    assert!(names.iter().all(|n| !n.starts_with("vault.")), "{names:?}");
    assert!(names.contains(&"open.order".to_owned()), "{names:?}");
}

#[test]
fn oauth_needs_a_url_and_exactly_one_credential() {
    for (toml, expected) in [
        (
            "[servers.a]\ncommand = \"x\"\n[servers.a.oauth]\nclient_id = \"c\"\nclient_secret = \"s\"\n",
            "applies to HTTP servers",
        ),
        (
            "[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\nclient_id = \"c\"\n",
            "exactly one of",
        ),
        (
            "[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\nclient_id = \"c\"\nclient_secret = \"s\"\nassertion_file = \"/f\"\n",
            "exactly one of",
        ),
    ] {
        let error =
            toolgate_gateway::config::GatewayConfig::parse_toml(toml, |_| None).unwrap_err();
        assert!(error.to_string().contains(expected), "{error}");
    }
    let secret = "[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\nclient_id = \"c\"\nclient_secret = \"${SECRET}\"\n";
    let parsed = toolgate_gateway::config::GatewayConfig::parse_toml(secret, |v| {
        (v == "SECRET").then(|| "hidden".into())
    })
    .unwrap();
    let oauth = parsed.servers["a"].oauth.as_ref().unwrap();
    assert_eq!(
        oauth.client_secret.as_ref().map(|s| s.expose()),
        Some("hidden")
    );
    assert!(
        !format!("{oauth:?}").contains("hidden"),
        "the secret never shows in Debug"
    );
}
