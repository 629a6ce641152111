//! `completion/complete`: argument suggestions for prompts and resource templates.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::json;
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::quote::quote;

use super::{Failure, exchange, params};
use crate::Server;
use crate::context::Round;
use crate::dispatch::TransportContext;
use crate::exchange::Reply;
use crate::prompt::CompleteWith;

/// At most this many values per answer, as the spec requires.
const MAX_VALUES: usize = 100;

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Reference {
    #[serde(rename = "ref/prompt")]
    Prompt { name: String },
    #[serde(rename = "ref/resource")]
    Resource { uri: String },
}

#[derive(Deserialize)]
struct Argument {
    name: String,
    value: String,
}

#[derive(Deserialize, Default)]
struct Context {
    #[serde(default)]
    arguments: HashMap<String, String>,
}

#[derive(Deserialize)]
struct CompleteParams {
    #[serde(rename = "ref")]
    reference: Reference,
    argument: Argument,
    #[serde(default)]
    context: Option<Context>,
}

pub(super) fn complete(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    let p: CompleteParams = params(&req)?;
    let auth = transport.auth.as_ref();
    let completer = match &p.reference {
        Reference::Prompt { name } => {
            let prompt = server.inner.prompts.get(name, auth).ok_or_else(|| {
                (
                    req.id.clone(),
                    RpcError::invalid_params(format!("Unknown prompt: {}", quote(name))),
                )
            })?;
            let known = prompt
                .prompt
                .arguments
                .iter()
                .flatten()
                .any(|a| a.name == p.argument.name);
            if !known {
                return Err((
                    req.id,
                    RpcError::invalid_params(format!(
                        "Prompt {} has no argument {}",
                        quote(name),
                        quote(&p.argument.name)
                    )),
                ));
            }
            prompt.completer.clone()
        }
        Reference::Resource { uri } => {
            let template = server.inner.templates.get(uri, auth).ok_or_else(|| {
                (
                    req.id.clone(),
                    RpcError::invalid_params(format!("Unknown resource template: {}", quote(uri))),
                )
            })?;
            template.completer.clone()
        }
    };
    let others = p.context.unwrap_or_default().arguments;
    match completer {
        Some(CompleteWith::Later(find)) => {
            let server = server.clone();
            let id = req.id;
            let (name, value) = (p.argument.name, p.argument.value);
            Ok(exchange(
                server.inner.states.clone(),
                id.clone(),
                meta,
                transport,
                Round::default(),
                move |_ctx| async move {
                    let values = find(name, value, others).await;
                    Some(server.result_frame(&id, &answer(values)))
                },
            ))
        }
        Some(CompleteWith::Now(find)) => {
            let values = find(&p.argument.name, &p.argument.value, &others);
            Ok(Reply::Done(server.result_frame(&req.id, &answer(values))))
        }
        None => Ok(Reply::Done(
            server.result_frame(&req.id, &answer(Vec::new())),
        )),
    }
}

/// A `CompleteResult` holding at most [`MAX_VALUES`] of `values`.
fn answer(mut values: Vec<String>) -> serde_json::Value {
    let total = values.len();
    values.truncate(MAX_VALUES);
    json!({
        "completion": { "values": values, "total": total, "hasMore": total > MAX_VALUES }
    })
}
