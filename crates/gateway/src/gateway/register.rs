//! One tool's entry on an endpoint's server: who may see it, its stack of
//! stages, what the model reads (budget terms included), its limits. The
//! default endpoint and every named one build their entries here.
//!
//! Layer: `gateway`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use toolgate_protocol::types::Tool;
use toolgate_review::flows::FlowClasses;
use toolgate_server::tasks::TaskSupport;
use toolgate_server::{ToolDef, ToolEntry};

use super::Gateway;
use crate::call::forward::forward;
use crate::call::guard::Guard;
use crate::call::stack::{FlowPart, Stack, ToolParts};
use crate::call::upstream::Upstream;
use crate::config::RateLimitConfig;
use crate::decide::budget::Budget;
use crate::decide::policy::{Action, Policy, ToolFacts};

/// What one tool's entry is made of.
pub(super) struct Registration<'a> {
    /// The gateway tool name (`prefix.tool`).
    pub name: &'a str,
    /// What the model reads (its name is the one it calls).
    pub shown: Tool,
    /// The upstream's definition: what is approved and pinned.
    pub definition: &'a Tool,
    pub upstream: &'a Arc<Upstream>,
    pub facts: ToolFacts,
    /// The policy of the endpoint (the global one, on the default).
    pub policy: Arc<Policy>,
    pub budget: Option<Arc<Budget>>,
    pub endpoint_budget: Option<Arc<Budget>>,
    /// Parameters the endpoint fixes.
    pub fixed: Option<Arc<Map<String, Value>>>,
    pub ratelimit: &'a RateLimitConfig,
    /// The per-caller limit of the endpoint it is registered on (its name,
    /// calls per minute), if it has one for this tool.
    pub endpoint_limit: Option<(Arc<str>, u32)>,
    /// Scopes a caller's token needs (an endpoint's `[auth] scopes`).
    pub scopes: &'a [String],
    /// The named endpoint it is registered on, if any.
    pub endpoint: Option<&'a str>,
}

/// `description` with `terms` said after it.
fn with_terms(description: Option<String>, terms: String) -> String {
    match description {
        Some(d) if !d.trim().is_empty() => format!("{}\n\n{terms}", d.trim_end()),
        _ => terms,
    }
}

impl Gateway {
    /// The flow classes of the gateway tool `name` (the upstream's
    /// `definition`): those `[[flows.classes]]` gives it, else those its
    /// definition shows (a `trusted` upstream's annotations as facts).
    pub fn flow_classes(&self, name: &str, definition: &Tool, trusted: bool) -> FlowClasses {
        match self.running.read().flows.classes_of(name) {
            Some((given, why)) => FlowClasses::configured(&given, &why),
            None => FlowClasses::of(definition, trusted),
        }
    }

    /// The flow stage of a tool: none when flows are off or the tool has
    /// no class (its calls then pass the stage untouched).
    fn flow_part(
        &self,
        name: &str,
        definition: &Tool,
        trusted: bool,
        endpoint: Option<&str>,
    ) -> Option<FlowPart> {
        let flows = self.flows.read().clone()?;
        let classes = self.flow_classes(name, definition, trusted).list();
        (!classes.is_empty()).then(|| FlowPart {
            flows,
            store: self.flow_store.clone(),
            classes: classes.into(),
            endpoint: endpoint.unwrap_or_default().into(),
        })
    }

    /// The server entry of one tool.
    pub(super) fn tool_entry(&self, r: Registration<'_>) -> ToolEntry {
        let Registration {
            name,
            mut shown,
            definition,
            upstream,
            facts,
            policy,
            budget,
            endpoint_budget,
            fixed,
            ratelimit,
            endpoint_limit,
            scopes,
            endpoint,
        } = r;
        let config = &upstream.config;
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
        let guard = Arc::new(Guard {
            policy,
            facts,
            definition: definition.clone(),
            server: config.name.clone(),
            trusted: config.trusted,
            approvals: self.approvals.clone().filter(|_| self.page_for_calls),
            grants: self
                .audit
                .clone()
                .map(|a| a as Arc<dyn crate::store::GrantStore>),
            digest: toolgate_review::lock::digest(
                &serde_json::to_value(definition).unwrap_or_default(),
            ),
            called_as: endpoint.map(|e| (e.to_owned(), shown.name.clone())),
        });
        // The model reads the terms with the description, to plan.
        for b in [&budget, &endpoint_budget].into_iter().flatten() {
            shown.description = Some(with_terms(shown.description.take(), b.terms()));
        }
        let stack = Arc::new(Stack::for_tool(ToolParts {
            guard,
            caller_limits: self.caller_limits.clone(),
            per_minute: ratelimit.per_minute(name),
            endpoint_limit,
            shared: self.shared_limits.clone(),
            loops: self.loops.clone(),
            budget,
            endpoint_budget,
            fixed,
            flow: self.flow_part(name, definition, config.trusted, endpoint),
            ledger: self.ledger.clone(),
            identity: upstream.identity().cloned(),
            linking: self.linking.clone(),
        }));
        let names: (Arc<str>, Arc<str>) = (Arc::from(name), Arc::from(shown.name.as_str()));
        let upstream = upstream.clone();
        let upstream_name = definition.name.clone();
        let shown_name = shown.name.clone();
        // A call becomes a gateway task only when its upstream made it
        // one, after any approval and upstream rounds in the request.
        // Relayed as sent: the upstream's content, sanitized, never a
        // second copy of its structured result.
        let mut entry = ToolDef::from_tool(shown)
            .relayed()
            .rename(shown_name)
            .timeout(config.call_timeout() + Duration::from_secs(1))
            .task_support(TaskSupport::Optional)
            .task_started_by_handler();
        if let (Some(rule), Some(notes)) = (visibility, hidden_notes) {
            entry = entry.visible_when(rule).hidden_notes(notes);
        }
        if !scopes.is_empty() {
            entry = entry.scopes(scopes.iter().cloned());
        }
        entry.forward(move |args, ctx| {
            forward(
                stack.clone(),
                names.clone(),
                upstream.clone(),
                upstream_name.clone(),
                args,
                ctx,
            )
        })
    }
}
