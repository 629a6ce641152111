//! The HTTP server as an OAuth 2.1 protected resource (RFC 6750, RFC 9728).
//!
//! - Every request must carry `Authorization: Bearer <token>`; the token is
//!   checked by the [`TokenVerifier`]. Missing, malformed or refused tokens
//!   get `401` with `WWW-Authenticate: Bearer resource_metadata="…"`,
//!   `scope="…"` (what the server's tools need) and, when a token was sent,
//!   `error="invalid_token"`.
//! - A valid token without the scopes a tool needs gets `403` with
//!   `error="insufficient_scope"` and the scopes needed, so the client can
//!   step up.
//! - The Protected Resource Metadata document is served at
//!   `/.well-known/oauth-protected-resource` and at the same path followed
//!   by the endpoint's path (`…/mcp`), without authentication.
//! - Tokens never appear in logs or answers.

use std::sync::Arc;

use http::HeaderMap;
use serde_json::json;

use super::{AuthContext, ScopeHierarchy, TokenError, TokenVerifier};

/// Why a request was not let in.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// No `Authorization` header.
    Missing,
    /// A header that is not a bearer token, or a token the verifier refused.
    Invalid(String),
    /// The verifier could not check the token now.
    Unavailable(String),
}

/// Authorization for the HTTP transport: who may call, and the metadata
/// that tells clients where to get a token.
///
/// ```no_run
/// use toolgate_server::{JwtVerifier, ResourceServer, ScopeHierarchy};
/// let verifier = JwtVerifier::from_jwks_file("jwks.json", "https://auth.example.com", "https://mcp.example.com/mcp")?;
/// let auth = ResourceServer::new("https://mcp.example.com/mcp", verifier)?
///     .authorization_server("https://auth.example.com")
///     .scopes_supported(["basket:read", "basket:write"])
///     .scope_hierarchy(ScopeHierarchy::default().implies("basket:write", ["basket:read"]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ResourceServer {
    resource: String,
    path: String,
    origin: String,
    verifier: Arc<dyn TokenVerifier>,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    hierarchy: ScopeHierarchy,
    /// Keep the presented token in the request's [`AuthContext`].
    keep_token: bool,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("resource", &self.resource)
            .field("authorization_servers", &self.authorization_servers)
            .field("scopes_supported", &self.scopes_supported)
            .finish_non_exhaustive()
    }
}

/// `value` as an RFC 7230 quoted-string.
fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

impl ResourceServer {
    /// Protect the resource whose canonical URI is `resource` (the
    /// endpoint's full URL, e.g. `https://mcp.example.com/mcp`: the audience
    /// tokens must be issued for).
    pub fn new(resource: &str, verifier: impl TokenVerifier) -> Result<Self, crate::ConfigError> {
        let url = url::Url::parse(resource).map_err(|source| crate::ConfigError::ResourceUri {
            uri: resource.to_owned(),
            source,
        })?;
        if url.fragment().is_some() || !matches!(url.scheme(), "https" | "http") {
            return Err(crate::ConfigError::Resource(format!(
                "resource URI {resource:?} must be an http(s) URL without a fragment"
            )));
        }
        let path = url.path().trim_end_matches('/').to_owned();
        Ok(Self {
            origin: url.origin().ascii_serialization(),
            path,
            resource: resource.to_owned(),
            verifier: Arc::new(verifier),
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            hierarchy: ScopeHierarchy::default(),
            keep_token: false,
        })
    }

    /// Keep each caller's verified token in its [`AuthContext`]
    /// ([`AuthContext::presented_token`]), for a gateway that exchanges it
    /// for an upstream's (RFC 8693). Off by default: a server that does not
    /// exchange tokens has no reason to hold them past verification.
    pub fn keep_token(mut self, keep: bool) -> Self {
        self.keep_token = keep;
        self
    }

    /// An authorization server (its issuer URL) clients may get tokens from.
    pub fn authorization_server(mut self, issuer: impl Into<String>) -> Self {
        self.authorization_servers.push(issuer.into());
        self
    }

    /// The scopes the server understands: listed in the metadata and named
    /// in the `401` challenge.
    pub fn scopes_supported<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes_supported
            .extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Scopes that imply others, applied to every verified token.
    pub fn scope_hierarchy(mut self, hierarchy: ScopeHierarchy) -> Self {
        self.hierarchy = hierarchy;
        self
    }

    /// Refuse a configuration clients could not use: no authorization
    /// server (RFC 9728 needs at least one to point clients at), or a
    /// resource URI whose path is not the endpoint's.
    pub(crate) fn validate(&self, endpoint: &str) -> Result<(), crate::ConfigError> {
        if self.authorization_servers.is_empty() {
            return Err(crate::ConfigError::Resource("auth: name at least one authorization server (ResourceServer::authorization_server), so clients know where to get tokens".into()));
        }
        if self.path != endpoint.trim_end_matches('/') {
            return Err(crate::ConfigError::Resource(format!(
                "auth: the resource URI {:?} does not end with the endpoint path {endpoint:?}",
                self.resource
            )));
        }
        Ok(())
    }

    /// The canonical resource URI.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The metadata path for this resource (RFC 9728 §3.1: the well-known
    /// prefix followed by the resource's path).
    pub fn metadata_path(&self) -> String {
        format!("/.well-known/oauth-protected-resource{}", self.path)
    }

    /// Where clients find the metadata (named in every challenge).
    pub fn metadata_url(&self) -> String {
        format!("{}{}", self.origin, self.metadata_path())
    }

    /// Whether `path` is one of the paths the metadata is served at.
    pub(crate) fn serves_metadata_at(&self, path: &str) -> bool {
        path == "/.well-known/oauth-protected-resource" || path == self.metadata_path()
    }

    /// The Protected Resource Metadata document.
    pub(crate) fn metadata(&self) -> Vec<u8> {
        let mut doc = json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes_supported.is_empty() {
            doc["scopes_supported"] = json!(self.scopes_supported);
        }
        serde_json::to_vec(&doc).unwrap_or_default()
    }

    /// Check the request's bearer token.
    pub(crate) async fn authenticate(&self, headers: &HeaderMap) -> Result<AuthContext, Refusal> {
        let values: Vec<_> = headers
            .get_all(http::header::AUTHORIZATION)
            .iter()
            .collect();
        let value = match values.as_slice() {
            [] => return Err(Refusal::Missing),
            [one] => one
                .to_str()
                .map_err(|_| Refusal::Invalid("not ASCII".into()))?,
            _ => {
                return Err(Refusal::Invalid(
                    "more than one Authorization header".into(),
                ));
            }
        };
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Refusal::Invalid("not a Bearer token".into()))?;
        match self.verifier.verify(token).await {
            Ok(auth) if self.keep_token => {
                Ok(self.hierarchy.expand(auth).with_presented_token(token))
            }
            Ok(auth) => Ok(self.hierarchy.expand(auth)),
            Err(TokenError::Invalid(why)) => Err(Refusal::Invalid(why)),
            Err(TokenError::Unavailable(why)) => Err(Refusal::Unavailable(why)),
        }
    }

    /// The `WWW-Authenticate` value of a `401`.
    pub(crate) fn challenge(&self, refusal: &Refusal) -> String {
        let mut value = format!("Bearer resource_metadata={}", quoted(&self.metadata_url()));
        if !self.scopes_supported.is_empty() {
            value.push_str(&format!(
                ", scope={}",
                quoted(&self.scopes_supported.join(" "))
            ));
        }
        if matches!(refusal, Refusal::Invalid(_)) {
            value.push_str(", error=\"invalid_token\", error_description=\"the access token is missing, malformed, expired or not for this resource\"");
        }
        value
    }

    /// The `WWW-Authenticate` value of a `403` for a call that needs `scopes`.
    pub(crate) fn step_up(&self, scopes: &[String]) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope={}, resource_metadata={}, error_description=\"this call needs more scopes\"",
            quoted(&scopes.join(" ")),
            quoted(&self.metadata_url())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::VerifyFuture;

    struct Fixed;
    impl TokenVerifier for Fixed {
        fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
            Box::pin(async move {
                match token {
                    "good" => Ok(AuthContext::new("alice").with_scopes(["w"])),
                    _ => Err(TokenError::Invalid("no".into())),
                }
            })
        }
    }

    #[test]
    fn metadata_lives_beside_the_well_known_prefix_and_the_endpoint_path() {
        let rs = ResourceServer::new("https://mcp.example.com/api/mcp", Fixed).unwrap();
        assert_eq!(
            rs.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/api/mcp"
        );
        assert!(rs.serves_metadata_at("/.well-known/oauth-protected-resource"));
        assert!(rs.serves_metadata_at("/.well-known/oauth-protected-resource/api/mcp"));
        assert!(ResourceServer::new("not a url", Fixed).is_err());
        assert!(ResourceServer::new("https://x/mcp#frag", Fixed).is_err());
    }

    #[tokio::test]
    async fn bearer_tokens_are_read_strictly_and_scopes_expanded() {
        let rs = ResourceServer::new("https://x/mcp", Fixed)
            .unwrap()
            .scope_hierarchy(ScopeHierarchy::default().implies("w", ["r"]));
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(http::header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        let auth = rs.authenticate(&with("Bearer good")).await.unwrap();
        assert!(auth.has_scope("r"));
        assert!(rs.authenticate(&with("bearer  good ")).await.is_ok());
        assert!(matches!(
            rs.authenticate(&HeaderMap::new()).await,
            Err(Refusal::Missing)
        ));
        for bad in ["Basic good", "Bearer", "Bearer bad", "good"] {
            assert!(
                matches!(rs.authenticate(&with(bad)).await, Err(Refusal::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn challenges_quote_their_values() {
        let rs = ResourceServer::new("https://x/mcp", Fixed)
            .unwrap()
            .scopes_supported(["a", "b\"c"]);
        let c = rs.challenge(&Refusal::Missing);
        assert_eq!(
            c,
            r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource/mcp", scope="a b\"c""#
        );
        assert!(
            rs.challenge(&Refusal::Invalid("x".into()))
                .contains("error=\"invalid_token\"")
        );
        assert!(
            rs.step_up(&["w".into()])
                .starts_with("Bearer error=\"insufficient_scope\", scope=\"w\"")
        );
    }
}
