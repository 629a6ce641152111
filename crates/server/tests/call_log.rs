//! The call log: one record per call that reached a tool, with how it
//! ended and what the handler noted, written before the answer leaves; a
//! record that cannot be written withholds the result.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_server::{
    AuthContext, CallLog, CallOutcome, CallRecord, RateLimit, Recorded, RequestContext, Server,
    ToolDef, ToolError, TransportContext,
};

/// Keeps records; refuses to write while `broken`.
#[derive(Default)]
struct Kept {
    records: Mutex<Vec<CallRecord>>,
    broken: Mutex<bool>,
}

impl CallLog for Kept {
    fn wants_arguments(&self) -> bool {
        true
    }
    fn record(&self, record: CallRecord) -> Recorded {
        let broken = *self.broken.lock().unwrap();
        if !broken {
            self.records.lock().unwrap().push(record);
        }
        Box::pin(async move {
            if broken {
                Err("disk full".to_owned())
            } else {
                Ok(())
            }
        })
    }
}

#[derive(Deserialize, JsonSchema)]
struct Count {
    n: u32,
}

fn server(log: Arc<Kept>) -> Server {
    Server::builder("s", "1")
        .call_log(log)
        .unlisted_answer(|name| (name == "gone").then(|| "gone for review".to_owned()))
        .tool(
            ToolDef::new("count")
                .description("Echoes n; notes it.")
                .rate_limit(RateLimit::per_minute(3))
                .handler(|args: Count, ctx: RequestContext| async move {
                    ctx.note("seen", args.n);
                    Ok(args.n.to_string())
                }),
        )
        .tool(
            ToolDef::new("fail")
                .description("Fails.")
                .handler(|| async move { Err::<String, _>(ToolError::new("no")) }),
        )
        .tool(ToolDef::new("ask").description("Asks a question.").handler(
            |ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let form = json!({"type": "object", "properties": {}});
                let Some(_) = input.elicit("q", "Sure?", form)? else {
                    return Err(input.ask());
                };
                Ok("done".to_owned())
            },
        ))
        .build()
        .unwrap()
}

async fn call(server: &Server, name: &str, arguments: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}});
    let transport = TransportContext {
        auth: Some(AuthContext::new("alice")),
        ..TransportContext::default()
    };
    common::answer(server, &message, &transport).await
}

#[tokio::test]
async fn every_call_that_reaches_a_tool_is_recorded_with_its_outcome_and_notes() {
    let log = Arc::new(Kept::default());
    let s = server(log.clone());
    call(&s, "count", json!({"n": 1})).await;
    call(&s, "count", json!({"n": "x"})).await;
    call(&s, "fail", json!({})).await;
    call(&s, "ask", json!({})).await;
    call(&s, "gone", json!({})).await;
    call(&s, "count", json!({"n": 2})).await;
    call(&s, "count", json!({"n": 3})).await;
    let limited = call(&s, "count", json!({"n": 4})).await;
    assert_eq!(limited["result"]["isError"], true);
    // Not calls: an unknown tool, malformed params.
    call(&s, "nope", json!({})).await;
    let records = log.records.lock().unwrap();
    let seen: Vec<(&str, CallOutcome)> = records
        .iter()
        .map(|r| (r.tool.as_str(), r.outcome))
        .collect();
    assert_eq!(
        seen,
        [
            ("count", CallOutcome::Ok),
            ("count", CallOutcome::InvalidArguments),
            ("fail", CallOutcome::ToolError),
            ("ask", CallOutcome::InputRequired),
            ("gone", CallOutcome::Withheld),
            ("count", CallOutcome::Ok),
            // The limit counts refused arguments too (checked first).
            ("count", CallOutcome::RateLimited),
            ("count", CallOutcome::RateLimited),
        ]
    );
    let first = &records[0];
    assert_eq!(first.caller.as_deref(), Some("alice"));
    assert_eq!(first.notes["seen"], 1);
    assert_eq!(first.arguments, Some(json!({"n": 1})));
    // Same arguments, same digest; others differ.
    assert_ne!(first.arguments_digest, records[5].arguments_digest);
    assert_eq!(records[1].notes.len(), 0);
}

#[tokio::test]
async fn a_call_that_cannot_be_recorded_has_its_result_withheld_and_the_server_goes_on() {
    let log = Arc::new(Kept::default());
    let s = server(log.clone());
    *log.broken.lock().unwrap() = true;
    let withheld = call(&s, "count", json!({"n": 7})).await;
    assert_eq!(withheld["result"]["isError"], true);
    let text = withheld["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("could not be recorded") && !text.contains("7") && !text.contains("disk"),
        "{text}"
    );
    *log.broken.lock().unwrap() = false;
    let ok = call(&s, "count", json!({"n": 8})).await;
    assert_eq!(ok["result"]["content"][0]["text"], "8");
}
