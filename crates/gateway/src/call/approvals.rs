//! How a call asks a person (layer `call`): the [`Approvals`] trait the
//! guard uses, and its implementation over the pending store
//! ([`PendingApprovals`]). The page that shows and decides them is a
//! surface ([`crate::surface::page`]) the call never reaches: both meet
//! only in the pending store.

use std::sync::Arc;

use crate::base::ids::new_nonce;
use crate::base::time::now_ms;
use crate::store::StoreFuture;
use crate::store::pending::{Pending, Status, Waiting};

/// A call waiting for a person, as the guard sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The pending approval's id.
    pub id: String,
    /// Its page.
    pub url: String,
}

/// What a call asks a person to approve.
#[derive(Clone, Debug)]
pub struct Ask {
    /// The caller's verified subject.
    pub caller: Option<String>,
    /// The gateway tool.
    pub tool: String,
    /// The upstream's name.
    pub server: String,
    /// The arguments' digest: the approval is for these arguments only.
    pub digest: String,
    /// What the person is shown.
    pub question: String,
    /// The wider approval the page may also offer (the rule's `remember`).
    pub remember: Option<String>,
}

/// Where calls ask a person: open a pending approval, take the decision
/// once it is made, and decide one (what the page's buttons do).
pub trait Approvals: Send + Sync {
    /// Open (or find the open) pending approval of this call.
    fn open(&self, ask: Ask) -> StoreFuture<Opened>;
    /// Take the decision on this call, if there is one: an approval is
    /// spent by taking it (one call), a denial ends with it.
    fn take(&self, caller: Option<&str>, tool: &str, digest: &str) -> StoreFuture<Option<Status>>;
    /// Decide a waiting approval: `false` when it is not waiting, or
    /// `Remembered` was not offered.
    fn decide(&self, id: &str, status: Status) -> StoreFuture<bool>;
    /// Every approval not yet taken (waiting, or decided).
    fn all(&self) -> StoreFuture<Vec<Waiting>>;
    /// The page of the approval `id`.
    fn url_of(&self, id: &str) -> String;
}

/// Approvals kept in a [`Pending`] store, decided on pages under `base`.
pub struct PendingApprovals {
    pending: Arc<dyn Pending>,
    base: String,
}

impl PendingApprovals {
    /// Approvals in `pending`, whose pages are under `base`
    /// (`http://host:port`).
    pub fn new(pending: Arc<dyn Pending>, base: &str) -> Self {
        Self {
            pending,
            base: base.trim_end_matches('/').to_owned(),
        }
    }
}

impl Approvals for PendingApprovals {
    fn open(&self, ask: Ask) -> StoreFuture<Opened> {
        let entry = Waiting {
            id: new_nonce(),
            caller: ask.caller,
            tool: ask.tool,
            server: ask.server,
            digest: ask.digest,
            question: ask.question,
            remember: ask.remember,
            opened_ms: now_ms(std::time::SystemTime::now()),
            status: Status::Waiting,
        };
        let opened = self.pending.open(entry);
        let base = self.base.clone();
        Box::pin(async move {
            let id = opened.await?;
            Ok(Opened {
                url: format!("{base}/approvals/{id}"),
                id,
            })
        })
    }

    fn take(&self, caller: Option<&str>, tool: &str, digest: &str) -> StoreFuture<Option<Status>> {
        self.pending.take(
            caller.map(str::to_owned),
            tool.to_owned(),
            digest.to_owned(),
        )
    }

    fn decide(&self, id: &str, status: Status) -> StoreFuture<bool> {
        self.pending.decide(id.to_owned(), status)
    }

    fn all(&self) -> StoreFuture<Vec<Waiting>> {
        self.pending.all()
    }

    fn url_of(&self, id: &str) -> String {
        format!("{}/approvals/{id}", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pending::MemoryPending;
    use std::time::Duration;

    #[tokio::test]
    async fn an_approval_is_taken_once_and_only_by_the_same_call() {
        let d = PendingApprovals::new(
            Arc::new(MemoryPending::new(Duration::from_secs(60))),
            "http://127.0.0.1:9/",
        );
        let open = async |caller: Option<&str>, digest: &str| {
            d.open(Ask {
                caller: caller.map(str::to_owned),
                tool: "t".into(),
                server: "s".into(),
                digest: digest.into(),
                question: "q".into(),
                remember: None,
            })
            .await
            .unwrap()
        };
        let take =
            async |caller: Option<&str>, digest: &str| d.take(caller, "t", digest).await.unwrap();
        let a = open(Some("alice"), "d1").await;
        let again = open(Some("alice"), "d1").await;
        assert_eq!(a.id, again.id, "one pending entry per call");
        assert_eq!(a.url, format!("http://127.0.0.1:9/approvals/{}", a.id));
        assert_eq!(take(Some("alice"), "d1").await, None, "still waiting");
        assert!(
            !d.decide(&a.id, Status::Remembered).await.unwrap(),
            "not offered"
        );
        assert!(d.decide(&a.id, Status::Approved).await.unwrap());
        assert!(
            !d.decide(&a.id, Status::Denied).await.unwrap(),
            "decided once"
        );
        assert_eq!(take(Some("bob"), "d1").await, None);
        assert_eq!(take(Some("alice"), "d2").await, None);
        assert_eq!(take(Some("alice"), "d1").await, Some(Status::Approved));
        assert_eq!(take(Some("alice"), "d1").await, None, "spent");
        let b = open(None, "d1").await;
        assert!(d.decide(&b.id, Status::Denied).await.unwrap());
        assert_eq!(take(Some("alice"), "d1").await, None, "another caller's");
        assert_eq!(take(None, "d1").await, Some(Status::Denied));
    }
}
