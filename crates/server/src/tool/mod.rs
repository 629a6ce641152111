//! Tool definitions and handlers.
//!
//! A tool is a [`ToolDef`] (name, description, annotations, …) plus a
//! handler. Typed handlers take an argument struct deriving `Deserialize` and
//! `JsonSchema`: its schema becomes the `inputSchema`, and the handler's
//! return type decides the `outputSchema` ([`Structured<T>`] advertises
//! `T`'s schema). Dynamic handlers take a JSON Schema and raw arguments, for
//! gateways and generated tools.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use toolgate_server::ToolDef;
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! let tool = ToolDef::new("greet")
//!     .description("Greets someone by name.")
//!     .read_only()
//!     .handler(|args: Greet| async move {
//!         format!("Hello, {}!", args.name)
//!     });
//! # let _ = tool;
//! ```

mod extract;
mod handler;
mod output;
mod routing;
mod schema_gen;

pub(crate) use routing::Routing;
pub use routing::{Route, Router};

use crate::tasks::TaskSupport;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde_json::{Map, Value};
use toolgate_protocol::names::validate_tool_name;
use toolgate_protocol::types::{Icon, Tool, ToolAnnotations};
use toolgate_schema::LazySchema;
use toolgate_schema::header_rules::{HeaderParam, header_params};

pub(crate) use crate::error::ErrorKind;
pub use crate::error::{RegistrationError, ToolError};
pub(crate) use extract::StateMap;
pub use extract::{Args, CallParts, FromCall, Needs, State};
#[doc(hidden)]
pub use extract::{ViaArgs, ViaContext};
pub use handler::{IntoToolResult, ToolHandler};
pub use output::{IntoToolReply, Structured, ToolReply};
pub(crate) use schema_gen::schema_for;

use crate::AuthContext;
use crate::auth::Visibility;
use crate::context::RequestContext;
use crate::rate_limit::{Limiter, RateLimit};

/// The boxed future a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<ToolReply, ToolError>> + Send>>;

/// A tool handler working on raw JSON arguments.
///
/// Implemented for closures `Fn(Map<String, Value>, RequestContext) -> impl
/// Future<Output = Result<ToolReply, ToolError>>`.
pub trait DynToolHandler: Send + Sync + 'static {
    /// Run the tool. `args` already passed the tool's `inputSchema`.
    fn call(&self, args: Map<String, Value>, ctx: RequestContext) -> HandlerFuture;
}

impl<F, Fut> DynToolHandler for F
where
    F: Fn(Map<String, Value>, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolReply, ToolError>> + Send + 'static,
{
    fn call(&self, args: Map<String, Value>, ctx: RequestContext) -> HandlerFuture {
        Box::pin((self)(args, ctx))
    }
}

/// Arguments of a tool that takes none. Its schema is
/// `{"type": "object", "additionalProperties": false}`, so only `{}` is accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

impl JsonSchema for NoArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoArgs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "object", "additionalProperties": false })
    }
}

/// A tool's description, before a handler is attached.
#[derive(Clone)]
pub struct ToolDef {
    tool: Tool,
    visibility: Option<Visibility>,
    hidden_notes: Option<HiddenNotes>,
    single_use: bool,
    raw_output: bool,
    relayed: bool,
    rate_limit: Option<RateLimit>,
    scopes: Vec<String>,
    timeout: Option<std::time::Duration>,
    tasks: TaskSupport,
    task_from_handler: bool,
    /// State types the handler's parameters ask for.
    needs_state: Vec<(std::any::TypeId, &'static str)>,
    /// What is wrong with the handler's parameters, reported at registration.
    problem: Option<String>,
    /// Listed or not; a router or not.
    routing: Routing,
}

impl ToolDef {
    /// A tool named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            tool: Tool {
                name: name.into(),
                title: None,
                description: None,
                icons: None,
                input_schema: Map::new(),
                output_schema: None,
                annotations: None,
                meta: None,
                extra: Map::new(),
            },
            visibility: None,
            hidden_notes: None,
            single_use: false,
            raw_output: false,
            relayed: false,
            rate_limit: None,
            scopes: Vec::new(),
            timeout: None,
            tasks: TaskSupport::Never,
            task_from_handler: false,
            needs_state: Vec::new(),
            problem: None,
            routing: Routing::default(),
        }
    }

    /// Whether calls run as tasks (the tasks extension; see
    /// [`crate::tasks`]). With [`TaskSupport::Optional`] or
    /// [`TaskSupport::Required`], a call from a client that declared the
    /// extension is answered at once with a task, and the handler keeps
    /// running; the client polls `tasks/get` for its result.
    ///
    /// ```
    /// use toolgate_server::tasks::TaskSupport;
    /// use toolgate_server::ToolDef;
    /// let export = ToolDef::new("export_report")
    ///     .description("Builds the monthly report; takes a few minutes.")
    ///     .task_support(TaskSupport::Optional)
    ///     .handler(|| async { "report.pdf is ready" });
    /// # let _ = export;
    /// ```
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.tasks = support;
        self
    }

    /// Start the task only when the handler calls
    /// [`RequestContext::run_as_task`](crate::RequestContext::run_as_task),
    /// rather than before it runs: input the handler asks for earlier is
    /// gathered synchronously, by multi round-trip, as the extension
    /// recommends. A handler that never calls it answers in the request.
    pub fn task_started_by_handler(mut self) -> Self {
        self.task_from_handler = true;
        self
    }

    /// A definition taken whole from a wire [`Tool`]: every field kept,
    /// schemas included, for a server that re-offers another server's
    /// tools (a gateway). Attach the handler with [`ToolDef::forward`].
    pub fn from_tool(tool: Tool) -> Self {
        Self {
            tool,
            ..Self::new(String::new())
        }
    }

    /// Rename the tool.
    pub fn rename(mut self, name: impl Into<String>) -> Self {
        self.tool.name = name.into();
        self
    }

    /// Attach a dynamic handler, keeping the schemas the definition has.
    pub fn forward(self, handler: impl DynToolHandler) -> ToolEntry {
        ToolEntry {
            def: self,
            handler: Arc::new(handler),
        }
    }

    /// Limit calls to this tool per caller, overriding the server's
    /// default ([`ServerBuilder::rate_limit`](crate::ServerBuilder::rate_limit)).
    ///
    /// ```
    /// use toolgate_server::{RateLimit, ToolDef};
    /// let tool = ToolDef::new("send_email")
    ///     .rate_limit(RateLimit::per_minute(5))
    ///     .handler(|| async { "sent" });
    /// # let _ = tool;
    /// ```
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// Send this tool's results exactly as the handler made them, without
    /// removing escape sequences and hidden characters (see
    /// [`sanitize`](toolgate_protocol::sanitize)). Only for output that must
    /// be byte-exact *and* that no model or terminal reads as instructions —
    /// for example a tool returning a terminal recording to be replayed, or
    /// text whose bidirectional marks are part of the data. Everything else
    /// should keep the default: tool output is the main path by which text
    /// nobody vetted reaches a model.
    pub fn raw_output(mut self) -> Self {
        self.raw_output = true;
        self
    }

    /// Its results are another server's, relayed as sent: `content` is
    /// left as the server made it (sanitized, unless
    /// [`raw_output`](Self::raw_output)), and `structuredContent` is not
    /// mirrored into it as text. A proxy's tools: the mirror is the
    /// originating server's to make, and a result that already has text
    /// would otherwise reach the model twice.
    pub fn relayed(mut self) -> Self {
        self.relayed = true;
        self
    }

    /// Display title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.tool.title = Some(title.into());
        self
    }

    /// What the tool does, when to use it and when not to. This is the
    /// model's main clue for choosing the tool.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.tool.description = Some(description.into());
        self
    }

    /// Add an icon.
    pub fn icon(mut self, icon: Icon) -> Self {
        self.tool.icons.get_or_insert_with(Vec::new).push(icon);
        self
    }

    /// Set all annotations at once.
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.tool.annotations = Some(annotations);
        self
    }

    fn hints(&mut self) -> &mut ToolAnnotations {
        self.tool
            .annotations
            .get_or_insert_with(ToolAnnotations::default)
    }

    /// `readOnlyHint: true`: the tool does not modify its environment.
    pub fn read_only(mut self) -> Self {
        self.hints().read_only_hint = Some(true);
        self
    }

    /// `destructiveHint`: whether updates may be destructive.
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.hints().destructive_hint = Some(destructive);
        self
    }

    /// `idempotentHint`: whether repeating a call has no further effect.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.hints().idempotent_hint = Some(idempotent);
        self
    }

    /// `openWorldHint`: whether the tool reaches an open world of external entities.
    pub fn open_world(mut self, open_world: bool) -> Self {
        self.hints().open_world_hint = Some(open_world);
        self
    }

    /// Add a `_meta` entry.
    pub fn meta(mut self, key: impl Into<String>, value: Value) -> Self {
        self.tool
            .meta
            .get_or_insert_with(Map::new)
            .insert(key.into(), value);
        self
    }

    /// Show the tool only to callers for which `rule` holds. Hidden tools are
    /// absent from `tools/list` and unknown to `tools/call`; lists of a server
    /// with such rules are `private`. A call of a hidden tool is still
    /// recorded in the server's [`CallLog`](crate::CallLog) (as
    /// [`CallOutcome::Hidden`](crate::CallOutcome::Hidden)), with the notes of
    /// [`ToolDef::hidden_notes`].
    pub fn visible_when<F>(mut self, rule: F) -> Self
    where
        F: Fn(Option<&AuthContext>) -> bool + Send + Sync + 'static,
    {
        self.visibility = Some(Arc::new(rule));
        self
    }

    /// What the call log records beside a call refused because the tool is
    /// hidden from its caller (say, which rule hid it). The caller is only
    /// told the tool is unknown.
    pub fn hidden_notes<F>(mut self, notes: F) -> Self
    where
        F: Fn(Option<&AuthContext>) -> Map<String, Value> + Send + Sync + 'static,
    {
        self.hidden_notes = Some(Arc::new(notes));
        self
    }

    /// Make each round of this tool single-use: the `requestState` of an
    /// `input_required` answer is good for one retry. A second retry with
    /// the same state is refused with an `isError` before the handler runs.
    ///
    /// Without it a round's state can be replayed, unchanged, until it
    /// expires, and each replay runs the handler again with the same
    /// answers. Turn it on for anything that spends, sends or deletes. See
    /// [`NonceStore`](crate::NonceStore) for servers of several processes.
    ///
    /// ```
    /// use toolgate_server::ToolDef;
    /// let pay = ToolDef::new("pay")
    ///     .description("Pays the basket after the user confirms.")
    ///     .single_use_rounds()
    ///     .handler(|| async { "paid" });
    /// # let _ = pay;
    /// ```
    pub fn single_use_rounds(mut self) -> Self {
        self.single_use = true;
        self
    }

    /// The scopes a caller must hold to see and call the tool. A caller
    /// without them does not find the tool in `tools/list` (whose result is
    /// then `private`), and a call is refused with
    /// [`INSUFFICIENT_SCOPE`](crate::INSUFFICIENT_SCOPE) — over HTTP a `403`
    /// whose `WWW-Authenticate` challenge names the scopes, so the client
    /// can ask for them. Access is checked on every call.
    ///
    /// ```
    /// use toolgate_server::ToolDef;
    /// let tool = ToolDef::new("delete_basket")
    ///     .scopes(["basket:write"])
    ///     .handler(|| async { "deleted" });
    /// # let _ = tool;
    /// ```
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// How long a call may run before it ends with an `isError` result and
    /// the handler is dropped (default:
    /// [`ServerConfig::call_timeout`](crate::ServerConfig::call_timeout)).
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Require `scope` (see [`ToolDef::scopes`]).
    pub fn requires_scope(self, scope: impl Into<String>) -> Self {
        self.scopes([scope.into()])
    }

    /// Attach a handler: a function or closure taking, in any order, the
    /// arguments (a `T: Deserialize + JsonSchema`, which gives the
    /// `inputSchema`; none for a tool without arguments), [`State<S>`],
    /// the [`RequestContext`], the caller's [`AuthContext`]; and returning
    /// text, [`Structured<T>`] (which gives the `outputSchema`), content,
    /// or a `Result<_, ToolError>` of one. See [`FromCall`] and
    /// [`IntoToolResult`].
    pub fn handler<M: 'static, H: ToolHandler<M>>(mut self, handler: H) -> ToolEntry {
        let needs = H::needs();
        if needs.iter().filter(|n| n.arguments).count() > 1 {
            self.problem = Some(format!(
                "tool {:?}: its handler takes the arguments twice; take one parameter for the arguments (a struct deriving Deserialize and JsonSchema) and wrap other values in State<S>",
                self.tool.name
            ));
        }
        self.needs_state = needs.iter().filter_map(|n| n.state).collect();
        self.tool.input_schema = H::input_schema().unwrap_or_else(schema_for::<NoArgs>);
        self.tool.output_schema = H::output_schema();
        ToolEntry {
            def: self,
            handler: Arc::new(handler::Handled {
                handler,
                marker: PhantomData::<fn() -> M>,
            }),
        }
    }

    /// Attach a dynamic handler with explicit schemas.
    pub fn dynamic(
        mut self,
        input_schema: Map<String, Value>,
        output_schema: Option<Map<String, Value>>,
        handler: impl DynToolHandler,
    ) -> ToolEntry {
        self.tool.input_schema = input_schema;
        self.tool.output_schema = output_schema;
        ToolEntry {
            def: self,
            handler: Arc::new(handler),
        }
    }
}

/// A tool definition with its handler, ready to register.
#[derive(Clone)]
pub struct ToolEntry {
    def: ToolDef,
    handler: Arc<dyn DynToolHandler>,
}

impl ToolEntry {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.def.tool.name
    }

    /// Check the definition and its schemas (compiling them now when
    /// `eager`, else on first use).
    pub(crate) fn compile(
        self,
        config: &crate::ServerConfig,
        states: &StateMap,
    ) -> Result<RegisteredTool, RegistrationError> {
        let (limits, eager) = (&config.schema_limits, config.eager_schemas);
        let default_rate = config.rate_limit;
        let ToolEntry { def, handler } = self;
        if let Some(problem) = def.problem {
            return Err(RegistrationError::Invalid(problem));
        }
        if let Some((_, missing)) = def.needs_state.iter().find(|(id, _)| !states.contains(*id)) {
            return Err(RegistrationError::Invalid(format!(
                "tool {:?}: its handler takes State<{missing}>, but the server has no such state; register it with ServerBuilder::state before build()",
                def.tool.name
            )));
        }
        let mut tool = def.tool;
        crate::sanitizing::tool_definition(&mut tool);
        let limiter = def
            .rate_limit
            .or(default_rate)
            .map(Limiter::new)
            .transpose()
            .map_err(|reason| crate::ConfigError::RateLimit {
                field: format!("tool {:?}", tool.name),
                reason,
            })?;
        validate_tool_name(&tool.name).map_err(|e| RegistrationError::InvalidName {
            name: tool.name.clone(),
            reason: e.to_string(),
        })?;
        if tool.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(RegistrationError::InputNotObject {
                name: tool.name.clone(),
            });
        }
        let invalid = |which: &'static str, e: &toolgate_schema::SchemaError| {
            RegistrationError::InvalidSchema {
                name: tool.name.clone(),
                which,
                reason: e.to_string(),
            }
        };
        let prepare = |which: &'static str, schema: &Map<String, Value>| {
            let lazy = LazySchema::new(Value::Object(schema.clone()), limits.clone())
                .map_err(|e| invalid(which, &e))?;
            if eager {
                lazy.get().map_err(|e| invalid(which, e))?;
            }
            Ok::<_, RegistrationError>(lazy)
        };
        let input = prepare("inputSchema", &tool.input_schema)?;
        let output = tool
            .output_schema
            .as_ref()
            .map(|s| prepare("outputSchema", s))
            .transpose()?;
        let header_params =
            header_params(&tool.input_schema).map_err(|error| RegistrationError::HeaderRule {
                name: tool.name.clone(),
                error,
            })?;
        Ok(RegisteredTool {
            tool,
            handler,
            input,
            output,
            header_params,
            sanitize: !def.raw_output,
            mirror: !def.relayed,
            limiter,
            visibility: with_scopes(def.visibility, def.scopes.clone()),
            hidden_notes: def.hidden_notes,
            single_use: def.single_use,
            required_scopes: def.scopes,
            timeout: def.timeout.unwrap_or(config.call_timeout),
            tasks: def.tasks,
            task_from_handler: def.task_from_handler,
            routing: def.routing,
        })
    }
}

/// A registered tool: definition, compiled schemas and handler.
pub(crate) struct RegisteredTool {
    pub(crate) tool: Tool,
    pub(crate) handler: Arc<dyn DynToolHandler>,
    pub(crate) input: LazySchema,
    pub(crate) output: Option<LazySchema>,
    /// Parameters mirrored into `Mcp-Param-*` headers.
    pub(crate) header_params: Vec<HeaderParam>,
    pub(crate) visibility: Option<Visibility>,
    /// Notes recorded with a call its visibility rule refused.
    pub(crate) hidden_notes: Option<HiddenNotes>,
    /// Each round's state is good for one retry.
    pub(crate) single_use: bool,
    /// Whether results are sanitized (all but [`ToolDef::raw_output`] tools).
    pub(crate) sanitize: bool,
    /// Whether `structuredContent` is mirrored as text (all but
    /// [`ToolDef::relayed`] tools).
    pub(crate) mirror: bool,
    /// Calls per caller, if limited.
    pub(crate) limiter: Option<Limiter>,
    /// Scopes a caller must hold ([`ToolDef::scopes`]).
    pub(crate) required_scopes: Vec<String>,
    /// How long one call may run (a task: its lifetime instead).
    pub(crate) timeout: std::time::Duration,
    /// Whether calls run as tasks.
    pub(crate) tasks: TaskSupport,
    /// The handler starts the task itself.
    pub(crate) task_from_handler: bool,
    /// Listed or not; a router or not.
    pub(crate) routing: Routing,
}

/// What the call log records of a call hidden from its caller.
pub(crate) type HiddenNotes = Arc<dyn Fn(Option<&AuthContext>) -> Map<String, Value> + Send + Sync>;

/// `rule` narrowed to callers holding every one of `scopes`.
fn with_scopes(rule: Option<Visibility>, scopes: Vec<String>) -> Option<Visibility> {
    if scopes.is_empty() {
        return rule;
    }
    Some(Arc::new(move |auth: Option<&AuthContext>| {
        auth.is_some_and(|a| a.has_scopes(&scopes)) && rule.as_ref().is_none_or(|r| r(auth))
    }))
}

impl crate::registry::Listed for RegisteredTool {
    type Wire = Tool;
    fn key(&self) -> &str {
        &self.tool.name
    }
    fn visibility(&self) -> Option<&Visibility> {
        self.visibility.as_ref()
    }
    fn wire(&self) -> &Tool {
        &self.tool
    }
}
