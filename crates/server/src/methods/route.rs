//! Which tool a `tools/call` reaches: a listed tool by its name, or —
//! through a router — the tool the router names, listed or not. An
//! unlisted tool is unknown by its own name: `tools/list` is the set of
//! tools a client can call (`server/tools`), and the router is how the
//! rest are reached.

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

impl Resolved {
    /// Whether an unlisted tool may answer: only through a router.
    pub(super) fn reaches_unlisted(&self) -> bool {
        self.via.is_some()
    }
}

/// A router's call that names no callable tool: the router's name and
/// arguments (for the record) and what to tell the caller.
pub(super) struct Unrouted {
    pub(super) name: String,
    pub(super) args: Map<String, Value>,
    pub(super) text: String,
}

/// The tool `name` as `auth` may see it: a listed one, or with
/// `unlisted`, an unlisted one too.
pub(super) fn lookup(
    server: &Server,
    name: &str,
    auth: Option<&AuthContext>,
    unlisted: bool,
) -> Option<Arc<RegisteredTool>> {
    let inner = &server.inner;
    inner
        .tools
        .get(name, auth)
        .or_else(|| unlisted.then(|| inner.unlisted.get(name, auth)).flatten())
}

/// The tool `name` whoever asks (to tell hidden from absent), as
/// [`lookup`] finds it.
pub(super) fn lookup_hidden(
    server: &Server,
    name: &str,
    unlisted: bool,
) -> Option<Arc<RegisteredTool>> {
    let inner = &server.inner;
    inner
        .tools
        .get_hidden(name)
        .or_else(|| unlisted.then(|| inner.unlisted.get_hidden(name)).flatten())
}

/// The call `name(args)` stands for: itself, unless `name` is a router
/// `auth` may call, whose router then names the call.
pub(super) fn resolve(
    server: &Server,
    name: String,
    args: Map<String, Value>,
    auth: Option<&AuthContext>,
) -> Result<Resolved, Unrouted> {
    let routed = lookup(server, &name, auth, false).and_then(|tool| tool.routing.router.clone());
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
    if lookup(server, &route.tool, auth, true).is_some_and(|t| t.routing.router.is_some()) {
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
