//! `resources/read`.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::json;
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::{CacheScope, ReadResourceResult, ResultType};

use super::discover::millis;
use super::{Ended, Failure, exchange, guarded, params};
use crate::Server;
use crate::dispatch::{TransportContext, error_frame};
use crate::exchange::Reply;

#[derive(Deserialize)]
struct ReadParams {
    uri: String,
}

pub(super) fn read(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    let p: ReadParams = params(&req)?;
    let auth = transport.auth.as_ref();
    let found = match server.inner.resources.get(&p.uri, auth) {
        Some(entry) => Some((
            entry.read.clone(),
            HashMap::new(),
            entry.visibility.is_some(),
        )),
        None => server
            .inner
            .templates
            .visible(auth)
            .into_iter()
            .find_map(|t| {
                t.matches(&p.uri)
                    .map(|vars| (t.read.clone(), vars, t.visibility.is_some()))
            }),
    };
    let Some((reader, vars, private)) = found else {
        return Err((req.id, not_found(&p.uri)));
    };
    let (binding, mut round) =
        super::round(server, &req, &p.uri, &serde_json::Value::Null, transport)?;
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
            if let Err(e) = super::spend_round(&server, once, &quote(&p.uri)).await {
                return Some(error_frame(Some(&id), e));
            }
            Some(
                match guarded(&p.uri, reader(p.uri.clone(), vars, ctx)).await {
                    Ended::NeedsInput(pending) => {
                        super::input_required(&server, &id, &binding, pending)
                    }
                    Ended::Value(contents) => {
                        let scope = if private {
                            CacheScope::Private
                        } else {
                            CacheScope::Public
                        };
                        let result = ReadResourceResult {
                            result_type: ResultType::Complete,
                            contents,
                            ttl_ms: Some(millis(server.inner.config.read_ttl)),
                            cache_scope: Some(scope),
                            meta: None,
                        };
                        server.result_frame(&id, &result)
                    }
                    Ended::Protocol(e) => error_frame(Some(&id), e),
                    Ended::Failed(message) => {
                        tracing::warn!(uri = %p.uri, %message, "resource read failed");
                        error_frame(Some(&id), not_found(&p.uri))
                    }
                    Ended::Panicked => error_frame(Some(&id), RpcError::internal()),
                },
            )
        },
    ))
}

fn not_found(uri: &str) -> RpcError {
    // The URI goes back in `data` as the spec's example does; a huge one is
    // quoted briefly in both places.
    let shown = if uri.len() > toolgate_protocol::quote::QUOTE_CHARS {
        serde_json::Value::from(quote(uri))
    } else {
        serde_json::Value::from(uri)
    };
    RpcError::invalid_params(format!("Resource not found: {}", quote(uri)))
        .with_data(json!({ "uri": shown }))
}
