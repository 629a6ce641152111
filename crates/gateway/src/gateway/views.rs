//! What the gateway shows: its server, each upstream's state, its tools,
//! metrics, stores and pages (for `serve --check`, `/status`, the console).
//!
//! Layer: `gateway`.

use std::sync::Arc;

use toolgate_protocol::types::Tool;
use toolgate_server::Server;

use super::{Gateway, UpstreamStatus, is_denial};
use crate::call::metrics::Metrics;
use crate::decide::policy::{Decision, ToolFacts};
use crate::store::AuditSink;

/// A tool as the console shows it.
#[derive(Clone, Debug)]
pub struct ToolView {
    /// The gateway name.
    pub name: String,
    /// Its upstream's name.
    pub upstream: String,
    /// The upstream's definition.
    pub definition: Tool,
    /// What the policy decides for every caller (`None`: it depends on
    /// the caller).
    pub decision: Option<Decision>,
    /// Effects beyond reading, as the review reads them.
    pub effects: Vec<String>,
    /// Its flow classes and why (`[flows]`).
    pub classes: toolgate_review::flows::FlowClasses,
}

impl Gateway {
    /// The downstream server: serve it over HTTP or stdio.
    pub fn server(&self) -> Server {
        self.server.clone()
    }

    /// Each upstream's state.
    pub fn status(&self) -> Vec<UpstreamStatus> {
        let offer = self.offer.read();
        let retired = self.retired.read().clone();
        self.ups()
            .iter()
            .enumerate()
            .filter(|(i, _)| !retired.contains(i))
            .map(|(i, u)| UpstreamStatus {
                name: u.config.name.clone(),
                transport: u.transport_kind(),
                enabled: true,
                offered: offer.tools.values().filter(|t| t.upstream == i).count(),
                withheld: offer
                    .withheld
                    .values()
                    .filter(|(u, why)| *u == i && !is_denial(why))
                    .count(),
                denied: offer
                    .withheld
                    .values()
                    .filter(|(u, why)| *u == i && is_denial(why))
                    .count(),
                error: u.last_error(),
                stderr: u.stderr_tail(),
                restarts: u.restarts(),
                retry_in: u.last_error().and(u.backoff()),
            })
            .chain(self.disabled.read().iter().cloned())
            .collect()
    }

    /// The gateway's metrics (serve [`Metrics::encode`] at `/metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The approval page's list of waiting calls, when it is served.
    pub fn approval_page(&self) -> Option<String> {
        self.site.as_ref().map(|s| s.page_url())
    }

    /// The console's overview, when `[console]` is on.
    pub fn console_url(&self) -> Option<String> {
        self.site
            .as_ref()
            .filter(|s| s.console)
            .map(|s| s.console_url())
    }

    /// How many enabled upstreams are listed and answering.
    pub(crate) fn upstreams_up(&self) -> usize {
        let seen = self.seen.read();
        let retired = self.retired.read();
        self.ups()
            .iter()
            .enumerate()
            .filter(|(i, u)| {
                !retired.contains(i) && seen.contains_key(i) && u.last_error().is_none()
            })
            .count()
    }

    /// People's linked accounts (`identity` mode `user`), when the gateway
    /// keeps them.
    pub fn linking(&self) -> Option<&Arc<crate::call::linked::Linking>> {
        self.linking.as_ref()
    }

    /// The caller identity of the running upstream `name`, if it has one.
    pub fn identity_of(&self, name: &str) -> Option<crate::call::identity::SharedIdentity> {
        let retired = self.retired.read().clone();
        self.ups()
            .iter()
            .enumerate()
            .filter(|(i, _)| !retired.contains(i))
            .find(|(_, u)| u.config.name == name)
            .and_then(|(_, u)| u.identity().cloned())
    }

    /// Where the approval page and the console are served, when they are.
    pub fn site(&self) -> Option<&Arc<super::site::Site>> {
        self.site.as_ref()
    }

    /// Where calls ask a person, when the page is on.
    pub fn approvals(&self) -> Option<&Arc<dyn crate::call::approvals::Approvals>> {
        self.approvals.as_ref()
    }

    /// Resolves once [`Gateway::stop`] is called: what serves this gateway
    /// (a surface) ends with it.
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut stopping = self.stopping.subscribe();
        async move {
            let _ = stopping.wait_for(|stopped| *stopped).await;
        }
    }

    /// The audit store, when there is one.
    pub fn audit_sink(&self) -> Option<&Arc<dyn AuditSink>> {
        self.audit.as_ref()
    }

    pub(crate) fn shared_limits(&self) -> Option<&Arc<dyn crate::store::limits::SharedLimits>> {
        self.shared_limits.as_ref()
    }

    /// How many calls wait for a person on the approval page now, when it
    /// is served.
    pub async fn waiting_for_a_person(&self) -> Option<Result<usize, crate::store::StoreError>> {
        let approvals = self.approvals.as_ref()?;
        Some(approvals.all().await.map(|all| {
            all.iter()
                .filter(|e| e.status == crate::store::pending::Status::Waiting)
                .count()
        }))
    }

    /// The login link and each new one as the one before it is used, when
    /// the page is served: `serve` prints each where it printed the first,
    /// so a person can always log in again without a restart.
    pub fn login_links(&self) -> Option<tokio::sync::watch::Receiver<String>> {
        self.site.as_ref().map(|s| s.logins.links())
    }

    /// The approval page's one-time login link, when the page is served:
    /// for the person only, never for a client or the model.
    pub fn approval_login(&self) -> Option<String> {
        self.site.as_ref().map(|s| s.logins.link())
    }

    /// The audit store's file, when the store is a SQLite file.
    pub fn audit_path(&self) -> Option<&std::path::Path> {
        self.audit_file.as_deref()
    }

    /// Where the audit store is (a file, or a database URL without its
    /// password), when there is one.
    pub fn audit_location(&self) -> Option<String> {
        self.audit.as_ref().map(|a| a.location())
    }

    /// Policy rules (described) that match no tool any upstream listed:
    /// likely a mistyped pattern. An upstream that is down lists nothing,
    /// so rules meant for it show here until it is back.
    pub fn unmatched_rules(&self) -> Vec<String> {
        self.policy().unmatched(self.seen.read().values().flatten())
    }

    /// Policy rules that never apply to the tools the upstreams offered:
    /// earlier rules decide every call they would (each named).
    pub fn shadowed_rules(&self) -> Vec<String> {
        self.policy().shadowed(self.seen.read().values().flatten())
    }

    /// The gateway tool names, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.offer.read().tools.keys().cloned().collect();
        names.sort();
        names
    }

    /// Every offered tool, by name; and the withheld ones with what a
    /// caller is told.
    pub fn tool_views(&self) -> (Vec<ToolView>, Vec<(String, String)>) {
        let offer = self.offer.read();
        let names = self.names.read();
        let policy = self.policy();
        let ups = self.ups();
        let mut tools: Vec<ToolView> = offer
            .tools
            .iter()
            .map(|(name, t)| {
                let trusted = ups.get(t.upstream).is_some_and(|u| u.config.trusted);
                let facts = ToolFacts::of(name, &t.definition, trusted);
                ToolView {
                    name: name.clone(),
                    upstream: names.get(t.upstream).cloned().unwrap_or_default(),
                    decision: policy.decide_for_all(&facts),
                    effects: facts
                        .effects
                        .iter()
                        .filter(|e| **e != toolgate_review::Effect::Read)
                        .map(|e| e.label().to_owned())
                        .collect(),
                    classes: self.flow_classes(name, &t.definition, trusted),
                    definition: t.definition.clone(),
                }
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let mut withheld: Vec<(String, String)> = offer
            .withheld
            .iter()
            .map(|(name, (_, why))| (name.clone(), why.text.clone()))
            .collect();
        withheld.sort();
        (tools, withheld)
    }

    /// The combinations of the offered tools that can leak or destroy
    /// (`TG-F001`, `TG-F002`), each saying what holds it at run time.
    pub fn flow_findings(&self) -> Vec<toolgate_review::Finding> {
        let offer = self.offer.read();
        let ups = self.ups();
        let mut servers: Vec<toolgate_review::ServerTools> = Vec::new();
        for t in offer.tools.values() {
            let Some(u) = ups.get(t.upstream) else {
                continue;
            };
            match servers.iter_mut().find(|s| s.server == u.config.name) {
                Some(s) => s.tools.push(t.definition.clone()),
                None => servers.push(toolgate_review::ServerTools {
                    server: u.config.name.clone(),
                    tools: vec![t.definition.clone()],
                }),
            }
        }
        drop(offer);
        servers.sort_by(|a, b| a.server.cmp(&b.server));
        for s in &mut servers {
            s.tools.sort_by(|a, b| a.name.cmp(&b.name));
        }
        crate::decide::flows::report(&self.running.read(), &servers)
            .map(|(_, findings)| findings)
            .unwrap_or_default()
    }

    /// The configuration running now (as last loaded or reloaded).
    pub fn running_config(&self) -> Arc<crate::config::GatewayConfig> {
        self.running.read().clone()
    }
}
