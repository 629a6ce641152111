//! Legacy (initialize-handshake) clients on stdio and HTTP, next to modern
//! ones: negotiation, sessions, input requests as server-initiated
//! requests, logging, list changes, and every bad opening.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::net::TcpListener;
use toolgate_protocol::types::LoggingLevel;
use toolgate_protocol::wire_check::WireChecker;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::transport::stdio::serve_stream;
use toolgate_server::{ElicitAction, RequestContext, Server, ToolDef};

#[derive(Deserialize, JsonSchema)]
struct Echo {
    text: String,
}

fn server(
    builder: impl FnOnce(toolgate_server::ServerBuilder) -> toolgate_server::ServerBuilder,
) -> Server {
    let b = Server::builder("legacy-test", "1.2.3")
        .instructions("Try echo.")
        .tool(
            ToolDef::new("echo")
                .description("Echoes text")
                .read_only()
                .handler(|a: Echo| async move { Ok(a.text) }),
        )
        .tool(
            ToolDef::new("confirm")
                .description("Asks the user to confirm")
                .handler(|ctx: RequestContext| async move {
                    let mut input = ctx.inputs();
                    let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                    let Some(answer) = input.elicit("sure", "Are you sure?", form)? else {
                        return Err(input.ask());
                    };
                    let ok = answer.action == ElicitAction::Accept
                        && answer.content.as_ref().and_then(|c| c.get("ok")) == Some(&json!(true));
                    Ok(if ok { "confirmed" } else { "not confirmed" })
                }),
        )
        .tool(
            ToolDef::new("chatty")
                .description("Logs at info and debug")
                .read_only()
                .handler(|ctx: RequestContext| async move {
                    ctx.log(LoggingLevel::Debug, None, json!("debug line")).await;
                    ctx.log(LoggingLevel::Info, None, json!("info line")).await;
                    ctx.progress(1.0, Some(1.0), None).await;
                    Ok("chatted")
                }),
        );
    builder(b).build().unwrap()
}

fn initialize(id: i64, version: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": capabilities,
        "clientInfo": {"name": "legacy-client", "version": "0.1"}
    }})
}

fn legacy(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A result of the legacy revision, checked against its schema.
fn assert_legacy(definition: &str, message: &Value) {
    let result = message
        .get("result")
        .unwrap_or_else(|| panic!("not a result: {message}"));
    if let Err(e) = WireChecker::legacy().check(definition, result) {
        panic!("violates the 2025-11-25 schema: {e}");
    }
    assert!(
        result.get("resultType").is_none(),
        "modern field leaked: {message}"
    );
}

struct Pipe {
    to_server: DuplexStream,
    from_server: tokio::io::Lines<BufReader<DuplexStream>>,
}

impl Pipe {
    fn start(server: Server) -> Pipe {
        let (client_in, server_out) = tokio::io::duplex(1 << 16);
        let (server_in, client_out) = tokio::io::duplex(1 << 16);
        tokio::spawn(serve_stream(server, server_in, server_out));
        Pipe {
            to_server: client_out,
            from_server: BufReader::new(client_in).lines(),
        }
    }

    async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.to_server.write_all(&line).await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.from_server.next_line())
            .await
            .expect("no message within 5 s")
            .unwrap()
            .expect("stream ended");
        serde_json::from_str(&line).unwrap()
    }

    async fn ask(&mut self, message: &Value) -> Value {
        self.send(message).await;
        self.recv().await
    }
}

#[tokio::test]
async fn stdio_session_negotiates_lists_calls_and_asks_through_requests() {
    let mut p = Pipe::start(server(|b| b));
    let v = p
        .ask(&initialize(1, "2025-06-18", json!({"elicitation": {}})))
        .await;
    assert_legacy("InitializeResult", &v);
    assert_eq!(v["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(v["result"]["serverInfo"]["name"], "legacy-test");
    assert_eq!(v["result"]["instructions"], "Try echo.");
    assert_eq!(v["result"]["capabilities"]["tools"]["listChanged"], true);
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let v = p.ask(&legacy(2, "ping", json!({}))).await;
    assert_eq!(v["result"], json!({}));
    let v = p.ask(&legacy(3, "tools/list", json!({}))).await;
    assert_legacy("ListToolsResult", &v);
    assert!(v["result"].get("ttlMs").is_none(), "{v}");
    let v = p
        .ask(&legacy(
            4,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        ))
        .await;
    assert_legacy("CallToolResult", &v);
    assert_eq!(v["result"]["content"][0]["text"], "hi");
    // Bad arguments: the tool error a model can act on, as in the modern era.
    let v = p
        .ask(&legacy(
            5,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": 7}}),
        ))
        .await;
    assert_eq!(v["result"]["isError"], true, "{v}");

    // An input request goes to the client as elicitation/create; the
    // answer resumes the tool.
    p.send(&legacy(
        6,
        "tools/call",
        json!({"name": "confirm", "arguments": {}}),
    ))
    .await;
    let ask = p.recv().await;
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(ask["params"]["message"], "Are you sure?");
    assert!(
        ask["params"].get("mode").is_none(),
        "2025-06-18 predates mode: {ask}"
    );
    WireChecker::legacy().check("ElicitRequest", &ask).unwrap();
    p.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"ok": true}}}))
        .await;
    let v = p.recv().await;
    assert_eq!(v["id"], 6);
    assert_eq!(v["result"]["content"][0]["text"], "confirmed", "{v}");

    // A declined elicitation is the tool's business; an error answer is a
    // tool error naming what failed.
    p.send(&legacy(
        7,
        "tools/call",
        json!({"name": "confirm", "arguments": {}}),
    ))
    .await;
    let ask = p.recv().await;
    p.send(
        &json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32601, "message": "no UI"}}),
    )
    .await;
    let v = p.recv().await;
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("elicitation/create")
    );

    // A modern request in the same process is still served statelessly.
    let v = p
        .ask(&common::request(
            8,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "modern"}}),
        ))
        .await;
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    // A second initialize is refused; the session goes on.
    let v = p.ask(&initialize(9, "2025-11-25", json!({}))).await;
    assert_eq!(v["error"]["code"], -32600);
    let v = p.ask(&legacy(10, "ping", json!({}))).await;
    assert_eq!(v["result"], json!({}));
    // Modern-only methods are unknown inside the session.
    let v = p.ask(&legacy(11, "server/discover", json!({}))).await;
    assert_eq!(v["error"]["code"], -32601);
}

#[tokio::test]
async fn stdio_logging_follows_set_level_and_progress_follows_the_token() {
    let mut p = Pipe::start(server(|b| b));
    p.ask(&initialize(1, "2025-11-25", json!({}))).await;
    // No level set: no log messages (opt-in, as in the modern era).
    let v = p
        .ask(&legacy(
            2,
            "tools/call",
            json!({"name": "chatty", "arguments": {}}),
        ))
        .await;
    assert_eq!(v["id"], 2, "only the response: {v}");
    let v = p
        .ask(&legacy(3, "logging/setLevel", json!({"level": "info"})))
        .await;
    assert_eq!(v["result"], json!({}));
    p.send(&legacy(
        4,
        "tools/call",
        json!({"name": "chatty", "arguments": {}, "_meta": {"progressToken": "t"}}),
    ))
    .await;
    let log = p.recv().await;
    assert_eq!(log["method"], "notifications/message");
    assert_eq!(log["params"]["data"], "info line");
    WireChecker::legacy()
        .check("LoggingMessageNotification", &log)
        .unwrap();
    let progress = p.recv().await;
    assert_eq!(progress["params"]["progressToken"], "t", "{progress}");
    assert_eq!(p.recv().await["id"], 4);
    let v = p
        .ask(&legacy(5, "logging/setLevel", json!({"level": "loud"})))
        .await;
    assert_eq!(v["error"]["code"], -32602);
}

#[tokio::test]
async fn stdio_list_changes_reach_the_session_and_versions_are_negotiated() {
    let s = server(|b| b);
    let mut p = Pipe::start(s.clone());
    // A version the server does not speak gets its newest legacy one.
    let v = p.ask(&initialize(1, "2099-01-01", json!({}))).await;
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    s.add_tool(
        ToolDef::new("late")
            .description("Added later")
            .handler(|| async { Ok("late") }),
    )
    .unwrap();
    let v = p.recv().await;
    assert_eq!(v["method"], "notifications/tools/list_changed", "{v}");
}

#[tokio::test]
async fn stdio_bad_openings_get_clear_errors_and_the_process_goes_on() {
    let mut p = Pipe::start(server(|b| b));
    let v = p
        .ask(&legacy(1, "initialize", json!({"capabilities": {}})))
        .await;
    assert_eq!(v["error"]["code"], -32602);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("protocolVersion"),
        "{v}"
    );
    // Before initialize, a request without the modern _meta is refused.
    let v = p.ask(&legacy(2, "tools/list", json!({}))).await;
    assert_eq!(v["error"]["code"], -32602);
    // Odd capabilities do not lock the client out.
    let v = p
        .ask(&initialize(
            3,
            "2025-03-26",
            json!({"sampling": "yes please"}),
        ))
        .await;
    assert_eq!(v["result"]["protocolVersion"], "2025-03-26", "{v}");
    let v = p.ask(&legacy(4, "tools/list", json!({}))).await;
    assert!(v["result"]["tools"].is_array());
}

#[tokio::test]
async fn modern_only_servers_refuse_initialize_naming_their_versions() {
    let mut p = Pipe::start(server(|b| b.modern_only()));
    let v = p.ask(&initialize(1, "2025-11-25", json!({}))).await;
    assert_eq!(v["error"]["code"], -32601);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("2026-07-28"), "{message}");
    assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
}

struct Http {
    url: String,
    client: reqwest::Client,
}

impl Http {
    async fn start(server: Server) -> Http {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve_listener(server, HttpConfig::default(), listener));
        Http {
            url: format!("http://{addr}/mcp"),
            client: common::http_client().build().unwrap(),
        }
    }

    fn post(&self, body: &Value, session: Option<&str>) -> reqwest::RequestBuilder {
        let mut r = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(serde_json::to_vec(body).unwrap());
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r
    }

    async fn send(&self, body: &Value, session: Option<&str>) -> (u16, Value) {
        let mut request = self.post(body, session);
        if session.is_some() {
            request = request.header("mcp-protocol-version", "2025-11-25");
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn open(&self) -> String {
        let response = self
            .post(
                &initialize(1, "2025-11-25", json!({"elicitation": {}})),
                None,
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            id.len() >= 32 && id.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "{id}"
        );
        let v: Value = response.json().await.unwrap();
        assert_legacy("InitializeResult", &v);
        let (status, _) = self
            .send(
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                Some(&id),
            )
            .await;
        assert_eq!(status, 202);
        id
    }
}

/// The data lines of an SSE body read so far, as JSON.
async fn next_event(
    body: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buf: &mut String,
) -> Value {
    use futures::StreamExt as _;
    loop {
        if let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                return serde_json::from_str(data).unwrap();
            }
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .expect("no event within 5 s")
            .expect("stream ended")
            .unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test]
async fn http_sessions_serve_legacy_and_modern_side_by_side() {
    let h = Http::start(server(|b| b)).await;
    let session = h.open().await;
    let (status, v) = h
        .send(&legacy(2, "tools/list", json!({})), Some(&session))
        .await;
    assert_eq!(status, 200);
    assert_legacy("ListToolsResult", &v);
    // JSON-RPC errors inside a session travel with 200, as legacy clients expect.
    let (status, v) = h
        .send(
            &legacy(3, "tools/call", json!({"name": "nope"})),
            Some(&session),
        )
        .await;
    assert_eq!((status, v["error"]["code"].as_i64()), (200, Some(-32602)));
    // Modern traffic on the same endpoint is stateless and untouched.
    let modern = common::request(
        4,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "m"}}),
    );
    let response = h
        .post(&modern, None)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("mcp-session-id").is_none());
    let v: Value = response.json().await.unwrap();
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    // A legacy request without a session is not legacy traffic: refused as
    // a modern request without _meta.
    let (status, v) = h.send(&legacy(5, "tools/list", json!({})), None).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32602)));
    // Unknown sessions: 404, so the client starts over.
    let (status, _) = h
        .send(&legacy(6, "tools/list", json!({})), Some("not-a-session"))
        .await;
    assert_eq!(status, 404);
    // A wrong protocol version header: 400.
    let response = h
        .post(&legacy(7, "ping", json!({})), Some(&session))
        .header("mcp-protocol-version", "1999-01-01")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    // DELETE ends the session; afterwards it is unknown.
    let response = h
        .client
        .delete(&h.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (status, _) = h.send(&legacy(8, "ping", json!({})), Some(&session)).await;
    assert_eq!(status, 404);
    // Without a session header GET and DELETE stay 405.
    let response = h
        .client
        .get(&h.url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
}

#[tokio::test]
async fn http_input_requests_travel_on_the_response_stream_and_answers_by_post() {
    let h = Http::start(server(|b| b)).await;
    let session = h.open().await;
    let response = h
        .post(
            &legacy(2, "tools/call", json!({"name": "confirm", "arguments": {}})),
            Some(&session),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = Box::pin(response.bytes_stream());
    let mut buf = String::new();
    let ask = next_event(&mut body, &mut buf).await;
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(
        ask["params"]["mode"], "form",
        "2025-11-25 knows mode: {ask}"
    );
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}});
    let response = h.post(&answer, Some(&session)).send().await.unwrap();
    assert_eq!(response.status(), 202);
    let v = next_event(&mut body, &mut buf).await;
    assert_eq!(v["id"], 2);
    assert_eq!(v["result"]["content"][0]["text"], "not confirmed", "{v}");
    // An answer nobody waits for is accepted and ignored.
    let stray = json!({"jsonrpc": "2.0", "id": "nobody", "result": {}});
    assert_eq!(
        h.post(&stray, Some(&session))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
}

#[tokio::test]
async fn http_get_stream_carries_list_changes_of_the_session() {
    let s = server(|b| b);
    let h = Http::start(s.clone()).await;
    let session = h.open().await;
    let response = h
        .client
        .get(&h.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = Box::pin(response.bytes_stream());
    // The stream is attached once the response headers are out.
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.remove_tool("echo");
    let mut buf = String::new();
    let v = next_event(&mut body, &mut buf).await;
    assert_eq!(v["method"], "notifications/tools/list_changed");
    // GET for an unknown session: 404.
    let response = h
        .client
        .get(&h.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", "gone")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}
