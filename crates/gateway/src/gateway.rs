//! The gateway: upstream tools registered on one toolgate server, kept in
//! step with the upstreams, checked against a lock file.

use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use toolgate_client::ToolWatch;
use toolgate_protocol::types::{CompletionReference, Prompt, Resource, ResourceTemplate, Tool};
use toolgate_review::lock::{Change, LockFile, compare};
use toolgate_server::tasks::TaskSupport;
use toolgate_server::{
    PromptEntry, RateLimit, ResourceEntry, Server, ServerConfig, TemplateEntry, ToolDef, Withheld,
};

use crate::approval::ApprovalDesk;
use crate::audit::AuditSink;
use crate::config::{GatewayConfig, RateLimitConfig};
use crate::forward::{complete, forward, get_prompt, read_resource};
use crate::guard::Guard;
use crate::metrics::{Metrics, Recorder};
use crate::names::{check_unique, qualify};
use crate::policy::{Action, Policy, ToolFacts};
use crate::upstream::Others;
use crate::upstream::Upstream;

mod lock;
mod refusal;
mod reload;
mod stores;
mod views;

use stores::Stores;

use refusal::Refusal;

pub use lock::{Drift, NotApproved};
pub use reload::Reloaded;
pub use views::ToolView;

/// Make upstream `i`'s entries in `offered` exactly `wanted` (key →
/// definition): stale or changed ones are removed, new ones added; a key
/// another upstream already has stays with it.
fn sync<T: Clone + PartialEq>(
    offered: &mut HashMap<String, (usize, T)>,
    i: usize,
    wanted: impl Iterator<Item = (String, T)>,
    remove: impl Fn(&str) -> bool,
    add: impl Fn(&str, &T) -> Result<(), toolgate_server::RegistrationError>,
) {
    let wanted: HashMap<String, T> = wanted.collect();
    offered.retain(|key, (u, def)| {
        let keep = *u != i || wanted.get(key) == Some(def);
        if !keep {
            remove(key);
        }
        keep
    });
    for (key, def) in wanted {
        if offered.contains_key(&key) {
            continue;
        }
        match add(&key, &def) {
            Ok(()) => {
                offered.insert(key, (i, def));
            }
            Err(e) => tracing::warn!(%key, error = %e, "not offered"),
        }
    }
}

/// The lists whose caching hints the gateway passes on.
const LISTS: [&str; 4] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
];

/// Seconds an approval question stays answerable, by default.
const DEFAULT_STATE_TTL: u64 = 300;

/// The shortest wait between two restart attempts of one upstream.
const MIN_RETRY: Duration = Duration::from_millis(10);

/// A gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Two upstream tools would share a name.
    #[error(transparent)]
    Collision(#[from] crate::names::Collision),
    /// The server refused a registration or its configuration.
    #[error("{0}")]
    Server(#[from] toolgate_server::RegistrationError),
    /// The configuration is inconsistent.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A store could not be opened or reached.
    #[error(transparent)]
    Store(#[from] crate::StoreError),
    /// The approval page could not be served, or the state key read.
    #[error("{0}")]
    Start(String),
}

/// Options beyond the configuration file.
#[derive(Clone, Default)]
pub struct GatewayOptions {
    /// Approved definitions: tools that differ from it, or are not in it,
    /// are withheld.
    pub lock: Option<LockFile>,
    /// Where the lock file is: approving a definition on the console
    /// writes it back there (without it, the approval lasts until the
    /// gateway stops).
    pub lock_file: Option<std::path::PathBuf>,
    /// The downstream server's settings (limits, timeouts, state key).
    pub server: ServerConfig,
    /// The first wait before restarting a failed upstream (default
    /// 250 ms); it doubles up to 30 s.
    pub restart_backoff: Option<Duration>,
}

/// One gateway tool.
#[derive(Clone)]
struct Offered {
    upstream: usize,
    definition: Tool,
    /// The reload generation it was registered in.
    generation: u64,
}

/// What the gateway offers now, and why it withholds the rest.
#[derive(Default)]
struct Offer {
    tools: HashMap<String, Offered>,
    /// Gateway name → (upstream, why a call to it is refused).
    withheld: HashMap<String, (usize, Withheld)>,
    /// Gateway prompt name → (upstream, definition).
    prompts: HashMap<String, (usize, Prompt)>,
    /// URI → (upstream, definition); URIs are not prefixed.
    resources: HashMap<String, (usize, Resource)>,
    /// URI template → (upstream, definition).
    templates: HashMap<String, (usize, ResourceTemplate)>,
}

/// How one upstream is doing, for `toolgate serve --check`.
#[derive(Clone, Debug)]
pub struct UpstreamStatus {
    /// Its name (the configuration key).
    pub name: String,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    /// Started and served (`false`: kept in the configuration, disabled).
    pub enabled: bool,
    /// Tools offered through the gateway.
    pub offered: usize,
    /// Tools withheld for the lock file or an invalid definition.
    pub withheld: usize,
    /// Tools the policy denies to every caller (deliberate, not a fault).
    pub denied: usize,
    /// Why it is failing, if it is.
    pub error: Option<String>,
    /// The last lines a stdio upstream wrote to stderr (what to show when
    /// it fails).
    pub stderr: Vec<String>,
    /// How many times it was restarted since the gateway started.
    pub restarts: u64,
    /// While it is down: the wait before the next attempt to restart it.
    pub retry_in: Option<Duration>,
}

/// Many MCP servers behind one toolgate server.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use toolgate_gateway::{Gateway, GatewayOptions, config::GatewayConfig};
/// let config = GatewayConfig::load("toolgate.toml".as_ref())?;
/// let gateway = Gateway::start(config, GatewayOptions::default()).await?;
/// toolgate_server::transport::stdio::serve_stdio(gateway.server()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Gateway(Arc<Inner>);

/// What every clone of a [`Gateway`] shares. Its fields are the gateway's
/// own (this module and its children): a `Gateway` derefs to it only so
/// that its methods read `self.offer`, not `self.0.offer`.
pub struct Inner {
    server: Server,
    /// Upstream i is slot i, for the gateway's life: a reload replaces a
    /// changed one in its slot, retires a removed one, appends a new one.
    upstreams: RwLock<Arc<Vec<Arc<Upstream>>>>,
    /// Slots of upstreams a reload removed.
    retired: RwLock<std::collections::HashSet<usize>>,
    /// Each slot's name, for records of calls refused before a handler ran.
    names: Arc<RwLock<Vec<String>>>,
    offer: Arc<RwLock<Offer>>,
    /// Upstreams kept in the configuration but not started.
    disabled: RwLock<Vec<UpstreamStatus>>,
    /// The policy's facts of every tool each upstream lists (offered or
    /// withheld), for finding rules that match none.
    seen: RwLock<HashMap<usize, Vec<ToolFacts>>>,
    /// The lock file, as loaded or as the console last approved.
    lock: RwLock<Option<LockFile>>,
    lock_file: Option<std::path::PathBuf>,
    /// Tools withheld because their definition differs from the lock, or
    /// is not in it: what the console shows and may approve.
    drift: RwLock<HashMap<String, lock::Drift>>,
    /// One watch per upstream, on its current connection (a new one
    /// replaces, and so ends, the old).
    watches: parking_lot::Mutex<HashMap<usize, ToolWatch>>,
    tasks: parking_lot::Mutex<Vec<tokio::task::AbortHandle>>,
    desk: Option<Arc<ApprovalDesk>>,
    /// Calls from clients that cannot show a form go to the approval page
    /// (`[approval] page`; the console alone only shows it).
    page_for_calls: bool,
    /// The console's views are served (`[console]`).
    console: bool,
    policy: RwLock<Arc<Policy>>,
    ratelimit: RwLock<Arc<RateLimitConfig>>,
    /// Bumped by each reload: a tool registered under an older one is
    /// registered anew (its guard holds the policy of its time).
    generation: std::sync::atomic::AtomicU64,
    /// Each slot's supervisor, aborted when its upstream is replaced.
    supervisors: parking_lot::Mutex<HashMap<usize, tokio::task::AbortHandle>>,
    /// What a reload cannot change, as loaded: compared to say so.
    fixed: String,
    /// `[policy]` and the rate-limit rules as loaded, for saying whether a
    /// reload changed them.
    rules: RwLock<String>,
    backoff: Duration,
    /// Budgets in Redis (`[ratelimit] redis`), instead of in this process.
    shared_limits: Option<Arc<crate::shared_limit::SharedLimits>>,
    audit: Option<Arc<dyn AuditSink>>,
    /// Failures counted to stop loops (`[loops]`).
    loops: Arc<crate::loops::Loops>,
    /// The configuration running now (the console shows it).
    running: RwLock<Arc<GatewayConfig>>,
    /// `[[budget]]`, swapped by a reload.
    budgets: RwLock<Arc<crate::budget::Budgets>>,
    /// Where spending is kept: the audit store, or this process.
    ledger: Arc<dyn crate::budget::Ledger>,
    /// The SQLite file, when that is the store.
    audit_file: Option<std::path::PathBuf>,
    metrics: Arc<Metrics>,
}

impl std::ops::Deref for Gateway {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// The status of an entry kept but not started.
fn disabled_status(s: &crate::config::UpstreamConfig) -> UpstreamStatus {
    tracing::info!(server = %s.name, "disabled (enabled = false): not started");
    UpstreamStatus {
        name: s.name.clone(),
        transport: match (&s.url, s.transport) {
            (None, _) => "stdio",
            (Some(_), Some(crate::config::HttpKind::Sse)) => "sse",
            (Some(_), _) => "http",
        },
        enabled: false,
        offered: 0,
        withheld: 0,
        denied: 0,
        error: None,
        stderr: Vec::new(),
        restarts: 0,
        retry_in: None,
    }
}

/// Whether a withheld tool is withheld by the policy (not by the lock).
fn is_denial(why: &Withheld) -> bool {
    why.notes.get("status").and_then(serde_json::Value::as_str) == Some("denied")
}

impl Gateway {
    /// Start every upstream, list their tools and register them. An
    /// upstream that is down does not stop the gateway: its tools appear
    /// when it is back. Name collisions do.
    pub async fn start(
        mut config: GatewayConfig,
        options: GatewayOptions,
    ) -> Result<Self, GatewayError> {
        let running = RwLock::new(Arc::new(config.clone()));
        // Entries kept but not started (`enabled = false`, a host's
        // `"disabled": true`): listed in the status, never run.
        let disabled: Vec<UpstreamStatus> = config
            .servers
            .values()
            .filter(|s| !s.enabled)
            .map(disabled_status)
            .collect();
        config.servers.retain(|_, s| s.enabled);
        let offer: Arc<RwLock<Offer>> = Arc::default();
        let answers = offer.clone();
        let policy = Arc::new(Policy::new(&config.policy)?);
        let fixed = reload::fixed_sections(&config);
        let rules = RwLock::new(reload::rules_of(&config));
        // Upstream i is the i-th key: `servers` is ordered.
        let names: Arc<RwLock<Vec<String>>> =
            Arc::new(RwLock::new(config.servers.keys().cloned().collect()));
        let names_of = names.clone();
        let mut server_config = options.server.clone();
        server_config.state_ttl =
            Duration::from_secs(config.state.ttl.unwrap_or(DEFAULT_STATE_TTL));
        let Stores {
            audit,
            nonces,
            pending,
            audit_file,
            shared_limits,
            state_key,
        } = Stores::open(&config, server_config.state_ttl).await?;
        if audit.is_none() && config.policy.rules.iter().any(|r| r.remember.is_some()) {
            tracing::warn!(
                "[policy] rules with remember offer only \"this call only\": grants are kept in the audit store, and [audit] is disabled"
            );
        }
        // Every round the gateway seals is forwarded once: a replayed
        // state (an approval, or an upstream's question answered) is
        // refused before it reaches the guard or the upstream.
        let mut builder = Server::builder("toolgate-gateway", env!("CARGO_PKG_VERSION"))
            .config(server_config)
            .single_use_rounds()
            .nonce_store(nonces)
            .tools_in_name_order()
            .enable_prompts()
            .enable_resources()
            .enable_completions()
            .unlisted_answer(move |name| {
                answers
                    .read()
                    .withheld
                    .get(name)
                    .map(|(_, why)| why.clone())
            });
        let metrics = Arc::new(Metrics::default());
        let tools_of = offer.clone();
        let loops = Arc::new(crate::loops::Loops::new(&config.loops)?);
        builder = builder.call_log(Arc::new(Recorder {
            store: audit.clone(),
            metrics: metrics.clone(),
            loops: loops.clone(),
            upstream_of: Arc::new(move |tool| {
                let offer = tools_of.read();
                let i = match offer.tools.get(tool) {
                    Some(t) => t.upstream,
                    None => offer.withheld.get(tool)?.0,
                };
                names_of.read().get(i).cloned()
            }),
        }));
        if let Some(key) = state_key {
            builder = builder.state_key(key);
        } else {
            tracing::warn!(
                "no state key (TOOLGATE_STATE_KEY or [state] key_file): using a random one, so approvals complete only on this process"
            );
        }
        let server = builder.build()?;
        let mut tasks = Vec::new();
        // The console serves the approval page among its views.
        let desk = if config.approval.page || config.console.is_some() {
            // With [auth], an operator may log in to the console with
            // their own token.
            let operator = match (&config.auth, &config.console) {
                (Some(auth), Some(console)) => Some(crate::approval::Operator {
                    verifier: Arc::new(auth.verifier()?),
                    scope: console
                        .operator_scope
                        .clone()
                        .unwrap_or_else(|| crate::approval::console::OPERATOR_SCOPE.to_owned()),
                }),
                _ => None,
            };
            let (desk, addr, task) = ApprovalDesk::serve(
                &config.approval,
                config.console.as_ref(),
                config.approval_login_file(),
                pending,
                operator,
            )
            .await
            .map_err(GatewayError::Start)?;
            tracing::info!(%addr, "approval page at {}", desk.page_url());
            tasks.push(task);
            Some(desk)
        } else {
            None
        };
        let ratelimit = RwLock::new(Arc::new(config.ratelimit.clone()));
        let backoff = options
            .restart_backoff
            .unwrap_or(crate::upstream::FIRST_BACKOFF);
        let upstreams: Vec<Arc<Upstream>> = config
            .servers
            .into_values()
            .map(|c| Upstream::new(c, backoff))
            .collect();
        let gateway = Gateway(Arc::new(Inner {
            server,
            upstreams: RwLock::new(Arc::new(upstreams)),
            retired: RwLock::default(),
            names,
            offer,
            disabled: RwLock::new(disabled),
            seen: RwLock::default(),
            lock: RwLock::new(options.lock),
            lock_file: options.lock_file,
            drift: RwLock::default(),
            watches: parking_lot::Mutex::default(),
            tasks: parking_lot::Mutex::new(tasks),
            desk,
            page_for_calls: config.approval.page,
            console: config.console.is_some(),
            policy: RwLock::new(policy),
            ratelimit,
            generation: std::sync::atomic::AtomicU64::default(),
            supervisors: parking_lot::Mutex::default(),
            fixed,
            rules,
            backoff,
            shared_limits,
            running,
            budgets: RwLock::new(Arc::new(crate::budget::Budgets::new(&config.budget)?)),
            ledger: match &audit {
                Some(store) => store.clone().ledger(),
                None => Arc::new(crate::budget::MemoryLedger::default()),
            },
            audit_file,
            audit,
            loops,
            metrics,
        }));
        if let Some(desk) = gateway.desk.as_ref().filter(|_| gateway.console) {
            desk.attach(gateway.clone());
        }
        let ups = gateway.ups();
        for (i, upstream) in ups.iter().enumerate() {
            gateway.watch_connections(i, upstream);
        }
        let mut listings = Vec::new();
        let mut tasks = tokio::task::JoinSet::new();
        for (i, upstream) in ups.iter().enumerate() {
            let upstream = upstream.clone();
            tasks.spawn(async move { (i, upstream.list().await) });
        }
        while let Some(joined) = tasks.join_next().await {
            if let Ok((i, listed)) = joined {
                listings.push((i, listed));
            }
        }
        listings.sort_by_key(|(i, _)| *i);
        let mut all: Vec<(String, usize, Tool)> = Vec::new();
        for (i, listed) in listings {
            match listed {
                Ok(tools) => {
                    for tool in tools {
                        all.push((qualify(&ups[i].config.prefix(), &tool.name), i, tool));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "upstream unavailable at start; its tools appear when it is back")
                }
            }
        }
        check_unique(all.iter().map(|(name, i, tool)| {
            (
                name.as_str(),
                ups[*i].config.name.as_str(),
                tool.name.as_str(),
            )
        }))?;
        for i in 0..ups.len() {
            let tools: Vec<Tool> = all
                .iter()
                .filter(|(_, u, _)| *u == i)
                .map(|(_, _, t)| t.clone())
                .collect();
            gateway.apply(i, &tools);
        }
        for (i, upstream) in ups.iter().enumerate() {
            if upstream.is_connected() {
                gateway.refresh_others(i).await;
            }
        }
        gateway.publish_hints();
        for rule in gateway.unmatched_rules() {
            tracing::warn!(
                "policy {rule} matches no tool of any upstream that answered: check its patterns"
            );
        }
        for i in 0..ups.len() {
            gateway.supervise(i);
        }
        Ok(gateway)
    }

    /// The upstream slots now.
    fn ups(&self) -> Arc<Vec<Arc<Upstream>>> {
        self.upstreams.read().clone()
    }

    /// The policy now.
    fn policy(&self) -> Arc<Policy> {
        self.policy.read().clone()
    }

    /// Follow every new connection of slot `i` for tool-list changes.
    /// (The hook holds the gateway; `stop` removes it, ending the cycle.)
    fn watch_connections(&self, i: usize, upstream: &Upstream) {
        let watcher = self.clone();
        upstream.on_start(Some(Arc::new(move |client: &toolgate_client::Client| {
            watcher.follow(i, client);
        })));
    }

    /// Re-list upstream `i`'s prompts, resources and templates.
    async fn refresh_others(&self, i: usize) {
        let Some(upstream) = self.ups().get(i).cloned() else {
            return;
        };
        match upstream.list_others().await {
            Ok(others) => self.apply_others(i, &others),
            Err(e) => tracing::warn!(error = %e, "keeping its prompts and resources offered"),
        }
    }

    /// Make upstream `i`'s prompts, resources and templates exactly
    /// `others`. Prompts are prefixed like tools; resource URIs are kept,
    /// so a URI two upstreams both serve goes to the first.
    fn apply_others(&self, i: usize, others: &Others) {
        let ups = self.ups();
        let upstream = &ups[i];
        let prefix = upstream.config.prefix();
        let mut offer = self.offer.write();
        let server = &self.server;
        let prompts = others
            .prompts
            .iter()
            .map(|p| (qualify(&prefix, &p.name), p.clone()));
        sync(
            &mut offer.prompts,
            i,
            prompts,
            |name| server.remove_prompt(name),
            |name, prompt| {
                let relay_to = upstream.clone();
                let upstream_name = prompt.name.clone();
                let mut wire = prompt.clone();
                wire.name = name.to_owned();
                let completing = (upstream.clone(), prompt.name.clone());
                let entry = PromptEntry::from_prompt(wire, move |args, ctx| {
                    get_prompt(relay_to.clone(), upstream_name.clone(), args, ctx)
                })
                .completer_async(move |argument, value, others| {
                    let (upstream, name) = completing.clone();
                    let reference = CompletionReference::Prompt { name, title: None };
                    complete(upstream, reference, argument, value, others)
                });
                server.add_prompt(entry)
            },
        );
        let resources = others.resources.iter().map(|r| (r.uri.clone(), r.clone()));
        sync(
            &mut offer.resources,
            i,
            resources,
            |uri| server.remove_resource(uri),
            |_, resource| {
                let relay_to = upstream.clone();
                server.add_resource(ResourceEntry::new(resource.clone(), move |uri, ctx| {
                    read_resource(relay_to.clone(), uri, ctx)
                }))
            },
        );
        let templates = others
            .templates
            .iter()
            .map(|t| (t.uri_template.clone(), t.clone()));
        sync(
            &mut offer.templates,
            i,
            templates,
            |t| server.remove_template(t),
            |_, template| {
                let relay_to = upstream.clone();
                let completing = (upstream.clone(), template.uri_template.clone());
                let entry = TemplateEntry::new(template.clone(), move |uri, _vars, ctx| {
                    read_resource(relay_to.clone(), uri, ctx)
                })
                .completer_async(move |argument, value, others| {
                    let (upstream, uri) = completing.clone();
                    let reference = CompletionReference::Resource { uri };
                    complete(upstream, reference, argument, value, others)
                });
                server.add_template(entry)
            },
        );
    }

    /// Stop every upstream (a stdio upstream's whole process group ends).
    pub fn stop(&self) {
        if let Some(desk) = &self.desk {
            desk.detach();
        }
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
        self.watches.lock().clear();
        for task in self.supervisors.lock().drain() {
            task.1.abort();
        }
        for u in self.ups().iter() {
            u.on_start(None);
            u.stop();
        }
    }

    /// Follow a new connection to upstream `i` for tool-list changes.
    fn follow(&self, i: usize, client: &toolgate_client::Client) {
        let followed_before = self.watches.lock().contains_key(&i);
        if followed_before && let Some(u) = self.ups().get(i) {
            self.metrics.restarted(&u.config.name);
        }
        let gateway = self.clone();
        let watch = client.watch_tools_with(move || {
            let gateway = gateway.clone();
            tokio::spawn(async move { gateway.refresh(i).await });
        });
        self.watches.lock().insert(i, watch);
    }

    /// Re-list upstream `i` and bring the offer in step.
    pub(crate) async fn refresh(&self, i: usize) {
        let Some(upstream) = self.ups().get(i).cloned() else {
            return;
        };
        if self.retired.read().contains(&i) {
            return;
        }
        match upstream.list().await {
            Ok(tools) => self.apply(i, &tools),
            Err(e) => {
                tracing::warn!(error = %e, "re-listing failed; keeping the tools offered");
                return;
            }
        }
        self.refresh_others(i).await;
        self.publish_hints();
    }

    /// List results promise no more than the upstreams do: `ttlMs` is the
    /// smallest of theirs (and of the gateway's own), `cacheScope` private
    /// if any of theirs is.
    fn publish_hints(&self) {
        let mut ttl = self.server.config().list_ttl;
        let mut private = false;
        for client in self.ups().iter().filter_map(|u| u.current()) {
            for method in LISTS {
                if let Some(h) = client.list_hints(method) {
                    ttl = ttl.min(h.ttl);
                    private |= h.private;
                }
            }
        }
        self.server.set_list_hints(ttl, private);
    }

    /// Make upstream `i`'s offered tools exactly `tools` (less those its
    /// include/exclude, the lock or a name clash withhold).
    fn apply(&self, i: usize, tools: &[Tool]) {
        let ups = self.ups();
        let upstream = &ups[i];
        let config = &upstream.config;
        let policy = self.policy();
        let ratelimit = self.ratelimit.read().clone();
        let budgets = self.budgets.read().clone();
        let generation = self.generation.load(std::sync::atomic::Ordering::SeqCst);
        // Whether a lock is enforced and has this server, and what differs:
        // read under the lock's guard, nothing of it copied.
        let (locked, changes): (Option<bool>, Vec<Change>) = match self.lock.read().as_ref() {
            None => (None, Vec::new()),
            Some(lock) => match lock.servers.get(&config.name) {
                None => (Some(false), Vec::new()),
                Some(server) => (Some(true), compare(server, tools)),
            },
        };
        let mut wanted: BTreeMap<String, (Tool, ToolFacts, Option<Withheld>)> = BTreeMap::new();
        for tool in tools.iter().filter(|t| config.offers(&t.name)) {
            let name = qualify(&config.prefix(), &tool.name);
            let facts = ToolFacts::of(&name, tool, config.trusted);
            // A refusal is recorded with what made it: the policy rule, or
            // the lock file (told apart by `decision` and `status`).
            let denied = policy
                .decide_for_all(&facts)
                .filter(|d| d.action == Action::Deny)
                .map(|d| {
                    Refusal::Denied {
                        name: &name,
                        reason: &d.reason,
                        rule: d.rule,
                    }
                    .withheld()
                });
            let refusal = denied.or_else(|| match locked {
                Some(false) => Some(Refusal::ServerNotLocked {
                    name: &name,
                    server: &config.name,
                }),
                Some(true) => changes.iter().find_map(|c| match c {
                    Change::Added(t) if *t == tool.name => Some(Refusal::Added {
                        name: &name,
                        server: &config.name,
                    }),
                    c @ Change::Changed(t, _) if *t == tool.name => {
                        tracing::warn!(tool = %name, change = %c.lines().join("; "), "definition changed since it was locked");
                        Some(Refusal::Changed { name: &name })
                    }
                    _ => None,
                }),
                None => None,
            }
            .map(Refusal::withheld));
            wanted.insert(name, (tool.clone(), facts, refusal));
        }
        let facts = wanted.values().map(|(_, f, _)| f.clone()).collect();
        self.seen.write().insert(i, facts);
        let drifted = lock::drifted(i, &config.name, &wanted, &changes);
        {
            let mut drift = self.drift.write();
            drift.retain(|_, d| d.upstream != i);
            drift.extend(drifted);
        }
        let mut offer = self.offer.write();
        // Remove what is gone or changed.
        let current: Vec<String> = offer
            .tools
            .iter()
            .filter(|(_, t)| t.upstream == i)
            .map(|(n, _)| n.clone())
            .collect();
        for name in current {
            let keep = match (wanted.get(&name), offer.tools.get(&name)) {
                (Some((tool, _, None)), Some(offered)) => {
                    offered.definition == *tool && offered.generation == generation
                }
                _ => false,
            };
            if !keep {
                offer.tools.remove(&name);
                self.server.remove_tool(&name);
            }
        }
        offer.withheld.retain(|_, (u, _)| *u != i);
        for (name, (tool, facts, refusal)) in wanted {
            if let Some(why) = refusal {
                tracing::warn!(tool = %name, "withheld: {}", why.text);
                offer.withheld.insert(name, (i, why));
                continue;
            }
            if offer.tools.contains_key(&name) {
                continue;
            }
            // A tool whose refusal depends on the caller is shown only to
            // callers it is not refused to (lists become private).
            let per_caller = policy.decide_for_all(&facts).is_none();
            let visibility = per_caller.then(|| {
                let policy = policy.clone();
                let facts = facts.clone();
                move |caller: Option<&toolgate_server::AuthContext>| {
                    policy.decide(&facts, caller).action != Action::Deny
                }
            });
            // The caller is told the tool is unknown; the record says which
            // rule hid it.
            let hidden_notes = per_caller.then(|| {
                let policy = policy.clone();
                let facts = facts.clone();
                move |caller: Option<&toolgate_server::AuthContext>| {
                    let decision = policy.decide(&facts, caller);
                    let mut notes = serde_json::Map::new();
                    notes.insert("decision".into(), decision.action.to_string().into());
                    notes.insert("rule".into(), decision.rule.into());
                    notes.insert("status".into(), "denied".into());
                    notes
                }
            });
            let budget = budgets.of(&name);
            let guard = Arc::new(Guard {
                policy: policy.clone(),
                facts,
                definition: tool.clone(),
                server: config.name.clone(),
                trusted: config.trusted,
                desk: self.desk.clone().filter(|_| self.page_for_calls),
                grants: self.audit.clone(),
                loops: self.loops.clone(),
                budget: budget.clone(),
                ledger: self.ledger.clone(),
                shared: self
                    .shared_limits
                    .clone()
                    .map(|l| (l, ratelimit.per_minute(&name))),
            });
            let upstream = upstream.clone();
            let upstream_name = tool.name.clone();
            // A call becomes a gateway task only when its upstream made it
            // one, after any approval and upstream rounds in the request.
            // The model reads the terms with the description, to plan.
            let mut shown = tool.clone();
            if let Some(budget) = &budget {
                let terms = budget.terms();
                shown.description = Some(match shown.description.take() {
                    Some(d) if !d.trim().is_empty() => format!("{}\n\n{terms}", d.trim_end()),
                    _ => terms,
                });
            }
            let mut entry = ToolDef::from_tool(shown)
                .rename(name.clone())
                .timeout(config.call_timeout() + Duration::from_secs(1))
                .task_support(TaskSupport::Optional)
                .task_started_by_handler();
            if let Some(n) = ratelimit
                .per_minute(&name)
                .filter(|_| self.shared_limits.is_none())
            {
                entry = entry.rate_limit(RateLimit::per_minute(n));
            }
            if let (Some(rule), Some(notes)) = (visibility, hidden_notes) {
                entry = entry.visible_when(rule).hidden_notes(notes);
            }
            let entry = entry.forward(move |args, ctx| {
                forward(
                    upstream.clone(),
                    upstream_name.clone(),
                    guard.clone(),
                    args,
                    ctx,
                )
            });
            match self.server.add_tool(entry) {
                Ok(()) => {
                    offer.tools.insert(
                        name,
                        Offered {
                            upstream: i,
                            definition: tool,
                            generation,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(tool = %name, error = %e, "not offered");
                    let why = Refusal::Invalid {
                        name: &name,
                        server: &config.name,
                        error: e.to_string(),
                    }
                    .withheld();
                    offer.withheld.insert(name.clone(), (i, why));
                }
            }
        }
    }

    /// Bring slot `i`'s upstream back after failures: after each failure
    /// (or a failed start), wait out the backoff and re-list, which
    /// restarts the upstream; its tools return when it answers. A
    /// supervisor the slot had before (an upstream a reload replaced) ends.
    fn supervise(&self, i: usize) {
        let Some(upstream) = self.ups().get(i).cloned() else {
            return;
        };
        let gateway = self.clone();
        let task = tokio::spawn(async move {
            loop {
                if upstream.is_connected() {
                    upstream.failure().await;
                }
                // At least a moment between attempts, whatever the
                // configured backoff: a dead upstream is never spun on.
                let wait = upstream.backoff().unwrap_or_default();
                tokio::time::sleep(wait.max(MIN_RETRY)).await;
                gateway.refresh(i).await;
            }
        });
        let before = self.supervisors.lock().insert(i, task.abort_handle());
        if let Some(before) = before {
            before.abort();
        }
    }
}
