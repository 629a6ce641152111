//! What the gateway tests share: a toolgate upstream that counts its
//! calls, a downstream client that answers every question, configs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod flows;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, Client, ClientError, InputHandler};
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::{Gateway, GatewayError, GatewayOptions};
use toolgate_protocol::types::ClientCapabilities;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{RequestContext, Server, ToolDef};

#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// What to order: SKU- and four digits.
    #[schemars(regex(pattern = r"^SKU-[0-9]{4}$"))]
    pub sku: String,
}

/// An upstream toolgate server counting the calls that reach it.
/// Start a gateway and serve its approval page and console, as `toolgate
/// serve` does.
pub async fn start(
    config: GatewayConfig,
    options: GatewayOptions,
) -> Result<Gateway, GatewayError> {
    let gateway = Gateway::start(config, options).await?;
    toolgate_gateway::surface::page::serve(&gateway).await?;
    Ok(gateway)
}

pub fn shop(calls: Arc<AtomicUsize>, description: &str) -> Server {
    let asked = calls.clone();
    Server::builder("shop", "1")
        .tool(
            ToolDef::new("order")
                .description(description)
                .handler(move |args: Order| {
                    let calls = calls.clone();
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        Ok(format!("ordered {}", args.sku))
                    }
                }),
        )
        .tool(
            ToolDef::new("pay")
                .description("Pays, after the user confirms.")
                .handler(move |_: toolgate_server::NoArgs, ctx: RequestContext| {
                    let asked = asked.clone();
                    async move {
                        asked.fetch_add(1, Ordering::SeqCst);
                        let mut input = ctx.inputs();
                        let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                        let Some(answer) = input.elicit("confirm", "Pay 5.00?", form)? else {
                            return Err(input.ask());
                        };
                        let ok = answer.content.and_then(|c| c.get("ok").cloned()) == Some(json!(true));
                        Ok(if ok { "paid" } else { "not paid" }.to_owned())
                    }
                }),
        )
        .tool(
            ToolDef::new("greet")
                .description("Greets; asks the name when the client can be asked.")
                .handler(|_: toolgate_server::NoArgs, ctx: RequestContext| async move {
                    if !ctx.client_capabilities().supports_elicitation_form() {
                        return Ok("hello, stranger".to_owned());
                    }
                    let mut input = ctx.inputs();
                    let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
                    let Some(_) = input.elicit("who", "Friend?", form)? else {
                        return Err(input.ask());
                    };
                    Ok("hello, friend".to_owned())
                }),
        )
        .build()
        .unwrap()
}

/// How many calls reached an upstream, as a count that can be waited on:
/// a test that must act once "every call either reached the upstream or
/// has its answer" wakes on either, whichever comes last.
#[derive(Clone)]
pub struct Reached(Arc<tokio::sync::watch::Sender<usize>>);

impl Default for Reached {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

impl Reached {
    /// The calls that reached the upstream so far.
    pub fn count(&self) -> usize {
        *self.0.borrow()
    }

    fn add(&self) {
        self.0.send_modify(|n| *n += 1);
    }
}

/// An upstream whose one tool, `pass`, counts the calls that reach it and
/// holds each until `open` says `true`: calls that reach it stay in flight
/// for as long as a test needs them to.
pub fn gated(calls: Reached, open: tokio::sync::watch::Receiver<bool>) -> Server {
    Server::builder("gate", "1")
        .tool(
            ToolDef::new("pass")
                .description("Passes once the gate opens.")
                .handler(move |_: toolgate_server::NoArgs| {
                    let calls = calls.clone();
                    let mut open = open.clone();
                    async move {
                        calls.add();
                        let _ = open.wait_for(|open| *open).await;
                        Ok("passed".to_owned())
                    }
                }),
        )
        .build()
        .unwrap()
}

/// Send `n` calls of `tool` at once, through each of `clients` in turn,
/// hold the gate of [`gated`] shut until every call that did not reach
/// the upstream has its answer, then open it: the answers, refused ones
/// first.
pub async fn at_once(
    clients: &[&Client],
    tool: &str,
    n: usize,
    calls: &Reached,
    gate: &tokio::sync::watch::Sender<bool>,
) -> Vec<(bool, String)> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..n {
        let c = clients[i % clients.len()].clone();
        let (tx, tool) = (tx.clone(), tool.to_owned());
        tokio::spawn(async move {
            let _ = tx.send(outcome_of(&c, &tool, json!({})).await);
        });
    }
    drop(tx);
    let mut answers = Vec::new();
    let wait = Duration::from_secs(30);
    // Every call either reached the upstream (and waits there) or has its
    // answer; the gate opens only then. The last of those may be either an
    // answer or a call reaching the upstream, so both wake this loop.
    let mut reached = calls.0.subscribe();
    let settled = async {
        loop {
            if answers.len() + *reached.borrow_and_update() >= n {
                return;
            }
            tokio::select! {
                answer = rx.recv() => answers.push(answer.expect("an answer for every call")),
                changed = reached.changed() => changed.expect("the upstream is serving"),
            }
        }
    };
    tokio::time::timeout(wait, settled)
        .await
        .expect("calls that did not reach the upstream were answered");
    let _ = gate.send(true);
    while let Some(answer) = tokio::time::timeout(wait, rx.recv())
        .await
        .expect("calls in flight finished once the gate opened")
    {
        answers.push(answer);
    }
    answers
}

/// A grant of the gateway tool `tool` (`server.name`) for `caller`, for an
/// hour, bound to a definition as an approval with `remember` leaves one.
pub fn grant_of(caller: Option<&str>, tool: &str) -> toolgate_gateway::decide::grants::Grant {
    let (upstream, upstream_tool) = tool.split_once('.').unwrap();
    toolgate_gateway::decide::grants::Grant::new(
        caller,
        toolgate_gateway::decide::grants::Bound {
            upstream,
            upstream_tool,
            digest: "sha256:00",
        },
        tool,
        "rule 1",
        Duration::from_secs(3600),
    )
}

/// A server whose one tool, `whoami`, answers with the `traceparent` it
/// was given (empty when none).
pub fn probe() -> Server {
    Server::builder("probe", "1")
        .tool(
            ToolDef::new("whoami")
                .description("Says its trace context.")
                .read_only()
                .handler(|ctx: toolgate_server::RequestContext| async move {
                    Ok(ctx
                        .meta()
                        .trace
                        .as_ref()
                        .map(|t| t.traceparent.clone())
                        .unwrap_or_default())
                }),
        )
        .build()
        .unwrap()
}

pub async fn serve(server: Server) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_listener(server, HttpConfig::default(), listener));
    url
}

/// Answers every form with `{"ok": true}`.
pub struct Yes;

impl InputHandler for Yes {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        _request: toolgate_protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>> {
        Box::pin(async {
            Ok(
                serde_json::from_value(json!({"action": "accept", "content": {"ok": true}}))
                    .unwrap(),
            )
        })
    }
}

pub async fn downstream(gateway: &Gateway) -> Client {
    client_of(gateway.server()).await
}

/// A client of `server`, served on a port of its own (an endpoint's, say).
pub async fn client_of(server: toolgate_server::Server) -> Client {
    let url = serve(server).await;
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(Yes)
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

/// `toml`, with every call allowed unless it sets a policy of its own
/// (the built-in default asks a person to approve most calls).
pub fn config(toml: &str) -> GatewayConfig {
    let toml = if toml.contains("[policy]") {
        toml.to_owned()
    } else {
        format!("{toml}\n[policy]\ndefault = \"allow\"\n")
    };
    GatewayConfig::parse_toml(&toml, |_| None).unwrap()
}

pub fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// One plain HTTP/1.1 exchange with `url` (`http://HOST:PORT/PATH`):
/// `extra` headers, an optional form body; the status and the whole
/// response (headers and body).
pub async fn http(
    method: &str,
    url: &str,
    extra: &[(&str, &str)],
    form: Option<&str>,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut request = format!("{method} /{path} HTTP/1.1\r\nConnection: close\r\n");
    if !extra.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {host}\r\n"));
    }
    for (k, v) in extra {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = form.unwrap_or("");
    if form.is_some() {
        request.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

/// Call `tool` with `arguments` bypassing the client's own checks (the
/// tool may be unlisted), expect a tool error, and return its text.
pub async fn refused(c: &Client, tool: &str, arguments: Value) -> String {
    let raw = c
        .request(
            "tools/call",
            args(json!({"name": tool, "arguments": arguments})),
            &toolgate_client::CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(raw["isError"], true, "{raw}");
    raw["content"][0]["text"].as_str().unwrap().to_owned()
}

/// The names `c` lists.
pub async fn tool_names(c: &Client) -> Vec<String> {
    c.list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// `s` as a TOML string (a literal string cannot hold a quote; a basic
/// string escapes).
pub fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// One line-delimited JSON-RPC exchange with a server over an in-memory
/// stdio pipe.
pub struct Pipe {
    to_server: tokio::io::DuplexStream,
    from_server: tokio::io::Lines<tokio::io::BufReader<tokio::io::DuplexStream>>,
}

impl Pipe {
    pub fn start(server: toolgate_server::Server) -> Pipe {
        use tokio::io::AsyncBufReadExt as _;
        let (client_in, server_out) = tokio::io::duplex(1 << 16);
        let (server_in, client_out) = tokio::io::duplex(1 << 16);
        tokio::spawn(toolgate_server::transport::stdio::serve_stream(
            server, server_in, server_out,
        ));
        Pipe {
            to_server: client_out,
            from_server: tokio::io::BufReader::new(client_in).lines(),
        }
    }

    /// A pipe with a legacy (2025-11-25) session opened by a host that
    /// can answer elicitation.
    pub async fn legacy_session(server: toolgate_server::Server) -> Pipe {
        let mut p = Pipe::start(server);
        p.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "legacy-host", "version": "1"}}}),
        )
        .await;
        assert_eq!(p.recv().await["result"]["protocolVersion"], "2025-11-25");
        p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        p
    }

    pub async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt as _;
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.to_server.write_all(&line).await.unwrap();
    }

    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.from_server.next_line())
            .await
            .expect("an answer within 10 s")
            .unwrap()
            .expect("the stream goes on");
        serde_json::from_str(&line).unwrap()
    }
}

/// The issuer of [`token`]'s tokens (its keys are in testdata/auth).
pub const ISSUER: &str = "https://auth.test";

/// A signed access token for `subject`, for `audience`, with `scopes`.
pub fn token(subject: &str, audience: &str, scopes: &str) -> String {
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    const PRIVATE_KEY: &[u8] = include_bytes!("../../../../testdata/auth/rsa-private.pem");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("test-rsa-1".into());
    let claims = json!({"iss": ISSUER, "aud": audience, "sub": subject, "scope": scopes, "iat": now, "exp": now + 600});
    encode(
        &header,
        &claims,
        &EncodingKey::from_rsa_pem(PRIVATE_KEY).unwrap(),
    )
    .unwrap()
}

/// Answers every question as told, and keeps what it was asked.
#[derive(Clone)]
pub struct Person {
    pub answer: Value,
    pub asked: Arc<std::sync::Mutex<Vec<Value>>>,
}

impl Person {
    pub fn new(answer: Value) -> Self {
        Self {
            answer,
            asked: Arc::default(),
        }
    }

    /// The gateway's approval questions it was asked (not an upstream's own).
    pub fn approvals(&self) -> Vec<Value> {
        let asked = self.asked.lock().unwrap();
        asked
            .iter()
            .filter(|q| {
                q["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Approve this tool call?"))
            })
            .cloned()
            .collect()
    }

    pub fn times_asked(&self) -> usize {
        self.approvals().len()
    }

    /// The form of the last approval question.
    pub fn last_schema(&self) -> Value {
        self.approvals().last().unwrap()["requestedSchema"].clone()
    }
}

impl InputHandler for Person {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        request: toolgate_protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        let answer = serde_json::from_value(self.answer.clone()).unwrap();
        Box::pin(async move { Ok(answer) })
    }
}

/// Log in as the person: open the gateway's one-time link; the session
/// cookie (`name=value`) it set.
pub async fn log_in(link: &str) -> String {
    let (status, response) = http("GET", link, &[], None).await;
    assert_eq!(status, 303, "{response}");
    let line = response
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap();
    assert!(
        line.contains("HttpOnly") && line.contains("SameSite=Strict"),
        "{line}"
    );
    let pair = line.split_once(':').unwrap().1.trim();
    pair.split(';').next().unwrap().to_owned()
}

/// `http://host:port` of `url`.
pub fn origin_of(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    format!("http://{}", rest.split('/').next().unwrap())
}

/// The anti-forgery token of the page at `url`, for the session `cookie`.
pub async fn page_token(url: &str, cookie: &str) -> String {
    let (status, page) = http("GET", url, &[("Cookie", cookie)], None).await;
    assert_eq!(status, 200, "{page}");
    let at = page.find("name=\"token\" value=\"").unwrap() + 20;
    page[at..at + 32].to_owned()
}

/// Call `tool` with `arguments`: whether it succeeded, and its first text
/// (a tool error is an answer here, not a failure of the test).
pub async fn outcome_of(c: &Client, tool: &str, arguments: Value) -> (bool, String) {
    let result = match c
        .call_tool(
            tool,
            args(arguments),
            &toolgate_client::CallOptions::default(),
        )
        .await
    {
        Ok(r) => r,
        Err(ClientError::Tool { result, .. }) => *result,
        Err(e) => panic!("{e}"),
    };
    let text = result.content[0].as_text().unwrap_or_default().to_owned();
    (result.is_error != Some(true), text)
}
