//! The ceiling: a bare axum handler returning the fixed bytes of a
//! `tools/call` response. No MCP server over HTTP can beat it here.

use axum::Router;
use axum::routing::post;
use clap::Parser;
use http::header::CONTENT_TYPE;

#[derive(Parser)]
struct Args {
    /// Listen here (any path answers).
    #[arg(long)]
    http: std::net::SocketAddr,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let body = toolgate_bench::ceiling_body();
    let app = Router::new().route(
        "/mcp",
        post(move || {
            let body = body.clone();
            async move { ([(CONTENT_TYPE, "application/json")], body) }
        }),
    );
    toolgate_bench::serve_bare(args.http, app).await
}
