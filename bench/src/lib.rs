//! toolgate's benchmark: toolgate against rmcp (the official Rust SDK) and
//! a bare axum handler (the ceiling for any MCP server over HTTP here), and
//! the gateway against a bare forwarder (the ceiling for any two-hop relay
//! here), on loopback, alternating servers over several rounds and reporting medians.
//!
//! Run it with `cargo xtask bench`; it writes `bench/results/latest.json`
//! and `bench/results/latest.md`.
//!
//! - [`tools`]: the tool set every server serves, defined once.
//! - [`load`]: the HTTP load generator (keep-alive, fixed concurrency, HDR
//!   histogram).
//! - [`stdio`]: requests in flight on a server's stdin.
//! - [`clients`]: toolgate-client against rmcp's client.
//! - [`listen`]: many open `subscriptions/listen` streams.
//! - [`process`]: servers under test, their memory and CPU time.
//! - [`report`]: medians, ratios, targets, JSON and markdown.

pub mod clients;
pub mod listen;
pub mod load;
pub mod peers;
pub mod process;
pub mod report;
pub mod stdio;
pub mod tools;

use serde_json::json;

// In the library, so that every binary of the bench (the load generator and
// each server under test) gets the same allocator.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Which allocator every binary of this build of the bench uses.
pub const ALLOCATOR_NAME: &str = if cfg!(feature = "system-allocator") {
    "glibc malloc"
} else {
    "mimalloc"
};

/// The `_meta` every benchmark request carries (revision 2026-07-28).
pub fn request_meta() -> serde_json::Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-bench", "version": "1"}
    })
}

/// Issuer of the benchmark's access tokens.
pub const TOKEN_ISSUER: &str = "https://auth.bench.test";

/// The test JWKS (`testdata/auth/jwks.json`), which verifies [`access_token`]s.
pub fn jwks_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/auth/jwks.json")
}

/// An access token for `audience`, signed with the repository's test key,
/// valid for an hour.
pub fn access_token(audience: &str) -> anyhow::Result<String> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let claims = json!({"iss": TOKEN_ISSUER, "aud": audience, "sub": "bench",
                        "scope": "bench", "iat": now, "exp": now + 3600});
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("test-rsa-1".into());
    let key = EncodingKey::from_rsa_pem(include_bytes!("../../testdata/auth/rsa-private.pem"))?;
    Ok(encode(&header, &claims, &key)?)
}

/// Serve `app` on `addr` with `TCP_NODELAY` on every connection, as the
/// servers under test do: the bare reference servers' listener.
pub async fn serve_bare(addr: std::net::SocketAddr, app: axum::Router) -> anyhow::Result<()> {
    use axum::serve::ListenerExt as _;
    let listener = tokio::net::TcpListener::bind(addr).await?.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}

/// The fixed bytes the ceiling server answers: the same `tools/call`
/// response toolgate produces for `test_simple_text`.
pub fn ceiling_body() -> bytes::Bytes {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "content": [{"type": "text", "text": tools::SIMPLE_TEXT}],
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "toolgate-bench", "version": "0.1.0"}}
        }
    });
    bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}
