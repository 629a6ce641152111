//! The method catalogue: one type per MCP request method, naming the method
//! and the types of its params and result.
//!
//! A client sends `M::Params` and gets `M::Result` back; a server answers
//! `M::NAME`; a gateway relays by it. Nothing else in the workspace spells a
//! method's name or decides which of its params the Streamable HTTP
//! transport mirrors into `Mcp-Name`.
//!
//! ```
//! use toolgate_protocol::methods::{CallTool, Method, Route, route_of};
//! use toolgate_protocol::types::CallToolRequestParams;
//!
//! assert_eq!(CallTool::NAME, "tools/call");
//! let params = CallToolRequestParams {
//!     name: "add".into(),
//!     arguments: None,
//!     input_responses: None,
//!     request_state: None,
//!     meta: None,
//! };
//! assert_eq!(CallTool::routing_name(&params), Some("add"));
//! // The same rule, for a request known only by its name:
//! assert_eq!(route_of("tools/call"), Route::Field("name"));
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::types::{
    CallToolRequestParams, CallToolResult, CompleteRequestParams, CompleteResult,
    CreateMessageRequestParams, CreateMessageResult, DetailedTask, DiscoverResult,
    ElicitRequestParams, ElicitResult, GetPromptRequestParams, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListRootsResult, ListToolsResult,
    PaginatedRequestParams, Prompt, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceTemplate, SubscriptionsListenRequestParams, TaskIdParams, Tool, UpdateTaskParams,
};

/// Which of a request's params the Streamable HTTP transport mirrors into
/// the `Mcp-Name` header (the transport spec's routing header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// None: the request is not routed by name.
    None,
    /// The string param of this name (`name`, `uri`, `taskId`).
    Field(&'static str),
}

/// One MCP request method.
pub trait Method {
    /// The method's name on the wire.
    const NAME: &'static str;
    /// Which param is mirrored into `Mcp-Name`.
    const ROUTE: Route = Route::None;
    /// Its params.
    type Params: Serialize + DeserializeOwned + Send + Sync;
    /// Its result.
    type Result: Serialize + DeserializeOwned + Send;

    /// The value mirrored into `Mcp-Name` for `params`, if any.
    fn routing_name(params: &Self::Params) -> Option<&str> {
        let _ = params;
        None
    }
}

/// A list method: its params carry a cursor, its result a page of items and
/// perhaps the next cursor.
pub trait Paginated: Method<Params = PaginatedRequestParams> {
    /// The listed items.
    type Item: Serialize + DeserializeOwned + Send;
    /// The result's field that holds them (`tools`, `resources`, …).
    const FIELD: &'static str;
}

/// Params of a method that takes nothing but `_meta`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct NoParams {
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<crate::types::Meta>,
}

/// A result with nothing in it but perhaps `_meta` (what `tasks/update`,
/// `tasks/cancel` and `ping` return).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct EmptyResult {
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<crate::types::Meta>,
    /// Anything else the server put in it (kept, so a relay passes it on).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

macro_rules! method {
    ($(#[$doc:meta])* $ty:ident = $name:literal, $params:ty => $result:ty $(, route $field:literal via $get:expr)?) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub enum $ty {}

        impl Method for $ty {
            const NAME: &'static str = $name;
            $(const ROUTE: Route = Route::Field($field);)?
            type Params = $params;
            type Result = $result;
            $(
                fn routing_name(params: &Self::Params) -> Option<&str> {
                    let get: fn(&Self::Params) -> &str = $get;
                    Some(get(params))
                }
            )?
        }
    };
}

macro_rules! list {
    ($(#[$doc:meta])* $ty:ident = $name:literal, $result:ty, $item:ty, $field:literal) => {
        method!($(#[$doc])* $ty = $name, PaginatedRequestParams => $result);

        impl Paginated for $ty {
            type Item = $item;
            const FIELD: &'static str = $field;
        }
    };
}

method!(
    /// `server/discover`: the server's versions, capabilities and identity.
    Discover = "server/discover", NoParams => DiscoverResult
);
method!(
    /// `ping`.
    Ping = "ping", NoParams => EmptyResult
);
list!(
    /// `tools/list`.
    ListTools = "tools/list", ListToolsResult, Tool, "tools"
);
method!(
    /// `tools/call`.
    CallTool = "tools/call", CallToolRequestParams => CallToolResult,
    route "name" via |p| p.name.as_str()
);
list!(
    /// `resources/list`.
    ListResources = "resources/list", ListResourcesResult, Resource, "resources"
);
list!(
    /// `resources/templates/list`.
    ListResourceTemplates = "resources/templates/list", ListResourceTemplatesResult, ResourceTemplate, "resourceTemplates"
);
method!(
    /// `resources/read`.
    ReadResource = "resources/read", ReadResourceRequestParams => ReadResourceResult,
    route "uri" via |p| p.uri.as_str()
);
list!(
    /// `prompts/list`.
    ListPrompts = "prompts/list", ListPromptsResult, Prompt, "prompts"
);
method!(
    /// `prompts/get`.
    GetPrompt = "prompts/get", GetPromptRequestParams => GetPromptResult,
    route "name" via |p| p.name.as_str()
);
method!(
    /// `completion/complete`.
    Complete = "completion/complete", CompleteRequestParams => CompleteResult
);
method!(
    /// `subscriptions/listen`: a stream of the notifications asked for.
    SubscriptionsListen = "subscriptions/listen", SubscriptionsListenRequestParams => EmptyResult
);
method!(
    /// `tasks/get` (the tasks extension): the task as it stands.
    GetTask = "tasks/get", TaskIdParams => DetailedTask,
    route "taskId" via |p| p.task_id.as_str()
);
method!(
    /// `tasks/update` (the tasks extension): answers to its input requests.
    UpdateTask = "tasks/update", UpdateTaskParams => EmptyResult,
    route "taskId" via |p| p.task_id.as_str()
);
method!(
    /// `tasks/cancel` (the tasks extension).
    CancelTask = "tasks/cancel", TaskIdParams => EmptyResult,
    route "taskId" via |p| p.task_id.as_str()
);

method!(
    /// `elicitation/create` (server to client): ask the user, through the
    /// client, for input.
    Elicit = "elicitation/create", ElicitRequestParams => ElicitResult
);
method!(
    /// `sampling/createMessage` (server to client): ask the client's model
    /// for a message.
    CreateMessage = "sampling/createMessage", CreateMessageRequestParams => CreateMessageResult
);
method!(
    /// `roots/list` (server to client): the client's roots.
    ListRoots = "roots/list", NoParams => ListRootsResult
);

/// The requests a server sends its client (in a legacy session, or as the
/// input requests of a modern round): a client answers these.
pub const SERVER_TO_CLIENT: &[&str] = &[Elicit::NAME, CreateMessage::NAME, ListRoots::NAME];

/// Every method of the catalogue: its name and route.
pub const ALL: &[(&str, Route)] = &[
    entry::<Discover>(),
    entry::<Ping>(),
    entry::<ListTools>(),
    entry::<CallTool>(),
    entry::<ListResources>(),
    entry::<ListResourceTemplates>(),
    entry::<ReadResource>(),
    entry::<ListPrompts>(),
    entry::<GetPrompt>(),
    entry::<Complete>(),
    entry::<SubscriptionsListen>(),
    entry::<GetTask>(),
    entry::<UpdateTask>(),
    entry::<CancelTask>(),
    entry::<Elicit>(),
    entry::<CreateMessage>(),
    entry::<ListRoots>(),
];

const fn entry<M: Method>() -> (&'static str, Route) {
    (M::NAME, M::ROUTE)
}

/// The route of the method named `method` ([`Route::None`] for one the
/// catalogue does not know).
pub fn route_of(method: &str) -> Route {
    ALL.iter()
        .find(|(name, _)| *name == method)
        .map_or(Route::None, |(_, route)| *route)
}

/// What `Mcp-Name` carries for a request known only by its name and raw
/// params (a relay's): the routed param's string value.
pub fn routing_name<'a>(method: &str, params: &'a Map<String, Value>) -> Option<&'a str> {
    match route_of(method) {
        Route::None => None,
        Route::Field(field) => params.get(field).and_then(Value::as_str),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_route_agrees_with_the_typed_one() {
        let params = TaskIdParams {
            task_id: "t-1".into(),
            meta: None,
        };
        let raw = serde_json::to_value(&params).unwrap();
        let raw = raw.as_object().unwrap();
        assert_eq!(GetTask::routing_name(&params), Some("t-1"));
        assert_eq!(routing_name(GetTask::NAME, raw), Some("t-1"));
        assert_eq!(routing_name(ListTools::NAME, raw), None);
        assert_eq!(routing_name("vendor/unknown", raw), None);
    }

    #[test]
    fn every_name_is_listed_once() {
        let mut names: Vec<&str> = ALL.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }
}
