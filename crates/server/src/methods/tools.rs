//! `tools/call`: look up → validate input → run → check output → encode.

use serde_json::{Map, Value};
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::{Request, encode_result};
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::{CallToolRequestParams, CallToolResult, ContentBlock};
use toolgate_schema::Violation;

use super::{Ended, Failure, exchange, guarded, params};
use crate::Server;
use crate::dispatch::{TransportContext, error_frame};
use crate::exchange::{Frame, Reply};
use crate::mrtr::{Retry, take_retry_fields};
use crate::tool::{RegisteredTool, ToolReply};

pub(super) fn call(
    server: &Server,
    mut req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    let (name, args, retry) = match take_params(&mut req) {
        Some(Ok(taken)) => taken,
        Some(Err(error)) => return Err((req.id, error)),
        // Malformed: the generic reader names the problem precisely.
        None => {
            let p: CallToolRequestParams = params(&req)?;
            return Err((
                req.id,
                RpcError::invalid_params(format!(
                    "Invalid tools/call params for {}",
                    quote(&p.name)
                )),
            ));
        }
    };
    let auth = transport.auth.as_ref();
    let Some(tool) = server.inner.tools.get(&name, auth) else {
        // Hidden for want of scopes: say which, so the client can step up.
        let hidden = server.inner.tools.get_hidden(&name);
        if let Some(needed) = hidden
            .as_ref()
            .map(|t| &t.required_scopes)
            .filter(|s| !s.is_empty() && !auth.is_some_and(|a| a.has_scopes(s.iter())))
        {
            let error = RpcError::new(
                crate::INSUFFICIENT_SCOPE,
                format!(
                    "Insufficient scope: calling {} needs {}",
                    quote(&name),
                    needed.join(" ")
                ),
            )
            .with_data(serde_json::json!({ "requiredScopes": needed }));
            return Err((req.id, error));
        }
        if let Some(text) = server.inner.unlisted_answer.as_ref().and_then(|f| f(&name)) {
            let result = CallToolResult::error(text);
            return Ok(Reply::Done(server.result_frame(&req.id, &result)));
        }
        return Err((
            req.id,
            RpcError::invalid_params(format!("Unknown tool: {}", quote(&name))),
        ));
    };
    if let Some(limiter) = &tool.limiter {
        let caller = transport.auth.as_ref().and_then(|a| a.subject());
        if let Err(text) = limiter.check(&tool.tool.name, caller) {
            let result = CallToolResult::error(text);
            return Ok(Reply::Done(server.result_frame(&req.id, &result)));
        }
    }
    if let Some(headers) = &transport.http_headers {
        for param in &tool.header_params {
            let raw = headers.get(param.header_name()).map(|v| v.as_bytes());
            param
                .check(raw, &args)
                .map_err(|m| (req.id.clone(), RpcError::header_mismatch(m)))?;
        }
    }
    // Validate and bind the arguments as one JSON value, then hand the same
    // map to the handler: no copy of the arguments per call.
    let args_value = Value::Object(args);
    let (binding, round) = super::round_with(
        server,
        &req.id,
        &req.method,
        &name,
        &args_value,
        retry,
        transport,
    )?;
    let input = match tool.input.get() {
        Ok(input) => input,
        Err(e) => {
            tracing::error!(tool = %tool.tool.name, error = %e, "inputSchema does not compile");
            let result = CallToolResult::error(format!(
                "The tool {:?} cannot be called: its inputSchema is not a valid JSON Schema ({e}). This is a fault in the server, not in the arguments.",
                tool.tool.name
            ));
            return Ok(Reply::Done(server.result_frame(&req.id, &result)));
        }
    };
    if let Err(violations) = input.validate(&args_value) {
        let result = CallToolResult::error(describe_input_violations(&tool.tool.name, &violations));
        return Ok(Reply::Done(server.result_frame(&req.id, &result)));
    }
    let Value::Object(args) = args_value else {
        unreachable!("built from a map just above")
    };
    let server = server.clone();
    let id = req.id;
    Ok(exchange(
        id.clone(),
        meta,
        transport,
        round,
        move |ctx| async move {
            let run = guarded(&tool.tool.name, tool.handler.call(args, ctx));
            let Ok(ended) = tokio::time::timeout(tool.timeout, run).await else {
                tracing::warn!(tool = %tool.tool.name, timeout = ?tool.timeout, "tool call timed out; its handler was dropped");
                let text = format!(
                    "The tool {} did not finish within {} s and was stopped. Try again with a smaller request, or later.",
                    quote(&tool.tool.name),
                    tool.timeout.as_secs_f64()
                );
                return Some(server.result_frame(&id, &CallToolResult::error(text)));
            };
            Some(match ended {
                Ended::Value(ToolReply::Complete(result)) => {
                    server.result_frame(&id, &check_output(&tool, result))
                }
                Ended::Value(ToolReply::InputRequired(result)) => {
                    let mut map = match serde_json::to_value(&result) {
                        Ok(Value::Object(map)) => map,
                        _ => return Some(error_frame(Some(&id), RpcError::internal())),
                    };
                    server.stamp(&mut map);
                    Frame::Response {
                        body: encode_result(&id, &map),
                        error_code: None,
                    }
                }
                Ended::Failed(mut message) => {
                    if tool.sanitize {
                        crate::sanitizing::error_text(&tool.tool.name, &mut message);
                    }
                    server.result_frame(&id, &CallToolResult::error(message))
                }
                Ended::Protocol(error) => error_frame(Some(&id), error),
                Ended::NeedsInput(pending) => {
                    super::input_required(&server, &id, &binding, pending)
                }
                Ended::Panicked => error_frame(Some(&id), RpcError::internal()),
            })
        },
    ))
}

/// A tool call's name, arguments and retry fields.
type Taken = (String, Map<String, Value>, Retry);

/// The tool name, arguments (omitted means none) and retry fields, moved
/// out of the params without copying them. `None` when the params are not
/// a well-formed `tools/call` (the caller then reports why); the params are
/// left untouched in that case.
fn take_params(req: &mut Request) -> Option<Result<Taken, RpcError>> {
    let params = req.params.as_mut()?;
    let name_ok = matches!(params.get("name"), Some(Value::String(_)));
    let args_ok = matches!(
        params.get("arguments"),
        None | Some(Value::Null | Value::Object(_))
    );
    if !name_ok || !args_ok {
        return None;
    }
    let retry = match take_retry_fields(params) {
        Ok(retry) => retry,
        Err(e) => return Some(Err(e)),
    };
    let Some(Value::String(name)) = params.remove("name") else {
        return None;
    };
    let args = match params.remove("arguments") {
        Some(Value::Object(args)) => args,
        _ => Map::new(),
    };
    Some(Ok((name, args, retry)))
}

/// Enforce the tool's promises before anything reaches the wire: text is
/// sanitized, structured content is mirrored as JSON text, and a tool with an
/// `outputSchema` never emits `structuredContent` that breaks it.
pub(crate) fn check_output(tool: &RegisteredTool, mut result: CallToolResult) -> CallToolResult {
    // Before the schema check, so a sanitized result still conforms.
    if tool.sanitize {
        crate::sanitizing::tool_result(&tool.tool.name, &mut result);
    }
    if let (Some(schema), Some(structured)) = (&tool.output, &result.structured_content) {
        let checked = match schema.get() {
            Ok(schema) => schema.validate(structured).map_err(|v| join(&v)),
            Err(e) => Err(format!("the outputSchema does not compile: {e}")),
        };
        if let Err(violations) = checked {
            tracing::error!(
                tool = %tool.tool.name,
                violations = %violations,
                "tool output does not match its outputSchema; withheld"
            );
            if result.is_error() {
                // Keep the tool's error text, drop the non-conforming data.
                result.structured_content = None;
                return result;
            }
            return CallToolResult::error(format!(
                "The tool {:?} produced a result that does not match its declared outputSchema, so it was withheld. This is a fault in the tool, not in the arguments.",
                tool.tool.name
            ));
        }
    }
    if tool.output.is_some() && result.structured_content.is_none() && !result.is_error() {
        tracing::error!(tool = %tool.tool.name, "tool with an outputSchema returned no structuredContent");
        return CallToolResult::error(format!(
            "The tool {:?} returned no structured result although it declares an outputSchema. This is a fault in the tool.",
            tool.tool.name
        ));
    }
    mirror_structured(&mut result);
    result
}

/// Older clients read only `content`: a structured result also appears
/// there, serialized, unless the tool already included that exact text.
fn mirror_structured(result: &mut CallToolResult) {
    let Some(structured) = &result.structured_content else {
        return;
    };
    let Ok(text) = serde_json::to_string(structured) else {
        return;
    };
    if !result
        .content
        .iter()
        .any(|c| c.as_text() == Some(text.as_str()))
    {
        result.content.push(ContentBlock::text(text));
    }
}

fn join(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The `isError` text for arguments that break the input schema: every
/// failing location, what was expected there, and how to recover.
pub(crate) fn describe_input_violations(tool: &str, violations: &[Violation]) -> String {
    let mut text = format!("Invalid arguments for tool {tool:?}:\n");
    for v in violations {
        text.push_str("- ");
        text.push_str(&v.to_string());
        text.push('\n');
    }
    if violations.len() >= toolgate_schema::MAX_VIOLATIONS {
        text.push_str("(only the first problems are listed; there may be more)\n");
    }
    text.push_str("Fix these arguments to match the tool's inputSchema and call the tool again.");
    text
}
