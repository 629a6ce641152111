//! Finding the authorization server: the server's Protected Resource
//! Metadata (RFC 9728; from the challenge's `resource_metadata`, else the
//! path-based and root well-known URIs), then the authorization server's
//! own metadata (RFC 8414 and OpenID Connect Discovery, in the order the
//! specification gives), whose `issuer` must be exactly the one asked for.
//! A 2025-03-26 server with no resource metadata is its own authorization
//! server, with default endpoints when it publishes no metadata either.

use reqwest::Url;
use serde_json::Value;

use super::fetch::{AuthHttp, endpoint, fail, shown};
use crate::ClientError;

/// What the MCP server says about itself.
#[derive(Clone, Debug)]
pub(crate) struct ResourceMetadata {
    /// The resource identifier, exactly as published.
    pub resource: String,
    /// Its authorization servers (issuers), in the server's order.
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
}

/// What the client needs of an authorization server.
#[derive(Clone, Debug, Default)]
pub(crate) struct AuthServer {
    /// The issuer identifier, as recorded for the `iss` check.
    pub issuer: String,
    pub authorization_endpoint: Option<Url>,
    pub token_endpoint: Option<Url>,
    pub registration_endpoint: Option<Url>,
    pub scopes_supported: Option<Vec<String>>,
    pub code_challenge_methods: Option<Vec<String>>,
    /// `authorization_response_iss_parameter_supported`.
    pub iss_supported: bool,
    pub auth_methods: Option<Vec<String>>,
    pub grant_types: Option<Vec<String>>,
    pub cimd_supported: bool,
    pub dpop_algs: Option<Vec<String>>,
    /// No metadata was found: the 2025-03-26 default endpoints are in use.
    pub defaults: bool,
}

impl AuthServer {
    /// Whether the server lists `method` for token endpoint authentication
    /// (RFC 8414 defaults to `client_secret_basic` when it lists none).
    pub fn accepts_auth(&self, method: &str) -> bool {
        match &self.auth_methods {
            Some(list) => list.iter().any(|m| m == method),
            None => method == "client_secret_basic",
        }
    }

    /// Whether the server issues refresh tokens at all.
    pub fn refreshes(&self) -> bool {
        self.grant_types
            .as_ref()
            .is_none_or(|g| g.iter().any(|g| g == "refresh_token"))
    }

    /// The token endpoint, or why there is none.
    pub fn token_endpoint(&self) -> Result<&Url, ClientError> {
        self.token_endpoint
            .as_ref()
            .ok_or_else(|| fail(format!("{} has no token endpoint", self.issuer)))
    }
}

fn strings(doc: &Value, key: &str) -> Option<Vec<String>> {
    doc.get(key)?.as_array().map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    })
}

/// `scheme://host[:port]`, the way the well-known URIs are built.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The resource identifier of `server`: no fragment, no query, and no
/// trailing slash unless the path is only `/` (then none at all).
pub(crate) fn canonical_resource(server: &Url) -> String {
    let path = server.path().trim_end_matches('/');
    format!("{}{path}", origin(server))
}

/// Whether a published `resource` identifies `server`: same origin (scheme
/// and host compared case-insensitively, as the URL parser does) and a path
/// that is the server's or one of its parents, segment by segment.
pub(crate) fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(published) = Url::parse(resource) else {
        return false;
    };
    if published.origin() != server.origin() || published.fragment().is_some() {
        return false;
    }
    let theirs = published.path().trim_end_matches('/');
    let ours = server.path().trim_end_matches('/');
    ours == theirs || ours.starts_with(&format!("{theirs}/"))
}

/// The server's Protected Resource Metadata, or `None` when it publishes
/// none (a 2025-03-26 server).
pub(crate) async fn protected_resource(
    http: &AuthHttp,
    server: &Url,
    from_challenge: Option<&str>,
) -> Result<Option<ResourceMetadata>, ClientError> {
    let mut candidates = Vec::new();
    if let Some(url) = from_challenge.and_then(|u| Url::parse(u).ok()) {
        candidates.push(url);
    }
    let path = server.path().trim_end_matches('/');
    let base = origin(server);
    if !path.is_empty() {
        candidates.extend(
            Url::parse(&format!(
                "{base}/.well-known/oauth-protected-resource{path}"
            ))
            .ok(),
        );
    }
    candidates.extend(Url::parse(&format!("{base}/.well-known/oauth-protected-resource")).ok());
    for url in candidates {
        let Some(doc) = http.document(&url).await? else {
            continue;
        };
        let resource = doc
            .get("resource")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(format!("the resource metadata at {url} has no `resource`")))?
            .to_owned();
        if !resource_covers(&resource, server) {
            return Err(fail(format!(
                "the resource metadata at {url} is for {}, not for {server}; not authorizing",
                shown(&resource)
            )));
        }
        let authorization_servers = strings(&doc, "authorization_servers").unwrap_or_default();
        if authorization_servers.is_empty() {
            return Err(fail(format!(
                "the resource metadata at {url} names no authorization server"
            )));
        }
        return Ok(Some(ResourceMetadata {
            resource,
            authorization_servers,
            scopes_supported: strings(&doc, "scopes_supported"),
        }));
    }
    Ok(None)
}

/// The metadata URLs of `issuer`, in the specification's order.
fn metadata_urls(issuer: &Url) -> Vec<String> {
    let base = origin(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{base}/.well-known/oauth-authorization-server"),
            format!("{base}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{base}/.well-known/oauth-authorization-server{path}"),
            format!("{base}/.well-known/openid-configuration{path}"),
            format!("{base}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// The metadata of the authorization server `issuer`. With `legacy`
/// (no resource metadata), a server without any is given the 2025-03-26
/// default endpoints under the issuer's origin.
pub(crate) async fn authorization_server(
    http: &AuthHttp,
    issuer: &str,
    legacy: bool,
) -> Result<AuthServer, ClientError> {
    let issuer_url = endpoint(issuer, "authorization server")?;
    let mut mismatch = None;
    for url in metadata_urls(&issuer_url) {
        let Ok(url) = Url::parse(&url) else { continue };
        let Some(doc) = http.document(&url).await? else {
            continue;
        };
        let published = doc
            .get("issuer")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if published != issuer {
            // RFC 8414 §3.3: such a document must not be used at all.
            mismatch = Some(format!(
                "the metadata at {url} names issuer {:?}, not {issuer:?}; it was not used",
                shown(published)
            ));
            continue;
        }
        return from_document(issuer, &doc);
    }
    if let Some(why) = mismatch {
        return Err(fail(why));
    }
    if legacy {
        let base = origin(&issuer_url);
        let at = |p: &str| Url::parse(&format!("{base}{p}")).ok();
        return Ok(AuthServer {
            issuer: issuer.to_owned(),
            authorization_endpoint: at("/authorize"),
            token_endpoint: at("/token"),
            registration_endpoint: at("/register"),
            defaults: true,
            ..AuthServer::default()
        });
    }
    Err(fail(format!(
        "no authorization server metadata for {issuer} at any well-known location"
    )))
}

fn from_document(issuer: &str, doc: &Value) -> Result<AuthServer, ClientError> {
    let url = |key: &str, what: &str| -> Result<Option<Url>, ClientError> {
        doc.get(key)
            .and_then(Value::as_str)
            .map(|u| endpoint(u, what))
            .transpose()
    };
    Ok(AuthServer {
        issuer: issuer.to_owned(),
        authorization_endpoint: url("authorization_endpoint", "authorization endpoint")?,
        token_endpoint: url("token_endpoint", "token endpoint")?,
        registration_endpoint: url("registration_endpoint", "registration endpoint")?,
        scopes_supported: strings(doc, "scopes_supported"),
        code_challenge_methods: strings(doc, "code_challenge_methods_supported"),
        iss_supported: doc
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        auth_methods: strings(doc, "token_endpoint_auth_methods_supported"),
        grant_types: strings(doc, "grant_types_supported"),
        cimd_supported: doc
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        dpop_algs: strings(doc, "dpop_signing_alg_values_supported"),
        defaults: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn metadata_is_looked_for_where_the_specification_says_in_its_order() {
        assert_eq!(
            metadata_urls(&url("https://auth.example.com/tenant1")),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls(&url("https://auth.example.com")),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_identifies_its_server_or_a_parent_on_the_same_origin() {
        let server = url("https://mcp.example.com/public/mcp");
        for ok in [
            "https://mcp.example.com/public/mcp",
            "https://MCP.example.com/public/mcp/",
            "https://mcp.example.com",
            "https://mcp.example.com/public",
        ] {
            assert!(resource_covers(ok, &server), "{ok}");
        }
        for bad in [
            "https://evil.example.com/public/mcp",
            "http://mcp.example.com/public/mcp",
            "https://mcp.example.com:8443/public/mcp",
            "https://mcp.example.com/pub",
            "https://mcp.example.com/public/mcp/other",
            "not a url",
        ] {
            assert!(!resource_covers(bad, &server), "{bad}");
        }
    }

    #[test]
    fn the_canonical_resource_has_no_trailing_slash_query_or_fragment() {
        assert_eq!(
            canonical_resource(&url("https://MCP.example.com/mcp/?x=1#f")),
            "https://mcp.example.com/mcp"
        );
        assert_eq!(
            canonical_resource(&url("https://mcp.example.com/")),
            "https://mcp.example.com"
        );
    }
}
