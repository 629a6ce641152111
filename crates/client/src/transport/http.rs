//! Streamable HTTP: each request is a POST; the answer is JSON or an SSE stream.

use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use toolgate_protocol::header::encode_header_value;

use super::{Inbound, Outgoing, Pending, SendFuture, Transport, TransportKind};
use crate::ClientError;

/// Settings of the HTTP transport.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// `Authorization: Bearer …`.
    pub bearer_token: Option<String>,
    /// Extra headers on every request.
    pub headers: Vec<(String, String)>,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Option<Duration>,
}

/// The Streamable HTTP transport.
pub struct HttpTransport {
    url: String,
    client: reqwest::Client,
    options: HttpOptions,
    /// The legacy session, once a legacy server assigned one.
    session: std::sync::Mutex<Option<String>>,
}

impl HttpTransport {
    /// A transport for the MCP endpoint at `url`.
    pub fn new(url: impl Into<String>, options: HttpOptions) -> Result<Self, ClientError> {
        // TLS through rustls with the ring provider (pure Rust and C, no
        // cmake); installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout.unwrap_or(Duration::from_secs(10)))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(Self {
            url: url.into(),
            client,
            options,
            session: std::sync::Mutex::new(None),
        })
    }
}

impl Transport for HttpTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Http
    }

    fn auth_scope(&self) -> String {
        // Never keep the token itself around in cache keys.
        self.options
            .bearer_token
            .as_ref()
            .map_or_else(String::new, |t| {
                let digest = Sha256::digest(t.as_bytes());
                digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
            })
    }

    fn notify(&self, body: Vec<u8>, legacy: Option<String>) -> super::NotifyFuture<'_> {
        Box::pin(async move {
            let mut builder = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            if let Some(version) = &legacy {
                builder = builder.header("mcp-protocol-version", version);
            }
            if let Some(session) = self.session() {
                builder = builder.header("mcp-session-id", session);
            }
            let response = builder
                .body(body)
                .send()
                .await
                .map_err(|e| ClientError::Transport(e.to_string()))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(ClientError::Transport(format!(
                    "a notification was refused with HTTP {}",
                    response.status()
                )))
            }
        })
    }

    fn send(&self, request: Outgoing) -> SendFuture<'_> {
        Box::pin(async move {
            let version = request
                .legacy
                .clone()
                .unwrap_or_else(|| request.version.clone());
            let mut builder = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", &version)
                .header("mcp-method", &request.method);
            if request.legacy.is_some() {
                if let Some(session) = self.session() {
                    builder = builder.header("mcp-session-id", session);
                }
            }
            if let Some(name) = &request.name {
                builder = builder.header("mcp-name", encode_header_value(name).as_ref());
            }
            for (k, v) in request.headers.iter().chain(self.options.headers.iter()) {
                builder = builder.header(k.as_str(), v.as_str());
            }
            if let Some(token) = &self.options.bearer_token {
                builder = builder.bearer_auth(token);
            }
            let response = builder
                .body(request.body)
                .send()
                .await
                .map_err(|e| ClientError::Transport(format!("POST {}: {e}", self.url)))?;
            let status = response.status();
            if let Some(session) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(session.to_owned());
            }
            let is_sse = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|ct| ct.starts_with("text/event-stream"));
            let (tx, rx) = mpsc::channel(64);
            if is_sse {
                let task = tokio::spawn(read_sse(response, tx));
                return Ok(Pending {
                    rx,
                    on_drop: Some(Box::new(move || task.abort())),
                });
            }
            let bytes = response
                .bytes()
                .await
                .map_err(|e| ClientError::Transport(e.to_string()))?;
            let value: Value = serde_json::from_slice(&bytes).map_err(|_| {
                let shown: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
                if status.is_success() {
                    ClientError::InvalidResponse(format!(
                        "HTTP {status} with a body that is not JSON: {shown:?}"
                    ))
                } else {
                    ClientError::Transport(format!("HTTP {status}: {shown:?}"))
                }
            })?;
            let _ = tx.send(Ok(Inbound::Response(value))).await;
            Ok(Pending { rx, on_drop: None })
        })
    }
}

impl HttpTransport {
    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Read an SSE body, forwarding each `data:` event.
async fn read_sse(response: reqwest::Response, tx: mpsc::Sender<Result<Inbound, ClientError>>) {
    let mut stream = response.bytes_stream();
    let mut buffer = BytesMut::new();
    let mut data = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                let _ = tx
                    .send(Err(ClientError::Transport(format!(
                        "the event stream broke: {e}"
                    ))))
                    .await;
                return;
            }
        };
        buffer.extend_from_slice(&chunk);
        while let Some(pos) = buffer.iter().position(|b| *b == b'\n') {
            let line = buffer.split_to(pos + 1);
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !data.is_empty() {
                    let event = std::mem::take(&mut data);
                    let inbound = match serde_json::from_str::<Value>(&event) {
                        Ok(v) if v.get("method").is_some() && v.get("id").is_none() => {
                            Ok(Inbound::Notification(v))
                        }
                        Ok(v) => Ok(Inbound::Response(v)),
                        Err(e) => Err(ClientError::InvalidResponse(format!(
                            "an event is not JSON: {e}"
                        ))),
                    };
                    let last = matches!(inbound, Ok(Inbound::Response(_)));
                    if tx.send(inbound).await.is_err() || last {
                        return;
                    }
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
            // Comments (keep-alives) and other fields are ignored.
        }
    }
}
