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
//! assert!(config.auth.is_some());
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
        let verifier = self.verifier()?;
        let mut rs = ResourceServer::new(&self.audience, verifier)
            .map_err(|e| ConfigError::new(format!("[auth]: {e}")))?;
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
        if self.jwks.starts_with("https://") || self.jwks.starts_with("http://") {
            JwtVerifier::from_jwks_url(&self.jwks, &self.issuer, &self.audience)
        } else {
            JwtVerifier::from_jwks_file(PathBuf::from(&self.jwks), &self.issuer, &self.audience)
        }
        .map_err(|e| ConfigError::new(format!("[auth]: jwks {}: {e}", self.jwks)))
    }
}
