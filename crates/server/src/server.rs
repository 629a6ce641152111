//! The server: configuration, registration, and the entry points transports call.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolgate_protocol::meta::SERVER_INFO;
use toolgate_protocol::types::{Implementation, Meta};

use crate::ConfigError;
use crate::prompt::PromptEntry;
use crate::rate_limit::RateLimit;
use crate::registry::{Catalog, Change, ChangeBus};
use crate::resource::{ResourceEntry, TemplateEntry};
use crate::state::{StateKey, StateKeys};
use crate::tool::{RegisteredTool, RegistrationError, ToolEntry};

/// Tunables, with safe defaults.
///
/// Start from [`ServerConfig::default`] and change what you need, with the
/// `with_*` methods or by assigning fields (new fields may come in a minor
/// release, so it cannot be built as a struct literal outside this crate):
///
/// ```
/// use std::time::Duration;
/// use toolgate_server::ServerConfig;
/// let config = ServerConfig::default()
///     .with_page_size(100)
///     .with_call_timeout(Duration::from_secs(30));
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Items per page of every `*/list` result. Default 1000: pages are
    /// served from bytes serialized once, so a page costs the server the
    /// same whatever its size, while every extra page costs the client a
    /// round trip. 1000 typical tools are about 250 KiB.
    pub page_size: usize,
    /// `ttlMs` of list results.
    pub list_ttl: Duration,
    /// `ttlMs` of `server/discover`.
    pub discover_ttl: Duration,
    /// `ttlMs` of `resources/read`.
    pub read_ttl: Duration,
    /// How long stdio waits for in-flight requests after end of input.
    pub shutdown_grace: Duration,
    /// How long a `requestState` stays valid.
    pub state_ttl: Duration,
    /// Encrypt `requestState` (XChaCha20-Poly1305) rather than only sign it.
    /// Signed state (the default) cannot be altered but can be *read* by the
    /// client: earlier answers and remembered data travel in it as base64
    /// JSON. Turn this on when they may hold anything the client should not
    /// see. Default `false`. Needs the feature `state-encryption` (on by
    /// default): without it, [`ServerConfig::validate`] refuses `true`.
    pub encrypt_state: bool,
    /// Calls allowed per caller per tool, for tools without a limit of
    /// their own ([`ToolDef::rate_limit`](crate::ToolDef::rate_limit)).
    /// Default `None`: unlimited.
    pub rate_limit: Option<RateLimit>,
    /// Bounds on tool schemas (checked at registration) and on the
    /// arguments and results validated against them.
    pub schema_limits: toolgate_schema::Limits,
    /// Compile every tool schema at registration, so that a schema the
    /// validator rejects fails [`ServerBuilder::build`] /
    /// [`Server::add_tool`]. Default `false`: registration checks the
    /// dialect and the limits, and each schema is compiled on the tool's
    /// first call (a server with many tools starts at once and keeps only
    /// the validators it uses). Turn it on in a test to catch a broken
    /// hand-written schema before it ships.
    pub eager_schemas: bool,
    /// Also serve legacy clients: answer `initialize` (negotiating 2025-11-25,
    /// 2025-06-18 or 2025-03-26) and keep a session for each of them, next
    /// to stateless modern service. Default `true`; when `false`,
    /// `initialize` is refused with an error naming the supported versions.
    pub legacy: bool,
    /// A legacy HTTP session not used for this long is ended (its client
    /// gets `404` and starts a new one). Default 30 min.
    pub legacy_idle: Duration,
    /// At most this many legacy HTTP sessions are kept; a new one ends the
    /// least recently used. Default 1024.
    pub max_legacy_sessions: usize,
    /// At most this many of them belong to one principal (unauthenticated
    /// callers count as one): a principal over its share loses its own least
    /// recently used session, never another's. Default 64.
    pub max_legacy_sessions_per_principal: usize,
    /// How long one tool call may run. A call still running then ends with
    /// an `isError` result saying so, and its handler is dropped (cancelled
    /// at its next `.await`). Default 5 min; per tool:
    /// [`ToolDef::timeout`](crate::ToolDef::timeout).
    pub call_timeout: Duration,
    /// How long a task is kept after it is created (its `ttlMs`); its work
    /// is stopped when this ends. `None`: kept until the server stops.
    /// Default 1 h.
    pub task_ttl: Option<Duration>,
    /// The polling interval tasks suggest (`pollIntervalMs`). Default 500 ms.
    pub task_poll_interval: Duration,
    /// At most this many tasks are kept at once, running or finished; a
    /// call to a task tool beyond it is refused with an `isError` saying
    /// so. Default 10 000.
    pub max_tasks: usize,
    /// At most this many of them belong to one caller (unauthenticated
    /// callers count as one). Default 1000.
    pub max_tasks_per_caller: usize,
}

impl ServerConfig {
    /// Set [`ServerConfig::page_size`].
    pub fn with_page_size(mut self, value: usize) -> Self {
        self.page_size = value;
        self
    }

    /// Set [`ServerConfig::list_ttl`].
    pub fn with_list_ttl(mut self, value: Duration) -> Self {
        self.list_ttl = value;
        self
    }

    /// Set [`ServerConfig::discover_ttl`].
    pub fn with_discover_ttl(mut self, value: Duration) -> Self {
        self.discover_ttl = value;
        self
    }

    /// Set [`ServerConfig::read_ttl`].
    pub fn with_read_ttl(mut self, value: Duration) -> Self {
        self.read_ttl = value;
        self
    }

    /// Set [`ServerConfig::shutdown_grace`].
    pub fn with_shutdown_grace(mut self, value: Duration) -> Self {
        self.shutdown_grace = value;
        self
    }

    /// Set [`ServerConfig::state_ttl`].
    pub fn with_state_ttl(mut self, value: Duration) -> Self {
        self.state_ttl = value;
        self
    }

    /// Set [`ServerConfig::encrypt_state`].
    pub fn with_encrypt_state(mut self, value: bool) -> Self {
        self.encrypt_state = value;
        self
    }

    /// Set [`ServerConfig::rate_limit`].
    pub fn with_rate_limit(mut self, value: Option<RateLimit>) -> Self {
        self.rate_limit = value;
        self
    }

    /// Set [`ServerConfig::schema_limits`].
    pub fn with_schema_limits(mut self, value: toolgate_schema::Limits) -> Self {
        self.schema_limits = value;
        self
    }

    /// Set [`ServerConfig::eager_schemas`].
    pub fn with_eager_schemas(mut self, value: bool) -> Self {
        self.eager_schemas = value;
        self
    }

    /// Set [`ServerConfig::legacy`].
    pub fn with_legacy(mut self, value: bool) -> Self {
        self.legacy = value;
        self
    }

    /// Set [`ServerConfig::legacy_idle`].
    pub fn with_legacy_idle(mut self, value: Duration) -> Self {
        self.legacy_idle = value;
        self
    }

    /// Set [`ServerConfig::max_legacy_sessions`].
    pub fn with_max_legacy_sessions(mut self, value: usize) -> Self {
        self.max_legacy_sessions = value;
        self
    }

    /// Set [`ServerConfig::max_legacy_sessions_per_principal`].
    pub fn with_max_legacy_sessions_per_principal(mut self, value: usize) -> Self {
        self.max_legacy_sessions_per_principal = value;
        self
    }

    /// Set [`ServerConfig::call_timeout`].
    pub fn with_call_timeout(mut self, value: Duration) -> Self {
        self.call_timeout = value;
        self
    }

    /// Set [`ServerConfig::task_ttl`].
    pub fn with_task_ttl(mut self, value: Option<Duration>) -> Self {
        self.task_ttl = value;
        self
    }

    /// Set [`ServerConfig::task_poll_interval`].
    pub fn with_task_poll_interval(mut self, value: Duration) -> Self {
        self.task_poll_interval = value;
        self
    }

    /// Set [`ServerConfig::max_tasks`].
    pub fn with_max_tasks(mut self, value: usize) -> Self {
        self.max_tasks = value;
        self
    }

    /// Set [`ServerConfig::max_tasks_per_caller`].
    pub fn with_max_tasks_per_caller(mut self, value: usize) -> Self {
        self.max_tasks_per_caller = value;
        self
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            page_size: 1000,
            list_ttl: Duration::from_secs(300),
            discover_ttl: Duration::from_secs(3600),
            read_ttl: Duration::ZERO,
            shutdown_grace: Duration::from_secs(5),
            state_ttl: Duration::from_secs(600),
            encrypt_state: false,
            rate_limit: None,
            schema_limits: toolgate_schema::Limits::default(),
            eager_schemas: false,
            legacy: true,
            legacy_idle: Duration::from_secs(30 * 60),
            max_legacy_sessions: 1024,
            max_legacy_sessions_per_principal: 64,
            call_timeout: Duration::from_secs(300),
            task_ttl: Some(Duration::from_secs(3600)),
            task_poll_interval: Duration::from_millis(500),
            max_tasks: 10_000,
            max_tasks_per_caller: 1000,
        }
    }
}

impl ServerConfig {
    /// Refuse values that would make the server useless or panic later:
    /// zero pages, a `requestState` that expires at once, zero legacy
    /// sessions while legacy service is on, zero schema bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let zero = |field: &'static str, why: &'static str| Err(ConfigError::Zero { field, why });
        if self.page_size == 0 {
            return zero("page_size", "a list page must hold at least one item");
        }
        if self.encrypt_state && !cfg!(feature = "state-encryption") {
            return Err(ConfigError::MissingFeature {
                setting: "encrypt_state",
                feature: "state-encryption",
            });
        }
        if self.state_ttl.is_zero() {
            return zero(
                "state_ttl",
                "every requestState would expire before the client could retry",
            );
        }
        if self.legacy && self.max_legacy_sessions == 0 {
            return zero(
                "max_legacy_sessions",
                "legacy clients could never open a session (turn legacy off instead)",
            );
        }
        if self.legacy && self.max_legacy_sessions_per_principal == 0 {
            return zero(
                "max_legacy_sessions_per_principal",
                "no caller could ever open a legacy session",
            );
        }
        if self.call_timeout.is_zero() {
            return zero("call_timeout", "every tool call would time out at once");
        }
        if self.task_ttl.is_some_and(|t| t.is_zero()) {
            return zero("task_ttl", "every task would expire before its first poll");
        }
        if self.max_tasks == 0 || self.max_tasks_per_caller == 0 {
            return zero(
                "max_tasks or max_tasks_per_caller",
                "no task could ever be created",
            );
        }
        if self.legacy && self.legacy_idle.is_zero() {
            return zero("legacy_idle", "every legacy session would end at once");
        }
        if let Some(limit) = &self.rate_limit {
            limit.quota().map_err(|reason| ConfigError::RateLimit {
                field: "rate_limit".into(),
                reason,
            })?;
        }
        let l = &self.schema_limits;
        for (name, value) in [
            ("schema_limits.max_schema_depth", l.max_schema_depth),
            ("schema_limits.max_subschemas", l.max_subschemas),
            (
                "schema_limits.max_expanded_subschemas",
                l.max_expanded_subschemas,
            ),
            ("schema_limits.max_schema_bytes", l.max_schema_bytes),
            ("schema_limits.max_instance_depth", l.max_instance_depth),
            ("schema_limits.max_instance_bytes", l.max_instance_bytes),
        ] {
            if value == 0 {
                return zero(name, "no schema or no argument could pass it");
            }
        }
        Ok(())
    }
}

pub(crate) struct Inner {
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) config: ServerConfig,
    pub(crate) tools: Catalog<RegisteredTool>,
    /// Tools callable but never listed ([`ToolDef::unlisted`](crate::ToolDef::unlisted)); their bus
    /// has no listener, so they announce no change.
    pub(crate) unlisted: Catalog<RegisteredTool>,
    pub(crate) prompts: Catalog<PromptEntry>,
    pub(crate) resources: Catalog<ResourceEntry>,
    pub(crate) templates: Catalog<TemplateEntry>,
    pub(crate) prompts_enabled: bool,
    pub(crate) resources_enabled: bool,
    pub(crate) completions_enabled: bool,
    pub(crate) bus: ChangeBus,
    pub(crate) shutdown: CancellationToken,
    /// Seals and opens `requestState`.
    pub(crate) state_keys: StateKeys,
    /// `_meta` of every result: the server's identity.
    pub(crate) result_meta: Meta,
    /// `"resultType":"complete","_meta":{…}` serialized once, to close
    /// results that carry neither.
    pub(crate) stamp_tail: Vec<u8>,
    /// Answers calls to tools that are not registered.
    pub(crate) unlisted_answer: Option<UnlistedAnswer>,
    /// Every request's rounds are single-use ([`ServerBuilder::single_use_rounds`]).
    pub(crate) single_use_rounds: bool,
    /// Where single-use rounds are spent.
    pub(crate) nonces: Arc<dyn crate::NonceStore>,
    /// Where tool calls are recorded.
    pub(crate) call_log: Option<Arc<dyn crate::CallLog>>,
    /// Tool calls running as tasks.
    pub(crate) tasks: crate::tasks::Tasks,
    /// Shared state handed to handlers ([`ServerBuilder::state`]).
    pub(crate) states: Arc<crate::tool::StateMap>,
    /// `ttlMs` of list results now, in milliseconds (from
    /// `config.list_ttl`, or [`Server::set_list_hints`]).
    pub(crate) list_ttl_ms: std::sync::atomic::AtomicU64,
    /// Every list result says `cacheScope: "private"`.
    pub(crate) lists_private: std::sync::atomic::AtomicBool,
}

fn stamp_tail(result_meta: &Meta) -> Vec<u8> {
    let mut tail = crate::dispatch::STAMP_RESULT_TYPE.to_vec();
    tail.extend_from_slice(b"\"_meta\":");
    // A map of JSON values always serializes.
    let _ = serde_json::to_writer(&mut tail, result_meta);
    tail
}

/// An MCP server. Cheap to clone; clones share registrations.
///
/// ```
/// use toolgate_server::{Server, ToolDef};
///
/// let server = Server::builder("demo", "1.0.0")
///     .instructions("Use get_current_time for the time.")
///     .tool(
///         ToolDef::new("get_current_time")
///             .description("Returns the server's current time (UTC, RFC 3339).")
///             .read_only()
///             .handler(|| async {
///                 "2026-07-28T00:00:00Z"
///             }),
///     )
///     .build()
///     .unwrap();
/// # let _ = server;
/// ```
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

/// What the builder's own setters said, applied over [`ServerBuilder::config`]
/// at build, so their order does not matter.
#[derive(Default)]
struct Overrides {
    page_size: Option<usize>,
    rate_limit: Option<RateLimit>,
    encrypt_state: bool,
    eager_schemas: bool,
    no_legacy: bool,
}

impl Overrides {
    fn apply(self, config: &mut ServerConfig) {
        if let Some(page_size) = self.page_size {
            config.page_size = page_size;
        }
        if let Some(limit) = self.rate_limit {
            config.rate_limit = Some(limit);
        }
        config.encrypt_state |= self.encrypt_state;
        config.eager_schemas |= self.eager_schemas;
        if self.no_legacy {
            config.legacy = false;
        }
    }
}

/// Builds a [`Server`].
pub struct ServerBuilder {
    info: Implementation,
    instructions: Option<String>,
    config: ServerConfig,
    overrides: Overrides,
    tools: Vec<ToolEntry>,
    prompts: Vec<PromptEntry>,
    resources: Vec<ResourceEntry>,
    templates: Vec<TemplateEntry>,
    enable_prompts: bool,
    enable_resources: bool,
    state_key: Option<StateKey>,
    retired_state_keys: Vec<StateKey>,
    unlisted_answer: Option<UnlistedAnswer>,
    single_use_rounds: bool,
    nonces: Option<Arc<dyn crate::NonceStore>>,
    tools_in_name_order: bool,
    enable_completions: bool,
    call_log: Option<Arc<dyn crate::CallLog>>,
    task_store: Option<Arc<dyn crate::tasks::TaskStore>>,
    states: crate::tool::StateMap,
}

/// What a call to a tool the server does not offer is answered with,
/// instead of "Unknown tool" (see [`ServerBuilder::unlisted_answer`]).
pub type UnlistedAnswer = Arc<dyn Fn(&str) -> Option<Withheld> + Send + Sync>;

/// The answer to a call of a tool the server knows but does not offer: the
/// `isError` text, and facts for the call's record (see
/// [`RequestContext::note`](crate::RequestContext::note)).
///
/// ```
/// use toolgate_server::Withheld;
/// let plain: Withheld = "withheld: its definition changed".to_owned().into();
/// assert!(plain.notes.is_empty());
/// let noted = Withheld::new("denied by policy").note("decision", "deny");
/// assert_eq!(noted.notes["decision"], "deny");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Withheld {
    /// What the caller is told.
    pub text: String,
    /// What the call log records beside the outcome.
    pub notes: Map<String, Value>,
}

impl Withheld {
    /// A refusal saying `text`, with no notes.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            notes: Map::new(),
        }
    }

    /// Record `value` under `key` with the call.
    pub fn note(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.notes.insert(key.to_owned(), value.into());
        self
    }
}

impl From<String> for Withheld {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl Server {
    /// Whether `other` is this server (a clone of it), not another built
    /// alike.
    pub fn same(&self, other: &Server) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Server {
    /// Start building a server that identifies as `name` `version`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder {
            info: Implementation::new(name, version),
            instructions: None,
            config: ServerConfig::default(),
            overrides: Overrides::default(),
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            enable_prompts: false,
            unlisted_answer: None,
            single_use_rounds: false,
            nonces: None,
            call_log: None,
            task_store: None,
            states: crate::tool::StateMap::default(),
            tools_in_name_order: false,
            enable_completions: false,
            enable_resources: false,
            state_key: None,
            retired_state_keys: Vec::new(),
        }
    }

    /// Change the caching hints of every list result from now on: `ttlMs`
    /// and, when `private`, `cacheScope: "private"` (else public unless a
    /// list depends on the caller). A gateway passes on its upstreams'
    /// strictest hints this way.
    pub fn set_list_hints(&self, ttl: Duration, private: bool) {
        use std::sync::atomic::Ordering;
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.inner.list_ttl_ms.store(ms, Ordering::Relaxed);
        self.inner.lists_private.store(private, Ordering::Relaxed);
    }

    /// Register a tool on the running server; open `subscriptions/listen`
    /// streams that asked for `toolsListChanged` are told.
    pub fn add_tool(&self, entry: ToolEntry) -> Result<(), RegistrationError> {
        let config = &self.inner.config;
        let tool = entry.compile(config, &self.inner.states)?;
        if tool.tasks != crate::tasks::TaskSupport::Never {
            self.inner.tasks.enable();
        }
        // One name, one tool, listed or not.
        let (home, other) = if tool.routing.unlisted {
            (&self.inner.unlisted, &self.inner.tools)
        } else {
            (&self.inner.tools, &self.inner.unlisted)
        };
        if other.get_hidden(&tool.tool.name).is_some() {
            return Err(RegistrationError::Duplicate(tool.tool.name.clone()));
        }
        home.insert(tool)
            .map_err(|t| RegistrationError::Duplicate(t.tool.name.clone()))
    }

    /// Remove a tool, listed or not; whether it existed.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.inner.tools.remove(name) || self.inner.unlisted.remove(name)
    }

    /// Register a prompt on the running server.
    pub fn add_prompt(&self, mut entry: PromptEntry) -> Result<(), RegistrationError> {
        crate::sanitizing::prompt_definition(&mut entry.prompt);
        let name = entry.prompt.name.clone();
        self.inner.prompts.insert(entry).map_err(|_| {
            RegistrationError::Invalid(format!("a prompt named {name:?} is already registered"))
        })
    }

    /// Remove a prompt; whether it existed.
    pub fn remove_prompt(&self, name: &str) -> bool {
        self.inner.prompts.remove(name)
    }

    /// Register a resource on the running server (the server must have been
    /// built with resources enabled for clients to see the capability).
    pub fn add_resource(&self, mut entry: ResourceEntry) -> Result<(), RegistrationError> {
        crate::sanitizing::resource_definition(&mut entry.resource);
        let uri = entry.resource.uri.clone();
        self.inner.resources.insert(entry).map_err(|_| {
            RegistrationError::Invalid(format!("a resource with URI {uri:?} is already registered"))
        })
    }

    /// Remove a resource; whether it existed.
    pub fn remove_resource(&self, uri: &str) -> bool {
        self.inner.resources.remove(uri)
    }

    /// Register a resource template on the running server.
    pub fn add_template(&self, mut entry: TemplateEntry) -> Result<(), RegistrationError> {
        crate::sanitizing::template_definition(&mut entry.template);
        if let Some(why) = entry.problem() {
            return Err(RegistrationError::Invalid(why));
        }
        let t = entry.template.uri_template.clone();
        self.inner.templates.insert(entry).map_err(|_| {
            RegistrationError::Invalid(format!("a resource template {t:?} is already registered"))
        })
    }

    /// Remove a resource template; whether it existed.
    pub fn remove_template(&self, uri_template: &str) -> bool {
        self.inner.templates.remove(uri_template)
    }

    /// Tell subscribers that the contents of `uri` changed.
    pub fn notify_resource_updated(&self, uri: &str) {
        self.inner.bus.publish(Change::ResourceUpdated(uri.into()));
    }

    /// The server's identity.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// Names of the registered tools, in list order.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner
            .tools
            .visible_all()
            .into_iter()
            .map(|t| t.tool.name.clone())
            .collect()
    }

    /// How many `subscriptions/listen` streams are open right now.
    pub fn open_subscriptions(&self) -> usize {
        self.inner.bus.receivers()
    }

    /// Begin shutting down: open subscriptions end gracefully.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Resolves once [`Server::shutdown`] was called.
    pub async fn shutting_down(&self) {
        self.inner.shutdown.cancelled().await
    }
}

impl Catalog<RegisteredTool> {
    fn visible_all(&self) -> Vec<Arc<RegisteredTool>> {
        // Every tool regardless of visibility: used for introspection only.
        self.visible_with(|_| true)
    }
}

impl ServerBuilder {
    /// Display title of the server.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info.title = Some(title.into());
        self
    }

    /// Description of the server (in its `serverInfo`).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.info.description = Some(description.into());
        self
    }

    /// Guidance for the model, returned by `server/discover`.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Start from `config`. The builder's own settings
    /// ([`page_size`](Self::page_size), [`rate_limit`](Self::rate_limit),
    /// [`encrypt_state`](Self::encrypt_state),
    /// [`eager_schemas`](Self::eager_schemas), [`modern_only`](Self::modern_only))
    /// win over it, whether they come before or after:
    ///
    /// ```
    /// use toolgate_server::{Server, ServerConfig};
    /// let server = Server::builder("s", "1")
    ///     .page_size(5)
    ///     .config(ServerConfig::default().with_page_size(50))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(server.config().page_size, 5);
    /// ```
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Items per list page (at least 1; zero is refused by `build()`).
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.overrides.page_size = Some(page_size);
        self
    }

    /// Add a tool.
    pub fn tool(mut self, entry: ToolEntry) -> Self {
        self.tools.push(entry);
        self
    }

    /// Add several tools (for example those `#[toolgate_server::tools]`
    /// generates: `.tools(Arc::new(shop).tools())`).
    pub fn tools(mut self, entries: impl IntoIterator<Item = ToolEntry>) -> Self {
        self.tools.extend(entries);
        self
    }

    /// Add a prompt.
    pub fn prompt(mut self, entry: PromptEntry) -> Self {
        self.prompts.push(entry);
        self
    }

    /// Add a resource.
    pub fn resource(mut self, entry: ResourceEntry) -> Self {
        self.resources.push(entry);
        self
    }

    /// Add a resource template.
    pub fn resource_template(mut self, entry: TemplateEntry) -> Self {
        self.templates.push(entry);
        self
    }

    /// The key that seals `requestState`. Give every process serving the
    /// same clients the same key so multi-round flows can continue on any
    /// of them; by default each server draws a random key.
    pub fn state_key(mut self, key: StateKey) -> Self {
        self.state_key = Some(key);
        self
    }

    /// A key the server no longer seals with but still opens with, so flows
    /// in flight finish after [`ServerBuilder::state_key`] changed. Drop it
    /// once [`ServerConfig::state_ttl`] has passed since the change.
    pub fn retired_state_key(mut self, key: StateKey) -> Self {
        self.retired_state_keys.push(key);
        self
    }

    /// Limit calls to every tool per caller (see [`ServerConfig::rate_limit`]).
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.overrides.rate_limit = Some(limit);
        self
    }

    /// Encrypt `requestState` (see [`ServerConfig::encrypt_state`]; feature
    /// `state-encryption`, on by default).
    #[cfg(feature = "state-encryption")]
    pub fn encrypt_state(mut self) -> Self {
        self.overrides.encrypt_state = true;
        self
    }

    /// Declare the prompts capability even with no prompt registered yet
    /// (for servers that add prompts at run time).
    pub fn enable_prompts(mut self) -> Self {
        self.enable_prompts = true;
        self
    }

    /// Declare the resources capability even with no resource registered yet.
    pub fn enable_resources(mut self) -> Self {
        self.enable_resources = true;
        self
    }

    /// Compile every tool schema in [`ServerBuilder::build`] rather than on
    /// each tool's first call (see [`ServerConfig::eager_schemas`]).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate_server::{Server, ToolDef, ToolReply};
    ///
    /// let broken = json!({"type": "object", "minProperties": "many"});
    /// let tool = ToolDef::new("t").dynamic(broken.as_object().cloned().unwrap(), None, |_, _| async {
    ///     Ok(ToolReply::Complete(Default::default()))
    /// });
    /// assert!(Server::builder("s", "1").eager_schemas().tool(tool).build().is_err());
    /// ```
    pub fn eager_schemas(mut self) -> Self {
        self.overrides.eager_schemas = true;
        self
    }

    /// Serve modern (2026-07-28) clients only: `initialize` is refused with
    /// an error naming the supported versions.
    pub fn modern_only(mut self) -> Self {
        self.overrides.no_legacy = true;
        self
    }

    /// Serve `completion/complete` even when no prompt or template
    /// registered at build time completes (for ones added later).
    pub fn enable_completions(mut self) -> Self {
        self.enable_completions = true;
        self
    }

    /// List tools in name order rather than registration order, so that
    /// servers registering the same tools in different orders (gateway
    /// instances following upstream changes) list them identically.
    pub fn tools_in_name_order(mut self) -> Self {
        self.tools_in_name_order = true;
        self
    }

    /// Answer a call to a tool that is not registered with an `isError`
    /// result carrying `answer(name)`'s text, when it returns one (else the
    /// call is the usual "Unknown tool" protocol error). A gateway says
    /// why a tool it knows is withheld or unavailable this way, instead of
    /// claiming it does not exist.
    pub fn unlisted_answer<W: Into<Withheld>>(
        mut self,
        answer: impl Fn(&str) -> Option<W> + Send + Sync + 'static,
    ) -> Self {
        self.unlisted_answer = Some(Arc::new(move |name| answer(name).map(Into::into)));
        self
    }

    /// Make every round this server seals single-use — tools, prompts and
    /// resources alike: a `requestState` is good for one retry, and a
    /// second retry with it is refused before anything runs (see
    /// [`NonceStore`](crate::NonceStore); per tool:
    /// [`ToolDef::single_use_rounds`](crate::ToolDef::single_use_rounds)).
    /// A gateway wants this: each round it relays is forwarded once.
    pub fn single_use_rounds(mut self) -> Self {
        self.single_use_rounds = true;
        self
    }

    /// Spend single-use rounds in `store` instead of this process's memory,
    /// so that processes sharing the state key refuse each other's replays.
    pub fn nonce_store(mut self, store: Arc<dyn crate::NonceStore>) -> Self {
        self.nonces = Some(store);
        self
    }

    /// Record every tool call in `log` before its answer is sent (see
    /// [`CallLog`](crate::CallLog)).
    pub fn call_log(mut self, log: Arc<dyn crate::CallLog>) -> Self {
        self.call_log = Some(log);
        self
    }

    /// Share `state` with every handler that takes a [`State<S>`](crate::State)
    /// of its type (or calls [`RequestContext::state`](crate::RequestContext::state)).
    /// Each handler gets a clone, so wrap anything large or mutable in an
    /// `Arc`. One value per type; a second replaces the first.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use toolgate_server::{Server, State, ToolDef};
    ///
    /// let hits = Arc::new(AtomicU64::new(0));
    /// let server = Server::builder("counter", "1")
    ///     .state(hits)
    ///     .tool(ToolDef::new("hit").description("Counts calls.").handler(
    ///         |State(hits): State<Arc<AtomicU64>>| async move {
    ///             format!("call {}", hits.fetch_add(1, Ordering::Relaxed) + 1)
    ///         },
    ///     ))
    ///     .build()
    ///     .unwrap();
    /// # let _ = server;
    /// ```
    pub fn state<S: Clone + Send + Sync + 'static>(mut self, state: S) -> Self {
        self.states.insert(state);
        self
    }

    /// Keep task state in `store` rather than in this process's memory
    /// (see [`TaskStore`](crate::tasks::TaskStore)).
    pub fn task_store(mut self, store: Arc<dyn crate::tasks::TaskStore>) -> Self {
        self.task_store = Some(store);
        self
    }

    /// Check every registration and build the server. The first invalid
    /// registration is returned as the error.
    pub fn build(mut self) -> Result<Server, RegistrationError> {
        std::mem::take(&mut self.overrides).apply(&mut self.config);
        self.config.validate()?;
        let state_keys = StateKeys::new(
            self.state_key.unwrap_or_else(StateKey::random),
            self.retired_state_keys,
            self.config.encrypt_state,
        )
        .map_err(crate::ConfigError::StateKey)?;
        let bus = ChangeBus::default();
        let list_ttl_ms = u64::try_from(self.config.list_ttl.as_millis()).unwrap_or(u64::MAX);
        let mut result_meta = Map::new();
        result_meta.insert(
            SERVER_INFO.into(),
            serde_json::to_value(&self.info).unwrap_or(Value::Null),
        );
        let tasks = crate::tasks::Tasks::new(
            self.task_store
                .unwrap_or_else(|| Arc::new(crate::tasks::MemoryTaskStore::new())),
            &self.config,
        );
        let state_ttl = self.config.state_ttl;
        let inner = Inner {
            prompts_enabled: self.enable_prompts || !self.prompts.is_empty(),
            resources_enabled: self.enable_resources
                || !self.resources.is_empty()
                || !self.templates.is_empty(),
            completions_enabled: self.enable_completions
                || self.prompts.iter().any(|p| p.completer.is_some())
                || self.templates.iter().any(|t| t.completer.is_some()),
            tools: if self.tools_in_name_order {
                Catalog::new(bus.clone(), Change::ToolsListChanged).sorted()
            } else {
                Catalog::new(bus.clone(), Change::ToolsListChanged)
            },
            unlisted: Catalog::new(ChangeBus::default(), Change::ToolsListChanged),
            prompts: Catalog::new(bus.clone(), Change::PromptsListChanged),
            resources: Catalog::new(bus.clone(), Change::ResourcesListChanged),
            templates: Catalog::new(bus.clone(), Change::ResourcesListChanged),
            info: self.info,
            instructions: self.instructions,
            config: self.config,
            bus,
            shutdown: CancellationToken::new(),
            state_keys,
            stamp_tail: stamp_tail(&result_meta),
            result_meta,
            unlisted_answer: self.unlisted_answer,
            single_use_rounds: self.single_use_rounds,
            // A state is refused once expired, so its nonce need not be
            // kept longer (twice, for clock steps).
            nonces: self
                .nonces
                .unwrap_or_else(|| Arc::new(crate::MemoryNonceStore::new(state_ttl * 2))),
            call_log: self.call_log,
            tasks,
            states: Arc::new(self.states),
            list_ttl_ms: std::sync::atomic::AtomicU64::new(list_ttl_ms),
            lists_private: std::sync::atomic::AtomicBool::new(false),
        };
        let server = Server {
            inner: Arc::new(inner),
        };
        for tool in self.tools {
            server.add_tool(tool)?;
        }
        for prompt in self.prompts {
            server.add_prompt(prompt)?;
        }
        for resource in self.resources {
            server.add_resource(resource)?;
        }
        for template in self.templates {
            server.add_template(template)?;
        }
        Ok(server)
    }
}
