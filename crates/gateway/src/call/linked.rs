//! People's own accounts at upstreams (`[servers.X.identity] mode =
//! "user"`): what a call of such an upstream sends, and how a person links
//! an account.
//!
//! A caller with no account linked at the upstream is sent (a URL-mode
//! elicitation, or the link in an `isError` for a client without one) to
//! the gateway's connect page with a *ticket*: the caller's subject and the
//! upstream, sealed, for ten minutes. The page (`surface::page::connect`)
//! first signs the person in at the gateway's own authorization server
//! (`[auth.sign_in]`) and refuses anyone but the ticket's subject — a link
//! passed to someone else links nothing — then sends them to the
//! upstream's authorization server (authorization code with PKCE, the
//! upstream as RFC 8707 resource), with the flow bound to their browser by
//! a cookie. The tokens that come back are sealed under the state key,
//! bound to the person and upstream, and kept in the store; calls then
//! send the access token, refresh it as it expires, and ask the person to
//! link again when the refresh is refused (revoked) or the sealed tokens no
//! longer open (the state key changed).
//!
//! Layer: `call`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use toolgate_client::auth::TokenSet;

use crate::store::StoreError;
use crate::store::accounts::{AccountStore, StoredAccount};
use crate::store::sealed::Sealer;
use crate::store::state_key::StateSecret;

/// How long a connect link works.
pub const TICKET_LIFE: Duration = Duration::from_secs(600);

/// How long a call waits for a person who accepted to go and link their
/// account (this process is told at once; another instance's link is
/// seen within a second).
pub const LINK_WAIT: Duration = Duration::from_secs(120);

/// What a connect link carries, sealed: whom it is for and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    /// The caller's verified subject.
    pub sub: String,
    /// The upstream.
    pub server: String,
    /// When it stops working (seconds since the epoch).
    pub exp: u64,
}

/// A person's tokens at an upstream, as sealed in the store.
#[derive(Clone, Serialize, Deserialize)]
pub struct Held {
    /// The access token.
    pub access_token: String,
    /// The refresh token, if the server issued one.
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the epoch).
    pub expires_at: Option<u64>,
    /// The scopes granted.
    pub scope: Option<String>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Held {
    /// The tokens of `set`.
    pub fn of(set: &TokenSet) -> Self {
        Self {
            access_token: set.access_token.clone(),
            refresh_token: set.refresh_token.clone(),
            expires_at: set.expires_at,
            scope: set.scope.clone(),
        }
    }

    /// Whether the access token may still be sent at `now` (a few seconds
    /// of margin, so it does not expire on its way).
    pub fn usable(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|exp| now + 5 < exp)
    }

    /// Whether it is fresh enough not to be refreshed first (a minute of
    /// margin).
    pub fn fresh(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|exp| now + 60 < exp)
    }
}

/// An account in the store that does not open (the state key changed, or
/// the row was altered): it is unlinked, and the person asked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unreadable;

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What binds a sealed account to its row.
fn row_binding(subject: &str, server: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(subject.len() + server.len() + 16);
    out.extend_from_slice(&(subject.len() as u64).to_be_bytes());
    out.extend_from_slice(subject.as_bytes());
    out.extend_from_slice(server.as_bytes());
    out
}

/// The gateway's side of linked accounts: the store, the keys, the page.
pub struct Linking {
    /// Where accounts are kept.
    pub accounts: Arc<dyn AccountStore>,
    account_key: Sealer,
    ticket_key: Sealer,
    flow_key: Sealer,
    /// The connect page's base URL (`http://host:port`).
    pub base: String,
    /// Wakes the calls of this process waiting for a link.
    linked: tokio::sync::Notify,
}

impl std::fmt::Debug for Linking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Linking")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Linking {
    /// Linking under `secret`, kept in `accounts`, on the page at `base`.
    pub fn new(secret: &StateSecret, accounts: Arc<dyn AccountStore>, base: &str) -> Self {
        Self {
            accounts,
            account_key: Sealer::new(secret, "linked accounts"),
            ticket_key: Sealer::new(secret, "connect tickets"),
            flow_key: Sealer::new(secret, "connect flow"),
            base: base.trim_end_matches('/').to_owned(),
            linked: tokio::sync::Notify::new(),
        }
    }

    /// The connect link of `subject` for `server`.
    pub fn connect_url(&self, subject: &str, server: &str) -> String {
        let ticket = Ticket {
            sub: subject.to_owned(),
            server: server.to_owned(),
            exp: unix_now() + TICKET_LIFE.as_secs(),
        };
        let json = serde_json::to_vec(&ticket).unwrap_or_default();
        let sealed = self.ticket_key.seal_text(&json, server.as_bytes());
        let path: String = url::form_urlencoded::byte_serialize(server.as_bytes()).collect();
        format!("{}/connect/{path}?ticket={sealed}", self.base)
    }

    /// The ticket of a connect link for `server`, if it opens and has not
    /// expired.
    pub fn ticket(&self, server: &str, text: &str) -> Option<Ticket> {
        let bytes = self.ticket_key.open_text(text, server.as_bytes()).ok()?;
        let ticket: Ticket = serde_json::from_slice(&bytes).ok()?;
        (ticket.server == server && ticket.exp > unix_now()).then_some(ticket)
    }

    /// `value` sealed for the connect flow's cookie.
    pub fn seal_flow<T: Serialize>(&self, value: &T) -> String {
        let json = serde_json::to_vec(value).unwrap_or_default();
        self.flow_key.seal_text(&json, b"connect flow")
    }

    /// The connect flow's cookie, opened.
    pub fn open_flow<T: for<'de> Deserialize<'de>>(&self, text: &str) -> Option<T> {
        let bytes = self.flow_key.open_text(text, b"connect flow").ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// `subject`'s tokens at `server`: `None` when not linked.
    pub async fn load(
        &self,
        subject: &str,
        server: &str,
    ) -> Result<Option<Result<Held, Unreadable>>, StoreError> {
        let Some(row) = self
            .accounts
            .account(subject.to_owned(), server.to_owned())
            .await?
        else {
            return Ok(None);
        };
        let opened = self
            .account_key
            .open(&row.sealed, &row_binding(subject, server))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Held>(&bytes).ok())
            .ok_or(Unreadable);
        Ok(Some(opened))
    }

    /// Keep `held` as `subject`'s tokens at `server`, and wake the calls
    /// waiting for them.
    pub async fn save(&self, subject: &str, server: &str, held: &Held) -> Result<(), StoreError> {
        let json = serde_json::to_vec(held).unwrap_or_default();
        let now = now_ms();
        self.accounts
            .keep(StoredAccount {
                subject: subject.to_owned(),
                server: server.to_owned(),
                sealed: self.account_key.seal(&json, &row_binding(subject, server)),
                linked_ms: now,
                updated_ms: now,
            })
            .await?;
        self.linked.notify_waiters();
        Ok(())
    }

    /// Forget `subject`'s account at `server`.
    pub async fn unlink(&self, subject: &str, server: &str) -> Result<bool, StoreError> {
        self.accounts
            .unlink(subject.to_owned(), server.to_owned())
            .await
    }

    /// Wait (at most `up_to`) until `subject` has an account at `server`.
    pub async fn wait_linked(&self, subject: &str, server: &str, up_to: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + up_to;
        loop {
            // Registered before looking, so a link made in between wakes it.
            let woken = self.linked.notified();
            if matches!(self.load(subject, server).await, Ok(Some(Ok(_)))) {
                return true;
            }
            // Another instance's link is in the shared store only: look
            // again every second.
            let next = (tokio::time::Instant::now() + Duration::from_secs(1)).min(deadline);
            if tokio::time::timeout_at(next, woken).await.is_err()
                && tokio::time::Instant::now() >= deadline
            {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::accounts::MemoryAccounts;

    fn linking(secret: &str, accounts: Arc<dyn AccountStore>) -> Linking {
        Linking::new(
            &StateSecret::from_text(secret).unwrap(),
            accounts,
            "http://127.0.0.1:8790/",
        )
    }

    fn held() -> Held {
        Held {
            access_token: "at".into(),
            refresh_token: Some("rt".into()),
            expires_at: Some(unix_now() + 600),
            scope: Some("crm.read".into()),
        }
    }

    #[test]
    fn a_connect_link_names_its_person_only_sealed_and_works_for_its_upstream() {
        let l = linking(&"k".repeat(40), Arc::new(MemoryAccounts::default()));
        let url = l.connect_url("alice@example.com", "crm");
        assert!(
            url.starts_with("http://127.0.0.1:8790/connect/crm?ticket="),
            "{url}"
        );
        assert!(!url.contains("alice"), "the subject is sealed: {url}");
        let text = url.split("ticket=").nth(1).unwrap();
        let ticket = l.ticket("crm", text).unwrap();
        assert_eq!(ticket.sub, "alice@example.com");
        // Not for another upstream, not altered, not under another key.
        assert!(l.ticket("git", text).is_none());
        let mut altered: Vec<char> = text.chars().collect();
        let mid = altered.len() / 2;
        altered[mid] = if altered[mid] == 'A' { 'B' } else { 'A' };
        let altered: String = altered.into_iter().collect();
        assert!(l.ticket("crm", &altered).is_none());
        let other = linking(&"j".repeat(40), Arc::new(MemoryAccounts::default()));
        assert!(other.ticket("crm", text).is_none());
    }

    #[tokio::test]
    async fn tokens_are_kept_sealed_and_a_changed_key_reads_nothing() {
        let store: Arc<dyn AccountStore> = Arc::new(MemoryAccounts::default());
        let l = linking(&"k".repeat(40), store.clone());
        l.save("alice", "crm", &held()).await.unwrap();
        let row = store
            .account("alice".into(), "crm".into())
            .await
            .unwrap()
            .unwrap();
        // What the store holds is not the tokens.
        assert!(!row.sealed.windows(2).any(|w| w == b"at"));
        assert_eq!(
            l.load("alice", "crm")
                .await
                .unwrap()
                .unwrap()
                .unwrap()
                .access_token,
            "at"
        );
        // Copied to bob's row, it does not open for bob.
        store
            .keep(StoredAccount {
                subject: "bob".into(),
                ..row
            })
            .await
            .unwrap();
        assert!(matches!(
            l.load("bob", "crm").await.unwrap(),
            Some(Err(Unreadable))
        ));
        // The state key rotated: unreadable, not a crash.
        let rotated = linking(&"r".repeat(40), store);
        assert!(matches!(
            rotated.load("alice", "crm").await.unwrap(),
            Some(Err(Unreadable))
        ));
        assert!(rotated.load("carol", "crm").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_call_waiting_for_a_link_is_woken_by_it() {
        let l = Arc::new(linking(
            &"k".repeat(40),
            Arc::new(MemoryAccounts::default()),
        ));
        let waiting = {
            let l = l.clone();
            tokio::spawn(async move { l.wait_linked("alice", "crm", LINK_WAIT).await })
        };
        tokio::task::yield_now().await;
        l.save("alice", "crm", &held()).await.unwrap();
        assert!(waiting.await.unwrap());
    }
}
