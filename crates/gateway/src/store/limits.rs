//! Rate limits (layer `store`): the trait the call stages take a call
//! from, and how a wait is shown. The backends are Redis, shared by
//! instances (`crate::store::redis`, the `redis` feature), and memory,
//! this process alone ([`crate::store::limits_memory`]).

use std::sync::Arc;
use std::time::Duration;

use crate::store::StoreFuture;

/// What a check found.
pub enum Verdict {
    /// Within the budget.
    Allowed,
    /// Over it: try again after this long.
    Wait(Duration),
}

/// Budgets of calls per period that every instance sharing the store
/// counts against.
pub trait SharedLimits: Send + Sync {
    /// Take one call from the budget `key` of `calls` per `period`.
    fn check(self: Arc<Self>, key: String, calls: u32, period: Duration) -> StoreFuture<Verdict>;
    /// Whether calls go through while the store cannot be asked
    /// (`on_outage = "allow"`); otherwise they are refused.
    fn allows_on_outage(&self) -> bool;
    /// Whether the store answers now (for readiness).
    fn ping(self: Arc<Self>) -> StoreFuture<()>;
}

/// `wait` as the seconds a refusal names: rounded up to a tenth, so "now"
/// never shows.
pub fn seconds(wait: Duration) -> String {
    let tenths = wait.as_millis().div_ceil(100).max(1);
    format!("{}.{}", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_shown_rounded_up_to_a_tenth() {
        assert_eq!(seconds(Duration::from_millis(1)), "0.1");
        assert_eq!(seconds(Duration::from_millis(1501)), "1.6");
        assert_eq!(seconds(Duration::ZERO), "0.1");
    }
}
