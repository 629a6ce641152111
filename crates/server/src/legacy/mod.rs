//! Serving legacy clients: the initialize-handshake revisions 2025-11-25,
//! 2025-06-18 and 2025-03-26, next to stateless modern service.
//!
//! How a client opens selects its era (spec: versioning, "Backward
//! Compatibility"): a request carrying the modern `_meta` is served
//! statelessly; an `initialize` request opens a legacy session, scoped to
//! the process on stdio and to an `Mcp-Session-Id` on HTTP. Inside a
//! session:
//!
//! - the handshake's capabilities and client info stand in for the
//!   per-request `_meta`, so every tool, prompt and resource runs through
//!   the same pipeline as in the modern era;
//! - a handler that asks for input (an `input_required` ending) is driven
//!   here: each input request goes to the client as a server-initiated
//!   request, and the handler runs again with the answers — the same
//!   handler serves both eras unchanged;
//! - list changes and resource updates travel as unsolicited notifications
//!   (stdout, or the session's HTTP `GET` stream);
//! - `ping`, `logging/setLevel` and `resources/(un)subscribe` are served.

mod driver;
mod notify;
mod session;

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use toolgate_protocol::jsonrpc::{Request, encode_result};
use toolgate_protocol::meta::SERVER_INFO;
use toolgate_protocol::types::{ClientCapabilities, Implementation, LoggingLevel};
use toolgate_protocol::version::{LEGACY_SERVED, is_legacy_served};
use toolgate_protocol::{RequestId, RpcError};

use crate::dispatch::{TransportContext, error_frame};
use crate::exchange::{Frame, Reply};
use crate::{Server, methods};

pub(crate) use session::Session;
#[cfg(feature = "http")]
pub(crate) use session::{InFlight, Sessions, new_session_id};

/// Methods a legacy session passes to the shared pipeline.
const SHARED_METHODS: &[&str] = &[
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
];

/// Whether a request carries the modern per-request `_meta` (and so is
/// served statelessly even inside a legacy session's process).
pub(crate) fn is_modern_request(req: &Request) -> bool {
    toolgate_protocol::meta::declares_protocol_version(req.meta.as_deref())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeParams {
    protocol_version: String,
    #[serde(default)]
    capabilities: Option<Value>,
    #[serde(default)]
    client_info: Option<Value>,
}

impl Server {
    /// Whether this server also serves legacy (initialize-handshake) clients.
    pub fn serves_legacy(&self) -> bool {
        self.inner.config.legacy
    }

    /// Answer `initialize`: negotiate a legacy revision and open a session.
    /// `unsolicited` is where list-change notifications go (stdout on
    /// stdio; on HTTP it is attached later by the session's `GET` stream).
    pub(crate) fn legacy_initialize(
        &self,
        req: &Request,
        id: String,
        subject: Option<String>,
        unsolicited: Option<mpsc::Sender<Vec<u8>>>,
    ) -> Result<(Arc<Session>, Frame), Frame> {
        let value = Value::Object(req.params.clone().unwrap_or_default());
        let params: InitializeParams = serde_json::from_value(value).map_err(|e| {
            error_frame(
                Some(&req.id),
                RpcError::invalid_params(format!("Invalid initialize params: {e}")),
            )
        })?;
        // A version we do not speak (including a modern one, which never
        // belongs in `initialize`) gets our newest legacy revision; the
        // client decides whether it can go on.
        let version = if is_legacy_served(&params.protocol_version) {
            params.protocol_version
        } else {
            LEGACY_SERVED[0].to_owned()
        };
        // Capabilities and client info are read leniently: an odd field in
        // them must not lock a client out, it only loses that field.
        let capabilities = params
            .capabilities
            .and_then(|c| serde_json::from_value::<ClientCapabilities>(c).ok())
            .unwrap_or_default();
        let client_info = params
            .client_info
            .and_then(|c| serde_json::from_value::<Implementation>(c).ok());
        let session = Arc::new(Session::new(
            id,
            version.clone(),
            client_info,
            capabilities,
            subject,
            self.inner.shutdown.child_token(),
        ));
        if let Some(sink) = unsolicited {
            session.attach(sink);
        }
        notify::forward_changes(self, session.clone());
        let mut caps = serde_json::to_value(crate::methods::capabilities(self)).unwrap_or_default();
        if version.as_str() == "2025-03-26" {
            // Completions were announced by the `completions` capability
            // only from 2025-06-18 on; older clients tolerate it either way.
            if let Some(c) = caps.as_object_mut() {
                c.remove("completions");
            }
        }
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": caps,
            "serverInfo": self.inner.info,
        });
        if let Some(instructions) = &self.inner.instructions {
            result["instructions"] = Value::from(instructions.clone());
        }
        tracing::info!(
            session = %session.id,
            version = %session.version,
            client = session.client_info.as_ref().map(|c| c.name.as_str()).unwrap_or("?"),
            "legacy session opened"
        );
        Ok((
            session,
            Frame::Response {
                body: encode_result(&req.id, &result),
                error_code: None,
            },
        ))
    }

    /// Serve one request of a legacy session.
    pub(crate) fn handle_legacy(
        &self,
        session: &Arc<Session>,
        req: Request,
        transport: &TransportContext,
    ) -> Reply {
        let empty = |id: &RequestId| {
            Reply::Done(Frame::Response {
                body: encode_result(id, &Map::new()),
                error_code: None,
            })
        };
        let fail = |id: &RequestId, e: RpcError| Reply::Done(error_frame(Some(id), e));
        match req.method.as_str() {
            "initialize" => fail(
                &req.id,
                RpcError::invalid_request(
                    "this session is already initialized; start a new session to initialize again",
                ),
            ),
            "ping" => empty(&req.id),
            "logging/setLevel" => match uri_or_level::<LoggingLevel>(&req, "level") {
                Ok(level) => {
                    session.set_log_level(level);
                    empty(&req.id)
                }
                Err(e) => fail(&req.id, e),
            },
            "resources/subscribe" | "resources/unsubscribe" if self.inner.resources_enabled => {
                match uri_or_level::<String>(&req, "uri") {
                    Ok(uri) if req.method == "resources/subscribe" => {
                        session.subscribe(&uri);
                        empty(&req.id)
                    }
                    Ok(uri) => {
                        session.unsubscribe(&uri);
                        empty(&req.id)
                    }
                    Err(e) => fail(&req.id, e),
                }
            }
            m if SHARED_METHODS.contains(&m) => {
                driver::drive(self, session.clone(), req, transport)
            }
            _ => fail(&req.id, RpcError::method_not_found(&req.method)),
        }
    }
}

/// Read the one required parameter of a small legacy request.
fn uri_or_level<T: serde::de::DeserializeOwned>(req: &Request, field: &str) -> Result<T, RpcError> {
    let value = req
        .params
        .as_ref()
        .and_then(|p| p.get(field))
        .ok_or_else(|| RpcError::invalid_params(format!("{} needs params.{field}", req.method)))?;
    serde_json::from_value(value.clone()).map_err(|e| {
        RpcError::invalid_params(format!("Invalid {} params.{field}: {e}", req.method))
    })
}

/// Drop what only modern clients read from a result: `resultType`, the
/// caching hints, and the server identity in `_meta` (a legacy client
/// learned it at `initialize`).
pub(crate) fn legacy_shape(result: &mut Map<String, Value>) {
    result.remove("resultType");
    result.remove("ttlMs");
    result.remove("cacheScope");
    let empty_meta = match result.get_mut("_meta") {
        Some(Value::Object(meta)) => {
            meta.remove(SERVER_INFO);
            meta.is_empty()
        }
        _ => false,
    };
    if empty_meta {
        result.remove("_meta");
    }
}

pub(crate) use methods::dispatch as shared_dispatch;
