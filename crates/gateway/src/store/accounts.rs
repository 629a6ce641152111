//! People's linked accounts at upstreams (`[servers.X.identity] mode =
//! "user"`): the trait the identity stage and the connect page use, and
//! its memory backend. The audit store keeps them too (SQLite,
//! PostgreSQL), so that every instance sharing it knows the same accounts.
//!
//! A store holds only sealed bytes ([`crate::store::sealed`]): the tokens
//! are encrypted before they reach it, bound to the subject and upstream
//! of their row, and never leave the gateway's process in the clear.
//!
//! Layer: `store`.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::store::StoreFuture;

/// One person's account at one upstream, as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredAccount {
    /// The person (their verified subject at the gateway).
    pub subject: String,
    /// The upstream (its key in `[servers]`).
    pub server: String,
    /// Their tokens there, sealed.
    pub sealed: Vec<u8>,
    /// When it was linked (ms since the epoch).
    pub linked_ms: i64,
    /// When its tokens last changed (a refresh).
    pub updated_ms: i64,
}

impl std::fmt::Debug for StoredAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredAccount")
            .field("subject", &self.subject)
            .field("server", &self.server)
            .field("linked_ms", &self.linked_ms)
            .field("updated_ms", &self.updated_ms)
            .finish_non_exhaustive()
    }
}

/// What a list of someone's accounts shows: never the tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkedAccount {
    /// The upstream.
    pub server: String,
    /// When it was linked.
    pub linked_ms: i64,
    /// When its tokens last changed.
    pub updated_ms: i64,
}

/// Where linked accounts are kept.
pub trait AccountStore: Send + Sync {
    /// `subject`'s account at `server`, if linked.
    fn account(&self, subject: String, server: String) -> StoreFuture<Option<StoredAccount>>;
    /// Keep `account` (replacing any of the same subject and upstream).
    fn keep(&self, account: StoredAccount) -> StoreFuture<()>;
    /// Unlink `subject`'s account at `server`: whether there was one.
    fn unlink(&self, subject: String, server: String) -> StoreFuture<bool>;
    /// `subject`'s accounts, by upstream.
    fn accounts_of(&self, subject: String) -> StoreFuture<Vec<LinkedAccount>>;
}

/// Accounts in this process (no audit store): gone when it stops.
#[derive(Default)]
pub struct MemoryAccounts {
    rows: Mutex<BTreeMap<(String, String), StoredAccount>>,
}

impl AccountStore for MemoryAccounts {
    fn account(&self, subject: String, server: String) -> StoreFuture<Option<StoredAccount>> {
        let found = self.rows.lock().get(&(subject, server)).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn keep(&self, account: StoredAccount) -> StoreFuture<()> {
        let mut rows = self.rows.lock();
        let key = (account.subject.clone(), account.server.clone());
        let linked_ms = rows.get(&key).map_or(account.linked_ms, |a| a.linked_ms);
        rows.insert(
            key,
            StoredAccount {
                linked_ms,
                ..account
            },
        );
        Box::pin(async { Ok(()) })
    }

    fn unlink(&self, subject: String, server: String) -> StoreFuture<bool> {
        let gone = self.rows.lock().remove(&(subject, server)).is_some();
        Box::pin(async move { Ok(gone) })
    }

    fn accounts_of(&self, subject: String) -> StoreFuture<Vec<LinkedAccount>> {
        let list = self
            .rows
            .lock()
            .values()
            .filter(|a| a.subject == subject)
            .map(|a| LinkedAccount {
                server: a.server.clone(),
                linked_ms: a.linked_ms,
                updated_ms: a.updated_ms,
            })
            .collect();
        Box::pin(async move { Ok(list) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(subject: &str, server: &str, at: i64) -> StoredAccount {
        StoredAccount {
            subject: subject.into(),
            server: server.into(),
            sealed: vec![1, 2, 3],
            linked_ms: at,
            updated_ms: at,
        }
    }

    #[tokio::test]
    async fn accounts_are_kept_per_person_and_upstream_and_listed_to_their_owner_only() {
        let store = MemoryAccounts::default();
        store.keep(row("alice", "crm", 1)).await.unwrap();
        store.keep(row("alice", "git", 2)).await.unwrap();
        store.keep(row("bob", "crm", 3)).await.unwrap();
        // A refresh keeps when it was linked.
        store.keep(row("alice", "crm", 9)).await.unwrap();
        let alice = store.accounts_of("alice".into()).await.unwrap();
        assert_eq!(
            alice,
            [
                LinkedAccount {
                    server: "crm".into(),
                    linked_ms: 1,
                    updated_ms: 9
                },
                LinkedAccount {
                    server: "git".into(),
                    linked_ms: 2,
                    updated_ms: 2
                },
            ]
        );
        assert!(store.unlink("alice".into(), "crm".into()).await.unwrap());
        assert!(!store.unlink("alice".into(), "crm".into()).await.unwrap());
        assert!(
            store
                .account("alice".into(), "crm".into())
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .account("bob".into(), "crm".into())
                .await
                .unwrap()
                .is_some()
        );
    }
}
