//! `[flows]`: flow control across servers — what a call may do after
//! untrusted content or private data has entered its conversation.
//!
//! Layer: `config`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toolgate_review::flows::FlowClass;

use super::{Action, ConfigError, err};
use crate::base::duration::parse_duration;

/// How long a flow's labels last after the last call that added one, when
/// `window` is not given.
const DEFAULT_WINDOW: Duration = Duration::from_secs(30 * 60);

/// The most flows kept in memory by default (the oldest go first).
const DEFAULT_MAX_FLOWS: usize = 100_000;

/// `[flows]` (on unless `enabled = false`, with the default rules).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowsConfig {
    /// Track flows and apply the rules (default true).
    pub enabled: Option<bool>,
    /// What one flow is: `caller` (the default: every call of a caller on
    /// an endpoint within `window`), `auto` (the W3C trace id a host sends
    /// in `_meta.traceparent`, else the caller), or `trace` (only calls
    /// that carry a trace id are tracked). A flow never joins two callers.
    /// `caller` is the default because it cannot be split: a host that
    /// starts a new trace for each call would split `auto` flows apart.
    #[serde(default)]
    pub key: FlowKey,
    /// How long labels last after the last call that added one (`30m`).
    pub window: Option<String>,
    /// The most flows kept in memory; past it, the oldest are forgotten
    /// first (default 100000).
    pub max_flows: Option<usize>,
    /// Classes given to tools instead of those read from their
    /// definitions; the first entry whose globs match decides.
    #[serde(default)]
    pub classes: Vec<ClassesConfig>,
    /// What a call of a class gets after content of other classes entered
    /// its flow; checked in order, the first that matches decides, before
    /// the built-in ones.
    #[serde(default)]
    pub rules: Vec<FlowRuleConfig>,
}

/// `[flows] key`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FlowKey {
    /// The trace id when the host sends one, else the caller.
    Auto,
    /// The caller on the endpoint.
    #[default]
    Caller,
    /// The trace id; calls without one are not tracked.
    Trace,
}

/// One `[[flows.classes]]`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassesConfig {
    /// Globs on the gateway tool name.
    pub tools: Vec<String>,
    /// Its classes (`[]`: none): `untrusted`, `private`, `sink`,
    /// `destructive`.
    pub classes: Vec<String>,
}

/// One `[[flows.rules]]`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowRuleConfig {
    /// The classes that must all have entered the flow.
    pub after: Vec<String>,
    /// The classes of call it applies to (any of them).
    pub calls: Vec<String>,
    /// `allow`, `confirm` or `deny`.
    pub action: Action,
}

/// A checked rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRule {
    /// The classes that must all have entered the flow.
    pub after: Vec<FlowClass>,
    /// The classes of call it applies to.
    pub calls: Vec<FlowClass>,
    /// What such a call gets.
    pub action: Action,
    /// Where it was given (`flows rule 2`, `built-in rule 1`).
    pub name: String,
}

/// `labels` as classes, or what is wrong naming `what`.
fn classes(labels: &[String], what: &str) -> Result<Vec<FlowClass>, ConfigError> {
    labels
        .iter()
        .map(|l| {
            FlowClass::parse(l).ok_or_else(|| {
                err(format!(
                    "{what}: unknown class {l:?} (the classes are untrusted, private, sink, destructive)"
                ))
            })
        })
        .collect()
}

impl FlowsConfig {
    /// Whether flows are tracked.
    pub fn on(&self) -> bool {
        self.enabled != Some(false)
    }

    /// How long labels last.
    pub fn window(&self) -> Result<Duration, ConfigError> {
        match &self.window {
            Some(w) => parse_duration(w).map_err(|e| err(format!("[flows] window: {e}"))),
            None => Ok(DEFAULT_WINDOW),
        }
    }

    /// The most flows kept in memory.
    pub fn max_flows(&self) -> usize {
        self.max_flows.unwrap_or(DEFAULT_MAX_FLOWS)
    }

    /// The rules, the file's first, then the built-in ones: after
    /// untrusted and private content, a sink is confirmed (grants do not
    /// cover it); after untrusted content, a sink or destructive call is
    /// confirmed.
    pub fn rules(&self) -> Result<Vec<FlowRule>, ConfigError> {
        let mut out = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            let name = format!("flows rule {}", i + 1);
            let after = classes(&r.after, &name)?;
            let calls = classes(&r.calls, &name)?;
            if after.is_empty() || calls.is_empty() {
                return Err(err(format!(
                    "{name}: give the classes that entered the flow (`after`) and those of the call (`calls`)"
                )));
            }
            out.push(FlowRule {
                after,
                calls,
                action: r.action,
                name,
            });
        }
        out.push(FlowRule {
            after: vec![FlowClass::Untrusted, FlowClass::Private],
            calls: vec![FlowClass::Sink],
            action: Action::Confirm,
            name: "built-in rule 1".into(),
        });
        out.push(FlowRule {
            after: vec![FlowClass::Untrusted],
            calls: vec![FlowClass::Sink, FlowClass::Destructive],
            action: Action::Confirm,
            name: "built-in rule 2".into(),
        });
        Ok(out)
    }

    /// The configured classes of the gateway tool `name`, with the entry
    /// that gave them, if an entry matches it.
    pub fn classes_of(&self, name: &str) -> Option<(Vec<FlowClass>, String)> {
        self.classes.iter().enumerate().find_map(|(i, c)| {
            c.tools
                .iter()
                .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(name)))
                .then(|| {
                    let given = c
                        .classes
                        .iter()
                        .filter_map(|l| FlowClass::parse(l))
                        .collect();
                    (given, format!("configured: [[flows.classes]] {}", i + 1))
                })
        })
    }

    /// Refuse what cannot work: an unknown class, a bad glob or window.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        self.window()?;
        self.rules()?;
        if self.max_flows == Some(0) {
            return Err(err("[flows] max_flows must be at least 1"));
        }
        for (i, c) in self.classes.iter().enumerate() {
            let what = format!("[[flows.classes]] {}", i + 1);
            classes(&c.classes, &what)?;
            for g in &c.tools {
                glob::Pattern::new(g).map_err(|e| err(format!("{what}: glob {g:?}: {e}")))?;
            }
        }
        Ok(())
    }
}
