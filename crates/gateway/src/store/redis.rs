//! Rate limits shared by several instances, in Redis (the `redis`
//! feature): `[ratelimit] redis =
//! "redis://…"` keeps every budget (per caller and tool, and each
//! upstream's `per_minute`) in Redis, so the N+1th call in a window is
//! refused whichever instance takes it.
//!
//! Each check is one atomic script implementing GCRA (the algorithm the
//! embedded limiter uses too) on Redis's own clock, so instances whose
//! clocks differ still agree. A budget's key expires once it is full
//! again, so idle callers cost nothing. While Redis cannot be reached,
//! calls are refused (fail closed) with a clear error, unless `on_outage =
//! "allow"` says to let them through; the connection is re-established in
//! the background. Once a check has found Redis gone, the checks after it
//! are refused at once — none waits behind the reconnection — until a
//! probe (every [`PROBE_EVERY`]) finds it back.
//!
//! Layer: `store`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::store::limits::{SharedLimits, Verdict};
use crate::store::{StoreError, StoreFuture};

/// GCRA: `KEYS[1]` holds the theoretical arrival time (ms); `ARGV[1]` is
/// the emission interval (ms) and `ARGV[2]` the burst. Returns 0 when the
/// call is allowed, else the milliseconds to wait.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local over = new_tat - now - burst * interval
if over > 0 then return over end
redis.call('SET', KEYS[1], new_tat, 'PX', new_tat - now)
return 0
";

/// How long a check may take before the call is refused.
const TIMEOUT: Duration = Duration::from_secs(2);

/// How often, while Redis is away, a probe asks whether it is back.
pub const PROBE_EVERY: Duration = Duration::from_millis(200);

/// The shared budgets, in Redis.
pub struct RedisLimits {
    connection: ConnectionManager,
    script: redis::Script,
    shown: String,
    on_outage: crate::config::OnOutage,
    /// Redis was found gone and has not answered a probe since.
    away: Arc<AtomicBool>,
}

impl RedisLimits {
    /// Connect to `url` (`redis://[:password@]host[:port][/db]`). Fails
    /// when Redis cannot be reached: a gateway told to share its limits
    /// does not start without them.
    pub async fn connect(
        url: &str,
        on_outage: crate::config::OnOutage,
    ) -> Result<Self, StoreError> {
        let shown = crate::base::redact::store_url(url);
        let client = redis::Client::open(url).map_err(|source| StoreError::Redis {
            context: format!("[ratelimit] redis {shown}"),
            source,
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(TIMEOUT)
            .set_response_timeout(TIMEOUT)
            .set_number_of_retries(1);
        let connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|source| StoreError::Redis {
                context: format!("the rate-limit store {shown} is unavailable"),
                source,
            })?;
        Ok(Self {
            connection,
            script: redis::Script::new(GCRA),
            shown,
            on_outage,
            away: Arc::new(AtomicBool::new(false)),
        })
    }

    fn unavailable(&self, source: redis::RedisError) -> StoreError {
        StoreError::Redis {
            context: format!("the rate-limit store {} is unavailable", self.shown),
            source,
        }
    }

    /// Refused at once while Redis is away (a probe is on it).
    fn while_away(&self) -> Result<(), StoreError> {
        if self.away.load(Ordering::Acquire) {
            return Err(self.unavailable(redis::RedisError::from((
                redis::ErrorKind::IoError,
                "away; a probe is reconnecting",
            ))));
        }
        Ok(())
    }

    /// A request failed: if Redis is gone (not a script's error), refuse
    /// the next checks at once and probe until it answers.
    fn failed(&self, e: &redis::RedisError) {
        let gone = e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout();
        if !gone || self.away.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!(store = %self.shown, error = %e, "the rate-limit store is away; checks are refused at once until a probe finds it back");
        let away = Arc::downgrade(&self.away);
        let mut connection = self.connection.clone();
        let shown = self.shown.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                // The store was dropped (the gateway stopped): no one asks.
                let Some(flag) = away.upgrade() else { return };
                let ping = redis::cmd("PING");
                let pong = ping.query_async::<String>(&mut connection);
                if let Ok(Ok(_)) = tokio::time::timeout(TIMEOUT, pong).await {
                    flag.store(false, Ordering::Release);
                    tracing::info!(store = %shown, "the rate-limit store is back");
                    return;
                }
            }
        });
    }

    async fn ping_now(&self) -> Result<(), StoreError> {
        self.while_away()?;
        let mut connection = self.connection.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
            .map(drop)
            .map_err(|e| {
                self.failed(&e);
                self.unavailable(e)
            })
    }

    async fn take(&self, key: String, calls: u32, period: Duration) -> Result<Verdict, StoreError> {
        self.while_away()?;
        let interval = (period.as_millis() as u64 / u64::from(calls.max(1))).max(1);
        let mut connection = self.connection.clone();
        let wait: u64 = self
            .script
            .key(format!("toolgate:rl:{key}"))
            .arg(interval)
            .arg(calls.max(1))
            .invoke_async(&mut connection)
            .await
            .map_err(|e| {
                self.failed(&e);
                self.unavailable(e)
            })?;
        Ok(match wait {
            0 => Verdict::Allowed,
            ms => Verdict::Wait(Duration::from_millis(ms)),
        })
    }
}

impl SharedLimits for RedisLimits {
    fn allows_on_outage(&self) -> bool {
        self.on_outage == crate::config::OnOutage::Allow
    }

    fn ping(self: std::sync::Arc<Self>) -> StoreFuture<()> {
        Box::pin(async move { self.ping_now().await })
    }

    fn check(
        self: std::sync::Arc<Self>,
        key: String,
        calls: u32,
        period: Duration,
    ) -> StoreFuture<Verdict> {
        Box::pin(async move { self.take(key, calls, period).await })
    }
}
