//! Checks on the HTTP layer of a request: origin and host (DNS rebinding),
//! content negotiation, and the headers that mirror the JSON-RPC body.

use http::header::{ACCEPT, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderMap, HeaderName};
use toolgate_protocol::RpcError;
use toolgate_protocol::header::{decode_header_value, header_value_matches};
use toolgate_protocol::jsonrpc::Request;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::quote::quote;

pub use toolgate_protocol::header::{METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER};

/// Which `Origin` values may call the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OriginPolicy {
    /// Only `http(s)://localhost`, `127.0.0.1` and `[::1]`, any port (the default).
    Localhost,
    /// Exactly these origins (`scheme://host[:port]`), plus requests without `Origin`.
    List(Vec<String>),
    /// Any origin. Only for servers protected otherwise (authentication).
    Any,
}

fn is_local_host(host: &str) -> bool {
    // Strip a port; IPv6 literals keep their brackets. Compared in place:
    // this runs on every request.
    let name = if host.starts_with('[') {
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|local| name.eq_ignore_ascii_case(local))
}

/// `Ok` if the `Origin` header is absent or allowed.
pub(crate) fn check_origin(headers: &HeaderMap, policy: &OriginPolicy) -> Result<(), String> {
    let Some(origin) = headers.get(ORIGIN) else {
        return Ok(());
    };
    let origin = origin
        .to_str()
        .map_err(|_| "the Origin header is not valid ASCII".to_owned())?;
    let allowed = match policy {
        OriginPolicy::Any => true,
        OriginPolicy::List(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        OriginPolicy::Localhost => origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(is_local_host),
    };
    if allowed {
        Ok(())
    } else {
        Err(format!(
            "origin {origin:?} is not allowed to call this server"
        ))
    }
}

/// `Ok` if the `Host` header names an allowed host (`None`: any host).
/// `Ok` if the request's host is allowed. The host is the `Host` header,
/// or on HTTP/2 (which carries it as `:authority`) the URI's authority.
pub(crate) fn check_host(
    headers: &HeaderMap,
    uri: &http::Uri,
    allowed: Option<&[String]>,
) -> Result<(), String> {
    let Some(allowed) = allowed else {
        return Ok(());
    };
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or("");
    let ok = if allowed.is_empty() {
        is_local_host(host)
    } else {
        allowed.iter().any(|a| {
            a.eq_ignore_ascii_case(host)
                || host
                    .split(':')
                    .next()
                    .is_some_and(|h| a.eq_ignore_ascii_case(h))
        })
    };
    if ok {
        Ok(())
    } else {
        Err(format!("host {} is not served here", quote(host)))
    }
}

/// `Ok` if the body is declared as JSON.
pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), String> {
    let declared = headers.get(CONTENT_TYPE);
    // What clients send, recognised without trimming or folding case.
    if declared.is_some_and(|v| v.as_bytes() == b"application/json") {
        return Ok(());
    }
    let ct = declared.and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(format!(
            "Content-Type must be application/json, got {}",
            quote(ct)
        ))
    }
}

/// The `Accept` values clients commonly send for this endpoint, each
/// admitting both media types.
const COMMON_ACCEPT: [&[u8]; 4] = [
    b"application/json, text/event-stream",
    b"application/json,text/event-stream",
    b"text/event-stream, application/json",
    b"text/event-stream,application/json",
];

/// `Ok` if `Accept` admits both `application/json` and `text/event-stream`.
pub(crate) fn check_accept(headers: &HeaderMap) -> Result<(), String> {
    // What clients send, recognised without parsing media ranges: one
    // value that admits both is enough, whatever other `Accept` headers
    // say (a range refused with `q=0` only withdraws itself).
    if headers
        .get(ACCEPT)
        .is_some_and(|v| COMMON_ACCEPT.contains(&v.as_bytes()))
    {
        return Ok(());
    }
    if admits_both(headers) {
        Ok(())
    } else {
        Err("Accept must list both application/json and text/event-stream".into())
    }
}

/// Whether the `Accept` media ranges admit both media types.
fn admits_both(headers: &HeaderMap) -> bool {
    // Allocation-free: this runs on every request.
    let (mut json, mut sse) = (false, false);
    for value in headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
    {
        for range in value.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim();
            // `q=0` means "not acceptable".
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q == 0.0))
            });
            if refused {
                continue;
            }
            let (ty, sub) = media.split_once('/').unwrap_or((media, ""));
            let any_ty = ty == "*";
            let is = |t: &str, s: &str| {
                (any_ty && sub == "*")
                    || (ty.eq_ignore_ascii_case(t) && (sub == "*" || sub.eq_ignore_ascii_case(s)))
            };
            json |= is("application", "json");
            sse |= is("text", "event-stream");
        }
    }
    json && sse
}

// Parsed once: looking a header up by `&str` parses the name on every
// request.
const PROTOCOL_VERSION_NAME: HeaderName = HeaderName::from_static(PROTOCOL_VERSION_HEADER);
const METHOD_NAME: HeaderName = HeaderName::from_static(METHOD_HEADER);
const NAME_NAME: HeaderName = HeaderName::from_static(NAME_HEADER);

fn header<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<&'a [u8], RpcError> {
    headers
        .get(name)
        .map(|v| v.as_bytes())
        .ok_or_else(|| RpcError::header_mismatch(format!("required header {name} is missing")))
}

/// Compare the mirrored headers with the body.
pub(crate) fn check_mirrored_headers(
    headers: &HeaderMap,
    req: &Request,
    meta: &RequestMeta,
) -> Result<(), RpcError> {
    let version = header(headers, &PROTOCOL_VERSION_NAME)?;
    if version != meta.protocol_version.as_bytes() {
        return Err(RpcError::header_mismatch(format!(
            "MCP-Protocol-Version header value {} does not match body value {}",
            quote(&String::from_utf8_lossy(version)),
            quote(&meta.protocol_version)
        )));
    }
    let method = header(headers, &METHOD_NAME)?;
    if method != req.method.as_bytes() {
        return Err(RpcError::header_mismatch(format!(
            "Mcp-Method header value {} does not match body value {}",
            quote(&String::from_utf8_lossy(method)),
            quote(&req.method)
        )));
    }
    // Which param `Mcp-Name` mirrors is the catalogue's to say (the tasks
    // extension routes by task: `Mcp-Name` carries the task id). Without a
    // string name in the body the request is malformed; the method's own
    // parameter check answers that with -32602.
    let body_name = req
        .params
        .as_ref()
        .and_then(|params| toolgate_protocol::methods::routing_name(&req.method, params));
    if let Some(body) = body_name {
        let raw = header(headers, &NAME_NAME)?;
        let invalid = |e| RpcError::header_mismatch(format!("Mcp-Name header {e}"));
        if !header_value_matches(raw, body).map_err(invalid)? {
            let decoded = decode_header_value(raw).map_err(invalid)?;
            return Err(RpcError::header_mismatch(format!(
                "Mcp-Name header value {} does not match body value {}",
                quote(&decoded),
                quote(body)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(name: http::header::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn origin_policy() {
        let p = OriginPolicy::Localhost;
        assert!(check_origin(&HeaderMap::new(), &p).is_ok());
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
        ] {
            assert!(check_origin(&with(ORIGIN, ok), &p).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.example.com",
            "http://localhost.evil.com",
            "null",
            "file://localhost",
        ] {
            assert!(check_origin(&with(ORIGIN, bad), &p).is_err(), "{bad}");
        }
        let list = OriginPolicy::List(vec!["https://app.example.com".into()]);
        assert!(check_origin(&with(ORIGIN, "https://app.example.com"), &list).is_ok());
        assert!(check_origin(&with(ORIGIN, "http://localhost"), &list).is_err());
    }

    #[test]
    fn host_check() {
        let uri = http::Uri::from_static("/mcp");
        assert!(check_host(&with(HOST, "localhost:3000"), &uri, Some(&[])).is_ok());
        assert!(check_host(&with(HOST, "evil.example.com"), &uri, Some(&[])).is_err());
        assert!(check_host(&with(HOST, "evil.example.com"), &uri, None).is_ok());
        assert!(
            check_host(
                &with(HOST, "api.example.com:443"),
                &uri,
                Some(&["api.example.com".into()])
            )
            .is_ok()
        );
        for local in ["LocalHost", "127.0.0.1", "[::1]:8080", "[::1]"] {
            assert!(
                check_host(&with(HOST, local), &uri, Some(&[])).is_ok(),
                "{local}"
            );
        }
        for not_local in [
            "[::1",
            "localhost.evil.com",
            "localhost:x",
            "127.0.0.1.nip.io",
        ] {
            assert!(
                check_host(&with(HOST, not_local), &uri, Some(&[])).is_err(),
                "{not_local}"
            );
        }
        // HTTP/2: no Host header, the authority is in the URI.
        let h2 = http::Uri::from_static("http://127.0.0.1:3000/mcp");
        assert!(check_host(&HeaderMap::new(), &h2, Some(&[])).is_ok());
        let h2_evil = http::Uri::from_static("http://evil.example.com/mcp");
        assert!(check_host(&HeaderMap::new(), &h2_evil, Some(&[])).is_err());
        assert!(check_host(&HeaderMap::new(), &uri, Some(&[])).is_err());
    }

    #[test]
    fn accept_negotiation() {
        assert!(check_accept(&with(ACCEPT, "application/json, text/event-stream")).is_ok());
        assert!(check_accept(&with(ACCEPT, "text/event-stream, application/json")).is_ok());
        assert!(check_accept(&with(ACCEPT, "*/*")).is_ok());
        assert!(check_accept(&with(ACCEPT, "application/json")).is_err());
        assert!(check_accept(&with(ACCEPT, "application/json, text/event-stream;q=0")).is_err());
        assert!(check_accept(&HeaderMap::new()).is_err());
        assert!(check_accept(&with(ACCEPT, "Application/JSON, text/*")).is_ok());
        assert!(check_accept(&with(ACCEPT, "application/*, text/event-stream")).is_ok());
        assert!(check_accept(&with(ACCEPT, "application/jsonx, text/event-stream")).is_err());
        // The values recognised without parsing are ones the parser admits.
        for common in COMMON_ACCEPT {
            let value = std::str::from_utf8(common).unwrap();
            assert!(admits_both(&with(ACCEPT, value)), "{value}");
        }
        // One value that admits both is enough, whatever follows.
        let mut two = with(ACCEPT, "application/json, text/event-stream");
        two.append(ACCEPT, HeaderValue::from_static("text/event-stream;q=0"));
        assert!(check_accept(&two).is_ok());
    }

    #[test]
    fn content_type() {
        assert!(check_content_type(&with(CONTENT_TYPE, "application/json; charset=utf-8")).is_ok());
        assert!(check_content_type(&with(CONTENT_TYPE, "application/json")).is_ok());
        assert!(check_content_type(&with(CONTENT_TYPE, " Application/JSON ")).is_ok());
        assert!(check_content_type(&with(CONTENT_TYPE, "application/json-seq")).is_err());
        assert!(check_content_type(&with(CONTENT_TYPE, "text/plain")).is_err());
        assert!(check_content_type(&HeaderMap::new()).is_err());
    }
}
