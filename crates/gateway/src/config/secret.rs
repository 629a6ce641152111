//! [`Secret`]: a configuration value that may carry a credential, and
//! never shows it.
//!
//! Layer: configuration (plain data; imports nothing of the gateway but
//! `expand`). A value read from the file keeps what was *written*
//! (`--token=${ARG}`) beside what it *is* once `${VAR}`s are expanded;
//! `Display` and `Debug` print only a shown form made from what was
//! written, by its position: a URL with its userinfo password, query
//! values and fragment masked; header values, `env` values and OAuth
//! secrets not at all; a command or argument as written (its `${VAR}`s by
//! name). The value itself is reached only through [`Secret::expose`], at
//! the one place it is used (a process started, a request sent), so a
//! surface that prints configuration cannot print a credential by
//! mistake. [`Secrets`] collects the values that must never appear, for
//! scrubbing what others say (an upstream's error text, its stderr).
//!
//! Layer: `config`.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;
use toolgate_protocol::redact::{self, MASK};

use super::{UnsetVariable, expand};

/// Where a [`Secret`] stands, which decides how much of it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Nothing of it shows (header and `env` values, OAuth secrets).
    Hidden,
    /// A URL: its userinfo password, query values and fragment masked.
    Url,
    /// As written: a command or an argument, its `${VAR}`s by name.
    Written,
}

/// A configuration value that never prints what it is.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub struct Secret {
    written: String,
    value: String,
    shape: Shape,
}

impl From<String> for Secret {
    fn from(written: String) -> Self {
        Secret {
            value: written.clone(),
            written,
            // Until its position says otherwise, nothing shows.
            shape: Shape::Hidden,
        }
    }
}

impl From<&str> for Secret {
    fn from(written: &str) -> Self {
        Secret::from(written.to_owned())
    }
}

impl Secret {
    /// A value at `shape`'s position, with no `${VAR}`s (as `import` and
    /// tests build them).
    pub fn new(written: impl Into<String>, shape: Shape) -> Self {
        let mut secret = Secret::from(written.into());
        secret.shape = shape;
        secret
    }

    /// Expand its `${VAR}`s from `env`, and place it.
    pub(crate) fn expand(
        &mut self,
        shape: Shape,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), UnsetVariable> {
        self.value = expand(&self.written, env)?;
        self.shape = shape;
        Ok(())
    }

    /// The value itself: for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// What was written in the file (`${VAR}`s unexpanded): what
    /// `import` writes back, and what shows of a [`Shape::Written`] value.
    pub fn written(&self) -> &str {
        &self.written
    }

    /// What a person may be shown of it.
    pub fn shown(&self) -> Cow<'_, str> {
        match self.shape {
            Shape::Hidden => Cow::Borrowed(MASK),
            Shape::Url => Cow::Owned(redact::url(&self.written)),
            Shape::Written => Cow::Borrowed(&self.written),
        }
    }

    /// Whether the value must never show: it is hidden by position, or a
    /// `${VAR}` put something into it that the file does not say.
    fn is_secret(&self) -> bool {
        self.shape == Shape::Hidden || self.value != self.written
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.shown())
    }
}

/// Tests and callers compare a value with text by what it is.
impl PartialEq<str> for Secret {
    fn eq(&self, other: &str) -> bool {
        self.value == other
    }
}

impl PartialEq<&str> for Secret {
    fn eq(&self, other: &&str) -> bool {
        self.value == *other
    }
}

/// Serialized as written in the file (a `${VAR}` by its name), never as
/// what it expands to: what writing a configuration back needs.
impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.written)
    }
}

impl JsonSchema for Secret {
    fn schema_name() -> Cow<'static, str> {
        String::schema_name()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

/// The texts that must never appear on a surface: every secret value of a
/// configuration, and the parts of it a URL masks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Secrets(Vec<String>);

/// Shorter texts are not scrubbed: `1` or `on` would mangle every message,
/// and are not credentials anyway.
const SHORTEST: usize = 4;

impl Secrets {
    /// Add what of `secret` must never show.
    pub fn add(&mut self, secret: &Secret) {
        // A URL is secret in its parts only: its host and path stay, so a
        // connection error still says where it failed.
        if secret.is_secret() && secret.shape != Shape::Url {
            self.push(&secret.value);
        }
        if secret.shape == Shape::Url || secret.value != secret.written {
            for part in url_credentials(&secret.value) {
                self.push(part);
            }
        }
        // What a `${VAR}` put into a written value, by itself too (an
        // argument `--token=${ARG}` leaks as the token alone as well).
        if secret.value != secret.written {
            for piece in expanded_pieces(&secret.written, &secret.value) {
                self.push(piece);
            }
        }
    }

    fn push(&mut self, text: &str) {
        if text.len() >= SHORTEST && !self.0.iter().any(|t| t == text) {
            self.0.push(text.to_owned());
            // Longest first, so a secret that contains another is masked whole.
            self.0.sort_by_key(|t| std::cmp::Reverse(t.len()));
        }
    }

    /// `text` with every secret masked, raw or percent-encoded.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.0 {
            for form in [Cow::Borrowed(secret.as_str()), percent_encoded(secret)] {
                if out.contains(form.as_ref()) {
                    out = Cow::Owned(out.replace(form.as_ref(), MASK));
                }
            }
        }
        out
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The userinfo password (or lone token), query values and fragment of
/// `url`.
fn url_credentials(url: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    out.push(fragment);
    let (before, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = before.split('/').next().unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        out.push(userinfo.split_once(':').map_or(userinfo, |(_, pw)| pw));
    }
    out.extend(
        query
            .split('&')
            .filter_map(|pair| pair.split_once('=').map(|(_, v)| v)),
    );
    out
}

/// What each `${VAR}` of `written` became in `value`: the text between
/// the written parts around it.
fn expanded_pieces<'a>(written: &str, value: &'a str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = value;
    let mut text = written;
    while let Some(at) = text.find("${") {
        let literal = &text[..at];
        let Some(end) = text[at..].find('}') else {
            break;
        };
        text = &text[at + end + 1..];
        let Some(after_literal) = rest.strip_prefix(literal) else {
            break;
        };
        // The expansion runs up to the next literal text written.
        let next = text.find("${").map_or(text, |n| &text[..n]);
        let len = if next.is_empty() {
            if text.is_empty() {
                after_literal.len()
            } else {
                break;
            }
        } else {
            match after_literal.find(next) {
                Some(n) => n,
                None => break,
            }
        };
        out.push(&after_literal[..len]);
        rest = &after_literal[len..];
    }
    out
}

fn percent_encoded(text: &str) -> Cow<'_, str> {
    let encoded: String = text
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    if encoded == text {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(encoded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(written: &str, shape: Shape) -> Secret {
        let env = |var: &str| match var {
            "PW" => Some("pa55word".to_owned()),
            "KEY" => Some("k3y-value".to_owned()),
            "ARG" => Some("arg-s3cret".to_owned()),
            _ => None,
        };
        let mut s = Secret::from(written.to_owned());
        s.expand(shape, &env).unwrap();
        s
    }

    #[test]
    fn a_value_shows_by_its_position_and_never_what_a_variable_put_in() {
        let url = expanded("http://ops:${PW}@host/mcp?api_key=${KEY}", Shape::Url);
        assert_eq!(
            url.expose(),
            "http://ops:pa55word@host/mcp?api_key=k3y-value"
        );
        assert_eq!(url.to_string(), "http://ops:***@host/mcp?api_key=***");
        assert_eq!(
            format!("{url:?}"),
            "\"http://ops:***@host/mcp?api_key=***\""
        );
        let arg = expanded("--token=${ARG}", Shape::Written);
        assert_eq!(arg.to_string(), "--token=${ARG}");
        let header = expanded("Bearer literal-token", Shape::Hidden);
        assert_eq!(format!("{header} {header:?}"), "*** \"***\"");
        let mut secrets = Secrets::default();
        for s in [&url, &arg, &header] {
            secrets.add(s);
        }
        let said = "GET http://ops:pa55word@host/mcp?api_key=k3y-value failed; argv --token=arg-s3cret; sent Bearer literal-token; pa55word%21";
        let scrubbed = secrets.scrub(said);
        for secret in ["pa55word", "k3y-value", "arg-s3cret", "literal-token"] {
            assert!(!scrubbed.contains(secret), "{scrubbed}");
        }
        assert!(
            scrubbed.starts_with("GET http://ops:***@host/mcp?api_key=*** failed"),
            "{scrubbed}"
        );
        // A plain argument is not a secret, and stays.
        let mut plain = Secrets::default();
        plain.add(&expanded("--verbose", Shape::Written));
        assert!(plain.is_empty());
    }

    #[test]
    fn the_pieces_a_variable_put_in_are_found() {
        assert_eq!(expanded_pieces("--token=${A}", "--token=xyz"), ["xyz"]);
        assert_eq!(expanded_pieces("${A}:${B}/x", "aa:bb/x"), ["aa", "bb"]);
        assert_eq!(expanded_pieces("${A}", "whole"), ["whole"]);
    }
}
