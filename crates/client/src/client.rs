//! The client: one server, any transport.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_protocol::jsonrpc::encode_request;
use toolgate_protocol::methods::{self, Method, Paginated};
use toolgate_protocol::types::{
    CallToolResult, ClientCapabilities, DiscoverResult, GetPromptRequestParams, GetPromptResult,
    Implementation, LoggingLevel, LoggingMessageNotificationParams, ProgressNotificationParams,
    ReadResourceRequestParams, ReadResourceResult, Tool,
};
use toolgate_protocol::version::MODERN_VERSIONS;
use toolgate_protocol::{RequestId, RpcError, codes};
use toolgate_schema::CompiledSchema;
use toolgate_schema::header_rules::{HeaderParam, header_params};

use crate::ClientError;
use crate::cache::{Lookup, PageCache};
use crate::envelope::{MetaText, RequestMeta, WithMeta};
use crate::input::{Approval, ApprovalRequest, BoxFuture, InputHandler, NoInput, classify};
use crate::transport::{Answer, Inbound, Outgoing, Transport, TransportKind};

mod era;
mod rounds;
mod tasks;

pub use rounds::{CallEnd, CallRound, Round, RoundInput};
pub use tasks::{CallStart, TaskFn, TaskGuard, TaskUpdates, suggested_poll, task_outcome};

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(&ProgressNotificationParams) + Send + Sync>;

/// Per-call options.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Overrides the client's default timeout.
    pub timeout: Option<Duration>,
    /// Receives `notifications/progress` for the call.
    pub progress: Option<ProgressFn>,
    /// Declare these capabilities for this request instead of the
    /// client's own: a gateway passes on its caller's, so the server asks
    /// only for what the person at the other end can give. Ignored by a
    /// legacy server, which learned the client's at `initialize`.
    pub capabilities: Option<ClientCapabilities>,
    /// Ask for the server's log messages at this level and above
    /// (`io.modelcontextprotocol/logLevel`); they go to `log`.
    pub log_level: Option<LoggingLevel>,
    /// Receives `notifications/message` for the call.
    pub log: Option<LogFn>,
    /// Answers a legacy server's requests (`elicitation/create`,
    /// `sampling/createMessage`, `roots/list`) sent while this call runs,
    /// instead of the client's input handler: a gateway passes them on to
    /// its own caller. Over HTTP a request belongs to the call whose
    /// response stream carried it; over stdio, where nothing on the wire
    /// says which call asks, it goes here only while this is the one call
    /// in flight with such a handler (otherwise the input handler answers).
    pub questions: Option<QuestionFn>,
    /// Receives each state of the task a call runs as (the tasks
    /// extension; see [`ClientBuilder::tasks`]): status and status message.
    pub on_task: Option<TaskFn>,
    /// W3C trace context sent in `_meta` (`traceparent`, `tracestate`,
    /// `baggage`), so the server's spans join the caller's trace.
    pub trace: Option<toolgate_protocol::trace::TraceContext>,
    /// Send the request with this access token rather than the
    /// transport's own credentials (HTTP): a gateway acting for its caller
    /// at an upstream. A `401` or `403` then ends the call with
    /// [`ClientError::LoginRequired`] or [`ClientError::Authorization`];
    /// the transport's own OAuth is not tried in its place.
    pub bearer: Option<crate::transport::Bearer>,
}

/// Answers one request of a legacy server: `(method, params)`.
pub type QuestionFn = Arc<
    dyn Fn(String, Value) -> BoxFuture<'static, Result<Value, toolgate_protocol::RpcError>>
        + Send
        + Sync,
>;

/// The calls that answer their own server requests, by request id.
#[derive(Default)]
struct Routes(Mutex<HashMap<String, QuestionFn>>);

impl Routes {
    /// The call a request belongs to: the one named, or over a transport
    /// that cannot tell, the only one there is.
    fn pick(&self, related: Option<&str>) -> Option<QuestionFn> {
        let routes = self.0.lock();
        match related {
            Some(id) => routes.get(id).cloned(),
            None if routes.len() == 1 => routes.values().next().cloned(),
            None => None,
        }
    }
}

/// Removes a call's route when the call ends, however it ends.
struct Routed<'a> {
    routes: &'a Routes,
    id: String,
}

impl Drop for Routed<'_> {
    fn drop(&mut self) {
        self.routes.0.lock().remove(&self.id);
    }
}

/// A log-message callback.
pub type LogFn = Arc<dyn Fn(&LoggingMessageNotificationParams) + Send + Sync>;

/// Builds a [`Client`].
pub struct ClientBuilder {
    info: Implementation,
    timeout: Duration,
    max_rounds: usize,
    handler: Arc<dyn InputHandler>,
    approval: Option<Arc<dyn Approval>>,
    trusted: bool,
    name: String,
    max_pages: usize,
    tasks: bool,
}

impl ClientBuilder {
    /// Declare the tasks extension (`io.modelcontextprotocol/tasks`): a
    /// server may then run a tool call as a task, which
    /// [`Client::call_tool`] polls to its result (answering the task's
    /// input requests through the input handler) and cancels if the
    /// caller gives up. Off by default.
    pub fn tasks(mut self) -> Self {
        self.tasks = true;
        self
    }

    /// How many pages one listing follows before giving up with
    /// [`ClientError::LimitExceeded`] (default 1,000: a million tools at
    /// the usual page sizes; at least 1).
    pub fn max_pages(mut self, pages: usize) -> Self {
        self.max_pages = pages.max(1);
        self
    }

    /// The default timeout of every request (default 60 s). On expiry the
    /// request is cancelled on the server.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many `input_required` rounds a request may take (default 10).
    pub fn max_rounds(mut self, rounds: usize) -> Self {
        self.max_rounds = rounds;
        self
    }

    /// Who answers the server's input requests; its capabilities are declared on every request.
    pub fn input_handler(mut self, handler: impl InputHandler) -> Self {
        self.handler = Arc::new(handler);
        self
    }

    /// Asked before every tool call; a denied call is never sent.
    pub fn approval(mut self, approval: impl Approval) -> Self {
        self.approval = Some(Arc::new(approval));
        self
    }

    /// Trust this server's annotations (by default they are ignored for risk).
    pub fn trusted(mut self, trusted: bool) -> Self {
        self.trusted = trusted;
        self
    }

    /// What to call the *server* this client talks to in logs, warnings
    /// and errors (`"basket"`, a URL). Default `"server"`. The client's own
    /// name, the one the server sees in `clientInfo`, is the one given to
    /// [`Client::builder`].
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Connect over `transport` (no traffic until the first request).
    pub fn build(self, transport: impl Transport) -> Client {
        let handler = self.handler.clone();
        let routes = Arc::new(Routes::default());
        let routed = routes.clone();
        transport.on_server_request(Arc::new(move |method, params, related| {
            let handler = handler.clone();
            let route = (method != methods::Ping::NAME)
                .then(|| routed.pick(related.as_deref()))
                .flatten();
            Box::pin(async move {
                if let Some(route) = route {
                    return route(method, params).await;
                }
                if method == methods::Ping::NAME {
                    return Ok(Value::Object(Map::new()));
                }
                if !methods::SERVER_TO_CLIENT.contains(&method.as_str()) {
                    return Err(RpcError::method_not_found(&method));
                }
                crate::input::answer(handler.as_ref(), &method, params)
                    .await
                    .map_err(|e| RpcError::new(codes::INVALID_REQUEST, e.to_string()))
            })
        }));
        let mut capabilities = self.handler.capabilities();
        if self.tasks {
            capabilities.extensions.get_or_insert_with(Map::new).insert(
                toolgate_protocol::types::TASKS_EXTENSION.into(),
                Value::Object(Map::new()),
            );
        }
        Client {
            transport: Arc::new(transport),
            inner: Arc::new(Inner {
                era: tokio::sync::OnceCell::new(),
                probe_timeout: Duration::from_secs(5),
                meta_text: MetaText::new(&self.info, &capabilities),
                capabilities,
                tasks: self.tasks,
                info: self.info,
                timeout: self.timeout,
                max_rounds: self.max_rounds,
                handler: self.handler,
                approval: self.approval,
                trusted: self.trusted,
                name: self.name,
                max_pages: self.max_pages,
                version: Mutex::new(MODERN_VERSIONS[0].to_owned()),
                next_id: AtomicI64::new(1),
                cache: Mutex::new(PageCache::default()),
                tools: Mutex::new(HashMap::new()),
                routes,
            }),
        }
    }
}

struct KnownTool {
    tool: Tool,
    headers: Vec<HeaderParam>,
    output: Option<Arc<CompiledSchema>>,
}

/// Which era of the protocol the server speaks.
#[derive(Clone, Debug)]
enum Era {
    /// Per-request metadata (2026-07-28 and later).
    Modern,
    /// After an initialize handshake: the negotiated version and the
    /// server's `InitializeResult`.
    Legacy { version: String, init: Value },
}

/// Legacy revisions this client can fall back to, newest first. (A
/// 2024-11-05 server's tools, calls and content are a subset of
/// 2025-03-26's; its HTTP+SSE transport is
/// [`SseMode`](crate::transport::http::SseMode).)
const LEGACY_SPOKEN: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

struct Inner {
    era: tokio::sync::OnceCell<Era>,
    probe_timeout: Duration,
    info: Implementation,
    /// `info` and `capabilities` as every request's `_meta` carries them,
    /// serialized once.
    meta_text: MetaText,
    capabilities: ClientCapabilities,
    /// Whether the tasks extension is declared.
    tasks: bool,
    timeout: Duration,
    max_rounds: usize,
    handler: Arc<dyn InputHandler>,
    approval: Option<Arc<dyn Approval>>,
    trusted: bool,
    name: String,
    max_pages: usize,
    version: Mutex<String>,
    next_id: AtomicI64,
    cache: Mutex<PageCache>,
    tools: Mutex<HashMap<String, Arc<KnownTool>>>,
    /// Calls whose legacy server requests go to [`CallOptions::questions`].
    routes: Arc<Routes>,
}

/// An MCP client for one server. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    transport: Arc<dyn Transport>,
    inner: Arc<Inner>,
}

impl Client {
    /// Start building a client that identifies as `name` `version`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            info: Implementation::new(name, version),
            timeout: Duration::from_secs(60),
            max_rounds: 10,
            handler: Arc::new(NoInput),
            approval: None,
            trusted: false,
            name: "server".into(),
            max_pages: 1_000,
            tasks: false,
        }
    }

    /// The protocol version in use.
    pub fn protocol_version(&self) -> String {
        self.inner.version.lock().clone()
    }

    /// Send one request of the catalogue's method `M` and read its result
    /// (not following `input_required`).
    ///
    /// ```no_run
    /// # async fn demo(client: toolgate_client::Client) -> Result<(), toolgate_client::ClientError> {
    /// use toolgate_client::CallOptions;
    /// use toolgate_protocol::methods::{NoParams, Ping};
    ///
    /// client.send::<Ping>(&NoParams::default(), &CallOptions::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn send<M: Method>(
        &self,
        params: &M::Params,
        options: &CallOptions,
    ) -> Result<M::Result, ClientError> {
        self.request_with_headers(M::NAME, to_params(params)?, Vec::new(), options)
            .await?
            .parse(format_args!("{} result", M::NAME))
    }

    /// Send one request by name, with raw params, and wait for its raw
    /// result (not following `input_required`): for methods outside the
    /// [catalogue](toolgate_protocol::methods), such as a vendor's, and for
    /// relays that pass on what they cannot read. [`Client::send`] is the
    /// typed way.
    ///
    /// An `UnsupportedProtocolVersion` answer is retried once with a version
    /// both sides speak, if there is one.
    pub async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        options: &CallOptions,
    ) -> Result<Value, ClientError> {
        self.request_with_headers(method, params, Vec::new(), options)
            .await?
            .into_value()
    }

    /// The result of one request, read no further than the caller needs.
    async fn request_with_headers(
        &self,
        method: &str,
        params: Map<String, Value>,
        headers: Vec<(String, String)>,
        options: &CallOptions,
    ) -> Result<Answer, ClientError> {
        match self.send_once(method, &params, &headers, options).await {
            Err(ClientError::Protocol(e)) if e.code == codes::UNSUPPORTED_PROTOCOL_VERSION => {
                let server: Vec<String> = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("supported"))
                    .and_then(|s| serde_json::from_value(s.clone()).ok())
                    .unwrap_or_default();
                let ours: Vec<String> = MODERN_VERSIONS.iter().map(|v| (*v).to_owned()).collect();
                // Retry once with the first version both sides list (possibly
                // the same one: a server may refuse transiently).
                let common = ours.iter().find(|v| server.contains(v));
                match common {
                    Some(v) => {
                        *self.inner.version.lock() = v.clone();
                        self.send_once(method, &params, &headers, options).await
                    }
                    None => Err(ClientError::NoCommonVersion {
                        server,
                        client: ours,
                    }),
                }
            }
            other => other,
        }
    }

    /// Build a request: a fresh id, the per-request `_meta`, and the values
    /// the HTTP transport mirrors into headers.
    pub(crate) fn outgoing(
        &self,
        method: &str,
        params: Map<String, Value>,
        headers: Vec<(String, String)>,
    ) -> Outgoing {
        self.outgoing_in(
            &Era::Modern,
            method,
            &params,
            headers,
            &CallOptions::default(),
        )
    }

    /// Build a request in `era`; `options` says whether progress is wanted
    /// and which capabilities and log level to declare.
    fn outgoing_in(
        &self,
        era: &Era,
        method: &str,
        params: &Map<String, Value>,
        headers: Vec<(String, String)>,
        options: &CallOptions,
    ) -> Outgoing {
        let progress = options.progress.is_some();
        let capabilities = options.capabilities.as_ref();
        let log_level = options.log_level;
        let id = RequestId::Number(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let legacy = match era {
            Era::Modern => None,
            Era::Legacy { version, .. } => Some(version.clone()),
        };
        let version = self.protocol_version();
        let meta = self.inner.meta_text.render(&RequestMeta {
            version: legacy.is_none().then_some(version.as_str()),
            progress_token: progress.then_some(&id),
            capabilities,
            log_level,
            trace: options.trace.as_ref(),
        });
        let name = methods::routing_name(method, params).map(str::to_owned);
        Outgoing {
            body: encode_request(
                &id,
                method,
                &WithMeta {
                    params,
                    meta: meta.as_deref(),
                },
            ),
            id,
            method: method.to_owned(),
            name,
            version,
            headers,
            legacy,
            bearer: options.bearer.clone(),
        }
    }

    pub(crate) fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// How the server is reached: Streamable HTTP, stdio, or the
    /// deprecated HTTP+SSE transport (once detected, after the first
    /// request).
    pub fn transport_kind(&self) -> crate::transport::TransportKind {
        self.transport.kind()
    }

    /// Forget the known tool definitions (they are re-listed on next use).
    pub(crate) fn forget_tools(&self) {
        self.invalidate(methods::ListTools::NAME);
        self.inner.tools.lock().clear();
    }

    async fn send_once(
        &self,
        method: &str,
        params: &Map<String, Value>,
        headers: &[(String, String)],
        options: &CallOptions,
    ) -> Result<Answer, ClientError> {
        let era = self.era().await?;
        self.send_in(&era, method, params, headers.to_vec(), options)
            .await
    }

    async fn send_in(
        &self,
        era: &Era,
        method: &str,
        params: &Map<String, Value>,
        headers: Vec<(String, String)>,
        options: &CallOptions,
    ) -> Result<Answer, ClientError> {
        let outgoing = self.outgoing_in(era, method, params, headers, options);
        let timeout = options.timeout.unwrap_or(self.inner.timeout);
        let _routed = match (&options.questions, era) {
            (Some(questions), Era::Legacy { .. }) => {
                let id = outgoing.id.to_string();
                self.inner
                    .routes
                    .0
                    .lock()
                    .insert(id.clone(), questions.clone());
                Some(Routed {
                    routes: &self.inner.routes,
                    id,
                })
            }
            _ => None,
        };
        let work = async {
            let mut pending = self.transport.send(outgoing).await?;
            loop {
                match pending.next().await {
                    None => {
                        return Err(ClientError::transport(
                            "the server ended the exchange without a response",
                        ));
                    }
                    Some(Err(e)) => return Err(e),
                    Some(Ok(Inbound::Notification(n))) => {
                        match n.get("method").and_then(Value::as_str) {
                            Some("notifications/progress") => {
                                if let (Some(callback), Some(params)) =
                                    (&options.progress, n.get("params"))
                                    && let Ok(p) = serde_json::from_value(params.clone())
                                {
                                    callback(&p);
                                }
                            }
                            Some("notifications/message") => {
                                if let (Some(callback), Some(params)) =
                                    (&options.log, n.get("params"))
                                    && let Ok(p) = serde_json::from_value(params.clone())
                                {
                                    callback(&p);
                                }
                            }
                            _ => {}
                        }
                    }
                    Some(Ok(Inbound::Response(response))) => {
                        pending.finished();
                        return response.into_result();
                    }
                }
            }
        };
        // Dropping the work on timeout drops the pending request, which
        // cancels it on the server.
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| ClientError::Timeout(timeout))?
    }

    /// `server/discover`; for a legacy server, the same facts from its
    /// `initialize` result.
    pub async fn discover(&self) -> Result<DiscoverResult, ClientError> {
        if let Era::Legacy { version, init } = self.era().await? {
            let mut meta = Map::new();
            if let Some(info) = init.get("serverInfo") {
                meta.insert(toolgate_protocol::meta::SERVER_INFO.into(), info.clone());
            }
            let synthesized = json!({
                "supportedVersions": [version],
                "capabilities": init.get("capabilities").cloned().unwrap_or_else(|| json!({})),
                "instructions": init.get("instructions"),
                "_meta": meta,
            });
            return serde_json::from_value(synthesized)
                .map_err(|e| ClientError::InvalidResponse(format!("initialize result: {e}")));
        }
        self.send::<methods::Discover>(&Default::default(), &CallOptions::default())
            .await
    }

    /// Every item of the list method `M` (`ListResources`, `ListPrompts`,
    /// …), over every page, honouring the caching hints. An item that does
    /// not parse is left out, with a warning naming the server.
    ///
    /// A server cannot keep the client paging forever: at most
    /// [`ClientBuilder::max_pages`] pages are followed, a cursor seen twice
    /// is a loop, and a listing whose cursor goes invalid is restarted once
    /// from a clean slate, not again.
    pub async fn list<M: Paginated>(&self) -> Result<Vec<M::Item>, ClientError> {
        let raw = self.list_values(M::NAME, M::FIELD).await?;
        Ok(raw
            .into_iter()
            .filter_map(|value| match serde_json::from_value(value) {
                Ok(item) => Some(item),
                Err(e) => {
                    tracing::warn!(server = %self.inner.name, method = M::NAME, error = %e, "ignoring a malformed item");
                    None
                }
            })
            .collect())
    }

    /// Every raw item of a list method, as [`Client::list`] reads them.
    async fn list_values(&self, method: &str, field: &str) -> Result<Vec<Value>, ClientError> {
        let auth = self.transport.auth_scope();
        let mut restarted = false;
        'listing: loop {
            let mut items = Vec::new();
            let mut cursor: Option<String> = None;
            let mut seen = std::collections::HashSet::new();
            for _ in 0..self.inner.max_pages {
                let cached = self
                    .inner
                    .cache
                    .lock()
                    .get(method, cursor.as_deref(), &auth);
                let page = match cached {
                    Lookup::Fresh(page) => page,
                    other => {
                        let mut params = Map::new();
                        if let Some(c) = &cursor {
                            params.insert("cursor".into(), Value::from(c.clone()));
                        }
                        match self.request(method, params, &CallOptions::default()).await {
                            Ok(page) => {
                                self.inner.cache.lock().put(
                                    method,
                                    cursor.as_deref(),
                                    &auth,
                                    &page,
                                );
                                page
                            }
                            Err(ClientError::Protocol(e))
                                if e.code == codes::INVALID_PARAMS && cursor.is_some() =>
                            {
                                // The cursor went invalid (the list changed
                                // under us): start over once.
                                self.inner.cache.lock().discard(method);
                                if std::mem::replace(&mut restarted, true) {
                                    return Err(self.paging_error(
                                        method,
                                        "invalidated its cursor again after a restart",
                                    ));
                                }
                                continue 'listing;
                            }
                            Err(e) => match other {
                                Lookup::Stale(page) => {
                                    tracing::warn!(%method, error = %e, "re-fetch failed; serving the stale page");
                                    page
                                }
                                _ => return Err(e),
                            },
                        }
                    }
                };
                if let Some(list) = page.get(field).and_then(Value::as_array) {
                    items.extend(list.iter().cloned());
                }
                match page.get("nextCursor") {
                    Some(Value::String(next)) => {
                        if !seen.insert(next.clone()) {
                            return Err(self
                                .paging_error(method, "returned a cursor it had returned before"));
                        }
                        cursor = Some(next.clone());
                    }
                    _ => return Ok(items),
                }
            }
            return Err(ClientError::LimitExceeded {
                server: self.inner.name.clone(),
                limit: "max_pages",
                detail: format!("{method} did not end after {} pages", self.inner.max_pages),
            });
        }
    }

    fn paging_error(&self, method: &str, what: &str) -> ClientError {
        ClientError::InvalidResponse(format!(
            "{method} on {} {what}; the listing was abandoned",
            self.inner.name
        ))
    }

    /// The caching hints of the last listing of `method` (`tools/list`,
    /// …): the smallest `ttlMs` of its pages and whether any was private.
    /// `None` before the first listing. A gateway derives its own hints
    /// from its upstreams' this way.
    pub fn list_hints(&self, method: &str) -> Option<crate::cache::ListHints> {
        self.inner.cache.lock().hints(method)
    }

    /// Mark cached pages of `method` stale (e.g. after
    /// `notifications/tools/list_changed`): the next listing re-fetches, and
    /// falls back to them only if that fails.
    pub fn invalidate(&self, method: &str) {
        self.inner.cache.lock().invalidate(method);
    }

    /// The server's tools. On HTTP, a tool whose `x-mcp-header` use breaks
    /// the rules is left out, with a warning naming it and the reason.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        let raw = self
            .list_values(methods::ListTools::NAME, methods::ListTools::FIELD)
            .await?;
        let mut tools = Vec::new();
        let mut known = HashMap::new();
        // Unchanged definitions keep their compiled output schema.
        let previous = self.inner.tools.lock().clone();
        for value in raw {
            let tool: Tool = match serde_json::from_value(value) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(server = %self.inner.name, error = %e, "ignoring a malformed tool definition");
                    continue;
                }
            };
            let headers = match header_params(&tool.input_schema) {
                Ok(h) => h,
                Err(e) if self.transport.kind() == TransportKind::Http => {
                    tracing::warn!(server = %self.inner.name, tool = %tool.name, reason = %e, "excluding a tool with an invalid x-mcp-header");
                    continue;
                }
                Err(_) => Vec::new(),
            };
            if let Some(same) = previous.get(&tool.name).filter(|k| k.tool == tool) {
                known.insert(tool.name.clone(), same.clone());
                tools.push(tool);
                continue;
            }
            let output = tool
                .output_schema
                .as_ref()
                .and_then(|s| match CompiledSchema::compile(&Value::Object(s.clone())) {
                    Ok(c) => Some(Arc::new(c)),
                    Err(e) => {
                        tracing::warn!(tool = %tool.name, error = %e, "the outputSchema cannot be used to check results");
                        None
                    }
                });
            known.insert(
                tool.name.clone(),
                Arc::new(KnownTool {
                    tool: tool.clone(),
                    headers,
                    output,
                }),
            );
            tools.push(tool);
        }
        *self.inner.tools.lock() = known;
        Ok(tools)
    }

    async fn known_tool(&self, name: &str) -> Result<Arc<KnownTool>, ClientError> {
        if let Some(t) = self.inner.tools.lock().get(name).cloned() {
            return Ok(t);
        }
        // Boxed, so that a call to a known tool does not carry the size of
        // a listing in its future.
        Box::pin(self.list_tools()).await?;
        self.inner
            .tools
            .lock()
            .get(name)
            .cloned()
            .ok_or_else(|| ClientError::UnknownTool(name.to_owned()))
    }

    /// Call a tool: approval, header mirroring, input rounds, result checks.
    ///
    /// `Ok` is a successful result whose structured content matches the
    /// tool's `outputSchema`; a tool's own failure is [`ClientError::Tool`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        options: &CallOptions,
    ) -> Result<CallToolResult, ClientError> {
        let started = Instant::now();
        let known = self.known_tool(name).await?;
        if let Some(approval) = &self.inner.approval {
            let (risk, open_world) = classify(&known.tool, self.inner.trusted);
            let request = ApprovalRequest {
                tool: &known.tool,
                arguments: &arguments,
                risk,
                open_world,
            };
            if !approval.approve(&request).await {
                self.audit(name, &arguments, "denied", started);
                return Err(ClientError::Denied(name.to_owned()));
            }
        }
        let outcome = self.call_checked(name, &arguments, known, options).await;
        let label = match &outcome {
            Ok(_) => "ok",
            Err(ClientError::Tool { .. }) => "tool_error",
            Err(ClientError::OutputSchema { .. }) => "output_schema_violation",
            Err(ClientError::Timeout(_)) => "timeout",
            Err(_) => "failed",
        };
        self.audit(name, &arguments, label, started);
        outcome
    }

    fn audit(&self, tool: &str, arguments: &Map<String, Value>, outcome: &str, started: Instant) {
        let digest = Sha256::digest(serde_json::to_vec(arguments).unwrap_or_default());
        let digest: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        tracing::info!(
            target: "toolgate_client::audit",
            server = %self.inner.name,
            tool,
            arguments_sha256 = %digest,
            outcome,
            duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "tool call"
        );
    }

    async fn call_checked(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        mut known: Arc<KnownTool>,
        options: &CallOptions,
    ) -> Result<CallToolResult, ClientError> {
        let mut params = Map::new();
        params.insert("name".into(), Value::from(name));
        params.insert("arguments".into(), Value::Object(arguments.clone()));
        let mut retried_headers = false;
        let result = loop {
            let headers = self.mirrored_headers(&known, arguments);
            match self
                .with_rounds(methods::CallTool::NAME, params.clone(), headers, options)
                .await
            {
                Err(ClientError::Protocol(e))
                    if e.code == codes::HEADER_MISMATCH && !retried_headers =>
                {
                    // The definition may have changed: re-list, then retry once.
                    retried_headers = true;
                    self.invalidate(methods::ListTools::NAME);
                    self.inner.tools.lock().clear();
                    known = self.known_tool(name).await?;
                }
                other => break other?,
            }
        };
        let result: CallToolResult = serde_json::from_value(result)
            .map_err(|e| ClientError::InvalidResponse(format!("tools/call result: {e}")))?;
        if result.is_error() {
            let text = result
                .content
                .iter()
                .filter_map(|c| c.as_text())
                .collect::<Vec<_>>()
                .join("\n");
            return Err(ClientError::Tool {
                text,
                result: Box::new(result),
            });
        }
        let violations = output_violations(&known, &result);
        if !violations.is_empty() {
            return Err(ClientError::OutputSchema {
                tool: name.to_owned(),
                violations,
            });
        }
        Ok(result)
    }

    fn mirrored_headers(
        &self,
        known: &KnownTool,
        arguments: &Map<String, Value>,
    ) -> Vec<(String, String)> {
        if self.transport.kind() != TransportKind::Http {
            return Vec::new();
        }
        known
            .headers
            .iter()
            .filter_map(|p| {
                p.value_in(arguments)
                    .and_then(|v| p.encode(v))
                    .map(|v| (p.header_name(), v))
            })
            .collect()
    }

    /// Check a result of `name` against its `outputSchema`, as
    /// [`Client::call_tool`] does: the violations, if any.
    pub async fn check_output(
        &self,
        name: &str,
        result: &CallToolResult,
    ) -> Result<Vec<toolgate_schema::Violation>, ClientError> {
        let known = self.known_tool(name).await?;
        if result.is_error() {
            return Ok(Vec::new());
        }
        Ok(output_violations(&known, result))
    }

    /// `resources/read` (following input rounds).
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, ClientError> {
        let params = ReadResourceRequestParams {
            uri: uri.to_owned(),
            input_responses: None,
            request_state: None,
            meta: None,
        };
        self.send_with_rounds::<methods::ReadResource>(&params)
            .await
    }

    /// `prompts/get` (following input rounds).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<GetPromptResult, ClientError> {
        let params = GetPromptRequestParams {
            name: name.to_owned(),
            arguments: Some(arguments),
            input_responses: None,
            request_state: None,
            meta: None,
        };
        self.send_with_rounds::<methods::GetPrompt>(&params).await
    }

    /// `M`, answering the server's input requests until it has a result.
    async fn send_with_rounds<M: Method>(
        &self,
        params: &M::Params,
    ) -> Result<M::Result, ClientError> {
        let value = self
            .with_rounds(
                M::NAME,
                to_params(params)?,
                Vec::new(),
                &CallOptions::default(),
            )
            .await?;
        read_result::<M>(value)
    }
}

/// A method's params as the JSON object the envelope carries (for a relay
/// that sends typed params through [`Client::request_round`]).
pub fn to_params<P: serde::Serialize>(params: &P) -> Result<Map<String, Value>, ClientError> {
    match serde_json::to_value(params) {
        Ok(Value::Object(map)) => Ok(map),
        // The catalogue's params are all structs: this is a programming error.
        Ok(other) => Err(ClientError::InvalidRequest(format!(
            "params must be an object, not {other}"
        ))),
        Err(e) => Err(ClientError::InvalidRequest(format!(
            "params cannot be encoded: {e}"
        ))),
    }
}

/// `M`'s result read from the raw one.
pub(crate) fn read_result<M: Method>(value: Value) -> Result<M::Result, ClientError> {
    serde_json::from_value(value)
        .map_err(|e| ClientError::InvalidResponse(format!("{} result: {e}", M::NAME)))
}

/// How `result` breaks the tool's `outputSchema` (empty when it does not,
/// or when the tool declares none).
fn output_violations(
    known: &KnownTool,
    result: &CallToolResult,
) -> Vec<toolgate_schema::Violation> {
    let Some(schema) = &known.output else {
        return Vec::new();
    };
    match &result.structured_content {
        None => vec![toolgate_schema::Violation {
            pointer: String::new(),
            message: "no structuredContent".into(),
            expected: "a structured result".into(),
            fix: "the server must return structuredContent for a tool with an outputSchema".into(),
        }],
        Some(value) => schema.validate(value).err().unwrap_or_default(),
    }
}
