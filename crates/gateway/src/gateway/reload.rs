//! Reloading the configuration without a restart.
//!
//! The new configuration is checked first (its policy compiles, its
//! servers are valid): a bad one changes nothing. Then only what changed
//! moves: an upstream whose entry changed is restarted in its slot, a
//! removed one is stopped and its tools withdrawn, a new one is started;
//! the policy and the rate-limit rules are swapped, and every tool is
//! registered anew under them. Calls in flight finish with what they
//! started with; the listeners stay bound. Sections that only a restart
//! can change (`[store]`, `[audit]`, `[state]`, `[approval]`, `[auth]`,
//! `[telemetry]`, `[ratelimit] redis`, the endpoint at `/mcp`) are named
//! when they differ. Endpoints are added, changed and removed: one whose
//! path, instructions or callers changed is built anew; the listener
//! follows ([`Gateway::on_endpoints_changed`]).
//!
//! Layer: `gateway`.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::*;

/// How the last reload ended (`/status`'s `last_reload`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LastReload {
    /// When (ms since the Unix epoch).
    pub time_ms: i64,
    /// Whether it was applied; `false`: refused, nothing changed.
    pub applied: bool,
    /// What changed, or why it was refused.
    pub said: String,
}

/// What a reload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Upstreams started by it.
    pub added: Vec<String>,
    /// Upstreams restarted because their entry changed.
    pub changed: Vec<String>,
    /// Upstreams stopped because their entry is gone (or disabled).
    pub removed: Vec<String>,
    /// The `[policy]`, `[ratelimit]` or `[loops]` rules differ.
    pub rules_changed: bool,
    /// Sections that differ but take effect only after a restart.
    pub needs_restart: Vec<String>,
    /// Endpoints built by it: new, moved, or with other instructions or
    /// callers.
    pub endpoints_added: Vec<String>,
    /// Endpoints no longer served (a rebuilt one is in both lists).
    pub endpoints_removed: Vec<String>,
}

impl Reloaded {
    /// One line: what changed.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (what, names) in [
            ("added", &self.added),
            ("restarted", &self.changed),
            ("removed", &self.removed),
            ("endpoints added:", &self.endpoints_added),
            ("endpoints removed:", &self.endpoints_removed),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        if self.rules_changed {
            parts.push("policy and rate limits applied".into());
        }
        if !self.needs_restart.is_empty() {
            parts.push(format!(
                "{} changed but take effect after a restart",
                self.needs_restart.join(", ")
            ));
        }
        if parts.is_empty() {
            "nothing changed".into()
        } else {
            parts.join("; ")
        }
    }
}

/// The sections a reload cannot change, each as it reads (secrets
/// redacted), one per line, for comparing.
pub(super) fn fixed_sections(config: &GatewayConfig) -> String {
    [
        format!("[store] {:?}", config.store),
        format!("[audit] {:?}", config.audit),
        format!("[state] {:?}", config.state),
        format!("[approval] {:?}", config.approval),
        format!("[console] {:?}", config.console),
        format!("[auth] {:?}", config.auth),
        format!("[telemetry] {:?}", config.telemetry),
        super::endpoints::fixed_layout(config),
        format!(
            "[ratelimit] redis {:?} {:?}",
            config
                .ratelimit
                .redis
                .as_deref()
                .map(crate::base::redact::store_url),
            config.ratelimit.on_outage
        ),
    ]
    .join("\n")
}

/// `[policy]` and the rate-limit rules, as they read.
pub(super) fn rules_of(config: &GatewayConfig) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?}",
        config.policy,
        config.ratelimit.rules,
        config.loops,
        config.budget,
        config.endpoints,
        config.flows
    )
}

/// The section names of the lines that differ.
fn differing(before: &str, after: &str) -> Vec<String> {
    before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .filter_map(|(a, _)| a.split(' ').next().map(str::to_owned))
        .collect()
}

impl Gateway {
    /// Apply `config` in place of the running configuration. `Err` (and
    /// nothing changed) when it cannot work: a policy that does not
    /// compile, tool names that would collide.
    pub async fn reload(&self, mut config: GatewayConfig) -> Result<Reloaded, GatewayError> {
        // A console started by `serve --console` is not in the file: it
        // stays as it runs.
        if config.console.is_none() {
            config.console.clone_from(&self.running.read().console);
        }
        let outcome = self.try_reload(config).await;
        self.last_reload(&outcome);
        outcome
    }

    /// Load the file at `path` and apply it, as SIGHUP, `--watch` and the
    /// console's Reload button do: a file that does not load is refused
    /// like one that cannot work, and either way the outcome is recorded.
    pub async fn reload_from(&self, path: &std::path::Path) -> Result<Reloaded, GatewayError> {
        match GatewayConfig::load(path) {
            Ok(config) => self.reload(config).await,
            Err(e) => {
                let outcome = Err(GatewayError::Config(e));
                self.last_reload(&outcome);
                outcome
            }
        }
    }

    /// [`Gateway::reload`], before its outcome is recorded.
    async fn try_reload(&self, config: GatewayConfig) -> Result<Reloaded, GatewayError> {
        // The checks start runs: a file start would refuse changes nothing.
        let super::validate::Checked { policy, budgets } = super::validate::check(&config)?;
        let flows = crate::decide::flows::Flows::new(&config.flows)?.map(Arc::new);
        let mut report = Reloaded {
            needs_restart: differing(&self.fixed, &fixed_sections(&config)),
            ..Reloaded::default()
        };
        let ups = self.ups();
        let retired = self.retired.read().clone();
        let live: HashMap<&str, usize> = ups
            .iter()
            .enumerate()
            .filter(|(i, _)| !retired.contains(i))
            .map(|(i, u)| (u.config.name.as_str(), i))
            .collect();
        let wanted: BTreeMap<&str, &crate::config::UpstreamConfig> = config
            .servers
            .iter()
            .filter(|(_, c)| c.enabled)
            .map(|(n, c)| (n.as_str(), c))
            .collect();
        let mut slots: Vec<Arc<Upstream>> = ups.as_ref().clone();
        let mut restarted = Vec::new();
        let mut stopped = Vec::new();
        for (name, &i) in &live {
            match wanted.get(name) {
                Some(c) if **c == ups[i].config => {}
                Some(c) => {
                    slots[i] = Upstream::new((*c).clone(), &self.starting);
                    restarted.push(i);
                    report.changed.push((*name).to_owned());
                }
                None => {
                    stopped.push(i);
                    report.removed.push((*name).to_owned());
                }
            }
        }
        let mut started = Vec::new();
        for (name, c) in &wanted {
            if !live.contains_key(name) {
                started.push(slots.len());
                slots.push(Upstream::new((*c).clone(), &self.starting));
                report.added.push((*name).to_owned());
            }
        }
        // The new and changed upstreams are started and listed now, and
        // their tools' names checked with everything else offered, as at
        // start: a clash refuses the whole reload.
        let fresh: Vec<usize> = restarted.iter().chain(&started).copied().collect();
        let mut listing = tokio::task::JoinSet::new();
        for &i in &fresh {
            let upstream = slots[i].clone();
            listing.spawn(async move { (i, upstream.list().await) });
        }
        let mut listed: HashMap<usize, Vec<Tool>> = HashMap::new();
        while let Some(joined) = listing.join_next().await {
            if let Ok((i, Ok(tools))) = joined {
                listed.insert(i, tools);
            }
        }
        let kept: Vec<(usize, Vec<String>)> = {
            let seen = self.seen.read();
            live.values()
                .filter(|i| !stopped.contains(i) && !restarted.contains(i))
                .map(|&i| {
                    // What it offers now, by its upstream names.
                    let prefix = format!("{}.", slots[i].config.prefix());
                    let names = seen.get(&i).map_or_else(Vec::new, |facts| {
                        facts
                            .iter()
                            .map(|f| f.name.strip_prefix(&prefix).unwrap_or(&f.name).to_owned())
                            .collect()
                    });
                    (i, names)
                })
                .collect()
        };
        let clash = super::validate::unique_offered(
            kept.iter()
                .map(|(i, names)| {
                    (
                        &slots[*i].config,
                        names.iter().map(String::as_str).collect(),
                    )
                })
                .chain(
                    listed
                        .iter()
                        .map(|(i, tools)| (&slots[*i].config, super::validate::names_of(tools))),
                ),
        );
        if let Err(clash) = clash {
            for &i in &fresh {
                slots[i].stop();
            }
            return Err(clash.into());
        }
        let planned =
            super::endpoints::plan(&self.endpoints(), &config, &policy, &self.endpoint_parts)
                .and_then(|plan| {
                    // The listener serves the endpoints added from here on; in-flight
                    // calls on removed ones finish where they began.
                    self.endpoints_changing(&plan.endpoints)?;
                    Ok(plan)
                });
        let plan = match planned {
            Ok(plan) => plan,
            Err(e) => {
                for &i in &fresh {
                    slots[i].stop();
                }
                return Err(e);
            }
        };
        report.endpoints_added.clone_from(&plan.added);
        report.endpoints_removed.clone_from(&plan.removed);
        let rules = rules_of(&config);
        report.rules_changed = *self.rules.read() != rules;
        *self.rules.write() = rules;
        // From here on the new configuration is the gateway's.
        {
            let mut names = self.names.write();
            names.resize(slots.len(), String::new());
            for (i, u) in slots.iter().enumerate() {
                names[i].clone_from(&u.config.name);
            }
        }
        *self.upstreams.write() = Arc::new(slots);
        *self.policy.write() = policy;
        *self.ratelimit.write() = Arc::new(config.ratelimit.clone());
        self.loops.configure(&config.loops)?;
        *self.flows.write() = flows;
        *self.budgets.write() = budgets;
        for (endpoint, section, policy, budgets) in plan.reconfigured {
            *endpoint.config.write() = section;
            *endpoint.policy.write() = policy;
            *endpoint.budgets.write() = budgets;
        }
        *self.endpoints.write() = plan.endpoints;
        *self.running.write() = Arc::new(config.clone());
        *self.disabled.write() = config
            .servers
            .values()
            .filter(|s| !s.enabled)
            .map(super::disabled_status)
            .collect();
        {
            let mut retired = self.retired.write();
            retired.extend(stopped.iter().copied());
            for i in restarted.iter().chain(&started) {
                retired.remove(i);
            }
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
        for &i in &stopped {
            self.withdraw(i);
            ups[i].on_start(None);
            ups[i].stop();
        }
        for &i in &restarted {
            self.withdraw(i);
            ups[i].on_start(None);
            ups[i].stop();
        }
        let slots = self.ups();
        for &i in restarted.iter().chain(&started) {
            self.watch_connections(i, &slots[i]);
            // Connected already (listed above): followed from now on.
            if listed.contains_key(&i)
                && let Ok(client) = slots[i].client()
            {
                self.follow(i, &client);
            }
            self.supervise(i);
        }
        // Every live slot is listed again and its tools registered under
        // the new rules.
        let mut listings = tokio::task::JoinSet::new();
        for (i, upstream) in slots.iter().enumerate() {
            if self.retired.write().contains(&i) {
                continue;
            }
            let upstream = upstream.clone();
            listings.spawn(async move { (i, upstream.list().await) });
        }
        while let Some(joined) = listings.join_next().await {
            match joined {
                Ok((i, Ok(tools))) => {
                    self.apply(i, &tools);
                    self.refresh_others(i).await;
                }
                Ok((i, Err(e))) => {
                    tracing::warn!(server = %slots[i].config.name, error = %e, "not listed after the reload; its tools appear when it is back");
                }
                Err(_) => {}
            }
        }
        self.publish_hints();
        self.record(&report).await;
        Ok(report)
    }

    /// Withdraw every tool, prompt and resource of slot `i`.
    fn withdraw(&self, i: usize) {
        self.apply(i, &[]);
        let mut offer = self.offer.write();
        offer.withheld.retain(|_, (u, _)| *u != i);
        let server = &self.server;
        offer.prompts.retain(|name, (u, _)| {
            *u != i || {
                server.remove_prompt(name);
                false
            }
        });
        offer.resources.retain(|uri, (u, _)| {
            *u != i || {
                server.remove_resource(uri);
                false
            }
        });
        offer.templates.retain(|t, (u, _)| {
            *u != i || {
                server.remove_template(t);
                false
            }
        });
        self.seen.write().remove(&i);
        self.drift.write().retain(|_, d| d.upstream != i);
    }

    /// Keep how the last reload ended, for `/status`.
    fn last_reload(&self, outcome: &Result<Reloaded, GatewayError>) {
        let (applied, said) = match outcome {
            Ok(report) => (true, report.summary()),
            Err(e) => {
                let said = toolgate_protocol::error::with_causes(e);
                tracing::warn!("not reloaded, the running configuration stays: {said}");
                (false, said)
            }
        };
        *self.reloaded.write() = Some(LastReload {
            time_ms: crate::base::time::now_ms(SystemTime::now()),
            applied,
            said,
        });
    }

    /// How the last reload ended, if there was one.
    pub fn last_reload_outcome(&self) -> Option<LastReload> {
        self.reloaded.read().clone()
    }

    /// Log the reload and write it to the audit store.
    async fn record(&self, report: &Reloaded) {
        let summary = report.summary();
        tracing::info!("configuration reloaded: {summary}");
        if let Some(store) = &self.audit {
            let row = crate::store::AuditRow {
                time_ms: crate::base::time::now_ms(SystemTime::now()),
                tool: "toolgate.reload".into(),
                arguments_digest: String::new(),
                rule: Some(summary),
                status: "reloaded".into(),
                ..Default::default()
            };
            if let Err(e) = store.write(row).await {
                tracing::warn!(error = %e, "the reload was not recorded in the audit store");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_says_what_moved() {
        let r = Reloaded {
            added: vec!["b".into()],
            removed: vec!["c".into()],
            rules_changed: true,
            needs_restart: vec!["[store]".into()],
            ..Default::default()
        };
        assert_eq!(
            r.summary(),
            "added b; removed c; policy and rate limits applied; [store] changed but take effect after a restart"
        );
        assert_eq!(Reloaded::default().summary(), "nothing changed");
        let a = "[store] x\n[audit] y";
        assert_eq!(differing(a, "[store] x\n[audit] z"), ["[audit]"]);
    }
}
