//! Runs every scenario against every server, alternating servers within
//! each round, and writes `bench/results/latest.{json,md}`.
//!
//! Usage: `bench [--quick] [--seconds S] [--rounds R] [--out DIR]`
//! (normally through `cargo xtask bench`, which builds in release first).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use serde_json::{Value, json};
use toolgate_bench::load::{self, Target};
use toolgate_bench::process::{self, Server};
use toolgate_bench::report::{
    self, CEILING, MemoryRow, RMCP_BEST, RMCP_DEFAULT, Report, Round, Row, TOOLGATE,
};
use toolgate_bench::tools::{self, ORDER_TOOL, ORDER_TOOL_UNCHECKED};
use toolgate_bench::{clients, listen, stdio};

#[derive(Parser)]
struct Args {
    /// Seconds per measured run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds per scenario (the median is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// One short round of everything (a smoke test, not a measurement:
    /// targets are not judged and no results are written).
    #[arg(long)]
    quick: bool,
    /// Open `subscriptions/listen` streams for the memory figure.
    #[arg(long, default_value_t = 10_000)]
    streams: usize,
    /// Run only the parts whose label contains this (e.g. `c=32`, `stdio`,
    /// `client`, `memory`); results are then printed but not written.
    #[arg(long)]
    only: Option<String>,
    /// With `--only`: run only the servers whose label contains this (e.g.
    /// `gateway`); the direct toolgate server always runs too, as the
    /// gateway rows' reference.
    #[arg(long, requires = "only")]
    server: Option<String>,
    /// Where to write the results.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
}

struct Bins {
    toolgate: PathBuf,
    rmcp: PathBuf,
    ceiling: PathBuf,
    forwarder: PathBuf,
    /// The `toolgate` command, for `toolgate serve`.
    cli: PathBuf,
    /// Node and the npm `mcp-proxy` script (`TOOLGATE_BENCH_NODE`,
    /// `TOOLGATE_BENCH_MCP_PROXY`, set by `cargo xtask bench`).
    mcp_proxy: Option<(PathBuf, PathBuf)>,
    /// The PyPI `mcp-proxy` command (`TOOLGATE_BENCH_MCP_PROXY_PY`).
    mcp_proxy_py: Option<PathBuf>,
    /// ContextForge's virtual environment (`TOOLGATE_BENCH_CONTEXTFORGE`).
    contextforge: Option<PathBuf>,
}

#[derive(Clone, Copy)]
enum Kind {
    Toolgate,
    /// toolgate with 100 items per list page.
    ToolgatePaged,
    RmcpDefault,
    RmcpBest,
    Ceiling,
    /// toolgate verifying a JWT on every request, with a rate limit.
    ToolgateSecured,
    /// `toolgate serve` in front of the toolgate server, over HTTP, with
    /// no audit store.
    Gateway,
    /// The same with `--threads 2`: two workers, the multi-threaded
    /// runtime a larger machine gets by default (on two cores or fewer the
    /// default is one thread).
    GatewayTwoThreads,
    /// The same, writing every call to its audit store before answering.
    GatewayAudited,
    /// Two `toolgate serve` instances sharing PostgreSQL (audit store and
    /// approvals) and Redis (rate limits), the load split between them.
    GatewayShared,
    /// `toolgate serve` in front of the toolgate server over stdio.
    GatewayStdio,
    /// A bare HTTP forwarder in front of the toolgate server: the
    /// two-hop ceiling the gateway rows are read against.
    Forwarder,
    /// The same forwarder on one thread: the ceiling of the one-thread
    /// gateway row.
    ForwarderOneThread,
    /// The npm `mcp-proxy` in front of the toolgate server over stdio (a
    /// legacy session: it speaks the initialize-handshake revisions).
    McpProxy,
    /// The PyPI `mcp-proxy` (on the official Python SDK) likewise.
    McpProxyPy,
    /// IBM's ContextForge gateway in front of the toolgate server over
    /// HTTP, as the toolgate gateway row is.
    ContextForge,
}

/// The label of the gateway row.
const GATEWAY: &str = "toolgate gateway → toolgate";

/// The label of the two-worker gateway row.
const GATEWAY_TWO_THREADS: &str = "toolgate gateway --threads 2 → toolgate";

/// The label of the gateway row fronting a stdio server.
const GATEWAY_STDIO: &str = "toolgate gateway → toolgate (stdio)";

/// The label of the two-hop ceiling row.
const FORWARDER: &str = "bare HTTP forwarder → toolgate (two-hop ceiling)";

/// The label of the one-thread two-hop ceiling row.
const FORWARDER_ONE_THREAD: &str = "bare HTTP forwarder, one thread → toolgate";

/// The label of the npm `mcp-proxy` row.
const MCP_PROXY: &str = "mcp-proxy 6.7.19 (npm) → toolgate (stdio)";

/// The label of the ContextForge row.
const CONTEXTFORGE: &str = "ContextForge 1.0.7 (PyPI) → toolgate";

/// The label of the PyPI `mcp-proxy` row.
const MCP_PROXY_PY: &str = "mcp-proxy 0.13.0 (PyPI) → toolgate (stdio)";

/// The scenario comparing proxies in front of a stdio server.
const PROXIED: &str = "HTTP tools/call via a proxy to a stdio server, c=32";

/// The label of the gateway row with the audit store on.
const GATEWAY_AUDITED: &str = "toolgate gateway, audit store on";

/// The label of the two-instance gateway row.
const GATEWAY_SHARED: &str = "toolgate gateway ×2, PostgreSQL + Redis";

/// The label of the authenticated, rate-limited toolgate row.
const SECURED: &str = "toolgate, JWT + rate limit";

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Toolgate => TOOLGATE,
            Kind::ToolgatePaged => "toolgate, 100 per page",
            Kind::RmcpDefault => RMCP_DEFAULT,
            Kind::RmcpBest => RMCP_BEST,
            Kind::Ceiling => CEILING,
            Kind::ToolgateSecured => SECURED,
            Kind::Gateway => GATEWAY,
            Kind::GatewayTwoThreads => GATEWAY_TWO_THREADS,
            Kind::GatewayAudited => GATEWAY_AUDITED,
            Kind::GatewayShared => GATEWAY_SHARED,
            Kind::GatewayStdio => GATEWAY_STDIO,
            Kind::McpProxy => MCP_PROXY,
            Kind::McpProxyPy => MCP_PROXY_PY,
            Kind::ContextForge => CONTEXTFORGE,
            Kind::Forwarder => FORWARDER,
            Kind::ForwarderOneThread => FORWARDER_ONE_THREAD,
        }
    }
}

/// The direct toolgate server, as the upstream of a relay row, and its
/// address.
async fn start_upstream(
    bins: &Bins,
    extra: usize,
) -> anyhow::Result<(Server, std::net::SocketAddr)> {
    let upstream = Box::pin(start(bins, Kind::Toolgate, extra)).await?;
    let addr = upstream
        .addr
        .ok_or_else(|| anyhow::anyhow!("no upstream address"))?;
    Ok((upstream, addr))
}

/// `toolgate serve --http` with the toolgate server as its one upstream,
/// unprefixed, so requests are the same as to the server directly.
async fn start_gateway(
    bins: &Bins,
    extra: usize,
    audited: bool,
    args: &[&str],
) -> anyhow::Result<Server> {
    let (upstream, upstream_addr) = start_upstream(bins, extra).await?;
    let mut gateway = serve_gateway(
        bins,
        &format!("[servers.up]\nurl = \"http://{upstream_addr}/mcp\"\n"),
        audited,
        args,
    )
    .await?;
    gateway.upstream = Some(Box::new(upstream));
    Ok(gateway)
}

/// Two `toolgate serve --http` instances in front of one toolgate server,
/// sharing PostgreSQL and Redis (`TOOLGATE_BENCH_POSTGRES`,
/// `TOOLGATE_BENCH_REDIS`, which `cargo xtask bench` starts) and the state
/// key. Every call is audited and rate-limited (a limit far above the
/// load: checked on every call, never refusing). The first instance holds
/// the second as its `upstream`, which holds the server.
async fn start_shared_gateways(bins: &Bins, extra: usize) -> anyhow::Result<Server> {
    let (Ok(postgres), Ok(redis)) = (
        std::env::var("TOOLGATE_BENCH_POSTGRES"),
        std::env::var("TOOLGATE_BENCH_REDIS"),
    ) else {
        anyhow::bail!("no PostgreSQL or Redis: run `cargo xtask bench`, which starts them");
    };
    let (upstream, upstream_addr) = start_upstream(bins, extra).await?;
    let key = std::env::temp_dir().join(format!("toolgate-bench-state-{}.key", std::process::id()));
    std::fs::write(&key, "b".repeat(64))?;
    let shared = format!(
        "[servers.up]\nurl = \"http://{upstream_addr}/mcp\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n[store]\nurl = \"{postgres}\"\n[ratelimit]\nredis = \"{redis}\"\n[[ratelimit.rules]]\ntools = [\"*\"]\nper_minute = 1000000000\n[state]\nkey_file = {:?}\n",
        key.display().to_string()
    );
    let mut second = serve_config(bins, &shared, &[]).await?;
    second.upstream = Some(Box::new(upstream));
    let mut first = serve_config(bins, &shared, &[]).await?;
    first.upstream = Some(Box::new(second));
    Ok(first)
}

/// `toolgate serve --http` with the configuration `toml` and `extra`
/// arguments.
async fn serve_config(bins: &Bins, toml: &str, extra: &[&str]) -> anyhow::Result<Server> {
    let addr = process::free_addr()?;
    let config = std::env::temp_dir().join(format!(
        "toolgate-bench-gateway-{}-{}.toml",
        std::process::id(),
        addr.port()
    ));
    std::fs::write(&config, toml)?;
    let mut args = vec![
        "serve".to_owned(),
        "--http".to_owned(),
        addr.to_string(),
        "--config".to_owned(),
        config.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Server::http(&bins.cli, &args, addr).await
}

/// `toolgate serve --http` with the one upstream `server` (a TOML
/// `[servers.up]` table), unprefixed and every call allowed; `args` are
/// added to the command.
async fn serve_gateway(
    bins: &Bins,
    server: &str,
    audited: bool,
    args: &[&str],
) -> anyhow::Result<Server> {
    static STORES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let audit = if audited {
        let n = STORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let db = std::env::temp_dir().join(format!(
            "toolgate-bench-audit-{}-{n}.db",
            std::process::id()
        ));
        // A fresh store per run: the figures are not those of a grown file.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        format!("[audit]\npath = {:?}\n", db.display().to_string())
    } else {
        "[audit]\ndisabled = true\n".to_owned()
    };
    serve_config(
        bins,
        &format!("{server}prefix = \"\"\n[policy]\ndefault = \"allow\"\n{audit}"),
        args,
    )
    .await
}

async fn start(bins: &Bins, kind: Kind, extra: usize) -> anyhow::Result<Server> {
    if matches!(
        kind,
        Kind::Gateway | Kind::GatewayAudited | Kind::GatewayTwoThreads
    ) {
        let args: &[&str] = if matches!(kind, Kind::GatewayTwoThreads) {
            &["--threads", "2"]
        } else {
            &[]
        };
        return start_gateway(bins, extra, matches!(kind, Kind::GatewayAudited), args).await;
    }
    if matches!(kind, Kind::GatewayShared) {
        return start_shared_gateways(bins, extra).await;
    }
    if matches!(kind, Kind::Forwarder | Kind::ForwarderOneThread) {
        let (upstream, upstream_addr) = start_upstream(bins, extra).await?;
        let addr = process::free_addr()?;
        let mut args = vec![
            "--http".to_owned(),
            addr.to_string(),
            "--upstream".to_owned(),
            format!("http://{upstream_addr}/mcp"),
        ];
        if matches!(kind, Kind::ForwarderOneThread) {
            args.extend(["--threads".to_owned(), "1".to_owned()]);
        }
        let mut forwarder = Server::http(&bins.forwarder, &args, addr).await?;
        forwarder.upstream = Some(Box::new(upstream));
        return Ok(forwarder);
    }
    if matches!(kind, Kind::GatewayStdio) {
        let server = format!(
            "[servers.up]\ncommand = {:?}\nargs = [\"--stdio\"]\n",
            bins.toolgate.display().to_string()
        );
        return serve_gateway(bins, &server, false, &[]).await;
    }
    if matches!(kind, Kind::McpProxy) {
        let Some((node, script)) = &bins.mcp_proxy else {
            anyhow::bail!("no mcp-proxy: run `cargo xtask bench`, which installs it");
        };
        let addr = process::free_addr()?;
        let args = [
            script.display().to_string(),
            "--port".to_owned(),
            addr.port().to_string(),
            "--host".to_owned(),
            "127.0.0.1".to_owned(),
            "--server".to_owned(),
            "stream".to_owned(),
            "--".to_owned(),
            bins.toolgate.display().to_string(),
            "--stdio".to_owned(),
        ];
        return Server::http(node, &args, addr).await;
    }
    if matches!(kind, Kind::ContextForge) {
        let Some(venv) = &bins.contextforge else {
            anyhow::bail!("no ContextForge: run `cargo xtask bench`, which installs it");
        };
        let (upstream, upstream_addr) = start_upstream(bins, extra).await?;
        let mut peer = toolgate_bench::peers::contextforge(venv, upstream_addr).await?;
        peer.upstream = Some(Box::new(upstream));
        return Ok(peer);
    }
    if matches!(kind, Kind::McpProxyPy) {
        let Some(proxy) = &bins.mcp_proxy_py else {
            anyhow::bail!("no PyPI mcp-proxy: run `cargo xtask bench`, which installs it");
        };
        let addr = process::free_addr()?;
        let args = [
            "--port".to_owned(),
            addr.port().to_string(),
            "--host".to_owned(),
            "127.0.0.1".to_owned(),
            "--log-level".to_owned(),
            "WARNING".to_owned(),
            "--".to_owned(),
            bins.toolgate.display().to_string(),
            "--stdio".to_owned(),
        ];
        return Server::http(proxy, &args, addr).await;
    }
    let addr = process::free_addr()?;
    let mut args = vec!["--http".to_owned(), addr.to_string()];
    if matches!(kind, Kind::ToolgateSecured) {
        // A limit far above what the run sends: the limiter is checked on
        // every call but never refuses one.
        args.extend([
            "--auth-audience".to_owned(),
            format!("http://{addr}/mcp"),
            "--rate-limit".to_owned(),
            "1000000000".to_owned(),
        ]);
    }
    if extra > 0 && !matches!(kind, Kind::Ceiling) {
        args.extend(["--extra".to_owned(), extra.to_string()]);
    }
    let program = match kind {
        Kind::Toolgate | Kind::ToolgateSecured => &bins.toolgate,
        Kind::ToolgatePaged => {
            args.extend(["--page-size".to_owned(), "100".to_owned()]);
            &bins.toolgate
        }
        Kind::RmcpDefault => &bins.rmcp,
        Kind::RmcpBest => {
            args.extend(["--json".to_owned(), "--nodelay".to_owned()]);
            &bins.rmcp
        }
        Kind::Ceiling => &bins.ceiling,
        Kind::Gateway
        | Kind::GatewayTwoThreads
        | Kind::GatewayAudited
        | Kind::GatewayShared
        | Kind::GatewayStdio
        | Kind::Forwarder
        | Kind::ForwarderOneThread
        | Kind::McpProxy
        | Kind::McpProxyPy
        | Kind::ContextForge => {
            unreachable!("started above")
        }
    };
    Server::http(program, &args, addr).await
}

/// A request and the headers a 2026-07-28 client mirrors from it.
fn request(method: &str, params: Value) -> (Bytes, Vec<(String, String)>) {
    let mut params = params;
    if let Some(p) = params.as_object_mut() {
        p.insert("_meta".into(), toolgate_bench::request_meta());
    }
    let mut headers = vec![
        ("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        headers.push(("mcp-name".to_owned(), name.to_owned()));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    (
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
        headers,
    )
}

/// A request in a legacy session: no per-request `_meta`, the session's
/// headers instead.
fn legacy_request(method: &str, params: Value, session: &str) -> (Bytes, Vec<(String, String)>) {
    let headers = vec![
        ("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()),
        ("mcp-session-id".to_owned(), session.to_owned()),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    (
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
        headers,
    )
}

/// The scenario that compares toolgate with and without validation.
const VALIDATED: &str = "HTTP tools/call, validated tool, c=32";

#[derive(Clone)]
struct Scenario {
    label: String,
    method: &'static str,
    params: Value,
    concurrency: usize,
    walk: bool,
    extra: usize,
    /// (server, label override, params override)
    servers: Vec<(Kind, Option<&'static str>, Option<Value>)>,
}

fn round_of(outcome: &load::Outcome, cpu: f64, peak_kib: u64) -> Round {
    let samples = outcome.samples.max(1) as f64;
    Round {
        rate: outcome.rate(),
        p50_ms: outcome.latency.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms: outcome.latency.value_at_quantile(0.99) as f64 / 1000.0,
        cpu_per_10k: cpu / samples * 10_000.0,
        peak_mib: peak_kib as f64 / 1024.0,
        errors: outcome.errors,
    }
}

async fn http_scenario(
    bins: &Bins,
    s: &Scenario,
    rounds: usize,
    secs: Duration,
) -> anyhow::Result<Vec<Row>> {
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); s.servers.len()];
    for round in 0..rounds {
        // Alternate the order so no server always runs first (or hot).
        let mut order: Vec<usize> = (0..s.servers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (kind, label, params) = &s.servers[i];
            let server = start(bins, *kind, s.extra).await?;
            let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
            let params = params.clone().unwrap_or_else(|| s.params.clone());
            let (body, mut headers) = match kind {
                Kind::McpProxy | Kind::McpProxyPy => {
                    legacy_request(s.method, params, &load::open_session(addr).await?)
                }
                // Sessionless, as ContextForge serves the handshake revisions.
                Kind::ContextForge => {
                    let (body, mut headers) = legacy_request(s.method, params, "");
                    headers.retain(|(name, _)| name != "mcp-session-id");
                    (body, headers)
                }
                _ => request(s.method, params),
            };
            if let Some(token) = &server.bearer {
                headers.push(("authorization".to_owned(), format!("Bearer {token}")));
            }
            if matches!(kind, Kind::ToolgateSecured) {
                let token = toolgate_bench::access_token(&format!("http://{addr}/mcp"))?;
                headers.push(("authorization".to_owned(), format!("Bearer {token}")));
            }
            // The second instance of a shared pair takes every other connection.
            let also = matches!(kind, Kind::GatewayShared)
                .then(|| server.upstream.as_ref().and_then(|u| u.addr))
                .flatten();
            let target = Target {
                addr,
                also,
                body,
                headers,
                walk: s.walk,
                // Both proxies of the scenario get the same load.
                fresh_ids: s.label == PROXIED,
            };
            // Warm up: connections, caches, allocator.
            load::run(&target, s.concurrency, Duration::from_millis(300)).await?;
            // Both instances of a shared pair count (not the server behind them).
            let cpu_now = || {
                let second = match kind {
                    Kind::GatewayShared => {
                        server.upstream.as_ref().map_or(0.0, |u| u.cpu_seconds())
                    }
                    _ => 0.0,
                };
                server.cpu_seconds() + second
            };
            let cpu_before = cpu_now();
            let outcome = load::run(&target, s.concurrency, secs).await?;
            let cpu = cpu_now() - cpu_before;
            let r = round_of(&outcome, cpu, server.memory().peak_kib);
            eprintln!(
                "  {:<34} {:<28} {:>9.0}/s  p50 {:>7.3} ms  p99 {:>7.3} ms{}",
                s.label,
                label.unwrap_or(kind.label()),
                r.rate,
                r.p50_ms,
                r.p99_ms,
                if r.errors > 0 {
                    format!("  {} errors", r.errors)
                } else {
                    String::new()
                }
            );
            results[i].push(r);
        }
    }
    Ok(s.servers
        .iter()
        .zip(results)
        .map(|((kind, label, _), rounds)| Row::new(&s.label, label.unwrap_or(kind.label()), rounds))
        .collect())
}

async fn stdio_rows(bins: &Bins, rounds: usize, secs: Duration) -> anyhow::Result<Vec<Row>> {
    let label = "stdio tools/call, 64 in flight";
    let servers: [(&str, &Path); 2] = [(TOOLGATE, &bins.toolgate), ("rmcp", &bins.rmcp)];
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); servers.len()];
    for round in 0..rounds {
        let mut order = vec![0, 1];
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (name, program) = servers[i];
            let o = stdio::run(program, &["--stdio"], 64, secs).await?;
            let r = Round {
                rate: o.samples as f64 / o.elapsed.as_secs_f64(),
                p50_ms: o.latency.value_at_quantile(0.5) as f64 / 1000.0,
                p99_ms: o.latency.value_at_quantile(0.99) as f64 / 1000.0,
                cpu_per_10k: o.cpu_seconds / o.samples.max(1) as f64 * 10_000.0,
                peak_mib: o.peak_kib as f64 / 1024.0,
                errors: o.errors,
            };
            eprintln!(
                "  {label:<34} {name:<28} {:>9.0}/s  p50 {:>7.3} ms  p99 {:>7.3} ms",
                r.rate, r.p50_ms, r.p99_ms
            );
            results[i].push(r);
        }
    }
    Ok(servers
        .iter()
        .zip(results)
        .map(|((name, _), rounds)| Row::new(label, name, rounds))
        .collect())
}

async fn client_rows(bins: &Bins, rounds: usize, secs: Duration) -> anyhow::Result<Vec<Row>> {
    let label = "client tools/call, c=32 (toolgate server)";
    let names = ["toolgate-client", "rmcp client"];
    let mut results: Vec<Vec<Round>> = vec![Vec::new(); 2];
    for round in 0..rounds {
        let mut order = vec![0, 1];
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let server = start(bins, Kind::Toolgate, 0).await?;
            let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
            let url = format!("http://{addr}/mcp");
            let o = if i == 0 {
                clients::toolgate(&url, 32, secs).await?
            } else {
                clients::rmcp(&url, 32, secs).await?
            };
            let r = Round {
                rate: o.samples as f64 / o.elapsed.as_secs_f64(),
                p50_ms: o.latency.value_at_quantile(0.5) as f64 / 1000.0,
                p99_ms: o.latency.value_at_quantile(0.99) as f64 / 1000.0,
                cpu_per_10k: o.client_cpu_seconds / o.samples.max(1) as f64 * 10_000.0,
                peak_mib: 0.0,
                errors: o.errors,
            };
            eprintln!(
                "  {label:<34} {:<28} {:>9.0}/s  p50 {:>7.3} ms  p99 {:>7.3} ms",
                names[i], r.rate, r.p50_ms, r.p99_ms
            );
            results[i].push(r);
        }
    }
    Ok(names
        .iter()
        .zip(results)
        .map(|(name, rounds)| Row::new(label, name, rounds))
        .collect())
}

/// The memory row the idle target is judged on.
const IDLE: &str = "idle (after a first call)";

/// Send `tools/call` with `params` for a moment, one at a time, then let
/// the server settle before its memory is read.
async fn calls_then_rest(addr: std::net::SocketAddr, params: Value) -> anyhow::Result<()> {
    let (body, headers) = request("tools/call", params);
    let target = Target {
        addr,
        also: None,
        body,
        headers,
        walk: false,
        fresh_ids: false,
    };
    load::run(&target, 1, Duration::from_millis(100)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

async fn memory_rows(bins: &Bins, streams: usize) -> anyhow::Result<Vec<MemoryRow>> {
    let mut rows = Vec::new();
    let mib = |kib: u64| kib as f64 / 1024.0;
    for kind in [Kind::Toolgate, Kind::RmcpDefault, Kind::RmcpBest] {
        let server = start(bins, kind, 0).await?;
        let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
        calls_then_rest(addr, json!({"name": "test_simple_text", "arguments": {}})).await?;
        let m = server.memory();
        rows.push(MemoryRow {
            what: IDLE.into(),
            server: kind.label().into(),
            mib: mib(m.rss_kib),
            unit: "MiB".into(),
        });
        rows.push(MemoryRow {
            what: "idle, anonymous (heap and stacks, without code pages)".into(),
            server: kind.label().into(),
            mib: mib(m.anon_kib),
            unit: "MiB".into(),
        });
        // toolgate compiles a schema on its tool's first call: show what a
        // compiled validator (with a pattern) adds once the tool is used.
        calls_then_rest(
            addr,
            json!({"name": ORDER_TOOL, "arguments": tools::order_arguments()}),
        )
        .await?;
        rows.push(MemoryRow {
            what: "idle, after calls to the validated tool too".into(),
            server: kind.label().into(),
            mib: mib(server.memory().rss_kib),
            unit: "MiB".into(),
        });
    }
    let server = start(bins, Kind::Toolgate, 0).await?;
    let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
    let before = server.memory();
    let open = listen::open_h2(addr, streams, 100).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = server.memory();
    eprintln!(
        "  {streams} listen streams (HTTP/2, 100 per connection): {:.1} MiB → {:.1} MiB",
        mib(before.rss_kib),
        mib(after.rss_kib)
    );
    rows.push(MemoryRow {
        what: format!("{streams} open subscriptions/listen streams (HTTP/2, 100 per connection)"),
        server: TOOLGATE.into(),
        mib: mib(after.rss_kib),
        unit: "MiB".into(),
    });
    drop(open);
    drop(server);
    // Over HTTP/1.1 every stream is a connection of its own; hyper keeps
    // ~16 KiB of buffers per connection, so report that case per stream.
    let server = start(bins, Kind::Toolgate, 0).await?;
    let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
    let h1 = streams.min(2000);
    let before = server.memory();
    let open = listen::open(addr, h1).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = server.memory();
    rows.push(MemoryRow {
        what: format!("{h1} listen streams over HTTP/1.1 (a connection each)"),
        server: TOOLGATE.into(),
        mib: (after.rss_kib.saturating_sub(before.rss_kib)) as f64 / h1 as f64,
        unit: "KiB per stream".into(),
    });
    drop(open);
    Ok(rows)
}

/// The rate of `server` in `tools/call` at c=32, if it ran.
fn c32_rate(report: &Report, server: &str) -> Option<f64> {
    report
        .row("HTTP tools/call, c=32", server)
        .map(|r| r.median.rate)
        .filter(|r| *r > 0.0)
}

/// The faster bare forwarder's rate at c=32 (one thread or the default
/// runtime, whichever served more here).
fn faster_forwarder(report: &Report) -> Option<f64> {
    c32_rate(report, FORWARDER)
        .into_iter()
        .chain(c32_rate(report, FORWARDER_ONE_THREAD))
        .reduce(f64::max)
}

/// The fastest any gateway built on toolgate's server can relay
/// `tools/call` at c=32 in this run, and the direct server's rate.
///
/// With every process on the same cores, a call's machine time is
/// `cores / rate`, and costs add up. A gateway's two hops cost at least
/// what the faster bare forwarder's do, and its inbound side runs the
/// direct server's whole request path, which costs what the direct server
/// spends beyond the fixed-bytes ceiling. So
/// `1 / gateway ≥ 1 / forwarder + 1 / direct − 1 / ceiling`, before the
/// gateway encodes the upstream request, reads its answer, sanitizes it
/// or checks its output schema. Where a forwarder's own cost exceeds the
/// ceiling's whole round trip (as on the 2-core machine), speeding up the
/// shared server lowers this bound as a share of the direct rate: the
/// gateway runs the server's work twice, the direct row once.
fn two_hop_bound(report: &Report) -> Option<(f64, f64)> {
    let forwarder = faster_forwarder(report)?;
    let rate = |server| c32_rate(report, server);
    let (direct, ceiling) = (rate(TOOLGATE)?, rate(CEILING)?);
    let time = 1.0 / forwarder + 1.0 / direct - 1.0 / ceiling;
    (time > 0.0).then(|| (1.0 / time, direct))
}

/// The targets of the performance issue, judged on what was measured
/// (a target whose rows were not run is left out).
fn targets(report: &Report, streams: usize) -> Vec<report::Target> {
    let rate = |scenario: &str, server: &str| report.row(scenario, server).map(|r| r.median.rate);
    let p99 = |scenario: &str, server: &str| report.row(scenario, server).map(|r| r.median.p99_ms);
    let mut out = Vec::new();
    let mut check = |target: String, judged: Option<(String, bool)>| {
        if let Some((measured, holds)) = judged {
            out.push(report::Target {
                target,
                measured,
                holds,
            });
        }
    };
    let ratio = |a: Option<f64>, b: Option<f64>, at_least: f64| {
        let (a, b) = (a?, b?);
        Some((format!("{:.2}×", a / b), a >= at_least * b))
    };
    for c in ["c=1", "c=32"] {
        let s = format!("HTTP tools/call, {c}");
        check(
            format!("{s}: ≥ 1.5× rmcp best"),
            ratio(rate(&s, TOOLGATE), rate(&s, RMCP_BEST), 1.5),
        );
        // #41: 0.75× the ceiling under load; a lone caller is judged by
        // its latency instead (below).
        let share = if c == "c=32" { 0.75 } else { 0.6 };
        check(
            format!("{s}: ≥ {share}× ceiling"),
            ratio(rate(&s, TOOLGATE), rate(&s, CEILING), share),
        );
        let latency = p99(&s, TOOLGATE)
            .zip(p99(&s, RMCP_BEST))
            .map(|(t, b)| (format!("{t:.3} ms vs {b:.3} ms"), t <= b));
        check(format!("{s}: p99 ≤ rmcp best"), latency);
    }
    // #41: the gateway is judged against the two-hop bound of the same
    // run, the most any gateway on this server can reach here.
    check(
        format!(
            "HTTP tools/call, c=32: {GATEWAY} ≥ 0.9× the two-hop bound (the faster bare forwarder plus the direct server's own MCP work)"
        ),
        two_hop_bound(report).and_then(|(bound, direct)| {
            let gateway = c32_rate(report, GATEWAY)?;
            Some((
                format!(
                    "{:.2}× ({gateway:.0}/s against {bound:.0}/s; the bound is {:.2}× direct)",
                    gateway / bound,
                    bound / direct
                ),
                gateway >= 0.9 * bound,
            ))
        }),
    );
    check(
        format!("HTTP tools/call, c=32: {GATEWAY} ≥ 5× {CONTEXTFORGE}"),
        ratio(
            rate("HTTP tools/call, c=32", GATEWAY),
            rate("HTTP tools/call, c=32", CONTEXTFORGE),
            5.0,
        ),
    );
    for peer in [MCP_PROXY, MCP_PROXY_PY] {
        check(
            format!("{PROXIED}: {GATEWAY_STDIO} ≥ 5× {peer}"),
            ratio(rate(PROXIED, GATEWAY_STDIO), rate(PROXIED, peer), 5.0),
        );
    }
    for (s, share) in [
        ("HTTP tools/call, c=1", 0.6),
        ("HTTP tools/call, c=32", 0.85),
    ] {
        check(
            format!("{s}: {GATEWAY_AUDITED} ≥ {share}× without it"),
            ratio(rate(s, GATEWAY_AUDITED), rate(s, GATEWAY), share),
        );
    }
    let p50 = |server: &str| {
        report
            .row("HTTP tools/call, c=1", server)
            .map(|r| r.median.p50_ms)
    };
    check(
        format!("HTTP tools/call, c=1: {GATEWAY} adds ≤ 0.25 ms p50"),
        p50(GATEWAY).zip(p50(TOOLGATE)).map(|(g, t)| {
            (
                format!("+{:.3} ms ({g:.3} vs {t:.3} ms)", g - t),
                g - t <= 0.25,
            )
        }),
    );
    let c1 = report.row("HTTP tools/call, c=1", TOOLGATE).map(|r| {
        (
            format!("p50 {:.3} ms", r.median.p50_ms),
            r.median.p50_ms < 5.0,
        )
    });
    check(
        "default configuration never slowed by Nagle (c=1 p50 < 5 ms)".into(),
        c1,
    );
    check(
        "HTTP tools/call, c=1: p50 within 20 µs of the ceiling's".into(),
        p50(TOOLGATE).zip(p50(CEILING)).map(|(t, c)| {
            (
                format!("+{:.0} µs ({t:.3} vs {c:.3} ms)", (t - c) * 1000.0),
                t - c <= 0.020,
            )
        }),
    );
    for s in [
        "HTTP tools/list (base set)",
        "HTTP tools/list, 1000 tools walked",
    ] {
        check(
            format!("{s}: ≥ 2× rmcp best"),
            ratio(rate(s, TOOLGATE), rate(s, RMCP_BEST), 2.0),
        );
    }
    let v = VALIDATED;
    check(
        format!("{v}: ≥ 1.3× rmcp (unvalidated)"),
        ratio(rate(v, TOOLGATE), rate(v, RMCP_BEST), 1.3),
    );
    check(
        format!("{v}, {SECURED}: ≥ 1.3× rmcp (unauthenticated)"),
        ratio(rate(v, SECURED), rate(v, RMCP_BEST), 1.3),
    );
    // Rounds of the two toolgate variants run back to back, so each
    // round's ratio cancels the drift of this shared machine; the median of
    // those ratios is steadier than the ratio of medians.
    let rounds_of = |server: &str| {
        report
            .rows
            .iter()
            .find(|r| r.scenario == v && r.server == server)
            .map(|r| r.rounds.clone())
    };
    let cost = rounds_of(TOOLGATE)
        .zip(rounds_of("toolgate, validation off"))
        .filter(|(on, off)| !on.is_empty() && on.len() == off.len())
        .map(|(on, off)| {
            let ratios = on.iter().zip(&off).map(|(a, b)| a.rate / b.rate).collect();
            let cost = 1.0 - report::median(ratios);
            (
                format!(
                    "{:.1}% (median of {} paired rounds)",
                    cost * 100.0,
                    on.len()
                ),
                cost <= 0.05,
            )
        });
    check("validation costs ≤ 5%".into(), cost);
    let s = "stdio tools/call, 64 in flight";
    check(
        format!("{s}: ≥ 1.5× rmcp"),
        ratio(rate(s, TOOLGATE), rate(s, "rmcp"), 1.5),
    );
    let s = "client tools/call, c=32 (toolgate server)";
    check(
        "client: ≥ 1.2× rmcp's client".into(),
        ratio(rate(s, "toolgate-client"), rate(s, "rmcp client"), 1.2),
    );
    let idle = |server: &str| {
        report
            .memory
            .iter()
            .find(|m| m.server == server && m.what == IDLE)
            .map(|m| m.mib)
    };
    let rmcp_idle = match (idle(RMCP_DEFAULT), idle(RMCP_BEST)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    check(
        "idle RSS ≤ rmcp".into(),
        idle(TOOLGATE)
            .zip(rmcp_idle)
            .map(|(t, r)| (format!("{t:.1} MiB vs {r:.1} MiB"), t <= r)),
    );
    let listen = report
        .memory
        .iter()
        .find(|m| m.what.contains("listen streams (HTTP/2"));
    check(
        format!("{streams} listen streams ≤ 32 MiB"),
        listen.map(|m| (format!("{:.1} MiB", m.mib), m.mib <= 32.0)),
    );
    out
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The workspace's reqwest leaves the rustls provider to the program,
    // and rmcp's client row builds a reqwest client (without one it panics).
    toolgate_client::install_default_tls_provider();
    let mut args = Args::parse();
    if args.quick {
        args.seconds = 1.0;
        args.rounds = 1;
        args.streams = args.streams.min(1000);
    }
    let dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| anyhow::anyhow!("no directory for the binaries"))?;
    let bins = Bins {
        toolgate: dir.join("toolgate-bench-server"),
        rmcp: dir.join("rmcp-bench-server"),
        ceiling: dir.join("ceiling-server"),
        forwarder: dir.join("forwarder-server"),
        cli: dir.join("toolgate"),
        mcp_proxy: std::env::var_os("TOOLGATE_BENCH_NODE")
            .zip(std::env::var_os("TOOLGATE_BENCH_MCP_PROXY"))
            .map(|(node, script)| (PathBuf::from(node), PathBuf::from(script))),
        mcp_proxy_py: std::env::var_os("TOOLGATE_BENCH_MCP_PROXY_PY").map(PathBuf::from),
        contextforge: std::env::var_os("TOOLGATE_BENCH_CONTEXTFORGE").map(PathBuf::from),
    };
    let secs = Duration::from_secs_f64(args.seconds);
    let simple = json!({"name": "test_simple_text", "arguments": {}});
    let all = |with_ceiling: bool| {
        let mut v = vec![
            (Kind::Toolgate, None, None),
            (Kind::RmcpDefault, None, None),
            (Kind::RmcpBest, None, None),
        ];
        if with_ceiling {
            v.push((Kind::Ceiling, None, None));
        }
        v
    };
    let shared = std::env::var_os("TOOLGATE_BENCH_POSTGRES").is_some()
        && std::env::var_os("TOOLGATE_BENCH_REDIS").is_some();
    if !shared {
        eprintln!(
            "bench: no PostgreSQL and Redis (cargo xtask bench starts them): the two-instance gateway row is left out"
        );
    }
    let with_gateway = |mut servers: Vec<(Kind, Option<&'static str>, Option<Value>)>| {
        servers.push((Kind::Forwarder, None, None));
        servers.push((Kind::ForwarderOneThread, None, None));
        servers.push((Kind::Gateway, None, None));
        servers.push((Kind::GatewayTwoThreads, None, None));
        servers.push((Kind::GatewayAudited, None, None));
        if shared {
            servers.push((Kind::GatewayShared, None, None));
        }
        if bins.contextforge.is_some() {
            let tool = json!({"name": toolgate_bench::peers::CONTEXTFORGE_TOOL, "arguments": {}});
            servers.push((Kind::ContextForge, None, Some(tool)));
        }
        servers
    };
    let scenarios = [
        Scenario {
            label: "HTTP tools/call, c=1".into(),
            method: "tools/call",
            params: simple.clone(),
            concurrency: 1,
            walk: false,
            extra: 0,
            servers: with_gateway(all(true)),
        },
        Scenario {
            label: "HTTP tools/call, c=32".into(),
            method: "tools/call",
            params: simple.clone(),
            concurrency: 32,
            walk: false,
            extra: 0,
            servers: with_gateway(all(true)),
        },
        Scenario {
            label: "HTTP tools/list (base set)".into(),
            method: "tools/list",
            params: json!({}),
            concurrency: 32,
            walk: false,
            extra: 0,
            servers: all(false),
        },
        Scenario {
            label: "HTTP tools/list, 1000 tools walked".into(),
            method: "tools/list",
            params: json!({}),
            concurrency: 32,
            walk: true,
            extra: 1000 - tools::tool_set(0).len(),
            servers: {
                let mut v = all(false);
                v.insert(1, (Kind::ToolgatePaged, None, None));
                v
            },
        },
        Scenario {
            label: PROXIED.into(),
            method: "tools/call",
            params: simple.clone(),
            concurrency: 32,
            walk: false,
            extra: 0,
            servers: {
                let mut v = vec![(Kind::GatewayStdio, None, None)];
                if bins.mcp_proxy.is_some() {
                    v.push((Kind::McpProxy, None, None));
                } else {
                    eprintln!("no mcp-proxy row: `cargo xtask bench` installs it");
                }
                if bins.mcp_proxy_py.is_some() {
                    v.push((Kind::McpProxyPy, None, None));
                } else {
                    eprintln!("no PyPI mcp-proxy row: `cargo xtask bench` installs it");
                }
                v
            },
        },
        Scenario {
            label: VALIDATED.into(),
            method: "tools/call",
            params: json!({"name": ORDER_TOOL, "arguments": tools::order_arguments()}),
            concurrency: 32,
            walk: false,
            extra: 0,
            servers: vec![
                (Kind::Toolgate, None, None),
                (
                    Kind::Toolgate,
                    Some("toolgate, validation off"),
                    Some(
                        json!({"name": ORDER_TOOL_UNCHECKED, "arguments": tools::order_arguments()}),
                    ),
                ),
                (Kind::ToolgateSecured, None, None),
                (Kind::RmcpDefault, None, None),
                (Kind::RmcpBest, None, None),
            ],
        },
    ];
    let wanted = |label: &str| args.only.as_deref().is_none_or(|o| label.contains(o));
    let mut rows = Vec::new();
    for s in scenarios.iter().filter(|s| wanted(&s.label)) {
        eprintln!("== {}", s.label);
        // The validation cost is a small difference next to this machine's
        // run-to-run noise: measure it over more rounds than the rest (a
        // quick run stays quick).
        let rounds = if s.label == VALIDATED && args.rounds > 1 {
            args.rounds.max(9)
        } else {
            args.rounds
        };
        let mut s = s.clone();
        if let Some(only) = &args.server {
            s.servers.retain(|(kind, label, _)| {
                matches!(kind, Kind::Toolgate) && label.is_none()
                    || label.unwrap_or(kind.label()).contains(only.as_str())
            });
        }
        rows.extend(http_scenario(&bins, &s, rounds, secs).await?);
    }
    if wanted("stdio") {
        eprintln!("== stdio");
        rows.extend(stdio_rows(&bins, args.rounds, secs).await?);
    }
    if wanted("client") {
        eprintln!("== clients");
        rows.extend(client_rows(&bins, args.rounds, secs).await?);
    }
    let memory = if wanted("memory") {
        eprintln!("== memory");
        memory_rows(&bins, args.streams).await?
    } else {
        Vec::new()
    };
    let mut report = Report {
        context: json!({
            "date": std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default(),
            "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "seconds_per_run": args.seconds,
            "rounds": args.rounds,
            "rmcp": "3.11 (crates.io)",
            "allocator": format!("{} in every bench server (toolgate's, rmcp's, the ceiling, the forwarder); the gateway is the `toolgate` binary, on mimalloc", toolgate_bench::ALLOCATOR_NAME),
            "load": "toolgate-bench load generator: HTTP/1.1 keep-alive, fixed concurrency, HDR histogram",
        }),
        rows,
        memory,
        targets: Vec::new(),
    };
    if args.quick {
        // One short round measures start-up more than speed: show that
        // everything runs, but neither judge the targets nor overwrite the
        // results of a real run.
        println!("{}", report.markdown());
        println!(
            "Quick smoke run (one 1-second round): not a measurement; targets are judged only on a full run, and nothing was written."
        );
        return Ok(());
    }
    report.targets = targets(&report, args.streams);
    if args.only.is_some() {
        println!("{}", report.markdown());
        return Ok(());
    }
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        args.out.join("latest.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    let markdown = report.markdown();
    std::fs::write(args.out.join("latest.md"), &markdown)?;
    println!("{markdown}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rates: &[(&str, f64)]) -> Report {
        let round = |rate| report::Round {
            rate,
            p50_ms: 1.0,
            p99_ms: 1.0,
            cpu_per_10k: 0.1,
            peak_mib: 1.0,
            errors: 0,
        };
        Report {
            context: json!({}),
            rows: rates
                .iter()
                .map(|(server, rate)| {
                    report::Row::new("HTTP tools/call, c=32", server, vec![round(*rate)])
                })
                .collect(),
            memory: Vec::new(),
            targets: Vec::new(),
        }
    }

    #[test]
    fn the_two_hop_bound_adds_the_servers_own_work_to_the_faster_forwarder() {
        // The full run of 2026-12-02 (fat LTO).
        let run = report(&[
            (TOOLGATE, 87_394.0),
            (CEILING, 151_491.0),
            (FORWARDER, 43_369.0),
            (FORWARDER_ONE_THREAD, 44_769.0),
        ]);
        let (bound, direct) = two_hop_bound(&run).unwrap();
        assert_eq!(direct, 87_394.0);
        // 1 / (1/44,769 + 1/87,394 − 1/151,491) s per call.
        assert!((bound - 36_794.0).abs() < 5.0, "{bound}");
        // Without a gateway row there is nothing to judge against it.
        let judged = targets(&run, 0);
        assert!(!judged.iter().any(|t| t.target.contains("two-hop bound")));
        // The gateway of that run came within 2 % of the bound: it meets
        // the 0.9× target, and one a fifth slower would not.
        let with = |gateway: f64| {
            let run = report(&[
                (TOOLGATE, 87_394.0),
                (CEILING, 151_491.0),
                (FORWARDER, 43_369.0),
                (FORWARDER_ONE_THREAD, 44_769.0),
                (GATEWAY, gateway),
            ]);
            targets(&run, 0)
                .into_iter()
                .find(|t| t.target.contains("two-hop bound"))
                .map(|t| (t.measured, t.holds))
        };
        assert_eq!(
            with(36_166.0),
            Some((
                "0.98× (36166/s against 36794/s; the bound is 0.42× direct)".to_owned(),
                true
            ))
        );
        assert_eq!(with(29_000.0).map(|(_, holds)| holds), Some(false));
        // Without the forwarder or the ceiling there is nothing to judge.
        assert!(two_hop_bound(&report(&[(TOOLGATE, 1.0), (CEILING, 2.0)])).is_none());
    }
}
