//! The audit store and approval nonces in PostgreSQL (`[store] url`), so
//! that several gateway instances behind a load balancer share them: a
//! confirmation started on one completes on another, a replay is refused
//! on every one, and `toolgate log --db postgres://…` shows every
//! instance's calls.
//!
//! Each row is committed (PostgreSQL's default synchronous commit) before
//! the call's answer is sent, as with SQLite; a forwarded call's row is
//! written ahead, beside the forward, and its outcome completes it before
//! the answer (a second commit: PostgreSQL's group commit shares its
//! flush with other instances' writes). The schema is created and
//! migrated on start, under an advisory lock so instances starting together
//! do not race. A lost connection is re-opened on the next use; while the
//! database is down, calls fail closed with a clear error and nothing
//! panics. TLS is used when the server offers it (`sslmode=require` insists).
//!
//! Layer: `store`.

mod accounts;
mod flows;
mod grants;
mod ledger;
pub mod pending;
mod schema;

use schema::{MIGRATION_LOCK, MIGRATIONS};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Mutex;
use tokio_postgres::Client;

use crate::store::AuditRow;

use crate::store::{AuditRows, AuditSink, GrantStore};

use crate::store::sqlite::Filter;

use crate::base::time::NONCE_MARGIN;

use crate::store::StoreFuture;

use crate::base::time::now_ms;
use crate::decide::grants::Grant;
use crate::decide::grants::Revoked;
use crate::store::ledger::Ledger;
use toolgate_server::{NonceStore, SpendFuture};

use crate::store::StoreError;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A PostgreSQL audit store (cheap to clone: clones share the connection).
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: tokio_postgres::Config,
    shown: String,
    arguments: bool,
    client: Mutex<Option<Arc<Client>>>,
    /// `config` with `synchronous_commit` off, for [`Inner::outcomes`].
    relaxed: tokio_postgres::Config,
    /// A second connection, for the outcomes of rows written ahead: the
    /// row is durable already, so its outcome's commit need not wait for
    /// the WAL flush (a crash may leave the row `forwarded`, which is what
    /// such a row means). On the first connection each call would wait
    /// for two flushes in a row, since one connection's commits are
    /// serial and never share one.
    outcomes: Mutex<Option<Arc<Client>>>,
}

fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    // The client crate's configuration: servers verified the same way
    // everywhere the gateway connects.
    let config = toolgate_client::rustls_config().map_err(|e| {
        StoreError::Other(format!(
            "cannot set up TLS for PostgreSQL: {}",
            toolgate_protocol::error::with_causes(&e)
        ))
    })?;
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

impl Inner {
    /// The error of an operation `source` ended (the database named, its
    /// password left out; the driver's error, and the database's own
    /// message when it sent one, are the causes).
    fn fail(&self, source: tokio_postgres::Error) -> StoreError {
        StoreError::Postgres {
            context: format!("the audit database {} is unavailable", self.shown),
            source,
        }
    }
}

impl PgStore {
    /// What ends an operation that `e` failed.
    pub(crate) fn fail(&self, e: tokio_postgres::Error) -> StoreError {
        self.inner.fail(e)
    }

    /// Connect to `url`, create or migrate the schema. Fails when the
    /// database cannot be reached: a gateway told to share its state
    /// does not start without it.
    pub async fn connect(url: &str, arguments: bool) -> Result<Self, StoreError> {
        let shown = crate::base::redact::store_url(url);
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|source| StoreError::Postgres {
                context: format!("[store] url {shown}"),
                source,
            })?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("toolgate");
        let mut relaxed = config.clone();
        let options = match config.get_options() {
            Some(own) => format!("{own} -c synchronous_commit=off"),
            None => "-c synchronous_commit=off".to_owned(),
        };
        relaxed.options(&options);
        let store = Self {
            inner: Arc::new(Inner {
                config,
                shown,
                arguments,
                client: Mutex::new(None),
                relaxed,
                outcomes: Mutex::new(None),
            }),
        };
        let client = store.client().await?;
        store.migrate(&client).await?;
        Ok(store)
    }

    /// The open connection, or a new one.
    pub(crate) async fn client(&self) -> Result<Arc<Client>, StoreError> {
        self.open(&self.inner.client, &self.inner.config).await
    }

    /// The connection for outcomes of rows written ahead, or a new one.
    async fn outcome_client(&self) -> Result<Arc<Client>, StoreError> {
        self.open(&self.inner.outcomes, &self.inner.relaxed).await
    }

    async fn open(
        &self,
        slot: &Mutex<Option<Arc<Client>>>,
        config: &tokio_postgres::Config,
    ) -> Result<Arc<Client>, StoreError> {
        let mut slot = slot.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let (client, connection) = config
            .connect(tls()?)
            .await
            .map_err(|e| self.inner.fail(e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "the audit database connection ended");
            }
        });
        let client = Arc::new(client);
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Bring the schema to this version, one instance at a time.
    async fn migrate(&self, client: &Client) -> Result<(), StoreError> {
        let steps = async {
            client
                .batch_execute(&format!(
                    "BEGIN; SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); CREATE TABLE IF NOT EXISTS toolgate_schema (version INTEGER NOT NULL); INSERT INTO toolgate_schema (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM toolgate_schema);"
                ))
                .await?;
            let version: i32 = client
                .query_one("SELECT max(version) FROM toolgate_schema", &[])
                .await?
                .get(0);
            for migration in MIGRATIONS.iter().skip(version.max(0) as usize) {
                client.batch_execute(migration).await?;
            }
            let latest = MIGRATIONS.len() as i32;
            client
                .execute(
                    "UPDATE toolgate_schema SET version = $1 WHERE version < $1",
                    &[&latest],
                )
                .await?;
            client.batch_execute("COMMIT").await?;
            Ok::<i32, tokio_postgres::Error>(version)
        };
        match steps.await {
            Ok(version) if version > MIGRATIONS.len() as i32 => Err(StoreError::Other(format!(
                "the audit database {} has schema version {version}, newer than this toolgate knows ({}); upgrade toolgate",
                self.inner.shown,
                MIGRATIONS.len()
            ))),
            Ok(_) => Ok(()),
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                Err(self.inner.fail(e))
            }
        }
    }

    async fn insert(&self, r: &AuditRow) -> Result<(), StoreError> {
        self.insert_returning(r).await.map(drop)
    }

    /// Insert `r` and give its id, once committed.
    async fn insert_returning(&self, r: &AuditRow) -> Result<i64, StoreError> {
        let client = self.client().await?;
        client
            .query_one(
                "INSERT INTO toolgate_calls (time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, grant_id, cost, result, trace_id, endpoint, shown, flow, flow_labels, identity, via) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) RETURNING id",
                &[
                    &r.time_ms,
                    &r.caller,
                    &r.upstream,
                    &r.tool,
                    &r.arguments_digest,
                    &r.arguments,
                    &r.decision,
                    &r.rule,
                    &r.confirmation,
                    &r.status,
                    &r.latency_ms,
                    &r.grant,
                    &r.cost,
                    &r.result,
                    &r.trace_id,
                    &r.endpoint,
                    &r.shown,
                    &r.flow,
                    &r.flow_labels,
                    &r.identity,
                    &r.via,
                ],
            )
            .await
            .map(|row| row.get(0))
            .map_err(|e| self.inner.fail(e))
    }

    /// Complete the row `id`, written ahead, with `r`'s outcome.
    async fn update(&self, id: i64, r: &AuditRow) -> Result<(), StoreError> {
        let client = self.outcome_client().await?;
        client
            .execute(
                "UPDATE toolgate_calls SET upstream = $2, decision = $3, rule = $4, confirmation = $5, status = $6, latency_ms = $7, grant_id = $8, cost = $9, result = $10, trace_id = $11, arguments_digest = $12, arguments = $13, flow = $14, flow_labels = $15, identity = $16, via = $17 WHERE id = $1",
                &[
                    &id,
                    &r.upstream,
                    &r.decision,
                    &r.rule,
                    &r.confirmation,
                    &r.status,
                    &r.latency_ms,
                    &r.grant,
                    &r.cost,
                    &r.result,
                    &r.trace_id,
                    &r.arguments_digest,
                    &r.arguments,
                    &r.flow,
                    &r.flow_labels,
                    &r.identity,
                    &r.via,
                ],
            )
            .await
            .map(drop)
            .map_err(|e| self.inner.fail(e))
    }

    async fn spend_nonce(&self, nonce: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let now = now_ms(SystemTime::now());
        let fresh = client
            .execute(
                "INSERT INTO toolgate_nonces (nonce, spent_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&nonce, &now],
            )
            .await
            .map_err(|e| self.inner.fail(e))?
            == 1;
        let horizon = now - NONCE_MARGIN.as_millis() as i64;
        if let Err(e) = client
            .execute(
                "DELETE FROM toolgate_nonces WHERE spent_ms < $1",
                &[&horizon],
            )
            .await
        {
            tracing::warn!(error = %toolgate_protocol::error::with_causes(&self.inner.fail(e)), "old approval nonces were not removed");
        }
        Ok(fresh)
    }

    /// Whether the database answers now (for readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .simple_query("SELECT 1")
            .await
            .map(drop)
            .map_err(|e| self.inner.fail(e))
    }

    /// Rows of the store, oldest first (what `toolgate log` shows).
    pub async fn query(&self, filter: &Filter) -> Result<Vec<AuditRow>, StoreError> {
        let client = self.client().await?;
        let tool = match &filter.tool {
            Some(g) => Some(
                glob::Pattern::new(g)
                    .map_err(|e| StoreError::Other(format!("--tool {g:?}: {e}")))?,
            ),
            None => None,
        };
        let rows = client
            .query(
                "SELECT id, time_ms, caller, upstream, tool, arguments_digest, arguments, decision, rule, confirmation, status, latency_ms, grant_id, cost, result, trace_id, endpoint, shown, flow, flow_labels, identity, via FROM toolgate_calls WHERE id > $1 AND time_ms >= $2 AND ($3::TEXT IS NULL OR caller = $3) AND ($4::TEXT IS NULL OR decision = $4) AND id < $6 ORDER BY id DESC LIMIT $5",
                &[
                    &filter.after_id.unwrap_or(0),
                    &filter.since_ms.unwrap_or(0),
                    &filter.caller,
                    &filter.decision,
                    // A tool glob is matched here, so the database cannot stop early then.
                    &match (&tool, &filter.endpoint, filter.limit) {
                        (None, None, Some(n)) => i64::try_from(n).unwrap_or(i64::MAX),
                        _ => i64::MAX,
                    },
                    &filter.before_id.unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(|e| self.inner.fail(e))?;
        let rows = rows.iter().map(|r| {
            Ok::<_, StoreError>(AuditRow {
                id: r.get(0),
                time_ms: r.get(1),
                caller: r.get(2),
                upstream: r.get(3),
                tool: r.get(4),
                arguments_digest: r.get(5),
                arguments: r.get(6),
                decision: r.get(7),
                rule: r.get(8),
                confirmation: r.get(9),
                status: r.get(10),
                latency_ms: r.get(11),
                grant: r.get(12),
                cost: r.get(13),
                result: r.get(14),
                trace_id: r.get(15),
                endpoint: r.get(16),
                shown: r.get(17),
                flow: r.get(18),
                flow_labels: r.get(19),
                identity: r.get(20),
                via: r.get(21),
            })
        });
        crate::store::sqlite::query::newest(
            rows,
            tool.as_ref(),
            filter.endpoint.as_deref(),
            filter.limit,
        )
    }
}

impl NonceStore for PgStore {
    fn spend(&self, nonce: String) -> SpendFuture {
        let store = self.clone();
        Box::pin(async move { Ok(store.spend_nonce(&nonce).await?) })
    }
}

impl AuditRows for PgStore {
    fn write(&self, row: AuditRow) -> StoreFuture<()> {
        let store = self.clone();
        Box::pin(async move { store.insert(&row).await })
    }

    fn begin(&self, row: AuditRow) -> StoreFuture<i64> {
        let store = self.clone();
        Box::pin(async move { store.insert_returning(&row).await })
    }

    fn complete(&self, id: i64, row: AuditRow) -> StoreFuture<()> {
        let store = self.clone();
        Box::pin(async move { store.update(id, &row).await })
    }

    fn keeps_arguments(&self) -> bool {
        self.inner.arguments
    }

    fn rows(&self, filter: Filter) -> StoreFuture<Vec<AuditRow>> {
        let store = self.clone();
        Box::pin(async move { store.query(&filter).await })
    }
}

impl GrantStore for PgStore {
    fn grant(&self, grant: Grant) -> StoreFuture<()> {
        let store = self.clone();
        Box::pin(async move { store.insert_grant(&grant).await })
    }

    fn granted(&self, caller: Option<String>, tool: String) -> StoreFuture<Option<Grant>> {
        let store = self.clone();
        Box::pin(async move { store.find_grant(caller.as_deref(), &tool).await })
    }

    fn grants(&self, all: bool) -> StoreFuture<Vec<Grant>> {
        let store = self.clone();
        Box::pin(async move { PgStore::grants(&store, all).await })
    }

    fn revoke(&self, id: String, by: String) -> StoreFuture<Revoked> {
        let store = self.clone();
        Box::pin(async move { PgStore::revoke(&store, &id, &by).await })
    }
}

impl AuditSink for PgStore {
    fn location(&self) -> String {
        self.inner.shown.clone()
    }

    fn check(&self) -> StoreFuture<()> {
        let store = self.clone();
        Box::pin(async move { store.ping().await })
    }

    fn nonces(self: Arc<Self>) -> crate::store::SharedNonces {
        self
    }

    fn ledger(self: Arc<Self>) -> Arc<dyn Ledger> {
        self
    }

    fn accounts(self: Arc<Self>) -> Arc<dyn crate::store::accounts::AccountStore> {
        self
    }
}
