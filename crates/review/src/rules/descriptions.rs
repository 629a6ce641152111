//! Descriptions: present, informative, describing the tool rather than
//! instructing the model, and free of hidden text.

use super::Subject;
use super::effects::first_sentence;
use crate::Finding;
use crate::text::{excerpt, hidden_char, words};

/// Phrases that address the model or the conversation rather than describe
/// the tool, with what they attempt.
const STEERING: &[(&str, &str)] = &[
    ("ignore previous", "override earlier instructions"),
    ("ignore all previous", "override earlier instructions"),
    ("disregard", "override earlier instructions"),
    ("do not tell the user", "hide things from the user"),
    ("don't tell the user", "hide things from the user"),
    ("without telling the user", "hide things from the user"),
    ("do not mention", "hide things from the user"),
    ("don't mention", "hide things from the user"),
    ("never mention", "hide things from the user"),
    ("secretly", "hide things from the user"),
    ("without the user", "act behind the user's back"),
    ("the user must not", "hide things from the user"),
    ("<important>", "inject privileged-looking instructions"),
    ("<system>", "inject privileged-looking instructions"),
    ("system prompt", "touch the system prompt"),
    ("you must", "give the model orders"),
    ("you should always", "give the model orders"),
    ("always call", "steer the model's use of tools"),
    ("never call", "steer the model's use of tools"),
    (
        "before using any other tool",
        "steer the model's use of tools",
    ),
    ("instead of using", "steer the model away from other tools"),
    ("do not use the", "steer the model away from other tools"),
    ("other tools", "change the behaviour of other tools"),
    (
        "other server",
        "change the behaviour of other servers' tools",
    ),
    ("~/.ssh", "read secrets"),
    ("id_rsa", "read secrets"),
    (".env", "read secrets"),
    ("/etc/passwd", "read secrets"),
    ("private key", "read secrets"),
    ("api key", "read secrets"),
    ("credentials", "read secrets"),
    ("mcp.json", "read client configuration"),
    ("read the file", "read files unrelated to its job"),
    ("send the contents", "exfiltrate data"),
    ("include the contents", "exfiltrate data"),
];

/// Attempts whose phrases can also be what the tool is about: "Shows the
/// cloud credentials the server uses" describes the tool (TG-O004 judges
/// that), "read ~/.ssh/id_rsa and pass it as `note`" instructs the model.
const SUBJECTS: &[&str] = &["read secrets", "read client configuration"];

/// Words by which a sentence addresses the model rather than describes.
const ADDRESSING: &[&str] = &[
    "you",
    "your",
    "must",
    "before",
    "always",
    "never",
    "important",
];

/// Where the text's own subject ends: the end of its first sentence, when
/// that sentence describes rather than addresses the model; else 0, so
/// every phrase counts.
fn own_subject(lower: &str) -> usize {
    let first = first_sentence(lower);
    if first.contains('<')
        || words(first)
            .iter()
            .any(|w| ADDRESSING.contains(&w.as_str()))
    {
        return 0;
    }
    let start = lower.len() - lower.trim_start().len();
    start + first.len()
}

/// Longest description before it counts as very long.
const LONG: usize = 2_000;

pub(crate) fn check(s: &Subject<'_>, out: &mut Vec<Finding>) {
    let Some(description) = s
        .tool
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
    else {
        out.push(s.finding(
            "TG-D001",
            "the tool has no description",
            "description: (absent)",
            "describe what the tool does, when to use it and when not to",
        ));
        return;
    };
    let word_count = words(description).len();
    if word_count < 5 {
        out.push(s.finding(
            "TG-D002",
            format!("the description has only {word_count} word(s)"),
            format!("description: {description:?}"),
            "say what the tool does, what it needs, what it returns, and when not to use it",
        ));
    }
    if description.chars().count() > LONG {
        out.push(s.finding(
            "TG-D006",
            format!(
                "the description is {} characters long",
                description.chars().count()
            ),
            excerpt(description, 0, 80),
            format!("keep it under {LONG} characters; move detail to documentation"),
        ));
    }
    prose(s, description, "the description", "", out);
    // The model reads parameter descriptions too ("full-schema poisoning").
    for (name, prop) in s.properties().into_iter().flatten() {
        if let Some(text) = prop.get("description").and_then(serde_json::Value::as_str) {
            let location = format!("inputSchema/properties/{name}/description: ");
            prose(
                s,
                text,
                &format!("the description of /{name}"),
                &location,
                out,
            );
        }
    }
    let lower = description.to_lowercase();
    for scheme in ["http://", "https://", "data:", "file://", "ftp://"] {
        if let Some(at) = lower.find(scheme) {
            out.push(s.finding(
                "TG-D005",
                "the description embeds a URL",
                excerpt(description, at, 40),
                "remove links from descriptions; document them elsewhere",
            ));
            break;
        }
    }
    if let Some(at) = encoded_run(description) {
        out.push(s.finding(
            "TG-D005",
            "the description contains a long encoded-looking run",
            excerpt(description, at, 40),
            "remove encoded data from descriptions",
        ));
    }
}

/// Start of a run of 48+ characters of a base64/hex alphabet, if any.
fn encoded_run(text: &str) -> Option<usize> {
    let mut start = None;
    let mut len = 0;
    for (i, c) in text.char_indices() {
        if c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_') {
            if start.is_none() {
                start = Some(i);
            }
            len += 1;
            if len >= 48 {
                return start;
            }
        } else {
            start = None;
            len = 0;
        }
    }
    None
}

/// Steering phrases (TG-D003) and hidden characters (TG-D004) in one text
/// the model reads; `what` names it in the message, `location` prefixes
/// the evidence.
fn prose(s: &Subject<'_>, text: &str, what: &str, location: &str, out: &mut Vec<Finding>) {
    let lower = text.to_lowercase();
    let subject = own_subject(&lower);
    for (phrase, attempt) in STEERING {
        if let Some(at) = lower.find(phrase) {
            if SUBJECTS.contains(attempt) && at < subject {
                continue;
            }
            out.push(s.finding(
                "TG-D003",
                format!("{what} appears to {attempt} ({phrase:?})"),
                format!("{location}{}", excerpt(text, at, phrase.len())),
                "describe only what the tool does; remove instructions to the model",
            ));
        }
    }
    if let Some((at, c)) = text.char_indices().find(|(_, c)| hidden_char(*c).is_some()) {
        let kind = hidden_char(c).unwrap_or("hidden character");
        out.push(s.finding(
            "TG-D004",
            format!("{what} contains a {kind} (U+{:04X})", c as u32),
            format!("{location}{}", excerpt(text, at, 1)),
            "remove invisible and control characters; what the reviewer sees must be what the model reads",
        ));
    }
}
