//! What `toolgate tools` and `toolgate call` say of a tool's risk: what
//! its server declares and what the review reads from its definition,
//! told apart ("declares nothing; reads (from its name)"). The spec's
//! defaults for a tool that declares nothing are destructive and
//! open-world, and an untrusted server's declarations are only claims, so
//! labelling every such tool "destructive" would alarm rather than inform;
//! what the definition shows is said beside what was declared. A trusted
//! server's declarations are taken as facts.

use toolgate_client::classify;
use toolgate_protocol::types::Tool;
use toolgate_review::{Effect, Effects, Source};

use crate::tools::risk_label;

/// The risk line of `tool`: its declaration, then what its definition
/// shows.
pub fn told(tool: &Tool, trusted: bool) -> String {
    let read = read_from(tool);
    if trusted {
        let (risk, open_world) = classify(tool, true);
        return format!(
            "{} (declared, trusted); {read}",
            risk_label(risk, open_world)
        );
    }
    format!("{}; {read}", declared(tool))
}

/// What the server's annotations claim.
fn declared(tool: &Tool) -> String {
    let Some(a) = &tool.annotations else {
        return "declares nothing".to_owned();
    };
    let what = match (a.read_only_hint, a.destructive_hint) {
        (Some(true), _) => Some("read-only"),
        (_, Some(true)) => Some("destructive"),
        (_, Some(false)) => Some("not destructive"),
        (Some(false), None) => Some("writes"),
        (None, None) => None,
    };
    let world = match a.open_world_hint {
        Some(true) => Some("open-world"),
        Some(false) => Some("closed-world"),
        None => None,
    };
    match (what, world) {
        (None, None) => "declares nothing".to_owned(),
        (Some(w), None) | (None, Some(w)) => format!("declares {w}"),
        (Some(w), Some(o)) => format!("declares {w}, {o}"),
    }
}

/// The verb of an effect.
fn verb(effect: Effect) -> &'static str {
    match effect {
        Effect::Read => "reads",
        Effect::Write => "writes",
        Effect::Delete => "deletes",
        Effect::Send => "sends",
        Effect::Spend => "spends",
        Effect::Execute => "runs code",
    }
}

/// What the review reads from the definition, with where.
fn read_from(tool: &Tool) -> String {
    let effects = Effects::of(tool);
    let mut parts = Vec::new();
    for effect in effects.list() {
        let mut from: Vec<&str> = Vec::new();
        for e in effects.evidence_for(effect) {
            let place = match e.source {
                Source::Name => "its name",
                Source::Description => "its description",
                Source::Parameter(_) => "its parameters",
            };
            if !from.contains(&place) {
                from.push(place);
            }
        }
        parts.push(format!("{} (from {})", verb(effect), from.join(" and ")));
    }
    if !effects.network.is_empty() {
        parts.push(format!(
            "reaches the network (from {})",
            effects.network.join(", ")
        ));
    }
    if parts.is_empty() {
        "no effect read from its definition".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(value: serde_json::Value) -> Tool {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_tool_that_declares_nothing_is_told_by_what_it_shows() {
        let time = tool(serde_json::json!({
            "name": "get_current_time",
            "description": "Get the current time in a time zone.",
            "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}}}
        }));
        assert_eq!(
            told(&time, false),
            "declares nothing; reads (from its name and its description)"
        );
        let delete = tool(serde_json::json!({
            "name": "delete_file",
            "description": "Deletes a file.",
            "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}
        }));
        // A claim that the definition contradicts is shown as the claim.
        assert!(
            told(&delete, false).starts_with("declares read-only; deletes"),
            "{}",
            told(&delete, false)
        );
        assert!(
            told(&delete, true).starts_with("read-only, open-world (declared, trusted); deletes"),
            "{}",
            told(&delete, true)
        );
        let blank = tool(serde_json::json!({"name": "x", "inputSchema": {"type": "object"}}));
        assert_eq!(
            told(&blank, false),
            "declares nothing; no effect read from its definition"
        );
    }
}
