//! The two-hop ceiling: a bare axum handler that passes each request's
//! bytes to the upstream over pooled hyper connections and returns the
//! answer's bytes. It reads nothing, checks nothing, writes no log: no
//! gateway that parses, validates and sanitizes can beat it, so the
//! gateway rows are read against it as well as against the direct server.

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Response, StatusCode, header};
use axum::response::IntoResponse as _;
use axum::routing::post;
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

#[derive(Parser)]
struct Args {
    /// Listen here (any path answers).
    #[arg(long)]
    http: std::net::SocketAddr,
    /// The upstream's MCP endpoint, `http://host:port/path`.
    #[arg(long)]
    upstream: http::Uri,
    /// Worker threads (default: one per core, as tokio's own default).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Clone)]
struct Hop {
    client: Client<HttpConnector, Full<Bytes>>,
    upstream: http::Uri,
}

async fn forward(State(hop): State<Hop>, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut out = http::Request::new(Full::new(body));
    *out.method_mut() = parts.method;
    *out.uri_mut() = hop.upstream.clone();
    *out.headers_mut() = parts.headers;
    out.headers_mut().remove(header::HOST);
    let Ok(answer) = hop.client.request(out).await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let (parts, body) = answer.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut reply = Response::new(Body::from(body));
    *reply.status_mut() = parts.status;
    if let Some(kind) = parts.headers.get(header::CONTENT_TYPE) {
        reply
            .headers_mut()
            .insert(header::CONTENT_TYPE, kind.clone());
    }
    reply
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut runtime = match args.threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    runtime.enable_all().build()?.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let hop = Hop {
        client: Client::builder(TokioExecutor::new()).build(connector),
        upstream: args.upstream,
    };
    let app = Router::new().route("/mcp", post(forward)).with_state(hop);
    toolgate_bench::serve_bare(args.http, app).await
}
