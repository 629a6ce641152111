//! The client's cache of list pages, following the caching rules: a page is
//! fresh while `now < received + ttlMs` (absent or negative `ttlMs` is 0);
//! the key is the method and its parameters (the cursor); a `private` page
//! is reused only within the same authorization context; retries of
//! multi-round requests are never cached; a stale page may be served when
//! re-fetching fails.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

/// What a server said about caching one of its lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListHints {
    /// The smallest `ttlMs` of its pages (absent or negative is zero).
    pub ttl: Duration,
    /// Some page was `cacheScope: "private"`.
    pub private: bool,
}

struct Entry {
    received: Instant,
    ttl: Duration,
    /// `ttlMs` as the server sent it (`ttl` drops to zero on invalidation).
    sent_ttl: Duration,
    private_to: Option<String>,
    page: Value,
}

/// Cached pages.
#[derive(Default)]
pub(crate) struct PageCache {
    entries: HashMap<(String, Option<String>), Entry>,
}

/// What the cache holds for a key.
pub(crate) enum Lookup {
    Fresh(Value),
    Stale(Value),
    Missing,
}

impl PageCache {
    pub(crate) fn get(&self, method: &str, cursor: Option<&str>, auth: &str) -> Lookup {
        let key = (method.to_owned(), cursor.map(str::to_owned));
        match self.entries.get(&key) {
            Some(e) if e.private_to.as_deref().is_none_or(|a| a == auth) => {
                if e.received.elapsed() < e.ttl {
                    Lookup::Fresh(e.page.clone())
                } else {
                    Lookup::Stale(e.page.clone())
                }
            }
            _ => Lookup::Missing,
        }
    }

    pub(crate) fn put(&mut self, method: &str, cursor: Option<&str>, auth: &str, page: &Value) {
        let ttl = page
            .get("ttlMs")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .max(0);
        let private = page.get("cacheScope").and_then(Value::as_str) == Some("private");
        self.entries.insert(
            (method.to_owned(), cursor.map(str::to_owned)),
            Entry {
                received: Instant::now(),
                ttl: Duration::from_millis(u64::try_from(ttl).unwrap_or(0)),
                sent_ttl: Duration::from_millis(u64::try_from(ttl).unwrap_or(0)),
                private_to: private.then(|| auth.to_owned()),
                page: page.clone(),
            },
        );
    }

    /// Mark every page of `method` stale (a list-changed notification): the
    /// next use re-fetches, but a stale page can still stand in if that fails.
    pub(crate) fn invalidate(&mut self, method: &str) {
        for ((m, _), entry) in self.entries.iter_mut() {
            if m == method {
                entry.ttl = Duration::ZERO;
            }
        }
    }

    /// The caching hints of the pages of `method` held now: the smallest
    /// `ttlMs` the server sent and whether any page was private.
    pub(crate) fn hints(&self, method: &str) -> Option<ListHints> {
        let mut hints: Option<ListHints> = None;
        for ((m, _), e) in &self.entries {
            if m != method {
                continue;
            }
            let h = hints.get_or_insert(ListHints {
                ttl: e.sent_ttl,
                private: false,
            });
            h.ttl = h.ttl.min(e.sent_ttl);
            h.private |= e.private_to.is_some();
        }
        hints
    }

    /// Drop every page of `method` (a cursor went invalid: start over).
    pub(crate) fn discard(&mut self, method: &str) {
        self.entries.retain(|(m, _), _| m != method);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn freshness_scope_and_invalidation() {
        let mut c = PageCache::default();
        c.put(
            "tools/list",
            None,
            "",
            &json!({"ttlMs": 60_000, "cacheScope": "public"}),
        );
        assert!(matches!(
            c.get("tools/list", None, "other"),
            Lookup::Fresh(_)
        ));
        assert!(
            matches!(c.get("tools/list", Some("c"), ""), Lookup::Missing),
            "the cursor is part of the key"
        );
        c.put(
            "tools/list",
            Some("c"),
            "alice",
            &json!({"ttlMs": 60_000, "cacheScope": "private"}),
        );
        assert!(matches!(
            c.get("tools/list", Some("c"), "alice"),
            Lookup::Fresh(_)
        ));
        assert!(
            matches!(c.get("tools/list", Some("c"), "bob"), Lookup::Missing),
            "private pages stay with their context"
        );
        c.put("prompts/list", None, "", &json!({"ttlMs": -5}));
        assert!(
            matches!(c.get("prompts/list", None, ""), Lookup::Stale(_)),
            "negative ttl means 0"
        );
        c.put("resources/list", None, "", &json!({}));
        assert!(
            matches!(c.get("resources/list", None, ""), Lookup::Stale(_)),
            "absent ttl means 0"
        );
        c.invalidate("tools/list");
        assert!(
            matches!(c.get("tools/list", None, ""), Lookup::Stale(_)),
            "invalidated pages are stale, kept as a fallback"
        );
        c.discard("tools/list");
        assert!(matches!(c.get("tools/list", None, ""), Lookup::Missing));
    }

    #[test]
    fn hints_are_the_strictest_pages_and_survive_invalidation() {
        let mut c = PageCache::default();
        assert_eq!(c.hints("tools/list"), None);
        c.put(
            "tools/list",
            None,
            "",
            &json!({"ttlMs": 60_000, "cacheScope": "public"}),
        );
        c.put(
            "tools/list",
            Some("p2"),
            "",
            &json!({"ttlMs": 20_000, "cacheScope": "private"}),
        );
        c.put("prompts/list", None, "", &json!({"ttlMs": 1}));
        c.invalidate("tools/list");
        assert_eq!(
            c.hints("tools/list"),
            Some(ListHints {
                ttl: Duration::from_secs(20),
                private: true
            })
        );
    }
}
