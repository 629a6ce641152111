//! The servers under test: which ones there are, their labels, and how
//! each is started (the gateway rows with their upstream).

use std::path::PathBuf;

use toolgate_bench::process::{self, Server};
use toolgate_bench::report::{CEILING, RMCP_BEST, RMCP_DEFAULT, TOOLGATE};

pub(crate) struct Bins {
    pub(crate) toolgate: PathBuf,
    pub(crate) rmcp: PathBuf,
    pub(crate) ceiling: PathBuf,
    pub(crate) forwarder: PathBuf,
    /// The `toolgate` command, for `toolgate serve`.
    pub(crate) cli: PathBuf,
    /// Node and the npm `mcp-proxy` script (`TOOLGATE_BENCH_NODE`,
    /// `TOOLGATE_BENCH_MCP_PROXY`, set by `cargo xtask bench`).
    pub(crate) mcp_proxy: Option<(PathBuf, PathBuf)>,
    /// The PyPI `mcp-proxy` command (`TOOLGATE_BENCH_MCP_PROXY_PY`).
    pub(crate) mcp_proxy_py: Option<PathBuf>,
    /// ContextForge's virtual environment (`TOOLGATE_BENCH_CONTEXTFORGE`).
    pub(crate) contextforge: Option<PathBuf>,
}

#[derive(Clone, Copy)]
pub(crate) enum Kind {
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
    /// The same with the call log in front of the store, `durability =
    /// "process"`: each record written (not synced) before the answer.
    GatewayLogged,
    /// The same with `durability = "sync"`: each answer waits for its
    /// group's sync of the log.
    GatewayLoggedSync,
    /// The same gateway serving a named endpoint (`[endpoints.bench]`, at
    /// `/mcp` in the default's place) with three shaped tools, the called
    /// one among them.
    GatewayEndpoint,
    /// The same gateway tracking every call's flow: the called tool is
    /// classed `untrusted` and `sink`, so each call reads its flow's labels
    /// and adds one (a rule allows it, so none is held).
    GatewayFlows,
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
pub(crate) const GATEWAY: &str = "toolgate gateway → toolgate";

/// The label of the two-worker gateway row.
pub(crate) const GATEWAY_TWO_THREADS: &str = "toolgate gateway --threads 2 → toolgate";

/// The label of the gateway row fronting a stdio server.
pub(crate) const GATEWAY_STDIO: &str = "toolgate gateway → toolgate (stdio)";

/// The label of the two-hop ceiling row.
pub(crate) const FORWARDER: &str = "bare HTTP forwarder → toolgate (two-hop ceiling)";

/// The label of the one-thread two-hop ceiling row.
pub(crate) const FORWARDER_ONE_THREAD: &str = "bare HTTP forwarder, one thread → toolgate";

/// The label of the npm `mcp-proxy` row.
pub(crate) const MCP_PROXY: &str = "mcp-proxy 6.7.19 (npm) → toolgate (stdio)";

/// The label of the ContextForge row.
pub(crate) const CONTEXTFORGE: &str = "ContextForge 1.0.7 (PyPI) → toolgate";

/// The label of the PyPI `mcp-proxy` row.
pub(crate) const MCP_PROXY_PY: &str = "mcp-proxy 0.13.0 (PyPI) → toolgate (stdio)";

/// The scenario comparing proxies in front of a stdio server.
pub(crate) const PROXIED: &str = "HTTP tools/call via a proxy to a stdio server, c=32";

/// The label of the named-endpoint gateway row.
pub(crate) const GATEWAY_ENDPOINT: &str = "toolgate gateway, endpoint with 3 shaped tools";

/// The label of the gateway row tracking flows on every call.
pub(crate) const GATEWAY_FLOWS: &str = "toolgate gateway, flow tracked on every call";

/// The label of the gateway row with the audit store on.
pub(crate) const GATEWAY_AUDITED: &str = "toolgate gateway, audit store on";

/// The label of the gateway row with the call log, `durability = "process"`.
pub(crate) const GATEWAY_LOGGED: &str = "toolgate gateway, call log (process)";

/// The label of the gateway row with the call log, `durability = "sync"`.
pub(crate) const GATEWAY_LOGGED_SYNC: &str = "toolgate gateway, call log (sync)";

/// The label of the two-instance gateway row.
pub(crate) const GATEWAY_SHARED: &str = "toolgate gateway ×2, PostgreSQL + Redis";

/// The label of the authenticated, rate-limited toolgate row.
pub(crate) const SECURED: &str = "toolgate, JWT + rate limit";

impl Kind {
    pub(crate) fn label(self) -> &'static str {
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
            Kind::GatewayLogged => GATEWAY_LOGGED,
            Kind::GatewayLoggedSync => GATEWAY_LOGGED_SYNC,
            Kind::GatewayEndpoint => GATEWAY_ENDPOINT,
            Kind::GatewayFlows => GATEWAY_FLOWS,
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
pub(crate) async fn start_upstream(
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
pub(crate) async fn start_gateway(
    bins: &Bins,
    extra: usize,
    audited: Audit,
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

/// `toolgate serve --http` with the toolgate server as its one upstream,
/// served through a named endpoint that shapes three of its tools (the
/// called one among them) and takes the default's path, so requests are
/// the same as to the default endpoint.
async fn start_endpoint_gateway(bins: &Bins, extra: usize) -> anyhow::Result<Server> {
    let (upstream, upstream_addr) = start_upstream(bins, extra).await?;
    let mut toml = format!(
        "[servers.up]\nurl = \"http://{upstream_addr}/mcp\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n[audit]\ndisabled = true\n[endpoints.bench]\npath = \"/mcp\"\nservers = [\"up\"]\n"
    );
    for tool in [
        "test_simple_text",
        toolgate_bench::tools::ORDER_TOOL,
        toolgate_bench::tools::ORDER_TOOL_UNCHECKED,
    ] {
        toml.push_str(&format!(
            "[endpoints.bench.shape.{tool:?}]\ntitle = \"Shaped {tool}\"\ndescription_append = \"Shaped for the bench.\"\n"
        ));
    }
    let mut gateway = serve_config(bins, &toml, &[]).await?;
    gateway.upstream = Some(Box::new(upstream));
    Ok(gateway)
}

/// `toolgate serve --http` with the toolgate server as its one upstream,
/// every tool classed `untrusted` and `sink`, and a rule that allows a
/// sink after untrusted content: each call reads its flow's labels, is
/// decided, and adds a label — the whole of flow tracking, held never.
async fn start_flows_gateway(bins: &Bins, extra: usize) -> anyhow::Result<Server> {
    let (upstream, upstream_addr) = start_upstream(bins, extra).await?;
    let toml = format!(
        "[servers.up]\nurl = \"http://{upstream_addr}/mcp\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n[audit]\ndisabled = true\n[[flows.classes]]\ntools = [\"*\"]\nclasses = [\"untrusted\", \"sink\"]\n[[flows.rules]]\nafter = [\"untrusted\"]\ncalls = [\"sink\"]\naction = \"allow\"\n"
    );
    let mut gateway = serve_config(bins, &toml, &[]).await?;
    gateway.upstream = Some(Box::new(upstream));
    Ok(gateway)
}

/// Two `toolgate serve --http` instances in front of one toolgate server,
/// sharing PostgreSQL and Redis (`TOOLGATE_BENCH_POSTGRES`,
/// `TOOLGATE_BENCH_REDIS`, which `cargo xtask bench` starts) and the state
/// key. Every call is audited and rate-limited (a limit far above the
/// load: checked on every call, never refusing). The first instance holds
/// the second as its `upstream`, which holds the server.
pub(crate) async fn start_shared_gateways(bins: &Bins, extra: usize) -> anyhow::Result<Server> {
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
pub(crate) async fn serve_config(
    bins: &Bins,
    toml: &str,
    extra: &[&str],
) -> anyhow::Result<Server> {
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
pub(crate) async fn serve_gateway(
    bins: &Bins,
    server: &str,
    audited: Audit,
    args: &[&str],
) -> anyhow::Result<Server> {
    static STORES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let durability = match audited {
        Audit::Log(setting) => format!("durability = {setting:?}\n"),
        Audit::Store => "durability = \"commit\"\n".to_owned(),
        Audit::Off => String::new(),
    };
    let audit = if audited != Audit::Off {
        let n = STORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let db = std::env::temp_dir().join(format!(
            "toolgate-bench-audit-{}-{n}.db",
            std::process::id()
        ));
        // A fresh store per run: the figures are not those of a grown file.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        let _ = std::fs::remove_dir_all(format!("{}.log", db.display()));
        format!(
            "[audit]\npath = {:?}\n{durability}",
            db.display().to_string()
        )
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

/// What audit store a gateway row keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Audit {
    /// None.
    Off,
    /// SQLite, each row committed before its answer.
    Store,
    /// SQLite behind the call log, with this `durability`.
    Log(&'static str),
}

pub(crate) async fn start(bins: &Bins, kind: Kind, extra: usize) -> anyhow::Result<Server> {
    if matches!(
        kind,
        Kind::Gateway
            | Kind::GatewayAudited
            | Kind::GatewayLogged
            | Kind::GatewayLoggedSync
            | Kind::GatewayTwoThreads
    ) {
        let args: &[&str] = if matches!(kind, Kind::GatewayTwoThreads) {
            &["--threads", "2"]
        } else {
            &[]
        };
        let audit = match kind {
            Kind::GatewayAudited => Audit::Store,
            Kind::GatewayLogged => Audit::Log("process"),
            Kind::GatewayLoggedSync => Audit::Log("sync"),
            _ => Audit::Off,
        };
        return start_gateway(bins, extra, audit, args).await;
    }
    if matches!(kind, Kind::GatewayShared) {
        return start_shared_gateways(bins, extra).await;
    }
    if matches!(kind, Kind::GatewayEndpoint) {
        return start_endpoint_gateway(bins, extra).await;
    }
    if matches!(kind, Kind::GatewayFlows) {
        return start_flows_gateway(bins, extra).await;
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
        return serve_gateway(bins, &server, Audit::Off, &[]).await;
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
        | Kind::GatewayLogged
        | Kind::GatewayLoggedSync
        | Kind::GatewayEndpoint
        | Kind::GatewayFlows
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
