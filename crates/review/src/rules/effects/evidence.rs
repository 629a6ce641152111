//! Reading what a tool does from its name, its description and its
//! parameters together.

use std::fmt;

use serde_json::Value;
use toolgate_protocol::types::Tool;

use super::Effect;
use super::lexicon::{
    AMOUNT_PARAMS, BODY_PARAMS, COMPOUNDS, DESCRIPTION_VERBS, DETERMINERS, MONEY, NAME_VERBS,
    NEGATIONS, NETWORK_PARAMS, Needs, PAYEE_PARAMS, RECIPIENT_PARAMS, RUN_PARAMS,
    RUN_PARAMS_CORROBORATED, VERB_POSITIONS, is_form,
};
use crate::text::words;

/// Where a piece of evidence was found.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// A word of the tool's name.
    Name,
    /// A phrase of the description's first sentence.
    Description,
    /// A parameter of the input schema, by name.
    Parameter(String),
}

/// One reason to think a tool has an effect.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Evidence {
    /// The effect it points to.
    pub effect: Effect,
    /// Where it was found.
    pub source: Source,
    /// The word or phrase, as found (lower-cased for prose).
    pub text: String,
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::Name => write!(f, "name word {:?}", self.text),
            Source::Description => write!(f, "description {:?}", self.text),
            Source::Parameter(p) => write!(f, "parameter /{p}"),
        }
    }
}

/// What a tool looks like it does, with the evidence for each effect.
///
/// ```
/// use toolgate_review::{Effect, Effects};
/// let tool = serde_json::from_value(serde_json::json!({
///     "name": "workspace.tool",
///     "description": "Runs a shell command in the workspace.",
///     "inputSchema": {"type": "object", "properties": {"command": {"type": "string"}}}
/// })).unwrap();
/// let effects = Effects::of(&tool);
/// assert_eq!(effects.list(), vec![Effect::Execute]);
/// assert_eq!(effects.evidence_for(Effect::Execute).count(), 2); // the phrase and the parameter
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Every piece of evidence, sorted by effect, then source.
    pub evidence: Vec<Evidence>,
    /// Parameters that are network locations (`url`, `endpoint`, …): the
    /// tool reaches beyond the machine even when no verb says so.
    pub network: Vec<String>,
}

impl Effects {
    /// Read a tool's effects.
    pub fn of(tool: &Tool) -> Self {
        let properties = tool
            .input_schema
            .get("properties")
            .and_then(Value::as_object);
        let params: Vec<String> = properties
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let normalized: Vec<String> = params.iter().map(|p| words(p).join("_")).collect();
        let sentence = tool
            .description
            .as_deref()
            .map(first_sentence)
            .unwrap_or("");
        let mut context: Vec<String> = words(&tool.name);
        context.extend(words(sentence));
        context.extend(normalized.iter().cloned());
        let money = context.iter().any(|w| MONEY.contains(&w.as_str()));

        let mut evidence = Vec::new();
        if let Some((effect, word)) = name_verb(&tool.name, money) {
            evidence.push(Evidence {
                effect,
                source: Source::Name,
                text: word,
            });
        }
        evidence.extend(description_verbs(sentence));
        let runs = evidence.iter().any(|e| e.effect == Effect::Execute);
        let has = |list: &[&str]| normalized.iter().any(|p| list.contains(&p.as_str()));
        let mut network = Vec::new();
        for (param, norm) in params.iter().zip(&normalized) {
            let n = norm.as_str();
            let effect =
                if RUN_PARAMS.contains(&n) || (runs && RUN_PARAMS_CORROBORATED.contains(&n)) {
                    Some(Effect::Execute)
                } else if RECIPIENT_PARAMS.contains(&n) || (n == "to" && has(BODY_PARAMS)) {
                    Some(Effect::Send)
                } else if AMOUNT_PARAMS.contains(&n) && has(PAYEE_PARAMS) {
                    Some(Effect::Spend)
                } else {
                    None
                };
            if let Some(effect) = effect {
                evidence.push(Evidence {
                    effect,
                    source: Source::Parameter(param.clone()),
                    text: param.clone(),
                });
            }
            let schema = properties.and_then(|p| p.get(param));
            if NETWORK_PARAMS.contains(&n) && !schema.is_some_and(own_resource) {
                network.push(param.clone());
            }
        }
        evidence.sort();
        evidence.dedup();
        Effects { evidence, network }
    }

    /// The effects found, each once, in order.
    pub fn list(&self) -> Vec<Effect> {
        let mut out: Vec<Effect> = self.evidence.iter().map(|e| e.effect).collect();
        out.dedup();
        out
    }

    /// The effects other than reading.
    pub fn risky(&self) -> Vec<Effect> {
        self.list()
            .into_iter()
            .filter(|e| *e != Effect::Read)
            .collect()
    }

    /// Whether any evidence points to `effect`.
    pub fn has(&self, effect: Effect) -> bool {
        self.evidence.iter().any(|e| e.effect == effect)
    }

    /// The evidence for one effect.
    pub fn evidence_for(&self, effect: Effect) -> impl Iterator<Item = &Evidence> {
        self.evidence.iter().filter(move |e| e.effect == effect)
    }

    /// `execute: parameter /command, name word "run"; delete: …` for the
    /// given effects.
    pub fn explain(&self, effects: &[Effect]) -> String {
        effects
            .iter()
            .map(|effect| {
                let items: Vec<String> =
                    self.evidence_for(*effect).map(|e| e.to_string()).collect();
                format!("{}: {}", effect.label(), items.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Whether a parameter is a URI of the server's own resources ("the URI of
/// the resource to read"), which the tool looks up rather than visits. A
/// description that also speaks of a URL or HTTP is a location after all.
pub(crate) fn own_resource(schema: &Value) -> bool {
    let described = words(
        schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or(""),
    );
    about_a_resource(&described)
}

/// [`own_resource`] over a parameter description's words.
pub(crate) fn about_a_resource(described: &[String]) -> bool {
    let has = |w: &[&str]| described.iter().any(|d| w.contains(&d.as_str()));
    has(&["resource", "resources"]) && !has(&["url", "urls", "http", "https"])
}

/// The description's first sentence, which says what the tool does; later
/// sentences are usage notes that mention other tools and other actions.
pub(crate) fn first_sentence(description: &str) -> &str {
    let text = description.trim_start();
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            c == '\n'
                || (matches!(c, '.' | '!' | '?' | ';')
                    && text[i + 1..].starts_with(char::is_whitespace))
                || (c == '.' && i + 1 == text.len())
        })
        .map_or(text.len(), |(i, _)| i);
    &text[..end]
}

/// The first word of the name that is a known verb. `checkout` and a bare
/// `order` are about money only when the rest of the tool says so.
fn name_verb(name: &str, money: bool) -> Option<(Effect, String)> {
    let ws = words(name);
    ws.iter().enumerate().find_map(|(i, w)| {
        if i > 0 && COMPOUNDS.contains(&(ws[i - 1].as_str(), w.as_str())) {
            return None;
        }
        let effect = NAME_VERBS
            .iter()
            .find(|(_, verbs)| verbs.contains(&w.as_str()))
            .map(|(e, _)| *e)?;
        let effect = match (w.as_str(), money) {
            ("checkout", true) => Effect::Spend,
            ("order", false) => Effect::Write,
            _ => effect,
        };
        Some((effect, w.clone()))
    })
}

/// Verbs of the first sentence used as the tool's verbs: where a verb can
/// stand (see [`VERB_POSITIONS`]), not negated (`does not delete`), and with
/// an object of the right kind where the verb alone says too little
/// (`runs … command`).
fn description_verbs(sentence: &str) -> Vec<Evidence> {
    let ws = prose_words(sentence);
    let mut out = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        if !verb_position(&ws, i) {
            continue;
        }
        if ws[i.saturating_sub(3)..i]
            .iter()
            .any(|p| NEGATIONS.contains(&p.as_str()))
        {
            continue;
        }
        for (effect, base, needs) in DESCRIPTION_VERBS {
            if !is_form(w, base) {
                continue;
            }
            let text = match needs {
                Needs::Nothing => Some(w.clone()),
                Needs::Object(objects) => ws
                    .iter()
                    .enumerate()
                    .skip(i + 1)
                    .take(6)
                    .find(|(_, o)| objects.contains(&o.as_str()))
                    .map(|(j, _)| ws[i..=j].join(" ")),
            };
            if let Some(text) = text {
                out.push(Evidence {
                    effect: *effect,
                    source: Source::Description,
                    text,
                });
            }
        }
    }
    out
}

/// Whether word `i` stands where the tool's own verb can: first, after a
/// subject or an auxiliary (see [`VERB_POSITIONS`]), or after `and`/`or`
/// when it joins two verbs (`create or update`) or starts a clause with an
/// object (`… and charges the card`); `branches or commits` are nouns.
fn verb_position(ws: &[String], i: usize) -> bool {
    let Some(prev) = i.checked_sub(1).map(|p| ws[p].as_str()) else {
        return true;
    };
    if prev == "and" || prev == "or" {
        let joins_verbs = i >= 2 && is_verb(&ws[i - 2]);
        let has_object = ws
            .get(i + 1)
            .is_some_and(|n| DETERMINERS.contains(&n.as_str()));
        return joins_verbs || has_object;
    }
    VERB_POSITIONS.contains(&prev)
}

fn is_verb(word: &str) -> bool {
    DESCRIPTION_VERBS
        .iter()
        .any(|(_, base, _)| is_form(word, base))
}

/// Lower-cased words of prose, keeping contractions whole (`doesn't`).
pub(crate) fn prose_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}
