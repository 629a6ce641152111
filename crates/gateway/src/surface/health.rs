//! Health: whether the process serves (`/healthz`), whether it is ready to
//! take calls (`/readyz`), and a per-upstream status document for
//! operators (`/status`: each upstream and each named endpoint).
//!
//! `/healthz` and `/readyz` are served on the MCP listener without
//! credentials, so they say nothing a stranger may not know: no tool, no
//! upstream name, only counts. `/status` names upstreams and their errors:
//! it belongs on the metrics listener (`toolgate serve --metrics ADDR`).
//!
//! Layer: `surface`.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use crate::gateway::Gateway;

/// How ready the gateway is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Readiness {
    /// Every check passed.
    pub ready: bool,
    /// Enabled upstreams listed and answering.
    pub upstreams_up: usize,
    /// Enabled upstreams failing or never listed.
    pub upstreams_down: usize,
    /// Upstreams kept in the configuration but disabled.
    pub upstreams_disabled: usize,
    /// `ok`, `disabled` (no store), or why rows cannot be written.
    pub audit: String,
    /// `ok`, `not configured`, or why Redis cannot be reached.
    pub redis: String,
}

impl Gateway {
    /// Check every upstream, the audit store and Redis now.
    pub async fn readiness(&self) -> Readiness {
        let status = self.status();
        let disabled = status.iter().filter(|s| !s.enabled).count();
        let up = self.upstreams_up();
        let enabled = status.len() - disabled;
        let audit = match self.audit_sink() {
            None => "disabled".to_owned(),
            Some(store) => store.check().await.map_or_else(
                |e| toolgate_protocol::error::with_causes(&e),
                |()| "ok".to_owned(),
            ),
        };
        let redis = match self.shared_limits() {
            None => "not configured".to_owned(),
            Some(limits) => limits.clone().ping().await.map_or_else(
                |e| toolgate_protocol::error::with_causes(&e),
                |()| "ok".to_owned(),
            ),
        };
        Readiness {
            ready: up == enabled
                && matches!(audit.as_str(), "ok" | "disabled")
                && matches!(redis.as_str(), "ok" | "not configured"),
            upstreams_up: up,
            upstreams_down: enabled - up,
            upstreams_disabled: disabled,
            audit,
            redis,
        }
    }

    /// `GET /healthz` and `GET /readyz`, for the MCP listener
    /// ([`HttpConfig::routes`](toolgate_server::transport::http::HttpConfig::routes)).
    pub fn health_routes(&self) -> axum::Router {
        let gateway = self.clone();
        axum::Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route(
                "/readyz",
                get(move || {
                    let gateway = gateway.clone();
                    async move { ready_response(gateway.readiness().await) }
                }),
            )
    }

    /// `GET /status`: each upstream's state, for operators (the metrics
    /// listener).
    pub fn status_routes(&self) -> axum::Router {
        let gateway = self.clone();
        axum::Router::new().route(
            "/status",
            get(move || {
                let gateway = gateway.clone();
                async move {
                    let upstreams: Vec<UpstreamDoc> = gateway
                        .status()
                        .into_iter()
                        .map(UpstreamDoc::from)
                        .collect();
                    let readiness = gateway.readiness().await;
                    let endpoints = gateway
                        .endpoints()
                        .iter()
                        .map(|e| EndpointDoc::from(e.view()))
                        .collect();
                    json(
                        StatusCode::OK,
                        &StatusDoc {
                            readiness,
                            upstreams,
                            endpoints,
                            last_reload: gateway.last_reload_outcome(),
                        },
                    )
                }
            }),
        )
    }
}

fn ready_response(readiness: Readiness) -> Response {
    let code = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(code, &readiness)
}

fn json(code: StatusCode, body: &impl Serialize) -> Response {
    let text = serde_json::to_string(body).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

#[derive(Serialize)]
struct StatusDoc {
    readiness: Readiness,
    upstreams: Vec<UpstreamDoc>,
    /// The named endpoints (`[endpoints.NAME]`), by name.
    endpoints: Vec<EndpointDoc>,
    /// How the last reload ended: applied, or refused and why.
    last_reload: Option<crate::gateway::LastReload>,
}

/// One endpoint: where it is, how many tools it offers and withholds.
#[derive(Serialize)]
struct EndpointDoc {
    name: String,
    path: String,
    offered: usize,
    withheld: usize,
}

impl From<crate::gateway::EndpointView> for EndpointDoc {
    fn from(v: crate::gateway::EndpointView) -> Self {
        Self {
            name: v.name,
            path: v.path,
            offered: v.tools.len(),
            withheld: v.withheld.len(),
        }
    }
}

#[derive(Serialize)]
struct UpstreamDoc {
    name: String,
    transport: &'static str,
    enabled: bool,
    offered: usize,
    withheld: usize,
    denied: usize,
    error: Option<String>,
}

impl From<crate::gateway::UpstreamStatus> for UpstreamDoc {
    fn from(s: crate::gateway::UpstreamStatus) -> Self {
        Self {
            name: s.name,
            transport: s.transport,
            enabled: s.enabled,
            offered: s.offered,
            withheld: s.withheld,
            denied: s.denied,
            error: s.error,
        }
    }
}
