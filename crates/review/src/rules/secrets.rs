//! Results that hold secrets (TG-O004).
//!
//! A tool that returns the process environment, credentials, keys or
//! passwords puts them in the model's context, where a poisoned tool or a
//! prompt injection can send them anywhere. server-everything's `get-env`
//! ("Returns all environment variables") hands over every API key its
//! configuration was given. The rule reads the name (a returning verb with a
//! secret noun: `get_env`, `list_secrets`, `printenv`) and the description's
//! first sentence (a returning verb where the tool's own verb stands, with a
//! secret close after it: "Returns all environment variables"). A secret
//! noun that modifies another (`password strength`, `secret names`) or a
//! description that says values are redacted does not count.

use super::Subject;
use super::effects::{NEGATIONS, VERB_POSITIONS, first_sentence, is_form, prose_words};
use crate::Finding;
use crate::text::words;

/// Verbs that hand something back, in a name or a description.
const RETURNING: &[&str] = &[
    "return", "list", "print", "dump", "show", "reveal", "expose", "display", "output", "get",
    "read", "retrieve", "fetch", "export", "echo", "view",
];

/// Name words that are secrets, or the environment they live in.
const SECRET_NAME_WORDS: &[&str] = &[
    "env",
    "environ",
    "envs",
    "envvars",
    "secret",
    "secrets",
    "credential",
    "credentials",
    "creds",
    "password",
    "passwords",
    "apikey",
    "apikeys",
    "dotenv",
];

/// Names that are the whole act (`printenv`).
const SECRET_NAMES: &[&str] = &["printenv", "getenv", "env", "environ"];

/// Phrases of prose that are secrets. Bare "environment" is left out: "the
/// current environment" is as often `staging` as a variable list.
const SECRET_PHRASES: &[&[&str]] = &[
    &["environment", "variables"],
    &["environment", "variable"],
    &["env", "vars"],
    &["env", "variables"],
    &["secrets"],
    &["secret"],
    &["credentials"],
    &["passwords"],
    &["password"],
    &["private", "keys"],
    &["private", "key"],
    &["api", "keys"],
    &["api", "key"],
    &["secret", "keys"],
    &["access", "tokens"],
    &["access", "token"],
    &["auth", "tokens"],
    &["env", "file"],
    &["dotenv"],
];

/// Words that end the verb's object: a secret after them is something else's
/// (`a strength score for a password`, `runs it with the environment
/// variables`).
const BREAKS: &[&str] = &[
    "for", "to", "from", "with", "about", "by", "whether", "if", "when", "without", "into",
    "using", "against", "given", "and", "or",
];

/// Words after a secret phrase that make it a modifier of something else
/// (`password strength`, `secret names`, `credential rotation`).
const MODIFIED: &[&str] = &[
    "strength",
    "policy",
    "policies",
    "requirements",
    "rules",
    "manager",
    "managers",
    "reset",
    "resets",
    "hash",
    "hashes",
    "count",
    "counts",
    "name",
    "names",
    "metadata",
    "expiry",
    "expiration",
    "rotation",
    "status",
    "length",
    "id",
    "ids",
    "field",
    "fields",
    "prompt",
    "form",
    "usage",
    "scanning",
    "santa",
];

/// Words by which a description says the values never reach the result.
const REDACTED: &[&str] = &[
    "redacted",
    "redacts",
    "masked",
    "masks",
    "obfuscated",
    "hidden",
    "omitted",
    "omits",
];

/// Phrases by which a description says values are left out.
const QUIET: &[&str] = &[
    "without their values",
    "without values",
    "names only",
    "never return",
    "not return",
    "values are not",
    "values are never",
];

pub(crate) fn check(s: &Subject<'_>, out: &mut Vec<Finding>) {
    let description = s.tool.description.as_deref().unwrap_or("");
    let evidence = from_name(&s.tool.name)
        .map(|w| format!("name {:?} ({w})", s.tool.name))
        .or_else(|| {
            from_description(first_sentence(description)).map(|p| format!("description {p:?}"))
        });
    // Only a tool that looks like it hands secrets over is read in full
    // for a statement that it leaves the values out.
    let Some(evidence) = evidence else {
        return;
    };
    let lower = description.to_lowercase();
    let redacted = prose_words(&lower)
        .iter()
        .any(|w| REDACTED.contains(&w.as_str()))
        || QUIET.iter().any(|q| lower.contains(q));
    if !redacted {
        out.push(s.finding(
            "TG-O004",
            "the tool returns secrets (the environment, credentials, keys or passwords) into the model's context",
            evidence,
            "return only what the task needs (names, or values with secrets redacted); if it must return secrets, keep a person approving each call and keep the server away from untrusted content",
        ));
    }
}

/// The name's evidence: `printenv`, or a returning verb with a secret word
/// (`get_env`, `list_secrets`, `dumpCredentials`).
fn from_name(name: &str) -> Option<String> {
    let ws = words(name);
    if ws.len() == 1 && SECRET_NAMES.contains(&ws[0].as_str()) {
        return Some(ws[0].clone());
    }
    let verb = ws.iter().position(|w| RETURNING.contains(&w.as_str()))?;
    // "environment" alone is as often `staging` as a variable list.
    let secret = ws[verb + 1..].iter().enumerate().position(|(k, w)| {
        SECRET_NAME_WORDS.contains(&w.as_str())
            || (w == "environment" && ws.get(verb + 2 + k).is_some_and(|n| n.starts_with("var")))
    })?;
    let after = ws.get(verb + 1 + secret + 1).map(String::as_str);
    if after.is_some_and(|a| MODIFIED.contains(&a)) {
        return None;
    }
    Some(format!("{} … {}", ws[verb], ws[verb + 1 + secret]))
}

/// The first sentence's evidence: a returning verb where the tool's own verb
/// stands, not negated, with a secret phrase within the next five words.
fn from_description(sentence: &str) -> Option<String> {
    let ws = prose_words(sentence);
    for (i, w) in ws.iter().enumerate() {
        let position = i == 0 || VERB_POSITIONS.contains(&ws[i - 1].as_str());
        if !position || !RETURNING.iter().any(|base| is_form(w, base)) {
            continue;
        }
        if ws[i.saturating_sub(3)..i]
            .iter()
            .any(|p| NEGATIONS.contains(&p.as_str()))
        {
            continue;
        }
        for start in i + 1..(i + 6).min(ws.len()) {
            if BREAKS.contains(&ws[start - 1].as_str()) && start > i + 1 {
                break;
            }
            for phrase in SECRET_PHRASES {
                let end = start + phrase.len();
                if end > ws.len()
                    || ws[start..end]
                        .iter()
                        .zip(phrase.iter())
                        .any(|(a, b)| a != b)
                {
                    continue;
                }
                if ws.get(end).is_some_and(|a| MODIFIED.contains(&a.as_str())) {
                    continue;
                }
                return Some(ws[i..end].join(" "));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{from_description, from_name};

    #[test]
    fn names_that_hand_over_secrets() {
        assert!(from_name("get-env").is_some());
        assert!(from_name("printenv").is_some());
        assert!(from_name("list_secrets").is_some());
        assert!(from_name("getCredentials").is_some());
        assert!(from_name("set_env").is_none());
        assert!(from_name("get_environment_variables").is_some());
        assert!(from_name("get_environment_name").is_none());
        assert!(from_name("get_environment").is_none());
        assert!(from_name("check_password_strength").is_none());
        assert!(from_name("get_current_time").is_none());
        assert!(from_name("list_secret_scanning_alerts").is_none());
    }

    #[test]
    fn sentences_that_hand_over_secrets() {
        assert!(
            from_description("Returns all environment variables, helpful for debugging").is_some()
        );
        assert!(from_description("This tool prints the AWS credentials in use").is_some());
        assert!(from_description("Reads the API key stored for a provider").is_some());
        assert!(from_description("Returns a password strength score").is_none());
        assert!(from_description("Generates a random password").is_none());
        assert!(from_description("Returns a strength score for a password").is_none());
        assert!(from_description("Returns the value of a secret").is_some());
        assert!(from_description("Runs a command with the given environment variables").is_none());
        assert!(from_description("Does not return environment variables").is_none());
        assert!(from_description("Returns the current environment (dev or prod)").is_none());
    }
}
