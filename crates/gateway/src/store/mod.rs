//! Layer 3, `store`: what the gateway keeps outside a call — audit rows,
//! spent nonces, grants, budgets' ledger, pending approvals, shared rate
//! limits, the state key. Each is a narrow trait (or type) here, with its
//! backends in files of their own: [`sqlite`] (embedded, always built),
//! `pg` (PostgreSQL, shared by instances; the `postgres` feature), memory (one process: [`limits_memory`]), Redis
//! (`redis`, behind the feature of that name). Stores know decisions' types ([`crate::decide`])
//! and nothing of calls, pages or the gateway's lifecycle.

pub mod accounts;
pub mod audit;
pub mod calllog;
pub mod error;
pub mod flows;
pub mod ledger;
pub mod limits;
pub mod limits_memory;
pub mod logins;
pub mod pending;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "redis")]
pub mod redis;
pub mod sealed;
pub mod sqlite;
pub mod state_key;
pub mod tokens;
pub mod writers;

use std::sync::Arc;

pub use audit::{AuditRow, AuditRows, AuditSink, GrantStore, StoreFuture};
pub use error::StoreError;

/// Where the gateway spends its single-use rounds: the audit store's
/// table, shared by every instance that shares the store, or memory.
pub type SharedNonces = Arc<dyn toolgate_server::NonceStore>;
