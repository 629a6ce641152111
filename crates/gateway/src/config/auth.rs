//! `[auth]`: how callers are verified.
//!
//! Layer: `config`.

use schemars::JsonSchema;
use serde::Deserialize;

/// `[auth]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The issuer tokens must name (`iss`).
    pub issuer: String,
    /// The canonical URI of the gateway's endpoint as callers reach it
    /// (`https://gateway.example.com/mcp`): tokens must be issued for it
    /// (`aud`, RFC 8707).
    pub audience: String,
    /// The issuer's keys: an `https://` JWKS URL (fetched and cached by
    /// key id) or a JWKS file.
    pub jwks: String,
    /// The authorization servers clients are pointed at (default: the
    /// issuer).
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes listed in the metadata and the `401` challenge.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// The gateway's client at the issuer for signing a person in on its
    /// connect page (authorization code with PKCE): how the page knows the
    /// person linking an account is the caller who was sent there. Needed
    /// by `[servers.X.identity] mode = "user"`.
    pub sign_in: Option<SignIn>,
}

/// `[auth.sign_in]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    /// The client id.
    pub client_id: String,
    /// Its secret (write `${VAR}`); none for a public client.
    pub client_secret: Option<super::Secret>,
    /// The scopes the sign-in asks for (default `["openid"]`: a sign-in
    /// asks for the person's identity, and a server may grant nothing to a
    /// request that names no scope).
    pub scopes: Option<Vec<String>>,
}

impl SignIn {
    /// The scopes the sign-in asks for.
    pub fn scopes(&self) -> Vec<String> {
        self.scopes.clone().unwrap_or_else(|| vec!["openid".into()])
    }
}
