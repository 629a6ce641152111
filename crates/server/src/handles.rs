//! Handles for stateful tools: opaque ids that stand for server-side state.
//!
//! The protocol keeps no session, so a tool that creates something (a
//! basket, a browser page, a job) hands back a handle that later calls pass
//! in. [`Handles`] makes such ids safe by default:
//!
//! - unguessable: 128 bits from the operating system's CSPRNG, after a
//!   readable prefix (`bsk_…`);
//! - bound to the caller that created them: another caller presenting the
//!   id gets exactly the answer an unknown id gets, so a handle's existence
//!   does not leak;
//! - kept alive while used (a sliding time to live), and bounded in number,
//!   with a clear error when full;
//! - looked up into either the value or a ready [`ToolError`] worded for the
//!   model: what happened and how to recover.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::{RequestContext, ToolError};

struct Entry<T> {
    value: T,
    owner: Option<String>,
    last_used: Instant,
}

/// A store of values behind opaque handles.
///
/// ```
/// use std::time::Duration;
/// use toolgate_server::{Handles, RequestContext};
///
/// struct Basket { items: Vec<String> }
/// let baskets = Handles::<Basket>::new("bsk")
///     .ttl(Duration::from_secs(24 * 3600))
///     .capacity(10_000)
///     .describe("basket", "create a new one with create_basket");
/// let ctx = RequestContext::detached();
/// let id = baskets.insert(&ctx, Basket { items: Vec::new() }).unwrap();
/// assert!(id.starts_with("bsk_"));
/// baskets.with(&ctx, &id, |b| b.items.push("cup".into())).unwrap();
/// let err = baskets.with(&ctx, "bsk_nope", |b| b.items.len()).unwrap_err();
/// assert!(err.message().contains("create a new one with create_basket"));
/// ```
pub struct Handles<T> {
    entries: Mutex<HashMap<String, Entry<T>>>,
    prefix: String,
    ttl: Duration,
    capacity: usize,
    noun: String,
    recovery: String,
}

impl<T> Handles<T> {
    /// A store whose ids start with `prefix_`. Defaults: a sliding time to
    /// live of one hour, at most 10,000 live values, errors that speak of
    /// a "handle".
    pub fn new(prefix: &str) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            prefix: prefix.to_owned(),
            ttl: Duration::from_secs(3600),
            capacity: 10_000,
            noun: "handle".into(),
            recovery: "create a new one".into(),
        }
    }

    /// How long a value lives after its last use.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How many values may live at once.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// How errors name a value (`"basket"`) and tell the model to recover
    /// (`"create a new one with create_basket"`).
    pub fn describe(mut self, noun: &str, recovery: &str) -> Self {
        self.noun = noun.to_owned();
        self.recovery = recovery.to_owned();
        self
    }

    /// The configured time to live.
    pub fn time_to_live(&self) -> Duration {
        self.ttl
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<String, Entry<T>>> {
        self.entries.lock()
    }

    fn owner(ctx: &RequestContext) -> Option<String> {
        ctx.auth().and_then(|a| a.subject()).map(str::to_owned)
    }

    fn missing(&self, id: &str) -> ToolError {
        ToolError::new(format!(
            "{} {} has expired or does not exist; {}.",
            self.noun,
            toolgate_protocol::quote::quote(id),
            self.recovery
        ))
    }

    /// Store `value` for the calling principal; its new id.
    pub fn insert(&self, ctx: &RequestContext, value: T) -> Result<String, ToolError> {
        let mut entries = self.lock();
        if entries.len() >= self.capacity {
            let ttl = self.ttl;
            entries.retain(|_, e| e.last_used.elapsed() < ttl);
        }
        if entries.len() >= self.capacity {
            return Err(ToolError::new(format!(
                "Too many open {noun}s (the server keeps at most {}); finish or delete one you no longer need, or wait for unused ones to expire after {} s.",
                self.capacity,
                self.ttl.as_secs(),
                noun = self.noun
            )));
        }
        let id = format!(
            "{}_{}",
            self.prefix,
            URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>())
        );
        entries.insert(
            id.clone(),
            Entry {
                value,
                owner: Self::owner(ctx),
                last_used: Instant::now(),
            },
        );
        Ok(id)
    }

    /// Run `f` on the value behind `id`, if the caller owns it and it is
    /// alive; its time to live starts again.
    pub fn with<R>(
        &self,
        ctx: &RequestContext,
        id: &str,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<R, ToolError> {
        let mut entries = self.lock();
        let owner = Self::owner(ctx);
        let entry = entries
            .get_mut(id)
            .filter(|e| e.owner == owner && e.last_used.elapsed() < self.ttl)
            .ok_or_else(|| self.missing(id))?;
        entry.last_used = Instant::now();
        Ok(f(&mut entry.value))
    }

    /// Take the value behind `id` out of the store (same checks as
    /// [`Handles::with`]).
    pub fn remove(&self, ctx: &RequestContext, id: &str) -> Result<T, ToolError> {
        let mut entries = self.lock();
        let owner = Self::owner(ctx);
        let alive = entries
            .get(id)
            .is_some_and(|e| e.owner == owner && e.last_used.elapsed() < self.ttl);
        match entries.remove(id) {
            Some(entry) if alive => Ok(entry.value),
            Some(entry) => {
                // Someone else's: put it back untouched.
                if entry.last_used.elapsed() < self.ttl {
                    entries.insert(id.to_owned(), entry);
                }
                Err(self.missing(id))
            }
            None => Err(self.missing(id)),
        }
    }

    /// Live values (expired ones not yet dropped are not counted).
    pub fn len(&self) -> usize {
        let ttl = self.ttl;
        self.lock()
            .values()
            .filter(|e| e.last_used.elapsed() < ttl)
            .count()
    }

    /// Whether no value is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AuthContext;

    fn as_caller(subject: &str) -> RequestContext {
        RequestContext::detached().with_auth(AuthContext::new(subject))
    }

    #[test]
    fn ids_are_prefixed_and_unguessable() {
        let store = Handles::<u8>::new("bsk");
        let ctx = as_caller("alice");
        let a = store.insert(&ctx, 1).unwrap();
        let b = store.insert(&ctx, 2).unwrap();
        assert!(a.starts_with("bsk_") && a.len() == "bsk_".len() + 22, "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn another_callers_id_reads_as_unknown() {
        let store =
            Handles::<u8>::new("bsk").describe("basket", "create a new one with create_basket");
        let alice = as_caller("alice");
        let id = store.insert(&alice, 1).unwrap();
        let theirs = store
            .with(&as_caller("mallory"), &id, |v| *v)
            .unwrap_err()
            .message()
            .to_owned();
        let unknown = store
            .with(&as_caller("mallory"), "bsk_x", |v| *v)
            .unwrap_err()
            .message()
            .to_owned();
        assert_eq!(theirs.replace(&id, "ID"), unknown.replace("bsk_x", "ID"));
        assert!(
            theirs.contains("create a new one with create_basket"),
            "{theirs}"
        );
        assert!(store.remove(&as_caller("mallory"), &id).is_err());
        // Still Alice's.
        assert_eq!(store.with(&alice, &id, |v| *v).unwrap(), 1);
        assert_eq!(store.remove(&alice, &id).unwrap(), 1);
        assert!(store.with(&alice, &id, |v| *v).is_err());
    }

    #[test]
    fn a_full_store_says_so_and_expired_values_make_room() {
        let store = Handles::<u8>::new("h").capacity(2);
        let ctx = as_caller("a");
        store.insert(&ctx, 1).unwrap();
        store.insert(&ctx, 2).unwrap();
        let err = store.insert(&ctx, 3).unwrap_err().message().to_owned();
        assert!(err.contains("at most 2"), "{err}");
        let expiring = Handles::<u8>::new("h").capacity(1).ttl(Duration::ZERO);
        expiring.insert(&ctx, 1).unwrap();
        // Everything has expired at once: room again, and the old id is gone.
        assert!(expiring.insert(&ctx, 2).is_ok());
        assert!(expiring.is_empty());
    }
}
