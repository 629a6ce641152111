//! npm's oidc-provider as the identity tests' authorization server
//! (`testdata/oidc/provider.mjs`), installed and located by `cargo xtask
//! identity` (`TOOLGATE_OIDC_DIR`, `TOOLGATE_NODE`), and a person signing
//! in at it over plain HTTP (its development login and consent forms).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::process::Stdio;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncBufReadExt as _;

/// The gateway's client secret at the test authorization server.
pub const GATEWAY_SECRET: &str = "gateway-secret-0123456789-abcdef";
/// The redirect URI of the caller's agent (never visited: the code is
/// read off the redirect).
pub const AGENT_REDIRECT: &str = "http://127.0.0.1:9/callback";

/// A running authorization server; stopped when dropped.
pub struct AuthServer {
    pub issuer: String,
    child: tokio::process::Child,
}

impl AuthServer {
    /// Stop it (as a crash would: nothing is flushed).
    pub async fn stop(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// Whether the identity tests can run here (`cargo xtask identity` sets it
/// up); otherwise they say so and pass nothing off as run.
pub fn available() -> bool {
    std::env::var_os("TOOLGATE_OIDC_DIR").is_some()
}

/// What the authorization server knows.
pub struct Setup {
    /// Resource URL -> (scopes it offers, the audience its token exchange
    /// wrongly puts in tokens for it).
    pub resources: BTreeMap<String, (String, Option<String>)>,
    /// Subjects the token exchange refuses.
    pub deny: Vec<String>,
    /// Seconds its clock is ahead of this machine's.
    pub skew_seconds: i64,
    /// Lifetime of the tokens it issues, in seconds.
    pub ttl: u64,
    /// Where the gateway's client may be sent back to (its connect page's
    /// callback), and the gateway's sign-in client's (`[auth.sign_in]`,
    /// client id `connect`): set, they can authorize with a code.
    pub gateway_redirect: Option<String>,
    pub sign_in_redirect: Option<String>,
    /// Listen here, keeping the signing key in this file: a restart is the
    /// same issuer that forgot every grant.
    pub port: Option<u16>,
    pub key_file: Option<std::path::PathBuf>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            resources: BTreeMap::new(),
            deny: Vec::new(),
            skew_seconds: 0,
            ttl: 600,
            gateway_redirect: None,
            sign_in_redirect: None,
            port: None,
            key_file: None,
        }
    }
}

/// Start the authorization server with the agent and gateway clients.
pub async fn start(setup: &Setup) -> AuthServer {
    let dir = std::env::var("TOOLGATE_OIDC_DIR").expect("run through `cargo xtask identity`");
    let node = std::env::var("TOOLGATE_NODE").unwrap_or_else(|_| "node".into());
    let mut gateway = json!({
        "client_id": "gateway",
        "client_secret": GATEWAY_SECRET,
        "grant_types": ["urn:ietf:params:oauth:grant-type:token-exchange", "client_credentials"],
        "response_types": [],
        "redirect_uris": [],
    });
    if let Some(back) = &setup.gateway_redirect {
        gateway["grant_types"] = json!([
            "urn:ietf:params:oauth:grant-type:token-exchange",
            "client_credentials",
            "authorization_code",
            "refresh_token"
        ]);
        gateway["response_types"] = json!(["code"]);
        gateway["redirect_uris"] = json!([back]);
    }
    let mut clients = vec![
        json!({
            "client_id": "agent",
            "token_endpoint_auth_method": "none",
            "redirect_uris": [AGENT_REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }),
        gateway,
    ];
    if let Some(back) = &setup.sign_in_redirect {
        clients.push(json!({
            "client_id": "connect",
            "token_endpoint_auth_method": "none",
            "redirect_uris": [back],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
        }));
    }
    let clients = Value::Array(clients);
    let resources: serde_json::Map<String, Value> = setup
        .resources
        .iter()
        .map(|(url, (scope, audience))| {
            (
                url.clone(),
                json!({"scope": scope, "exchange_audience": audience, "ttl": setup.ttl}),
            )
        })
        .collect();
    let mut child = tokio::process::Command::new(node)
        .arg(std::path::Path::new(&dir).join("provider.mjs"))
        .current_dir(&dir)
        .env("CLIENTS", clients.to_string())
        .env("RESOURCES", Value::Object(resources).to_string())
        .env("DENY", setup.deny.join(" "))
        .env("SKEW_SECONDS", setup.skew_seconds.to_string())
        .env(
            "PORT",
            setup.port.map(|p| p.to_string()).unwrap_or_default(),
        )
        .env(
            "KEY_FILE",
            setup
                .key_file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Its warnings and errors show with the test's output.
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("starting node");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let issuer = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the authorization server started in time")
        .unwrap()
        .expect("it printed its issuer");
    // Read the rest of what it prints: a closed pipe would end it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    AuthServer { issuer, child }
}

const FORM: &str = "application/x-www-form-urlencoded";

/// `pairs` as a form body.
fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// Cookies by name, as a browser would keep them for one host.
#[derive(Default)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn take(&mut self, response: &reqwest::Response) {
        for v in response.headers().get_all("set-cookie") {
            let text = v.to_str().unwrap_or_default();
            if let Some((name, rest)) = text.split(';').next().and_then(|kv| kv.split_once('=')) {
                if rest.is_empty() {
                    self.0.remove(name);
                } else {
                    self.0.insert(name.to_owned(), rest.to_owned());
                }
            }
        }
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `subject` signs in at `issuer` for the agent (authorization code with
/// PKCE, the development login and consent forms), asking for a token
/// for `resource` with `scope`; the access token.
pub async fn sign_in(issuer: &str, subject: &str, resource: &str, scope: &str) -> String {
    toolgate_client::install_default_tls_provider();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let verifier = "v".repeat(20) + subject + &"v".repeat(30);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    let mut url = reqwest::Url::parse(&format!("{issuer}/auth")).unwrap();
    url.query_pairs_mut()
        .append_pair("client_id", "agent")
        .append_pair("response_type", "code")
        .append_pair("redirect_uri", AGENT_REDIRECT)
        .append_pair("scope", &format!("openid {scope}"))
        .append_pair("resource", resource)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", "s");
    let mut jar = Jar::default();
    let mut code = None;
    for _ in 0..12 {
        let response = http
            .get(url.clone())
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        jar.take(&response);
        if response.status().is_redirection() {
            let next = response.headers()["location"].to_str().unwrap().to_owned();
            url = url.join(&next).unwrap();
            if url.as_str().starts_with(AGENT_REDIRECT) {
                code = url
                    .query_pairs()
                    .find(|(k, _)| k == "code")
                    .map(|(_, v)| v.into_owned());
                break;
            }
            continue;
        }
        let page = response.text().await.unwrap();
        let prompt = if page.contains("value=\"consent\"") {
            "consent"
        } else {
            assert!(page.contains("value=\"login\""), "unexpected page: {page}");
            "login"
        };
        let response = http
            .post(url.clone())
            .header("cookie", jar.header())
            .header("content-type", FORM)
            .body(form(&[
                ("prompt", prompt),
                ("login", subject),
                ("password", "x"),
            ]))
            .send()
            .await
            .unwrap();
        jar.take(&response);
        let next = response.headers()["location"].to_str().unwrap().to_owned();
        url = url.join(&next).unwrap();
    }
    let code = code.expect("the authorization ended at the agent's redirect with a code");
    let answer: Value = http
        .post(format!("{issuer}/token"))
        .header("content-type", FORM)
        .body(form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", AGENT_REDIRECT),
            ("client_id", "agent"),
            ("code_verifier", &verifier),
            ("resource", resource),
        ]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no access token: {answer}"))
        .to_owned()
}

/// The claims of a JWT, unverified (what a test reads of a token it saw).
pub fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap_or_default();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// Start a gateway from `toml` (and its page, if it has one) and serve it
/// over HTTP on `listener`, callers verified by its `[auth]`.
pub async fn serve_gateway(
    toml: &str,
    listener: tokio::net::TcpListener,
) -> toolgate_gateway::Gateway {
    let config = crate::support::config(toml);
    let rs = config.auth.as_ref().unwrap().resource_server().unwrap();
    let gateway = crate::support::start(config, Default::default())
        .await
        .unwrap();
    let http = toolgate_server::transport::http::HttpConfig {
        auth: Some(std::sync::Arc::new(rs)),
        ..Default::default()
    };
    tokio::spawn(toolgate_server::transport::http::serve_listener(
        gateway.server(),
        http,
        listener,
    ));
    gateway
}

/// Call `tool` with no arguments: whether it succeeded, and its text (a
/// tool error is an answer here).
pub async fn call(c: &toolgate_client::Client, tool: &str) -> (bool, String) {
    let result = match c
        .call_tool(tool, Default::default(), &Default::default())
        .await
    {
        Ok(r) => r,
        Err(toolgate_client::ClientError::Tool { result, .. }) => *result,
        Err(e) => panic!("{tool}: {e}"),
    };
    let text = result.content[0].as_text().unwrap_or_default().to_owned();
    (result.is_error != Some(true), text)
}
