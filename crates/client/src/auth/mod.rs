//! OAuth 2.1 for HTTP servers, as the 2026-07-28 Authorization chapter
//! specifies it, with the authorization extensions.
//!
//! Attach an [`OAuth`] to [`HttpOptions`](crate::transport::http::HttpOptions)
//! and the transport does the rest: the first `401` starts discovery
//! (Protected Resource Metadata, then the authorization server's
//! metadata, its issuer checked), registration (pre-registered, Client ID
//! Metadata Document, or dynamic), then the configured [`Grant`]; the
//! request is retried with the token. Tokens are refreshed before they
//! expire, concurrent requests share one refresh, a `403
//! insufficient_scope` steps up to the union of the scopes asked for so
//! far, and a changed authorization server means a new registration there.
//! DPoP (RFC 9449) is used whenever the authorization server offers ES256.
//!
//! ```no_run
//! # async fn run() -> Result<(), toolgate_client::ClientError> {
//! use std::sync::Arc;
//! use toolgate_client::auth::{FileTokenStore, Grant, OAuth, ClientCredentials};
//! use toolgate_client::transport::http::{HttpOptions, HttpTransport};
//!
//! // A service calling a server on its own behalf.
//! let oauth = OAuth::builder("my-agent")
//!     .grant(Grant::ClientCredentials)
//!     .credentials(ClientCredentials::secret("my-client-id", std::env::var("CLIENT_SECRET").unwrap_or_default()))
//!     .store(Arc::new(FileTokenStore::new("/var/lib/my-agent/credentials.json")))
//!     .build();
//! let transport = HttpTransport::new(
//!     "https://mcp.example.com/mcp",
//!     HttpOptions { oauth: Some(oauth), ..HttpOptions::default() },
//! )?;
//! # Ok(()) }
//! ```
//!
//! A person's authorization needs a [`UserAgent`]: something that shows the
//! authorization URL (a browser) and hands back the redirect it ends at.
//! The `toolgate login` command is one, over a loopback listener.
//!
//! Tokens are never logged, never put in a URL, and sent only to the server
//! they were issued for; client secrets go only to the token endpoint of
//! the issuer they belong to, and only over HTTPS (or to this machine).

mod broker;
mod challenge;
mod discovery;
mod fetch;
mod grant;
mod jws;
mod session;
mod store;

use std::path::PathBuf;
use std::sync::Arc;

pub use broker::{
    Authorization, BrokerConfig, BrokerError, TokenBroker, jwt_audiences, jwt_expiry,
};
pub use challenge::{Challenge, from_headers as challenges_in, parse as parse_challenges};
pub use fetch::AuthLimits;
pub(crate) use fetch::shown;
pub(crate) use session::{Attempt, Session, Verdict};
pub use store::{
    ClientRegistration, FileTokenStore, MemoryTokenStore, StoredAuth, TokenSet, TokenStore,
};

use crate::{BoxFuture, ClientError};

/// How the client obtains tokens.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Grant {
    /// A person authorizes in a browser (authorization code with PKCE):
    /// needs a [`UserAgent`].
    #[default]
    AuthorizationCode,
    /// The client acts on its own behalf (`client_credentials`,
    /// extension `io.modelcontextprotocol/oauth-client-credentials`), with
    /// a secret or a private key from [`ClientCredentials`].
    ClientCredentials,
    /// A workload's identity token as an RFC 7523 JWT-bearer assertion
    /// (extension `io.modelcontextprotocol/auth/wif`). A refused assertion
    /// is reported, never retried with another grant.
    JwtBearer(Assertion),
    /// Enterprise-managed authorization (extension
    /// `io.modelcontextprotocol/enterprise-managed-authorization`): the
    /// enterprise identity provider exchanges the user's ID token for an
    /// identity assertion grant (ID-JAG), which the MCP server's
    /// authorization server takes as a JWT-bearer grant.
    EnterpriseManaged(EnterpriseIdp),
}

/// A JWT the client presents: fixed, or read afresh from a file each time
/// (workload identity tokens are rotated on disk).
#[derive(Clone)]
#[non_exhaustive]
pub enum Assertion {
    /// This token.
    Token(String),
    /// The contents of this file, trimmed.
    File(PathBuf),
}

impl std::fmt::Debug for Assertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Token(_) => f.write_str("Assertion::Token(<redacted>)"),
            Self::File(p) => write!(f, "Assertion::File({})", p.display()),
        }
    }
}

impl Assertion {
    pub(crate) fn read(&self) -> Result<String, ClientError> {
        match self {
            Self::Token(t) => Ok(t.clone()),
            Self::File(path) => std::fs::read_to_string(path)
                .map(|t| t.trim().to_owned())
                .map_err(|e| {
                    ClientError::Authorization(format!(
                        "reading the assertion {}: {e}",
                        path.display()
                    ))
                }),
        }
    }
}

/// The enterprise identity provider of [`Grant::EnterpriseManaged`].
#[derive(Clone, Debug)]
pub struct EnterpriseIdp {
    /// Its token endpoint (RFC 8693 token exchange).
    pub token_endpoint: String,
    /// This client's id there.
    pub client_id: String,
    /// This client's secret there, if it is confidential.
    pub client_secret: Option<Secret>,
    /// The user's ID token from the identity provider's sign-in.
    pub id_token: Assertion,
}

/// A secret that never shows in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The value, to send.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A pre-registered client.
#[derive(Clone, Debug)]
pub struct ClientCredentials {
    /// The client id.
    pub client_id: String,
    /// Its secret (`client_secret_basic`, or `client_secret_post` when the
    /// server takes only that).
    pub client_secret: Option<Secret>,
    /// A PKCS#8 PEM private key and its algorithm (`ES256`, `RS256`) for
    /// `private_key_jwt`, used instead of a secret.
    pub private_key: Option<(Secret, String)>,
    /// The issuer these credentials belong to: with another authorization
    /// server they are refused, not tried. `None` binds them to whichever
    /// issuer the server names first.
    pub issuer: Option<String>,
}

impl ClientCredentials {
    /// A public client (no secret).
    pub fn public(client_id: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret: None,
            private_key: None,
            issuer: None,
        }
    }

    /// A client with a secret.
    pub fn secret(client_id: impl Into<String>, secret: impl Into<String>) -> Self {
        Self {
            client_secret: Some(Secret::new(secret)),
            ..Self::public(client_id)
        }
    }

    /// A client that signs assertions with a PKCS#8 PEM key.
    pub fn private_key(
        client_id: impl Into<String>,
        pem: impl Into<String>,
        alg: impl Into<String>,
    ) -> Self {
        Self {
            private_key: Some((Secret::new(pem), alg.into())),
            ..Self::public(client_id)
        }
    }

    /// Bind to `issuer`.
    pub fn for_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }
}

/// Shows a person the authorization page and returns where it redirected.
pub trait UserAgent: Send + Sync {
    /// The redirect URI to register and send (loopback or HTTPS).
    fn redirect_uri(&self) -> String;
    /// Let the person authorize at `url`; return the full redirect URI the
    /// authorization server sent the browser to (with `code`, `state`, `iss`).
    fn authorize(&self, url: String) -> BoxFuture<'_, Result<String, ClientError>>;
}

/// The settings of an [`OAuth`].
pub(crate) struct Config {
    pub client_name: String,
    pub grant: Grant,
    pub credentials: Option<ClientCredentials>,
    pub client_metadata_url: Option<String>,
    pub user_agent: Option<Arc<dyn UserAgent>>,
    pub store: Arc<dyn TokenStore>,
    pub dpop: bool,
    pub offline_access: bool,
    pub limits: AuthLimits,
}

/// OAuth for one or more HTTP transports (each binds it to its server).
#[derive(Clone)]
pub struct OAuth {
    pub(crate) config: Arc<Config>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("client_name", &self.config.client_name)
            .field("grant", &self.config.grant)
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// Settings for a client called `client_name` (shown to people at
    /// registration).
    pub fn builder(client_name: impl Into<String>) -> OAuthBuilder {
        OAuthBuilder {
            config: Config {
                client_name: client_name.into(),
                grant: Grant::AuthorizationCode,
                credentials: None,
                client_metadata_url: None,
                user_agent: None,
                store: Arc::new(MemoryTokenStore::default()),
                dpop: true,
                offline_access: true,
                limits: AuthLimits::default(),
            },
        }
    }

    /// Authorize with `server` now, whether or not a token is kept already
    /// (what `toolgate login` does). The tokens go to the store.
    pub async fn login(&self, server: &str) -> Result<(), ClientError> {
        Session::new(self.clone(), server)?.login().await
    }

    /// Forget what is kept for `server`; `true` if there was something.
    pub fn logout(&self, server: &str) -> Result<bool, ClientError> {
        self.config.store.remove(server)
    }
}

/// Builds an [`OAuth`].
pub struct OAuthBuilder {
    config: Config,
}

impl OAuthBuilder {
    /// How tokens are obtained (default: [`Grant::AuthorizationCode`]).
    pub fn grant(mut self, grant: Grant) -> Self {
        self.config.grant = grant;
        self
    }

    /// A pre-registered client, used before any other registration.
    pub fn credentials(mut self, credentials: ClientCredentials) -> Self {
        self.config.credentials = Some(credentials);
        self
    }

    /// The HTTPS URL of this client's Client ID Metadata Document, used as
    /// its client id where the authorization server supports them.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.config.client_metadata_url = Some(url.into());
        self
    }

    /// Who lets a person authorize (needed for [`Grant::AuthorizationCode`]).
    pub fn user_agent(mut self, agent: Arc<dyn UserAgent>) -> Self {
        self.config.user_agent = Some(agent);
        self
    }

    /// Where tokens are kept (default: in memory).
    pub fn store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.config.store = store;
        self
    }

    /// Use DPoP when the authorization server offers it (default `true`).
    pub fn dpop(mut self, on: bool) -> Self {
        self.config.dpop = on;
        self
    }

    /// Ask for `offline_access` (a refresh token) when the authorization
    /// server lists it (default `true`).
    pub fn offline_access(mut self, on: bool) -> Self {
        self.config.offline_access = on;
        self
    }

    /// Bounds on exchanges with authorization servers.
    pub fn limits(mut self, limits: AuthLimits) -> Self {
        self.config.limits = limits;
        self
    }

    /// The finished settings.
    pub fn build(self) -> OAuth {
        OAuth {
            config: Arc::new(self.config),
        }
    }
}
