//! Effects: what a tool looks like it does, compared with what it claims.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Subject;
use crate::Finding;
use crate::text::words;

/// A kind of effect a tool can have.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Reads data.
    Read,
    /// Creates or changes data.
    Write,
    /// Removes data.
    Delete,
    /// Sends something to someone.
    Send,
    /// Spends money.
    Spend,
    /// Runs code or commands.
    Execute,
}

const VERBS: &[(Effect, &[&str])] = &[
    (
        Effect::Delete,
        &[
            "delete", "remove", "destroy", "drop", "purge", "erase", "wipe", "truncate", "revoke",
            "unlink", "rm",
        ],
    ),
    (
        Effect::Send,
        &[
            "send", "email", "mail", "post", "publish", "notify", "message", "tweet", "sms",
            "share", "invite", "reply", "forward",
        ],
    ),
    (
        Effect::Spend,
        &[
            "pay",
            "payment",
            "purchase",
            "buy",
            "charge",
            "checkout",
            "order",
            "transfer",
            "withdraw",
            "refund",
            "invoice",
            "spend",
            "subscribe",
        ],
    ),
    (
        Effect::Execute,
        &[
            "exec", "execute", "run", "shell", "command", "eval", "script", "spawn", "deploy",
            "invoke", "sql",
        ],
    ),
    (
        Effect::Write,
        &[
            "write", "create", "update", "set", "add", "insert", "edit", "modify", "save",
            "upload", "put", "patch", "rename", "move", "commit", "push", "merge", "append",
            "replace", "reset",
        ],
    ),
    (
        Effect::Read,
        &[
            "get", "read", "list", "search", "find", "fetch", "query", "show", "describe",
            "lookup", "view", "count", "check", "download", "inspect", "status",
        ],
    ),
];

/// The effects a tool appears to have: the first verb of its name (its
/// strongest evidence: `lookup_order` reads, `place_order` spends), else
/// the verbs of its description's first sentence.
pub fn classify(name: &str, description: Option<&str>) -> Vec<Effect> {
    let effect_of = |w: &str| {
        VERBS
            .iter()
            .find(|(_, verbs)| verbs.contains(&w))
            .map(|(e, _)| *e)
    };
    if let Some(effect) = words(name).iter().find_map(|w| effect_of(w)) {
        return vec![effect];
    }
    let mut found: Vec<Effect> = description
        .map(|d| words(d.split(['.', '\n']).next().unwrap_or("")))
        .unwrap_or_default()
        .iter()
        .filter_map(|w| effect_of(w))
        .collect();
    found.sort();
    found.dedup();
    found
}

pub(crate) fn check(s: &Subject<'_>, out: &mut Vec<Finding>) {
    let effects = classify(&s.tool.name, s.tool.description.as_deref());
    let risky: Vec<Effect> = effects
        .iter()
        .copied()
        .filter(|e| *e != Effect::Read)
        .collect();
    let hints = s.tool.annotations.clone().unwrap_or_default();
    let label = |e: &[Effect]| {
        e.iter()
            .map(|x| format!("{x:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !risky.is_empty() {
        if hints.read_only_hint == Some(true) {
            out.push(s.finding(
                "TG-E001",
                format!("the tool looks like it can {} but claims readOnlyHint: true", label(&risky)),
                "annotations.readOnlyHint: true",
                "correct the annotation, or rename and re-describe the tool if it really only reads",
            ));
        } else if hints.destructive_hint == Some(false) && risky.contains(&Effect::Delete) {
            out.push(s.finding(
                "TG-E001",
                "the tool looks like it deletes but claims destructiveHint: false",
                "annotations.destructiveHint: false",
                "set destructiveHint: true",
            ));
        }
        out.push(s.finding(
            "TG-E003",
            format!(
                "the tool can {}: a person should approve each call",
                label(&risky)
            ),
            format!("name: {:?}", s.tool.name),
            "keep human approval on for this tool",
        ));
    }
    if s.tool.annotations.is_none() {
        out.push(s.finding(
            "TG-E002",
            "no annotations: clients must assume destructive and open-world",
            "annotations: (absent)",
            "declare readOnlyHint / destructiveHint / idempotentHint / openWorldHint truthfully",
        ));
    }
}
