//! Runs every scenario against every server, alternating servers within
//! each round, and writes `bench/results/latest.{json,md}`.
//!
//! Usage: `bench [--quick] [--seconds S] [--rounds R] [--out DIR]`
//! (normally through `cargo xtask bench`, which builds in release first).
//!
//! The scenarios are here; [`memory`] measures the memory figures,
//! [`servers`] starts each server under test and [`mod@targets`] judges a
//! report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use serde_json::{Value, json};
use toolgate_bench::load::{self, Target};
use toolgate_bench::report::{Report, Round, Row, TOOLGATE};
use toolgate_bench::tools::{self, ORDER_TOOL, ORDER_TOOL_UNCHECKED};
use toolgate_bench::{clients, stdio};

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
    /// With `--only`: run only the servers whose label contains this, or
    /// one of these when comma-separated (e.g. `gateway,ceiling`); the
    /// direct toolgate server always runs too, as the gateway rows'
    /// reference.
    #[arg(long, requires = "only")]
    server: Option<String>,
    /// Where to write the results.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
}

mod floor;
mod memory;
mod sandbox;
mod search;
mod servers;
mod targets;

use servers::*;
use targets::targets;

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
pub(crate) const VALIDATED: &str = "HTTP tools/call, validated tool, c=32";

/// The scenario listing a thousand tools with one client.
pub(crate) const LIST_ONE: &str = "HTTP tools/list, 1000 tools walked, c=1";

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
            let r = stdio::run(program, &["--stdio"], 64, secs)
                .await?
                .round(true);
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
pub(crate) const IDLE: &str = "idle (after a first call)";

/// Send `tools/call` with `params` for a moment, one at a time, then let
/// the server settle before its memory is read.
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
        servers.push((Kind::GatewayLogged, None, None));
        servers.push((Kind::GatewayLoggedSync, None, None));
        servers.push((Kind::GatewayEndpoint, None, None));
        servers.push((Kind::GatewayFlows, None, None));
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
                v.push((Kind::GatewayEndpoint, None, None));
                v
            },
        },
        // One client at a time: how long a model waits for an endpoint's
        // list (at c=32 the figure is queueing on two cores).
        Scenario {
            label: LIST_ONE.into(),
            method: "tools/list",
            params: json!({}),
            concurrency: 1,
            walk: true,
            extra: 1000 - tools::tool_set(0).len(),
            servers: vec![
                (Kind::Toolgate, None, None),
                (Kind::GatewayEndpoint, None, None),
            ],
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
                    || only
                        .split(',')
                        .any(|o| label.unwrap_or(kind.label()).contains(o))
            });
        }
        rows.extend(http_scenario(&bins, &s, rounds, secs).await?);
    }
    if wanted(floor::FLOOR) {
        eprintln!("== {}", floor::FLOOR);
        rows.extend(floor::rows(args.rounds)?);
    }
    if wanted("stdio") {
        eprintln!("== stdio");
        rows.extend(stdio_rows(&bins, args.rounds, secs).await?);
    }
    if wanted("sandbox") || wanted(sandbox::START) {
        eprintln!("== sandbox");
        rows.extend(sandbox::rows(&bins, args.rounds, secs).await?);
    }
    let mut search_figures = Value::Null;
    if wanted("search") || wanted(search::SEARCH) {
        eprintln!("== search");
        let (search_rows, figures) = search::rows(args.rounds).await?;
        rows.extend(search_rows);
        search_figures = figures;
    }
    if wanted("client") {
        eprintln!("== clients");
        rows.extend(client_rows(&bins, args.rounds, secs).await?);
    }
    let memory = if wanted("memory") {
        eprintln!("== memory");
        memory::rows(&bins, args.streams).await?
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
            "search": search_figures,
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
