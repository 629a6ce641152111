//! One module per method family. Each method reads its params, does its
//! work, and hands back a [`Reply`].

mod complete;
mod discover;
mod listen;
mod lists;
mod prompts;
mod resources;
mod route;
pub(crate) mod tools;

use std::future::Future;

use serde::de::DeserializeOwned;
use serde_json::Value;
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::methods::{
    CallTool, CancelTask, Complete, Discover, GetPrompt, GetTask, ListPrompts,
    ListResourceTemplates, ListResources, ListTools, Method, ReadResource, SubscriptionsListen,
    UpdateTask,
};
use toolgate_protocol::quote::shorten_message;
use toolgate_protocol::{RequestId, RpcError};

use crate::Server;
use crate::context::{RequestContext, Round};
use crate::dispatch::{TransportContext, request_token};
use crate::exchange::{Exchange, Frame, Reply};
use crate::frame_queue;
use crate::mrtr::{self, Binding, Pending};
use crate::state::StateRefusal;

pub(crate) use discover::capabilities;

pub(crate) type Failure = (RequestId, RpcError);

pub(crate) fn dispatch(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    let inner = &server.inner;
    match req.method.as_str() {
        Discover::NAME => Ok(discover::discover(server, &req.id)),
        ListTools::NAME => lists::tools(server, req, transport),
        CallTool::NAME => tools::call(server, req, meta, transport),
        ListPrompts::NAME if inner.prompts_enabled => lists::prompts(server, req, transport),
        GetPrompt::NAME if inner.prompts_enabled => prompts::get(server, req, meta, transport),
        ListResources::NAME if inner.resources_enabled => lists::resources(server, req, transport),
        ListResourceTemplates::NAME if inner.resources_enabled => {
            lists::templates(server, req, transport)
        }
        ReadResource::NAME if inner.resources_enabled => {
            resources::read(server, req, meta, transport)
        }
        Complete::NAME if inner.completions_enabled => {
            complete::complete(server, req, meta, transport)
        }
        SubscriptionsListen::NAME => listen::listen(server, req, meta, transport),
        GetTask::NAME => crate::tasks::get(server, req, meta, transport),
        UpdateTask::NAME => crate::tasks::update(server, req, meta, transport),
        CancelTask::NAME => crate::tasks::cancel(server, req, meta, transport),
        _ => Err((req.id, RpcError::method_not_found(&req.method))),
    }
}

/// Deserialize `params` into the method's parameter type; a mismatch is
/// `-32602` naming the method and the problem.
pub(crate) fn params<T: DeserializeOwned>(req: &Request) -> Result<T, Failure> {
    let value = Value::Object(req.params.clone().unwrap_or_default());
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" at {path}")
        };
        (
            req.id.clone(),
            RpcError::invalid_params(format!(
                "Invalid {} params{at}: {}",
                req.method,
                // serde's message may repeat the offending value in full.
                shorten_message(&e.inner().to_string(), &Value::Null)
            )),
        )
    })
}

/// Run `work` behind an [`Exchange`] (driven by whoever reads it). The
/// work receives a [`RequestContext`] whose notifications flow into the
/// exchange, and returns the final frame.
pub(crate) fn exchange<F, Fut>(
    states: std::sync::Arc<crate::tool::StateMap>,
    id: RequestId,
    meta: RequestMeta,
    transport: &TransportContext,
    round: Round,
    work: F,
) -> Reply
where
    F: FnOnce(RequestContext) -> Fut,
    Fut: Future<Output = Option<Frame>> + Send + 'static,
{
    let (tx, notes) = frame_queue::queue();
    let cancel = request_token();
    let ctx = RequestContext::new(id, meta, transport.auth.clone(), tx, cancel.clone(), round)
        .with_states(states);
    Reply::Streaming(Exchange::new(notes, Box::pin(work(ctx)), cancel))
}

/// The multi-round context of a request that may ask for input: its binding,
/// and the answers it carries (from a verified `requestState` and from
/// `inputResponses`, the latter winning). Its rounds are single-use when
/// the server says so for every request.
pub(crate) fn round(
    server: &Server,
    req: &Request,
    name: &str,
    arguments: &Value,
    transport: &TransportContext,
) -> Result<(Binding, Round), Failure> {
    let retry = mrtr::retry_fields(req.params.as_ref()).map_err(|e| (req.id.clone(), e))?;
    let once = server.inner.single_use_rounds;
    round_with(server, &req.method, name, arguments, retry, once, transport)
        .map_err(|refusal| (req.id.clone(), refusal.error))
}

/// [`round`] with the retry fields already taken out of the params; a
/// refused state says what was wrong with it.
pub(crate) fn round_with(
    server: &Server,
    method: &str,
    name: &str,
    arguments: &Value,
    retry: mrtr::Retry,
    once: bool,
    transport: &TransportContext,
) -> Result<(Binding, Round), StateRefusal> {
    let subject = transport.auth.as_ref().and_then(|a| a.subject());
    let binding = Binding::new(method, name, arguments, subject).single_use(once);
    let mut round = Round::default();
    if let Some(state) = &retry.state {
        let opened = server.inner.state_keys.open(state, &binding)?;
        round.responses = opened.responses;
        round.app = opened.app;
        round.once = opened.once;
    }
    round.responses.extend(retry.responses);
    Ok((binding, round))
}

/// Spend a single-use round before its handler runs; `Err` with the
/// protocol error of a replayed round, for a request that has no `isError`
/// to answer with (prompts, resources).
pub(crate) async fn spend_round(
    server: &Server,
    once: Option<String>,
    what: &str,
) -> Result<(), RpcError> {
    match crate::nonce::spend(&server.inner.nonces, once).await {
        Ok(()) => Ok(()),
        Err(crate::nonce::NotRun::Replayed) => Err(RpcError::invalid_params(format!(
            "Invalid requestState: this round of {what} was already answered, and each round is answered once; call again without requestState to start over"
        ))),
        Err(crate::nonce::NotRun::StoreFailed(e)) => {
            let e = toolgate_protocol::error::with_causes(&*e);
            tracing::error!(error = %e, "cannot spend a single-use round");
            Err(RpcError::internal())
        }
    }
}

/// The `input_required` frame for a round that ended asking for input.
pub(crate) fn input_required(
    server: &Server,
    id: &RequestId,
    binding: &Binding,
    pending: Pending,
) -> Frame {
    let ttl = server.inner.config.state_ttl.as_secs();
    let result = mrtr::input_required(&server.inner.state_keys, binding, ttl, pending);
    let mut map = match serde_json::to_value(&result) {
        Ok(Value::Object(map)) => map,
        _ => return crate::dispatch::error_frame(Some(id), RpcError::internal()),
    };
    server.stamp(&mut map);
    Frame::Response {
        body: toolgate_protocol::jsonrpc::encode_result(id, &map),
        error_code: None,
    }
}

/// How a handler's future ended.
pub(crate) enum Ended<T> {
    /// It returned a value.
    Value(T),
    /// A tool execution error with this message.
    Failed(String),
    /// A protocol error.
    Protocol(RpcError),
    /// It asked for input.
    NeedsInput(Pending),
    /// It panicked (already logged; never shown to the client).
    Panicked,
}

/// Run a handler's future, turning its error kinds and any panic into [`Ended`].
pub(crate) async fn guarded<T>(
    what: &str,
    work: impl Future<Output = Result<T, crate::tool::ToolError>>,
) -> Ended<T> {
    use crate::tool::{ErrorKind, ToolError};
    use futures::FutureExt as _;
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(Ok(value)) => Ended::Value(value),
        Ok(Err(ToolError(ErrorKind::Execution(message)))) => Ended::Failed(message),
        Ok(Err(ToolError(ErrorKind::Protocol(error)))) => Ended::Protocol(error),
        Ok(Err(ToolError(ErrorKind::InputRequired(pending)))) => Ended::NeedsInput(*pending),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(handler = what, panic = %message, "handler panicked");
            Ended::Panicked
        }
    }
}
