//! Which revision a server speaks: a `server/discover` probe, and the
//! `initialize` handshake when the server is of an older revision.

use super::*;
use toolgate_protocol::methods::{Method, Ping};

impl Client {
    /// The server's era, detected on first use and then kept: a
    /// `server/discover` probe; a result or a recognized modern error means
    /// modern, anything else (another error, or no answer within the probe
    /// timeout) means legacy, and the initialize handshake follows.
    pub(super) async fn era(&self) -> Result<Era, ClientError> {
        if let Some(era) = self.inner.era.get() {
            return Ok(era.clone());
        }
        // Boxed: detection is a large future, needed once, and every call's
        // future would otherwise carry (and copy) its size.
        Box::pin(self.inner.era.get_or_try_init(|| self.detect_era()))
            .await
            .cloned()
    }

    /// Whether the server speaks a legacy (initialize-handshake) revision.
    pub async fn is_legacy(&self) -> Result<bool, ClientError> {
        Ok(matches!(self.era().await?, Era::Legacy { .. }))
    }

    /// A legacy server that uses roots asks for them right after
    /// `notifications/initialized`, outside any request, and serves calls
    /// against the roots it has — none yet, if a call overtakes its
    /// question. A `ping` answered means the server has read
    /// `initialized` (and written any question it asks there) before it;
    /// once those questions are answered, in order ahead of the first call,
    /// the call finds the roots. Bounded by the probe timeout; a server that
    /// does not answer `ping` costs only that.
    async fn settle_roots(&self, era: &Era) {
        let bound = self.inner.probe_timeout.min(self.inner.timeout);
        let options = CallOptions {
            timeout: Some(bound),
            ..Default::default()
        };
        if let Err(e) = self
            .send_in(era, Ping::NAME, &Map::new(), Vec::new(), &options)
            .await
        {
            tracing::debug!(server = %self.inner.name, error = %e, "ping after initialized");
        }
        let answered = self.transport.server_requests_answered();
        if tokio::time::timeout(bound, answered).await.is_err() {
            tracing::debug!(server = %self.inner.name, "questions after initialized still unanswered; going on");
        }
    }

    async fn detect_era(&self) -> Result<Era, ClientError> {
        let probe = CallOptions {
            timeout: Some(self.inner.probe_timeout.min(self.inner.timeout)),
            progress: None,
            ..Default::default()
        };
        // An HTTP+SSE endpoint is a 2024-11-05 server's: it knows only the
        // handshake.
        if self.transport.kind() == TransportKind::Sse {
            return self.handshake().await;
        }
        match self
            .send_in(
                &Era::Modern,
                toolgate_protocol::methods::Discover::NAME,
                &Map::new(),
                Vec::new(),
                &probe,
            )
            .await
            .and_then(Answer::into_value)
        {
            Ok(result) if result.get("supportedVersions").is_some_and(Value::is_array) => {
                return Ok(Era::Modern);
            }
            // A reply that is no DiscoverResult (some legacy servers answer
            // any request with an empty result) is not evidence of a modern
            // server.
            Ok(_) => {
                tracing::info!(server = %self.inner.name, "server/discover answered without a DiscoverResult; trying the initialize handshake")
            }
            // On HTTP a JSON-RPC "method not found" body comes from a modern
            // endpoint (a legacy one refuses session-less requests first); on
            // stdio it is what legacy servers commonly answer, so it is not
            // evidence there.
            Err(ClientError::Protocol(e))
                if e.is_modern_protocol_error()
                    || (e.code == codes::METHOD_NOT_FOUND
                        && self.transport.kind() == TransportKind::Http) =>
            {
                return Ok(Era::Modern);
            }
            Err(e @ ClientError::ServerExited(_)) => return Err(e),
            // Over HTTP a timeout, a refused connection or an oversized reply
            // says nothing about the era (the spec's HTTP fallback is keyed
            // to a 400 body); trying `initialize` would only hide the failure.
            // Over stdio the spec counts silence as a legacy server, so a
            // timeout falls back there, and a second silence is reported as
            // the timeout it is.
            Err(
                e @ (ClientError::Timeout(_)
                | ClientError::Unreachable { .. }
                | ClientError::LimitExceeded { .. }),
            ) if self.transport.kind() == TransportKind::Http => return Err(e),
            Err(e) => {
                tracing::info!(server = %self.inner.name, probe = %e, "not a modern server; trying the initialize handshake")
            }
        }
        self.handshake().await
    }

    /// The legacy `initialize` handshake.
    async fn handshake(&self) -> Result<Era, ClientError> {
        let mut params = Map::new();
        params.insert("protocolVersion".into(), Value::from(LEGACY_SPOKEN[0]));
        params.insert(
            "capabilities".into(),
            serde_json::to_value(&self.inner.capabilities).unwrap_or_else(|_| json!({})),
        );
        params.insert(
            "clientInfo".into(),
            serde_json::to_value(&self.inner.info).unwrap_or(Value::Null),
        );
        let opening = Era::Legacy {
            version: LEGACY_SPOKEN[0].to_owned(),
            init: Value::Null,
        };
        let init = self
            .send_in(
                &opening,
                "initialize",
                &params,
                Vec::new(),
                &CallOptions::default(),
            )
            .await?
            .into_value()?;
        let version = init
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !LEGACY_SPOKEN.contains(&version.as_str()) {
            return Err(ClientError::NoCommonVersion {
                server: vec![version],
                client: MODERN_VERSIONS
                    .iter()
                    .chain(LEGACY_SPOKEN)
                    .map(|v| (*v).to_owned())
                    .collect(),
            });
        }
        let initialized = toolgate_protocol::jsonrpc::encode_notification::<Value>(
            "notifications/initialized",
            None,
        );
        self.transport
            .notify(initialized, Some(version.clone()))
            .await?;
        self.transport.legacy_session_started(&version).await?;
        let era = Era::Legacy { version, init };
        if self.inner.capabilities.roots.is_some() {
            self.settle_roots(&era).await;
        }
        Ok(era)
    }
}
