//! What has entered each flow (layer `store`): the trait the flow stage
//! reads and adds labels through, and its memory backend, bounded — past
//! `max_flows` flows, the one changed longest ago is forgotten first.
//! The audit store keeps them too (SQLite, PostgreSQL), so that instances
//! sharing it agree.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use toolgate_review::flows::FlowClass;

use crate::decide::flows::Label;
use crate::store::StoreFuture;

/// The most labels one flow keeps: one per class and tool, the first of
/// each; a flow that has more is held already.
pub const MAX_LABELS: usize = 32;

/// Labels of flows, by the flow's key.
pub trait FlowStore: Send + Sync {
    /// The labels of flow `key` that have not expired by `now_ms`.
    fn labels(self: Arc<Self>, key: String, now_ms: i64) -> StoreFuture<Vec<Label>>;
    /// Add `label` to flow `key` until `expires_ms` (a label of the same
    /// class and tool is kept once, its expiry moved on).
    fn add(self: Arc<Self>, key: String, label: Label, expires_ms: i64) -> StoreFuture<()>;
}

struct Flow {
    labels: Vec<(Label, i64)>,
    /// When it last changed, in the order of `order`.
    stamp: u64,
}

#[derive(Default)]
struct Table {
    flows: HashMap<String, Flow>,
    /// Keys by when they changed, oldest first; a key whose stamp moved
    /// on since is skipped when it comes up.
    order: VecDeque<(u64, String)>,
    next: u64,
}

/// Flows in this process.
pub struct MemoryFlows {
    max: usize,
    table: Mutex<Table>,
}

impl MemoryFlows {
    /// At most `max_flows` flows.
    pub fn new(max_flows: usize) -> Self {
        Self {
            max: max_flows.max(1),
            table: Mutex::default(),
        }
    }

    /// How many flows are kept now.
    pub fn len(&self) -> usize {
        self.table.lock().flows.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self, key: &str, now_ms: i64) -> Vec<Label> {
        let table = self.table.lock();
        table.flows.get(key).map_or_else(Vec::new, |f| {
            f.labels
                .iter()
                .filter(|(_, expires)| *expires > now_ms)
                .map(|(l, _)| l.clone())
                .collect()
        })
    }

    fn put(&self, key: String, label: Label, expires_ms: i64) {
        let mut table = self.table.lock();
        let t = &mut *table;
        t.next += 1;
        let stamp = t.next;
        let flow = t.flows.entry(key.clone()).or_insert(Flow {
            labels: Vec::new(),
            stamp,
        });
        flow.stamp = stamp;
        // Expired labels go; the same class and tool is kept once.
        flow.labels.retain(|(_, e)| *e > label.time_ms);
        let full = flow.labels.len() >= MAX_LABELS;
        match flow
            .labels
            .iter_mut()
            .find(|(l, _)| l.class == label.class && l.tool == label.tool)
        {
            Some((_, e)) => *e = (*e).max(expires_ms),
            None if !full => flow.labels.push((label, expires_ms)),
            None => {}
        }
        t.order.push_back((stamp, key));
        // Entries a later change superseded are dropped once they are
        // more than half (in order, so the oldest stay first): amortised,
        // each insert pays for about one, and `order` stays within twice
        // the flows kept.
        if t.order.len() > t.flows.len().saturating_mul(2) + 64 {
            let flows = &t.flows;
            t.order
                .retain(|(s, k)| flows.get(k).is_some_and(|f| f.stamp == *s));
        }
        // Past the bound, the flows changed longest ago are forgotten.
        while t.flows.len() > self.max {
            let Some((stamp, key)) = t.order.pop_front() else {
                break;
            };
            if t.flows.get(&key).is_some_and(|f| f.stamp == stamp) {
                t.flows.remove(&key);
            }
        }
    }
}

impl FlowStore for MemoryFlows {
    fn labels(self: Arc<Self>, key: String, now_ms: i64) -> StoreFuture<Vec<Label>> {
        let labels = self.read(&key, now_ms);
        Box::pin(std::future::ready(Ok(labels)))
    }

    fn add(self: Arc<Self>, key: String, label: Label, expires_ms: i64) -> StoreFuture<()> {
        self.put(key, label, expires_ms);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A class as stored (its label).
pub fn class_of(text: &str) -> Option<FlowClass> {
    FlowClass::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(tool: &str, time_ms: i64) -> Label {
        Label {
            class: FlowClass::Untrusted,
            tool: tool.into(),
            time_ms,
            from: None,
        }
    }

    #[test]
    fn labels_expire_and_are_kept_once_per_class_and_tool() {
        let flows = MemoryFlows::new(10);
        flows.put("a".into(), label("web.fetch", 0), 100);
        flows.put("a".into(), label("web.fetch", 10), 200);
        assert_eq!(flows.read("a", 150).len(), 1);
        assert!(flows.read("a", 250).is_empty());
        assert!(flows.read("b", 0).is_empty());
    }

    #[test]
    fn a_flood_of_flows_keeps_memory_bounded_and_forgets_the_oldest_first() {
        let flows = MemoryFlows::new(100);
        flows.put("first".into(), label("web.fetch", 0), i64::MAX);
        flows.put("kept".into(), label("web.fetch", 0), i64::MAX);
        for i in 0..10_000 {
            // `kept` is changed again now and then: it stays.
            if i % 50 == 0 {
                flows.put("kept".into(), label("web.fetch", i), i64::MAX);
            }
            flows.put(format!("flood {i}"), label("web.fetch", i), i64::MAX);
            assert!(flows.len() <= 100);
            let t = flows.table.lock();
            assert!(t.order.len() <= 2 * t.flows.len() + 64);
            drop(t);
        }
        assert!(flows.read("first", 0).is_empty());
        assert_eq!(flows.read("kept", 0).len(), 1);
        assert_eq!(flows.read("flood 9999", 0).len(), 1);
    }
}
