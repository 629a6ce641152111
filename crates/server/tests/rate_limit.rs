//! Rate limits: per caller and per tool, answered as tool errors that say
//! when to retry; one caller's exhaustion never affects another.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};
use toolgate_server::{
    AuthContext, RateLimit, RegistrationError, Server, ToolDef, TransportContext,
};

fn tool(name: &str) -> ToolDef {
    ToolDef::new(name).description("Says ok")
}

fn server() -> Server {
    let ok = || async { Ok("ok") };
    Server::builder("s", "1")
        .rate_limit(RateLimit::per_minute(2))
        .tool(tool("a").handler(ok))
        .tool(tool("b").handler(ok))
        .tool(
            tool("strict")
                .rate_limit(RateLimit::per_minute(1))
                .handler(ok),
        )
        .build()
        .unwrap()
}

async fn call(server: &Server, caller: Option<&str>, name: &str) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let transport = TransportContext {
        auth: caller.map(AuthContext::new),
        ..TransportContext::default()
    };
    common::answer(server, &message, &transport).await["result"].clone()
}

fn refused(result: &Value) -> bool {
    result["isError"] == true
        && result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Rate limit reached") && t.contains("Try again in"))
}

#[tokio::test]
async fn each_caller_and_tool_has_its_own_budget() {
    let s = server();
    for _ in 0..2 {
        assert_eq!(
            call(&s, Some("alice"), "a").await["content"][0]["text"],
            "ok"
        );
    }
    let over = call(&s, Some("alice"), "a").await;
    assert!(refused(&over), "{over}");
    assert!(
        over["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("at most 2 calls per minute for each caller"),
        "{over}"
    );
    // Another caller, and another tool, are untouched.
    assert_eq!(call(&s, Some("bob"), "a").await["content"][0]["text"], "ok");
    assert_eq!(
        call(&s, Some("alice"), "b").await["content"][0]["text"],
        "ok"
    );
    // A tool's own limit overrides the server's.
    assert_eq!(
        call(&s, Some("bob"), "strict").await["content"][0]["text"],
        "ok"
    );
    assert!(refused(&call(&s, Some("bob"), "strict").await));
    // Callers without a subject share one budget.
    assert_eq!(call(&s, None, "a").await["content"][0]["text"], "ok");
    assert_eq!(call(&s, None, "a").await["content"][0]["text"], "ok");
    assert!(refused(&call(&s, None, "a").await));
}

#[test]
fn a_zero_limit_is_refused_at_build() {
    let ok = || async { Ok("ok") };
    let err = Server::builder("s", "1")
        .rate_limit(RateLimit::per_minute(0))
        .build()
        .err()
        .unwrap();
    assert!(matches!(err, RegistrationError::Config(_)), "{err}");
    let err = Server::builder("s", "1")
        .tool(tool("t").rate_limit(RateLimit::per_minute(0)).handler(ok))
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("\"t\""), "{err}");
}
