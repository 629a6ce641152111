//! Progressive disclosure (`[endpoints.NAME] disclosure = "search"`): the
//! endpoint lists its pinned tools and two of the gateway's own —
//! `find_tools`, which ranks the endpoint's tools against a question and
//! returns the best with their definitions as the caller would see them
//! listed, and `call_tool`, a router whose call *is* the call of the tool
//! it names (validated, staged, approved and recorded as that tool, with
//! `via = "search"`). The list never changes with what was searched.
//!
//! The index is built from the endpoint's offer when a question finds it
//! out of date (its tools, by name and generation), so every way tools
//! come and go — listings, reloads, a lock change — is seen.
//!
//! Layer: `gateway`.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde_json::{Map, Value, json};
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::{CallToolResult, Tool, ToolAnnotations};
use toolgate_review::Effect;
use toolgate_server::tool::Route;
use toolgate_server::{AuthContext, Server, ToolDef, ToolReply, WeakServer};

use super::endpoints::EndpointOffer;
use crate::config::{CALL_TOOL, FIND_TOOLS};
use crate::decide::search::{Catalogue, Question, ToolSearch};

/// The longest question `find_tools` takes, in characters.
pub const MAX_QUERY: u64 = 1_000;
/// The most tools one question returns.
pub const MAX_LIMIT: u64 = 50;
/// How many tools a question returns unless it says.
const DEFAULT_LIMIT: u64 = 5;
/// How many near names an unknown name is answered with.
const CLOSEST: usize = 3;

/// An endpoint's index, rebuilt when its offer has changed.
#[derive(Default)]
pub(super) struct Index {
    built: Mutex<Option<(u64, Arc<Catalogue>)>>,
}

impl Index {
    /// The index of `offer` as it is now.
    fn of(&self, offer: &RwLock<EndpointOffer>) -> Arc<Catalogue> {
        let offer = offer.read();
        let mut names: Vec<(&String, u64)> = offer
            .tools
            .iter()
            .map(|(name, shown)| (name, shown.generation))
            .collect();
        names.sort();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        names.hash(&mut hasher);
        let print = hasher.finish();
        let mut built = self.built.lock();
        if let Some((at, index)) = &*built
            && *at == print
        {
            return index.clone();
        }
        let index = Arc::new(Catalogue::new(names.iter().filter_map(|(name, _)| {
            offer.tools.get(*name).map(|s| (name.as_str(), &s.shown))
        })));
        *built = Some((print, index.clone()));
        index
    }
}

/// Register `find_tools` and `call_tool` on a searching endpoint's server.
pub(super) fn register(
    server: &Server,
    offer: Arc<RwLock<EndpointOffer>>,
) -> Result<(), toolgate_server::RegistrationError> {
    let index = Arc::new(Index::default());
    let weak = server.downgrade();
    server.add_tool(find_tools(weak.clone(), offer.clone(), index.clone()))?;
    server.add_tool(call_tool(weak, offer, index))?;
    Ok(())
}

/// The effects a question may filter on, as the review names them.
const EFFECTS: [Effect; 6] = [
    Effect::Read,
    Effect::Write,
    Effect::Delete,
    Effect::Send,
    Effect::Spend,
    Effect::Execute,
];

fn find_schema() -> Map<String, Value> {
    let effects: Vec<&str> = EFFECTS.iter().map(|e| e.label()).collect();
    let schema = json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY,
                "description": "What the tool should do, in plain words (\"list my calendar events for tomorrow\")."
            },
            "effects": {
                "type": "array",
                "items": {"type": "string", "enum": effects},
                "uniqueItems": true,
                "description": "Only tools whose every effect is one of these (\"read\" finds tools that only read)."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": format!("How many tools to return (default {DEFAULT_LIMIT}).")
            }
        },
        "required": ["query"],
        "additionalProperties": false
    });
    schema.as_object().cloned().unwrap_or_default()
}

fn find_tools(
    weak: WeakServer,
    offer: Arc<RwLock<EndpointOffer>>,
    index: Arc<Index>,
) -> toolgate_server::ToolEntry {
    ToolDef::new(FIND_TOOLS)
        .title("Find tools")
        .description(format!(
            "Find this endpoint's tools by what they do. Describe the task in plain words; the best matches come back with their full definitions (name, description, inputSchema). Then call one with {CALL_TOOL}, giving its name and arguments."
        ))
        .annotations(ToolAnnotations {
            read_only_hint: Some(true),
            open_world_hint: Some(false),
            ..Default::default()
        })
        .dynamic(find_schema(), None, move |args: Map<String, Value>, ctx: toolgate_server::RequestContext| {
            let answer = weak
                .upgrade()
                .map(|server| find(&server, &offer, &index, &args, ctx.auth()))
                .unwrap_or_else(|| CallToolResult::error("This endpoint is being replaced; call again."));
            async move { Ok(ToolReply::Complete(answer)) }
        })
}

/// What `find_tools` answers.
fn find(
    server: &Server,
    offer: &RwLock<EndpointOffer>,
    index: &Index,
    args: &Map<String, Value>,
    caller: Option<&AuthContext>,
) -> CallToolResult {
    let text = args
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_LIMIT)
        .clamp(1, MAX_LIMIT);
    let effects: Option<Vec<Effect>> = args.get("effects").and_then(Value::as_array).map(|list| {
        EFFECTS
            .into_iter()
            .filter(|e| list.iter().any(|v| v.as_str() == Some(e.label())))
            .collect()
    });
    let catalogue = index.of(offer);
    if catalogue.is_empty() {
        return found_result(Vec::new(), "This endpoint offers no tools to search.");
    }
    if !catalogue.searchable(text) {
        return CallToolResult::error(
            "The query has no words to search by; describe what the tool should do, e.g. \"list calendar events\".",
        );
    }
    let visible = |name: &str| server.tool(name, caller).is_some();
    let found = catalogue.find(&Question {
        text,
        effects: effects.as_deref(),
        limit: usize::try_from(limit).unwrap_or(usize::MAX),
        visible: &visible,
    });
    let tools: Vec<Tool> = found
        .iter()
        .filter_map(|f| server.tool(&f.name, caller))
        .collect();
    let note = if tools.is_empty() {
        "No tool matches; try other words, or fewer effects.".to_owned()
    } else {
        format!("Call one with {CALL_TOOL} {{\"name\": ..., \"arguments\": {{...}}}}.")
    };
    found_result(tools, &note)
}

/// The tools found, as structured content (mirrored as text), and what to
/// do next.
fn found_result(tools: Vec<Tool>, note: &str) -> CallToolResult {
    let structured = json!({ "tools": tools, "next": note });
    CallToolResult {
        structured_content: Some(structured),
        ..CallToolResult::default()
    }
}

fn call_schema() -> Map<String, Value> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": format!("The tool's name, as {FIND_TOOLS} returned it.")},
            "arguments": {"type": "object", "description": "Its arguments, as its inputSchema describes them."}
        },
        "required": ["name"],
        "additionalProperties": false
    });
    schema.as_object().cloned().unwrap_or_default()
}

fn call_tool(
    weak: WeakServer,
    offer: Arc<RwLock<EndpointOffer>>,
    index: Arc<Index>,
) -> toolgate_server::ToolEntry {
    ToolDef::new(CALL_TOOL)
        .title("Call a found tool")
        .description(format!(
            "Call a tool {FIND_TOOLS} returned, by its name, with its arguments. The call is that tool's own: checked against its inputSchema, and put to a person first where the tool's calls are."
        ))
        .router("search", call_schema(), move |args, caller| {
            let server = weak
                .upgrade()
                .ok_or("This endpoint is being replaced; call again.")?;
            route(&server, &offer, &index, args, caller)
        })
}

/// The call `call_tool(args)` stands for, or why there is none.
fn route(
    server: &Server,
    offer: &RwLock<EndpointOffer>,
    index: &Index,
    args: &Map<String, Value>,
    caller: Option<&AuthContext>,
) -> Result<Route, String> {
    let Some(name) = args.get("name").and_then(Value::as_str) else {
        return Err(format!(
            "Give the tool's name as \"name\" (a string), as {FIND_TOOLS} returned it."
        ));
    };
    if name == FIND_TOOLS || name == CALL_TOOL {
        return Err(format!(
            "{} is a tool of the gateway's own; call it directly, not through {CALL_TOOL}.",
            quote(name)
        ));
    }
    let arguments = match args.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => {
            return Err(format!(
                "\"arguments\" must be an object of {}'s arguments, as its inputSchema describes them.",
                quote(name)
            ));
        }
    };
    let offered = offer.read().tools.contains_key(name);
    // A tool the caller may not see, or the endpoint withholds, is
    // answered as one that does not exist.
    if !offered || server.tool(name, caller).is_none() {
        return Err(unknown(server, index, offer, name, caller));
    }
    Ok(Route {
        tool: name.to_owned(),
        arguments,
    })
}

/// "No tool named …", with the nearest names the caller may see.
fn unknown(
    server: &Server,
    index: &Index,
    offer: &RwLock<EndpointOffer>,
    name: &str,
    caller: Option<&AuthContext>,
) -> String {
    let visible = |n: &str| server.tool(n, caller).is_some();
    let catalogue = index.of(offer);
    let near = catalogue.find(&Question {
        text: name,
        effects: None,
        limit: CLOSEST,
        visible: &visible,
    });
    let mut text = format!("This endpoint has no tool named {}.", quote(name));
    if !near.is_empty() {
        let names: Vec<String> = near.iter().map(|f| quote(&f.name).to_string()).collect();
        text.push_str(&format!(" Closest: {}.", names.join(", ")));
    }
    text.push_str(&format!(" Use {FIND_TOOLS} to look for one."));
    text
}
