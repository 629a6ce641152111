//! One stream of JSON-RPC messages from a server, routed: what the stdio
//! transport and the 2024-11-05 HTTP+SSE transport share.
//!
//! Each message the server sends is a response (to the request with its
//! id), a notification (to the request named by its `progressToken`,
//! subscription id or, for `notifications/cancelled`, `requestId`; else to
//! the session's followers), or a request of the server's own (answered in
//! the background by the [`ServerRequestHandler`], at most
//! [`Limits::max_concurrent_server_requests`] at once). Whatever the client
//! writes back goes to one queue, in order; the transport drains it.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{Semaphore, broadcast, mpsc};
use toolgate_protocol::RequestId;
use toolgate_protocol::jsonrpc::encode_notification;
use toolgate_protocol::methods::{Method, Ping};

use super::{Inbound, Limits, Response, ServerRequestHandler};
use crate::ClientError;

/// Session notifications kept for a follower that fell behind (it then
/// learns it missed some, and re-lists).
const SESSION_NOTIFICATIONS: usize = 64;

type Sender = mpsc::Sender<Result<Inbound, ClientError>>;

/// The routes of one message stream (cheap to clone: clones share them).
#[derive(Clone)]
pub(crate) struct Router {
    routes: Arc<Mutex<HashMap<RequestId, Sender>>>,
    requests: Arc<Mutex<Option<ServerRequestHandler>>>,
    session: broadcast::Sender<Value>,
    /// One permit per server request being answered.
    answering: Arc<Semaphore>,
    answer_slots: u32,
    max_concurrent: usize,
    /// Where the client's messages go, in order.
    writer: mpsc::Sender<Vec<u8>>,
}

impl Router {
    /// Routes whose answers go to `writer`.
    pub(crate) fn new(writer: mpsc::Sender<Vec<u8>>, limits: &Limits) -> Self {
        let answer_slots = u32::try_from(limits.max_concurrent_server_requests.max(1))
            .unwrap_or(u32::MAX)
            .min(Semaphore::MAX_PERMITS as u32);
        Self {
            routes: Arc::default(),
            requests: Arc::default(),
            session: broadcast::channel(SESSION_NOTIFICATIONS).0,
            answering: Arc::new(Semaphore::new(answer_slots as usize)),
            answer_slots,
            max_concurrent: limits.max_concurrent_server_requests,
            writer,
        }
    }

    /// Session notifications go to `session` (the transport's own
    /// followers) instead.
    // Without the `http` feature, only the HTTP transport makes these.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn notifying(mut self, session: broadcast::Sender<Value>) -> Self {
        self.session = session;
        self
    }

    /// Queue a message for the server; `false` when nothing drains the
    /// queue any more.
    pub(crate) async fn write(&self, bytes: Vec<u8>) -> bool {
        self.writer.send(bytes).await.is_ok()
    }

    /// Who answers the server's requests.
    pub(crate) fn on_server_request(&self, handler: ServerRequestHandler) {
        *self.requests.lock() = Some(handler);
    }

    /// The session's notifications (those of no request).
    pub(crate) fn session_notifications(&self) -> broadcast::Receiver<Value> {
        self.session.subscribe()
    }

    /// Resolves once every server request read so far has its answer
    /// queued, ahead of whatever the client writes next.
    pub(crate) async fn server_requests_answered(&self) -> Result<(), ClientError> {
        let all = self
            .answering
            .acquire_many(self.answer_slots)
            .await
            .map_err(|_| ClientError::ServerExited("the reader stopped".into()))?;
        drop(all);
        Ok(())
    }

    /// Expect messages for the request `id`.
    pub(crate) fn expect(&self, id: RequestId) -> mpsc::Receiver<Result<Inbound, ClientError>> {
        let (tx, rx) = mpsc::channel(64);
        self.routes.lock().insert(id, tx);
        rx
    }

    /// Stop expecting messages for `id` (it was never sent).
    pub(crate) fn forget(&self, id: &RequestId) {
        self.routes.lock().remove(id);
    }

    /// What dropping the request `id` before its response does: forget it
    /// and tell the server, with `notifications/cancelled`.
    pub(crate) fn cancel_on_drop(&self, id: RequestId) -> Box<dyn FnOnce() + Send> {
        let (routes, writer) = (self.routes.clone(), self.writer.clone());
        Box::new(move || {
            if routes.lock().remove(&id).is_some() {
                let params = json!({"requestId": id, "reason": "cancelled by the client"});
                let _ = writer.try_send(encode_notification(
                    "notifications/cancelled",
                    Some(&params),
                ));
            }
        })
    }

    /// Fail every pending request with `error()`.
    pub(crate) async fn fail_all(&self, error: impl Fn() -> ClientError) {
        let pending: Vec<_> = self.routes.lock().drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(error())).await;
        }
    }

    /// Route one message from the server.
    pub(crate) async fn dispatch(&self, value: Value) {
        if let (Some(method), Some(id)) = (
            value.get("method").and_then(Value::as_str),
            value.get("id").and_then(RequestId::from_value),
        ) {
            self.answer(method.to_owned(), id, &value).await;
            return;
        }
        let target = if value.get("method").is_some() {
            value
                .pointer("/params/progressToken")
                .or_else(|| value.pointer("/params/_meta/io.modelcontextprotocol~1subscriptionId"))
                .or_else(|| {
                    (value["method"] == "notifications/cancelled")
                        .then(|| value.pointer("/params/requestId"))
                        .flatten()
                })
                .and_then(RequestId::from_value)
                .map(|id| (id, Inbound::Notification(value.clone())))
        } else {
            value
                .get("id")
                .and_then(RequestId::from_value)
                .map(|id| (id, Inbound::Response(Response::from_value(value.clone()))))
        };
        match target {
            Some((id, inbound)) => {
                // A response ends its request: forget the route first, so
                // dropping the request later cancels nothing.
                let sender = match inbound {
                    Inbound::Response(_) => self.routes.lock().remove(&id),
                    Inbound::Notification(_) => self.routes.lock().get(&id).cloned(),
                };
                match sender {
                    Some(tx) => {
                        let _ = tx.send(Ok(inbound)).await;
                    }
                    None => tracing::debug!(%id, "a message for a request no longer pending"),
                }
            }
            // A notification of the session (a legacy server's list
            // changes): to whoever follows them; nobody may.
            None if value.get("method").is_some() => {
                let _ = self.session.send(value);
            }
            None => tracing::debug!(message = %value, "an unrouted message from the server"),
        }
    }

    /// Answer a server's request (ping, roots, sampling, elicitation) in
    /// the background; over the limit it is refused at once, and the
    /// refusal awaited, so a flood slows the server down.
    async fn answer(&self, method: String, id: RequestId, value: &Value) {
        let Ok(permit) = self.answering.clone().try_acquire_owned() else {
            let refusal = super::busy(self.max_concurrent);
            let bytes = toolgate_protocol::jsonrpc::encode_error(Some(&id), &refusal);
            let _ = self.writer.send(bytes).await;
            return;
        };
        let handler = self.requests.lock().clone();
        let params = value.get("params").cloned().unwrap_or(Value::Null);
        let writer = self.writer.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let outcome = match &handler {
                _ if method == Ping::NAME => Ok(json!({})),
                Some(h) => h(method.clone(), params, None).await,
                None => Err(toolgate_protocol::RpcError::method_not_found(&method)),
            };
            let bytes = match outcome {
                Ok(result) => toolgate_protocol::jsonrpc::encode_result(&id, &result),
                Err(error) => toolgate_protocol::jsonrpc::encode_error(Some(&id), &error),
            };
            let _ = writer.send(bytes).await;
        });
    }
}
