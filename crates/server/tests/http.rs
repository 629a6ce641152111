//! The Streamable HTTP transport, end to end over loopback: every kind of bad
//! input gets its exact status and JSON-RPC code, and the server still
//! answers afterwards.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{assert_wire, request, test_server};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolgate_server::Server;
use toolgate_server::transport::http::{HttpConfig, serve_listener};

struct Harness {
    url: String,
    addr: std::net::SocketAddr,
    client: reqwest::Client,
    server: Server,
    probe: common::Probe,
}

async fn start_with(config: HttpConfig, page_size: usize) -> Harness {
    let (server, probe) = test_server(page_size);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve_listener(server.clone(), config, listener));
    Harness {
        url: format!("http://{addr}/mcp"),
        addr,
        client: common::http_client().build().unwrap(),
        server,
        probe,
    }
}

async fn start() -> Harness {
    start_with(HttpConfig::default(), 100).await
}

fn standard_headers(body: &Value) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert(
        "accept",
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    if let Some(v) = body
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
    {
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_str(v).expect("ascii"),
        );
    }
    if let Some(m) = body.get("method").and_then(Value::as_str) {
        h.insert("mcp-method", HeaderValue::from_str(m).expect("ascii"));
        let name = match m {
            "tools/call" | "prompts/get" => body.pointer("/params/name"),
            "resources/read" => body.pointer("/params/uri"),
            _ => None,
        };
        if let Some(n) = name.and_then(Value::as_str) {
            let encoded = toolgate_protocol::header::encode_header_value(n);
            h.insert(
                "mcp-name",
                HeaderValue::from_str(&encoded).expect("encoded"),
            );
        }
    }
    h
}

impl Harness {
    async fn raw(&self, headers: HeaderMap, body: Vec<u8>) -> (u16, HeaderMap, String) {
        let r = self
            .client
            .post(&self.url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .expect("send");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        (status, headers, r.text().await.expect("body"))
    }

    async fn send_with(&self, body: &Value, edit: impl FnOnce(&mut HeaderMap)) -> (u16, Value) {
        let mut headers = standard_headers(body);
        edit(&mut headers);
        let (status, _, text) = self
            .raw(headers, serde_json::to_vec(body).expect("json"))
            .await;
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        let method = body.get("method").and_then(Value::as_str).unwrap_or("");
        assert_wire(method, &value);
        (status, value)
    }

    async fn send(&self, body: &Value) -> (u16, Value) {
        self.send_with(body, |_| {}).await
    }

    /// The server still answers a normal call.
    async fn still_serves(&self) {
        let (status, v) = self
            .send(&request(
                999,
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "ok"}}),
            ))
            .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["result"]["content"][0]["text"], "ok");
    }
}

fn code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code in {v}"))
}

#[tokio::test]
async fn discover_and_list_carry_result_type_caching_and_server_info() {
    let h = start().await;
    let (status, v) = h.send(&request(1, "server/discover", json!({}))).await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(v["result"]["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "test-server"
    );
    assert!(v["result"]["ttlMs"].as_i64().is_some_and(|t| t > 0));
    let (_, v) = h.send(&request(2, "tools/list", json!({}))).await;
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(
        v["result"]["cacheScope"], "private",
        "admin_reset is scope-dependent"
    );
    let names: Vec<&str> = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["echo", "fail", "panic", "count", "liar", "slow", "route"],
        "registration order, admin_reset hidden"
    );
    let no_args = &v["result"]["tools"][1]["inputSchema"];
    assert_eq!(no_args["type"], "object");
    assert_eq!(no_args["additionalProperties"], false);
}

#[tokio::test]
async fn pagination_walks_every_page_with_hints_and_rejects_bad_cursors() {
    let h = start_with(HttpConfig::default(), 2).await;
    let (mut cursor, mut names) = (None::<String>, Vec::new());
    for page in 0.. {
        assert!(page < 10, "pagination does not end");
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let (status, v) = h.send(&request(page, "tools/list", params)).await;
        assert_eq!(status, 200, "{v}");
        assert!(
            v["result"]["ttlMs"].is_u64() && v["result"]["cacheScope"].is_string(),
            "{v}"
        );
        names.extend(
            v["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned()),
        );
        match v["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(names.len(), 7);
    let (status, v) = h
        .send(&request(
            20,
            "tools/list",
            json!({"cursor": "not-a-cursor"}),
        ))
        .await;
    assert_eq!((status, code(&v)), (400, -32602));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid cursor")
    );
    h.still_serves().await;
}

#[tokio::test]
async fn transport_level_refusals() {
    let h = start_with(
        HttpConfig {
            body_limit: 1024,
            ..HttpConfig::default()
        },
        100,
    )
    .await;
    let body = request(1, "tools/list", json!({}));
    let bytes = serde_json::to_vec(&body).unwrap();

    let r = h.client.get(&h.url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert_eq!(r.headers()["allow"], "POST");
    let r = h.client.delete(&h.url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);

    let cases: Vec<(&str, &str, &str, u16)> = vec![
        ("origin", "http://evil.example.com", "", 403),
        ("host", "evil.example.com", "", 403),
        ("content-type", "text/plain", "", 415),
        ("accept", "application/json", "", 406),
        ("accept", "text/event-stream", "", 406),
    ];
    for (name, value, _, expected) in cases {
        let mut headers = standard_headers(&body);
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
        let (status, _, text) = h.raw(headers, bytes.clone()).await;
        assert_eq!(status, expected, "{name}: {value}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(
            v.get("id").is_none() && v["error"]["message"].is_string(),
            "{v}"
        );
    }
    // A local origin is fine.
    let mut headers = standard_headers(&body);
    headers.insert("origin", HeaderValue::from_static("http://localhost:5173"));
    assert_eq!(h.raw(headers, bytes.clone()).await.0, 200);

    let big = request(2, "tools/list", json!({"pad": "x".repeat(4096)}));
    let (status, _, _) = h
        .raw(standard_headers(&big), serde_json::to_vec(&big).unwrap())
        .await;
    assert_eq!(status, 413);
    h.still_serves().await;
}

#[tokio::test]
async fn envelope_and_meta_errors() {
    let h = start().await;
    let headers = standard_headers(&request(1, "tools/list", json!({})));
    let (status, _, text) = h.raw(headers.clone(), b"{not json".to_vec()).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((status, code(&v)), (400, -32700));
    let (status, _, text) = h.raw(headers.clone(), b"[]".to_vec()).await;
    assert_eq!(
        (status, code(&serde_json::from_str(&text).unwrap())),
        (400, -32600)
    );
    let (status, _, text) = h
        .raw(
            headers.clone(),
            br#"{"jsonrpc":"2.0","id":5,"result":{}}"#.to_vec(),
        )
        .await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((status, code(&v), v["id"].clone()), (400, -32600, json!(5)));

    // Missing _meta, and each missing required field.
    let no_meta = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}});
    let (status, v) = h.send(&no_meta).await;
    assert_eq!((status, code(&v), v["id"].clone()), (400, -32602, json!(7)));
    for missing in [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
    ] {
        let mut m = common::meta();
        m.as_object_mut().unwrap().remove(missing);
        let body =
            json!({"jsonrpc": "2.0", "id": 8, "method": "server/discover", "params": {"_meta": m}});
        let (status, v) = h
            .send_with(&body, |hm| {
                hm.insert(
                    "mcp-protocol-version",
                    HeaderValue::from_static("2026-07-28"),
                );
            })
            .await;
        assert_eq!((status, code(&v)), (400, -32602), "{missing}");
        assert!(v["error"]["message"].as_str().unwrap().contains(missing));
    }
    // clientInfo is optional.
    let mut m = common::meta();
    m.as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    let (status, _) = h.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": m}})).await;
    assert_eq!(status, 200);
    // A notification is accepted with 202 and no body.
    let n =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    let (status, _, text) = h
        .raw(standard_headers(&n), serde_json::to_vec(&n).unwrap())
        .await;
    assert_eq!((status, text.as_str()), (202, ""));
    h.still_serves().await;
}

#[tokio::test]
async fn header_mismatches_are_32020() {
    let h = start().await;
    let call = request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "a"}}),
    );
    type Edit = Box<dyn FnOnce(&mut HeaderMap)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "no version header",
            Box::new(|m: &mut HeaderMap| {
                m.remove("mcp-protocol-version");
            }),
        ),
        (
            "version differs",
            Box::new(|m: &mut HeaderMap| {
                m.insert(
                    "mcp-protocol-version",
                    HeaderValue::from_static("2025-11-25"),
                );
            }),
        ),
        (
            "no method header",
            Box::new(|m: &mut HeaderMap| {
                m.remove("mcp-method");
            }),
        ),
        (
            "method differs",
            Box::new(|m: &mut HeaderMap| {
                m.insert("mcp-method", HeaderValue::from_static("tools/list"));
            }),
        ),
        (
            "no name header",
            Box::new(|m: &mut HeaderMap| {
                m.remove("mcp-name");
            }),
        ),
        (
            "name differs",
            Box::new(|m: &mut HeaderMap| {
                m.insert("mcp-name", HeaderValue::from_static("fail"));
            }),
        ),
        (
            "bad base64",
            Box::new(|m: &mut HeaderMap| {
                m.insert("mcp-name", HeaderValue::from_static("=?base64?***?="));
            }),
        ),
    ];
    for (what, edit) in edits {
        let (status, v) = h.send_with(&call, edit).await;
        assert_eq!((status, code(&v)), (400, -32020), "{what}: {v}");
        assert_eq!(v["id"], 1, "{what}");
    }
    // The base64 sentinel form of the right name is accepted.
    let (status, _) = h
        .send_with(&call, |m| {
            m.insert("mcp-name", HeaderValue::from_static("=?base64?ZWNobw==?="));
        })
        .await;
    assert_eq!(status, 200);
    h.still_serves().await;
}

#[tokio::test]
async fn version_and_method_errors() {
    let h = start().await;
    let mut m = common::meta();
    m["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": m}});
    let (status, v) = h.send(&body).await;
    assert_eq!((status, code(&v)), (400, -32022));
    assert_eq!(
        v["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "1900-01-01"})
    );

    for method in [
        "nope/nothing",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "prompts/list",
    ] {
        let (status, v) = h.send(&request(4, method, json!({}))).await;
        assert_eq!((status, code(&v)), (404, -32601), "{method}");
    }
    let (status, v) = h.send(&request(5, "initialize", json!({}))).await;
    assert_eq!((status, code(&v)), (404, -32601));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2026-07-28"),
        "{v}"
    );
    h.still_serves().await;
}

#[tokio::test]
async fn call_errors_in_their_layers() {
    let h = start().await;
    let (status, v) = h
        .send(&request(1, "tools/call", json!({"name": "nope"})))
        .await;
    assert_eq!((status, code(&v)), (400, -32602));
    assert_eq!(v["error"]["message"], "Unknown tool: \"nope\"");
    // A tool hidden for want of a scope says which scope (403, step-up).
    let (status, v) = h
        .send(&request(2, "tools/call", json!({"name": "admin_reset"})))
        .await;
    assert_eq!(
        (status, code(&v)),
        (403, toolgate_server::INSUFFICIENT_SCOPE)
    );
    assert_eq!(v["error"]["data"]["requiredScopes"], json!(["admin"]));
    // Params that break the CallToolRequest schema.
    let (status, v) = h
        .send(&request(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": [1]}),
        ))
        .await;
    assert_eq!((status, code(&v)), (400, -32602));
    let body = request(4, "tools/call", json!({"arguments": {}}));
    let (status, v) = h
        .send_with(&body, |m| {
            m.insert("mcp-name", HeaderValue::from_static("x"));
        })
        .await;
    assert_eq!((status, code(&v)), (400, -32602), "{v}");

    // Invalid arguments: an isError result naming each location; the
    // handler is never entered.
    let before = h.probe.entered();
    let (status, v) = h
        .send(&request(
            5,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": 5, "extra": true}}),
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["isError"], true);
    let text = v["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("/text") && text.contains("extra") && text.contains("inputSchema"),
        "{text}"
    );
    // Omitted arguments count as {}: "text" is required.
    let (_, v) = h
        .send(&request(6, "tools/call", json!({"name": "echo"})))
        .await;
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("text")
    );
    assert_eq!(h.probe.entered(), before);

    // A handler error is a tool execution error with the handler's text.
    let (status, v) = h
        .send(&request(7, "tools/call", json!({"name": "fail"})))
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["isError"], true);
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("503")
    );

    // A panic is -32603 without internals; the server keeps serving.
    let (status, v) = h
        .send(&request(8, "tools/call", json!({"name": "panic"})))
        .await;
    assert_eq!((status, code(&v)), (500, -32603));
    assert!(!v.to_string().contains("secret"), "{v}");
    h.still_serves().await;
}

#[tokio::test]
async fn structured_output_is_mirrored_and_checked() {
    let h = start().await;
    let (_, v) = h
        .send(&request(1, "tools/call", json!({"name": "count"})))
        .await;
    assert_eq!(v["result"]["structuredContent"], json!({"count": 3}));
    assert_eq!(v["result"]["content"][0]["text"], r#"{"count":3}"#);
    let (_, v) = h.send(&request(2, "tools/list", json!({}))).await;
    let count = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "count")
        .cloned()
        .unwrap();
    assert_eq!(
        count["outputSchema"]["properties"]["count"]["type"],
        "integer"
    );
    // Output breaking the declared schema never reaches the wire.
    let (_, v) = h
        .send(&request(3, "tools/call", json!({"name": "liar"})))
        .await;
    assert_eq!(v["result"]["isError"], true);
    assert!(v["result"].get("structuredContent").is_none(), "{v}");
}

#[tokio::test]
async fn progress_switches_to_sse_and_closing_the_stream_cancels() {
    let h = start().await;
    let mut m = common::meta();
    m["progressToken"] = json!("p1");
    let body = request(1, "tools/call", json!({"name": "slow", "_meta": m}));
    let (status, headers, text) = h
        .raw(standard_headers(&body), serde_json::to_vec(&body).unwrap())
        .await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-accel-buffering"], "no");
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    for e in &events {
        assert_wire("tools/call", e);
    }
    let progress: Vec<f64> = events
        .iter()
        .filter(|e| e["method"] == "notifications/progress")
        .map(|e| e["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [1.0, 2.0], "the non-increasing value is dropped");
    assert_eq!(
        events.last().unwrap()["result"]["content"][0]["text"],
        "done"
    );

    // Without a token the tool waits; closing the connection cancels it.
    let cancelled = h.probe.cancelled();
    let body = request(2, "tools/call", json!({"name": "slow"}));
    let fut = h
        .client
        .post(&h.url)
        .headers(standard_headers(&body))
        .json(&body)
        .send();
    let _ = tokio::time::timeout(Duration::from_millis(300), fut).await;
    for _ in 0..50 {
        if h.probe.cancelled() > cancelled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        h.probe.cancelled(),
        cancelled + 1,
        "the handler was not cancelled"
    );
    h.still_serves().await;
}

#[tokio::test]
async fn a_stalled_client_does_not_hold_others_up() {
    let h = start_with(
        HttpConfig {
            body_timeout: Duration::from_millis(300),
            ..HttpConfig::default()
        },
        100,
    )
    .await;
    let mut stalled = TcpStream::connect(h.addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"",
        h.addr
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    h.still_serves().await;
    let mut response = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut response))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&response[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
}

#[tokio::test]
async fn listen_acknowledges_then_delivers_only_requested_kinds() {
    let h = start().await;
    let body = request(
        42,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
    );
    let mut response = h
        .client
        .post(&h.url)
        .headers(standard_headers(&body))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    let mut events = Vec::new();
    let server = h.server.clone();
    let mut changed = false;
    while events.len() < 2 {
        let chunk = tokio::time::timeout(Duration::from_secs(5), response.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                events.push(serde_json::from_str::<Value>(data).unwrap());
            }
        }
        if !events.is_empty() && !changed {
            changed = true;
            server.notify_resource_updated("file:///not-subscribed");
            assert!(server.remove_tool("fail"));
        }
    }
    for e in &events {
        assert_wire("subscriptions/listen", e);
        assert_eq!(
            e["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            42
        );
    }
    assert_eq!(
        events[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    // Prompts are not offered by this server, so they are not acknowledged.
    assert_eq!(
        events[0]["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(events[1]["method"], "notifications/tools/list_changed");
}

#[tokio::test]
async fn mirrored_parameters_must_match_their_headers() {
    let h = start().await;
    let call = |args: Value| request(1, "tools/call", json!({"name": "route", "arguments": args}));
    let full = json!({"region": "Hello, 世界", "shard": 42, "opts": {"dry": true}});
    fn set(m: &mut HeaderMap, name: &'static str, v: &'static [u8]) {
        m.insert(
            HeaderName::from_static(name),
            HeaderValue::from_bytes(v).unwrap(),
        );
    }
    fn good(m: &mut HeaderMap) {
        set(m, "mcp-param-region", b"=?base64?SGVsbG8sIOS4lueVjA==?=");
        set(m, "mcp-param-shard", b"42.0");
        set(m, "mcp-param-dry-run", b"true");
    }
    let (status, v) = h.send_with(&call(full.clone()), good).await;
    assert_eq!(status, 200, "{v}");

    type Edit = Box<dyn FnOnce(&mut HeaderMap)>;
    let cases: Vec<(&str, Value, Edit)> = vec![
        (
            "header missing for a present value",
            full.clone(),
            Box::new(move |m: &mut HeaderMap| {
                good(m);
                m.remove("mcp-param-shard");
            }),
        ),
        (
            "value differs",
            full.clone(),
            Box::new(move |m: &mut HeaderMap| {
                good(m);
                set(m, "mcp-param-shard", b"43");
            }),
        ),
        (
            "boolean spelled differently",
            full.clone(),
            Box::new(move |m: &mut HeaderMap| {
                good(m);
                set(m, "mcp-param-dry-run", b"True");
            }),
        ),
        (
            "invalid characters",
            full.clone(),
            Box::new(move |m: &mut HeaderMap| {
                good(m);
                set(m, "mcp-param-region", b"caf\xe9");
            }),
        ),
        (
            "broken base64",
            full.clone(),
            Box::new(move |m: &mut HeaderMap| {
                good(m);
                set(m, "mcp-param-region", b"=?base64?SGVsbG8?=");
            }),
        ),
        (
            "header for an absent value",
            json!({"shard": 1}),
            Box::new(move |m: &mut HeaderMap| {
                set(m, "mcp-param-shard", b"1");
                set(m, "mcp-param-region", b"x");
            }),
        ),
    ];
    for (what, args, edit) in cases {
        let (status, v) = h.send_with(&call(args), edit).await;
        assert_eq!((status, code(&v)), (400, -32020), "{what}: {v}");
    }
    // Null and absent values need no header.
    let (status, v) = h.send(&call(json!({"region": null}))).await;
    assert_eq!(status, 200, "{v}");
    // Unknown Mcp-Param headers are ignored.
    let (status, _) = h
        .send_with(&call(json!({})), |m| set(m, "mcp-param-other", b"1"))
        .await;
    assert_eq!(status, 200);
    h.still_serves().await;
}

#[tokio::test]
async fn quiet_listen_streams_carry_keep_alive_comments() {
    let h = start_with(
        HttpConfig {
            keep_alive: Duration::from_millis(50),
            ..HttpConfig::default()
        },
        100,
    )
    .await;
    let body = request(
        9,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut response = h
        .client
        .post(&h.url)
        .headers(standard_headers(&body))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    while !seen.contains(": keep-alive") {
        let chunk = tokio::time::timeout(Duration::from_secs(2), response.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        seen.starts_with("event: message\ndata: "),
        "the acknowledgement comes first: {seen:?}"
    );
}

#[tokio::test]
async fn errors_quote_huge_values_briefly() {
    let h = start().await;
    // A 1.3 MB argument of the wrong type: the answer names it, briefly.
    let huge: Vec<u32> = (0..200_000).collect();
    let (status, v) = h
        .send(&request(
            1,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": huge}}),
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["isError"], true);
    let text = v["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.len() < 600, "{} bytes: {text}", text.len());
    assert!(text.contains("an array of 200000 items"), "{text}");
    assert!(text.contains("/text"), "{text}");
    // A long unknown tool name comes back as a prefix with its length.
    let name = "n".repeat(10_000);
    let (status, v) = h
        .send(&request(2, "tools/call", json!({"name": name})))
        .await;
    assert_eq!((status, code(&v)), (400, -32602));
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.len() < 200, "{message}");
    assert!(message.ends_with("…\" (10000 bytes)"), "{message}");
    h.still_serves().await;
}
