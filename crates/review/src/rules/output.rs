//! Output: structured results and stateful handles.

use super::Subject;
use super::effects::{Effect, Effects, Source};
use crate::Finding;
use crate::text::words;

const DATA_VERBS: &[&str] = &[
    "get", "list", "search", "fetch", "query", "find", "lookup", "read", "describe", "show",
];
const CREATE_VERBS: &[&str] = &[
    "create", "open", "start", "new", "begin", "allocate", "reserve",
];
const STATEFUL_NOUNS: &[&str] = &[
    "session",
    "basket",
    "cart",
    "handle",
    "context",
    "transaction",
    "browser",
    "page",
    "connection",
    "job",
    "lock",
    "lease",
    "token",
    "workspace",
    "sandbox",
];
const LIFETIME_WORDS: &[&str] = &[
    "expire",
    "expires",
    "expiry",
    "ttl",
    "lifetime",
    "valid",
    "hours",
    "hour",
    "minutes",
    "minute",
    "days",
    "day",
    "seconds",
    "until",
    "inactivity",
    "lives",
];

/// Words by which a description states what a call costs, or its terms.
const COST_WORDS: &[&str] = &[
    "cost", "costs", "price", "prices", "priced", "pricing", "fee", "fees", "charge", "charges",
    "charged", "charging", "billed", "billing", "free", "total", "amount", "usd", "eur", "gbp",
    "paid", "payable", "tariff", "rate", "rates",
];

pub(crate) fn check(s: &Subject<'_>, effects: &Effects, out: &mut Vec<Finding>) {
    if effects.has(Effect::Spend) {
        let description = s.tool.description.as_deref().unwrap_or("");
        let stated = description.contains(['$', '€', '£'])
            || words(description)
                .iter()
                .any(|w| COST_WORDS.contains(&w.as_str()));
        if !stated {
            out.push(s.finding(
                "TG-O003",
                "the tool spends money but its description does not say what a call costs",
                format!(
                    "{}; description: {description:?}",
                    effects.explain(&[Effect::Spend])
                ),
                "state what a call costs and when, e.g. \"Costs 25 credits per successful lookup; nothing when nothing is found\" or \"Charges the basket's total to the saved card\", so the model can plan the cheaper path",
            ));
        }
    }
    let name_words = words(&s.tool.name);
    let first = name_words.first().map(String::as_str).unwrap_or("");
    // The name's verb, wherever it stands (`slack_get_users`, `github.list_issues`).
    let verb = effects
        .evidence
        .iter()
        .find(|e| e.source == Source::Name)
        .map_or("", |e| e.text.as_str());
    // Or, for a name without a verb (`maps_geocode`, `git_log`), a
    // description that says it returns something and nothing riskier.
    let described = effects.risky().is_empty()
        && effects
            .evidence_for(Effect::Read)
            .any(|e| e.source == Source::Description);
    if s.tool.output_schema.is_none() && (DATA_VERBS.contains(&verb) || described) {
        out.push(s.finding(
            "TG-O001",
            "the tool returns data but declares no outputSchema",
            format!("name: {:?}, outputSchema: (absent)", s.tool.name),
            "declare an outputSchema and return structuredContent, so clients can check results",
        ));
    }
    let stateful = CREATE_VERBS.contains(&first)
        && name_words
            .iter()
            .any(|w| STATEFUL_NOUNS.contains(&w.as_str()));
    if stateful {
        let description_words = words(s.tool.description.as_deref().unwrap_or(""));
        if !description_words
            .iter()
            .any(|w| LIFETIME_WORDS.contains(&w.as_str()))
        {
            out.push(s.finding(
                "TG-O002",
                "the tool creates a handle but its description does not say how long it lives",
                format!(
                    "description: {:?}",
                    s.tool.description.as_deref().unwrap_or("")
                ),
                "state the lifetime, e.g. \"expires after 24 hours of inactivity\"",
            ));
        }
    }
}
