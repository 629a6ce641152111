//! Run the basket server: `basket` (stdio) or `basket --http 127.0.0.1:8080`.

use std::net::SocketAddr;

use clap::Parser;
use toolgate_server::transport::http::{HttpConfig, serve_http};
use toolgate_server::transport::stdio::serve_stdio;

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs go to stderr: on stdio, stdout carries only protocol messages.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let server = basket::server_with(&basket::Options {
        rate_limit_per_minute: args.rate_limit,
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
                    ..HttpConfig::default()
                },
            )
            .await?;
        }
    }
    Ok(())
}
