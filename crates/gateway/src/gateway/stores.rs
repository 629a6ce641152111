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

use toolgate_server::MemoryNonceStore;

use super::GatewayError;
use crate::config::AuditDurability;
use crate::config::GatewayConfig;
use crate::store::AuditSink;
use crate::store::SharedNonces;
use crate::store::calllog::logged::{BACKLOG, LoggedStore};
use crate::store::calllog::writer::Durability;
use crate::store::limits::SharedLimits;
use crate::store::pending::MemoryPending;
use crate::store::pending::Pending;
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
    pub(super) shared_limits: Option<Arc<dyn SharedLimits>>,
    /// What entered each flow: in the audit store, else in this process.
    pub(super) flows: Arc<dyn crate::store::flows::FlowStore>,
    /// Where callers' rate limits are counted: Redis when set, else this
    /// process (one count for every endpoint).
    pub(super) caller_limits: Arc<dyn SharedLimits>,
    /// `[state]` or `TOOLGATE_STATE_KEY`: the key every instance seals
    /// rounds with (`None`: a random one, this process only).
    pub(super) state_key: Option<crate::store::state_key::StateSecret>,
    /// People's linked accounts: in the audit store, else in this process.
    pub(super) accounts: Arc<dyn crate::store::accounts::AccountStore>,
}

impl Stores {
    /// Open what `config` names; `state_ttl` bounds how long a round, and
    /// so a pending approval, stays answerable.
    pub(super) async fn open(
        config: &GatewayConfig,
        state_ttl: Duration,
        check: bool,
    ) -> Result<Self, GatewayError> {
        // A check leaves the file to the gateway that may be writing it.
        let audit_file = config
            .audit_path()
            .filter(|_| !check && (config.source.is_some() || config.audit.path.is_some()));
        // Pending approvals are shared when the store is.
        let mut pending: Arc<dyn Pending> = Arc::new(MemoryPending::new(state_ttl));
        let mut flows: Option<Arc<dyn crate::store::flows::FlowStore>> = None;
        let (audit, nonces): (Option<Arc<dyn AuditSink>>, SharedNonces) = match (
            &config.store.url,
            &audit_file,
        ) {
            (Some(url), _) if !config.audit.disabled => {
                let (store, shared, kept) =
                    postgres(url, config.audit.arguments, state_ttl).await?;
                pending = shared;
                flows = Some(kept);
                (Some(store.clone()), store.nonces())
            }
            (_, Some(path)) => {
                let backlog = config.audit.backlog.map_or(BACKLOG, |b| b.0);
                let logged = |durability| {
                    LoggedStore::open(path, config.audit.arguments, durability, backlog)
                };
                let logged = match config.audit.durability {
                    Some(AuditDurability::Process) => Some(logged(Durability::Process)?),
                    Some(AuditDurability::Sync) => Some(logged(Durability::Sync)?),
                    Some(AuditDurability::Commit) => None,
                    // The default: a call log, unless another gateway's
                    // log writes this store (hosts that each start
                    // `serve --stdio` on one configuration): then rows
                    // committed beside it.
                    None => {
                        let opened = LoggedStore::open_unless_held(
                            path,
                            config.audit.arguments,
                            Durability::Process,
                            backlog,
                        )?;
                        if opened.is_none() {
                            tracing::info!(store = %path.display(), "another gateway's call log writes this audit store; this one commits each row beside it");
                        }
                        opened
                    }
                };
                match logged {
                    Some(store) => {
                        let store = Arc::new(store);
                        flows = Some(store.store().clone());
                        (Some(store.clone() as Arc<dyn AuditSink>), store.nonces())
                    }
                    None => {
                        // What a stopped gateway's log left unindexed
                        // comes first: this store's readers read the
                        // store alone.
                        crate::store::calllog::logged::drain(path)?;
                        let store = Arc::new(AuditStore::open(path, config.audit.arguments)?);
                        flows = Some(store.clone());
                        (Some(store.clone() as Arc<dyn AuditSink>), store.nonces())
                    }
                }
            }
            _ => (None, Arc::new(MemoryNonceStore::new(state_ttl * 2))),
        };
        let shared_limits = match &config.ratelimit.redis {
            Some(url) => Some(redis(url, config.ratelimit.on_outage).await?),
            None => None,
        };
        let caller_limits = shared_limits.clone().unwrap_or_else(|| {
            Arc::new(crate::store::limits_memory::MemoryLimits::default()) as Arc<dyn SharedLimits>
        });
        let flows = flows.unwrap_or_else(|| {
            Arc::new(crate::store::flows::MemoryFlows::new(
                config.flows.max_flows(),
            ))
        });
        let accounts = match &audit {
            Some(store) => store.clone().accounts(),
            None => Arc::new(crate::store::accounts::MemoryAccounts::default()),
        };
        Ok(Stores {
            accounts,
            audit,
            nonces,
            pending,
            flows,
            audit_file: audit_file.filter(|_| config.store.url.is_none()),
            shared_limits,
            caller_limits,
            state_key: crate::store::state_key::load_key(&config.state)?,
        })
    }
}

/// The PostgreSQL audit store at `url`, and the pending approvals kept
/// beside it (shared by every instance).
#[cfg(feature = "postgres")]
async fn postgres(url: &str, arguments: bool, state_ttl: Duration) -> Result<Stored, GatewayError> {
    let store = crate::store::pg::PgStore::connect(url, arguments).await?;
    let pending = Arc::new(crate::store::pg::pending::PgPending::new(
        store.clone(),
        state_ttl,
    ));
    Ok((Arc::new(store.clone()), pending, Arc::new(store)))
}

/// The audit store, the pending approvals and the flow labels kept in one
/// database.
type Stored = (
    Arc<dyn AuditSink>,
    Arc<dyn Pending>,
    Arc<dyn crate::store::flows::FlowStore>,
);

/// Without the `postgres` feature, `[store] url` cannot be served.
#[cfg(not(feature = "postgres"))]
async fn postgres(
    _url: &str,
    _arguments: bool,
    _state_ttl: Duration,
) -> Result<Stored, GatewayError> {
    Err(crate::config::ConfigError::new(
        "[store] url: this toolgate was built without PostgreSQL support (the gateway's `postgres` feature); build it with the feature, or remove [store] url to keep the audit store in SQLite",
    )
    .into())
}

/// The rate limits shared in Redis at `url`.
#[cfg(feature = "redis")]
async fn redis(
    url: &str,
    on_outage: crate::config::OnOutage,
) -> Result<Arc<dyn SharedLimits>, GatewayError> {
    Ok(Arc::new(
        crate::store::redis::RedisLimits::connect(url, on_outage).await?,
    ))
}

/// Without the `redis` feature, `[ratelimit] redis` cannot be served.
#[cfg(not(feature = "redis"))]
async fn redis(
    _url: &str,
    _on_outage: crate::config::OnOutage,
) -> Result<Arc<dyn SharedLimits>, GatewayError> {
    Err(crate::config::ConfigError::new(
        "[ratelimit] redis: this toolgate was built without Redis support (the gateway's `redis` feature); build it with the feature, or remove [ratelimit] redis to count limits in this process",
    )
    .into())
}
