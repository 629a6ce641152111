//! Grants: a person's approval of one tool, for one caller, for a while.
//!
//! A policy rule with `remember = "1h"` lets the approval form offer, next
//! to "this call only", "this tool, any arguments, for this caller, for the
//! next hour". Taking it writes a [`Grant`] to the audit store; while it
//! holds, calls of that tool by that caller that the policy still confirms
//! under a rule with `remember` go through without a question, each one
//! recorded with the grant's id. Grants live in the audit store, so
//! instances sharing PostgreSQL share them, and `toolgate grants` lists
//! and revokes them (a revocation is checked on the very next call).
//!
//! A grant is bound to what the person saw: the upstream, the tool's name
//! there and the digest of its definition (as the lock file computes it).
//! A reload that gives the gateway name to another upstream, or a
//! definition that changes (a rug pull), ends it: the next call asks
//! again, saying why ([`Grant::ended_by`]).
//!
//! This module (layer `decide`) owns the grant's shape and when it holds;
//! the stores keep grants ([`crate::store::sqlite::grants`],
//! [`crate::store::pg`]).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::base::time::now_ms;

pub use crate::config::LONGEST;

/// One grant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// `g-` and 16 hex digits.
    pub id: String,
    /// When the person granted it (ms since the Unix epoch).
    pub created_ms: i64,
    /// When it ends.
    pub expires_ms: i64,
    /// When it was revoked, if it was.
    pub revoked_ms: Option<i64>,
    /// The caller's verified subject; none for a gateway without `[auth]`
    /// (then every caller of the gateway is the same caller).
    pub caller: Option<String>,
    /// The upstream server's name.
    pub upstream: Option<String>,
    /// The gateway tool name.
    pub tool: String,
    /// The rule that allowed remembering (as the audit rows name rules).
    pub rule: String,
    /// The tool's name at its upstream.
    #[serde(default)]
    pub upstream_tool: Option<String>,
    /// The digest of the definition the person approved (`sha256:…`, as
    /// in lock files).
    #[serde(default)]
    pub digest: Option<String>,
    /// Who revoked it: a console session's subject, or `cli`.
    #[serde(default)]
    pub revoked_by: Option<String>,
}

/// What a grant is for: the tool as the person saw it.
#[derive(Clone, Copy, Debug)]
pub struct Bound<'a> {
    /// The upstream server's name.
    pub upstream: &'a str,
    /// The tool's name there.
    pub upstream_tool: &'a str,
    /// The digest of its definition.
    pub digest: &'a str,
}

impl Grant {
    /// A grant of `tool`, as `bound`, starting now, for `span`.
    pub fn new(
        caller: Option<&str>,
        bound: Bound<'_>,
        tool: &str,
        rule: &str,
        span: Duration,
    ) -> Self {
        let now = now_ms(SystemTime::now());
        let id = crate::base::ids::new_nonce();
        Self {
            id: format!("g-{}", &id[..16]),
            created_ms: now,
            expires_ms: now.saturating_add(span.as_millis() as i64),
            revoked_ms: None,
            caller: caller.map(str::to_owned),
            upstream: Some(bound.upstream.to_owned()),
            tool: tool.to_owned(),
            rule: rule.to_owned(),
            upstream_tool: Some(bound.upstream_tool.to_owned()),
            digest: Some(bound.digest.to_owned()),
            revoked_by: None,
        }
    }

    /// Why this grant does not hold for the tool as it is now (`bound`),
    /// in words for the person asked again; `None` when it holds.
    pub fn ended_by(&self, bound: Bound<'_>) -> Option<String> {
        let upstream = self.upstream.as_deref().unwrap_or("?");
        if upstream != bound.upstream {
            return Some(format!(
                "the approval you gave earlier (grant {}) was for this tool on server {upstream}; it now comes from server {}, so it is asked again",
                self.id, bound.upstream
            ));
        }
        if self.upstream_tool.as_deref() != Some(bound.upstream_tool) {
            return Some(format!(
                "the approval you gave earlier (grant {}) was for another tool of server {upstream}; this name now leads to its tool {:?}",
                self.id, bound.upstream_tool
            ));
        }
        if self.digest.as_deref() != Some(bound.digest) {
            return Some(format!(
                "the tool's definition changed since you approved it (grant {}), so it is asked again",
                self.id
            ));
        }
        None
    }

    /// `active`, `expired` or `revoked`, at `now_ms`.
    pub fn state(&self, now_ms: i64) -> &'static str {
        if self.revoked_ms.is_some() {
            "revoked"
        } else if self.expires_ms <= now_ms {
            "expired"
        } else {
            "active"
        }
    }
}

/// What revoking found.
#[derive(Debug, PartialEq, Eq)]
pub enum Revoked {
    /// It held, and holds no more.
    Now(Grant),
    /// It had already ended (`expired` or `revoked`).
    Already(Grant),
    /// No grant has this id.
    Unknown,
}

/// The revocation row's `rule`: whose grant of what.
pub(crate) fn revoked_rule(g: &Grant) -> String {
    match &g.caller {
        Some(caller) => format!("revoked grant for {} of {caller}", g.tool),
        None => format!("revoked grant for {}", g.tool),
    }
}
