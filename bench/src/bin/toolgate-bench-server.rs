//! toolgate serving the benchmark's tool set in its default configuration,
//! over Streamable HTTP (`--http ADDR`) or stdio (`--stdio`).

use clap::Parser;
use serde_json::Value;
use toolgate_bench::tools::{self, ORDER_TOOL, ORDER_TOOL_UNCHECKED, Order};
use toolgate_server::protocol::types::CallToolResult;
use toolgate_server::transport::http::{HttpConfig, serve_http};
use toolgate_server::transport::stdio::serve_stdio;
use toolgate_server::{Server, ToolDef, ToolError, ToolReply};

#[derive(Parser)]
struct Args {
    /// Serve HTTP here (endpoint `/mcp`).
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// Serve stdio instead.
    #[arg(long)]
    stdio: bool,
    /// Filler tools to add to the base set.
    #[arg(long, default_value_t = 0)]
    extra: usize,
    /// Items per list page (default: the server's default).
    #[arg(long)]
    page_size: Option<usize>,
    /// Verify bearer tokens against the test JWKS, for this audience (the
    /// endpoint's URL).
    #[arg(long)]
    auth_audience: Option<String>,
    /// Calls per minute per caller per tool.
    #[arg(long)]
    rate_limit: Option<u32>,
}

fn server(
    extra: usize,
    page_size: Option<usize>,
    rate_limit: Option<u32>,
) -> anyhow::Result<Server> {
    let mut builder = Server::builder("toolgate-bench", env!("CARGO_PKG_VERSION"));
    if let Some(calls) = rate_limit {
        builder = builder.rate_limit(toolgate_server::RateLimit::per_minute(calls));
    }
    if let Some(size) = page_size {
        builder = builder.page_size(size);
    }
    for spec in tools::tool_set(extra) {
        let def = ToolDef::new(spec.name.clone()).description(spec.description.clone());
        let entry = match spec.name.as_str() {
            "test_simple_text" => def.read_only().handler(|| async { Ok(tools::SIMPLE_TEXT) }),
            ORDER_TOOL | ORDER_TOOL_UNCHECKED => {
                def.dynamic(spec.schema, None, |args, _ctx| async move {
                    let order: Order = serde_json::from_value(Value::Object(args))
                        .map_err(|e| ToolError::new(format!("invalid order: {e}")))?;
                    Ok(ToolReply::Complete(CallToolResult::text(
                        tools::order_reply(&order),
                    )))
                })
            }
            name => {
                let reply = tools::generic_reply(name);
                def.dynamic(spec.schema, None, move |_args, _ctx| {
                    let reply = reply.clone();
                    async move { Ok(ToolReply::Complete(CallToolResult::text(reply))) }
                })
            }
        };
        builder = builder.tool(entry);
    }
    Ok(builder.build()?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = server(args.extra, args.page_size, args.rate_limit)?;
    let auth = match &args.auth_audience {
        Some(audience) => {
            let verifier = toolgate_server::JwtVerifier::from_jwks_file(
                toolgate_bench::jwks_path(),
                toolgate_bench::TOKEN_ISSUER,
                audience,
            )?;
            let resource = toolgate_server::ResourceServer::new(audience, verifier)
                .map_err(anyhow::Error::msg)?
                .authorization_server(toolgate_bench::TOKEN_ISSUER);
            Some(std::sync::Arc::new(resource))
        }
        None => None,
    };
    match (args.http, args.stdio) {
        (Some(bind), false) => {
            serve_http(
                server,
                HttpConfig {
                    bind,
                    auth,
                    ..HttpConfig::default()
                },
            )
            .await?
        }
        (None, true) => serve_stdio(server).await?,
        _ => anyhow::bail!("pass exactly one of --http ADDR and --stdio"),
    }
    Ok(())
}
