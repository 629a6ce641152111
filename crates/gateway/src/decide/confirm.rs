//! A person approves a call before it is forwarded, through the protocol.
//!
//! The call is answered with `input_required` carrying one form
//! elicitation: the upstream server, the tool, its title and description,
//! the exact arguments and the risk, and a single boolean to approve. A
//! legacy (2025-11-25) session gets the same form as an
//! `elicitation/create` request (the server SDK's legacy driver asks it).
//!
//! What makes an approval count only once, for this call:
//! - the `requestState` is sealed by the server SDK and bound to the tool,
//!   a digest of the exact arguments, the caller and an expiry, so it
//!   cannot be moved to other arguments, another caller or a later time;
//! - every round the gateway seals is single-use
//!   ([`toolgate_server::NonceStore`]): its nonce is spent in the audit
//!   store before the round is forwarded, so neither the approval nor any
//!   later round of the approved call (an upstream's own question) can be
//!   sent again.
//!
//! Layer: `decide`.

use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_protocol::sanitize::{Removed, sanitize_text};
use toolgate_review::Effect;
use toolgate_server::{ElicitAction, Inputs, ToolError};

use crate::decide::policy::ToolFacts;

/// The key of the approval question among the call's input requests
/// (unlike any key a relayed upstream round gets: those are the
/// upstream's own keys, or `N/key`).
pub const APPROVE_KEY: &str = "toolgate.gateway/approve";

/// Pretty-printed arguments longer than this are cut in the question (the
/// digest of the whole still identifies them).
const SHOWN_ARGUMENTS: usize = 8 * 1024;

/// What the person did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted with approve = true.
    Approved,
    /// Declined, or accepted with approve = false.
    Declined,
    /// Dismissed the question.
    Cancelled,
}

impl Verdict {
    /// `approved`, `declined` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "approved",
            Verdict::Declined => "declined",
            Verdict::Cancelled => "cancelled",
        }
    }
}

/// What a person is shown about the call.
pub struct Subject<'a> {
    /// The upstream server's name.
    pub server: &'a str,
    /// The gateway tool name.
    pub tool: &'a str,
    /// Its title, if it has one.
    pub title: Option<&'a str>,
    /// Its description.
    pub description: Option<&'a str>,
    /// Its annotations say it is destructive.
    pub destructive: Option<bool>,
    /// Its upstream is trusted.
    pub trusted: bool,
    /// The policy's facts about it.
    pub facts: &'a ToolFacts,
    /// Why an earlier approval of it no longer holds, when one does not.
    pub ended: Option<&'a str>,
    /// The endpoint the call came through and the name the model called
    /// the tool by there, when the call came through a named endpoint.
    pub called_as: Option<(&'a str, &'a str)>,
    /// Why the call's flow holds it, when it does: the person is asked
    /// because of what entered the conversation before.
    pub flow: Option<&'a str>,
}

/// The wider choice a rule's `remember` adds to the form.
pub struct Remember<'a> {
    /// How long the grant would last.
    pub span: Duration,
    /// Who it would be for (the caller's verified subject).
    pub caller: Option<&'a str>,
}

impl Remember<'_> {
    /// `This tool, any arguments, for alice, for the next hour`.
    pub fn label(&self) -> String {
        let whom = match self.caller {
            Some(caller) => format!(" for {},", shown(caller, 100)),
            None => String::new(),
        };
        format!(
            "This tool, any arguments,{whom} for {}",
            crate::base::duration::the_next(self.span)
        )
    }
}

/// The person's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// What they did.
    pub verdict: Verdict,
    /// They approved the tool for a while, not only this call.
    pub remember: bool,
}

/// Ask for approval (`Ok(None)`: not answered yet, end the round with
/// [`Inputs::ask`]); with `remember`, the form also offers approving the
/// tool for a while. Fails with `-32021` when the client cannot answer a
/// form.
pub fn ask(
    input: &mut Inputs,
    subject: &Subject<'_>,
    arguments: &Map<String, Value>,
    remember: Option<&Remember<'_>>,
) -> Result<Option<Answer>, ToolError> {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "approve": {
                "type": "boolean",
                "title": "Approve this call",
                "description": "Forward the call to the server with exactly these arguments.",
                "default": false
            }
        },
        "required": ["approve"]
    });
    if let (Some(remember), Some(properties)) = (remember, schema["properties"].as_object_mut()) {
        properties.insert(
            "scope".into(),
            json!({
                "type": "string",
                "title": "Approve for",
                "oneOf": [
                    {"const": "call", "title": "This call only"},
                    {"const": "tool", "title": remember.label()}
                ],
                "default": "call"
            }),
        );
    }
    let Some(answer) = input.elicit(APPROVE_KEY, &question(subject, arguments), schema)? else {
        return Ok(None);
    };
    let field = |name: &str| answer.content.as_ref().and_then(|c| c.get(name));
    let verdict = match answer.action {
        ElicitAction::Accept if field("approve").and_then(Value::as_bool) == Some(true) => {
            Verdict::Approved
        }
        ElicitAction::Accept | ElicitAction::Decline => Verdict::Declined,
        ElicitAction::Cancel => Verdict::Cancelled,
    };
    Ok(Some(Answer {
        verdict,
        remember: verdict == Verdict::Approved
            && remember.is_some()
            && field("scope").and_then(Value::as_str) == Some("tool"),
    }))
}

/// Text from a server, made safe to show: no escapes, no invisible or
/// reordering characters, one bounded paragraph.
fn shown(text: &str, limit: usize) -> String {
    let clean = sanitize_text(text, &mut Removed::default());
    let mut out: String = clean.trim().chars().take(limit).collect();
    if clean.trim().chars().count() > limit {
        out.push('…');
    }
    out
}

/// The question's text.
pub fn question(subject: &Subject<'_>, arguments: &Map<String, Value>) -> String {
    let mut text = String::from("Approve this tool call?\n\n");
    if let Some(ended) = subject.ended {
        text.push_str(&format!("Asked again: {ended}.\n\n"));
    }
    if let Some(flow) = subject.flow {
        text.push_str(&format!("Why you are asked: {}.\n\n", shown(flow, 1000)));
    }
    text.push_str(&format!("Server: {}\n", shown(subject.server, 200)));
    match subject.title {
        Some(title) => text.push_str(&format!("Tool: {} ({})\n", subject.tool, shown(title, 200))),
        None => text.push_str(&format!("Tool: {}\n", subject.tool)),
    }
    // The person sees the upstream's tool; the model may know it by
    // another name on its endpoint.
    if let Some((endpoint, name)) = subject.called_as {
        text.push_str(&format!(
            "Called as: {} on endpoint {}\n",
            shown(name, 200),
            shown(endpoint, 100)
        ));
    }
    if let Some(description) = subject.description {
        text.push_str(&format!("Description: {}\n", shown(description, 1000)));
    }
    text.push_str(&format!("Risk: {}\n\n", risk(subject)));
    text.push_str("Arguments:\n");
    text.push_str(&shown_arguments(arguments));
    text
}

/// What the call may do, in words.
fn risk(subject: &Subject<'_>) -> String {
    let effects: Vec<&str> = subject
        .facts
        .effects
        .iter()
        .filter(|e| **e != Effect::Read)
        .map(|e| match e {
            Effect::Write => "changes data",
            Effect::Delete => "deletes data",
            Effect::Send => "sends messages",
            Effect::Spend => "spends money",
            Effect::Execute => "runs code or commands",
            Effect::Read => "reads data",
        })
        .collect();
    let mut parts = Vec::new();
    if effects.is_empty() {
        parts.push("no risky action found in its name, description or parameters".to_owned());
    } else {
        parts.push(format!(
            "{} (from its name, description and parameters)",
            effects.join(", ")
        ));
    }
    if subject.destructive != Some(false) {
        parts.push("the server does not say it is harmless".to_owned());
    }
    if !subject.trusted {
        parts.push("the server is not trusted, so its own claims are hints only".to_owned());
    }
    parts.join("; ")
}

/// The arguments as indented JSON, exactly as they will be sent: characters
/// that would hide or reorder text are written as `\u` escapes (the same
/// JSON value); very long arguments are cut, with the digest of the whole.
fn shown_arguments(arguments: &Map<String, Value>) -> String {
    let pretty = serde_json::to_string_pretty(arguments).unwrap_or_default();
    let mut out = String::with_capacity(pretty.len());
    let mut buf = [0u16; 2];
    for c in pretty.chars() {
        let mut one = [0u8; 4];
        let hidden =
            c != '\n' && sanitize_text(c.encode_utf8(&mut one), &mut Removed::default()).is_empty();
        if hidden {
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    if out.len() > SHOWN_ARGUMENTS {
        let mut cut = SHOWN_ARGUMENTS;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        let digest = Sha256::digest(pretty.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let more = out.len() - cut;
        out.truncate(cut);
        out.push_str(&format!(
            "\n… ({more} more bytes not shown; SHA-256 of the whole: {hex})"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_shows_server_tool_risk_and_exact_arguments() {
        // A checkout spends money when its description says so.
        let f = ToolFacts::new(
            "shop.checkout",
            "checkout",
            Some("Pays for the cart"),
            None,
            false,
        );
        let subject = Subject {
            server: "shop",
            tool: "shop.checkout",
            title: Some("Check\u{1b}[2J out"),
            description: Some("Pays for the cart\u{202e}"),
            destructive: None,
            trusted: false,
            facts: &f,
            ended: None,
            called_as: Some(("support", "pay_now")),
            flow: Some(
                "web.fetch at 14:02 UTC returned content from example.com; this call of shop.checkout could carry it out",
            ),
        };
        let args = json!({"card": "x\u{202e}y", "total": 12.5});
        let text = question(&subject, args.as_object().unwrap());
        assert!(text.contains("Server: shop\n"), "{text}");
        assert!(
            text.contains("Why you are asked: web.fetch at 14:02 UTC returned content from example.com; this call of shop.checkout could carry it out.\n"),
            "{text}"
        );
        assert!(text.contains("Tool: shop.checkout (Check out)\n"), "{text}");
        assert!(
            text.contains("Called as: pay_now on endpoint support\n"),
            "{text}"
        );
        assert!(text.contains("Description: Pays for the cart\n"), "{text}");
        assert!(text.contains("spends money"), "{text}");
        assert!(text.contains("not trusted"), "{text}");
        // The bidi override is shown escaped, and the shown JSON is the sent value.
        assert!(text.contains("\"card\": \"x\\u202ey\""), "{text}");
        let shown = text.split("Arguments:\n").nth(1).unwrap();
        let parsed: Value = serde_json::from_str(shown).unwrap();
        assert_eq!(parsed, args);
    }

    #[test]
    fn long_arguments_are_cut_with_the_digest_of_the_whole() {
        let args = json!({"text": "a".repeat(20_000)});
        let shown = shown_arguments(args.as_object().unwrap());
        assert!(shown.len() < SHOWN_ARGUMENTS + 200);
        assert!(shown.contains("more bytes not shown; SHA-256 of the whole: "));
    }
}
