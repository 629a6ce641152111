//! Who may call which tool, and which calls a person approves first.
//!
//! Rules come from `[policy]` in the configuration. The first rule that
//! matches a call decides; when none does, `default` decides; without a
//! `default`, a tool is allowed only when its upstream is `trusted` and its
//! annotations say `readOnlyHint: true`, and every other call is confirmed.
//! (Annotations of an untrusted server are hints it wrote itself, so they
//! never loosen the policy.)
//!
//! Layer: `decide`.

use std::sync::Arc;
use std::time::Duration;

use toolgate_protocol::types::Tool;
use toolgate_review::{Effect, classify_effects};
use toolgate_server::AuthContext;

use crate::config::ConfigError;
pub use crate::config::{Action, PolicyConfig, RuleConfig};

struct Rule {
    tools: Vec<glob::Pattern>,
    effects: Vec<Effect>,
    subjects: Vec<glob::Pattern>,
    scopes: Vec<String>,
    action: Action,
    remember: Option<Duration>,
    /// `rule N (tools […]; …)`: which rule, by its conditions.
    described: String,
}

/// `rule N (tools ["a.*"]; effects [delete])`: the rule's place and the
/// conditions it was written with, so an audit row names it unambiguously.
fn describe(n: usize, rule: &RuleConfig) -> String {
    let list = |items: Vec<String>| items.join(", ");
    let quoted = |items: &[String]| list(items.iter().map(|i| format!("{i:?}")).collect());
    let mut parts = Vec::new();
    if !rule.tools.is_empty() {
        parts.push(format!("tools [{}]", quoted(&rule.tools)));
    }
    if !rule.effects.is_empty() {
        let effects = rule.effects.iter().map(|e| e.label().to_owned()).collect();
        parts.push(format!("effects [{}]", list(effects)));
    }
    if !rule.subjects.is_empty() {
        parts.push(format!("subjects [{}]", quoted(&rule.subjects)));
    }
    if !rule.scopes.is_empty() {
        parts.push(format!("scopes [{}]", quoted(&rule.scopes)));
    }
    if parts.is_empty() {
        format!("rule {n} (every call)")
    } else {
        format!("rule {n} ({})", parts.join("; "))
    }
}

impl Rule {
    fn matches_tool(&self, tool: &ToolFacts) -> bool {
        (self.tools.is_empty() || self.tools.iter().any(|p| p.matches(&tool.name)))
            && (self.effects.is_empty() || self.effects.iter().any(|e| tool.effects.contains(e)))
    }

    fn about_callers(&self) -> bool {
        !self.subjects.is_empty() || !self.scopes.is_empty()
    }

    /// Every caller `other` matches, this rule matches too (its caller
    /// conditions are none, or the same subjects with fewer scopes).
    fn covers_callers_of(&self, other: &Rule) -> bool {
        let same_subjects = self.subjects.is_empty()
            || (self.subjects.len() == other.subjects.len()
                && self
                    .subjects
                    .iter()
                    .zip(&other.subjects)
                    .all(|(a, b)| a.as_str() == b.as_str()));
        same_subjects && self.scopes.iter().all(|s| other.scopes.contains(s))
    }

    fn matches_caller(&self, caller: Option<&AuthContext>) -> bool {
        let subject = caller.and_then(AuthContext::subject);
        let subject_ok = self.subjects.is_empty()
            || subject.is_some_and(|s| self.subjects.iter().any(|p| p.matches(s)));
        let scopes_ok = self.scopes.is_empty()
            || caller.is_some_and(|c| self.scopes.iter().all(|s| c.has_scope(s)));
        subject_ok && scopes_ok
    }
}

/// What the policy needs to know about a tool.
#[derive(Clone, Debug)]
pub struct ToolFacts {
    /// The gateway name.
    pub name: String,
    /// Effect classes found in its upstream name, description and parameters.
    pub effects: Vec<Effect>,
    /// Its upstream is trusted and it says `readOnlyHint: true`.
    pub trusted_read_only: bool,
}

impl ToolFacts {
    /// Facts of a tool named `name` at the gateway and `upstream_name` at
    /// its server, known only by its name, description and read-only hint
    /// (a tool without parameters; see [`ToolFacts::of`] for a whole one).
    #[cfg(test)]
    pub fn new(
        name: &str,
        upstream_name: &str,
        description: Option<&str>,
        read_only_hint: Option<bool>,
        trusted: bool,
    ) -> Self {
        let tool = Tool {
            name: upstream_name.to_owned(),
            title: None,
            description: description.map(str::to_owned),
            icons: None,
            input_schema: serde_json::Map::new(),
            output_schema: None,
            annotations: read_only_hint.map(|hint| toolgate_protocol::types::ToolAnnotations {
                read_only_hint: Some(hint),
                ..Default::default()
            }),
            meta: None,
            extra: serde_json::Map::new(),
        };
        Self::of(name, &tool, trusted)
    }

    /// Facts of an upstream tool offered as `name`: its effects read from
    /// its name, description and parameters together.
    pub fn of(name: &str, tool: &Tool, trusted: bool) -> Self {
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
        Self {
            name: name.to_owned(),
            effects: classify_effects(tool),
            trusted_read_only: trusted && read_only == Some(true),
        }
    }
}

/// A decision and why it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What happens.
    pub action: Action,
    /// `rule N` (1-based, in file order), `default`, or `built-in default`:
    /// what the caller is told.
    pub reason: String,
    /// The reason with the rule's conditions (`rule 2 (tools ["rec.*"])`):
    /// what the audit store records.
    pub rule: String,
    /// How long a person may approve the tool for this caller at once
    /// (the rule's `remember`), when the action is confirm.
    pub remember: Option<Duration>,
}

/// The compiled `[policy]`, or an endpoint's rules over it.
pub struct Policy {
    default: Option<Action>,
    rules: Vec<Rule>,
    /// The global policy an endpoint's rules narrow, checked first.
    parent: Option<(Arc<Policy>, String)>,
}

/// How strict an action is: deny over confirm over allow.
fn strictness(action: Action) -> u8 {
    match action {
        Action::Allow => 0,
        Action::Confirm => 1,
        Action::Deny => 2,
    }
}

/// The stricter of the global decision and the endpoint's (the global
/// one on a tie: it applies first).
fn stricter(global: Decision, endpoint: Option<Decision>) -> Decision {
    match endpoint {
        Some(e) if strictness(e.action) > strictness(global.action) => e,
        _ => global,
    }
}

impl Policy {
    /// Compile `[policy]`; a bad glob is an error naming the rule.
    pub fn new(config: &PolicyConfig) -> Result<Self, ConfigError> {
        let mut rules = Vec::new();
        for (i, rule) in config.rules.iter().enumerate() {
            rules.push(Rule {
                remember: rule.remember_span(i)?,
                tools: rule.tool_globs(i)?,
                effects: rule.effects.clone(),
                subjects: rule.subject_globs(i)?,
                scopes: rule.scopes.clone(),
                action: rule.action,
                described: describe(i + 1, rule),
            });
        }
        Ok(Self {
            default: config.default,
            rules,
            parent: None,
        })
    }

    /// The rules of the endpoint `endpoint` over `global`: the global
    /// policy decides first, and the stricter of its decision and the
    /// endpoint's holds, so an endpoint narrows what the file allows and
    /// never widens it. The endpoint's `default`, when set, decides the
    /// calls none of its rules match; unset, those keep the global
    /// decision.
    pub fn within(
        global: Arc<Policy>,
        endpoint: &str,
        config: &PolicyConfig,
    ) -> Result<Self, ConfigError> {
        let mut own = Self::new(config)?;
        for rule in &mut own.rules {
            rule.described = format!("endpoint {endpoint} {}", rule.described);
        }
        own.parent = Some((global, endpoint.to_owned()));
        Ok(own)
    }

    /// This policy's own decision, for an endpoint's: its first matching
    /// rule, else its `default` when set.
    fn own(&self, tool: &ToolFacts, caller: Option<&AuthContext>) -> Option<Decision> {
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.matches_tool(tool) && rule.matches_caller(caller) {
                return Some(self.by_rule(i, rule));
            }
        }
        self.default.map(|_| self.fallback(tool))
    }

    fn fallback(&self, tool: &ToolFacts) -> Decision {
        match self.default {
            Some(action) => Decision {
                action,
                remember: None,
                reason: self.named("default"),
                rule: self.named(&format!("default ({action})")),
            },
            None => Decision {
                remember: None,
                action: if tool.trusted_read_only {
                    Action::Allow
                } else {
                    Action::Confirm
                },
                reason: "built-in default".into(),
                rule: "built-in default (allow trusted read-only tools, confirm the rest)".into(),
            },
        }
    }

    fn by_rule(&self, i: usize, rule: &Rule) -> Decision {
        Decision {
            action: rule.action,
            remember: rule.remember,
            reason: self.named(&format!("rule {}", i + 1)),
            rule: rule.described.clone(),
        }
    }

    /// `what`, said as the endpoint's when this is an endpoint's policy.
    fn named(&self, what: &str) -> String {
        match &self.parent {
            Some((_, endpoint)) => format!("endpoint {endpoint} {what}"),
            None => what.to_owned(),
        }
    }

    /// The rules (described) whose tool conditions match none of `tools`
    /// (rules that cannot decide any call of these tools), and each
    /// pattern of a rule with several that matches none.
    pub fn unmatched<'a>(
        &self,
        tools: impl IntoIterator<Item = &'a ToolFacts> + Clone,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for rule in &self.rules {
            if !tools.clone().into_iter().any(|t| rule.matches_tool(t)) {
                out.push(rule.described.clone());
                continue;
            }
            // A rule that matches something may still name a tool that is
            // not there (an imported `autoApprove` of a renamed tool).
            if rule.tools.len() > 1 {
                for pattern in &rule.tools {
                    if !tools.clone().into_iter().any(|t| pattern.matches(&t.name)) {
                        out.push(format!(
                            "{}: its pattern {:?}",
                            rule.described,
                            pattern.as_str()
                        ));
                    }
                }
            }
        }
        out
    }

    /// Rules that never decide a call of `tools` because earlier ones
    /// decide every call they would (first match wins): each said as the
    /// shadowed rule and the earlier rules that take its calls. A deny
    /// after a confirm that already catches the same tools is the usual
    /// case, and a silent one: its author thinks those tools are denied.
    pub fn shadowed<'a>(
        &self,
        tools: impl IntoIterator<Item = &'a ToolFacts> + Clone,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for (j, later) in self.rules.iter().enumerate() {
            let mut takers: Vec<usize> = Vec::new();
            let mut any = false;
            let covered = tools
                .clone()
                .into_iter()
                .filter(|t| later.matches_tool(t))
                .all(|t| {
                    any = true;
                    let taker = self.rules[..j].iter().position(|earlier| {
                        earlier.matches_tool(t) && earlier.covers_callers_of(later)
                    });
                    if let Some(i) = taker
                        && !takers.contains(&i)
                    {
                        takers.push(i);
                    }
                    taker.is_some()
                });
            if any && covered {
                let earlier: Vec<&str> = takers
                    .iter()
                    .map(|i| self.rules[*i].described.as_str())
                    .collect();
                out.push(format!(
                    "{} never applies: {} decide{} every call it would",
                    later.described,
                    earlier.join(" and "),
                    if earlier.len() == 1 { "s" } else { "" }
                ));
            }
        }
        out
    }

    /// The decision for `caller` calling `tool`.
    pub fn decide(&self, tool: &ToolFacts, caller: Option<&AuthContext>) -> Decision {
        if let Some((global, _)) = &self.parent {
            return stricter(global.decide(tool, caller), self.own(tool, caller));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.matches_tool(tool) && rule.matches_caller(caller) {
                return self.by_rule(i, rule);
            }
        }
        self.fallback(tool)
    }

    /// The decision for `tool` whoever calls, if no rule about callers
    /// can come first: a tool denied this way is not listed at all.
    pub fn decide_for_all(&self, tool: &ToolFacts) -> Option<Decision> {
        if let Some((global, _)) = &self.parent {
            let first = global.decide_for_all(tool);
            // Denied by the file for everyone: nothing an endpoint says
            // changes that.
            if let Some(d) = first.as_ref().filter(|d| d.action == Action::Deny) {
                return Some(d.clone());
            }
            let own = self.own_for_all(tool)?;
            if let Some(d) = own.as_ref().filter(|d| d.action == Action::Deny) {
                return Some(d.clone());
            }
            return Some(stricter(first?, own));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.matches_tool(tool) {
                continue;
            }
            if rule.about_callers() {
                return None;
            }
            return Some(self.by_rule(i, rule));
        }
        Some(self.fallback(tool))
    }

    /// An endpoint's own decision whoever calls: `None` when a rule about
    /// callers comes first, `Some(None)` when it has no opinion.
    fn own_for_all(&self, tool: &ToolFacts) -> Option<Option<Decision>> {
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.matches_tool(tool) {
                continue;
            }
            if rule.about_callers() {
                return None;
            }
            return Some(Some(self.by_rule(i, rule)));
        }
        Some(self.default.map(|_| self.fallback(tool)))
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
