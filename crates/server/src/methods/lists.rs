//! `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`.

use serde::Deserialize;
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::types::CacheScope;

use super::{Failure, params};
use crate::Server;
use crate::dispatch::TransportContext;
use crate::exchange::{Frame, Reply};
use crate::registry::{Catalog, Listed};

/// Only for its error messages: the cursor itself is read in place.
#[derive(Deserialize)]
struct ListParams {
    #[serde(default)]
    #[allow(dead_code)]
    cursor: Option<String>,
}

pub(super) fn tools(server: &Server, req: Request, t: &TransportContext) -> Result<Reply, Failure> {
    list(server, req, t, &server.inner.tools, "tools")
}

pub(super) fn prompts(
    server: &Server,
    req: Request,
    t: &TransportContext,
) -> Result<Reply, Failure> {
    list(server, req, t, &server.inner.prompts, "prompts")
}

pub(super) fn resources(
    server: &Server,
    req: Request,
    t: &TransportContext,
) -> Result<Reply, Failure> {
    list(server, req, t, &server.inner.resources, "resources")
}

pub(super) fn templates(
    server: &Server,
    req: Request,
    t: &TransportContext,
) -> Result<Reply, Failure> {
    list(server, req, t, &server.inner.templates, "resourceTemplates")
}

fn list<T: Listed>(
    server: &Server,
    req: Request,
    transport: &TransportContext,
    catalog: &Catalog<T>,
    field: &'static str,
) -> Result<Reply, Failure> {
    // The cursor is read in place; only malformed params go through the
    // generic reader, for its precise error.
    let cursor = match req.params.as_ref().and_then(|p| p.get("cursor")) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(c)) => Some(c.as_str()),
        Some(_) => {
            let _: ListParams = params(&req)?;
            None
        }
    };
    let inner = &server.inner;
    let render = |items: &[&[u8]], next: Option<&str>, private: bool| {
        render_page(server, field, items, next, private)
    };
    let result = catalog
        .page_bytes(
            cursor,
            transport.auth.as_ref(),
            inner.config.page_size,
            &render,
        )
        .map_err(|e| (req.id.clone(), e))?;
    let mut body = Vec::with_capacity(result.len() + 48);
    body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    if serde_json::to_writer(&mut body, &req.id).is_err() {
        return Err((req.id, toolgate_protocol::RpcError::internal()));
    }
    body.extend_from_slice(b",\"result\":");
    body.extend_from_slice(&result);
    body.push(b'}');
    Ok(Reply::Done(Frame::Response {
        body,
        error_code: None,
    }))
}

/// A page's result object from its items' serialized forms.
fn render_page(
    server: &Server,
    field: &str,
    items: &[&[u8]],
    next: Option<&str>,
    private: bool,
) -> Vec<u8> {
    let inner = &server.inner;
    let mut out = Vec::with_capacity(items.iter().map(|i| i.len() + 1).sum::<usize>() + 256);
    out.extend_from_slice(b"{\"resultType\":\"complete\",\"");
    out.extend_from_slice(field.as_bytes());
    out.extend_from_slice(b"\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
    // Strings and plain data: serializing them cannot fail.
    if let Some(cursor) = next {
        out.extend_from_slice(b",\"nextCursor\":");
        let _ = serde_json::to_writer(&mut out, cursor);
    }
    out.extend_from_slice(b",\"ttlMs\":");
    let ttl = inner.list_ttl_ms.load(std::sync::atomic::Ordering::Relaxed);
    let _ = serde_json::to_writer(&mut out, &ttl);
    out.extend_from_slice(b",\"cacheScope\":");
    let private = private
        || inner
            .lists_private
            .load(std::sync::atomic::Ordering::Relaxed);
    let scope = if private {
        CacheScope::Private
    } else {
        CacheScope::Public
    };
    let _ = serde_json::to_writer(&mut out, &scope);
    out.extend_from_slice(b",\"_meta\":");
    let _ = serde_json::to_writer(&mut out, &inner.result_meta);
    out.push(b'}');
    out
}
