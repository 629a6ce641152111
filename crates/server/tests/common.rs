//! Shared fixtures: a server with tools that exercise every code path, and
//! helpers that check each message against the specification's schema.
#![allow(dead_code, missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_protocol::wire_check::WireChecker;
use toolgate_server::protocol::types::CallToolResult;
use toolgate_server::{RequestContext, Server, Structured, ToolDef, ToolError, ToolReply};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Echo {
    pub text: String,
    pub times: Option<u8>,
}

#[derive(Serialize, JsonSchema)]
pub struct Count {
    pub count: u32,
}

/// Counts how often handlers were entered.
#[derive(Clone, Default)]
pub struct Probe {
    pub entered: Arc<AtomicUsize>,
    pub cancelled: Arc<AtomicUsize>,
}

impl Probe {
    pub fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }
    pub fn cancelled(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }
}

struct OnDrop(Arc<AtomicUsize>, bool);
impl Drop for OnDrop {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

pub fn test_server(page_size: usize) -> (Server, Probe) {
    let probe = Probe::default();
    let (p1, p2) = (probe.clone(), probe.clone());
    let server = Server::builder("test-server", "9.9.9")
        .page_size(page_size)
        .tool(ToolDef::new("echo").description("Echoes text").read_only().handler(move |a: Echo| {
            let p = p1.clone();
            async move {
                p.entered.fetch_add(1, Ordering::SeqCst);
                Ok(a.text.repeat(usize::from(a.times.unwrap_or(1))))
            }
        }))
        .tool(ToolDef::new("fail").description("Always fails").handler(|| async {
            Err::<String, _>(ToolError::new("the upstream API answered 503; try again in a minute"))
        }))
        .tool(ToolDef::new("panic").description("Panics").handler(|| async {
            if true {
                panic!("secret internal detail /etc/passwd");
            }
            Ok("unreachable")
        }))
        .tool(ToolDef::new("count").description("Structured").handler(|| async {
            Ok(Structured(Count { count: 3 }))
        }))
        .tool(
            ToolDef::new("liar")
                .description("Declares an outputSchema, returns something else")
                .dynamic(
                    json!({"type": "object"}).as_object().cloned().unwrap_or_default(),
                    json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}).as_object().cloned(),
                    |_args, _ctx| async {
                        let mut r = CallToolResult::text("n is a string here");
                        r.structured_content = Some(json!({"n": "not a number"}));
                        Ok(ToolReply::Complete(r))
                    },
                ),
        )
        .tool(ToolDef::new("slow").description("Reports progress, then waits to be cancelled").handler(
            move |ctx: RequestContext| {
                let p = p2.clone();
                async move {
                    p.entered.fetch_add(1, Ordering::SeqCst);
                    let mut guard = OnDrop(p.cancelled.clone(), false);
                    ctx.progress(1.0, Some(3.0), Some("started")).await;
                    ctx.progress(1.0, Some(3.0), Some("duplicate, dropped")).await;
                    ctx.progress(2.0, Some(3.0), None).await;
                    if ctx.meta().progress_token.is_none() {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    } else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    guard.1 = true;
                    Ok("done")
                }
            },
        ))
        .tool(ToolDef::new("route").description("Header-mirrored parameters").dynamic(
            json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "shard": {"type": "integer", "x-mcp-header": "Shard"},
                "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}}
            }}).as_object().cloned().unwrap(),
            None,
            |args, _ctx| async move { Ok(ToolReply::Complete(CallToolResult::text(serde_json::Value::Object(args).to_string()))) },
        ))
        .tool(ToolDef::new("admin_reset").description("Admins only").requires_scope("admin").handler(
            || async { Ok("reset") },
        ))
        .build()
        .expect("valid registrations");
    (server, probe)
}

pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}
    })
}

pub fn request(id: i64, method: &str, mut params: Value) -> Value {
    if let Some(p) = params.as_object_mut() {
        p.entry("_meta").or_insert_with(meta);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Check a message the server sent for `method` against schema.json.
pub fn assert_wire(method: &str, message: &Value) {
    if let Err(e) = WireChecker::modern().check_server_message(method, message) {
        panic!("message violates the 2026-07-28 schema: {e}");
    }
}

/// An HTTP client for the tests. TLS is never used here, but reqwest's
/// rustls backend (enabled for toolgate-client) needs a crypto provider
/// installed before any client is built.
pub fn http_client() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

/// Send `message` straight to the server (no transport) as `transport`
/// describes the caller, and return its response, checked against the
/// schema.
pub async fn answer(
    server: &Server,
    message: &Value,
    transport: &toolgate_server::TransportContext,
) -> Value {
    let reply = server.handle_message(&serde_json::to_vec(message).unwrap(), transport);
    let frame = match reply {
        toolgate_server::transport::Reply::Done(frame) => frame,
        toolgate_server::transport::Reply::Streaming(mut exchange) => {
            exchange.next().await.expect("a response")
        }
        toolgate_server::transport::Reply::Nothing => panic!("no reply"),
    };
    let value: Value = serde_json::from_slice(frame.bytes()).unwrap();
    let method = message["method"].as_str().unwrap_or_default();
    assert_wire(method, &value);
    value
}
