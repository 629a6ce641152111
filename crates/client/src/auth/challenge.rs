//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1): the scheme and its
//! parameters, from however many headers and comma-separated challenges the
//! server sent. Parsing is bounded and never fails: what cannot be read is
//! skipped, since a challenge only ever guides what the client tries next.

use std::collections::BTreeMap;

/// A header longer than this is read only up to here.
const MAX_HEADER: usize = 8 * 1024;
/// Parameters kept per challenge.
const MAX_PARAMS: usize = 32;

/// One challenge: `Bearer scope="a b", resource_metadata="…"`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    /// The scheme, lowercased (`bearer`, `dpop`).
    pub scheme: String,
    /// Parameters by lowercased name, values unquoted.
    pub params: BTreeMap<String, String>,
}

impl Challenge {
    fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }

    /// `resource_metadata` (RFC 9728 §5.1).
    pub fn resource_metadata(&self) -> Option<&str> {
        self.param("resource_metadata")
    }

    /// `scope`, split on spaces.
    pub fn scopes(&self) -> Option<Vec<String>> {
        self.param("scope")
            .map(|s| s.split_ascii_whitespace().map(str::to_owned).collect())
    }

    /// `error` (`invalid_token`, `insufficient_scope`, `use_dpop_nonce`).
    pub fn error(&self) -> Option<&str> {
        self.param("error")
    }
}

/// Every challenge in `headers` (each a `WWW-Authenticate` value).
pub fn parse<'a>(headers: impl IntoIterator<Item = &'a str>) -> Vec<Challenge> {
    let mut out = Vec::new();
    for header in headers {
        // The last character boundary at or before the bound.
        let end = (0..=MAX_HEADER.min(header.len()))
            .rev()
            .find(|i| header.is_char_boundary(*i))
            .unwrap_or(0);
        parse_one(&header[..end], &mut out);
    }
    out
}

/// Every challenge in `headers`, and the one that matters here (`Bearer`
/// or `DPoP`; empty when there is none).
pub fn from_headers(headers: &reqwest::header::HeaderMap) -> (Vec<Challenge>, Challenge) {
    let all = parse(
        headers
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    let main = all
        .iter()
        .find(|c| c.scheme == "bearer" || c.scheme == "dpop")
        .cloned()
        .unwrap_or_default();
    (all, main)
}

/// The challenges of one header value.
fn parse_one(text: &str, out: &mut Vec<Challenge>) {
    let mut s = Scanner { text, pos: 0 };
    loop {
        s.skip(|c| c == ',' || c == ' ' || c == '\t');
        let Some(scheme) = s.token() else { break };
        let mut challenge = Challenge {
            scheme: scheme.to_ascii_lowercase(),
            params: BTreeMap::new(),
        };
        loop {
            s.skip_ws();
            let mark = s.pos;
            let Some(name) = s.token() else {
                // A token68 (`Basic abc==`) or stray text: skip to the next comma.
                s.skip(|c| c != ',');
                break;
            };
            s.skip_ws();
            if !s.eat('=') {
                // The next challenge's scheme.
                s.pos = mark;
                break;
            }
            s.skip_ws();
            let value = if s.peek() == Some('"') {
                s.quoted()
            } else {
                s.token().unwrap_or_default().to_owned()
            };
            if challenge.params.len() < MAX_PARAMS {
                challenge.params.insert(name.to_ascii_lowercase(), value);
            }
            s.skip_ws();
            if !s.eat(',') {
                s.skip(|c| c != ',');
                break;
            }
        }
        out.push(challenge);
    }
}

struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn skip(&mut self, while_: impl Fn(char) -> bool) {
        while let Some(c) = self.peek().filter(|c| while_(*c)) {
            self.pos += c.len_utf8();
        }
    }

    fn skip_ws(&mut self) {
        self.skip(|c| c == ' ' || c == '\t');
    }

    /// An RFC 9110 token (`tchar`s).
    fn token(&mut self) -> Option<&'a str> {
        let start = self.pos;
        self.skip(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/:".contains(c));
        (self.pos > start).then(|| &self.text[start..self.pos])
    }

    /// A quoted string, with `\` escapes; an unterminated one ends the text.
    fn quoted(&mut self) -> String {
        let mut out = String::new();
        self.pos += 1;
        let mut escaped = false;
        while let Some(c) = self.peek() {
            self.pos += c.len_utf8();
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => return out,
                _ => {
                    escaped = false;
                    out.push(c);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_bearer_challenge_with_quoted_parameters() {
        let c = parse([
            r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource""#,
        ]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].scheme, "bearer");
        assert_eq!(c[0].error(), Some("insufficient_scope"));
        assert_eq!(
            c[0].scopes(),
            Some(vec!["files:read".to_owned(), "files:write".to_owned()])
        );
        assert_eq!(
            c[0].resource_metadata(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
    }

    #[test]
    fn separates_several_challenges_in_one_header_and_across_headers() {
        let c = parse([
            r#"Basic realm="x", DPoP error="use_dpop_nonce", algs="ES256""#,
            "Bearer",
        ]);
        let schemes: Vec<_> = c.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["basic", "dpop", "bearer"]);
        assert_eq!(c[1].error(), Some("use_dpop_nonce"));
        assert_eq!(c[0].params.get("realm").map(String::as_str), Some("x"));
    }

    #[test]
    fn keeps_escapes_and_survives_garbage() {
        let c = parse([r#"Bearer realm="a \"b\"", scope=plain"#]);
        assert_eq!(c[0].params["realm"], r#"a "b""#);
        assert_eq!(c[0].params["scope"], "plain");
        for junk in [
            "",
            ",,,",
            "=",
            r#"Bearer scope="unterminated"#,
            "Basic dXNlcjpwYXNz==",
        ] {
            let _ = parse([junk]);
        }
        let long = format!("Bearer scope=\"{}\"", "é".repeat(10_000));
        assert_eq!(parse([long.as_str()]).len(), 1);
    }
}
