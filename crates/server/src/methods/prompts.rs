//! `prompts/get`.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;
use serde::Deserialize;
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::meta::RequestMeta;

use super::{Failure, params, spawn};
use crate::Server;
use crate::dispatch::{TransportContext, error_frame};
use crate::exchange::Reply;
use crate::tool::{ErrorKind, ToolError};

#[derive(Deserialize)]
struct GetParams {
    name: String,
    #[serde(default)]
    arguments: HashMap<String, String>,
}

pub(super) fn get(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    let p: GetParams = params(&req)?;
    let Some(prompt) = server.inner.prompts.get(&p.name, transport.auth.as_ref()) else {
        return Err((
            req.id,
            RpcError::invalid_params(format!("Unknown prompt: {}", p.name)),
        ));
    };
    let missing = prompt.missing_arguments(&p.arguments);
    if !missing.is_empty() {
        return Err((
            req.id,
            RpcError::invalid_params(format!(
                "Prompt {:?} is missing required arguments: {}",
                p.name,
                missing.join(", ")
            )),
        ));
    }
    let args_value = serde_json::to_value(&p.arguments).unwrap_or_default();
    let (binding, round) = super::round(server, &req, &p.name, &args_value, transport)?;
    let server = server.clone();
    let id = req.id;
    Ok(spawn(
        &server.clone(),
        id.clone(),
        meta,
        transport,
        round,
        move |ctx| async move {
            let outcome = AssertUnwindSafe((prompt.handler)(p.arguments, ctx))
                .catch_unwind()
                .await;
            Some(match outcome {
                Ok(Ok(result)) => server.result_frame(&id, &result),
                Ok(Err(ToolError(ErrorKind::InputRequired(pending)))) => {
                    super::input_required(&server, &id, &binding, *pending)
                }
                Ok(Err(ToolError(ErrorKind::Protocol(e)))) => error_frame(Some(&id), e),
                Ok(Err(ToolError(ErrorKind::Execution(message)))) => {
                    error_frame(Some(&id), RpcError::invalid_params(message))
                }
                Err(_) => {
                    tracing::error!(prompt = %prompt.prompt.name, "prompt handler panicked");
                    error_frame(Some(&id), RpcError::internal())
                }
            })
        },
    ))
}
