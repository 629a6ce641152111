//! A gateway tool's handler: relay one call to its upstream, one round at
//! a time, and say clearly whose fault a failure is.
//!
//! The upstream's questions (modern `input_required`) are passed to the
//! downstream client as they are; the upstream's `requestState`, its
//! questions and the round number travel in the gateway's own sealed
//! `requestState`, so the retry may reach any gateway process holding the
//! same state key and the upstream is never called twice for one round.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_client::{CallOptions, CallRound, ClientError, RoundInput};
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::CallToolResult;
use toolgate_server::{RequestContext, ToolError, ToolReply};

use crate::upstream::Upstream;

/// The key a question of upstream round `round` has downstream: the
/// upstream's own key in the first round (so one round is transparent),
/// `round/key` after, so keys reused by a later round never meet the
/// answers of an earlier one.
fn key(round: u64, upstream_key: &str) -> String {
    if round <= 1 {
        upstream_key.to_owned()
    } else {
        format!("{round}/{upstream_key}")
    }
}

/// Relay a call of `tool` (its upstream name) to `upstream`.
pub async fn forward(
    upstream: Arc<Upstream>,
    tool: String,
    args: Map<String, Value>,
    ctx: RequestContext,
) -> Result<ToolReply, ToolError> {
    let server = upstream.config.name.clone();
    let mut input = ctx.inputs();
    // Answers to the questions of the upstream round the last downstream
    // round ended with.
    let mut round = 0u64;
    let mut previous: Option<RoundInput> = None;
    if let Some(kept) = input.remembered().cloned() {
        round = kept.get("round").and_then(Value::as_u64).unwrap_or(1);
        let requests = kept
            .get("requests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut responses = Map::new();
        for (k, request) in &requests {
            if let Some(answer) = input.relay(&key(round, k), request.clone())? {
                responses.insert(k.clone(), answer);
            }
        }
        if !input.complete() {
            input.remember(kept);
            return Err(input.ask());
        }
        previous = Some(RoundInput {
            input_responses: responses,
            request_state: kept.get("state").and_then(Value::as_str).map(str::to_owned),
        });
    }
    let client = match upstream.client() {
        Ok(client) => client,
        Err(down) => {
            return Ok(error(format!(
                "{down}. Its tools cannot be used until it is back; the gateway's other servers are not affected. Try again shortly."
            )));
        }
    };
    let options = CallOptions {
        timeout: Some(upstream.config.call_timeout()),
        progress: progress_relay(&ctx),
        // The upstream asks only for what the caller can answer.
        capabilities: Some(ctx.client_capabilities().clone()),
    };
    let outcome = client
        .call_tool_round(&tool, args, previous, &options)
        .await;
    upstream.outcome(&outcome);
    match outcome {
        Ok(CallRound::Complete(result)) => {
            let violations = client
                .check_output(&tool, &result)
                .await
                .unwrap_or_default();
            if violations.is_empty() {
                return Ok(ToolReply::Complete(result));
            }
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            tracing::warn!(%server, %tool, violations = %list.join("; "), "upstream result breaks its outputSchema; withheld");
            Ok(error(format!(
                "The upstream server {server} returned a result for {} that breaks the tool's outputSchema ({}), so it was withheld. This is a fault in the upstream server, not in the arguments.",
                quote(&tool),
                list.join("; ")
            )))
        }
        Ok(CallRound::InputRequired {
            input_requests,
            request_state,
        }) => {
            let next = round + 1;
            for (k, request) in &input_requests {
                // Not answered yet by construction: every key is new.
                input.relay(&key(next, k), request.clone())?;
            }
            input.remember(json!({
                "round": next,
                "state": request_state,
                "requests": input_requests,
            }));
            Err(input.ask())
        }
        // The upstream refused the request itself: pass its answer on.
        Err(ClientError::Protocol(e)) => Err(ToolError::protocol(e)),
        Err(ClientError::Timeout(after)) => Ok(error(format!(
            "The upstream server {server} did not answer {} within {} s; the call was cancelled there. Try again later, or with a smaller request.",
            quote(&tool),
            after.as_secs_f64()
        ))),
        Err(
            e @ (ClientError::ServerExited(_)
            | ClientError::Unreachable(_)
            | ClientError::Transport(_)),
        ) => Ok(error(format!(
            "The upstream server {server} failed during the call ({e}); the gateway restarts it. Its tools cannot be used until it is back; the gateway's other servers are not affected."
        ))),
        Err(e) => Ok(error(format!(
            "The upstream server {server} answered {} with something the gateway cannot pass on ({e}). This is a fault in the upstream server.",
            quote(&tool)
        ))),
    }
}

fn error(text: String) -> ToolReply {
    ToolReply::Complete(CallToolResult::error(text))
}

/// Relays the upstream's progress to the downstream client, when it asked
/// for progress.
fn progress_relay(ctx: &RequestContext) -> Option<toolgate_client::ProgressFn> {
    if !ctx.wants_progress() {
        return None;
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(f64, Option<f64>, Option<String>)>(64);
    let ctx = ctx.clone();
    tokio::spawn(async move {
        while let Some((progress, total, message)) = rx.recv().await {
            ctx.progress(progress, total, message.as_deref()).await;
        }
    });
    Some(Arc::new(move |p| {
        // Progress is advisory: when the downstream is slower than the
        // upstream, the excess is dropped rather than queued without bound.
        let _ = tx.try_send((p.progress, p.total, p.message.clone()));
    }))
}
