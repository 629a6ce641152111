//! Authorization over HTTP: every kind of bad token gets `401` with the
//! RFC 9728 challenge, a token without a tool's scope gets `403` naming it,
//! lists show only what the caller may call, the metadata document is
//! served, and the server keeps serving throughout.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use common::request;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{JwtVerifier, ResourceServer, ScopeHierarchy, Server, ToolDef};

const ISSUER: &str = "https://auth.test";
const PRIVATE_KEY: &[u8] = include_bytes!("../../../testdata/auth/rsa-private.pem");
const PUBLIC_KEY: &[u8] = include_bytes!("../../../testdata/auth/rsa-public.pem");

fn jwks_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/auth/jwks.json")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

struct Harness {
    url: String,
    origin: String,
    client: reqwest::Client,
}

async fn start() -> Harness {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let url = format!("{origin}/mcp");
    let ok = || async { Ok("ok") };
    let server = Server::builder("s", "1")
        .tool(ToolDef::new("open").handler(ok))
        .tool(
            ToolDef::new("read_thing")
                .scopes(["things:read"])
                .handler(ok),
        )
        .tool(
            ToolDef::new("write_thing")
                .scopes(["things:write"])
                .handler(ok),
        )
        .build()
        .unwrap();
    let verifier = JwtVerifier::from_jwks_file(jwks_path(), ISSUER, &url).unwrap();
    let auth = ResourceServer::new(&url, verifier)
        .unwrap()
        .authorization_server(ISSUER)
        .scopes_supported(["things:read", "things:write"])
        .scope_hierarchy(ScopeHierarchy::default().implies("things:write", ["things:read"]));
    let config = HttpConfig {
        auth: Some(Arc::new(auth)),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(server, config, listener));
    Harness {
        url,
        origin,
        client: common::http_client().build().unwrap(),
    }
}

fn claims(audience: &str, scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": audience, "sub": "alice", "scope": scope,
           "iat": now(), "exp": now() + 600})
}

fn sign(claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("test-rsa-1".into());
    encode(
        &header,
        claims,
        &EncodingKey::from_rsa_pem(PRIVATE_KEY).unwrap(),
    )
    .unwrap()
}

impl Harness {
    async fn post(&self, token: Option<&str>, body: &Value) -> (u16, Option<String>, Value) {
        let method = body["method"].as_str().unwrap();
        let mut builder = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = body.pointer("/params/name").and_then(Value::as_str) {
            builder = builder.header("mcp-name", name);
        }
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        let response = builder.json(body).send().await.unwrap();
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        (
            status,
            challenge,
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }

    async fn list(&self, token: Option<&str>) -> (u16, Option<String>, Value) {
        self.post(token, &request(1, "tools/list", json!({}))).await
    }

    async fn call(&self, token: &str, tool: &str) -> (u16, Option<String>, Value) {
        self.post(
            Some(token),
            &request(2, "tools/call", json!({"name": tool})),
        )
        .await
    }

    fn metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.origin)
    }
}

#[tokio::test]
async fn every_bad_token_gets_401_with_the_challenge() {
    let h = start().await;
    let (status, challenge, body) = h.list(None).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge.unwrap(),
        format!(
            "Bearer resource_metadata=\"{}\", scope=\"things:read things:write\"",
            h.metadata_url()
        )
    );
    assert_eq!(body["error"]["code"], -32600);

    let good = claims(&h.url, "things:read");
    let with = |edit: fn(&mut Value)| {
        let mut c = good.clone();
        edit(&mut c);
        sign(&c)
    };
    let unsigned = {
        use base64::Engine as _;
        let b64 =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "typ": "JWT"})),
            b64(&good)
        )
    };
    let confused = {
        // The public key used as an HMAC secret: algorithm confusion.
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("test-rsa-1".into());
        encode(&header, &good, &EncodingKey::from_secret(PUBLIC_KEY)).unwrap()
    };
    let cases: Vec<(&str, String)> = vec![
        ("garbled", "not-a-token".into()),
        ("expired", with(|c| c["exp"] = json!(now() - 3600))),
        ("not yet valid", with(|c| c["nbf"] = json!(now() + 3600))),
        (
            "wrong audience",
            with(|c| c["aud"] = json!("https://other.example/mcp")),
        ),
        (
            "wrong issuer",
            with(|c| c["iss"] = json!("https://evil.test")),
        ),
        (
            "no expiry",
            with(|c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
        ),
        ("unsigned", unsigned),
        ("HS256 with the RSA public key", confused),
    ];
    for (what, token) in cases {
        let (status, challenge, body) = h.list(Some(&token)).await;
        assert_eq!(status, 401, "{what}");
        let challenge = challenge.unwrap();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(challenge.contains(&h.metadata_url()), "{what}: {challenge}");
        assert!(
            !body.to_string().contains(&token),
            "{what}: the token came back"
        );
    }
    // The same token, valid, is let in.
    let (status, _, _) = h.list(Some(&sign(&good))).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn scopes_filter_lists_and_missing_ones_get_403_naming_them() {
    let h = start().await;
    let reader = sign(&claims(&h.url, "things:read"));
    let (status, _, body) = h.list(Some(&reader)).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["open", "read_thing"]);
    assert_eq!(body["result"]["cacheScope"], "private");

    let (status, challenge, body) = h.call(&reader, "write_thing").await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], toolgate_server::INSUFFICIENT_SCOPE);
    assert_eq!(
        challenge.unwrap(),
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"things:write\", resource_metadata=\"{}\", error_description=\"this call needs more scopes\"",
            h.metadata_url()
        )
    );
    let (status, _, body) = h.call(&reader, "read_thing").await;
    assert_eq!(
        (status, &body["result"]["content"][0]["text"]),
        (200, &json!("ok"))
    );
    // things:write implies things:read.
    let writer = sign(&claims(&h.url, "things:write"));
    let (status, _, body) = h.call(&writer, "read_thing").await;
    assert_eq!(
        (status, &body["result"]["content"][0]["text"]),
        (200, &json!("ok"))
    );
    let (status, _, _) = h.call(&writer, "write_thing").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn protected_resource_metadata_is_served_without_a_token() {
    let h = start().await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let response = h
            .client
            .get(format!("{}{path}", h.origin))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let doc: Value = response.json().await.unwrap();
        assert_eq!(
            doc,
            json!({
                "resource": h.url,
                "authorization_servers": [ISSUER],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["things:read", "things:write"]
            })
        );
    }
    let missing = h
        .client
        .get(format!("{}/.well-known/other", h.origin))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn a_jwks_url_is_fetched_once_and_cached_by_kid() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolgate_server::TokenVerifier;
    let hits = Arc::new(AtomicUsize::new(0));
    let jwks = std::fs::read_to_string(jwks_path()).unwrap();
    let counter = hits.clone();
    let app = axum::Router::new().route(
        "/jwks.json",
        axum::routing::get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let jwks = jwks.clone();
            async move { jwks }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let _ = common::http_client();
    let audience = "https://mcp.test/mcp";
    let verifier = JwtVerifier::from_jwks_url(&jwks_url, ISSUER, audience).unwrap();
    let token = sign(&claims(audience, "a b"));
    let auth = verifier.verify(&token).await.unwrap();
    assert_eq!(auth.subject(), Some("alice"));
    assert!(auth.has_scope("a") && auth.has_scope("b"));
    assert!(verifier.verify(&token).await.is_ok());
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the key set is cached");
    // A kid the set does not have: refused, and no refetch within a minute.
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rotated-away".into());
    let stranger = encode(
        &header,
        &claims(audience, ""),
        &EncodingKey::from_rsa_pem(PRIVATE_KEY).unwrap(),
    )
    .unwrap();
    assert!(verifier.verify(&stranger).await.is_err());
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    // Only https, except on loopback.
    assert!(
        JwtVerifier::from_jwks_url("http://keys.example.com/jwks.json", ISSUER, audience).is_err()
    );
}

#[tokio::test]
async fn an_auth_configuration_clients_could_not_use_is_refused() {
    let verifier = || JwtVerifier::from_jwks_file(jwks_path(), ISSUER, "https://x/mcp").unwrap();
    let server = Server::builder("s", "1").build().unwrap();
    for (auth, says) in [
        (
            ResourceServer::new("https://x/mcp", verifier()).unwrap(),
            "authorization server",
        ),
        (
            ResourceServer::new("https://x/other", verifier())
                .unwrap()
                .authorization_server(ISSUER),
            "endpoint path",
        ),
    ] {
        let config = HttpConfig {
            auth: Some(Arc::new(auth)),
            ..HttpConfig::default()
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = serve_listener(server.clone(), config, listener)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[tokio::test]
async fn a_remembered_token_still_expires() {
    use toolgate_server::TokenVerifier;
    let audience = "https://mcp.test/mcp";
    let verifier = JwtVerifier::from_jwks_file(jwks_path(), ISSUER, audience)
        .unwrap()
        .leeway(std::time::Duration::ZERO);
    // Valid for one more second: verified now, remembered, then refused
    // once its own expiry has passed (the cache never outlives `exp`).
    let mut c = claims(audience, "a");
    c["exp"] = json!(now() + 1);
    let token = sign(&c);
    assert!(verifier.verify(&token).await.is_ok());
    assert!(verifier.verify(&token).await.is_ok(), "remembered");
    // Not synchronisation: the behaviour under test is the wall clock
    // passing the token's `exp`.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert!(
        verifier.verify(&token).await.is_err(),
        "expired while remembered"
    );
}
