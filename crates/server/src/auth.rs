//! The authorization context a transport attaches to a request.
//!
//! The protocol has no sessions: whatever a caller may see or do is decided
//! per request from the credentials it presents. A transport (or middleware in
//! front of it) turns those credentials into an [`AuthContext`]; tools,
//! prompts and resources can be hidden from callers that lack a scope, and
//! handlers can inspect it to authorize handles they are given.

use std::collections::BTreeSet;

/// Who is calling and what they were granted.
///
/// ```
/// use toolgate_server::AuthContext;
/// let auth = AuthContext::new("alice").with_scopes(["baskets:write"]);
/// assert!(auth.has_scope("baskets:write"));
/// assert!(!auth.has_scope("admin"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthContext {
    subject: Option<String>,
    scopes: BTreeSet<String>,
}

impl AuthContext {
    /// A context for `subject` with no scopes.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: Some(subject.into()),
            scopes: BTreeSet::new(),
        }
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

    /// The authenticated subject, if any.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// Whether `scope` was granted.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }

    /// All granted scopes.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scopes.iter().map(String::as_str)
    }
}

/// A rule deciding whether an item is visible to a caller.
pub(crate) type Visibility = std::sync::Arc<dyn Fn(Option<&AuthContext>) -> bool + Send + Sync>;
