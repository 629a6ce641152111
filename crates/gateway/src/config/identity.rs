//! `[servers.NAME.identity]`: whose identity a call carries upstream.
//!
//! Without it an upstream sees the gateway (its own `oauth` credentials,
//! or none). With `mode = "exchange"` each call carries a token the
//! gateway obtained for the verified caller by RFC 8693 token exchange at
//! the upstream's authorization server, for the upstream only (RFC 8707
//! `resource`), with the scopes the matching rule names. The caller's own
//! token is never sent on.
//!
//! With `mode = "user"` each caller links their own account at the
//! upstream once, on the gateway's connect page; see
//! [`crate::call::linked`].
//!
//! ```toml
//! [servers.crm]
//! url = "https://crm.example.com/mcp"
//!
//! [servers.crm.identity]
//! mode = "exchange"
//! issuer = "https://auth.example.com"
//! client_id = "toolgate"
//! client_secret = "${CRM_EXCHANGE_SECRET}"
//! scopes = ["crm.read"]
//!
//! [[servers.crm.identity.tools]]
//! match = ["update_*", "delete_*"]
//! scopes = ["crm.read", "crm.write"]
//! ```
//!
//! Layer: `config`.

use super::*;

/// How a call's identity reaches an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IdentityMode {
    /// RFC 8693 token exchange of the caller's verified token.
    Exchange,
    /// The caller's own account at the upstream, linked once on the
    /// gateway's connect page (authorization code with PKCE) and refreshed
    /// by the gateway; its tokens are kept encrypted in the store.
    User,
}

impl IdentityMode {
    /// Its name in the configuration and the audit store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exchange => "exchange",
            Self::User => "user",
        }
    }
}

/// The scopes a call of some of the upstream's tools asks for.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityScopes {
    /// Globs over the tool's name at the upstream.
    #[serde(rename = "match")]
    pub tools: Vec<String>,
    /// The scopes to ask for: the token is never given more.
    pub scopes: Vec<String>,
}

/// `[servers.NAME.identity]`.
#[derive(Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    /// `exchange` or `user`.
    pub mode: IdentityMode,
    /// The upstream's authorization server (its issuer): the endpoints
    /// below come from its metadata when not set.
    pub issuer: Option<String>,
    /// Its token endpoint.
    pub token_endpoint: Option<String>,
    /// Its authorization endpoint (`user`).
    pub authorization_endpoint: Option<String>,
    /// The gateway's client id there.
    pub client_id: String,
    /// Its secret (write `${VAR}` to keep it out of the file).
    pub client_secret: Option<Secret>,
    /// The resource the tokens are for (RFC 8707): default, the server's
    /// `url` without query or fragment.
    pub resource: Option<String>,
    /// The scopes asked for when no rule in `tools` matches.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Scopes by tool, first match wins.
    #[serde(default)]
    pub tools: Vec<IdentityScopes>,
    /// Seconds a request to the authorization server may take (default
    /// 5): a call fails fast when it is down.
    pub timeout: Option<u64>,
}

impl std::fmt::Debug for IdentityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityConfig")
            .field("mode", &self.mode)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl IdentityConfig {
    /// The scopes a call of `tool` (its upstream name) asks for.
    pub fn scopes_for(&self, tool: &str) -> &[String] {
        self.tools
            .iter()
            .find(|rule| {
                rule.tools
                    .iter()
                    .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(tool)))
            })
            .map_or(&self.scopes[..], |rule| &rule.scopes[..])
    }

    /// How long one request to the authorization server may take.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.timeout.unwrap_or(5).max(1))
    }

    /// The resource its tokens are for, given the upstream's `url`.
    pub fn resource_for(&self, url: &str) -> String {
        match &self.resource {
            Some(r) => r.clone(),
            None => match url::Url::parse(url) {
                Ok(u) => {
                    let path = u.path().trim_end_matches('/');
                    format!("{}{path}", u.origin().ascii_serialization())
                }
                Err(_) => url.to_owned(),
            },
        }
    }

    pub(super) fn check(&self, server: &str, upstream: &UpstreamConfig) -> Result<(), ConfigError> {
        let fail = |what: String| Err(err(format!("server {server:?}: identity: {what}")));
        if upstream.url.is_none() {
            return fail("applies to HTTP servers (give a url)".into());
        }
        if upstream.transport == Some(HttpKind::Sse) {
            return fail(
                "the HTTP+SSE transport cannot carry a token per call; use Streamable HTTP".into(),
            );
        }
        if self.client_id.trim().is_empty() {
            return fail("client_id is empty".into());
        }
        if self.issuer.is_none() && self.token_endpoint.is_none() {
            return fail("give the authorization server's issuer (or its token_endpoint)".into());
        }
        if self.mode == IdentityMode::User
            && self.issuer.is_none()
            && self.authorization_endpoint.is_none()
        {
            return fail(
                "mode \"user\" needs the issuer (or its authorization_endpoint and token_endpoint)"
                    .into(),
            );
        }
        // The connect page's own steps live beside `/connect/{server}`.
        if self.mode == IdentityMode::User && matches!(server, "signed-in" | "callback") {
            return fail(format!(
                "mode \"user\" cannot serve a server named {server:?} (the connect page uses /connect/{server} for itself); rename it"
            ));
        }
        if self.timeout == Some(0) {
            return fail("timeout must be at least 1 second".into());
        }
        for rule in &self.tools {
            if rule.tools.is_empty() {
                return fail("a [[tools]] rule matches no tool (give match)".into());
            }
            for g in &rule.tools {
                if let Err(e) = glob::Pattern::new(g) {
                    return fail(format!("glob {g:?}: {e}"));
                }
            }
        }
        for url in [
            &self.issuer,
            &self.token_endpoint,
            &self.authorization_endpoint,
        ]
        .into_iter()
        .flatten()
        .chain(&self.resource)
        {
            if url::Url::parse(url).is_err() {
                return fail(format!("{url:?} is not a URL"));
            }
        }
        Ok(())
    }

    pub(super) fn expand(
        &mut self,
        server: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let x = |text: &mut String| -> Result<(), ConfigError> {
            *text = expand(text, env)
                .map_err(|unset| err(format!("server {server:?}: identity: {unset}")))?;
            Ok(())
        };
        x(&mut self.client_id)?;
        for text in [
            &mut self.issuer,
            &mut self.token_endpoint,
            &mut self.authorization_endpoint,
            &mut self.resource,
        ]
        .into_iter()
        .flatten()
        {
            x(text)?;
        }
        if let Some(secret) = &mut self.client_secret {
            secret
                .expand(Shape::Hidden, env)
                .map_err(|unset| err(format!("server {server:?}: identity: {unset}")))?;
        }
        Ok(())
    }
}
