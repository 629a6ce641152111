//! What the gateway offers: each upstream's tools, prompts, resources and
//! templates registered on the gateway's server, kept exactly in step with
//! what the upstream lists (less what its include/exclude, the policy, the
//! lock file or a name clash withhold, each with its [`Refusal`]).
//!
//! Layer: `gateway`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::RwLock;

use toolgate_protocol::types::{CompletionReference, Prompt, Resource, ResourceTemplate, Tool};
use toolgate_review::lock::{Change, compare};
use toolgate_server::{PromptEntry, ResourceEntry, TemplateEntry, Withheld};

use super::refusal::Refusal;
use super::register::Registration;
use super::{Gateway, lock};
use crate::base::names::qualify;
use crate::call::forward::{complete, get_prompt, read_resource};
use crate::call::upstream::{Others, Upstream};
use crate::decide::policy::{Action, ToolFacts};

/// The lists whose caching hints the gateway passes on.
const LISTS: [&str; 4] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
];

/// Make upstream `i`'s entries in `offered` exactly `wanted` (key →
/// definition): stale or changed ones are removed, new ones added; a key
/// another upstream already has stays with it.
pub(super) fn sync<T: Clone + PartialEq>(
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

/// One gateway tool.
#[derive(Clone)]
pub(super) struct Offered {
    pub(super) upstream: usize,
    pub(super) definition: Tool,
    /// The reload generation it was registered in.
    pub(super) generation: u64,
}

/// What an endpoint offers now, and why it withholds the rest: the
/// default endpoint's tools by gateway name ([`Offered`]), a named
/// endpoint's by the name its model calls them ([`super::endpoints::Shown`]).
pub(super) struct Offer<T = Offered> {
    pub(super) tools: HashMap<String, T>,
    /// Name → (upstream, why a call to it is refused).
    pub(super) withheld: HashMap<String, (usize, Withheld)>,
    /// Prompt name → (upstream, definition).
    pub(super) prompts: HashMap<String, (usize, Prompt)>,
    /// URI → (upstream, definition); URIs are not prefixed.
    pub(super) resources: HashMap<String, (usize, Resource)>,
    /// URI template → (upstream, definition).
    pub(super) templates: HashMap<String, (usize, ResourceTemplate)>,
}

impl<T> Default for Offer<T> {
    fn default() -> Self {
        Self {
            tools: HashMap::new(),
            withheld: HashMap::new(),
            prompts: HashMap::new(),
            resources: HashMap::new(),
            templates: HashMap::new(),
        }
    }
}

/// A tool as an [`Offer`] keeps it: enough to tell whether it is still
/// what its upstream lists under the rules running now.
pub(super) trait Registered {
    /// Its upstream's slot.
    fn upstream(&self) -> usize;
    /// The upstream's definition it was registered from, and the reload
    /// generation it was registered in.
    fn registered(&self) -> (&Tool, u64);
}

impl Registered for Offered {
    fn upstream(&self) -> usize {
        self.upstream
    }
    fn registered(&self) -> (&Tool, u64) {
        (&self.definition, self.generation)
    }
}

impl<T: Registered> Offer<T> {
    /// Take off `server` upstream `i`'s tools that are gone or changed:
    /// those `wanted` (by name) no longer offers, or offers with another
    /// definition, or that were registered before reload `generation`.
    pub(super) fn drop_stale<'t>(
        &mut self,
        i: usize,
        server: &toolgate_server::Server,
        generation: u64,
        wanted: impl Fn(&str) -> Option<&'t Tool>,
    ) {
        self.tools.retain(|name, t| {
            let keep = t.upstream() != i
                || wanted(name).is_some_and(|tool| t.registered() == (tool, generation));
            if !keep {
                server.remove_tool(name);
            }
            keep
        });
    }
}

/// The answer a server gives to a call of a tool it does not list: why
/// `offer` withholds it, if it does.
pub(super) fn withheld_answer<T: Send + Sync + 'static>(
    offer: Arc<RwLock<Offer<T>>>,
) -> impl Fn(&str) -> Option<Withheld> + Send + Sync + 'static {
    move |name| offer.read().withheld.get(name).map(|(_, why)| why.clone())
}

impl Gateway {
    /// Re-list upstream `i`'s prompts, resources and templates.
    pub(super) async fn refresh_others(&self, i: usize) {
        let Some(upstream) = self.ups().get(i).cloned() else {
            return;
        };
        match upstream.list_others().await {
            Ok(others) => self.apply_others(i, &others),
            Err(e) => tracing::warn!(error = %e, "keeping its prompts and resources offered"),
        }
    }

    /// Make upstream `i`'s prompts, resources and templates exactly
    /// `others`, on the default endpoint and on every endpoint that
    /// selects the whole upstream (`servers`).
    fn apply_others(&self, i: usize, others: &Others) {
        let ups = self.ups();
        let upstream = &ups[i];
        {
            let mut offer = self.offer.write();
            let offer = &mut *offer;
            sync_others(
                &self.server,
                (
                    &mut offer.prompts,
                    &mut offer.resources,
                    &mut offer.templates,
                ),
                i,
                upstream,
                others,
            );
        }
        for endpoint in self.endpoints.read().iter() {
            let wanted = endpoint.config().servers.contains(&upstream.config.name);
            let mut offer = endpoint.offer.write();
            let offer = &mut *offer;
            let empty = Others::default();
            sync_others(
                &endpoint.server,
                (
                    &mut offer.prompts,
                    &mut offer.resources,
                    &mut offer.templates,
                ),
                i,
                upstream,
                if wanted { others } else { &empty },
            );
        }
    }

    /// List results promise no more than the upstreams do: `ttlMs` is the
    /// smallest of theirs (and of the gateway's own), `cacheScope` private
    /// if any of theirs is.
    pub(super) fn publish_hints(&self) {
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
        // An endpoint's lists come from the same upstreams: they promise
        // no more than the default's (a list that depends on the caller
        // is marked private by the server itself).
        for endpoint in self.endpoints.read().iter() {
            endpoint.server.set_list_hints(ttl, private);
        }
    }

    /// Make upstream `i`'s offered tools exactly `tools` (less those its
    /// include/exclude, the lock or a name clash withhold).
    pub(super) fn apply(&self, i: usize, tools: &[Tool]) {
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
        offer.drop_stale(i, &self.server, generation, |name| match wanted.get(name) {
            Some((tool, _, None)) => Some(tool),
            _ => None,
        });
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
            let entry = self.tool_entry(Registration {
                name: &name,
                shown: Tool {
                    name: name.clone(),
                    ..tool.clone()
                },
                definition: &tool,
                upstream,
                facts,
                policy: policy.clone(),
                budget: budgets.of(&name),
                endpoint_budget: None,
                fixed: None,
                ratelimit: &ratelimit,
                endpoint_limit: None,
                scopes: &[],
                endpoint: None,
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
        drop(offer);
        self.apply_endpoints(i, tools);
    }
}

/// The prompts, resources and templates one server offers, each with
/// the upstream it came from.
type OthersOffered<'a> = (
    &'a mut HashMap<String, (usize, Prompt)>,
    &'a mut HashMap<String, (usize, Resource)>,
    &'a mut HashMap<String, (usize, ResourceTemplate)>,
);

/// Make upstream `i`'s prompts, resources and templates on `server`
/// exactly `others`. Prompts are prefixed like tools; resource URIs are
/// kept, so a URI two upstreams both serve goes to the first.
fn sync_others(
    server: &toolgate_server::Server,
    (prompts_offered, resources_offered, templates_offered): OthersOffered<'_>,
    i: usize,
    upstream: &Arc<Upstream>,
    others: &Others,
) {
    let prefix = upstream.config.prefix();
    let prompts = others
        .prompts
        .iter()
        .map(|p| (qualify(&prefix, &p.name), p.clone()));
    sync(
        prompts_offered,
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
        resources_offered,
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
        templates_offered,
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
