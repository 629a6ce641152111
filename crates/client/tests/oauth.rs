//! OAuth against a real toolgate resource server and a mock authorization
//! server that can be made hostile: every misbehaviour gets a clear error,
//! no token or secret goes where it should not, and the server keeps
//! serving a well-behaved client afterwards.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_client::auth::{
    AuthLimits, ClientCredentials, FileTokenStore, Grant, OAuth, TokenStore, UserAgent,
};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, CallOptions, Client, ClientError};
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{AuthContext, TokenError, TokenVerifier, VerifyFuture};
use toolgate_server::{ResourceServer, Server, ToolDef};

/// How the mock authorization server misbehaves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Mischief {
    #[default]
    None,
    /// Metadata that names another issuer.
    WrongIssuer,
    /// An authorization response with another server's `iss`.
    MixUp,
    /// Metadata larger than the client reads.
    HugeMetadata,
    /// Metadata that is not JSON.
    GarbledMetadata,
    /// Metadata that redirects to another origin.
    RedirectedMetadata,
    /// A token endpoint that never answers.
    HangingToken,
    /// A token endpoint on plain HTTP to another host.
    PlainTokenEndpoint,
}

#[derive(Default)]
struct As {
    base: Mutex<String>,
    mischief: Mutex<Mischief>,
    /// Access tokens issued, with their scopes.
    tokens: Mutex<HashMap<String, Vec<String>>>,
    /// Scopes asked for at each authorization.
    authorizations: Mutex<Vec<Vec<String>>>,
    codes: Mutex<HashMap<String, Vec<String>>>,
    token_requests: AtomicUsize,
    refreshes: AtomicUsize,
    registrations: AtomicUsize,
}

impl As {
    fn base(&self) -> String {
        self.base.lock().unwrap().clone()
    }
    fn mischief(&self) -> Mischief {
        *self.mischief.lock().unwrap()
    }
    fn issue(&self, scopes: Vec<String>) -> Value {
        let n = self.token_requests.load(Ordering::SeqCst);
        let token = format!("tok-{n}");
        self.tokens
            .lock()
            .unwrap()
            .insert(token.clone(), scopes.clone());
        json!({
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": format!("refresh-{n}"),
            "scope": scopes.join(" "),
        })
    }
}

async fn metadata(State(s): State<Arc<As>>) -> Response {
    let base = s.base();
    let issuer = match s.mischief() {
        Mischief::WrongIssuer => "https://honest.example.com".to_owned(),
        _ => base.clone(),
    };
    match s.mischief() {
        Mischief::HugeMetadata => return "x".repeat(400 * 1024).into_response(),
        Mischief::GarbledMetadata => return "<html>not json</html>".into_response(),
        Mischief::RedirectedMetadata => {
            return Redirect::temporary("https://elsewhere.example.com/meta").into_response();
        }
        _ => {}
    }
    let token = if s.mischief() == Mischief::PlainTokenEndpoint {
        "http://collector.example.com/token".to_owned()
    } else {
        format!("{base}/token")
    };
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": token,
        "registration_endpoint": format!("{base}/register"),
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "scopes_supported": ["files:read", "files:write", "offline_access"],
    }))
    .into_response()
}

async fn authorize(State(s): State<Arc<As>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let scopes: Vec<String> = q
        .get("scope")
        .map(|s| s.split(' ').map(str::to_owned).collect())
        .unwrap_or_default();
    s.authorizations.lock().unwrap().push(scopes.clone());
    let code = format!("code-{}", s.authorizations.lock().unwrap().len());
    s.codes.lock().unwrap().insert(code.clone(), scopes);
    let iss = match s.mischief() {
        Mischief::MixUp => "https://attacker.example.com".to_owned(),
        _ => s.base(),
    };
    let mut to = reqwest::Url::parse(&q["redirect_uri"]).unwrap();
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &q["state"])
        .append_pair("iss", &iss);
    Redirect::to(to.as_str()).into_response()
}

async fn token(State(s): State<Arc<As>>, Form(f): Form<HashMap<String, String>>) -> Response {
    if s.mischief() == Mischief::HangingToken {
        std::future::pending::<()>().await;
    }
    s.token_requests.fetch_add(1, Ordering::SeqCst);
    let scopes = match f.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            assert!(f.contains_key("code_verifier"), "PKCE verifier missing");
            s.codes
                .lock()
                .unwrap()
                .remove(&f["code"])
                .unwrap_or_default()
        }
        Some("refresh_token") => {
            s.refreshes.fetch_add(1, Ordering::SeqCst);
            vec!["files:read".into()]
        }
        _ => {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "unsupported_grant_type"})),
            )
                .into_response();
        }
    };
    axum::Json(s.issue(scopes)).into_response()
}

async fn register(State(s): State<Arc<As>>, axum::Json(body): axum::Json<Value>) -> Response {
    s.registrations.fetch_add(1, Ordering::SeqCst);
    assert_eq!(body["application_type"], "native");
    (
        axum::http::StatusCode::CREATED,
        axum::Json(json!({"client_id": "registered-client", "token_endpoint_auth_method": "none"})),
    )
        .into_response()
}

async fn authorization_server() -> Arc<As> {
    let state = Arc::new(As::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    *state.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/register", post(register))
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    state
}

/// Accepts exactly the tokens the mock issued, with their scopes.
struct Issued(Arc<As>);

impl TokenVerifier for Issued {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        Box::pin(async move {
            match self.0.tokens.lock().unwrap().get(token) {
                Some(scopes) => Ok(AuthContext::new("alice").with_scopes(scopes.clone())),
                None => Err(TokenError::Invalid(format!("unknown token {token}"))),
            }
        })
    }
}

/// A protected toolgate server: `read` needs a token, `write` also
/// `files:write`.
async fn resource_server(issuer: Arc<As>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = Server::builder("files", "1")
        .tool(
            ToolDef::new("read")
                .description("Reads")
                .read_only()
                .handler(|| async { "read ok" }),
        )
        .tool(
            ToolDef::new("write")
                .description("Writes")
                .scopes(["files:write"])
                .handler(|| async { "write ok" }),
        )
        .build()
        .unwrap();
    let rs = ResourceServer::new(&url, Issued(issuer.clone()))
        .unwrap()
        .authorization_server(issuer.base())
        .scopes_supported(["files:read"]);
    let config = HttpConfig {
        auth: Some(Arc::new(rs)),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(server, config, listener));
    url
}

/// A person who approves at once.
struct Approver {
    visits: AtomicUsize,
}

impl UserAgent for Approver {
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1:9/callback".into()
    }
    fn authorize(&self, url: String) -> BoxFuture<'_, Result<String, ClientError>> {
        self.visits.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            toolgate_client::install_default_tls_provider();
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap();
            let answer = http.get(&url).send().await.unwrap();
            Ok(answer.headers()["location"].to_str().unwrap().to_owned())
        })
    }
}

fn client(url: &str, oauth: OAuth) -> Client {
    let options = HttpOptions {
        oauth: Some(oauth),
        ..HttpOptions::default()
    };
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .build(HttpTransport::new(url, options).unwrap())
}

fn person(agent: &Arc<Approver>, store: Arc<dyn TokenStore>) -> OAuth {
    OAuth::builder("oauth-test")
        .user_agent(agent.clone())
        .store(store)
        .limits(AuthLimits {
            timeout: Duration::from_secs(2),
            ..AuthLimits::default()
        })
        .build()
}

async fn call(client: &Client, tool: &str) -> Result<String, ClientError> {
    let result = client
        .call_tool(tool, Default::default(), &CallOptions::default())
        .await?;
    Ok(serde_json::to_value(&result.content[0]).unwrap()["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

#[tokio::test]
async fn a_person_authorizes_once_then_tokens_are_kept_stepped_up_and_refreshed() {
    let issuer = authorization_server().await;
    let url = resource_server(issuer.clone()).await;
    let dir = std::env::temp_dir().join(format!("toolgate-oauth-{}", std::process::id()));
    let store: Arc<dyn TokenStore> = Arc::new(FileTokenStore::new(dir.join("credentials.json")));
    let agent = Arc::new(Approver {
        visits: AtomicUsize::new(0),
    });

    let first = client(&url, person(&agent, store.clone()));
    assert_eq!(call(&first, "read").await.unwrap(), "read ok");
    assert_eq!(agent.visits.load(Ordering::SeqCst), 1);
    assert_eq!(issuer.registrations.load(Ordering::SeqCst), 1);
    // Scopes from the server's metadata, plus offline_access (the
    // authorization server lists it).
    assert_eq!(
        issuer.authorizations.lock().unwrap()[0],
        ["files:read", "offline_access"]
    );

    // The server hides `write` from a caller without its scope; a call
    // by name gets 403, which steps up to the union of the scopes, once.
    assert!(matches!(
        call(&first, "write").await,
        Err(ClientError::UnknownTool(_))
    ));
    let params = json!({"name": "write", "arguments": {}})
        .as_object()
        .cloned()
        .unwrap();
    let result = first
        .request("tools/call", params, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "write ok");
    assert_eq!(agent.visits.load(Ordering::SeqCst), 2);
    assert_eq!(
        issuer.authorizations.lock().unwrap()[1],
        ["files:read", "files:write", "offline_access"]
    );

    // Another process with the same store reuses the token: no person, no registration.
    let second = client(&url, person(&agent, store.clone()));
    assert_eq!(
        call(&second, "write").await.unwrap(),
        "write ok",
        "listed now"
    );
    assert_eq!(agent.visits.load(Ordering::SeqCst), 2);
    assert_eq!(issuer.registrations.load(Ordering::SeqCst), 1);

    // A kept token that has expired is refreshed before use, once for all
    // concurrent callers, with no person involved.
    let mut kept = store.load(&url).unwrap().unwrap();
    kept.token.as_mut().unwrap().expires_at = Some(1);
    store.save(&url, &kept).unwrap();
    let third = client(&url, person(&agent, store.clone()));
    let calls = (0..8).map(|_| call(&third, "read"));
    for outcome in futures::future::join_all(calls).await {
        assert_eq!(outcome.unwrap(), "read ok");
    }
    assert_eq!(
        issuer.refreshes.load(Ordering::SeqCst),
        1,
        "one shared refresh"
    );
    assert_eq!(agent.visits.load(Ordering::SeqCst), 2);
    let kept = store.load(&url).unwrap().unwrap();
    assert!(
        kept.token.unwrap().expires_at.unwrap() > 1,
        "the refreshed token is kept"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn without_a_person_a_client_says_authorization_is_needed() {
    let issuer = authorization_server().await;
    let url = resource_server(issuer.clone()).await;
    let plain = Client::builder("test", "1")
        .build(HttpTransport::new(&url, HttpOptions::default()).unwrap());
    let error = plain.list_tools().await.unwrap_err();
    assert!(matches!(error, ClientError::LoginRequired(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("requires authorization (HTTP 401"),
        "{error}"
    );
    let unattended = client(&url, OAuth::builder("t").build());
    let error = unattended.list_tools().await.unwrap_err();
    assert!(matches!(error, ClientError::LoginRequired(_)), "{error}");
    assert!(error.to_string().contains("needs a person"), "{error}");
}

#[tokio::test]
async fn a_hostile_authorization_server_gets_a_clear_error_and_no_token_is_misdirected() {
    let cases = [
        (
            Mischief::WrongIssuer,
            "names issuer \"https://honest.example.com\"",
        ),
        (
            Mischief::MixUp,
            "came from issuer \"https://attacker.example.com\"",
        ),
        (Mischief::HugeMetadata, "larger than"),
        (
            Mischief::GarbledMetadata,
            "did not answer with a JSON object",
        ),
        (Mischief::RedirectedMetadata, "redirects are not followed"),
        (Mischief::HangingToken, "did not answer within 2s"),
        (Mischief::PlainTokenEndpoint, "is not HTTPS"),
    ];
    let issuer = authorization_server().await;
    let url = resource_server(issuer.clone()).await;
    for (mischief, expected) in cases {
        *issuer.mischief.lock().unwrap() = mischief;
        let before = issuer.token_requests.load(Ordering::SeqCst);
        let agent = Arc::new(Approver {
            visits: AtomicUsize::new(0),
        });
        let hostile = client(
            &url,
            person(
                &agent,
                Arc::new(toolgate_client::auth::MemoryTokenStore::default()),
            ),
        );
        let error = hostile.list_tools().await.unwrap_err();
        assert!(
            matches!(error, ClientError::Authorization(_)),
            "{mischief:?}: {error}"
        );
        let text = error.to_string();
        assert!(text.contains(expected), "expected {expected:?} in {text:?}");
        assert!(text.len() < 400, "short: {text}");
        // No code or secret reached a token endpoint.
        assert_eq!(
            issuer.token_requests.load(Ordering::SeqCst),
            before,
            "{mischief:?}"
        );
    }
    // The same servers serve a client once the authorization server behaves.
    *issuer.mischief.lock().unwrap() = Mischief::None;
    let agent = Arc::new(Approver {
        visits: AtomicUsize::new(0),
    });
    let good = client(
        &url,
        person(
            &agent,
            Arc::new(toolgate_client::auth::MemoryTokenStore::default()),
        ),
    );
    assert_eq!(call(&good, "read").await.unwrap(), "read ok");
}

#[tokio::test]
async fn a_mismatched_resource_or_foreign_credentials_stop_before_authorizing() {
    let issuer = authorization_server().await;
    let url = resource_server(issuer.clone()).await;
    // The resource metadata of this server does not cover another path.
    let elsewhere = url.replace("/mcp", "/other");
    let agent = Arc::new(Approver {
        visits: AtomicUsize::new(0),
    });
    let store = Arc::new(toolgate_client::auth::MemoryTokenStore::default());
    let wrong = client(&elsewhere, person(&agent, store.clone()));
    assert!(wrong.list_tools().await.is_err());
    assert_eq!(agent.visits.load(Ordering::SeqCst), 0);

    // Pre-registered credentials bound to another issuer are refused, not tried.
    let bound = OAuth::builder("t")
        .user_agent(agent.clone())
        .credentials(
            ClientCredentials::secret("id", "s3cret").for_issuer("https://other-as.example.com"),
        )
        .build();
    let error = client(&url, bound).list_tools().await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("pre-registered client is for https://other-as.example.com"),
        "{error}"
    );
    assert_eq!(agent.visits.load(Ordering::SeqCst), 0);
    assert_eq!(issuer.token_requests.load(Ordering::SeqCst), 0);

    // A client_credentials client whose grant the server refuses says so.
    let service = OAuth::builder("t")
        .grant(Grant::ClientCredentials)
        .credentials(ClientCredentials::secret("svc", "s3cret"))
        .build();
    let error = client(&url, service).list_tools().await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("refused the client_credentials token request: unsupported_grant_type"),
        "{text}"
    );
    assert!(!text.contains("s3cret"));
}

#[tokio::test]
async fn a_redirected_request_carries_a_dpop_proof_for_where_it_went() {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    // `/old` redirects to `/new`, which records the `htu` of each proof.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let new = move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
        let record = record.clone();
        async move {
            let proof = headers["dpop"].to_str().unwrap();
            let claims = proof.split('.').nth(1).unwrap();
            let claims: Value = serde_json::from_slice(&B64.decode(claims).unwrap()).unwrap();
            record
                .lock()
                .unwrap()
                .push(claims["htu"].as_str().unwrap().to_owned());
            assert_eq!(headers["authorization"], "DPoP tok-dpop");
            let r: Value = serde_json::from_slice(&body).unwrap();
            let result = match r["method"].as_str().unwrap() {
                "tools/list" => {
                    json!({"resultType": "complete", "ttlMs": 60000, "cacheScope": "private",
                    "tools": [{"name": "read", "inputSchema": {"type": "object"}}]})
                }
                "tools/call" => {
                    json!({"resultType": "complete", "content": [{"type": "text", "text": "read ok"}]})
                }
                _ => {
                    let error = json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32601, "message": "no"}});
                    return (axum::http::StatusCode::NOT_FOUND, axum::Json(error)).into_response();
                }
            };
            axum::Json(json!({"jsonrpc": "2.0", "id": r["id"], "result": result})).into_response()
        }
    };
    let app = axum::Router::new()
        .route("/old", post(|| async { Redirect::temporary("/new") }))
        .route("/new", post(new));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // A DPoP-bound token kept from an earlier authorization.
    let key = ring::signature::EcdsaKeyPair::generate_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    let token = toolgate_client::auth::TokenSet {
        access_token: "tok-dpop".into(),
        token_type: "DPoP".into(),
        ..Default::default()
    };
    // `StoredAuth` is non-exhaustive: set its fields one by one.
    #[allow(clippy::field_reassign_with_default)]
    let kept = {
        let mut kept = toolgate_client::auth::StoredAuth::default();
        kept.token = Some(token);
        kept.dpop_key = Some(B64.encode(key.as_ref()));
        kept
    };
    let url = format!("{base}/old");
    let store = Arc::new(toolgate_client::auth::MemoryTokenStore::default());
    store.save(&url, &kept).unwrap();
    let agent = Arc::new(Approver {
        visits: AtomicUsize::new(0),
    });
    let c = client(&url, person(&agent, store));
    assert_eq!(call(&c, "read").await.unwrap(), "read ok");
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|htu| *htu == format!("{base}/new")),
        "{seen:?}"
    );
    assert_eq!(agent.visits.load(Ordering::SeqCst), 0);
}
