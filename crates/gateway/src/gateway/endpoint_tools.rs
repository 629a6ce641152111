//! Which tools each endpoint offers, and how the model reads them: what an
//! upstream lists, selected by each endpoint, withheld where the file or
//! the endpoint's policy denies it or its shape cannot apply, renamed and
//! reshaped, registered with a stack built under the endpoint's rules.
//!
//! Layer: `gateway`.

use std::collections::HashMap;
use std::sync::Arc;

use toolgate_protocol::types::Tool;
use toolgate_server::Withheld;

use super::Gateway;
use super::endpoints::Shown;
use super::refusal::Refusal;
use super::register::Registration;
use crate::base::names::qualify;
use crate::decide::policy::{Action, ToolFacts};
use crate::decide::shape::Shaped;

impl Gateway {
    /// Make upstream `i`'s tools on every endpoint exactly what each
    /// selects of `tools`, shaped (after the default endpoint's offer is
    /// settled: what the file withholds, each endpoint withholds too).
    pub(super) fn apply_endpoints(&self, i: usize, tools: &[Tool]) {
        let endpoints = self.endpoints.read().clone();
        if endpoints.is_empty() {
            return;
        }
        let ups = self.ups();
        let upstream = &ups[i];
        let config = &upstream.config;
        let ratelimit = self.ratelimit.read().clone();
        let budgets = self.budgets.read().clone();
        let generation = self.generation.load(std::sync::atomic::Ordering::SeqCst);
        let withheld_by_file: HashMap<String, Withheld> = self
            .offer
            .read()
            .withheld
            .iter()
            .filter(|(_, (u, _))| *u == i)
            .map(|(n, (_, w))| (n.clone(), w.clone()))
            .collect();
        for endpoint in &endpoints {
            let section = endpoint.config();
            let policy = endpoint.policy.read().clone();
            let own_budgets = endpoint.budgets.read().clone();
            let mut offer = endpoint.offer.write();
            // What it offers of this upstream now: shown name → (gateway
            // name, definition, the shaped tool or why it is withheld).
            let mut wanted: HashMap<String, (String, Tool, Result<Shaped, Withheld>)> =
                HashMap::new();
            // Tools renamed onto a name another has (by gateway name), and
            // why they are not offered.
            let mut collided: Vec<(String, Withheld)> = Vec::new();
            for tool in tools.iter().filter(|t| config.offers(&t.name)) {
                let name = qualify(&config.prefix(), &tool.name);
                if !section.selects(&config.name, &name) {
                    continue;
                }
                let shape = section.shape.get(&name);
                if shape.is_some_and(|s| s.hidden) {
                    continue;
                }
                let shown_name = shape
                    .and_then(|s| s.name.clone())
                    .unwrap_or_else(|| name.clone());
                let facts = ToolFacts::of(&name, tool, config.trusted);
                let outcome = if let Some(why) = withheld_by_file.get(&name) {
                    Err(why.clone())
                } else if let Some(d) = policy
                    .decide_for_all(&facts)
                    .filter(|d| d.action == Action::Deny)
                {
                    Err(Refusal::Denied {
                        name: &shown_name,
                        reason: &d.reason,
                        rule: d.rule,
                    }
                    .withheld())
                } else {
                    shaped(tool, &shown_name, shape).map_err(|e| {
                        let key = format!("[endpoints.{}.shape.\"{name}\"]", endpoint.name);
                        tracing::warn!(endpoint = %endpoint.name, tool = %name, "withheld: {key}: {e}");
                        Refusal::Shape {
                            name: &shown_name,
                            key,
                            error: e.to_string(),
                        }
                        .withheld()
                    })
                };
                // A name given by a shape that another tool of this upstream
                // has already: the tool that has it keeps it.
                let renamed = shape.is_some_and(|s| s.name.is_some());
                match wanted.get(&shown_name) {
                    Some((other, _, _)) if renamed => {
                        let why = Refusal::Collides {
                            tool: &name,
                            shown: &shown_name,
                            other,
                        }
                        .withheld();
                        tracing::warn!(endpoint = %endpoint.name, tool = %name, "withheld: {}", why.text);
                        collided.push((name, why));
                        continue;
                    }
                    Some(_) => {
                        if let Some((other, _, _)) = wanted.remove(&shown_name) {
                            let why = Refusal::Collides {
                                tool: &other,
                                shown: &shown_name,
                                other: &name,
                            }
                            .withheld();
                            tracing::warn!(endpoint = %endpoint.name, tool = %other, "withheld: {}", why.text);
                            collided.push((other, why));
                        }
                    }
                    None => {}
                }
                wanted.insert(shown_name, (name, tool.clone(), outcome));
            }
            offer.drop_stale(i, &endpoint.server, generation, |shown| {
                match wanted.get(shown) {
                    Some((_, tool, Ok(_))) => Some(tool),
                    _ => None,
                }
            });
            offer.withheld.retain(|_, (u, _)| *u != i);
            for (name, why) in collided {
                offer.withheld.entry(name).or_insert((i, why));
            }
            let mut names: Vec<&String> = wanted.keys().collect();
            names.sort();
            for shown_name in names {
                let (name, tool, outcome) = &wanted[shown_name];
                let shaped = match outcome {
                    Err(why) => {
                        offer.withheld.insert(shown_name.clone(), (i, why.clone()));
                        continue;
                    }
                    Ok(shaped) => shaped,
                };
                if let Some(held) = offer.tools.get(shown_name) {
                    // Another upstream's tool is called so here: it keeps
                    // the name.
                    if held.upstream != i {
                        let other = held.gateway.clone();
                        let why = Refusal::Collides {
                            tool: name,
                            shown: shown_name,
                            other: &other,
                        }
                        .withheld();
                        tracing::warn!(endpoint = %endpoint.name, tool = %name, "withheld: {}", why.text);
                        offer.withheld.entry(name.clone()).or_insert((i, why));
                    }
                    continue;
                }
                let entry = self.tool_entry(Registration {
                    name,
                    shown: shaped.tool.clone(),
                    definition: tool,
                    upstream,
                    facts: ToolFacts::of(name, tool, config.trusted),
                    policy: policy.clone(),
                    budget: budgets.of(name),
                    endpoint_budget: own_budgets.of(name),
                    fixed: Some(Arc::new(shaped.fixed.clone())),
                    ratelimit: &ratelimit,
                    endpoint_limit: section
                        .ratelimit
                        .per_minute(name)
                        .map(|n| (Arc::from(endpoint.name.as_str()), n)),
                    scopes: section.auth.as_ref().map_or(&[][..], |a| &a.scopes[..]),
                    endpoint: Some(&endpoint.name),
                });
                // On a searching endpoint, only pinned tools are listed.
                let searched = section.disclosure == crate::config::Disclosure::Search;
                let entry = if searched && !section.pins(name) {
                    entry.unlisted()
                } else {
                    entry
                };
                match endpoint.server.add_tool(entry) {
                    Ok(()) => {
                        offer.tools.insert(
                            shown_name.clone(),
                            Shown {
                                upstream: i,
                                gateway: name.clone(),
                                definition: tool.clone(),
                                shown: shaped.tool.clone(),
                                generation,
                            },
                        );
                    }
                    Err(e) => {
                        tracing::warn!(endpoint = %endpoint.name, tool = %shown_name, error = %e, "not offered");
                        let why = Refusal::Invalid {
                            name: shown_name,
                            server: &config.name,
                            error: e.to_string(),
                        }
                        .withheld();
                        offer.withheld.insert(shown_name.clone(), (i, why));
                    }
                }
            }
        }
    }
}

/// `tool` as the endpoint shows it, called `shown_name`: shaped when it
/// has a shape, else as the upstream defines it.
fn shaped(
    tool: &Tool,
    shown_name: &str,
    shape: Option<&crate::config::ShapeConfig>,
) -> Result<Shaped, crate::decide::shape::ShapeError> {
    let mut out = match shape {
        Some(shape) => crate::decide::shape::shape(tool, shape)?,
        None => Shaped {
            tool: tool.clone(),
            fixed: serde_json::Map::new(),
        },
    };
    out.tool.name = shown_name.to_owned();
    Ok(out)
}
