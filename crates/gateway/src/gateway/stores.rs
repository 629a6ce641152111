//! What a gateway keeps outside its own memory, opened once at start: the
//! audit store (SQLite, or PostgreSQL with `[store] url`), the record of
//! spent rounds that makes an approval count once, the pending approvals
//! (shared when the store is), the shared rate limits in Redis, and the
//! state key instances share.
//!
//! Layer: `gateway`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolgate_server::{MemoryNonceStore, StateKey};

use super::GatewayError;
use crate::config::GatewayConfig;
use crate::store::AuditSink;
use crate::store::SharedNonces;
use crate::store::pending::MemoryPending;
use crate::store::pending::Pending;
use crate::store::pg::PgStore;
use crate::store::shared_limit::SharedLimits;
use crate::store::sqlite::AuditStore;

/// The stores a gateway runs on.
pub(super) struct Stores {
    /// Every decision and call (`None` with `[audit] disabled`).
    pub(super) audit: Option<Arc<dyn AuditSink>>,
    /// Rounds already forwarded: in the audit store, or (without one) in
    /// this process, where they still count once.
    pub(super) nonces: SharedNonces,
    /// Calls waiting on the approval page.
    pub(super) pending: Arc<dyn Pending>,
    /// The SQLite file, when that is the store.
    pub(super) audit_file: Option<PathBuf>,
    /// `[ratelimit] redis`.
    pub(super) shared_limits: Option<Arc<SharedLimits>>,
    /// `[state]` or `TOOLGATE_STATE_KEY`: the key every instance seals
    /// rounds with (`None`: a random one, this process only).
    pub(super) state_key: Option<StateKey>,
}

impl Stores {
    /// Open what `config` names; `state_ttl` bounds how long a round, and
    /// so a pending approval, stays answerable.
    pub(super) async fn open(
        config: &GatewayConfig,
        state_ttl: Duration,
    ) -> Result<Self, GatewayError> {
        let audit_file = config
            .audit_path()
            .filter(|_| config.source.is_some() || config.audit.path.is_some());
        // Pending approvals are shared when the store is.
        let mut pending: Arc<dyn Pending> = Arc::new(MemoryPending::new(state_ttl));
        let (audit, nonces): (Option<Arc<dyn AuditSink>>, SharedNonces) =
            match (&config.store.url, &audit_file) {
                (Some(url), _) if !config.audit.disabled => {
                    let store = PgStore::connect(url, config.audit.arguments).await?;
                    pending = Arc::new(crate::store::pg::pending::PgPending::new(
                        store.clone(),
                        state_ttl,
                    ));
                    let store = Arc::new(store);
                    (Some(store.clone()), store.nonces())
                }
                (_, Some(path)) => {
                    let store = Arc::new(AuditStore::open(path, config.audit.arguments)?);
                    (Some(store.clone()), store.nonces())
                }
                _ => (None, Arc::new(MemoryNonceStore::new(state_ttl * 2))),
            };
        let shared_limits = match &config.ratelimit.redis {
            Some(url) => Some(Arc::new(
                SharedLimits::connect(url, config.ratelimit.on_outage).await?,
            )),
            None => None,
        };
        Ok(Stores {
            audit,
            nonces,
            pending,
            audit_file: audit_file.filter(|_| config.store.url.is_none()),
            shared_limits,
            state_key: crate::store::state_key::load_key(&config.state)?,
        })
    }
}
