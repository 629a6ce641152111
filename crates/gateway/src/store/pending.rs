//! Where calls waiting for a person are kept: in this process, or in the
//! PostgreSQL store every instance shares (`[store] url`), so a person's
//! decision on any instance's page is taken by the call retried on any
//! instance — once.
//!
//! Layer: `store`.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::base::time::now_ms;
use crate::store::StoreFuture;

/// Where a pending approval stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Nobody decided yet.
    Waiting,
    /// Approved: the next identical call goes through.
    Approved,
    /// Approved for the tool, for a while (the rule's `remember`): the
    /// next identical call goes through and leaves a grant.
    Remembered,
    /// Denied: the next identical call is refused.
    Denied,
}

/// A call waiting for a person (or decided, not yet taken).
#[derive(Clone, Debug, PartialEq)]
pub struct Waiting {
    /// Its id (the page's address).
    pub id: String,
    /// The caller's verified subject.
    pub caller: Option<String>,
    /// The gateway tool.
    pub tool: String,
    /// The upstream's name.
    pub server: String,
    /// The arguments' digest.
    pub digest: String,
    /// What the person is shown.
    pub question: String,
    /// The wider approval the page may offer, when the policy allows it.
    pub remember: Option<String>,
    /// When it was opened, in ms since the epoch.
    pub opened_ms: i64,
    /// Where it stands.
    pub status: Status,
}

impl Waiting {
    /// Whether it is for this call.
    pub fn is_for(&self, caller: Option<&str>, tool: &str, digest: &str) -> bool {
        self.caller.as_deref() == caller && self.tool == tool && self.digest == digest
    }
}

/// Pending approvals, wherever they are kept. Entries older than the
/// store's time to live are gone.
pub trait Pending: Send + Sync {
    /// The id of the waiting entry for the same call, or of `entry`, now
    /// kept.
    fn open(&self, entry: Waiting) -> StoreFuture<String>;
    /// Take the decision on this call, if there is one: the entry is gone
    /// with it, so one decision is taken by one call, whichever instance
    /// retries it.
    fn take(
        &self,
        caller: Option<String>,
        tool: String,
        digest: String,
    ) -> StoreFuture<Option<Status>>;
    /// Decide a waiting entry: `false` when it is not waiting, or the
    /// wider approval was asked and not offered.
    fn decide(&self, id: String, status: Status) -> StoreFuture<bool>;
    /// Every entry, oldest first.
    fn all(&self) -> StoreFuture<Vec<Waiting>>;
}

/// The oldest `opened_ms` still kept, for a time to live of `ttl`.
pub(crate) fn cutoff(ttl: Duration) -> i64 {
    now_ms(SystemTime::now()).saturating_sub(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// Pending approvals in this process.
pub struct MemoryPending {
    entries: Mutex<HashMap<String, Waiting>>,
    ttl: Duration,
}

impl MemoryPending {
    /// Entries kept for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            entries: Mutex::default(),
            ttl,
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<String, Waiting>> {
        let mut entries = self.entries.lock();
        let oldest = cutoff(self.ttl);
        entries.retain(|_, e| e.opened_ms >= oldest);
        entries
    }
}

impl Pending for MemoryPending {
    fn open(&self, entry: Waiting) -> StoreFuture<String> {
        let mut entries = self.lock();
        let found = entries
            .values()
            .find(|e| {
                e.status == Status::Waiting
                    && e.is_for(entry.caller.as_deref(), &entry.tool, &entry.digest)
            })
            .map(|e| e.id.clone());
        let id = found.unwrap_or_else(|| {
            let id = entry.id.clone();
            entries.insert(id.clone(), entry);
            id
        });
        Box::pin(async move { Ok(id) })
    }

    fn take(
        &self,
        caller: Option<String>,
        tool: String,
        digest: String,
    ) -> StoreFuture<Option<Status>> {
        let mut entries = self.lock();
        let id = entries
            .values()
            .find(|e| e.status != Status::Waiting && e.is_for(caller.as_deref(), &tool, &digest))
            .map(|e| e.id.clone());
        let taken = id.and_then(|id| entries.remove(&id)).map(|e| e.status);
        Box::pin(async move { Ok(taken) })
    }

    fn decide(&self, id: String, status: Status) -> StoreFuture<bool> {
        let decided = match self.lock().get_mut(&id) {
            Some(e) if e.status == Status::Waiting && offered(e.remember.is_some(), status) => {
                e.status = status;
                true
            }
            _ => false,
        };
        Box::pin(async move { Ok(decided) })
    }

    fn all(&self) -> StoreFuture<Vec<Waiting>> {
        let mut list: Vec<Waiting> = self.lock().values().cloned().collect();
        list.sort_by(|a, b| a.opened_ms.cmp(&b.opened_ms).then(a.id.cmp(&b.id)));
        Box::pin(async move { Ok(list) })
    }
}

/// Whether `status` is a decision the page offered (the wider approval
/// only with `remember`).
pub(crate) fn offered(remember: bool, status: Status) -> bool {
    match status {
        Status::Waiting => false,
        Status::Remembered => remember,
        Status::Approved | Status::Denied => true,
    }
}

#[cfg(feature = "postgres")]
impl Status {
    /// As kept in a shared store.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Waiting => "waiting",
            Status::Approved => "approved",
            Status::Remembered => "remembered",
            Status::Denied => "denied",
        }
    }

    /// From a shared store's text.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "waiting" => Status::Waiting,
            "approved" => Status::Approved,
            "remembered" => Status::Remembered,
            "denied" => Status::Denied,
            _ => return None,
        })
    }
}
