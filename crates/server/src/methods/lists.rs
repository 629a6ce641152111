//! `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`.

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use toolgate_protocol::jsonrpc::{Request, encode_result};
use toolgate_protocol::types::CacheScope;

use super::discover::millis;
use super::{Failure, params};
use crate::Server;
use crate::dispatch::TransportContext;
use crate::exchange::{Frame, Reply};
use crate::registry::{Catalog, Listed, Page};

#[derive(Deserialize)]
struct ListParams {
    #[serde(default)]
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
    let p: ListParams = params(&req)?;
    let page = catalog
        .page(
            p.cursor.as_deref(),
            transport.auth.as_ref(),
            server.inner.config.page_size,
        )
        .map_err(|e| (req.id.clone(), e))?;
    let body = ListResult {
        server,
        page: &page,
        field,
    };
    Ok(Reply::Done(Frame::Response {
        body: encode_result(&req.id, &body),
        error_code: None,
    }))
}

/// A list page serialized straight from the catalog's items, without
/// copying their definitions.
struct ListResult<'a, T> {
    server: &'a Server,
    page: &'a Page<T>,
    field: &'static str,
}

impl<T: Listed> Serialize for ListResult<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = &self.server.inner;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("resultType", "complete")?;
        map.serialize_entry(self.field, &Items(&self.page.items))?;
        if let Some(cursor) = &self.page.next_cursor {
            map.serialize_entry("nextCursor", cursor)?;
        }
        map.serialize_entry("ttlMs", &millis(inner.config.list_ttl))?;
        let scope = if self.page.private {
            CacheScope::Private
        } else {
            CacheScope::Public
        };
        map.serialize_entry("cacheScope", &scope)?;
        map.serialize_entry("_meta", &inner.result_meta)?;
        map.end()
    }
}

struct Items<'a, T>(&'a [std::sync::Arc<T>]);

impl<T: Listed> Serialize for Items<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|item| item.wire()))
    }
}
