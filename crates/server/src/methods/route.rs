//! Which tool a `tools/call` reaches: a listed or unlisted tool by its
//! name, or — through a router — the tool the router names.

use std::sync::Arc;

use serde_json::{Map, Value};
use toolgate_protocol::quote::quote;

use crate::tool::RegisteredTool;
use crate::{AuthContext, Server};

/// The call to make: the tool's name, its arguments, and the router it
/// came through (its `via`), if any.
pub(super) struct Resolved {
    pub(super) name: String,
    pub(super) args: Map<String, Value>,
    pub(super) via: Option<Arc<str>>,
}

/// A router's call that names no callable tool: the router's name and
/// arguments (for the record) and what to tell the caller.
pub(super) struct Unrouted {
    pub(super) name: String,
    pub(super) args: Map<String, Value>,
    pub(super) text: String,
}

/// The tool `name` as `auth` may see it, listed or not.
pub(super) fn lookup(
    server: &Server,
    name: &str,
    auth: Option<&AuthContext>,
) -> Option<Arc<RegisteredTool>> {
    let inner = &server.inner;
    inner
        .tools
        .get(name, auth)
        .or_else(|| inner.unlisted.get(name, auth))
}

/// The tool `name` whoever asks, listed or not (to tell hidden from absent).
pub(super) fn lookup_hidden(server: &Server, name: &str) -> Option<Arc<RegisteredTool>> {
    let inner = &server.inner;
    inner
        .tools
        .get_hidden(name)
        .or_else(|| inner.unlisted.get_hidden(name))
}

/// The call `name(args)` stands for: itself, unless `name` is a router
/// `auth` may call, whose router then names the call.
pub(super) fn resolve(
    server: &Server,
    name: String,
    args: Map<String, Value>,
    auth: Option<&AuthContext>,
) -> Result<Resolved, Unrouted> {
    let routed = lookup(server, &name, auth).and_then(|tool| tool.routing.router.clone());
    let Some((via, router)) = routed else {
        return Ok(Resolved {
            name,
            args,
            via: None,
        });
    };
    let route = match router(&args, auth) {
        Ok(route) => route,
        Err(text) => return Err(Unrouted { name, args, text }),
    };
    // A router naming a router would let one call hide behind another.
    if lookup(server, &route.tool, auth).is_some_and(|t| t.routing.router.is_some()) {
        let text = format!(
            "{} cannot call {}: it is a tool of the server's own; call it directly.",
            quote(&name),
            quote(&route.tool)
        );
        return Err(Unrouted { name, args, text });
    }
    Ok(Resolved {
        name: route.tool,
        args: route.arguments,
        via: Some(via),
    })
}
