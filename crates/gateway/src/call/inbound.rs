//! `[auth]`: who is calling the gateway. Over HTTP every request needs a
//! bearer token, verified as a JWT against the issuer's keys (JWKS) and
//! issued for the gateway itself (its `audience`, the canonical URI of its
//! endpoint); unauthenticated requests get `401` with the challenge, and
//! the Protected Resource Metadata is served for clients to discover the
//! authorization server. The verified subject and scopes are what policy
//! rules match with `subjects` and `scopes`. Upstreams never see this
//! token: their credentials are the gateway's own.
//!
//! ```
//! use toolgate_gateway::config::GatewayConfig;
//! let config = GatewayConfig::parse_toml(r#"
//!     [auth]
//!     issuer = "https://auth.example.com"
//!     audience = "https://gateway.example.com/mcp"
//!     jwks = "https://auth.example.com/.well-known/jwks.json"
//!     scopes_supported = ["tools:call"]
//! "#, |_| None).unwrap();
//! let auth = config.auth.unwrap();
//! // An endpoint's tokens are issued for its own URI.
//! assert_eq!(auth.audience_at("/mcp/coding", None), "https://gateway.example.com/mcp/coding");
//! ```
//!
//! Layer: `call`.

use std::path::PathBuf;

use toolgate_server::{JwtVerifier, ResourceServer};

pub use crate::config::AuthConfig;
use crate::config::ConfigError;

impl AuthConfig {
    /// The resource server that checks every HTTP request.
    pub fn resource_server(&self) -> Result<ResourceServer, ConfigError> {
        self.resource_server_for(&self.audience)
    }

    /// The audience of the endpoint served at `path`: its own
    /// `[endpoints.NAME.auth] audience`, else `[auth] audience`'s origin
    /// followed by `path`.
    pub fn audience_at(&self, path: &str, own: Option<&crate::config::EndpointAuth>) -> String {
        if let Some(audience) = own.and_then(|a| a.audience.clone()) {
            return audience;
        }
        let origin = match self.audience.find("://") {
            Some(i) => {
                let rest = &self.audience[i + 3..];
                let end = rest.find('/').map_or(self.audience.len(), |j| i + 3 + j);
                &self.audience[..end]
            }
            None => self.audience.as_str(),
        };
        format!("{origin}{path}")
    }

    /// The resource server of an endpoint whose tokens are issued for
    /// `audience`.
    pub fn resource_server_for(&self, audience: &str) -> Result<ResourceServer, ConfigError> {
        let verifier = self.verifier_for(audience)?;
        // Each caller's verified token is kept for the request: an upstream
        // with `[servers.X.identity] mode = "exchange"` exchanges it for one
        // of its own (it is never sent on). Kept whatever the upstreams are
        // now, so a reload that adds such an upstream needs no restart.
        let mut rs = ResourceServer::new(audience, verifier)
            .map_err(|e| ConfigError::new(format!("[auth]: {e}")))?
            .keep_token(true);
        let servers = if self.authorization_servers.is_empty() {
            std::slice::from_ref(&self.issuer)
        } else {
            &self.authorization_servers[..]
        };
        for issuer in servers {
            rs = rs.authorization_server(issuer.clone());
        }
        Ok(rs.scopes_supported(self.scopes_supported.iter().cloned()))
    }

    /// The verifier of tokens issued for the gateway (callers' tokens, and
    /// an operator's for the console).
    pub fn verifier(&self) -> Result<JwtVerifier, ConfigError> {
        self.verifier_for(&self.audience)
    }

    fn verifier_for(&self, audience: &str) -> Result<JwtVerifier, ConfigError> {
        if self.jwks.starts_with("https://") || self.jwks.starts_with("http://") {
            JwtVerifier::from_jwks_url(&self.jwks, &self.issuer, audience)
        } else {
            JwtVerifier::from_jwks_file(PathBuf::from(&self.jwks), &self.issuer, audience)
        }
        .map_err(|e| ConfigError::new(format!("[auth]: jwks {}: {e}", self.jwks)))
    }
}
