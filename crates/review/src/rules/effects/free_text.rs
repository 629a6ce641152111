//! Free text for what a tool runs or where it sends (TG-S009).
//!
//! The seed's checklist asks for fixed choices where a tool acts: a shell
//! tool that takes any string runs any command, a sender that takes any
//! address reaches anyone. `enum`, `const` or `pattern` narrow the choice. A
//! length bound or a `format` alone does not (`rm -rf ~` is short, and every
//! address is a valid `email`), so they leave the finding in place.

use serde_json::Value;

use super::lexicon::DESTINATION_PARAMS;
use super::{Effect, Effects};
use crate::Finding;
use crate::rules::Subject;
use crate::text::words;

pub(crate) fn check(s: &Subject<'_>, effects: &Effects, out: &mut Vec<Finding>) {
    let runs = effects.has(Effect::Execute);
    let sends = effects.has(Effect::Send);
    if !runs && !sends {
        return;
    }
    let Some(properties) = s.properties() else {
        return;
    };
    for (name, schema) in properties {
        let runner = runs
            && effects
                .evidence_for(Effect::Execute)
                .any(|e| e.text == *name && e.source != super::Source::Name);
        let destination = sends && DESTINATION_PARAMS.contains(&words(name).join("_").as_str());
        if !(runner || destination) || !free(schema) {
            continue;
        }
        let (what, fix) = if runner {
            (
                "the thing it runs: any command or code can be sent",
                "constrain it: an enum of the allowed commands, or a pattern for the allowed form, with a maxLength; a length bound alone limits size, not what runs",
            )
        } else {
            (
                "where it sends: any destination can be given",
                "constrain it: an enum of the allowed destinations, or a pattern that pins them (a host, a domain), with a maxLength",
            )
        };
        out.push(s.finding(
            "TG-S009",
            format!("/{name} is unconstrained free text for {what}"),
            format!("inputSchema/properties/{name}: {schema}"),
            fix,
        ));
    }
}

/// Whether a parameter's schema admits any string (or a list of any strings).
fn free(schema: &Value) -> bool {
    let Some(obj) = schema.as_object() else {
        return schema == &Value::Bool(true);
    };
    if ["enum", "const", "pattern"]
        .iter()
        .any(|k| obj.contains_key(*k))
    {
        return false;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = obj.get(key).and_then(Value::as_array) {
            return branches.iter().any(free);
        }
    }
    match obj.get("type").and_then(Value::as_str) {
        Some("array") => obj.get("items").is_none_or(free),
        Some("string") | None => true,
        Some(_) => false,
    }
}
