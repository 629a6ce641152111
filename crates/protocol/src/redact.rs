//! URLs as messages may show them: the parts that carry credentials
//! masked.
//!
//! Layer: the bottom (no imports of this crate's other modules). Every
//! crate that names a URL in an error, a log line or a page names it
//! through [`url`], so a password in its userinfo or a key in its query
//! never reaches a person who only asked what failed.

/// What stands in for a masked part.
pub const MASK: &str = "***";

/// `text` with the password of its userinfo, every query value and its
/// fragment masked: `http://ops:pw@host/mcp?api_key=k` reads
/// `http://ops:***@host/mcp?api_key=***`. Works on text that is not a
/// valid URL too (a `${VAR}` not yet expanded, a typo), since that is
/// what errors about URLs are usually about.
///
/// ```
/// use toolgate_protocol::redact::url;
/// assert_eq!(url("https://ops:s3cret@h.example/mcp?api_key=k&v=2#t=x"), "https://ops:***@h.example/mcp?api_key=***&v=***#***");
/// assert_eq!(url("http://127.0.0.1:9/mcp"), "http://127.0.0.1:9/mcp");
/// assert_eq!(url("https://tok@h/x?flag"), "https://***@h/x?flag");
/// ```
pub fn url(text: &str) -> String {
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, text),
    };
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, _)) => (rest, Some(MASK)),
        None => (rest, None),
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let authority_end = before_query.find('/').unwrap_or(before_query.len());
    let (authority, path) = before_query.split_at(authority_end);
    let mut out = String::with_capacity(text.len());
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push_str("://");
    }
    match authority.rsplit_once('@') {
        // A lone userinfo is a token (`https://TOKEN@host`): all of it.
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(MASK);
                }
                None => out.push_str(MASK),
            }
            out.push('@');
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    out.push_str(path);
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) => format!("{key}={MASK}"),
                None => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_every_position_are_masked() {
        for (given, shown) in [
            (
                "http://ops:${PW}@host/mcp?api_key=${KEY}",
                "http://ops:***@host/mcp?api_key=***",
            ),
            (
                "postgres://gw:pw@db:5432/audit",
                "postgres://gw:***@db:5432/audit",
            ),
            ("https://h/a?x=1&y=&z", "https://h/a?x=***&y=***&z"),
            ("not a url at all", "not a url at all"),
            ("host:80/p?secret=v", "host:80/p?secret=***"),
            ("https://a:b@c:d@h/", "https://a:***@h/"),
        ] {
            assert_eq!(url(given), shown, "{given}");
        }
    }
}
