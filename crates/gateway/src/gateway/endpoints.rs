//! Endpoints (`[endpoints.NAME]`): virtual servers beside the default one.
//! Each is a server of its own — its registry, its list, its
//! `server/discover` — over the same upstreams, stores and supervision:
//! a catalogue view (the tools it selects, shaped) and, for each tool, a
//! stack built with the endpoint's policy over the file's and its budgets.
//! Nothing of an upstream is started twice. Which tools each offers, and
//! how, is `endpoint_tools.rs`; how a reload changes them, [`plan`].
//!
//! Layer: `gateway`.

use std::sync::Arc;

use parking_lot::RwLock;
use toolgate_protocol::types::Tool;
use toolgate_server::{Server, ServerConfig};

use super::{Gateway, GatewayError};
use crate::call::metrics::{Metrics, Recorder, UpstreamOf};
use crate::config::{DEFAULT_PATH, EndpointConfig, GatewayConfig};
use crate::decide::budget::Budgets;
use crate::decide::policy::Policy;
use crate::store::SharedNonces;
use crate::store::state_key::StateSecret;

/// One tool as an endpoint offers it.
#[derive(Clone)]
pub(super) struct Shown {
    pub(super) upstream: usize,
    /// The gateway tool name (`prefix.tool`).
    pub(super) gateway: String,
    /// The upstream's definition it was shaped from.
    pub(super) definition: Tool,
    /// The definition shaped, as the endpoint shows it (what its search
    /// indexes).
    pub(super) shown: Tool,
    pub(super) generation: u64,
}

impl super::catalogue::Registered for Shown {
    fn upstream(&self) -> usize {
        self.upstream
    }
    fn registered(&self) -> (&Tool, u64) {
        (&self.definition, self.generation)
    }
}

/// What an endpoint offers now, by the name the model calls. An endpoint
/// that selects whole upstreams (`servers`) offers their prompts,
/// resources and templates too, as the default endpoint does.
pub(super) type EndpointOffer = super::catalogue::Offer<Shown>;

/// One endpoint.
pub struct Endpoint {
    pub(super) name: String,
    pub(super) path: String,
    /// Its section, its policy over the file's and its budgets: swapped
    /// by a reload (its tools are then registered anew).
    pub(super) config: RwLock<Arc<EndpointConfig>>,
    pub(super) policy: RwLock<Arc<Policy>>,
    pub(super) budgets: RwLock<Arc<Budgets>>,
    pub(super) server: Server,
    pub(super) offer: Arc<RwLock<EndpointOffer>>,
}

impl Endpoint {
    /// Its name (`[endpoints.NAME]`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it is served.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Its server.
    pub fn server(&self) -> Server {
        self.server.clone()
    }

    /// Its section of the configuration running now.
    pub fn config(&self) -> Arc<EndpointConfig> {
        self.config.read().clone()
    }

    /// The names its tools are called by now, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.offer.read().tools.keys().cloned().collect();
        names.sort();
        names
    }

    /// What it offers now, for operators: each tool as called there with
    /// the gateway tool behind it, and what it withholds and why, sorted.
    pub fn view(&self) -> EndpointView {
        let offer = self.offer.read();
        let mut tools: Vec<(String, String)> = offer
            .tools
            .iter()
            .map(|(shown, t)| (shown.clone(), t.gateway.clone()))
            .collect();
        tools.sort();
        let mut withheld: Vec<(String, String)> = offer
            .withheld
            .iter()
            .map(|(shown, (_, why))| (shown.clone(), why.text.clone()))
            .collect();
        withheld.sort();
        EndpointView {
            name: self.name.clone(),
            path: self.path.clone(),
            tools,
            withheld,
        }
    }
}

/// What one endpoint offers, as operators read it (`/status`, the
/// console).
#[derive(Clone, Debug, serde::Serialize)]
pub struct EndpointView {
    /// `[endpoints.NAME]`.
    pub name: String,
    /// Where it is served.
    pub path: String,
    /// Its tools: the name it calls each by, and the gateway tool
    /// (`prefix.tool`) behind it.
    pub tools: Vec<(String, String)>,
    /// The tools it withholds, and what a caller is told.
    pub withheld: Vec<(String, String)>,
}

/// What every endpoint's server is built with, kept so a reload can
/// build the endpoints it adds.
#[derive(Clone)]
pub(super) struct Parts {
    pub(super) server_config: ServerConfig,
    pub(super) nonces: SharedNonces,
    pub(super) secret: Option<StateSecret>,
    /// Where each endpoint's calls are recorded and counted: the default
    /// one's store, metrics and loop counts.
    pub(super) rows: Option<Arc<dyn crate::store::AuditRows>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) loops: Arc<crate::decide::loops::Loops>,
    pub(super) upstream_of: UpstreamOf,
}

/// An endpoint's budgets: unnamed ones are kept under `NAME/<globs>`, so
/// two endpoints with the same globs do not share spending unless they
/// say so by name.
fn budgets_of(name: &str, config: &EndpointConfig) -> Result<Budgets, GatewayError> {
    let mut budgets = config.budget.clone();
    for b in &mut budgets {
        if b.name.is_none() {
            b.name = Some(format!("{name}/{}", b.tools.join(",")));
        }
    }
    Ok(Budgets::new(&budgets)?)
}

/// An endpoint's policy over `global`, and its budgets.
fn rules(
    name: &str,
    endpoint: &EndpointConfig,
    global: &Arc<Policy>,
) -> Result<(Arc<Policy>, Arc<Budgets>), GatewayError> {
    let policy = Arc::new(Policy::within(global.clone(), name, &endpoint.policy)?);
    Ok((policy, Arc::new(budgets_of(name, endpoint)?)))
}

/// An endpoint a reload keeps, with its new section, its policy over the
/// new global one, and its budgets.
pub(super) type Reconfigured = (
    Arc<Endpoint>,
    Arc<EndpointConfig>,
    Arc<Policy>,
    Arc<Budgets>,
);

/// What a reload does to the endpoints, worked out before anything of it
/// applies.
pub(super) struct Plan {
    /// The endpoints from now on, in name order.
    pub(super) endpoints: Vec<Arc<Endpoint>>,
    /// Those still there, each with its section, its policy over the new
    /// global one and its budgets to set.
    pub(super) reconfigured: Vec<Reconfigured>,
    /// Names of endpoints built anew (new, or moved, or with other
    /// instructions or callers).
    pub(super) added: Vec<String>,
    /// Names of endpoints no longer served (a rebuilt one is in both).
    pub(super) removed: Vec<String>,
}

/// What only building an endpoint anew changes: its path, what its
/// server says and offers besides tools, who may call it.
fn layout(name: &str, e: &EndpointConfig) -> String {
    format!(
        "{} {:?} {:?} {} {:?}",
        e.path_of(name),
        e.instructions,
        e.auth,
        e.servers.is_empty(),
        e.disclosure,
    )
}

/// The endpoints of `config` (whose global policy is `global`) in place of
/// `running`, checked and built before anything of a reload applies. The
/// endpoint at the default path is the listener's main one: only a
/// restart adds, removes or rebuilds it ([`fixed_layout`]).
pub(super) fn plan(
    running: &[Arc<Endpoint>],
    config: &GatewayConfig,
    global: &Arc<Policy>,
    parts: &Parts,
) -> Result<Plan, GatewayError> {
    let mut out = Plan {
        endpoints: Vec::new(),
        reconfigured: Vec::new(),
        added: Vec::new(),
        removed: Vec::new(),
    };
    let main = |path: &str| path == DEFAULT_PATH;
    for (name, section) in &config.endpoints {
        let old = running.iter().find(|e| e.name == *name);
        let pinned = old.is_some_and(|e| main(&e.path)) || main(&section.path_of(name));
        match old {
            Some(e) if pinned || layout(name, &e.config()) == layout(name, section) => {
                let (policy, budgets) = rules(name, section, global)?;
                out.reconfigured
                    .push((e.clone(), Arc::new(section.clone()), policy, budgets));
                out.endpoints.push(e.clone());
            }
            _ if pinned => {}
            old => {
                if old.is_some() {
                    out.removed.push(name.clone());
                }
                out.endpoints.push(build_one(name, section, global, parts)?);
                out.added.push(name.clone());
            }
        }
    }
    for e in running {
        if !config.endpoints.contains_key(&e.name) {
            if main(&e.path) {
                out.endpoints.push(e.clone());
            } else {
                out.removed.push(e.name.clone());
            }
        }
    }
    out.endpoints.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The endpoint at the default path, as it reads: what only a restart
/// changes (the listener's main server is bound at start).
pub(super) fn fixed_layout(config: &GatewayConfig) -> String {
    let main: Vec<String> = config
        .endpoints
        .iter()
        .filter(|(name, e)| e.path_of(name) == DEFAULT_PATH)
        .map(|(name, e)| format!("{name} {}", layout(name, e)))
        .collect();
    format!("[endpoints] at {DEFAULT_PATH}: {}", main.join("; "))
}

/// Build the endpoints of `config` (none registered yet).
pub(super) fn build(
    config: &GatewayConfig,
    global: &Arc<Policy>,
    parts: &Parts,
) -> Result<Vec<Arc<Endpoint>>, GatewayError> {
    config
        .endpoints
        .iter()
        .map(|(name, endpoint)| build_one(name, endpoint, global, parts))
        .collect()
}

/// Build the endpoint `name` (no tool registered yet: its upstreams'
/// listings register them).
fn build_one(
    name: &str,
    endpoint: &EndpointConfig,
    global: &Arc<Policy>,
    shared: &Parts,
) -> Result<Arc<Endpoint>, GatewayError> {
    let (policy, budgets) = rules(name, endpoint, global)?;
    let offer: Arc<RwLock<EndpointOffer>> = Arc::default();
    let answers = offer.clone();
    let gateway_of = offer.clone();
    let (store, metrics, loops, upstream_of) = (
        shared.rows.clone(),
        shared.metrics.clone(),
        shared.loops.clone(),
        shared.upstream_of.clone(),
    );
    let mut builder = Server::builder(
        format!("toolgate-gateway/{name}"),
        env!("CARGO_PKG_VERSION"),
    )
    .config(shared.server_config.clone())
    .single_use_rounds()
    .nonce_store(shared.nonces.clone())
    .tools_in_name_order()
    .unlisted_answer(super::catalogue::withheld_answer(answers))
    .call_log(Arc::new(Recorder {
        store,
        metrics,
        loops,
        upstream_of,
        endpoint: Some(crate::call::metrics::EndpointTag {
            name: name.into(),
            gateway_of: Arc::new(move |shown: &str| {
                gateway_of
                    .read()
                    .tools
                    .get(shown)
                    .map(|t| t.gateway.clone())
            }),
        }),
    }));
    // An endpoint that selects whole upstreams offers their prompts
    // and resources too; one that names tools offers tools only.
    if !endpoint.servers.is_empty() {
        builder = builder
            .enable_prompts()
            .enable_resources()
            .enable_completions();
    }
    if let Some(instructions) = &endpoint.instructions {
        builder = builder.instructions(instructions.clone());
    }
    if let Some(secret) = &shared.secret {
        builder = builder.state_key(secret.key_for(name));
    }
    let server = builder.build()?;
    if endpoint.disclosure == crate::config::Disclosure::Search {
        super::disclosure::register(&server, offer.clone())?;
    }
    Ok(Arc::new(Endpoint {
        name: name.to_owned(),
        path: endpoint.path_of(name),
        config: RwLock::new(Arc::new(endpoint.clone())),
        policy: RwLock::new(policy),
        budgets: RwLock::new(budgets),
        server,
        offer,
    }))
}

/// Told the endpoints a reload leaves, before they are the gateway's: an
/// `Err` refuses the reload (nothing of it applied).
pub type EndpointsHook =
    Box<dyn Fn(&[Arc<Endpoint>]) -> Result<(), crate::config::ConfigError> + Send + Sync>;

impl Gateway {
    /// The endpoints beside the default one.
    pub fn endpoints(&self) -> Vec<Arc<Endpoint>> {
        self.endpoints.read().clone()
    }

    /// Call `hook` with the endpoints each reload leaves, before they are
    /// applied; its `Err` refuses the reload. How the listener serves the
    /// endpoints a reload adds and stops serving those it removes.
    pub fn on_endpoints_changed(&self, hook: EndpointsHook) {
        self.endpoint_hooks.lock().push(hook);
    }

    /// Tell every hook the endpoints `next` leaves.
    pub(super) fn endpoints_changing(
        &self,
        next: &[Arc<Endpoint>],
    ) -> Result<(), crate::config::ConfigError> {
        self.endpoint_hooks
            .lock()
            .iter()
            .try_for_each(|hook| hook(next))
    }
}
