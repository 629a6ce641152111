//! Peer gateways for the side-by-side rows, started as their own projects
//! document: IBM's ContextForge (PyPI `mcp-contextforge-gateway`) in front
//! of the same upstream toolgate server the toolgate gateway fronts.
//!
//! ContextForge keeps its registry in SQLite (a scratch directory per
//! start), asks a bearer token of every caller (signed by its own token
//! script, with the secret it was started with) and serves every
//! registered tool on its `/mcp` endpoint, named `<gateway>-<tool>` with
//! underscores as hyphens, to initialize-handshake clients without a
//! session.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

use crate::process::{Server, free_addr};

/// What the upstream's `test_simple_text` is called behind ContextForge.
pub const CONTEXTFORGE_TOOL: &str = "up-test-simple-text";

/// The secret its tokens are signed with: a bench-only value, since the
/// peer listens on loopback for the length of one row.
const SECRET: &str = "toolgate-bench-only-0123456789abcdef0123456789abcdef";

/// ContextForge's settings for a quiet, local, authenticated instance:
/// no admin UI, plugins, telemetry or rate limits, warnings only, the
/// registry in `dir`.
fn settings(dir: &Path) -> Vec<(&'static str, String)> {
    let db = format!("sqlite:///{}", dir.join("mcp.db").display());
    [
        ("DATABASE_URL", db.as_str()),
        ("JWT_SECRET_KEY", SECRET),
        ("AUTH_ENCRYPTION_SECRET", SECRET),
        ("AUTH_REQUIRED", "true"),
        ("MCPGATEWAY_UI_ENABLED", "false"),
        ("MCPGATEWAY_ADMIN_API_ENABLED", "true"),
        ("PLATFORM_ADMIN_PASSWORD", "Bench-only-Passw0rd-1234"),
        ("BASIC_AUTH_PASSWORD", "Bench-only-Passw0rd-1234"),
        // The upstream is on loopback, which its SSRF guard refuses by default.
        ("SSRF_PROTECTION_ENABLED", "false"),
        ("LOG_LEVEL", "WARNING"),
        ("PLUGINS_ENABLED", "false"),
        ("OBSERVABILITY_ENABLED", "false"),
        ("CACHE_TYPE", "memory"),
        // Its per-minute limits would refuse most of the load: the toolgate
        // gateway row has none either.
        ("RATE_LIMITING_ENABLED", "false"),
        ("TOOL_RATE_LIMIT", "1000000000"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_owned()))
    .collect()
}

/// Start ContextForge from the virtual environment `venv`, register the
/// toolgate server at `upstream` as its gateway `up`, and hand back the
/// running peer with the bearer token its callers send.
pub async fn contextforge(venv: &Path, upstream: SocketAddr) -> anyhow::Result<Server> {
    let addr = free_addr()?;
    let dir = std::env::temp_dir().join(format!(
        "toolgate-bench-contextforge-{}-{}",
        std::process::id(),
        addr.port()
    ));
    std::fs::create_dir_all(&dir)?;
    let env = settings(&dir);
    let args = [
        "--host".to_owned(),
        "127.0.0.1".to_owned(),
        "--port".to_owned(),
        addr.port().to_string(),
    ];
    let mut server = Server::http_with(
        &venv.join("bin/mcpgateway"),
        &args,
        addr,
        &env,
        Duration::from_secs(120),
    )
    .await?;
    server.scratch = Some(dir);
    let token = token(venv, &env)?;
    let (status, body) = post(
        addr,
        "/gateways",
        &token,
        &format!(r#"{{"name":"up","url":"http://{upstream}/mcp","transport":"STREAMABLEHTTP"}}"#),
    )
    .await?;
    if !(200..300).contains(&status) {
        anyhow::bail!(
            "ContextForge did not register the upstream ({status}): {}",
            body.chars().take(300).collect::<String>()
        );
    }
    server.bearer = Some(token);
    Ok(server)
}

/// An administrator's token from ContextForge's own script.
fn token(venv: &Path, env: &[(&str, String)]) -> anyhow::Result<String> {
    let out = std::process::Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "mcpgateway.utils.create_jwt_token",
            "--username",
            "admin@example.com",
            "--exp",
            "600",
            "--secret",
            SECRET,
            "--admin",
        ])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().last().map(str::trim) {
        Some(token) if out.status.success() && token.starts_with("ey") => Ok(token.to_owned()),
        _ => anyhow::bail!(
            "ContextForge's token script failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        ),
    }
}

/// POST `json` to `path` with `token`; the status and body.
async fn post(
    addr: SocketAddr,
    path: &str,
    token: &str,
    json: &str,
) -> anyhow::Result<(u16, String)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = Request::post(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::from(json.to_owned())))?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
