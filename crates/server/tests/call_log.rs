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
                Err("disk full".into())
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

/// Each record's tool and outcome, in order.
fn outcomes(records: &[CallRecord]) -> Vec<(&str, CallOutcome)> {
    records
        .iter()
        .map(|r| (r.tool.as_str(), r.outcome))
        .collect()
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
    assert_eq!(
        outcomes(&records),
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

/// Nonces shared by several servers, as a database would.
#[derive(Default)]
struct SharedNonces(Mutex<std::collections::HashSet<String>>);

impl toolgate_server::NonceStore for SharedNonces {
    fn spend(&self, nonce: String) -> toolgate_server::SpendFuture {
        let fresh = self.0.lock().unwrap().insert(nonce);
        Box::pin(async move { Ok(fresh) })
    }
}

/// A server whose `pay` asks once and pays once per round; `secret` is
/// shown only to bob; `admin` needs a scope; `gone` is withheld.
fn guarded(log: Arc<Kept>, nonces: Arc<SharedNonces>, paid: Arc<Mutex<u32>>) -> Server {
    Server::builder("s", "1")
        .call_log(log)
        .state_key(toolgate_server::StateKey::new([9; 32]))
        .nonce_store(nonces)
        .unlisted_answer(|name| {
            (name == "gone")
                .then(|| toolgate_server::Withheld::new("gone for review").note("rule", "lock"))
        })
        .tool(
            ToolDef::new("pay")
                .description("Pays after the user confirms.")
                .single_use_rounds()
                .handler(move |ctx: RequestContext| {
                    let paid = paid.clone();
                    async move {
                        let mut input = ctx.inputs();
                        let form = json!({"type": "object", "properties": {}});
                        let Some(_) = input.elicit("q", "Pay?", form)? else {
                            return Err(input.ask());
                        };
                        *paid.lock().unwrap() += 1;
                        Ok("paid".to_owned())
                    }
                }),
        )
        .tool(
            ToolDef::new("secret")
                .description("For bob.")
                .visible_when(|a| a.and_then(AuthContext::subject) == Some("bob"))
                .hidden_notes(|a| {
                    let mut notes = serde_json::Map::new();
                    notes.insert("who".into(), json!(a.and_then(AuthContext::subject)));
                    notes
                })
                .handler(|| async { "s3cret" }),
        )
        .tool(
            ToolDef::new("plain")
                .description("Answers.")
                .handler(|| async { "plain" }),
        )
        .tool(
            ToolDef::new("admin")
                .description("Needs a scope.")
                .scopes(["admin"])
                .handler(|| async { "ok" }),
        )
        .build()
        .unwrap()
}

async fn retry(server: &Server, name: &str, state: &Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": {},
        "requestState": state, "inputResponses": {"q": {"action": "accept", "content": {}}},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}});
    let transport = TransportContext {
        auth: Some(AuthContext::new("alice")),
        ..TransportContext::default()
    };
    common::answer(server, &message, &transport).await
}

#[tokio::test]
async fn a_single_use_round_runs_once_on_every_server_sharing_the_store_and_refusals_are_recorded()
{
    let (log, nonces, paid) = (Arc::new(Kept::default()), Arc::default(), Arc::default());
    let a = guarded(log.clone(), Arc::clone(&nonces), Arc::clone(&paid));
    let b = guarded(log.clone(), nonces, Arc::clone(&paid));
    let asked = call(&a, "pay", json!({})).await;
    let state = asked["result"]["requestState"].clone();
    assert_eq!(
        retry(&a, "pay", &state).await["result"]["content"][0]["text"],
        "paid"
    );
    // The same round again, here and on the other server: nothing is paid.
    for server in [&a, &b] {
        let again = retry(server, "pay", &state).await;
        assert_eq!(again["result"]["isError"], true, "{again}");
        assert_eq!(
            again["result"]["content"][0]["text"],
            "This round of \"pay\" was already answered: each requestState is good for one retry, so the tool did not run again. Call \"pay\" again without requestState to start over."
        );
    }
    assert_eq!(*paid.lock().unwrap(), 1);
    // A forged state, a state moved to another tool.
    let forged = json!(state.as_str().unwrap().replacen('e', "f", 1));
    assert_eq!(retry(&a, "pay", &forged).await["error"]["code"], -32602);
    let moved = retry(&a, "plain", &state).await;
    assert_eq!(moved["error"]["code"], -32602);
    assert!(
        moved["error"]["message"]
            .as_str()
            .unwrap()
            .contains("belongs to a different request"),
        "{moved}"
    );
    // Hidden from alice: unknown to her, recorded with its notes.
    let hidden = call(&a, "secret", json!({})).await;
    assert_eq!(hidden["error"]["message"], "Unknown tool: \"secret\"");
    assert_eq!(
        call(&a, "admin", json!({})).await["error"]["code"],
        toolgate_server::INSUFFICIENT_SCOPE
    );
    assert_eq!(call(&a, "gone", json!({})).await["result"]["isError"], true);
    let records = log.records.lock().unwrap().clone();
    assert_eq!(
        outcomes(&records),
        [
            ("pay", CallOutcome::InputRequired),
            ("pay", CallOutcome::Ok),
            ("pay", CallOutcome::Replayed),
            ("pay", CallOutcome::Replayed),
            ("pay", CallOutcome::Tampered),
            ("plain", CallOutcome::Moved),
            ("secret", CallOutcome::Hidden),
            ("admin", CallOutcome::InsufficientScope),
            ("gone", CallOutcome::Withheld),
        ]
    );
    assert!(records.iter().all(|r| r.caller.as_deref() == Some("alice")));
    assert_eq!(records[6].notes["who"], "alice");
    assert_eq!(records[8].notes["rule"], "lock");
    // And the server still serves.
    assert_eq!(
        call(&b, "pay", json!({})).await["result"]["resultType"],
        "input_required"
    );
}

/// Writes rows ahead: keeps what `begin` was given, and what `record`
/// completed; refuses to begin while `broken`; says it does not write
/// ahead when `declines`.
#[derive(Default)]
struct Ahead {
    begun: Mutex<Vec<CallRecord>>,
    completed: Mutex<Vec<CallRecord>>,
    broken: bool,
    /// Fails only after it was left to run (a log that writes later).
    late: bool,
    declines: bool,
}

impl CallLog for Ahead {
    fn record(&self, record: CallRecord) -> Recorded {
        self.completed.lock().unwrap().push(record);
        Box::pin(async { Ok(()) })
    }
    fn begin(&self, record: CallRecord) -> toolgate_server::Begun {
        self.begun.lock().unwrap().push(record);
        let (broken, late) = (self.broken, self.late);
        Box::pin(async move {
            if late {
                tokio::task::yield_now().await;
            }
            if broken {
                Err("disk full".into())
            } else {
                Ok(Some(7))
            }
        })
    }
    fn writes_ahead(&self) -> bool {
        !self.declines
    }
}

fn forwarding(log: Arc<dyn CallLog>, seen: Arc<Mutex<Vec<usize>>>) -> Server {
    Server::builder("s", "1")
        .call_log(log)
        .tool(
            ToolDef::new("send")
                .description("Writes its call ahead, then sends.")
                .handler(move |ctx: RequestContext| {
                    let seen = seen.clone();
                    async move {
                        ctx.note("upstream", "shop");
                        let started = match ctx.write_ahead() {
                            Ok(started) => started,
                            Err(refused) => {
                                // Twice is refused twice, and asks nothing more.
                                assert_eq!(ctx.write_ahead(), Err(refused.clone()));
                                return Err(ToolError::new(refused.answer()));
                            }
                        };
                        // Twice is once.
                        assert_eq!(ctx.write_ahead(), Ok(started));
                        seen.lock().unwrap().push(usize::from(started));
                        ctx.note("status", "sent");
                        Ok("sent".to_owned())
                    }
                }),
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_call_written_ahead_is_begun_before_its_effect_and_completed_by_its_key() {
    let log = Arc::new(Ahead::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = forwarding(log.clone(), seen.clone());
    let answer = call(&s, "send", json!({})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "sent");
    assert_eq!(*seen.lock().unwrap(), [1]);
    let begun = log.begun.lock().unwrap();
    assert_eq!(begun.len(), 1, "begun once");
    let b = &begun[0];
    assert_eq!(b.outcome, CallOutcome::InFlight);
    assert_eq!(b.caller.as_deref(), Some("alice"));
    // What was noted before the write, and nothing after.
    assert_eq!(b.notes.get("upstream"), Some(&json!("shop")));
    assert!(!b.notes.contains_key("status"));
    let completed = log.completed.lock().unwrap();
    assert_eq!(outcomes(&completed), [("send", CallOutcome::Ok)]);
    let c = &completed[0];
    assert_eq!(c.begun, Some(7));
    assert_eq!(c.arguments_digest, b.arguments_digest);
    assert_eq!(c.notes.get("status"), Some(&json!("sent")));
}

#[tokio::test]
async fn a_log_that_says_it_does_not_write_ahead_is_not_asked_to() {
    let log = Arc::new(Ahead {
        declines: true,
        ..Ahead::default()
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = forwarding(log.clone(), seen.clone());
    let answer = call(&s, "send", json!({})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "sent");
    assert_eq!(
        *seen.lock().unwrap(),
        [0],
        "write_ahead says nothing started"
    );
    assert!(log.begun.lock().unwrap().is_empty());
    let completed = log.completed.lock().unwrap();
    assert_eq!(outcomes(&completed), [("send", CallOutcome::Ok)]);
    assert_eq!(completed[0].begun, None);
    assert_eq!(completed[0].notes.get("upstream"), Some(&json!("shop")));
}

#[tokio::test]
async fn a_write_ahead_refused_at_once_stops_the_handler_before_its_effect() {
    let log = Arc::new(Ahead {
        broken: true,
        ..Ahead::default()
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = forwarding(log.clone(), seen.clone());
    let answer = call(&s, "send", json!({})).await;
    assert_eq!(answer["result"]["isError"], true);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("was not made") && text.contains("audit store"),
        "{text}"
    );
    assert!(
        !text.contains("disk full"),
        "the log's own error stays in the server's log: {text}"
    );
    assert!(seen.lock().unwrap().is_empty(), "the effect never ran");
    assert_eq!(log.begun.lock().unwrap().len(), 1, "asked once");
    // The refusal is recorded the ordinary way.
    let completed = log.completed.lock().unwrap();
    assert_eq!(outcomes(&completed), [("send", CallOutcome::ToolError)]);
}

#[tokio::test]
async fn a_write_ahead_that_fails_later_leaves_the_outcome_to_the_ordinary_record() {
    let log = Arc::new(Ahead {
        broken: true,
        late: true,
        ..Ahead::default()
    });
    let s = forwarding(log.clone(), Arc::default());
    let answer = call(&s, "send", json!({})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "sent");
    let completed = log.completed.lock().unwrap();
    assert_eq!(outcomes(&completed), [("send", CallOutcome::Ok)]);
    assert_eq!(
        completed[0].begun, None,
        "recorded as a call not written ahead"
    );
}

#[tokio::test]
async fn a_log_that_does_not_write_ahead_records_the_outcome_before_the_answer() {
    let log = Arc::new(Kept::default());
    let s = forwarding(log.clone(), Arc::default());
    call(&s, "send", json!({})).await;
    {
        let records = log.records.lock().unwrap();
        assert_eq!(outcomes(&records), [("send", CallOutcome::Ok)]);
        assert_eq!(records[0].begun, None);
    }
    // Broken, it withholds the result as before.
    *log.broken.lock().unwrap() = true;
    let answer = call(&s, "send", json!({})).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
}
