//! Handlers of the gateway's tools, prompts and resources: relay one
//! request to its upstream, one round at a time, and say clearly whose
//! fault a failure is.
//!
//! The upstream's questions (modern `input_required`) are passed to the
//! downstream client as they are; the upstream's `requestState`, its
//! questions and the round number travel in the gateway's own sealed
//! `requestState`, so the retry may reach any gateway process holding the
//! same state key and the upstream is never called twice for one round.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_client::{CallEnd, CallOptions, Client, ClientError, Round, RoundInput};
use toolgate_protocol::methods::{Complete, GetPrompt, Method, ReadResource};
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::{
    CallToolResult, ClientCapabilities, CompleteRequestParams, CompletionArgument,
    CompletionContext, CompletionReference, GetPromptRequestParams, GetPromptResult, LoggingLevel,
    ReadResourceRequestParams, ResourceContents,
};
use toolgate_server::{Inputs, RequestContext, ToolError, ToolReply};

use crate::call::guard::{Admission, Guard};
use crate::call::parked;
use crate::call::telemetry;
use crate::call::upstream::Upstream;
use crate::call::upstream_task;

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

/// Relay rounds: answers for the upstream's last questions go with the
/// call; new questions end the downstream round (`Err` with the
/// `input_required` to send). `Ok(Err(_))` is the upstream call's failure.
///
/// `carry` is kept with the relay's own state between rounds (the
/// gateway's approval of the call).
async fn relay<T, F, Fut>(
    upstream: &Upstream,
    ctx: &RequestContext,
    mut input: Inputs,
    carry: Map<String, Value>,
    tool_call: bool,
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
fn unreachable(reason: String) -> ClientError {
    let prefix = ClientError::unreachable(String::new()).to_string();
    match reason.strip_prefix(&prefix) {
        Some(rest) => ClientError::unreachable(rest.to_owned()),
        None => ClientError::unreachable(reason),
    }
}

/// What to tell the caller when the upstream failed, naming it (what it
/// said scrubbed of its configuration's secrets).
fn failure(upstream: &Upstream, what: &str, e: &ClientError) -> String {
    let server = &upstream.config.name;
    match e {
        ClientError::Timeout(after) => format!(
            "The upstream server {server} did not answer {what} within {} s; the request was cancelled there. Try again later, or with a smaller request.",
            after.as_secs_f64()
        ),
        ClientError::ServerExited(_)
        | ClientError::Unreachable { .. }
        | ClientError::Transport { .. } => {
            format!(
                "The upstream server {server} is unavailable ({}); the gateway restarts it. Its tools cannot be used until it is back; the gateway's other servers are not affected.",
                upstream.said(e)
            )
        }
        _ => format!(
            "The upstream server {server} answered {what} with something the gateway cannot pass on ({}). This is a fault in the upstream server.",
            upstream.said(e)
        ),
    }
}

/// Take a call from the shared budget `key` of `per_minute`; `Err` with
/// the status and text when it is spent, or when Redis cannot say (fail
/// closed).
async fn shared_budget(
    limits: &crate::store::shared_limit::SharedLimits,
    key: &str,
    per_minute: u32,
    what: impl FnOnce() -> String,
) -> Result<(), (&'static str, String)> {
    use crate::store::shared_limit::{Verdict, seconds};
    match limits
        .check(key, per_minute, std::time::Duration::from_secs(60))
        .await
    {
        Ok(Verdict::Allowed) => Ok(()),
        Ok(Verdict::Wait(wait)) => Err((
            "rate_limited",
            format!(
                "Rate limit reached: {}. Try again in {} s.",
                what(),
                seconds(wait)
            ),
        )),
        Err(e) if limits.allows_on_outage() => {
            tracing::warn!(error = %e, "rate limits cannot be checked; letting the call through (on_outage = \"allow\")");
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "rate limits cannot be checked; refusing the call");
            Err((
                "failed",
                "The gateway cannot check its rate limits right now, so the call was not forwarded. Try again shortly.".to_owned(),
            ))
        }
    }
}

/// Relay a call of `tool` (its upstream name) to `upstream`.
///
/// The guard decides first: the call may be refused, or wait for a
/// person's approval, before anything reaches the upstream.
pub async fn forward(
    upstream: Arc<Upstream>,
    tool: String,
    guard: Arc<Guard>,
    args: Map<String, Value>,
    ctx: RequestContext,
) -> Result<ToolReply, ToolError> {
    use opentelemetry::trace::FutureExt as _;
    let span = telemetry::call_span(
        ctx.meta().trace.as_ref(),
        &guard.facts.name,
        &upstream.config.name,
    );
    let trace_id = match &span {
        Some(span) => {
            use opentelemetry::trace::TraceContextExt as _;
            Some(span.span().span_context().trace_id().to_string())
        }
        None => ctx.meta().trace.as_ref().map(|t| t.trace_id().to_owned()),
    };
    if let Some(id) = trace_id.filter(|id| !id.is_empty()) {
        ctx.note("trace", id);
    }
    let reply = match &span {
        Some(span) => {
            forward_in_span(upstream, tool, guard, args, ctx)
                .with_context(span.clone())
                .await
        }
        None => forward_in_span(upstream, tool, guard, args, ctx).await,
    };
    if let Err(e) = &reply {
        telemetry::failed(span.as_ref(), e.message());
    }
    reply
}

/// [`forward`], inside the call's span.
async fn forward_in_span(
    upstream: Arc<Upstream>,
    tool: String,
    guard: Arc<Guard>,
    args: Map<String, Value>,
    ctx: RequestContext,
) -> Result<ToolReply, ToolError> {
    let server = upstream.config.name.clone();
    ctx.note("upstream", server.as_str());
    // The caller's budget comes first, as the embedded limiter's does.
    if let Some((limits, Some(per_minute))) = &guard.shared {
        let caller = ctx.auth().and_then(|a| a.subject()).unwrap_or_default();
        let key = format!("call:{}:{caller}", guard.facts.name);
        if let Err((status, text)) = shared_budget(limits, &key, *per_minute, || {
            format!(
                "at most {per_minute} calls per minute for each caller to {}",
                quote(&guard.facts.name)
            )
        })
        .await
        {
            ctx.note("status", status);
            return Ok(error(text));
        }
    }
    // A call going round a loop is stopped before anyone is asked.
    if guard.loops.is_on() {
        let digest = toolgate_server::arguments_digest(&Value::Object(args.clone()));
        let caller = ctx.auth().and_then(|a| a.subject());
        if let Some(text) = guard.loops.check(caller, &guard.facts.name, &digest) {
            ctx.note("status", "loop");
            return Ok(error(text));
        }
    }
    // Nor is a call its budget cannot pay for (nobody is asked either).
    // Its cost is reserved now, before anyone is asked or anything sent,
    // so calls sent together cannot all fit into what one would.
    let mut spend = match &guard.budget {
        Some(budget) => {
            let caller = ctx.auth().and_then(|a| a.subject());
            let now = crate::base::time::now_ms(std::time::SystemTime::now());
            match crate::store::ledger::admit(&guard.ledger, budget, &guard.facts.name, caller, now)
                .await
            {
                Ok(held) => Some(held),
                Err(said) => {
                    ctx.note("status", "over_budget");
                    return Ok(error(said.0));
                }
            }
        }
        None => None,
    };
    let mut input = ctx.inputs();
    let carry = match guard.admit(&ctx, &mut input, &args).await? {
        Admission::Forward { carry } => carry,
        Admission::Refuse(text) => return Ok(error(text)),
    };
    let budget = match (&guard.shared, upstream.config.per_minute) {
        (Some((limits, _)), Some(per_minute)) => {
            let key = format!("upstream:{server}");
            shared_budget(limits, &key, per_minute, || {
                format!("the upstream server {server} takes at most {per_minute} calls per minute through this gateway, from all callers together")
            })
            .await
        }
        _ => upstream
            .take_budget()
            .map_err(|text| ("rate_limited", text)),
    };
    if let Err((status, text)) = budget {
        ctx.note("status", status);
        return Ok(error(text));
    }
    // From here the upstream may do the work: a reservation dropped before
    // it is settled is charged, not given back.
    if let Some(held) = spend.as_mut() {
        held.sent();
    }
    // Every way the relayed call ends is settled here: a result charges
    // what it cost; a question for the caller (the upstream asked), a
    // protocol error or a failure charges nothing. Only a call whose
    // caller went away mid-flight is charged by the reservation's drop.
    let reply = relayed(upstream, tool, args, ctx.clone(), input, carry, &server).await;
    charged(&guard, &ctx, spend, reply).await
}

/// The call once it goes upstream: a task followed, or the call relayed
/// round by round; the caller's answer for how it ended.
async fn relayed(
    upstream: Arc<Upstream>,
    tool: String,
    args: Map<String, Value>,
    ctx: RequestContext,
    input: Inputs,
    carry: Map<String, Value>,
    server: &str,
) -> Result<ToolReply, ToolError> {
    let remember_task = {
        let carry = carry.clone();
        move |input: &mut Inputs, task: Value| {
            let mut kept = carry.clone();
            kept.insert("task".into(), task);
            input.remember(Value::Object(kept));
        }
    };
    // A later run of a call whose upstream task the gateway follows.
    if let Some((task_id, asked)) = input.remembered().and_then(upstream_task::remembered) {
        let client = match upstream.client() {
            Ok(client) => client,
            Err(down) => {
                let e = unreachable(down.reason);
                return answer(&upstream, &tool, &ctx, None, Err(e)).await;
            }
        };
        // Boxed (here and below): following a task is a large future that
        // a plain call would otherwise carry, and copy, too.
        let outcome = Box::pin(upstream_task::follow(
            server,
            client.clone(),
            &ctx,
            input,
            task_id,
            asked,
            remember_task,
        ))
        .await?;
        return answer(&upstream, &tool, &ctx, Some(client), outcome).await;
    }
    let name = tool.clone();
    let mut checker: Option<Client> = None;
    let outcome = relay(
        &upstream,
        &ctx,
        input,
        carry,
        true,
        ("tools/call", Some(tool.as_str())),
        |client, previous, options| {
            checker = Some(client.clone());
            // The row goes to the audit store beside the call, not before
            // it: the answer waits for it, the forward does not.
            ctx.write_ahead();
            async move {
                client
                    .call_tool_round(&name, args, previous, &options)
                    .await
            }
        },
    )
    .await?;
    let outcome = match (outcome, &checker) {
        (Ok(CallEnd::Task(task)), Some(client)) => {
            ctx.note("upstream_task", task.task_id.as_str());
            Box::pin(upstream_task::follow(
                server,
                client.clone(),
                &ctx,
                ctx.inputs(),
                task.task_id,
                Map::new(),
                remember_task,
            ))
            .await?
        }
        (Ok(CallEnd::Task(_)), None) => Err(ClientError::InvalidResponse(
            "a task came back from a call that was never sent".into(),
        )),
        (Ok(CallEnd::Result(result)), _) => Ok(result),
        (Err(e), _) => Err(e),
    };
    answer(&upstream, &tool, &ctx, checker, outcome).await
}

/// Settle a finished call's reservation: what it cost (nothing when it
/// failed or is still waiting for input) is charged, the rest released;
/// the cost goes in its row.
async fn charged(
    guard: &Guard,
    ctx: &RequestContext,
    held: Option<crate::store::ledger::Reservation>,
    reply: Result<ToolReply, ToolError>,
) -> Result<ToolReply, ToolError> {
    let (Some(budget), Some(held)) = (&guard.budget, held) else {
        return reply;
    };
    let cost = match &reply {
        Ok(ToolReply::Complete(result)) => budget.cost_of(result),
        _ => 0.0,
    };
    if cost > 0.0 {
        ctx.note("cost", cost);
    }
    if let Err(e) = held.settle(cost).await {
        tracing::warn!(tool = %guard.facts.name, error = %e, "a call's reservation was not settled; it stays reserved");
    }
    reply
}

/// The caller's answer for a relayed call's outcome: the result once it
/// passes the tool's `outputSchema`, the upstream's protocol error, or an
/// `isError` naming the upstream's fault.
async fn answer(
    upstream: &Upstream,
    tool: &str,
    ctx: &RequestContext,
    checker: Option<Client>,
    outcome: Result<CallToolResult, ClientError>,
) -> Result<ToolReply, ToolError> {
    let server = upstream.config.name.clone();
    match outcome {
        Ok(mut result) => {
            drop_upstream_identity(&mut result.meta);
            let violations = match &checker {
                Some(client) => client.check_output(tool, &result).await.unwrap_or_default(),
                None => Vec::new(),
            };
            ctx.note("result", crate::store::audit::result_summary(&result));
            if violations.is_empty() {
                if result.is_error == Some(true) {
                    let said = result.content.iter().find_map(|c| c.as_text());
                    ctx.note("failure", said.unwrap_or("a tool error"));
                }
                return Ok(ToolReply::Complete(result));
            }
            ctx.note("status", "output_invalid");
            ctx.note("failure", "its result broke the tool's outputSchema");
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            tracing::warn!(%server, %tool, violations = %list.join("; "), "upstream result breaks its outputSchema; withheld");
            Ok(error(format!(
                "The upstream server {server} returned a result for {} that breaks the tool's outputSchema ({}), so it was withheld. This is a fault in the upstream server, not in the arguments.",
                quote(tool),
                list.join("; ")
            )))
        }
        // The upstream refused the request itself: pass its answer on.
        Err(ClientError::Protocol(e)) => {
            ctx.note("status", "upstream_error");
            ctx.note("failure", e.message.as_str());
            Err(ToolError::protocol(e))
        }
        Err(e @ (ClientError::ServerExited(_) | ClientError::Transport { .. })) => {
            ctx.note("status", "upstream_error");
            ctx.note("failure", format!("the upstream server {server} failed"));
            Ok(error(format!(
                "The upstream server {server} failed during the call ({}); the gateway restarts it. Its tools cannot be used until it is back; the gateway's other servers are not affected.",
                upstream.said(&e)
            )))
        }
        Err(e) => {
            let status = if matches!(e, ClientError::Timeout(_)) {
                "timeout"
            } else {
                "upstream_error"
            };
            ctx.note("status", status);
            ctx.note("failure", upstream.said(&e));
            Ok(error(failure(upstream, &quote(tool), &e)))
        }
    }
}

/// Relay a request other than `tools/call` (`prompts/get`,
/// `resources/read`) and read its result as `T`, taking `field` of it when
/// given. `what` names the prompt or resource in errors.
async fn relay_request<M: Method>(
    upstream: &Upstream,
    ctx: &RequestContext,
    params: &M::Params,
    what: &str,
) -> Result<M::Result, ToolError> {
    let method = M::NAME;
    let params = toolgate_client::to_params(params)
        .map_err(|e| ToolError::new(failure(upstream, what, &e)))?;
    let outcome = relay(
        upstream,
        ctx,
        ctx.inputs(),
        Map::new(),
        false,
        (method, None),
        |client, previous, options| async move {
            client
                .request_round(method, params, previous, &options)
                .await
        },
    )
    .await?;
    let server = &upstream.config.name;
    match outcome {
        Ok(value) => {
            serde_json::from_value(value).map_err(|e| {
                ToolError::new(format!(
                    "The upstream server {server} answered {method} for {what} with something the gateway cannot read ({e}). This is a fault in the upstream server."
                ))
            })
        }
        Err(ClientError::Protocol(e)) => Err(ToolError::protocol(e)),
        Err(e) => Err(ToolError::new(failure(upstream, what, &e))),
    }
}

/// Relay `prompts/get` of `prompt` (its upstream name).
pub async fn get_prompt(
    upstream: Arc<Upstream>,
    prompt: String,
    args: HashMap<String, String>,
    ctx: RequestContext,
) -> Result<GetPromptResult, ToolError> {
    let params = GetPromptRequestParams {
        name: prompt.clone(),
        arguments: Some(args.into_iter().map(|(k, v)| (k, Value::from(v))).collect()),
        input_responses: None,
        request_state: None,
        meta: None,
    };
    let mut result = relay_request::<GetPrompt>(&upstream, &ctx, &params, &quote(&prompt)).await?;
    drop_upstream_identity(&mut result.meta);
    Ok(result)
}

/// Relay `resources/read` of `uri`.
pub async fn read_resource(
    upstream: Arc<Upstream>,
    uri: String,
    ctx: RequestContext,
) -> Result<Vec<ResourceContents>, ToolError> {
    let params = ReadResourceRequestParams {
        uri: uri.clone(),
        input_responses: None,
        request_state: None,
        meta: None,
    };
    relay_request::<ReadResource>(&upstream, &ctx, &params, &quote(&uri))
        .await
        .map(|result| result.contents)
}

/// Relay `completion/complete` for `reference` (a prompt's upstream name or
/// a template's URI template). Suggestions are advisory: a failing upstream
/// suggests nothing.
pub async fn complete(
    upstream: Arc<Upstream>,
    reference: CompletionReference,
    argument: String,
    value: String,
    others: HashMap<String, String>,
) -> Vec<String> {
    let Ok(client) = upstream.client() else {
        return Vec::new();
    };
    let params = CompleteRequestParams {
        reference,
        argument: CompletionArgument {
            name: argument,
            value,
        },
        context: (!others.is_empty()).then(|| CompletionContext {
            arguments: Some(
                others
                    .into_iter()
                    .map(|(k, v)| (k, Value::from(v)))
                    .collect(),
            ),
        }),
        meta: None,
    };
    let options = CallOptions {
        timeout: Some(upstream.config.call_timeout()),
        ..Default::default()
    };
    let answered = client.send::<Complete>(&params, &options).await;
    upstream.outcome(&answered);
    match answered {
        Ok(result) => result.completion.values,
        Err(e) => {
            tracing::debug!(server = %upstream.config.name, error = %e, "completion failed");
            Vec::new()
        }
    }
}

/// The upstream names itself in its results' `_meta`, but the caller's
/// answer is produced by the gateway, which stamps its own name there (the
/// specification: `serverInfo` "identifies the server software producing
/// the response"). The upstream's other `_meta` keys pass on; with none,
/// there is no `_meta` left, and the server writes the result directly.
fn drop_upstream_identity(meta: &mut Option<Map<String, Value>>) {
    if let Some(m) = meta {
        m.remove(toolgate_protocol::meta::SERVER_INFO);
        if m.is_empty() {
            *meta = None;
        }
    }
}

fn error(text: String) -> ToolReply {
    ToolReply::Complete(CallToolResult::error(text))
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
