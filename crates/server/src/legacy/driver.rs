//! Runs a legacy request through the shared pipeline and turns
//! `input_required` endings into server-initiated requests.
//!
//! The modern pipeline answers "I need input" with an `input_required`
//! result. A legacy client cannot retry with `inputResponses`, so this
//! driver does the retrying for it: it sends each input request to the
//! client as a JSON-RPC request on the request's own channel (the SSE
//! response stream on HTTP, stdout on stdio), waits for the answers, and
//! runs the request again with them and the sealed `requestState` — exactly
//! what a modern client would do.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use serde_json::{Map, Value};
use toolgate_protocol::jsonrpc::{Request, encode_request, encode_result};
use toolgate_protocol::types::CallToolResult;
use toolgate_protocol::{RequestId, RpcError};

use super::{Session, legacy_shape, shared_dispatch};
use crate::Server;
use crate::dispatch::{TransportContext, error_frame, request_token};
use crate::exchange::{Exchange, Frame, Reply};
use crate::frame_queue::{self, FrameSender};

/// Rounds of input one legacy request may go through.
const MAX_ROUNDS: usize = 16;

pub(super) fn drive(
    server: &Server,
    session: Arc<Session>,
    req: Request,
    transport: &TransportContext,
) -> Reply {
    let (tx, notes) = frame_queue::queue();
    let cancel = request_token();
    // Legacy clients do not mirror parameters into headers, and the
    // session already identifies them: no per-request header checks.
    let transport = TransportContext {
        http_headers: None,
        ..transport.clone()
    };
    let server = server.clone();
    let work = Box::pin(async move { Some(run(&server, &session, req, &transport, &tx).await) });
    Reply::Streaming(Exchange::new(notes, work, cancel))
}

async fn run(
    server: &Server,
    session: &Arc<Session>,
    req: Request,
    transport: &TransportContext,
    tx: &FrameSender,
) -> Frame {
    let meta = session.request_meta(req.meta_value().as_ref());
    let id = req.id;
    let method = req.method;
    let mut params = req.params.unwrap_or_default();
    for _ in 0..MAX_ROUNDS {
        let attempt = Request {
            id: id.clone(),
            method: method.clone(),
            params: Some(params.clone()),
            meta: None,
        };
        let last = match shared_dispatch(server, attempt, meta.clone(), transport) {
            Ok(Reply::Done(frame)) => frame,
            Ok(Reply::Streaming(mut exchange)) => loop {
                match exchange.next().await {
                    Some(Frame::Notification(bytes)) => {
                        if tx.send(Frame::Notification(bytes)).await.is_err() {
                            return error_frame(Some(&id), RpcError::internal());
                        }
                    }
                    Some(frame) => break frame,
                    None => break error_frame(Some(&id), RpcError::internal()),
                }
            },
            Ok(Reply::Nothing) => error_frame(Some(&id), RpcError::internal()),
            Err((id, error)) => error_frame(Some(&id), error),
        };
        let Frame::Response {
            body,
            error_code: None,
        } = &last
        else {
            return last;
        };
        let Some(mut result) = result_of(body) else {
            return last;
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            legacy_shape(&mut result);
            return Frame::Response {
                body: encode_result(&id, &result),
                error_code: None,
            };
        }
        let requests = match result.remove("inputRequests") {
            Some(Value::Object(requests)) => requests,
            _ => Map::new(),
        };
        let answers = match ask(server, session, &requests, tx).await {
            Ok(answers) => answers,
            Err(refusal) => return refused(&id, &method, refusal),
        };
        params.insert("inputResponses".into(), Value::Object(answers));
        match result.remove("requestState") {
            Some(state) => params.insert("requestState".into(), state),
            None => params.remove("requestState"),
        };
    }
    error_frame(
        Some(&id),
        RpcError::internal().with_data(Value::from(format!(
            "the request still needed input after {MAX_ROUNDS} rounds"
        ))),
    )
}

fn result_of(body: &[u8]) -> Option<Map<String, Value>> {
    let mut envelope: Map<String, Value> = serde_json::from_slice(body).ok()?;
    match envelope.remove("result") {
        Some(Value::Object(result)) => Some(result),
        _ => None,
    }
}

/// The client could not (or would not) answer an input request.
struct Refusal {
    method: String,
    error: RpcError,
}

/// Send every input request of a round to the client at once and collect
/// the answers by key.
async fn ask(
    server: &Server,
    session: &Arc<Session>,
    requests: &Map<String, Value>,
    tx: &FrameSender,
) -> Result<Map<String, Value>, Refusal> {
    let wait = server.inner.config.state_ttl.max(Duration::from_secs(1));
    let mut pending = Vec::with_capacity(requests.len());
    for (key, request) in requests {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut params = request.get("params").cloned().unwrap_or(Value::Null);
        adapt_params(&session.version, &method, &mut params);
        let (rid, answer, guard) = session.expect_answer();
        let bytes = encode_request(&rid, &method, &params);
        if tx.send(Frame::Notification(bytes)).await.is_err() {
            return Err(Refusal {
                method,
                error: RpcError::internal(),
            });
        }
        pending.push(async move {
            let _guard = guard;
            let outcome = match tokio::time::timeout(wait, answer).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Err(RpcError::internal()),
                Err(_) => Err(RpcError::internal().with_data(Value::from(format!(
                    "no answer within {} s",
                    wait.as_secs()
                )))),
            };
            (key.clone(), method, outcome)
        });
    }
    let mut answers = Map::new();
    for (key, method, outcome) in join_all(pending).await {
        match outcome {
            Ok(value) => {
                answers.insert(key, value);
            }
            Err(error) => return Err(Refusal { method, error }),
        }
    }
    Ok(answers)
}

/// Older revisions predate some fields of the modern input requests.
fn adapt_params(version: &str, method: &str, params: &mut Value) {
    // `mode` arrived with URL elicitation in 2025-11-25; form mode is the
    // older clients' only mode, so the field is simply left out for them.
    if method == "elicitation/create"
        && version != "2025-11-25"
        && let Some(p) = params.as_object_mut()
        && p.get("mode").and_then(Value::as_str) == Some("form")
    {
        p.remove("mode");
    }
}

/// The answer to a request whose input the client refused or failed to
/// give: a tool gets an `isError` result a model can read; other methods a
/// JSON-RPC error.
fn refused(id: &RequestId, method: &str, refusal: Refusal) -> Frame {
    let text = format!(
        "The client could not complete the {} request this {method} needed: {}",
        refusal.method, refusal.error.message
    );
    if method == "tools/call" {
        let mut result = match serde_json::to_value(CallToolResult::error(text)) {
            Ok(Value::Object(map)) => map,
            _ => return error_frame(Some(id), RpcError::internal()),
        };
        legacy_shape(&mut result);
        return Frame::Response {
            body: encode_result(id, &result),
            error_code: None,
        };
    }
    error_frame(
        Some(id),
        RpcError::new(toolgate_protocol::codes::INTERNAL_ERROR, text),
    )
}
