//! `toolgate login` / `logout` against a protected toolgate server and a
//! small authorization server: the person's part is played by the test,
//! which opens the printed URL and follows its redirect to the loopback
//! listener.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};
use toolgate_server::transport::http::{HttpConfig, serve_listener};

mod support;
use toolgate_server::{
    AuthContext, ResourceServer, Server, TokenError, TokenVerifier, ToolDef, VerifyFuture,
};

/// The authorization server: every code and token it issued.
#[derive(Default)]
struct As {
    base: String,
    tokens: Mutex<Vec<String>>,
}

async fn metadata(State(s): State<Arc<As>>) -> Response {
    let b = &s.base;
    axum::Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": format!("{b}/token"),
        "registration_endpoint": format!("{b}/register"),
        "code_challenge_methods_supported": ["S256"],
    }))
    .into_response()
}

async fn authorize(State(s): State<Arc<As>>, Query(q): Query<HashMap<String, String>>) -> Redirect {
    let mut to = url::Url::parse(&q["redirect_uri"]).unwrap();
    to.query_pairs_mut()
        .append_pair("code", "the-code")
        .append_pair("state", &q["state"])
        .append_pair("iss", &s.base);
    Redirect::to(to.as_str())
}

async fn token(State(s): State<Arc<As>>, Form(f): Form<HashMap<String, String>>) -> Response {
    assert_eq!(f["code"], "the-code");
    let token = format!("tok-{}", s.tokens.lock().unwrap().len());
    s.tokens.lock().unwrap().push(token.clone());
    axum::Json(json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}))
        .into_response()
}

async fn register() -> Response {
    (
        axum::http::StatusCode::CREATED,
        axum::Json(json!({"client_id": "toolgate-cli"})),
    )
        .into_response()
}

struct Issued(Arc<As>);

impl TokenVerifier for Issued {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        Box::pin(async move {
            if self.0.tokens.lock().unwrap().iter().any(|t| t == token) {
                Ok(AuthContext::new("alice"))
            } else {
                Err(TokenError::Invalid("unknown".into()))
            }
        })
    }
}

/// A protected server and its authorization server; the server's URL.
async fn protected() -> String {
    let as_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let state = Arc::new(As {
        base: format!("http://{}", as_listener.local_addr().unwrap()),
        ..As::default()
    });
    let app = axum::Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/register", post(register))
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(as_listener, app).await });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = Server::builder("vault", "1")
        .tool(
            ToolDef::new("secret_count")
                .description("Counts")
                .read_only()
                .handler(|| async { "3" }),
        )
        .build()
        .unwrap();
    let rs = ResourceServer::new(&url, Issued(state.clone()))
        .unwrap()
        .authorization_server(state.base.clone());
    let config = HttpConfig {
        auth: Some(Arc::new(rs)),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(server, config, listener));
    url
}

async fn toolgate(args: &[&str], credentials: &Path) -> support::Run {
    let credentials = credentials.to_str().unwrap();
    support::toolgate_in(
        &std::env::temp_dir(),
        args,
        &[("TOOLGATE_CREDENTIALS", credentials)],
    )
    .await
}

/// A plain HTTP/1.1 GET: the status line and the `location`, if any.
async fn visit(url: &str) -> (String, Option<String>) {
    let url = url::Url::parse(url).unwrap();
    let mut stream = TcpStream::connect((url.host_str().unwrap(), url.port().unwrap()))
        .await
        .unwrap();
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let request = format!(
        "GET {target} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
        url.authority()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer.lines().next().unwrap_or_default().to_owned();
    let location = answer
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or_else(|| l.strip_prefix("Location: "))
        })
        .map(str::to_owned);
    (status, location)
}

#[tokio::test]
async fn login_keeps_tokens_the_other_commands_use_and_logout_forgets_them() {
    let url = protected().await;
    let dir = std::env::temp_dir().join(format!("toolgate-login-{}", std::process::id()));
    let credentials = dir.join("credentials.json");

    // Before login: a clear error naming the command that fixes it.
    let before = toolgate(&["tools", &url], &credentials).await;
    assert_eq!(before.code, 3, "{}", before.stderr);
    assert!(
        before
            .stderr
            .contains(&format!("run `toolgate login {url}`")),
        "{}",
        before.stderr
    );

    let mut login = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["login", &url, "--no-browser", "--wait", "30"])
        .env("TOOLGATE_CREDENTIALS", &credentials)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(login.stderr.take().unwrap()).lines();
    let page = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("login printed no URL");
        if let Some(u) = line.trim().strip_prefix("http") {
            break format!("http{u}");
        }
    };
    // The person approves: the authorization page redirects to the loopback listener.
    let (status, callback) = visit(&page).await;
    assert!(
        status.contains("303") || status.contains("302") || status.contains("307"),
        "{status}"
    );
    let callback = callback.unwrap();
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    let (status, _) = visit(&callback).await;
    assert!(status.contains("200"), "{status}");
    let done = login.wait_with_output().await.unwrap();
    assert!(done.status.success());
    assert!(String::from_utf8_lossy(&done.stdout).contains(&format!("Logged in to {url}")));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&credentials)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "only the owner can read the tokens");
    }
    assert!(!std::fs::read_to_string(&credentials).unwrap().is_empty());

    let listed = toolgate(&["tools", &url], &credentials).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("secret_count"), "{}", listed.stdout);

    let out = toolgate(&["logout", &url], &credentials).await;
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.contains(&format!("Logged out of {url}")),
        "{}",
        out.stdout
    );
    let again = toolgate(&["logout", &url], &credentials).await;
    assert!(
        again.stdout.contains("Nothing was kept"),
        "{}",
        again.stdout
    );
    let after = toolgate(&["tools", &url], &credentials).await;
    assert_eq!(after.code, 3, "{}", after.stderr);

    // A login nobody completes ends with a clear error, not a hang.
    let abandoned = toolgate(
        &["login", &url, "--no-browser", "--wait", "1"],
        &credentials,
    )
    .await;
    assert_eq!(abandoned.code, 3, "{}", abandoned.stderr);
    assert!(
        abandoned
            .stderr
            .contains("nobody completed the authorization within 1s"),
        "{}",
        abandoned.stderr
    );
    // Login to something that is not an HTTP server is a usage error.
    let stdio = toolgate(
        &["logout", "no-such-server", "--config", "/nonexistent.json"],
        &credentials,
    )
    .await;
    assert_eq!(stdio.code, 2, "{}", stdio.stderr);
    let _ = std::fs::remove_dir_all(dir);
}
