//! Supervision: each upstream's connections followed for tool-list
//! changes, re-listed when they change, and restarted with backoff after
//! failures.
//!
//! Layer: `gateway`.

use std::sync::Arc;

use super::{Gateway, MIN_RETRY};
use crate::call::upstream::Upstream;

impl Gateway {
    /// Follow every new connection of slot `i` for tool-list changes.
    /// (The hook holds the gateway; `stop` removes it, ending the cycle.)
    pub(super) fn watch_connections(&self, i: usize, upstream: &Upstream) {
        let watcher = self.clone();
        upstream.on_start(Some(Arc::new(move |client: &toolgate_client::Client| {
            watcher.follow(i, client);
        })));
    }

    /// Follow a new connection to upstream `i` for tool-list changes.
    pub(super) fn follow(&self, i: usize, client: &toolgate_client::Client) {
        let followed_before = self.watches.lock().contains_key(&i);
        if followed_before && let Some(u) = self.ups().get(i) {
            self.metrics.restarted(&u.config.name);
        }
        let gateway = self.clone();
        let watch = client.watch_tools_with(move || {
            let gateway = gateway.clone();
            tokio::spawn(async move { gateway.refresh(i).await });
        });
        self.watches.lock().insert(i, watch);
    }

    /// Re-list upstream `i` and bring the offer in step.
    pub(crate) async fn refresh(&self, i: usize) {
        let Some(upstream) = self.ups().get(i).cloned() else {
            return;
        };
        if self.retired.read().contains(&i) {
            return;
        }
        match upstream.list().await {
            Ok(tools) => self.apply(i, &tools),
            Err(e) => {
                tracing::warn!(error = %e, "re-listing failed; keeping the tools offered");
                return;
            }
        }
        self.refresh_others(i).await;
        self.publish_hints();
    }

    /// Bring slot `i`'s upstream back after failures: after each failure
    /// (or a failed start), wait out the backoff and re-list, which
    /// restarts the upstream; its tools return when it answers. A
    /// supervisor the slot had before (an upstream a reload replaced) ends.
    pub(super) fn supervise(&self, i: usize) {
        let Some(upstream) = self.ups().get(i).cloned() else {
            return;
        };
        let gateway = self.clone();
        let task = tokio::spawn(async move {
            loop {
                if upstream.is_connected() {
                    upstream.failure().await;
                }
                // At least a moment between attempts, whatever the
                // configured backoff: a dead upstream is never spun on.
                let wait = upstream.backoff().unwrap_or_default();
                tokio::time::sleep(wait.max(MIN_RETRY)).await;
                gateway.refresh(i).await;
            }
        });
        let before = self.supervisors.lock().insert(i, task.abort_handle());
        if let Some(before) = before {
            before.abort();
        }
    }
}
