//! Ordered catalogs of tools, prompts and resources, with cursor pagination
//! and change notification.
//!
//! A catalog keeps registration order, which is what `*/list` returns: the
//! same order on every request while the set is unchanged. Readers take an
//! immutable snapshot, so a list or call never blocks on a registration and
//! never sees a half-applied change. Every change is announced on the
//! [`ChangeBus`], which feeds `subscriptions/listen` streams.
//!
//! Lists are served from bytes: each snapshot serializes its items once, on
//! first use, and — when no item has a visibility rule, so every caller
//! sees the same list — its whole pages too. A list request then costs a
//! cursor lookup and a copy.

use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tokio::sync::broadcast;
use toolgate_protocol::RpcError;
use toolgate_protocol::quote::quote;

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
    /// Each item's wire form, serialized on first use.
    item_bytes: OnceLock<Vec<Box<[u8]>>>,
    /// Every rendered page, when the list is the same for every caller.
    pages: OnceLock<Vec<Arc<[u8]>>>,
}

/// Renders one page's result object from its items' bytes, the next
/// cursor, and whether the page is private.
pub(crate) type RenderPage<'a> = &'a dyn Fn(&[&[u8]], Option<&str>, bool) -> Vec<u8>;

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
            item_bytes: OnceLock::new(),
            pages: OnceLock::new(),
        }
    }

    fn item_bytes(&self) -> &[Box<[u8]>] {
        self.item_bytes.get_or_init(|| {
            self.items
                .iter()
                .map(|item| {
                    serde_json::to_vec(item.wire())
                        .unwrap_or_else(|_| b"null".to_vec())
                        .into_boxed_slice()
                })
                .collect()
        })
    }

    fn start_of(
        &self,
        cursor: Option<&str>,
        visible: impl Fn(usize) -> bool,
    ) -> Result<usize, RpcError> {
        let Some(cursor) = cursor else {
            return Ok(0);
        };
        let key = decode_cursor(cursor).ok_or_else(|| invalid_cursor(cursor))?;
        match self.index.get(&key) {
            Some(&i) if visible(i) => Ok(i),
            _ => Err(invalid_cursor(cursor)),
        }
    }
}

/// An ordered, concurrently readable set of items.
pub(crate) struct Catalog<T> {
    state: RwLock<Arc<Snapshot<T>>>,
    bus: ChangeBus,
    change: Change,
    /// Keep items in key order instead of registration order.
    sorted: bool,
}

impl<T: Listed> Catalog<T> {
    pub(crate) fn new(bus: ChangeBus, change: Change) -> Self {
        Self {
            state: RwLock::new(Arc::new(Snapshot::new(Vec::new()))),
            bus,
            change,
            sorted: false,
        }
    }

    /// A catalog that lists its items in key order, whatever order they
    /// were added in.
    pub(crate) fn sorted(mut self) -> Self {
        self.sorted = true;
        self
    }

    fn snapshot(&self) -> Arc<Snapshot<T>> {
        self.state.read().clone()
    }

    /// The item with `key`, if it exists and `auth` may see it.
    pub(crate) fn get(&self, key: &str, auth: Option<&AuthContext>) -> Option<Arc<T>> {
        let item = self.get_hidden(key)?;
        item.visible_to(auth).then_some(item)
    }

    /// The item named `key` whoever asks (to tell "hidden" from "absent").
    pub(crate) fn get_hidden(&self, key: &str) -> Option<Arc<T>> {
        // Looked up under the read lock: cloning the snapshot's `Arc` for
        // one lookup would touch a counter every call shares.
        let state = self.state.read();
        state.index.get(key).map(|&i| state.items[i].clone())
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
            let mut state = self.state.write();
            if state.index.contains_key(item.key()) {
                return Err(item);
            }
            let mut items = state.items.clone();
            let at = if self.sorted {
                items.partition_point(|t| t.key() < item.key())
            } else {
                items.len()
            };
            items.insert(at, Arc::new(item));
            *state = Arc::new(Snapshot::new(items));
        }
        self.bus.publish(self.change.clone());
        Ok(())
    }

    /// Remove the item with `key`; whether it existed.
    pub(crate) fn remove(&self, key: &str) -> bool {
        {
            let mut state = self.state.write();
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

    /// The serialized result of the page at `cursor`, rendered by `render`
    /// (which must depend on nothing but its arguments: public pages are
    /// cached with the snapshot).
    pub(crate) fn page_bytes(
        &self,
        cursor: Option<&str>,
        auth: Option<&AuthContext>,
        page_size: usize,
        render: RenderPage<'_>,
    ) -> Result<Arc<[u8]>, RpcError> {
        let snapshot = self.snapshot();
        let size = page_size.max(1);
        let bytes = snapshot.item_bytes();
        if !snapshot.varies_by_auth {
            let start = snapshot.start_of(cursor, |_| true)?;
            if start % size == 0 {
                let pages = snapshot.pages.get_or_init(|| {
                    let n = snapshot.items.len();
                    let mut pages = Vec::with_capacity(n / size + 1);
                    let mut at = 0;
                    loop {
                        let end = (at + size).min(n);
                        let items: Vec<&[u8]> = bytes[at..end].iter().map(|b| &**b).collect();
                        let next = snapshot.items.get(end).map(|t| encode_cursor(t.key()));
                        pages.push(Arc::from(render(&items, next.as_deref(), false)));
                        if end >= n {
                            break pages;
                        }
                        at = end;
                    }
                });
                if let Some(page) = pages.get(start / size) {
                    return Ok(page.clone());
                }
            }
            // A cursor from before a change lands mid-page: render it now.
            let end = (start + size).min(snapshot.items.len());
            let items: Vec<&[u8]> = bytes[start..end].iter().map(|b| &**b).collect();
            let next = snapshot.items.get(end).map(|t| encode_cursor(t.key()));
            return Ok(Arc::from(render(&items, next.as_deref(), false)));
        }
        let visible: Vec<usize> = (0..snapshot.items.len())
            .filter(|&i| snapshot.items[i].visible_to(auth))
            .collect();
        let start = snapshot.start_of(cursor, |i| snapshot.items[i].visible_to(auth))?;
        let from = visible.iter().position(|&i| i == start).unwrap_or(0);
        let end = (from + size).min(visible.len());
        let items: Vec<&[u8]> = visible[from..end].iter().map(|&i| &*bytes[i]).collect();
        let next = visible
            .get(end)
            .map(|&i| encode_cursor(snapshot.items[i].key()));
        Ok(Arc::from(render(&items, next.as_deref(), true)))
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
    RpcError::invalid_params(format!(
        "Invalid cursor {}: it was not issued by this server or the list changed since; list again without a cursor",
        quote(cursor)
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

    struct Seen {
        items: Vec<String>,
        next_cursor: Option<String>,
        private: bool,
    }

    fn render(items: &[&[u8]], next: Option<&str>, private: bool) -> Vec<u8> {
        let items: Vec<serde_json::Value> = items
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        serde_json::to_vec(&serde_json::json!({"items": items, "next": next, "private": private}))
            .unwrap()
    }

    fn page(
        c: &Catalog<Item>,
        cursor: Option<&str>,
        auth: Option<&AuthContext>,
        size: usize,
    ) -> Result<Seen, RpcError> {
        let bytes = c.page_bytes(cursor, auth, size, &render)?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        Ok(Seen {
            items: v["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect(),
            next_cursor: v["next"].as_str().map(str::to_owned),
            private: v["private"].as_bool().unwrap(),
        })
    }

    fn walk(c: &Catalog<Item>, size: usize) -> Vec<String> {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let p = page(c, cursor.as_deref(), None, size).unwrap();
            seen.extend(p.items);
            match p.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        seen
    }

    #[test]
    fn pages_walk_the_whole_list_in_order() {
        let c = catalog(10);
        let expected: Vec<_> = (0..10).map(|i| format!("t{i:03}")).collect();
        assert_eq!(walk(&c, 3), expected);
        // Served again from the cached pages: the same answer.
        assert_eq!(walk(&c, 3), expected);
        assert_eq!(walk(&catalog(0), 3), Vec::<String>::new());
        assert_eq!(walk(&catalog(6), 3).len(), 6);
    }

    #[test]
    fn public_pages_are_rendered_once_per_snapshot() {
        let c = catalog(5);
        let renders = std::cell::Cell::new(0);
        let counting = |items: &[&[u8]], next: Option<&str>, private: bool| {
            renders.set(renders.get() + 1);
            render(items, next, private)
        };
        for _ in 0..3 {
            c.page_bytes(None, None, 2, &counting).unwrap();
        }
        assert_eq!(
            renders.get(),
            3,
            "three pages rendered once, then served from cache"
        );
        assert!(c.insert(Item("t999".into(), None)).is_ok());
        c.page_bytes(None, None, 2, &counting).unwrap();
        assert_eq!(
            renders.get(),
            6,
            "a change renders the new snapshot's pages"
        );
    }

    #[test]
    fn a_cursor_from_before_a_change_continues_where_it_pointed() {
        let c = catalog(6);
        let first = page(&c, None, None, 3).unwrap();
        assert!(c.remove("t001"));
        // The cursor names t003, now at position 2: the page starts there.
        let second = page(&c, first.next_cursor.as_deref(), None, 3).unwrap();
        assert_eq!(second.items, ["t003", "t004", "t005"]);
        assert!(c.remove("t003"));
        assert_eq!(
            page(&c, first.next_cursor.as_deref(), None, 3)
                .err()
                .map(|e| e.code),
            Some(-32602),
            "a cursor whose item is gone is invalid"
        );
    }

    #[test]
    fn bad_cursors_are_invalid_params() {
        let c = catalog(3);
        for bad in ["", "!!", "dGcxOm5vcGU", "bm90LW91cnM"] {
            assert_eq!(
                page(&c, Some(bad), None, 2).err().map(|e| e.code),
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
    fn a_sorted_catalog_lists_in_key_order_whatever_the_insertion_order() {
        let c = Catalog::new(ChangeBus::default(), Change::ToolsListChanged).sorted();
        for key in ["m", "z", "a", "q"] {
            assert!(c.insert(Item(key.into(), None)).is_ok());
        }
        assert_eq!(walk(&c, 2), ["a", "m", "q", "z"]);
    }

    #[test]
    fn hidden_items_make_lists_private() {
        let c = catalog(2);
        let rule: Visibility = Arc::new(|auth| auth.is_some_and(|a| a.has_scope("admin")));
        assert!(c.insert(Item("secret".into(), Some(rule))).is_ok());
        let anon = page(&c, None, None, 10).unwrap();
        assert_eq!(anon.items.len(), 2);
        assert!(anon.private);
        let admin = AuthContext::new("a").with_scopes(["admin"]);
        assert_eq!(page(&c, None, Some(&admin), 10).unwrap().items.len(), 3);
        // A cursor naming a hidden item is invalid for those who cannot see it.
        let hidden = encode_cursor("secret");
        assert!(page(&c, Some(&hidden), None, 10).is_err());
        assert!(page(&c, Some(&hidden), Some(&admin), 10).is_ok());
        assert!(c.get("secret", None).is_none());
        assert!(c.get("secret", Some(&admin)).is_some());
    }
}
