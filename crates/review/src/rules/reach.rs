//! Free text for what a tool fetches (TG-S010).
//!
//! A tool that takes any URL reaches wherever the model says: the cloud's
//! metadata address, a service on the private network, or an attacker's
//! host with the conversation in the query string. server-everything's
//! `gzip-file-as-resource` fetches the `data` it is given ("URL or data URI
//! of the file content"); mcp-server-fetch and a browser's `navigate` do the
//! same on purpose. The finding stands until the schema pins the hosts: an
//! `enum`, or a `pattern` that names a domain. A pattern that checks only the
//! scheme (`^https?://`) still lets any host through, so it does not count.
//! A parameter that a sending tool sends to is TG-S009's, not this rule's.

use serde_json::{Map, Value};

use super::Subject;
use super::effects::{DESTINATION_PARAMS, Effect, Effects, about_a_resource};
use crate::Finding;
use crate::text::words;

/// Parameter names (lower-cased, separators as `_`) that are a location the
/// tool goes to.
const LOCATION_PARAMS: &[&str] = &[
    "url",
    "urls",
    "uri",
    "uris",
    "endpoint",
    "base_url",
    "server_url",
    "page_url",
    "image_url",
    "feed_url",
    "source_url",
    "target_url",
    "file_url",
    "download_url",
    "api_url",
    "link",
    "href",
    "webhook",
    "webhook_url",
    "callback_url",
];

/// Parameters that hold a link the tool stores rather than visits.
const STORED_LINKS: &[&str] = &[
    "homepage",
    "homepage_url",
    "website",
    "website_url",
    "html_url",
    "blog",
    "profile_url",
];

/// JSON Schema formats of a URL.
const URL_FORMATS: &[&str] = &["uri", "url", "iri", "uri-reference", "iri-reference"];

pub(crate) fn check(s: &Subject<'_>, effects: &Effects, out: &mut Vec<Finding>) {
    let Some(properties) = s.properties() else {
        return;
    };
    let acts = effects.has(Effect::Send) || effects.has(Effect::Execute);
    for (name, schema) in properties {
        let norm = words(name).join("_");
        if acts && DESTINATION_PARAMS.contains(&norm.as_str()) {
            continue;
        }
        let Some(obj) = schema.as_object() else {
            continue;
        };
        if STORED_LINKS.contains(&norm.as_str()) || !location(&norm, obj) || pinned(obj) {
            continue;
        }
        // A link handed to the person ("the URL the user should open") is
        // the same free choice, with the person as the one who goes there.
        let visitor = obj
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| words(d).iter().any(|w| w == "user"));
        let who = if visitor {
            "the user is sent to"
        } else {
            "the tool reaches"
        };
        out.push(s.finding(
            "TG-S010",
            format!("/{name} takes any URL: {who} whatever address the model gives"),
            format!("inputSchema/properties/{name}: {schema}"),
            "pin the hosts: an enum of the allowed URLs, or a pattern that names the domain (^https://api\\.example\\.com/), with a maxLength; or run the server in toolgate's sandbox with network = [\"host:port\", …]",
        ));
    }
}

/// Whether a parameter is a location the tool goes to: named like one, or a
/// string of a URL format, or described as a URL first ("URL to fetch",
/// "URL or data URI of the file content"). A resource URI of the server's
/// own ("the URI of the resource to read") is not.
fn location(norm: &str, obj: &Map<String, Value>) -> bool {
    let description = obj
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_lowercase();
    let described: Vec<String> = words(&description);
    let leads = described.iter().take(3).any(|w| w == "url" || w == "urls");
    let format = obj
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| URL_FORMATS.contains(&f))
        || items(obj)
            .and_then(|i| i.get("format"))
            .and_then(Value::as_str)
            .is_some_and(|f| URL_FORMATS.contains(&f));
    let named = LOCATION_PARAMS.contains(&norm);
    (named || format || leads) && (norm.contains("url") || !about_a_resource(&described))
}

fn items(obj: &Map<String, Value>) -> Option<&Map<String, Value>> {
    obj.get("items").and_then(Value::as_object)
}

/// Whether the schema pins where the tool can go: an `enum` or `const`, or a
/// `pattern` with a literal domain in it (`example\.com`). Any branch of an
/// `anyOf`/`oneOf` left open leaves it open; a list pins when its items do.
fn pinned(obj: &Map<String, Value>) -> bool {
    if obj.contains_key("enum") || obj.contains_key("const") {
        return true;
    }
    if let Some(pattern) = obj.get("pattern").and_then(Value::as_str) {
        return names_a_domain(pattern);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = obj.get(key).and_then(Value::as_array) {
            return branches.iter().all(|b| b.as_object().is_some_and(pinned));
        }
    }
    items(obj).is_some_and(pinned)
}

/// A literal `label\.tld` in a pattern: the host is written down, not left
/// to `[^/]+` or `.*`.
fn names_a_domain(pattern: &str) -> bool {
    pattern.match_indices("\\.").any(|(i, _)| {
        let before = pattern[..i].chars().next_back();
        let after = pattern[i + 2..].chars().next();
        before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            && after.is_some_and(|c| c.is_ascii_alphabetic())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{location, names_a_domain, pinned};

    fn obj(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn locations_by_name_format_or_description() {
        assert!(location("url", &obj(json!({"type": "string"}))));
        assert!(location(
            "data",
            &obj(
                json!({"type": "string", "format": "uri", "description": "URL or data URI of the file content"})
            )
        ));
        assert!(location(
            "target",
            &obj(json!({"description": "URL to open"}))
        ));
        assert!(!location("name", &obj(json!({"type": "string"}))));
        assert!(!location(
            "uri",
            &obj(json!({"type": "string", "description": "The URI of the resource to read"}))
        ));
    }

    #[test]
    fn only_a_named_domain_pins() {
        assert!(names_a_domain("^https://api\\.example\\.com/"));
        assert!(!names_a_domain("^https?://[^/]+/.*$"));
        assert!(!names_a_domain("^https?://.*\\.(png|jpg)$"));
        assert!(pinned(&obj(json!({"enum": ["https://a.example/x"]}))));
        assert!(!pinned(&obj(json!({"pattern": "^https://"}))));
        assert!(!pinned(&obj(
            json!({"anyOf": [{"enum": ["x"]}, {"type": "string"}]})
        )));
    }
}
