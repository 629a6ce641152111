//! Handlers of the gateway's tools, prompts and resources (layer `call`):
//! a tool call runs through its stack of stages ([`crate::call::stack`]);
//! once sent, it is relayed ([`crate::call::rounds`]) or followed as an
//! upstream task, and its answer says clearly whose fault a failure is.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use toolgate_client::{CallEnd, CallOptions, Client, ClientError};
use toolgate_protocol::methods::{Complete, GetPrompt, Method, ReadResource};
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::{
    CallToolResult, CompleteRequestParams, CompletionArgument, CompletionContext,
    CompletionReference, GetPromptRequestParams, GetPromptResult, ReadResourceRequestParams,
    ResourceContents,
};
use toolgate_server::{Inputs, RequestContext, ToolError, ToolReply};

use crate::call::rounds::{Relaying, relay, unreachable};
use crate::call::stack::{Call, Stack};
use crate::call::telemetry;
use crate::call::upstream::Upstream;
use crate::call::upstream_task;
use crate::store::ledger::Sent;

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

/// Run a call of the gateway tool `tool` through its `stack`: the stages
/// decide first (the call may be refused, or wait for a person's approval,
/// before anything reaches the upstream), and the last relays it.
pub async fn forward(
    stack: Arc<Stack>,
    (tool, shown): (Arc<str>, Arc<str>),
    upstream: Arc<Upstream>,
    upstream_tool: String,
    args: Map<String, Value>,
    ctx: RequestContext,
) -> Result<ToolReply, ToolError> {
    use opentelemetry::trace::FutureExt as _;
    let span = telemetry::call_span(ctx.meta().trace.as_ref(), &tool, &upstream.config.name);
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
    ctx.note("upstream", upstream.config.name.as_str());
    let call = Call {
        input: ctx.inputs(),
        ctx,
        tool,
        shown,
        upstream,
        upstream_tool,
        args,
        carry: Map::new(),
        sent: Sent::default(),
        hold: None,
        bearer: None,
    };
    let reply = match &span {
        Some(span) => stack.run(call).with_context(span.clone()).await,
        None => stack.run(call).await,
    };
    if let Err(e) = &reply {
        telemetry::failed(span.as_ref(), e.message());
    }
    reply
}

/// The call once it goes upstream: a task followed, or the call relayed
/// round by round; the caller's answer for how it ended.
pub(crate) async fn relayed(
    upstream: Arc<Upstream>,
    tool: String,
    args: Map<String, Value>,
    ctx: RequestContext,
    (input, carry): (Inputs, Map<String, Value>),
    bearer: Option<toolgate_client::transport::Bearer>,
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
            (client.clone(), bearer.clone()),
            &ctx,
            input,
            task_id,
            asked,
            remember_task,
        ))
        .await?;
        return answer(&upstream, &tool, &ctx, Some(client), outcome).await;
    }
    // The row goes to the audit store beside the call, not before it: the
    // answer waits for it, the forward does not. A log that cannot take it
    // now (its disk is full) refuses the call: nothing goes upstream that
    // the audit store would not show.
    if let Err(refused) = ctx.write_ahead() {
        ctx.note("status", "unrecorded");
        return Ok(error(refused.answer()));
    }
    let name = tool.clone();
    let mut checker: Option<Client> = None;
    let outcome = relay(
        &upstream,
        &ctx,
        input,
        carry,
        Relaying {
            tool_call: true,
            bearer: bearer.clone(),
        },
        ("tools/call", Some(tool.as_str())),
        |client, previous, options| {
            checker = Some(client.clone());
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
                (client.clone(), bearer.clone()),
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
            // A token obtained for the caller that the upstream refuses is
            // not kept: the next call obtains another.
            if let (ClientError::LoginRequired(_) | ClientError::Authorization(_), Some(identity)) =
                (&e, upstream.identity())
            {
                identity.forget(ctx.auth(), tool);
            }
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
        Relaying {
            tool_call: false,
            bearer: None,
        },
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
