//! Following `notifications/tools/list_changed` on a `subscriptions/listen`
//! stream: each one invalidates the cached tool list at once, so the next
//! listing is fresh whatever the TTL said.

use std::time::Duration;
use toolgate_protocol::methods::{Method, SubscriptionsListen};

use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::Client;
use crate::transport::Inbound;

/// A running watch; dropping it closes the stream.
pub struct ToolWatch {
    task: JoinHandle<()>,
}

impl Drop for ToolWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Client {
    /// Open a `subscriptions/listen` stream for `toolsListChanged` and keep
    /// it open (reopening with backoff if it drops, and invalidating on each
    /// reopen, since changes may have been missed meanwhile).
    pub fn watch_tools(&self) -> ToolWatch {
        self.watch_tools_with(|| {})
    }

    /// [`Client::watch_tools`], calling `on_change` after each change
    /// notification, and whenever changes may have been missed: when the
    /// stream is acknowledged (changes before it opened) and when it
    /// drops. A program that mirrors the tool list re-lists then.
    pub fn watch_tools_with(&self, on_change: impl Fn() + Send + Sync + 'static) -> ToolWatch {
        let client = self.clone();
        let task = tokio::spawn(async move {
            let mut backoff = Duration::from_millis(250);
            loop {
                let mut params = Map::new();
                params.insert("notifications".into(), json!({"toolsListChanged": true}));
                let outgoing =
                    client.outgoing(<SubscriptionsListen as Method>::NAME, params, Vec::new());
                match client.transport().send(outgoing).await {
                    Ok(mut pending) => {
                        while let Some(Ok(message)) = pending.next().await {
                            match message {
                                Inbound::Notification(n) => {
                                    let method =
                                        n.get("method").and_then(Value::as_str).unwrap_or_default();
                                    if method == "notifications/subscriptions/acknowledged" {
                                        backoff = Duration::from_millis(250);
                                        // Changes before the stream was open were missed.
                                        client.forget_tools();
                                        on_change();
                                    } else if method == "notifications/tools/list_changed" {
                                        tracing::debug!("tool list changed; cache invalidated");
                                        client.forget_tools();
                                        on_change();
                                    }
                                }
                                // The server ended the subscription.
                                Inbound::Response(_) => break,
                            }
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "could not open subscriptions/listen"),
                }
                if client.is_legacy().await.unwrap_or(false)
                    && let Some(mut session) = client.transport().session_notifications()
                {
                    // A legacy server has no listen stream: it announces
                    // changes on its session, unasked.
                    client.forget_tools();
                    on_change();
                    loop {
                        match session.recv().await {
                            Ok(n) if n["method"] == "notifications/tools/list_changed" => {}
                            Ok(_) => continue,
                            // Missed some: one of them may have been a change.
                            Err(RecvError::Lagged(_)) => {}
                            Err(RecvError::Closed) => break,
                        }
                        tracing::debug!("tool list changed; cache invalidated");
                        client.forget_tools();
                        on_change();
                    }
                }
                client.forget_tools();
                on_change();
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        });
        ToolWatch { task }
    }
}
