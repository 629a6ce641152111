//! Relaying one request round by round (layer `call`): the upstream's
//! questions (modern `input_required`) are passed to the downstream client
//! as they are; the upstream's `requestState`, its questions and the round
//! number travel in the gateway's own sealed `requestState`, so the retry
//! may reach any gateway process holding the same state key and the
//! upstream is never called twice for one round. A legacy upstream's call,
//! which asks mid-flight, is parked between rounds ([`crate::call::parked`]).
//! Progress and log notifications are passed on as they come.

use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_client::{CallEnd, CallOptions, Client, ClientError, Round, RoundInput};
use toolgate_protocol::types::{ClientCapabilities, LoggingLevel};
use toolgate_server::{Inputs, RequestContext, ToolError};

use crate::call::parked;
use crate::call::telemetry;
use crate::call::upstream::Upstream;

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

/// How a relayed call that ran in its own task (a legacy upstream's, parked
/// between its caller's rounds) ended, whichever kind of call it was.
pub(crate) enum Ended {
    /// A tool call.
    Call(Result<Round<CallEnd>, ClientError>),
    /// Any other request (`prompts/get`, `resources/read`).
    Other(Result<Round<Value>, ClientError>),
    /// The task ended without saying how (it was aborted or panicked).
    Lost,
}

/// A kind of relayed call: what its outcome becomes in an [`Ended`], and
/// back.
pub(crate) trait Relayed: Sized + Send + 'static {
    fn ended(outcome: Result<Round<Self>, ClientError>) -> Ended;
    fn outcome(ended: Ended) -> Result<Round<Self>, ClientError>;
}

fn lost() -> ClientError {
    ClientError::transport("the relayed call ended abnormally")
}

impl Relayed for CallEnd {
    fn ended(outcome: Result<Round<Self>, ClientError>) -> Ended {
        Ended::Call(outcome)
    }

    fn outcome(ended: Ended) -> Result<Round<Self>, ClientError> {
        match ended {
            Ended::Call(outcome) => outcome,
            Ended::Other(_) | Ended::Lost => Err(lost()),
        }
    }
}

impl Relayed for Value {
    fn ended(outcome: Result<Round<Self>, ClientError>) -> Ended {
        Ended::Other(outcome)
    }

    fn outcome(ended: Ended) -> Result<Round<Self>, ClientError> {
        match ended {
            Ended::Other(outcome) => outcome,
            Ended::Call(_) | Ended::Lost => Err(lost()),
        }
    }
}

/// What kind of request a relay sends.
pub(crate) struct Relaying {
    /// A `tools/call` (rather than a prompt or resource request).
    pub tool_call: bool,
    /// The token it carries for its caller (`[servers.X.identity]`),
    /// instead of the gateway's own credentials.
    pub bearer: Option<toolgate_client::transport::Bearer>,
}

/// Relay rounds: answers for the upstream's last questions go with the
/// call; new questions end the downstream round (`Err` with the
/// `input_required` to send). `Ok(Err(_))` is the upstream call's failure.
///
/// `carry` is kept with the relay's own state between rounds (the
/// gateway's approval of the call).
pub(crate) async fn relay<T, F, Fut>(
    upstream: &Upstream,
    ctx: &RequestContext,
    mut input: Inputs,
    carry: Map<String, Value>,
    Relaying { tool_call, bearer }: Relaying,
    span: (&str, Option<&str>),
    call: F,
) -> Result<Result<T, ClientError>, ToolError>
where
    T: Relayed,
    F: FnOnce(Client, Option<RoundInput>, CallOptions) -> Fut,
    Fut: Future<Output = Result<Round<T>, ClientError>> + Send + 'static,
{
    let remember = |input: &mut Inputs, relay: Value| {
        let mut kept = carry.clone();
        kept.insert("relay".into(), relay);
        input.remember(Value::Object(kept));
    };
    let kept = input.remembered().and_then(|k| k.get("relay")).cloned();
    if let Some(id) = kept.as_ref().and_then(|k| k.get("parked")?.as_str()) {
        let Some(waiting) = upstream.parked.take(id) else {
            return Err(ToolError::new(format!(
                "The upstream server {}'s call that this answer belongs to is no longer waiting: it ended or timed out, or the answer reached another gateway process. Call again.",
                upstream.config.name
            )));
        };
        let outcome = match parked::answer(upstream, &mut input, waiting).await? {
            parked::Step::Parked(id) => {
                remember(&mut input, json!({ "parked": id }));
                return Err(input.ask());
            }
            parked::Step::Done(outcome) => outcome,
        };
        return finish(upstream, input, 0, T::outcome(outcome), remember);
    }
    let mut round = 0u64;
    let mut previous: Option<RoundInput> = None;
    if let Some(kept) = kept {
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
            remember(&mut input, kept);
            return Err(input.ask());
        }
        previous = Some(RoundInput {
            input_responses: responses,
            request_state: kept.get("state").and_then(Value::as_str).map(str::to_owned),
        });
    }
    let client = match upstream.client() {
        Ok(client) => client,
        Err(down) => return Ok(Err(unreachable(down.reason))),
    };
    let (progress, progress_done) = progress_relay(ctx);
    let (log, log_done) = log_relay(ctx);
    let (span_cx, trace) = telemetry::upstream_span(span.0, span.1, ctx.meta().trace.as_ref());
    let options = CallOptions {
        timeout: Some(upstream.config.call_timeout()),
        progress,
        // The upstream asks only for what the caller can answer.
        capabilities: Some(upstream_capabilities(ctx, tool_call)),
        log_level: ctx.meta().log_level,
        log,
        questions: None,
        on_task: None,
        trace,
        bearer,
    };
    let drains: Vec<_> = [progress_done, log_done].into_iter().flatten().collect();
    if client.is_legacy().await.unwrap_or(false) {
        // A legacy upstream asks in the middle of its call: the call runs on
        // in its own task, parked between the caller's rounds.
        let flight = parked::Flight::start::<T, _>(options, |options| call(client, None, options));
        return match parked::fly(upstream, &mut input, flight).await? {
            parked::Step::Parked(id) => {
                remember(&mut input, json!({ "parked": id }));
                Err(input.ask())
            }
            parked::Step::Done(outcome) => {
                drain(drains).await;
                finish(upstream, input, round, T::outcome(outcome), remember)
            }
        };
    }
    // The call owns the only senders: once it is done, the relays drain
    // what is left and end, and every notification reaches the caller
    // before the result does.
    let outcome = call(client, previous, options).await;
    if let Err(e) = &outcome {
        telemetry::failed(span_cx.as_ref(), &upstream.said(e));
    }
    drop(span_cx);
    drain(drains).await;
    finish(upstream, input, round, outcome, remember)
}

/// Wait (bounded) for the progress and log relays to pass on what is left.
async fn drain(relays: Vec<tokio::task::JoinHandle<()>>) {
    for relay in relays {
        let _ = tokio::time::timeout(RELAY_DRAIN, relay).await;
    }
}

/// The end of an upstream round: its result, or its questions for the
/// caller (a modern upstream's `input_required`).
fn finish<T>(
    upstream: &Upstream,
    mut input: Inputs,
    round: u64,
    outcome: Result<Round<T>, ClientError>,
    remember: impl Fn(&mut Inputs, Value),
) -> Result<Result<T, ClientError>, ToolError> {
    upstream.outcome(&outcome);
    match outcome {
        Ok(Round::Complete(result)) => Ok(Ok(result)),
        Ok(Round::InputRequired {
            input_requests,
            request_state,
        }) => {
            let next = round + 1;
            for (k, request) in &input_requests {
                // Not answered yet by construction: every key is new.
                input.relay(&key(next, k), request.clone())?;
            }
            let relay = json!({
                "round": next,
                "state": request_state,
                "requests": input_requests,
            });
            remember(&mut input, relay);
            Err(input.ask())
        }
        Err(e) => Ok(Err(e)),
    }
}

/// An upstream that cannot be used now, for the reason its last failure
/// gave — which often is itself "cannot reach the server: …", so it is
/// not said twice.
pub(crate) fn unreachable(reason: String) -> ClientError {
    let prefix = ClientError::unreachable(String::new()).to_string();
    match reason.strip_prefix(&prefix) {
        Some(rest) => ClientError::unreachable(rest.to_owned()),
        None => ClientError::unreachable(reason),
    }
}

/// How long the end of a call waits for relayed notifications to be
/// passed on (they are in memory already; this only bounds a stuck caller).
const RELAY_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// A relay: the callback the client calls, and the task passing what it
/// receives on (ended when the callback is dropped).
type Relay<F> = (Option<F>, Option<tokio::task::JoinHandle<()>>);

/// Relays the upstream's log messages to the downstream client, when it
/// asked for them.
fn log_relay(ctx: &RequestContext) -> Relay<toolgate_client::LogFn> {
    if ctx.meta().log_level.is_none() {
        return (None, None);
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(LoggingLevel, Option<String>, Value)>(64);
    let ctx = ctx.clone();
    let task = tokio::spawn(async move {
        while let Some((level, logger, data)) = rx.recv().await {
            ctx.log(level, logger.as_deref(), data).await;
        }
    });
    let callback: toolgate_client::LogFn = Arc::new(move |m| {
        // Advisory, like progress: dropped rather than queued without bound.
        let _ = tx.try_send((m.level, m.logger.clone(), m.data.clone()));
    });
    (Some(callback), Some(task))
}

/// Relays the upstream's progress to the downstream client, when it asked
/// for progress.
fn progress_relay(ctx: &RequestContext) -> Relay<toolgate_client::ProgressFn> {
    if !ctx.wants_progress() {
        return (None, None);
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(f64, Option<f64>, Option<String>)>(64);
    let ctx = ctx.clone();
    let task = tokio::spawn(async move {
        while let Some((progress, total, message)) = rx.recv().await {
            ctx.progress(progress, total, message.as_deref()).await;
        }
    });
    let callback: toolgate_client::ProgressFn = Arc::new(move |p| {
        // Progress is advisory: when the downstream is slower than the
        // upstream, the excess is dropped rather than queued without bound.
        let _ = tx.try_send((p.progress, p.total, p.message.clone()));
    });
    (Some(callback), Some(task))
}

/// The caller's capabilities as declared to the upstream. The tasks
/// extension goes on only for a modern caller's `tools/call` that can
/// become a gateway task: the gateway then follows the upstream's task
/// while its caller follows the gateway's (see [`upstream_task`]).
fn upstream_capabilities(ctx: &RequestContext, tool_call: bool) -> ClientCapabilities {
    let mut capabilities = ctx.client_capabilities().clone();
    let passes_tasks =
        tool_call && toolgate_protocol::version::is_modern(&ctx.meta().protocol_version);
    if let (false, Some(extensions)) = (passes_tasks, capabilities.extensions.as_mut()) {
        extensions.remove(toolgate_protocol::types::TASKS_EXTENSION);
    }
    capabilities
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_upstream_is_said_so_once() {
        let first = ClientError::unreachable("POST http://x/mcp: connection refused");
        let again = unreachable(first.to_string());
        assert_eq!(
            again.to_string(),
            "cannot reach the server: POST http://x/mcp: connection refused"
        );
        let other = unreachable("not started".into());
        assert_eq!(other.to_string(), "cannot reach the server: not started");
    }
}
