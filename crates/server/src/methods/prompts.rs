//! `prompts/get`.

use std::collections::HashMap;

use serde::Deserialize;
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::quote::quote;

use super::{Ended, Failure, exchange, guarded, params};
use crate::Server;
use crate::dispatch::{TransportContext, error_frame};
use crate::exchange::Reply;

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
            RpcError::invalid_params(format!("Unknown prompt: {}", quote(&p.name))),
        ));
    };
    let missing = prompt.missing_arguments(&p.arguments);
    if !missing.is_empty() {
        return Err((
            req.id,
            RpcError::invalid_params(format!(
                "Prompt {} is missing required arguments: {}",
                quote(&p.name),
                missing.join(", ")
            )),
        ));
    }
    let args_value = serde_json::to_value(&p.arguments).unwrap_or_default();
    let (binding, mut round) = super::round(server, &req, &p.name, &args_value, transport)?;
    let once = round.once.take();
    let server = server.clone();
    let id = req.id;
    Ok(exchange(
        server.inner.states.clone(),
        id.clone(),
        meta,
        transport,
        round,
        move |ctx| async move {
            if let Err(e) = super::spend_round(&server, once, &quote(&p.name)).await {
                return Some(error_frame(Some(&id), e));
            }
            Some(
                match guarded(&prompt.prompt.name, (prompt.handler)(p.arguments, ctx)).await {
                    Ended::Value(result) => server.result_frame(&id, &result),
                    Ended::NeedsInput(pending) => {
                        super::input_required(&server, &id, &binding, pending)
                    }
                    Ended::Protocol(e) => error_frame(Some(&id), e),
                    Ended::Failed(message) => {
                        error_frame(Some(&id), RpcError::invalid_params(message))
                    }
                    Ended::Panicked => error_frame(Some(&id), RpcError::internal()),
                },
            )
        },
    ))
}
