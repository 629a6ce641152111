//! Rate limits kept in this process: the [`SharedLimits`] of a gateway
//! without `[ratelimit] redis`. One store for every endpoint, so a
//! caller's limit on a tool is one count wherever the tool is called from.
//!
//! Layer: `store`.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use parking_lot::RwLock;

use super::StoreFuture;
use super::limits::{SharedLimits, Verdict};

/// How often idle keys' state is dropped, in checks of one limiter.
const PRUNE_EVERY: u64 = 4096;

/// One quota's limiter, keyed by budget.
struct Keyed {
    limiter: DefaultKeyedRateLimiter<String>,
    checks: AtomicU64,
}

/// Budgets of calls per period, in memory (GCRA, a burst of the whole
/// budget refilled evenly over the period).
#[derive(Default)]
pub struct MemoryLimits {
    by_quota: RwLock<HashMap<(u32, Duration), Arc<Keyed>>>,
}

impl MemoryLimits {
    /// The limiter of `calls` per `period`, made on first use.
    fn keyed(&self, calls: NonZeroU32, period: Duration) -> Option<Arc<Keyed>> {
        let quota = (calls.get(), period);
        if let Some(k) = self.by_quota.read().get(&quota) {
            return Some(k.clone());
        }
        let q = Quota::with_period(period / calls.get())?.allow_burst(calls);
        let mut all = self.by_quota.write();
        Some(
            all.entry(quota)
                .or_insert_with(|| {
                    Arc::new(Keyed {
                        limiter: DefaultKeyedRateLimiter::keyed(q),
                        checks: AtomicU64::new(0),
                    })
                })
                .clone(),
        )
    }

    /// Take one call from `key`'s budget of `calls` per `period` now.
    pub fn take(&self, key: &str, calls: u32, period: Duration) -> Verdict {
        // A zero budget or period is refused at load; were one to reach
        // here, nothing would be counted rather than everything refused.
        let Some(keyed) = NonZeroU32::new(calls).and_then(|c| self.keyed(c, period)) else {
            return Verdict::Allowed;
        };
        if keyed.checks.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            // Budgets that are full again carry no state worth keeping.
            keyed.limiter.retain_recent();
        }
        match keyed.limiter.check_key(&key.to_owned()) {
            Ok(()) => Verdict::Allowed,
            Err(not_until) => {
                Verdict::Wait(not_until.wait_time_from(DefaultClock::default().now()))
            }
        }
    }
}

impl SharedLimits for MemoryLimits {
    fn check(self: Arc<Self>, key: String, calls: u32, period: Duration) -> StoreFuture<Verdict> {
        let verdict = self.take(&key, calls, period);
        Box::pin(std::future::ready(Ok(verdict)))
    }

    fn allows_on_outage(&self) -> bool {
        // Memory has no outage.
        false
    }

    fn ping(self: Arc<Self>) -> StoreFuture<()> {
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn each_key_has_its_own_budget_of_its_own_size() {
        let limits = MemoryLimits::default();
        for _ in 0..2 {
            assert!(matches!(limits.take("a", 2, MINUTE), Verdict::Allowed));
        }
        let Verdict::Wait(wait) = limits.take("a", 2, MINUTE) else {
            panic!("a third call in the minute went through");
        };
        // One call comes back every 30 s.
        assert!(
            wait <= Duration::from_secs(30) && wait > Duration::from_secs(25),
            "{wait:?}"
        );
        assert!(matches!(limits.take("b", 2, MINUTE), Verdict::Allowed));
        // Another size of budget under the same key is counted apart.
        assert!(matches!(limits.take("a", 5, MINUTE), Verdict::Allowed));
    }
}
