//! Single-use rounds: a `requestState` that is good for one retry.
//!
//! A sealed state cannot be altered or moved to another request, but it
//! *can* be sent again, unchanged, until it expires — and each re-send runs
//! the handler again with the same answers. For a tool that spends, sends
//! or deletes, that is a second payment, a second message, a second
//! deletion. A single-use round carries a fresh nonce in its sealed state;
//! the retry spends it in a [`NonceStore`] before the handler runs, and a
//! second retry with the same state is refused without running anything.
//!
//! Turn it on per tool ([`ToolDef::single_use_rounds`](crate::ToolDef::single_use_rounds))
//! or for every request a server seals
//! ([`ServerBuilder::single_use_rounds`](crate::ServerBuilder::single_use_rounds)).
//! Nonces are kept in this process ([`MemoryNonceStore`]) unless the server
//! is given a shared store ([`ServerBuilder::nonce_store`](crate::ServerBuilder::nonce_store)):
//! several processes sharing a state key must share the store too, or a
//! round answered on one could be answered again on another.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The future of [`NonceStore::spend`]: `Ok(true)` the first time a nonce
/// is spent, `Ok(false)` every time after; `Err` when the store cannot say
/// (the round is then refused: single use fails closed), with the store's
/// own error as its cause.
pub type SpendFuture = Pin<Box<dyn Future<Output = Result<bool, BoxError>> + Send + 'static>>;

/// A store's failure, whatever its kind: the server logs it with its
/// causes ([`with_causes`](toolgate_protocol::error::with_causes)) and
/// never shows it to a client.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where single-use nonces are spent. Spending must be atomic: of two
/// concurrent spends of one nonce, exactly one gets `Ok(true)`.
///
/// A store may forget a nonce once the state that carried it has expired
/// (the server refuses an expired state before it asks the store).
///
/// ```
/// use std::collections::HashSet;
/// use std::sync::Mutex;
/// use toolgate_server::{NonceStore, SpendFuture};
///
/// /// Never forgets: fine for a test, not for a long-running server.
/// #[derive(Default)]
/// struct Forever(Mutex<HashSet<String>>);
///
/// impl NonceStore for Forever {
///     fn spend(&self, nonce: String) -> SpendFuture {
///         let fresh = self.0.lock().unwrap().insert(nonce);
///         Box::pin(async move { Ok(fresh) })
///     }
/// }
/// ```
pub trait NonceStore: Send + Sync + 'static {
    /// Mark `nonce` spent.
    fn spend(&self, nonce: String) -> SpendFuture;
}

/// Nonces kept in this process, each forgotten once it is older than the
/// states that carry it can live.
pub struct MemoryNonceStore {
    spent: Mutex<HashMap<String, Instant>>,
    keep: Duration,
}

impl MemoryNonceStore {
    /// A store that remembers each nonce for `keep` (at least the server's
    /// state lifetime).
    pub fn new(keep: Duration) -> Self {
        Self {
            spent: Mutex::default(),
            keep,
        }
    }
}

impl NonceStore for MemoryNonceStore {
    fn spend(&self, nonce: String) -> SpendFuture {
        let mut spent = self.spent.lock();
        let now = Instant::now();
        let keep = self.keep;
        spent.retain(|_, at| now.duration_since(*at) <= keep);
        let fresh = spent.insert(nonce, now).is_none();
        Box::pin(async move { Ok(fresh) })
    }
}

/// A fresh nonce: 128 random bits, hex.
pub(crate) fn new_nonce() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a single-use round was not run.
pub(crate) enum NotRun {
    /// Its state was already answered once.
    Replayed,
    /// The store could not say (fail closed).
    StoreFailed(BoxError),
}

/// Spend the round's nonce, if it has one.
pub(crate) async fn spend(store: &Arc<dyn NonceStore>, once: Option<String>) -> Result<(), NotRun> {
    let Some(nonce) = once else {
        return Ok(());
    };
    match store.spend(nonce).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(NotRun::Replayed),
        Err(e) => Err(NotRun::StoreFailed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_nonce_is_spent_once() {
        let store = MemoryNonceStore::new(Duration::from_secs(60));
        let n = new_nonce();
        assert_eq!(n.len(), 32);
        assert!(store.spend(n.clone()).await.unwrap());
        assert!(!store.spend(n).await.unwrap());
        assert!(store.spend(new_nonce()).await.unwrap());
    }
}
