//! `tools/call`: look up → validate input → run → check output → encode.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value};
use toolgate_protocol::RequestId;
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::{Request, encode_result};
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::{CallToolRequestParams, CallToolResult, ContentBlock};
use toolgate_schema::Violation;

use super::{Ended, Failure, exchange, guarded, params};
use crate::Server;
use crate::call_log::{CallLog, CallOutcome, CallRecord, unrecorded};
use crate::context::Ahead;
use crate::dispatch::{TransportContext, error_frame};
use crate::exchange::{Exchange, Frame, Reply};
use crate::mrtr::{Binding, Retry, take_retry_fields};
use crate::state::StateFault;
use crate::tasks::TaskSupport;
use crate::tool::{RegisteredTool, ToolReply};
use toolgate_protocol::types::TASKS_EXTENSION;

pub(super) fn call(
    server: &Server,
    mut req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    // Taken first so a record's time covers the checks too; only when
    // calls are recorded.
    let begun = server
        .inner
        .call_log
        .is_some()
        .then(|| (SystemTime::now(), Instant::now()));
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
    let resolved = match super::route::resolve(server, name, args, auth) {
        Ok(resolved) => resolved,
        Err(unrouted) => {
            let refused = Refused {
                name: unrouted.name,
                args: unrouted.args,
                via: None,
            };
            let outcome = CallOutcome::InvalidArguments;
            return Ok(refused.answer(server, &req.id, transport, unrouted.text, outcome));
        }
    };
    let unlisted = resolved.reaches_unlisted();
    let super::route::Resolved { name, args, via } = resolved;
    let Some(tool) = super::route::lookup(server, &name, auth, unlisted) else {
        let unknown = || RpcError::invalid_params(format!("Unknown tool: {}", quote(&name)));
        let Some(hidden) = super::route::lookup_hidden(server, &name, unlisted) else {
            if let Some(withheld) = server.inner.unlisted_answer.as_ref().and_then(|f| f(&name)) {
                let refused = Refused { name, args, via };
                return Ok(refused.withheld(server, &req.id, transport, withheld));
            }
            return Err((req.id, unknown()));
        };
        // Hidden for want of scopes: say which, so the client can step up.
        let needed = &hidden.required_scopes;
        if !needed.is_empty() && !auth.is_some_and(|a| a.has_scopes(needed.iter())) {
            let error = RpcError::new(
                crate::INSUFFICIENT_SCOPE,
                format!(
                    "Insufficient scope: calling {} needs {}",
                    quote(&name),
                    needed.join(" ")
                ),
            )
            .with_data(serde_json::json!({ "requiredScopes": needed }));
            let refused = Refused {
                name,
                args,
                via: via.clone(),
            };
            return Ok(refused.error(
                server,
                &req.id,
                transport,
                error,
                CallOutcome::InsufficientScope,
                Map::new(),
            ));
        }
        // Hidden by its visibility rule: the caller must not learn it
        // exists, but the refusal is recorded.
        let notes = hidden
            .hidden_notes
            .as_ref()
            .map(|f| f(auth))
            .unwrap_or_default();
        let error = unknown();
        let refused = Refused {
            name,
            args,
            via: via.clone(),
        };
        return Ok(refused.error(
            server,
            &req.id,
            transport,
            error,
            CallOutcome::Hidden,
            notes,
        ));
    };
    let as_task = match tool.tasks {
        TaskSupport::Never => false,
        support => {
            // The extension is not defined for legacy revisions: a legacy
            // session's capabilities never enable it.
            let declared = toolgate_protocol::version::is_modern(&meta.protocol_version)
                && meta.client_capabilities.has_extension(TASKS_EXTENSION);
            if !declared && support == TaskSupport::Required {
                return Err((req.id, task_required(&name)));
            }
            declared
        }
    };
    if let Some(limiter) = &tool.limiter {
        let caller = transport.auth.as_ref().and_then(|a| a.subject());
        if let Err(text) = limiter.check(&tool.tool.name, caller) {
            let refused = Refused {
                name,
                args,
                via: via.clone(),
            };
            return Ok(refused.answer(server, &req.id, transport, text, CallOutcome::RateLimited));
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
    let once = tool.single_use || server.inner.single_use_rounds;
    let (binding, mut round) = match super::round_with(
        server,
        &req.method,
        &name,
        &args_value,
        retry,
        once,
        transport,
    ) {
        Ok(bound) => bound,
        // A forged, moved or stale state is refused, and recorded: an
        // operator must see someone trying.
        Err(refusal) => {
            let Value::Object(args) = args_value else {
                unreachable!("built from a map just above")
            };
            let outcome = match refusal.fault {
                StateFault::Tampered => CallOutcome::Tampered,
                StateFault::Moved => CallOutcome::Moved,
                StateFault::Expired => CallOutcome::Expired,
            };
            let refused = Refused {
                name,
                args,
                via: via.clone(),
            };
            let error = refusal.error;
            return Ok(refused.error(server, &req.id, transport, error, outcome, Map::new()));
        }
    };
    let once = round.once.take();
    let audit = server.inner.call_log.as_ref().map(|log| Audit {
        log: log.clone(),
        started: begun.map_or_else(SystemTime::now, |b| b.0),
        clock: begun.map_or_else(Instant::now, |b| b.1),
        tool: name.clone(),
        caller: binding.subject.clone(),
        digest: binding.digest.clone(),
        arguments: log.wants_arguments().then(|| args_value.clone()),
        begun: None,
        refused: false,
        via,
    });
    let input = match tool.input.get() {
        Ok(input) => input,
        Err(e) => {
            tracing::error!(tool = %tool.tool.name, error = %e, "inputSchema does not compile");
            let result = CallToolResult::error(format!(
                "The tool {:?} cannot be called: its inputSchema is not a valid JSON Schema ({e}). This is a fault in the server, not in the arguments.",
                tool.tool.name
            ));
            let frame = server.result_frame(&req.id, &result);
            return Ok(recorded(
                server,
                &req.id,
                frame,
                audit,
                CallOutcome::Failed,
                Map::new(),
            ));
        }
    };
    if let Err(violations) = input.validate(&args_value) {
        let result = CallToolResult::error(describe_input_violations(&tool.tool.name, &violations));
        let frame = server.result_frame(&req.id, &result);
        return Ok(recorded(
            server,
            &req.id,
            frame,
            audit,
            CallOutcome::InvalidArguments,
            Map::new(),
        ));
    }
    let Value::Object(args) = args_value else {
        unreachable!("built from a map just above")
    };
    if as_task {
        let call = crate::tasks::Call {
            tool,
            id: req.id,
            meta,
            binding,
            round,
            once,
            args,
            audit,
        };
        return Ok(crate::tasks::call(server, call, transport));
    }
    let server = server.clone();
    let id = req.id;
    Ok(exchange(
        server.inner.states.clone(),
        id.clone(),
        meta,
        transport,
        round,
        move |ctx| async move {
            let noted = audit.as_ref().map(|audit| {
                if audit.log.writes_ahead() {
                    ctx.arm_write_ahead(audit.ahead());
                }
                ctx.clone()
            });
            let (frame, outcome) = match spend(&server, &tool, &id, once).await {
                Ok(()) => run(&server, &tool, &id, &binding, args, ctx).await,
                Err(refused) => refused,
            };
            match (audit, noted) {
                (Some(audit), Some(noted)) => {
                    let (notes, begun, refused) = noted.take_record();
                    drop(noted);
                    let mut audit = audit.after(begun).await;
                    audit.refused = refused;
                    Some(audit.finish(frame, outcome, notes, &server, &id).await)
                }
                _ => Some(frame),
            }
        },
    ))
}

/// Spend a single-use round's nonce before its handler runs; `Err` with
/// the answer when the round was answered already, or the store cannot say.
pub(crate) async fn spend(
    server: &Server,
    tool: &RegisteredTool,
    id: &RequestId,
    once: Option<String>,
) -> Result<(), (Frame, CallOutcome)> {
    use crate::nonce::NotRun;
    let refused = match crate::nonce::spend(&server.inner.nonces, once).await {
        Ok(()) => return Ok(()),
        Err(refused) => refused,
    };
    // Quoted only here: every call passes through, and quoting the name
    // was a percent of a call's CPU.
    let name = quote(&tool.tool.name);
    let (text, outcome) = match refused {
        NotRun::Replayed => (
            format!(
                "This round of {name} was already answered: each requestState is good for one retry, so the tool did not run again. Call {name} again without requestState to start over."
            ),
            CallOutcome::Replayed,
        ),
        NotRun::StoreFailed(e) => {
            let e = toolgate_protocol::error::with_causes(&*e);
            tracing::error!(tool = %tool.tool.name, error = %e, "cannot spend a single-use round");
            (
                format!(
                    "The server could not record that this round of {name} was answered, so the tool did not run. Try again later."
                ),
                CallOutcome::Failed,
            )
        }
    };
    Err((
        server.result_frame(id, &CallToolResult::error(text)),
        outcome,
    ))
}

/// Run the handler and encode how it ended.
async fn run(
    server: &Server,
    tool: &RegisteredTool,
    id: &RequestId,
    binding: &Binding,
    args: Map<String, Value>,
    ctx: crate::RequestContext,
) -> (Frame, CallOutcome) {
    let run = guarded(&tool.tool.name, tool.handler.call(args, ctx));
    let executed = match crate::time_limit::within(tool.timeout, run).await {
        Ok(ended) => Executed::Ended(ended),
        Err(_) => Executed::TimedOut(tool.timeout),
    };
    encode(server, tool, id, binding, executed)
}

/// How a handler run ended, time limit included.
pub(crate) enum Executed {
    /// It ended by itself.
    Ended(Ended<ToolReply>),
    /// It was stopped after running this long.
    TimedOut(std::time::Duration),
}

/// The answer to a call whose handler ended so.
pub(crate) fn encode(
    server: &Server,
    tool: &RegisteredTool,
    id: &RequestId,
    binding: &Binding,
    executed: Executed,
) -> (Frame, CallOutcome) {
    let ended = match executed {
        Executed::Ended(ended) => ended,
        Executed::TimedOut(limit) => {
            tracing::warn!(tool = %tool.tool.name, timeout = ?limit, "tool call timed out; its handler was dropped");
            let text = format!(
                "The tool {} did not finish within {} s and was stopped. Try again with a smaller request, or later.",
                quote(&tool.tool.name),
                limit.as_secs_f64()
            );
            let frame = server.result_frame(id, &CallToolResult::error(text));
            return (frame, CallOutcome::Timeout);
        }
    };
    match ended {
        Ended::Value(ToolReply::Complete(result)) => {
            let result = check_output(tool, result);
            let outcome = if result.is_error == Some(true) {
                CallOutcome::ToolError
            } else {
                CallOutcome::Ok
            };
            (server.result_frame(id, &result), outcome)
        }
        Ended::Value(ToolReply::InputRequired(result)) => {
            let mut map = match serde_json::to_value(&result) {
                Ok(Value::Object(map)) => map,
                _ => {
                    return (
                        error_frame(Some(id), RpcError::internal()),
                        CallOutcome::Failed,
                    );
                }
            };
            server.stamp(&mut map);
            let frame = Frame::Response {
                body: encode_result(id, &map),
                error_code: None,
            };
            (frame, CallOutcome::InputRequired)
        }
        Ended::Failed(mut message) => {
            if tool.sanitize {
                crate::sanitizing::error_text(&tool.tool.name, &mut message);
            }
            let frame = server.result_frame(id, &CallToolResult::error(message));
            (frame, CallOutcome::ToolError)
        }
        Ended::Protocol(error) => (error_frame(Some(id), error), CallOutcome::Failed),
        Ended::NeedsInput(pending) => (
            super::input_required(server, id, binding, pending),
            CallOutcome::InputRequired,
        ),
        Ended::Panicked => (
            error_frame(Some(id), RpcError::internal()),
            CallOutcome::Failed,
        ),
    }
}

/// `-32021` for a call to a task-only tool from a client that did not
/// declare the tasks extension.
fn task_required(name: &str) -> RpcError {
    let mut error = RpcError::missing_client_capability(
        serde_json::json!({ "extensions": { TASKS_EXTENSION: {} } }),
    );
    error.message = format!(
        "Missing required client capability: the tool {} runs only as a task; declare the extension {TASKS_EXTENSION} in io.modelcontextprotocol/clientCapabilities",
        quote(name)
    );
    error
}

/// A call refused before its arguments were bound.
struct Refused {
    name: String,
    args: Map<String, Value>,
    /// The router the call came through.
    via: Option<Arc<str>>,
}

impl Refused {
    /// The tool error `text`, sent once the call is recorded (with a call log).
    fn answer(
        self,
        server: &Server,
        id: &RequestId,
        transport: &TransportContext,
        text: String,
        outcome: CallOutcome,
    ) -> Reply {
        let frame = server.result_frame(id, &CallToolResult::error(text));
        let audit = Audit::start(server, &self.name, &Value::Object(self.args), transport)
            .map(|a| a.via(self.via));
        recorded(server, id, frame, audit, outcome, Map::new())
    }

    /// The answer of [`unlisted_answer`](crate::ServerBuilder::unlisted_answer),
    /// its notes on the record.
    fn withheld(
        self,
        server: &Server,
        id: &RequestId,
        transport: &TransportContext,
        withheld: crate::server::Withheld,
    ) -> Reply {
        let frame = server.result_frame(id, &CallToolResult::error(withheld.text));
        let audit = Audit::start(server, &self.name, &Value::Object(self.args), transport)
            .map(|a| a.via(self.via));
        recorded(
            server,
            id,
            frame,
            audit,
            CallOutcome::Withheld,
            withheld.notes,
        )
    }

    /// The protocol error `error`, sent once the call is recorded with `notes`.
    fn error(
        self,
        server: &Server,
        id: &RequestId,
        transport: &TransportContext,
        error: RpcError,
        outcome: CallOutcome,
        notes: Map<String, Value>,
    ) -> Reply {
        let frame = error_frame(Some(id), error);
        let audit = Audit::start(server, &self.name, &Value::Object(self.args), transport)
            .map(|a| a.via(self.via));
        recorded(server, id, frame, audit, outcome, notes)
    }
}

/// A call being recorded in the server's [`CallLog`](crate::CallLog).
pub(crate) struct Audit {
    log: Arc<dyn CallLog>,
    started: SystemTime,
    clock: Instant,
    tool: String,
    caller: Option<String>,
    digest: String,
    arguments: Option<Value>,
    /// The key of the row written ahead, once durable.
    begun: Option<i64>,
    /// The log refused the write ahead: the handler did not go ahead, and
    /// its answer says so.
    refused: bool,
    /// The router the call came through, noted as `"via"`.
    via: Option<Arc<str>>,
}

impl Audit {
    /// What [`RequestContext::write_ahead`](crate::RequestContext::write_ahead)
    /// writes for this call.
    fn ahead(&self) -> Ahead {
        let start = CallRecord {
            started: self.started,
            elapsed: std::time::Duration::ZERO,
            tool: self.tool.clone(),
            caller: self.caller.clone(),
            arguments_digest: self.digest.clone(),
            arguments: self.arguments.clone(),
            outcome: CallOutcome::InFlight,
            notes: self.noted(Map::new()),
            begun: None,
        };
        Ahead::new(self.log.clone(), start, self.clock)
    }

    /// This call once its row written ahead (if one was begun) is durable.
    /// A write ahead that failed leaves the outcome to be recorded the
    /// ordinary way, before the answer.
    async fn after(mut self, begun: Option<crate::context::BeginTask>) -> Self {
        let Some(begun) = begun else {
            return self;
        };
        let done = match begun {
            crate::context::BeginTask::Done(done) => Ok(done),
            crate::context::BeginTask::Running(task) => task.await,
        };
        self.begun = match done {
            Ok(Ok(key)) => key,
            Ok(Err(e)) => {
                let e = toolgate_protocol::error::with_causes(&*e);
                tracing::error!(tool = %self.tool, error = %e, "call not written ahead; its outcome is recorded before the answer");
                None
            }
            Err(e) => {
                tracing::error!(tool = %self.tool, error = %e, "call not written ahead; its outcome is recorded before the answer");
                None
            }
        };
        self
    }

    /// For a call answered before its arguments were bound (refused
    /// outright); `None` without a call log.
    fn start(
        server: &Server,
        tool: &str,
        arguments: &Value,
        transport: &TransportContext,
    ) -> Option<Self> {
        let log = server.inner.call_log.as_ref()?;
        let caller = transport.auth.as_ref().and_then(|a| a.subject());
        let binding = Binding::new("tools/call", tool, arguments, caller);
        Some(Audit {
            log: log.clone(),
            started: SystemTime::now(),
            clock: Instant::now(),
            tool: tool.to_owned(),
            caller: binding.subject,
            digest: binding.digest,
            arguments: log.wants_arguments().then(|| arguments.clone()),
            begun: None,
            refused: false,
            via: None,
        })
    }

    /// Noting the router the call came through.
    fn via(mut self, via: Option<Arc<str>>) -> Self {
        self.via = via;
        self
    }

    /// `notes` with the router the call came through.
    fn noted(&self, mut notes: Map<String, Value>) -> Map<String, Value> {
        if let Some(via) = &self.via {
            notes.entry("via").or_insert_with(|| Value::from(&**via));
        }
        notes
    }

    /// Record the call, then hand back `frame` — or, if the record could
    /// not be written, an `isError` in its place.
    pub(crate) async fn finish(
        self,
        frame: Frame,
        outcome: CallOutcome,
        notes: Map<String, Value>,
        server: &Server,
        id: &RequestId,
    ) -> Frame {
        let notes = self.noted(notes);
        let record = CallRecord {
            started: self.started,
            elapsed: self.clock.elapsed(),
            tool: self.tool,
            caller: self.caller,
            arguments_digest: self.digest,
            arguments: self.arguments,
            outcome,
            notes,
            begun: self.begun,
        };
        let tool = record.tool.clone();
        match self.log.record(record).await {
            Ok(()) => frame,
            // The row is durable already; only its outcome is missing. Or
            // the call was refused, unmade, for want of a record: its
            // answer says so already.
            Err(e) if self.begun.is_some() || self.refused => {
                let e = toolgate_protocol::error::with_causes(&*e);
                tracing::error!(tool = %tool, error = %e, "the outcome of a call written ahead was not recorded");
                frame
            }
            Err(e) => {
                let e = toolgate_protocol::error::with_causes(&*e);
                tracing::error!(tool = %tool, error = %e, "call not recorded; result withheld");
                server.result_frame(id, &CallToolResult::error(unrecorded(&tool)))
            }
        }
    }
}

/// `frame` as the answer, sent once `audit` (if any) has recorded the call.
fn recorded(
    server: &Server,
    id: &RequestId,
    frame: Frame,
    audit: Option<Audit>,
    outcome: CallOutcome,
    notes: Map<String, Value>,
) -> Reply {
    let Some(audit) = audit else {
        return Reply::Done(frame);
    };
    let (server, id) = (server.clone(), id.clone());
    let answer = async move { audit.finish(frame, outcome, notes, &server, &id).await };
    Reply::Streaming(Exchange::from_stream(Box::pin(futures::stream::once(
        answer,
    ))))
}

/// A tool call's name, arguments and retry fields.
type Taken = (String, Map<String, Value>, Retry);

/// The tool name, arguments (omitted means none) and retry fields, moved
/// out of the params without copying them. `None` when the params are not
/// a well-formed `tools/call` (the caller then reports why); the params are
/// left untouched in that case.
fn take_params(req: &mut Request) -> Option<Result<Taken, RpcError>> {
    let params = req.params.as_mut()?;
    // A call's params are a handful of members: they are walked rather than
    // looked up (each lookup hashes its key), and moved out in one pass.
    let mut named = false;
    for (key, value) in params.iter() {
        match key.as_str() {
            "name" if value.is_string() => named = true,
            "name" => return None,
            "arguments" if !matches!(value, Value::Null | Value::Object(_)) => return None,
            _ => {}
        }
    }
    if !named {
        return None;
    }
    let mut name = String::new();
    let mut args = Map::new();
    let mut retry = Map::new();
    let mut rest = Map::new();
    for (key, value) in std::mem::take(params) {
        match (key.as_str(), value) {
            ("name", Value::String(n)) => name = n,
            ("arguments", Value::Object(a)) => args = a,
            ("arguments", _) => {}
            ("inputResponses" | "requestState", value) => {
                retry.insert(key, value);
            }
            (_, value) => {
                rest.insert(key, value);
            }
        }
    }
    *params = rest;
    Some(take_retry_fields(&mut retry).map(|retry| (name, args, retry)))
}

/// Enforce the tool's promises before anything reaches the wire: text is
/// sanitized, structured content is mirrored as JSON text (not for a
/// [`relayed`](crate::ToolDef::relayed) tool), and a tool with an
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
    if tool.mirror {
        mirror_structured(&mut result);
    }
    result
}

/// Older clients read only `content`: a structured result with no text
/// of its own also appears there, serialized. A result that already says
/// something in text is left alone: the spec's mirror is for results that
/// have none, and a second copy would have the model read it twice.
fn mirror_structured(result: &mut CallToolResult) {
    let Some(structured) = &result.structured_content else {
        return;
    };
    if result.content.iter().any(|c| c.as_text().is_some()) {
        return;
    }
    if let Ok(text) = serde_json::to_string(structured) {
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
