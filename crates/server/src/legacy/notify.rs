//! List changes and resource updates for a legacy session, as unsolicited
//! notifications.

use std::sync::Arc;

use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use toolgate_protocol::jsonrpc::encode_notification;
use toolgate_protocol::types::methods;

use super::Session;
use crate::Server;
use crate::registry::Change;

/// Forward the server's changes to `session` until it ends.
pub(super) fn forward_changes(server: &Server, session: Arc<Session>) {
    let mut changes = server.inner.bus.subscribe();
    tokio::spawn(async move {
        loop {
            let change = tokio::select! {
                _ = session.ended.cancelled() => break,
                change = changes.recv() => change,
            };
            match change {
                Ok(change) => {
                    if let Some(bytes) = notification(&session, &change) {
                        session.send_unsolicited(bytes);
                    }
                }
                // Fell behind: every list may have changed.
                Err(RecvError::Lagged(_)) => {
                    for change in [
                        Change::ToolsListChanged,
                        Change::PromptsListChanged,
                        Change::ResourcesListChanged,
                    ] {
                        if let Some(bytes) = notification(&session, &change) {
                            session.send_unsolicited(bytes);
                        }
                    }
                }
                Err(RecvError::Closed) => break,
            }
        }
    });
}

fn notification(session: &Session, change: &Change) -> Option<Vec<u8>> {
    let list_changed = |method: &str| Some(encode_notification::<()>(method, None));
    match change {
        Change::ToolsListChanged => list_changed(methods::TOOLS_LIST_CHANGED),
        Change::PromptsListChanged => list_changed(methods::PROMPTS_LIST_CHANGED),
        Change::ResourcesListChanged => list_changed(methods::RESOURCES_LIST_CHANGED),
        Change::ResourceUpdated(uri) if session.is_subscribed(uri) => Some(encode_notification(
            methods::RESOURCE_UPDATED,
            Some(&json!({ "uri": &**uri })),
        )),
        Change::ResourceUpdated(_) => None,
    }
}
