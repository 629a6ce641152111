//! Effects: what a tool looks like it does, compared with what it claims.
//!
//! [`Effects::of`] reads the evidence (name, description, parameters); the
//! checks here turn it into findings: the effects a person should approve
//! (TG-E003), annotations the evidence contradicts (TG-E001 when nothing
//! explains it, TG-E004 when the description does), and free text for what
//! a tool runs or where it sends (TG-S009, in [`free_text`]).

mod evidence;
mod explain;
pub(crate) mod free_text;
mod lexicon;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use evidence::{Effects, Evidence, Source};
pub(crate) use evidence::{about_a_resource, first_sentence, prose_words};
use explain::Claim;
pub(crate) use lexicon::{DESTINATION_PARAMS, NEGATIONS, VERB_POSITIONS, is_form};

use super::Subject;
use crate::Finding;

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

impl Effect {
    /// The effect's lower-case name, as in configuration files.
    pub fn label(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Delete => "delete",
            Effect::Send => "send",
            Effect::Spend => "spend",
            Effect::Execute => "execute",
        }
    }
}

/// The effects a tool appears to have, from its name, description and
/// parameters (see [`Effects`] for the evidence behind each).
pub fn classify(tool: &toolgate_protocol::types::Tool) -> Vec<Effect> {
    Effects::of(tool).list()
}

/// The effects each claim rules out.
fn contradicted(claim: Claim, effects: &Effects) -> Vec<Effect> {
    let ruled_out: &[Effect] = match claim {
        Claim::ReadOnly => &[
            Effect::Write,
            Effect::Delete,
            Effect::Send,
            Effect::Spend,
            Effect::Execute,
        ],
        Claim::NotDestructive => &[Effect::Delete, Effect::Execute],
        // Running code is left to destructiveHint: a sandbox or a database
        // is a closed world, and a shell runner is caught by that claim.
        Claim::ClosedWorld => &[Effect::Send, Effect::Spend],
    };
    effects
        .list()
        .into_iter()
        .filter(|e| ruled_out.contains(e))
        .collect()
}

pub(crate) fn check(s: &Subject<'_>, effects: &Effects, out: &mut Vec<Finding>) {
    let hints = s.tool.annotations.clone().unwrap_or_default();
    let mut claims = Vec::new();
    if hints.read_only_hint == Some(true) {
        claims.push(Claim::ReadOnly);
    } else if hints.destructive_hint == Some(false) {
        // The spec gives destructiveHint meaning only when readOnlyHint is false.
        claims.push(Claim::NotDestructive);
    }
    if hints.open_world_hint == Some(false) {
        claims.push(Claim::ClosedWorld);
    }
    let description = s.tool.description.as_deref().unwrap_or("");
    for claim in claims {
        let against = contradicted(claim, effects);
        let mut evidence = effects.explain(&against);
        if claim == Claim::ClosedWorld && !effects.network.is_empty() {
            let params: Vec<String> = effects
                .network
                .iter()
                .map(|p| format!("parameter /{p}"))
                .collect();
            if !evidence.is_empty() {
                evidence.push_str("; ");
            }
            evidence.push_str(&format!("network: {}", params.join(", ")));
        }
        if evidence.is_empty() {
            continue;
        }
        let what = if against.is_empty() {
            "reach the network".to_owned()
        } else {
            labels(&against)
        };
        let evidence = format!("annotations.{}; {evidence}", claim.annotation());
        match claim.explained_by(description) {
            Some(phrase) => out.push(s.finding(
                "TG-E004",
                format!(
                    "the tool claims {} although it looks like it can {what}; its description explains why ({phrase:?})",
                    claim.annotation()
                ),
                evidence,
                "verify that the server enforces what the description says before relying on the annotation",
            )),
            None => out.push(s.finding(
                "TG-E001",
                format!(
                    "the tool claims {} but looks like it can {what}, and nothing in its description explains why",
                    claim.annotation()
                ),
                evidence,
                "correct the annotation; if the claim is true, say in the description how it is enforced",
            )),
        }
    }
    let risky = effects.risky();
    if !risky.is_empty() {
        out.push(s.finding(
            "TG-E003",
            format!(
                "the tool can {}: a person should approve each call",
                labels(&risky)
            ),
            effects.explain(&risky),
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

fn labels(effects: &[Effect]) -> String {
    effects
        .iter()
        .map(|e| e.label())
        .collect::<Vec<_>>()
        .join(", ")
}
