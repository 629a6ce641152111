//! Run the basket server: `basket` (stdio) or `basket --http 127.0.0.1:8080`.
//!
//! `--rate-limit N` allows each caller N calls per minute to each tool.
//! `--auth-jwks FILE --auth-issuer ISS --auth-audience URL` (HTTP only, all
//! three together) verifies bearer tokens and makes tools need scopes.

use std::net::SocketAddr;

use clap::Parser;
use toolgate_server::transport::http::{HttpConfig, serve_http};
use toolgate_server::transport::stdio::serve_stdio;
use toolgate_server::{JwtVerifier, ResourceServer};

#[derive(Parser)]
#[command(about = "A shopping-basket MCP server (toolgate example)")]
struct Args {
    /// Serve Streamable HTTP at this address (endpoint /mcp) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Allow each caller at most N calls per minute to each tool; more are
    /// answered with a tool error saying when to retry.
    #[arg(long, value_name = "N")]
    rate_limit: Option<u32>,
    /// Verify bearer tokens against the keys in this JWKS file (with
    /// --auth-issuer and --auth-audience; HTTP only). Tools then need scopes:
    /// basket:read, basket:write (implies basket:read), basket:checkout.
    #[arg(long, value_name = "FILE", requires_all = ["auth_issuer", "auth_audience", "http"])]
    auth_jwks: Option<std::path::PathBuf>,
    /// The issuer (`iss`) tokens must come from.
    #[arg(long, value_name = "ISS", requires = "auth_jwks")]
    auth_issuer: Option<String>,
    /// This server's canonical URL, e.g. http://127.0.0.1:8080/mcp: the
    /// audience (`aud`) tokens must be issued for.
    #[arg(long, value_name = "URL", requires = "auth_jwks")]
    auth_audience: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs go to stderr (on stdio, stdout carries only protocol messages),
    // plain when stderr is not a terminal or NO_COLOR is set.
    toolgate_protocol::logging::init("info");
    let args = Args::parse();
    let auth = match (&args.auth_jwks, &args.auth_issuer, &args.auth_audience) {
        (Some(jwks), Some(issuer), Some(audience)) => {
            let verifier = JwtVerifier::from_jwks_file(jwks, issuer, audience)?;
            let resource = ResourceServer::new(audience, verifier)
                .map_err(anyhow::Error::msg)?
                .authorization_server(issuer.clone())
                .scopes_supported(basket::SCOPES.iter().copied())
                .scope_hierarchy(basket::scope_hierarchy());
            Some(std::sync::Arc::new(resource))
        }
        _ => None,
    };
    let server = basket::server_with(&basket::Options {
        rate_limit_per_minute: args.rate_limit,
        require_scopes: auth.is_some(),
    })?;
    match args.http {
        None => serve_stdio(server).await?,
        Some(bind) => {
            let shutdown = server.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    shutdown.shutdown();
                }
            });
            serve_http(
                server,
                HttpConfig {
                    bind,
                    auth,
                    ..HttpConfig::default()
                },
            )
            .await?;
        }
    }
    Ok(())
}
