//! Tokens the gateway obtained for its callers at an upstream, kept in
//! this process until shortly before they expire (never written to disk:
//! a restart exchanges again).
//!
//! Each key (a subject, what their token grants, the scopes asked for) has
//! a slot of its own, locked while a token is being obtained, so callers of
//! the same key wait for one exchange instead of each starting one. The
//! number of slots is bounded: past it, slots whose token expired, then
//! idle ones, are dropped.
//!
//! Layer: `store`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use toolgate_client::transport::Bearer;

/// Slots kept at most by one upstream's cache.
pub const MAX_SLOTS: usize = 10_000;

/// A token held for one key.
#[derive(Clone, Debug)]
pub struct CachedToken {
    /// The token.
    pub bearer: Bearer,
    /// When to obtain a new one (a minute before it expires, or half-way
    /// through a shorter life).
    pub renew_at: Instant,
    /// When it stops being sent at all.
    pub expires_at: Instant,
}

impl CachedToken {
    /// A token obtained `now` that lives `life` (as the authorization
    /// server said, relative to its answer: the two clocks need not agree).
    pub fn new(bearer: Bearer, now: Instant, life: Duration) -> Self {
        let margin = (life / 2).min(Duration::from_secs(60));
        Self {
            bearer,
            renew_at: now + life.saturating_sub(margin),
            expires_at: now + life.saturating_sub(Duration::from_secs(5).min(life / 4)),
        }
    }

    /// Whether it may still be sent at `now`.
    pub fn usable(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    /// Whether it is fresh enough at `now` not to be renewed.
    pub fn fresh(&self, now: Instant) -> bool {
        now < self.renew_at
    }
}

/// One key's slot: locked while its token is being obtained.
pub type Slot = Arc<tokio::sync::Mutex<Option<CachedToken>>>;

/// The tokens of one upstream, by key.
pub struct TokenCache {
    slots: Mutex<HashMap<String, Slot>>,
    max: usize,
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::with_capacity(MAX_SLOTS)
    }
}

impl TokenCache {
    /// A cache of at most `max` slots.
    pub fn with_capacity(max: usize) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            max: max.max(1),
        }
    }

    /// The slot of `key`, made if new.
    pub fn slot(&self, key: &str) -> Slot {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.get(key) {
            return slot.clone();
        }
        if slots.len() >= self.max {
            let now = Instant::now();
            // Drop what no one holds and holds nothing usable; then, if
            // still full, whatever no one holds.
            slots.retain(|_, s| match s.try_lock() {
                Ok(held) => held.as_ref().is_some_and(|t| t.usable(now)),
                Err(_) => true,
            });
            if slots.len() >= self.max {
                slots.retain(|_, s| s.try_lock().is_err());
            }
        }
        let slot = Slot::default();
        slots.insert(key.to_owned(), slot.clone());
        slot
    }

    /// Forget the token of `key` (the upstream refused it).
    pub fn forget(&self, key: &str) {
        self.slots.lock().remove(key);
    }

    /// How many keys have a slot.
    pub fn len(&self) -> usize {
        self.slots.lock().len()
    }

    /// Whether no key has a slot.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_renewed_before_it_expires_and_dropped_just_before() {
        let now = Instant::now();
        let t = CachedToken::new(Bearer::new("t"), now, Duration::from_secs(600));
        assert!(t.fresh(now + Duration::from_secs(539)));
        assert!(!t.fresh(now + Duration::from_secs(541)));
        assert!(t.usable(now + Duration::from_secs(594)));
        assert!(!t.usable(now + Duration::from_secs(596)));
        // A short life is renewed half-way.
        let short = CachedToken::new(Bearer::new("t"), now, Duration::from_secs(20));
        assert!(!short.fresh(now + Duration::from_secs(11)));
        assert!(short.usable(now + Duration::from_secs(11)));
    }

    #[tokio::test]
    async fn the_cache_stays_bounded_and_keeps_what_is_in_use() {
        let cache = TokenCache::with_capacity(3);
        let held = cache.slot("a");
        let guard = held.lock().await;
        for k in ["b", "c", "d", "e"] {
            let _ = cache.slot(k);
        }
        assert!(cache.len() <= 3, "{}", cache.len());
        // The slot being filled survived every eviction.
        assert!(Arc::ptr_eq(&cache.slot("a"), &held));
        drop(guard);
    }
}
