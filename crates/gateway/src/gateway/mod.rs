//! The gateway's lifecycle: start (its stores, its server, the page's
//! socket, its upstreams) and stop. Supervision of upstreams is in
//! [`supervise`], what it offers in [`catalogue`] (each tool's stack of
//! stages is built there), why it withholds a tool in [`refusal`], the
//! stores it opens in [`stores`], the page's socket in [`site`]; reload,
//! the lock file and the views the surfaces read in modules of their own.
//!
//! Layer: `gateway`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use toolgate_client::ToolWatch;
use toolgate_protocol::types::Tool;
use toolgate_review::lock::LockFile;
use toolgate_server::Server;

use crate::base::names::qualify;
use crate::call::approvals::{Approvals, PendingApprovals};
use crate::call::metrics::{Metrics, Recorder};
use crate::call::upstream::Upstream;
use crate::config::{GatewayConfig, RateLimitConfig};
use crate::decide::policy::{Policy, ToolFacts};
use crate::store::AuditSink;

mod catalogue;
mod disclosure;
mod endpoint_tools;
mod endpoints;
mod lock;
mod refusal;
mod register;
mod reload;
pub mod site;
mod stores;
mod supervise;
mod types;
mod validate;
mod views;

use stores::Stores;

use catalogue::Offer;

pub use endpoints::{Endpoint, EndpointView, EndpointsHook};
pub use lock::{Drift, NotApproved};
pub use reload::{LastReload, Reloaded};
pub use types::{GatewayError, GatewayOptions, UpstreamStatus};
use types::{disabled_status, is_denial};
pub use views::ToolView;

/// Seconds an approval question stays answerable, by default.
const DEFAULT_STATE_TTL: u64 = 300;

/// The shortest wait between two restart attempts of one upstream.
const MIN_RETRY: Duration = Duration::from_millis(10);

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
    /// `[endpoints.NAME]`, in name order.
    endpoints: RwLock<Vec<Arc<endpoints::Endpoint>>>,
    /// What a reload builds the endpoints it adds with.
    endpoint_parts: endpoints::Parts,
    /// Told the endpoints a reload leaves (the listener's mounts follow).
    endpoint_hooks: parking_lot::Mutex<Vec<endpoints::EndpointsHook>>,
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
    /// Where the approval page and the console are served (`[approval]
    /// page`, `[console]`), bound at start.
    site: Option<Arc<site::Site>>,
    /// Where calls ask a person on the page.
    approvals: Option<Arc<dyn Approvals>>,
    /// Set once `stop` is called: surfaces serving this gateway end.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Calls from clients that cannot show a form go to the approval page
    /// (`[approval] page`; the console alone only shows it).
    page_for_calls: bool,
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
    /// How upstreams are started (also those a reload adds).
    starting: crate::call::upstream::Starting,
    /// Budgets in Redis (`[ratelimit] redis`), instead of in this process.
    shared_limits: Option<Arc<dyn crate::store::limits::SharedLimits>>,
    /// Where callers' rate limits are counted (Redis, or this process).
    caller_limits: Arc<dyn crate::store::limits::SharedLimits>,
    /// `[flows]` as running (`None`: off); swapped by a reload.
    flows: RwLock<Option<Arc<crate::decide::flows::Flows>>>,
    /// What entered each flow.
    flow_store: Arc<dyn crate::store::flows::FlowStore>,
    audit: Option<Arc<dyn AuditSink>>,
    /// Failures counted to stop loops (`[loops]`).
    loops: Arc<crate::decide::loops::Loops>,
    /// The configuration running now (the console shows it).
    running: RwLock<Arc<GatewayConfig>>,
    /// How the last reload ended.
    reloaded: RwLock<Option<LastReload>>,
    /// `[[budget]]`, swapped by a reload.
    budgets: RwLock<Arc<crate::decide::budget::Budgets>>,
    /// Where spending is kept: the audit store, or this process.
    ledger: Arc<dyn crate::store::ledger::Ledger>,
    /// The SQLite file, when that is the store.
    audit_file: Option<std::path::PathBuf>,
    metrics: Arc<Metrics>,
    /// People's linked accounts at upstreams (`identity` mode `user`):
    /// with the page and a state key.
    linking: Option<Arc<crate::call::linked::Linking>>,
}

impl std::ops::Deref for Gateway {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
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
        // The same checks every reload runs (`validate`).
        let validate::Checked { policy, budgets } = validate::check(&config)?;
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
            caller_limits,
            flows: flow_store,
            state_key,
            accounts,
        } = Stores::open(&config, server_config.state_ttl, options.check).await?;
        if audit.is_none()
            && !options.check
            && config.policy.rules.iter().any(|r| r.remember.is_some())
        {
            tracing::warn!(
                "[policy] rules with remember offer only \"this call only\": grants are kept in the audit store, and [audit] is disabled"
            );
        }
        // Every round the gateway seals is forwarded once: a replayed
        // state (an approval, or an upstream's question answered) is
        // refused before it reaches the guard or the upstream.
        let mut builder = Server::builder("toolgate-gateway", env!("CARGO_PKG_VERSION"))
            .config(server_config.clone())
            .single_use_rounds()
            .nonce_store(nonces.clone())
            .tools_in_name_order()
            .enable_prompts()
            .enable_resources()
            .enable_completions()
            .unlisted_answer(catalogue::withheld_answer(answers));
        let metrics = Arc::new(Metrics::default());
        let tools_of = offer.clone();
        let loops = Arc::new(crate::decide::loops::Loops::new(&config.loops)?);
        let upstream_of: crate::call::metrics::UpstreamOf = Arc::new(move |tool| {
            let offer = tools_of.read();
            let i = match offer.tools.get(tool) {
                Some(t) => t.upstream,
                None => offer.withheld.get(tool)?.0,
            };
            names_of.read().get(i).cloned()
        });
        let rows = audit.clone().map(|a| a as Arc<dyn crate::store::AuditRows>);
        builder = builder.call_log(Arc::new(Recorder {
            store: rows.clone(),
            metrics: metrics.clone(),
            loops: loops.clone(),
            upstream_of: upstream_of.clone(),
            endpoint: None,
        }));
        let endpoint_parts = endpoints::Parts {
            server_config: server_config.clone(),
            nonces: nonces.clone(),
            secret: state_key.clone(),
            rows,
            metrics: metrics.clone(),
            loops: loops.clone(),
            upstream_of,
        };
        let endpoints = endpoints::build(&config, &policy, &endpoint_parts)?;
        if let Some(secret) = &state_key {
            builder = builder.state_key(secret.key());
        } else if config.store.url.is_some() {
            // Where it matters: several instances share the store, and an
            // approval asked on one is answered on another.
            tracing::warn!(
                "no state key: each instance signs approvals with a random key of its own, so one asked on this instance cannot be completed on another; set TOOLGATE_STATE_KEY (the same on every instance) or [state] key_file"
            );
        } else if !options.check {
            tracing::info!(
                "no state key (TOOLGATE_STATE_KEY or [state] key_file): a random one for this process, so approvals still open when it restarts must be asked again"
            );
        }
        let server = builder.build()?;
        // The page's socket is bound now, so calls can name its address;
        // a surface serves it (`surface::page::serve`).
        let site = if config.approval.page || config.console.is_some() {
            let site = site::Site::bind(&config).await?;
            tracing::info!(addr = %site.local, "approval page at {}", site.page_url());
            Some(Arc::new(site))
        } else {
            None
        };
        let linking = linking_of(&config, site.as_deref(), state_key.as_ref(), accounts)?;
        let approvals: Option<Arc<dyn Approvals>> = site
            .as_ref()
            .map(|s| Arc::new(PendingApprovals::new(pending, &s.base)) as Arc<dyn Approvals>);
        let ratelimit = RwLock::new(Arc::new(config.ratelimit.clone()));
        let starting = crate::call::upstream::Starting {
            backoff: options
                .restart_backoff
                .unwrap_or(crate::call::upstream::FIRST_BACKOFF),
            launcher: options.launcher.clone(),
        };
        let upstreams: Vec<Arc<Upstream>> = config
            .servers
            .into_values()
            .map(|c| Upstream::new(c, &starting))
            .collect();
        let gateway = Gateway(Arc::new(Inner {
            server,
            upstreams: RwLock::new(Arc::new(upstreams)),
            retired: RwLock::default(),
            names,
            offer,
            endpoints: RwLock::new(endpoints),
            endpoint_parts,
            endpoint_hooks: parking_lot::Mutex::default(),
            disabled: RwLock::new(disabled),
            seen: RwLock::default(),
            lock: RwLock::new(options.lock),
            lock_file: options.lock_file,
            drift: RwLock::default(),
            watches: parking_lot::Mutex::default(),
            tasks: parking_lot::Mutex::default(),
            site,
            approvals,
            stopping: tokio::sync::watch::Sender::new(false),
            page_for_calls: config.approval.page,
            policy: RwLock::new(policy),
            ratelimit,
            generation: std::sync::atomic::AtomicU64::default(),
            supervisors: parking_lot::Mutex::default(),
            fixed,
            rules,
            starting,
            shared_limits,
            caller_limits,
            flows: RwLock::new(crate::decide::flows::Flows::new(&config.flows)?.map(Arc::new)),
            flow_store,
            running,
            budgets: RwLock::new(budgets),
            reloaded: RwLock::default(),
            ledger: match &audit {
                Some(store) => store.clone().ledger(),
                None => Arc::new(crate::store::ledger::MemoryLedger::default()),
            },
            audit_file,
            audit,
            loops,
            metrics,
            linking,
        }));
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
        validate::unique_offered(ups.iter().enumerate().map(|(i, u)| {
            let tools = all
                .iter()
                .filter(|(_, of, _)| *of == i)
                .map(|(_, _, t)| t.name.as_str())
                .collect();
            (&u.config, tools)
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
        for shadowed in gateway.shadowed_rules() {
            tracing::warn!("policy {shadowed}: move it before them, or remove it");
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

    /// Stop every upstream (a stdio upstream's whole process group ends).
    pub fn stop(&self) {
        self.stopping.send_replace(true);
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
        if let Some(audit) = &self.audit {
            audit.close();
        }
    }
}

/// Linked accounts, when the gateway can keep them: a page to link them
/// on and a state key to seal them under. An upstream with `identity`
/// mode `user` needs both.
fn linking_of(
    config: &GatewayConfig,
    site: Option<&site::Site>,
    key: Option<&crate::store::state_key::StateSecret>,
    accounts: Arc<dyn crate::store::accounts::AccountStore>,
) -> Result<Option<Arc<crate::call::linked::Linking>>, GatewayError> {
    let user = config.servers.iter().find(|(_, s)| {
        s.identity
            .as_ref()
            .is_some_and(|i| i.mode == crate::config::IdentityMode::User)
    });
    match (site, key) {
        (Some(site), Some(key)) => Ok(Some(Arc::new(crate::call::linked::Linking::new(
            key,
            accounts,
            &site.base,
        )))),
        _ => match user {
            Some((name, _)) => Err(crate::config::ConfigError::new(format!(
                "server {name:?}: identity mode \"user\" keeps people's tokens sealed under the state key: set TOOLGATE_STATE_KEY or [state] key_file"
            ))
            .into()),
            None => Ok(None),
        },
    }
}
