//! What the `--http` listener serves: the default endpoint at `/mcp` (or
//! the named endpoint that takes that path), every other endpoint at its
//! own path, each with its own token verifier when `[auth]` is set, and
//! the health routes.
//!
//! Layer: `surface`.

use std::net::SocketAddr;
use std::sync::Arc;

use toolgate_server::Server;
use toolgate_server::transport::http::{HttpConfig, Mount};

use crate::config::{AuthConfig, ConfigError};
use crate::gateway::Gateway;

/// The path of the default endpoint.
pub const DEFAULT_PATH: &str = "/mcp";

/// The server at [`DEFAULT_PATH`] and the HTTP settings serving it and
/// every endpoint beside it on `bind`, authenticated by `auth`'s tokens
/// when given.
pub fn http(
    gateway: &Gateway,
    bind: SocketAddr,
    auth: Option<&AuthConfig>,
) -> Result<(Server, HttpConfig), ConfigError> {
    let endpoints = gateway.endpoints();
    let verifier = |path: &str, endpoint: &crate::gateway::Endpoint| {
        let own = endpoint.config();
        auth.map(|a| {
            let audience = a.audience_at(path, own.auth.as_ref());
            a.resource_server_for(&audience).map(Arc::new)
        })
        .transpose()
    };
    let (main, main_auth) = match endpoints.iter().find(|e| e.path() == DEFAULT_PATH) {
        Some(e) => (e.server(), verifier(DEFAULT_PATH, e)?),
        None => (
            gateway.server(),
            auth.map(|a| a.resource_server().map(Arc::new))
                .transpose()?,
        ),
    };
    let mut mounts = Vec::new();
    for e in endpoints.iter().filter(|e| e.path() != DEFAULT_PATH) {
        mounts.push(Mount {
            path: e.path().to_owned(),
            server: e.server(),
            auth: verifier(e.path(), e)?,
        });
    }
    let config = HttpConfig {
        bind,
        auth: main_auth,
        routes: Some(
            gateway
                .health_routes()
                .fallback(not_found(gateway, auth.is_none())),
        ),
        mounts,
        ..Default::default()
    };
    Ok((main, config))
}

/// The answer to a path no endpoint is served at: `404`, naming the
/// endpoints there are when anyone may see them (no `[auth]`: whoever
/// reaches the port can list each endpoint's tools anyway), and nothing
/// more otherwise.
fn not_found(
    gateway: &Gateway,
    open: bool,
) -> impl Fn() -> std::future::Ready<axum::response::Response> + Clone + Send + Sync + 'static {
    let mut paths: Vec<String> = vec![DEFAULT_PATH.to_owned()];
    paths.extend(gateway.endpoints().iter().map(|e| e.path().to_owned()));
    paths.sort();
    paths.dedup();
    move || {
        use axum::response::IntoResponse as _;
        let body = if open {
            serde_json::json!({
                "error": "no MCP endpoint is served at this path",
                "endpoints": paths,
            })
        } else {
            serde_json::json!({"error": "no MCP endpoint is served at this path"})
        };
        let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
        std::future::ready(
            (axum::http::StatusCode::NOT_FOUND, json, body.to_string()).into_response(),
        )
    }
}
