//! The reference: the same tool set served with rmcp, the official Rust
//! SDK. `--json` and `--nodelay` select its best settings (JSON responses,
//! TCP_NODELAY); without them it runs as rmcp ships (SSE responses, Nagle on).

use std::sync::Arc;

use axum::serve::ListenerExt as _;
use clap::Parser;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::Value;
use toolgate_bench::tools::{self, ORDER_TOOL, ORDER_TOOL_UNCHECKED, Order};

#[derive(Parser)]
struct Args {
    /// Serve HTTP here (endpoint `/mcp`).
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// Serve stdio instead.
    #[arg(long)]
    stdio: bool,
    /// JSON responses instead of SSE (rmcp's `json_response`).
    #[arg(long)]
    json: bool,
    /// Set TCP_NODELAY on accepted sockets.
    #[arg(long)]
    nodelay: bool,
    /// Filler tools to add to the base set.
    #[arg(long, default_value_t = 0)]
    extra: usize,
}

#[derive(Clone)]
struct Bench {
    tools: Arc<Vec<Tool>>,
}

impl Bench {
    fn new(extra: usize) -> Self {
        let tools = tools::tool_set(extra)
            .into_iter()
            .map(|t| Tool::new(t.name, t.description, t.schema))
            .collect();
        Self {
            tools: Arc::new(tools),
        }
    }
}

fn text(t: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

impl ServerHandler for Bench {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args: JsonObject = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "test_simple_text" => text(tools::SIMPLE_TEXT.to_owned()),
            ORDER_TOOL | ORDER_TOOL_UNCHECKED => {
                match serde_json::from_value::<Order>(Value::Object(args)) {
                    Ok(order) => text(tools::order_reply(&order)),
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "invalid order: {e}"
                    ))]),
                }
            }
            name if self.tools.iter().any(|t| t.name == name) => text(tools::generic_reply(name)),
            name => {
                return Err(ErrorData::invalid_params(
                    format!("Unknown tool: {name}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bench = Bench::new(args.extra);
    match (args.http, args.stdio) {
        (Some(bind), false) => {
            let config = StreamableHttpServerConfig::default().with_json_response(args.json);
            let service = StreamableHttpService::new(
                move || Ok(bench.clone()),
                LocalSessionManager::default().into(),
                config,
            );
            let app = axum::Router::new().nest_service("/mcp", service);
            let nodelay = args.nodelay;
            let listener = tokio::net::TcpListener::bind(bind)
                .await?
                .tap_io(move |tcp| {
                    if nodelay {
                        let _ = tcp.set_nodelay(true);
                    }
                });
            axum::serve(listener, app).await?;
        }
        (None, true) => {
            let running = bench.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
        }
        _ => anyhow::bail!("pass exactly one of --http ADDR and --stdio"),
    }
    Ok(())
}
