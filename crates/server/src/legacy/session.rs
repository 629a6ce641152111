//! One legacy client's session, and the table of HTTP sessions.
//!
//! A session holds what the `initialize` handshake settled (the negotiated
//! revision, the client's identity and capabilities) and what later legacy
//! requests change (the log level, resource subscriptions). It also routes
//! the client's answers to server-initiated requests back to whoever asked.
//!
//! Idle tracking and the session table serve the HTTP transport, which
//! keeps many sessions; stdio keeps one, so without the `http` feature they
//! go unused.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toolgate_protocol::jsonrpc::Response;
use toolgate_protocol::meta::{PROGRESS_TOKEN, RequestMeta};
use toolgate_protocol::types::{ClientCapabilities, Implementation, LoggingLevel, ProgressToken};
use toolgate_protocol::{RequestId, RpcError};

type Answer = oneshot::Sender<Result<Value, RpcError>>;

/// A legacy client's session.
pub(crate) struct Session {
    /// The `Mcp-Session-Id` (HTTP); empty on stdio, where the process is the session.
    pub(crate) id: String,
    /// The negotiated revision.
    pub(crate) version: String,
    pub(crate) client_info: Option<Implementation>,
    pub(crate) capabilities: ClientCapabilities,
    /// Who opened it (HTTP): the session answers only to the same caller.
    pub(crate) subject: Option<String>,
    initialized: AtomicBool,
    log_level: Mutex<Option<LoggingLevel>>,
    subscriptions: Mutex<HashSet<String>>,
    /// Server-initiated requests waiting for the client's answer.
    waiting: Mutex<HashMap<RequestId, Answer>>,
    next_id: AtomicI64,
    last_seen: Mutex<Instant>,
    /// Requests in flight, for `notifications/cancelled` on HTTP (stdio
    /// keeps its own table for both eras).
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Where messages unrelated to any request go (stdout, or the HTTP GET
    /// stream when one is open).
    unsolicited: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    /// Cancelled when the session ends.
    pub(crate) ended: CancellationToken,
}

impl Session {
    pub(crate) fn new(
        id: String,
        version: String,
        client_info: Option<Implementation>,
        capabilities: ClientCapabilities,
        subject: Option<String>,
        ended: CancellationToken,
    ) -> Self {
        Self {
            id,
            version,
            client_info,
            capabilities,
            subject,
            initialized: AtomicBool::new(false),
            log_level: Mutex::new(None),
            subscriptions: Mutex::default(),
            waiting: Mutex::default(),
            in_flight: Mutex::default(),
            next_id: AtomicI64::new(1),
            last_seen: Mutex::new(Instant::now()),
            unsolicited: Mutex::new(None),
            ended,
        }
    }

    /// The per-request metadata a modern request would carry, rebuilt from
    /// the session and the request's own `_meta.progressToken`.
    pub(crate) fn request_meta(&self, meta: Option<&Value>) -> RequestMeta {
        let progress_token = meta
            .and_then(|m| m.get(PROGRESS_TOKEN))
            .and_then(|t| serde_json::from_value::<ProgressToken>(t.clone()).ok());
        RequestMeta {
            protocol_version: self.version.clone(),
            client_info: self.client_info.clone(),
            client_capabilities: self.capabilities.clone(),
            progress_token,
            log_level: *self.log_level.lock(),
            trace: meta
                .and_then(Value::as_object)
                .and_then(toolgate_protocol::trace::TraceContext::from_meta),
        }
    }

    /// `notifications/initialized` arrived.
    pub(crate) fn mark_initialized(&self) {
        if !self.initialized.swap(true, Ordering::Relaxed) {
            tracing::debug!(session = %self.id, "legacy handshake complete");
        }
    }

    pub(crate) fn set_log_level(&self, level: LoggingLevel) {
        *self.log_level.lock() = Some(level);
    }

    pub(crate) fn subscribe(&self, uri: &str) {
        self.subscriptions.lock().insert(uri.to_owned());
    }

    pub(crate) fn unsubscribe(&self, uri: &str) {
        self.subscriptions.lock().remove(uri);
    }

    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions.lock().contains(uri)
    }

    pub(crate) fn touch(&self) {
        *self.last_seen.lock() = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_seen.lock().elapsed()
    }

    /// Route messages unrelated to a request to `sink` (replacing any earlier one).
    pub(crate) fn attach(&self, sink: mpsc::Sender<Vec<u8>>) {
        *self.unsolicited.lock() = Some(sink);
    }

    /// Stop routing messages unrelated to a request anywhere (the
    /// transport is closing).
    pub(crate) fn detach(&self) {
        *self.unsolicited.lock() = None;
    }

    /// Send a message unrelated to any request. Dropped when nowhere to go
    /// or when the client reads too slowly: list changes are hints, and a
    /// slow reader must not hold the server up.
    pub(crate) fn send_unsolicited(&self, bytes: Vec<u8>) {
        let sink = self.unsolicited.lock().clone();
        if let Some(sink) = sink
            && sink.try_send(bytes).is_err()
        {
            tracing::debug!(session = %self.id, "unsolicited message dropped");
        }
    }

    /// Track request `id` until the returned guard drops; its token fires
    /// when the client cancels the request.
    pub(crate) fn track(self: &Arc<Self>, id: &RequestId) -> (CancellationToken, InFlight) {
        let token = self.ended.child_token();
        self.in_flight.lock().insert(id.clone(), token.clone());
        let guard = InFlight {
            session: self.clone(),
            id: id.clone(),
        };
        (token, guard)
    }

    /// The client cancelled request `id`.
    pub(crate) fn cancel(&self, id: &RequestId) {
        if let Some(token) = self.in_flight.lock().remove(id) {
            token.cancel();
        }
    }

    /// A fresh id for a server-initiated request, and the receiver of its answer.
    pub(crate) fn expect_answer(
        self: &Arc<Self>,
    ) -> (
        RequestId,
        oneshot::Receiver<Result<Value, RpcError>>,
        Waiting,
    ) {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::String(format!("toolgate-{n}"));
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(id.clone(), tx);
        let guard = Waiting {
            session: self.clone(),
            id: id.clone(),
        };
        (id, rx, guard)
    }

    /// The client answered a server-initiated request. Answers nobody waits
    /// for (late, duplicated, invented) are ignored.
    pub(crate) fn deliver(&self, response: Response) {
        let Some(id) = response.id else {
            tracing::debug!(session = %self.id, "a response without an id; ignored");
            return;
        };
        match self.waiting.lock().remove(&id) {
            Some(waiter) => {
                let _ = waiter.send(response.outcome);
            }
            None => tracing::debug!(session = %self.id, %id, "an answer nobody waits for; ignored"),
        }
    }
}

/// Forgets a server-initiated request when its asker goes away, so the
/// table of waiting requests cannot grow with abandoned ones.
pub(crate) struct Waiting {
    session: Arc<Session>,
    id: RequestId,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.session.waiting.lock().remove(&self.id);
    }
}

/// Removes a request from the in-flight table when its response is done.
pub(crate) struct InFlight {
    session: Arc<Session>,
    id: RequestId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.in_flight.lock().remove(&self.id);
    }
}

/// The legacy HTTP sessions of one endpoint.
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    idle: Duration,
    max: usize,
    per_principal: usize,
}

impl Sessions {
    pub(crate) fn new(idle: Duration, max: usize, per_principal: usize) -> Self {
        Self {
            map: Mutex::default(),
            idle,
            max: max.max(1),
            per_principal: per_principal.max(1),
        }
    }

    /// Keep `session`, first ending idle ones. A principal (anonymous
    /// callers count as one) over its own share loses its least recently
    /// used session, so a flood of `initialize` requests ends only the
    /// flooder's sessions; a full table then ends the least recently used
    /// session of all.
    pub(crate) fn insert(&self, session: Arc<Session>) {
        let mut map = self.map.lock();
        let idle = self.idle;
        map.retain(|_, s| {
            let keep = s.idle_for() < idle && !s.ended.is_cancelled();
            if !keep {
                s.ended.cancel();
            }
            keep
        });
        let subject = session.subject.clone();
        loop {
            let own = map.values().filter(|s| s.subject == subject).count();
            let candidates = if own >= self.per_principal {
                Some(true)
            } else if map.len() >= self.max {
                Some(own > 0)
            } else {
                None
            };
            let Some(only_own) = candidates else {
                break;
            };
            let Some(oldest) = map
                .iter()
                .filter(|(_, s)| !only_own || s.subject == subject)
                .max_by_key(|(_, s)| s.idle_for())
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(s) = map.remove(&oldest) {
                tracing::info!(session = %oldest, "legacy session limit reached; ending the least recently used");
                s.ended.cancel();
            }
        }
        map.insert(session.id.clone(), session);
    }

    /// The live session `id`, if it belongs to `subject`.
    pub(crate) fn get(&self, id: &str, subject: Option<&str>) -> Option<Arc<Session>> {
        let mut map = self.map.lock();
        let session = map.get(id)?.clone();
        if session.ended.is_cancelled() || session.idle_for() >= self.idle {
            map.remove(id);
            session.ended.cancel();
            return None;
        }
        if session.subject.as_deref() != subject {
            return None;
        }
        session.touch();
        Some(session)
    }

    /// End session `id` (HTTP `DELETE`). Whether it existed for `subject`.
    pub(crate) fn remove(&self, id: &str, subject: Option<&str>) -> bool {
        let mut map = self.map.lock();
        match map.get(id) {
            Some(s) if s.subject.as_deref() == subject => {
                s.ended.cancel();
                map.remove(id);
                true
            }
            _ => false,
        }
    }
}

/// A session id: 128 random bits as hex, visible ASCII as the transport asks.
pub(crate) fn new_session_id() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, subject: Option<&str>) -> Arc<Session> {
        Arc::new(Session::new(
            id.into(),
            "2025-11-25".into(),
            None,
            ClientCapabilities::default(),
            subject.map(str::to_owned),
            CancellationToken::new(),
        ))
    }

    #[test]
    fn a_full_table_ends_the_least_recently_used_session() {
        let sessions = Sessions::new(Duration::from_secs(60), 2, 8);
        let (a, b, c) = (session("a", None), session("b", None), session("c", None));
        sessions.insert(a.clone());
        std::thread::sleep(Duration::from_millis(5));
        sessions.insert(b.clone());
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            sessions.get("a", None).is_some(),
            "touching a makes b the oldest"
        );
        sessions.insert(c);
        assert!(b.ended.is_cancelled());
        assert!(sessions.get("b", None).is_none());
        assert!(sessions.get("a", None).is_some() && sessions.get("c", None).is_some());
    }

    #[test]
    fn a_flood_from_one_principal_ends_only_its_own_sessions() {
        let sessions = Sessions::new(Duration::from_secs(60), 4, 2);
        let alice = session("alice-1", Some("alice"));
        sessions.insert(alice.clone());
        for i in 0..20 {
            sessions.insert(session(&format!("anon-{i}"), None));
        }
        assert!(!alice.ended.is_cancelled());
        assert!(sessions.get("alice-1", Some("alice")).is_some());
        // The anonymous flood kept only its own share, the newest.
        assert!(sessions.get("anon-19", None).is_some());
        assert!(sessions.get("anon-18", None).is_some());
        assert!(sessions.get("anon-17", None).is_none());
    }

    #[test]
    fn idle_and_foreign_sessions_are_not_found() {
        let sessions = Sessions::new(Duration::ZERO, 8, 8);
        let idle = session("idle", None);
        sessions.insert(idle.clone());
        assert!(sessions.get("idle", None).is_none());
        assert!(idle.ended.is_cancelled());

        let sessions = Sessions::new(Duration::from_secs(60), 8, 8);
        sessions.insert(session("mine", Some("alice")));
        assert!(sessions.get("mine", Some("mallory")).is_none());
        assert!(sessions.get("mine", None).is_none());
        assert!(!sessions.remove("mine", Some("mallory")));
        assert!(sessions.get("mine", Some("alice")).is_some());
        assert!(sessions.remove("mine", Some("alice")));
    }

    #[test]
    fn answers_reach_their_asker_once_and_abandoned_asks_are_forgotten() {
        let s = session("s", None);
        let (id, mut rx, guard) = s.expect_answer();
        s.deliver(Response {
            id: Some(id.clone()),
            outcome: Ok(Value::Bool(true)),
        });
        assert_eq!(rx.try_recv().unwrap().unwrap(), Value::Bool(true));
        drop(guard);
        let (id2, _rx2, guard2) = s.expect_answer();
        assert_ne!(id, id2);
        drop(guard2);
        assert!(s.waiting.lock().is_empty());
    }
}
