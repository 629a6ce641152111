//! What the `--http` listener serves: the default endpoint at `/mcp` (or
//! the named endpoint that takes that path), every other endpoint at its
//! own path, each with its own token verifier when `[auth]` is set, and
//! the health routes.
//!
//! Layer: `surface`.

use std::net::SocketAddr;
use std::sync::Arc;

use toolgate_server::Server;
use toolgate_server::transport::http::{HttpConfig, Mount, Mounts};

use crate::config::{AuthConfig, ConfigError};
use crate::gateway::{Endpoint, Gateway};

pub use crate::config::DEFAULT_PATH;

/// The server at [`DEFAULT_PATH`] and the HTTP settings serving it and
/// every endpoint beside it on `bind`, authenticated by `auth`'s tokens
/// when given. The endpoints a reload adds are served from then on, those
/// it removes no longer (calls in flight on them finish).
pub fn http(
    gateway: &Gateway,
    bind: SocketAddr,
    auth: Option<&AuthConfig>,
) -> Result<(Server, HttpConfig), ConfigError> {
    let endpoints = gateway.endpoints();
    let (main, main_auth) = match endpoints.iter().find(|e| e.path() == DEFAULT_PATH) {
        Some(e) => (e.server(), verifier(auth, e)?),
        None => (
            gateway.server(),
            auth.map(|a| a.resource_server().map(Arc::new))
                .transpose()?,
        ),
    };
    let mounts = Mounts::from(mounts_of(&endpoints, auth, &[])?);
    let table = mounts.clone();
    let auth_then = auth.cloned();
    gateway.on_endpoints_changed(Box::new(move |next| {
        let list = mounts_of(next, auth_then.as_ref(), &table.get())?;
        table
            .set(list)
            .map_err(|e| ConfigError::because("[endpoints] cannot be served", e))
    }));
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

/// The token verifier of `endpoint`, for its own URI (audience).
fn verifier(
    auth: Option<&AuthConfig>,
    endpoint: &Endpoint,
) -> Result<Option<Arc<toolgate_server::ResourceServer>>, ConfigError> {
    let own = endpoint.config();
    auth.map(|a| {
        let audience = a.audience_at(endpoint.path(), own.auth.as_ref());
        a.resource_server_for(&audience).map(Arc::new)
    })
    .transpose()
}

/// The mounts serving `endpoints` (but the one at [`DEFAULT_PATH`]): an
/// endpoint already in `current` keeps its mount, so its sessions live on.
fn mounts_of(
    endpoints: &[Arc<Endpoint>],
    auth: Option<&AuthConfig>,
    current: &[Mount],
) -> Result<Vec<Mount>, ConfigError> {
    endpoints
        .iter()
        .filter(|e| e.path() != DEFAULT_PATH)
        .map(|e| {
            let server = e.server();
            match current
                .iter()
                .find(|m| m.path == e.path() && m.server.same(&server))
            {
                Some(m) => Ok(m.clone()),
                None => Ok(Mount {
                    path: e.path().to_owned(),
                    server,
                    auth: verifier(auth, e)?,
                }),
            }
        })
        .collect()
}

/// The answer to a path no endpoint is served at: `404`, naming the
/// endpoints there are now when anyone may see them (no `[auth]`: whoever
/// reaches the port can list each endpoint's tools anyway), and nothing
/// more otherwise.
fn not_found(
    gateway: &Gateway,
    open: bool,
) -> impl Fn() -> std::future::Ready<axum::response::Response> + Clone + Send + Sync + 'static {
    let gateway = gateway.clone();
    move || {
        use axum::response::IntoResponse as _;
        let body = if open {
            let mut paths: Vec<String> = vec![DEFAULT_PATH.to_owned()];
            paths.extend(gateway.endpoints().iter().map(|e| e.path().to_owned()));
            paths.sort();
            paths.dedup();
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
