//! Who is calling: the authorization context of a request, and how it is
//! established.
//!
//! The protocol has no sessions: whatever a caller may see or do is decided
//! per request from the credentials it presents.
//!
//! - Over HTTP, a [`ResourceServer`] (set on
//!   [`HttpConfig::auth`](crate::transport::http::HttpConfig::auth)) reads
//!   the `Authorization: Bearer` header of every request, has a
//!   [`TokenVerifier`] (such as the built-in [`JwtVerifier`]) turn it into an
//!   [`AuthContext`] or a refusal, answers `401`/`403` with the
//!   `WWW-Authenticate` challenges of RFC 6750 and RFC 9728, and serves the
//!   Protected Resource Metadata document.
//! - Over stdio there is no HTTP authorization: the principal comes from the
//!   process environment ([`AuthContext::from_env`]).
//! - Middleware of your own may put an `AuthContext` in the request
//!   extensions instead.
//!
//! Tools declare the scopes they need ([`ToolDef::scopes`](crate::ToolDef::scopes));
//! a caller sees only the tools it may call, and access is checked again on
//! every call.

#[cfg(feature = "jwt")]
mod jwt;
#[cfg(feature = "http")]
mod resource;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

#[cfg(feature = "jwt")]
pub use jwt::JwtVerifier;
#[cfg(feature = "http")]
pub(crate) use resource::Refusal;
#[cfg(feature = "http")]
pub use resource::ResourceServer;

/// Error codes of authorization refusals.
pub mod resource_codes {
    /// The JSON-RPC error code of a call refused for missing scopes (answered
    /// over HTTP as `403` with an `insufficient_scope` challenge). It lies in
    /// JSON-RPC's implementation-defined server error range.
    pub const INSUFFICIENT_SCOPE: i64 = -32003;
}

/// Who is calling and what they were granted.
///
/// ```
/// use toolgate_server::AuthContext;
/// let auth = AuthContext::new("alice").with_scopes(["baskets:write"]);
/// assert!(auth.has_scope("baskets:write"));
/// assert!(!auth.has_scope("admin"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuthContext {
    subject: Option<String>,
    scopes: BTreeSet<String>,
    claims: Option<Arc<Map<String, Value>>>,
    token: Option<PresentedToken>,
}

/// The access token a caller presented, kept only where the server asked
/// for it ([`ResourceServer::keep_token`]): a gateway exchanges it
/// (RFC 8693) for a token of its own at an upstream. It is the caller's
/// credential for *this* server: never send it anywhere else. It never
/// shows in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct PresentedToken(Arc<str>);

impl PresentedToken {
    /// The token, for a token exchange.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for PresentedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PresentedToken(…)")
    }
}

impl AuthContext {
    /// A context for `subject` with no scopes.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: Some(subject.into()),
            scopes: BTreeSet::new(),
            claims: None,
            token: None,
        }
    }

    /// The principal of a stdio server, from its environment:
    /// `TOOLGATE_SUBJECT` names it and `TOOLGATE_SCOPES` lists its scopes
    /// (space-separated). `None` without a subject. The process that starts
    /// the server decides whom it acts for, as the spec has it for stdio.
    pub fn from_env() -> Option<Self> {
        let subject = std::env::var("TOOLGATE_SUBJECT").ok()?;
        let scopes = std::env::var("TOOLGATE_SCOPES").unwrap_or_default();
        Some(Self::new(subject).with_scopes(scopes.split_whitespace()))
    }

    /// Add granted scopes.
    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Attach the verified token's claims.
    pub fn with_claims(mut self, claims: Map<String, Value>) -> Self {
        self.claims = Some(Arc::new(claims));
        self
    }

    /// Keep the token the caller presented (see [`PresentedToken`]).
    pub fn with_presented_token(mut self, token: &str) -> Self {
        self.token = Some(PresentedToken(token.into()));
        self
    }

    /// The token the caller presented, when the resource server keeps it.
    pub fn presented_token(&self) -> Option<&PresentedToken> {
        self.token.as_ref()
    }

    /// The authenticated subject, if any.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// Whether `scope` was granted.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }

    /// Whether every one of `scopes` was granted.
    pub fn has_scopes<'a>(&self, scopes: impl IntoIterator<Item = &'a String>) -> bool {
        scopes.into_iter().all(|s| self.scopes.contains(s))
    }

    /// All granted scopes.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scopes.iter().map(String::as_str)
    }

    /// The verified token's claims, when a token verifier made this context.
    pub fn claims(&self) -> Option<&Map<String, Value>> {
        self.claims.as_deref()
    }
}

/// A rule deciding whether an item is visible to a caller.
pub(crate) type Visibility = std::sync::Arc<dyn Fn(Option<&AuthContext>) -> bool + Send + Sync>;

/// Scopes that imply others (`basket:write` implies `basket:read`), applied
/// to every verified token, transitively.
///
/// ```
/// use toolgate_server::{AuthContext, ScopeHierarchy};
/// let hierarchy = ScopeHierarchy::default()
///     .implies("basket:admin", ["basket:write"])
///     .implies("basket:write", ["basket:read"]);
/// let auth = hierarchy.expand(AuthContext::new("a").with_scopes(["basket:admin"]));
/// assert!(auth.has_scope("basket:read"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ScopeHierarchy {
    rules: Vec<(String, Vec<String>)>,
}

impl ScopeHierarchy {
    /// Holding `scope` also grants `implied`.
    pub fn implies<I, S>(mut self, scope: impl Into<String>, implied: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rules
            .push((scope.into(), implied.into_iter().map(Into::into).collect()));
        self
    }

    /// `auth` with every implied scope added.
    pub fn expand(&self, mut auth: AuthContext) -> AuthContext {
        loop {
            let before = auth.scopes.len();
            for (scope, implied) in &self.rules {
                if auth.scopes.contains(scope) {
                    auth.scopes.extend(implied.iter().cloned());
                }
            }
            if auth.scopes.len() == before {
                return auth;
            }
        }
    }
}

/// Why a token was refused (for logs; the caller is told only that the
/// token is invalid).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is malformed, unsigned, expired, not yet valid, for
    /// another audience or issuer, or signed by an unknown key.
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The keys to check it could not be had (answered with `503`).
    #[error("the token cannot be checked now: {0}")]
    Unavailable(String),
}

/// The future a verifier returns.
pub type VerifyFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AuthContext, TokenError>> + Send + 'a>>;

/// Turns a bearer token into who is calling, or a refusal.
pub trait TokenVerifier: Send + Sync + 'static {
    /// Check `token` (the part after `Bearer `).
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a>;
}
