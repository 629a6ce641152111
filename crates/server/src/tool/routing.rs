//! Tools offered without being listed, and tools whose call is a call of
//! another tool.
//!
//! A server with hundreds of tools can list a few and let the model find
//! the rest ([`ToolDef::unlisted`]): an unlisted tool is absent from
//! `tools/list` and reached only through a router — `tools/list` is the
//! set of tools a client can call, so by its own name it is unknown. A
//! router tool
//! ([`ToolDef::routes`]) takes the name and arguments of the tool it calls:
//! its call is answered as a call of that tool — validated against its
//! schema, bound to it for every round, recorded under its name with the
//! router's `via` noted — so the router adds no way around what the tool's
//! own call would pass.

use std::sync::Arc;

use serde_json::{Map, Value};

use toolgate_protocol::types::CallToolResult;

use super::{ToolDef, ToolEntry, ToolReply};
use crate::AuthContext;

/// The call a router's call stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// The name of the tool called.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
}

/// Turns a router's arguments into the call they stand for, or says, in a
/// sentence the model can act on, why they do not name one.
pub type Router =
    Arc<dyn Fn(&Map<String, Value>, Option<&AuthContext>) -> Result<Route, String> + Send + Sync>;

/// How a tool is reached: listed or not, and whether it routes.
#[derive(Clone, Default)]
pub(crate) struct Routing {
    /// Callable, never listed.
    pub(crate) unlisted: bool,
    /// What its calls are calls of, and the word recorded as their `via`.
    pub(crate) router: Option<(Arc<str>, Router)>,
}

impl ToolDef {
    /// Offer the tool only through a router ([`ToolDef::router`]):
    /// `tools/list` never shows it (registering or removing it announces
    /// no change) and a `tools/call` by its own name finds no such tool,
    /// while a router's call reaches it with every check a listed tool
    /// has.
    pub fn unlisted(mut self) -> Self {
        self.routing.unlisted = true;
        self
    }

    /// A router: each call of this tool is a call of the tool `router`
    /// names, with the arguments it gives; `via` is noted on the call's
    /// record (as `"via"`). `input_schema` is what `tools/list` shows of
    /// the router's own arguments. A router may not name a router: that
    /// call is refused.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate_server::tool::Route;
    /// use toolgate_server::ToolDef;
    /// let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    /// let call = ToolDef::new("call_tool").router(
    ///     "search",
    ///     schema.as_object().cloned().unwrap_or_default(),
    ///     |args, _caller| {
    ///         let name = args.get("name").and_then(|n| n.as_str());
    ///         let name = name.ok_or("Give the tool's name as \"name\".")?;
    ///         Ok(Route { tool: name.to_owned(), arguments: Default::default() })
    ///     },
    /// );
    /// # let _ = call;
    /// ```
    pub fn router<F>(mut self, via: &str, input_schema: Map<String, Value>, router: F) -> ToolEntry
    where
        F: Fn(&Map<String, Value>, Option<&AuthContext>) -> Result<Route, String>
            + Send
            + Sync
            + 'static,
    {
        self.routing.router = Some((Arc::from(via), Arc::new(router)));
        // Never run: the dispatcher calls the routed tool instead.
        self.dynamic(input_schema, None, |_args, _ctx| async {
            Ok(ToolReply::Complete(CallToolResult::error(
                "This tool only routes calls to other tools.",
            )))
        })
    }
}

impl ToolEntry {
    /// The entry, offered without being listed ([`ToolDef::unlisted`]).
    pub fn unlisted(mut self) -> Self {
        self.def.routing.unlisted = true;
        self
    }
}
