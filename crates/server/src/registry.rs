//! Ordered catalogs of tools, prompts and resources, with cursor pagination
//! and change notification.
//!
//! A catalog keeps registration order, which is what `*/list` returns: the
//! same order on every request while the set is unchanged. Readers take an
//! immutable snapshot, so a list or call never blocks on a registration and
//! never sees a half-applied change. Every change is announced on the
//! [`ChangeBus`], which feeds `subscriptions/listen` streams.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tokio::sync::broadcast;
use toolgate_protocol::RpcError;

use crate::AuthContext;
use crate::auth::Visibility;

/// Something a catalog lists.
pub(crate) trait Listed: Send + Sync + 'static {
    /// What goes on the wire.
    type Wire: serde::Serialize;
    /// The unique key (tool or prompt name, resource URI or template).
    fn key(&self) -> &str;
    /// The visibility rule, if the item is not visible to everyone.
    fn visibility(&self) -> Option<&Visibility>;
    /// The wire form.
    fn wire(&self) -> &Self::Wire;

    fn visible_to(&self, auth: Option<&AuthContext>) -> bool {
        self.visibility().is_none_or(|rule| rule(auth))
    }
}

/// A change to what the server offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The tool set changed.
    ToolsListChanged,
    /// The prompt set changed.
    PromptsListChanged,
    /// The resource set changed.
    ResourcesListChanged,
    /// A resource's contents changed.
    ResourceUpdated(Arc<str>),
}

/// Broadcasts [`Change`]s to every open subscription.
#[derive(Clone, Debug)]
pub struct ChangeBus {
    tx: broadcast::Sender<Change>,
}

impl Default for ChangeBus {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(256).0,
        }
    }
}

impl ChangeBus {
    /// Announce a change. Without listeners this costs nothing.
    pub fn publish(&self, change: Change) {
        let _ = self.tx.send(change);
    }

    pub(crate) fn receivers(&self) -> usize {
        self.tx.receiver_count()
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }
}

struct Snapshot<T> {
    items: Vec<Arc<T>>,
    index: HashMap<String, usize>,
    /// Whether any item has a visibility rule: then every list varies by
    /// authorization and must be `private`.
    varies_by_auth: bool,
}

impl<T: Listed> Snapshot<T> {
    fn new(items: Vec<Arc<T>>) -> Self {
        let index = items
            .iter()
            .enumerate()
            .map(|(i, t)| (t.key().to_owned(), i))
            .collect();
        let varies_by_auth = items.iter().any(|t| t.visibility().is_some());
        Self {
            items,
            index,
            varies_by_auth,
        }
    }
}

/// One page of a list.
pub(crate) struct Page<T> {
    pub(crate) items: Vec<Arc<T>>,
    pub(crate) next_cursor: Option<String>,
    pub(crate) private: bool,
}

/// An ordered, concurrently readable set of items.
pub(crate) struct Catalog<T> {
    state: RwLock<Arc<Snapshot<T>>>,
    bus: ChangeBus,
    change: Change,
}

impl<T: Listed> Catalog<T> {
    pub(crate) fn new(bus: ChangeBus, change: Change) -> Self {
        Self {
            state: RwLock::new(Arc::new(Snapshot::new(Vec::new()))),
            bus,
            change,
        }
    }

    fn snapshot(&self) -> Arc<Snapshot<T>> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The item with `key`, if it exists and `auth` may see it.
    pub(crate) fn get(&self, key: &str, auth: Option<&AuthContext>) -> Option<Arc<T>> {
        let snapshot = self.snapshot();
        let item = snapshot
            .index
            .get(key)
            .map(|&i| snapshot.items[i].clone())?;
        item.visible_to(auth).then_some(item)
    }

    /// Every item `keep` accepts, in order.
    pub(crate) fn visible_with(&self, keep: impl Fn(&T) -> bool) -> Vec<Arc<T>> {
        self.snapshot()
            .items
            .iter()
            .filter(|t| keep(t))
            .cloned()
            .collect()
    }

    /// Every item `auth` may see, in order.
    pub(crate) fn visible(&self, auth: Option<&AuthContext>) -> Vec<Arc<T>> {
        self.visible_with(|t| t.visible_to(auth))
    }

    /// Add an item; `Err` returns it when the key is taken.
    pub(crate) fn insert(&self, item: T) -> Result<(), T> {
        {
            let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
            if state.index.contains_key(item.key()) {
                return Err(item);
            }
            let mut items = state.items.clone();
            items.push(Arc::new(item));
            *state = Arc::new(Snapshot::new(items));
        }
        self.bus.publish(self.change.clone());
        Ok(())
    }

    /// Remove the item with `key`; whether it existed.
    pub(crate) fn remove(&self, key: &str) -> bool {
        {
            let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
            let Some(&i) = state.index.get(key) else {
                return false;
            };
            let mut items = state.items.clone();
            items.remove(i);
            *state = Arc::new(Snapshot::new(items));
        }
        self.bus.publish(self.change.clone());
        true
    }

    /// The page starting at `cursor` (or the first page) of what `auth` may see.
    pub(crate) fn page(
        &self,
        cursor: Option<&str>,
        auth: Option<&AuthContext>,
        page_size: usize,
    ) -> Result<Page<T>, RpcError> {
        let snapshot = self.snapshot();
        let visible: Vec<&Arc<T>> = snapshot
            .items
            .iter()
            .filter(|t| t.visible_to(auth))
            .collect();
        let start = match cursor {
            None => 0,
            Some(cursor) => {
                let key = decode_cursor(cursor).ok_or_else(|| invalid_cursor(cursor))?;
                visible
                    .iter()
                    .position(|t| t.key() == key)
                    .ok_or_else(|| invalid_cursor(cursor))?
            }
        };
        let end = (start + page_size.max(1)).min(visible.len());
        let next_cursor = visible.get(end).map(|t| encode_cursor(t.key()));
        Ok(Page {
            items: visible[start..end].iter().map(|t| (*t).clone()).collect(),
            next_cursor,
            private: snapshot.varies_by_auth,
        })
    }
}

const CURSOR_VERSION: &str = "tg1:";

/// Cursors name the first item of the next page, so a page boundary survives
/// additions and removals elsewhere in the list.
fn encode_cursor(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{CURSOR_VERSION}{key}"))
}

fn decode_cursor(cursor: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.strip_prefix(CURSOR_VERSION).map(str::to_owned)
}

fn invalid_cursor(cursor: &str) -> RpcError {
    let shown: String = cursor.chars().take(64).collect();
    RpcError::invalid_params(format!(
        "Invalid cursor {shown:?}: it was not issued by this server or the list changed since; list again without a cursor"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Item(String, Option<Visibility>);
    impl Listed for Item {
        type Wire = String;
        fn key(&self) -> &str {
            &self.0
        }
        fn visibility(&self) -> Option<&Visibility> {
            self.1.as_ref()
        }
        fn wire(&self) -> &String {
            &self.0
        }
    }

    fn catalog(n: usize) -> Catalog<Item> {
        let c = Catalog::new(ChangeBus::default(), Change::ToolsListChanged);
        for i in 0..n {
            assert!(c.insert(Item(format!("t{i:03}"), None)).is_ok());
        }
        c
    }

    #[test]
    fn pages_walk_the_whole_list_in_order() {
        let c = catalog(10);
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = c.page(cursor.as_deref(), None, 3).unwrap();
            seen.extend(page.items.iter().map(|i| i.0.clone()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let expected: Vec<_> = (0..10).map(|i| format!("t{i:03}")).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn bad_cursors_are_invalid_params() {
        let c = catalog(3);
        for bad in ["", "!!", "dGcxOm5vcGU", "bm90LW91cnM"] {
            assert_eq!(
                c.page(Some(bad), None, 2).err().map(|e| e.code),
                Some(-32602),
                "{bad}"
            );
        }
    }

    #[test]
    fn duplicate_keys_are_refused_and_changes_announced() {
        let c = catalog(1);
        let mut rx = c.bus.subscribe();
        assert!(c.insert(Item("t000".into(), None)).is_err());
        assert!(c.remove("t000"));
        assert_eq!(rx.try_recv().ok(), Some(Change::ToolsListChanged));
        assert!(!c.remove("t000"));
    }

    #[test]
    fn hidden_items_make_lists_private() {
        let c = catalog(2);
        let rule: Visibility = Arc::new(|auth| auth.is_some_and(|a| a.has_scope("admin")));
        assert!(c.insert(Item("secret".into(), Some(rule))).is_ok());
        let anon = c.page(None, None, 10).unwrap();
        assert_eq!(anon.items.len(), 2);
        assert!(anon.private);
        let admin = AuthContext::new("a").with_scopes(["admin"]);
        assert_eq!(c.page(None, Some(&admin), 10).unwrap().items.len(), 3);
        assert!(c.get("secret", None).is_none());
        assert!(c.get("secret", Some(&admin)).is_some());
    }
}
