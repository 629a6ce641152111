//! `toolgate serve`: a gateway in front of the configured servers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use comfy_table::{Table, presets};
use toolgate_gateway::call::metrics::Metrics;
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_review::lock::LockFile;
use toolgate_server::transport::http::serve_listener;
use toolgate_server::transport::stdio::serve_stdio;

use crate::term::one_line;
use crate::{errln, exit, outln, target};

/// Options of `toolgate serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The configuration: toolgate.toml, or a hosts' mcpServers JSON file.
    #[arg(long, value_name = "FILE", default_value = "toolgate.toml")]
    pub config: PathBuf,
    /// Serve Streamable HTTP at http://ADDR/mcp (HOST:PORT).
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    pub http: Option<String>,
    /// Serve one host over stdio.
    #[arg(long)]
    pub stdio: bool,
    /// With --stdio: serve this endpoint (`[endpoints.NAME]`) instead of
    /// the default one (over HTTP every endpoint is served at its path).
    #[arg(long, value_name = "NAME", requires = "stdio")]
    pub endpoint: Option<String>,
    /// Withhold tools whose definition differs from this lock file.
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Start every upstream, list their tools, print a table and exit
    /// (1 if the lock withholds tools or a policy rule matches none, 3
    /// if an upstream fails; tools the policy denies are not a failure).
    #[arg(long)]
    pub check: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics (keep it on
    /// loopback or a private network: it names every tool and caller
    /// count).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Serve the console at http://ADDR/console (as `[console] listen`;
    /// keep it on loopback): upstreams, tools, approvals, calls,
    /// grants and the configuration, behind a one-time login link.
    #[arg(long, value_name = "ADDR")]
    pub console: Option<String>,
    /// Worker threads (default: one per CPU core, and one thread in all
    /// on a machine of two cores or fewer). With 1 the gateway runs on
    /// a single thread, which spends the least CPU per call where it
    /// shares a small machine with its upstreams or callers.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Print the configuration's JSON Schema and exit.
    #[arg(long)]
    pub print_schema: bool,
    /// Reload the configuration when its file changes, as on SIGHUP:
    /// only upstreams whose entries changed restart, calls in flight
    /// finish, a file that does not load keeps the running one.
    #[arg(long)]
    pub watch: bool,
}

fn read_lock(path: &Path) -> anyhow::Result<LockFile> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        exit::fail(
            exit::USAGE,
            format!(
                "cannot read the lock file {}: {e} (write it with `toolgate lock --config FILE --all`)",
                path.display()
            ),
        )
    })?;
    LockFile::parse(&text).map_err(|e| exit::fail_with(exit::USAGE, path.display().to_string(), e))
}

/// `toolgate serve`.
pub async fn serve(o: ServeArgs) -> anyhow::Result<u8> {
    if !o.check && !o.stdio && o.http.is_none() {
        return Err(exit::fail(
            exit::USAGE,
            "say where to serve: --http ADDR (Streamable HTTP at /mcp) or --stdio (one host); or --check",
        ));
    }
    let mut config = GatewayConfig::load(&o.config)
        .map_err(|e| exit::fail(exit::USAGE, toolgate_protocol::error::with_causes(&e)))?;
    if let Some(addr) = &o.console {
        let mut console = config.console.take().unwrap_or_default();
        console.listen = Some(addr.clone());
        config.console = Some(console);
    }
    let sandboxed: Vec<toolgate_gateway::config::UpstreamConfig> = config
        .servers
        .values()
        .filter(|c| c.enabled && c.sandbox.is_some())
        .cloned()
        .collect();
    let auth_config = config.auth.clone().filter(|_| o.http.is_some());
    let auth =
        match (&config.auth, &o.http) {
            (Some(auth), Some(_)) => Some(Arc::new(auth.resource_server().map_err(|e| {
                exit::fail(exit::USAGE, toolgate_protocol::error::with_causes(&e))
            })?)),
            _ => None,
        };
    let lock = o.lock.as_deref().map(read_lock).transpose()?;
    let telemetry = toolgate_gateway::call::telemetry::Telemetry::install(&config.telemetry)
        .map_err(|e| exit::fail(exit::USAGE, toolgate_protocol::error::with_causes(&e)))?;
    let listener =
        match &o.http {
            Some(addr) => {
                let addr = target::socket_address(addr).ok_or_else(|| {
                    exit::fail(exit::USAGE, format!("--http {addr:?} is not HOST:PORT"))
                })?;
                Some(tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
                    exit::fail(exit::USAGE, format!("cannot listen on {addr}: {e}"))
                })?)
            }
            None => None,
        };
    let options = GatewayOptions {
        lock,
        lock_file: o.lock.clone(),
        check: o.check,
        // Sandboxed stdio servers start through this binary's launcher.
        launcher: std::env::current_exe().ok(),
        ..Default::default()
    };
    // With its causes: a key file that cannot be read says why.
    let gateway = Gateway::start(config, options).await.map_err(|e| {
        exit::fail(
            exit::USAGE,
            one_line(&toolgate_protocol::error::with_causes(&e)),
        )
    })?;
    if o.check {
        let names: Vec<&str> = sandboxed.iter().map(|c| c.name.as_str()).collect();
        let code = check(&gateway, &names);
        let sandboxes = crate::sandbox::report(&sandboxed);
        return Ok(code.max(sandboxes));
    }
    // The approval page and the console are surfaces over the running
    // gateway, on the socket it bound at start.
    toolgate_gateway::surface::page::serve(&gateway)
        .await
        .map_err(|e| {
            exit::fail(
                exit::USAGE,
                one_line(&toolgate_protocol::error::with_causes(&e)),
            )
        })?;
    if let (Some(console), Some(login)) = (gateway.console_url(), gateway.approval_login()) {
        errln!("toolgate: console at {console}");
        errln!("toolgate: log in to the console (once, in your browser): {login}");
    } else if let (Some(page), Some(login)) = (gateway.approval_page(), gateway.approval_login()) {
        errln!("toolgate: calls waiting for approval at {page}");
        // Only the person who reads this can decide: the link logs one
        // browser in, once (a fresh one follows each use).
        errln!("toolgate: log in to the approval page (once, in your browser): {login}");
    }
    // Each link logs one browser in: the next is printed where the first
    // was, so nobody needs a restart (or -v) to log in again.
    if let Some(mut links) = gateway.login_links() {
        links.mark_unchanged();
        tokio::spawn(async move {
            while links.changed().await.is_ok() {
                let next = links.borrow_and_update().clone();
                errln!(
                    "toolgate: the login link was used; the next one (once, in your browser): {next}"
                );
            }
        });
    }
    if let Some(addr) = &o.metrics {
        serve_metrics(addr, gateway.metrics(), gateway.status_routes()).await?;
    }
    // SIGHUP is taken from here on (registered before the gateway says it
    // serves, so a reload asked for right after is not a hang-up).
    let asked = reload_requests(&o.config, o.watch);
    let reloader = tokio::spawn(reload_on_request(gateway.clone(), o.config.clone(), asked));
    let server = match &o.endpoint {
        None => gateway.server(),
        Some(name) => {
            let endpoints = gateway.endpoints();
            match endpoints.iter().find(|e| e.name() == name) {
                Some(e) => e.server(),
                None => {
                    let known: Vec<&str> = endpoints.iter().map(|e| e.name()).collect();
                    gateway.stop();
                    return Err(exit::fail(
                        exit::USAGE,
                        format!(
                            "--endpoint {name}: {} has no [endpoints.{name}] (it has: {})",
                            o.config.display(),
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
            }
        }
    };
    let stop = stop_signal();
    let served = match listener {
        Some(listener) => {
            let local = listener.local_addr()?;
            errln!(
                "toolgate: serving {} tool(s) of {} server(s) at http://{local}/mcp",
                gateway.tool_names().len(),
                gateway.status().len()
            );
            if auth.is_none() && !local.ip().is_loopback() {
                errln!(
                    "toolgate: warning: callers are not authenticated ([auth] is not configured) on a non-loopback address"
                );
            }
            // Health answers without credentials and names nothing; each
            // endpoint has its own path and, with [auth], its own audience.
            let (main, http) =
                toolgate_gateway::surface::listener::http(&gateway, local, auth_config.as_ref())
                    .map_err(|e| exit::fail(exit::USAGE, one_line(&e.to_string())))?;
            for endpoint in gateway.endpoints() {
                errln!(
                    "toolgate: endpoint {} at http://{local}{} ({} tool(s))",
                    endpoint.name(),
                    endpoint.path(),
                    endpoint.tool_names().len()
                );
            }
            tokio::select! {
                served = serve_listener(main, http, listener) => served,
                () = stop => Ok(()),
            }
        }
        None => tokio::select! {
            served = serve_stdio(server) => served,
            () = stop => Ok(()),
        },
    };
    reloader.abort();
    gateway.stop();
    if let Some(telemetry) = &telemetry {
        telemetry.flush().await;
    }
    served?;
    Ok(exit::OK)
}

/// `/metrics`, and the per-upstream `/status` document, on `addr`, in the
/// background.
async fn serve_metrics(
    addr: &str,
    metrics: Arc<Metrics>,
    status: axum::Router,
) -> anyhow::Result<()> {
    let addr = target::socket_address(addr)
        .ok_or_else(|| exit::fail(exit::USAGE, format!("--metrics {addr:?} is not HOST:PORT")))?;
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| exit::fail(exit::USAGE, format!("cannot listen on {addr}: {e}")))?;
    let app = status.route(
        "/metrics",
        axum::routing::get(move || {
            let text = metrics.encode();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    text,
                )
            }
        }),
    );
    let local = listener.local_addr()?;
    errln!("toolgate: metrics at http://{local}/metrics");
    errln!("toolgate: upstream status at http://{local}/status");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    });
    Ok(())
}

/// Reload the configuration at `path` each time it is `asked` (SIGHUP, or a
/// change of the file). A file that does not load or a configuration that
/// cannot work keeps the running one, and says why.
async fn reload_on_request(
    gateway: Gateway,
    path: PathBuf,
    mut asked: tokio::sync::mpsc::Receiver<()>,
) {
    while asked.recv().await.is_some() {
        // One line each, whatever the error spans, so a log keeps it whole.
        match gateway.reload_from(&path).await {
            Ok(report) => errln!(
                "toolgate: reloaded {}: {}",
                path.display(),
                report.summary()
            ),
            Err(e) => errln!(
                "toolgate: not reloaded, the running configuration stays: {}",
                one_line(&toolgate_protocol::error::with_causes(&e))
            ),
        }
    }
}

/// A message for each SIGHUP, and with `watch` for each change of the
/// file at `path` (its modification time or size, checked each second by
/// path, so an editor that replaces the file is seen too).
fn reload_requests(path: &Path, watch: bool) -> tokio::sync::mpsc::Receiver<()> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            let tx = tx.clone();
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    // One pending request is enough: a reload reads the
                    // file as it is then.
                    let _ = tx.try_send(());
                }
            });
        }
    }
    if watch {
        let path = path.to_owned();
        tokio::spawn(async move {
            let stamp = |p: &Path| {
                std::fs::metadata(p)
                    .ok()
                    .map(|m| (m.modified().ok(), m.len()))
            };
            let mut last = stamp(&path);
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tick.tick().await;
                let now = stamp(&path);
                if now != last && now.is_some() {
                    last = now;
                    if tx.send(()).await.is_err() {
                        break;
                    }
                }
            }
        });
    }
    rx
}

/// Ctrl-C or SIGTERM: stop, so the upstreams' process groups are ended
/// rather than left behind (they run in groups of their own, out of the
/// terminal's reach).
fn stop_signal() -> impl std::future::Future<Output = ()> {
    // Registered now, not when first polled: a SIGTERM that arrives just
    // after the gateway said it serves is a clean stop too.
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `--check`: a table of the upstreams; the status says whether all is well.
fn check(gateway: &Gateway, sandboxed: &[&str]) -> u8 {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).set_header([
        "SERVER",
        "TRANSPORT",
        "TOOLS",
        "WITHHELD",
        "DENIED",
        "STATUS",
    ]);
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    let mut code = exit::OK;
    for s in gateway.status() {
        let status = match &s.error {
            None if !s.enabled => "disabled (not started)".to_owned(),
            Some(e) => {
                code = exit::PROTOCOL;
                format!("failing: {}", one_line(e))
            }
            None if s.withheld > 0 => {
                if code == exit::OK {
                    code = exit::FAILED;
                }
                "ok, some tools withheld by the lock file (see the log)".to_owned()
            }
            // A deliberate policy is not a failure.
            None if s.denied > 0 => "ok, some tools denied by the policy".to_owned(),
            None => "ok".to_owned(),
        };
        table.add_row([
            one_line(&s.name),
            s.transport.to_owned(),
            s.offered.to_string(),
            s.withheld.to_string(),
            s.denied.to_string(),
            status,
        ]);
    }
    for line in table.lines() {
        outln!("{}", line.trim_end());
    }
    // What injected content could do through these tools together.
    let flows = gateway.flow_findings();
    if !flows.is_empty() {
        outln!();
        outln!(
            "{} combination(s) of tools that can leak or destroy on an injected instruction (toolgate audit --flows says more):",
            flows.len()
        );
        for f in &flows {
            outln!(
                "  [{}] {} {}: {}",
                f.severity.to_string().to_uppercase(),
                f.rule,
                one_line(&f.tool),
                one_line(&f.message)
            );
            outln!("      {}", one_line(&f.fix));
        }
    }
    // What a failing server said last, as `toolgate call` shows it.
    for s in gateway.status().iter().filter(|s| s.error.is_some()) {
        if !s.stderr.is_empty() {
            outln!();
            outln!("{}: the last lines it wrote to stderr:", one_line(&s.name));
            for line in &s.stderr {
                outln!("  | {}", one_line(line));
            }
        }
        if sandboxed.contains(&s.name.as_str()) {
            outln!(
                "{}: it runs in a sandbox: see below what this machine enforces; a file or directory it needs may be missing from the sandbox's `read` or `write`",
                one_line(&s.name)
            );
        } else if s.transport == "stdio" {
            outln!(
                "{}: a stdio server gets a minimal environment (PATH, HOME, locale, proxies); give it what it needs with `env`, or `inherit_env = true`",
                one_line(&s.name)
            );
        }
    }
    // A rule that matches nothing is a typo more often than a plan: under
    // `default = "allow"` the tools it meant to stop run.
    let unmatched = gateway.unmatched_rules();
    if !unmatched.is_empty() {
        outln!();
        for rule in unmatched {
            outln!("warning: policy {rule} matches no tool of any upstream");
        }
        if code == exit::OK {
            code = exit::FAILED;
        }
    }
    // A rule placed after one that already decides all its calls does
    // nothing, silently: a deny after a confirm of the same tools.
    let shadowed = gateway.shadowed_rules();
    if !shadowed.is_empty() {
        outln!();
        for rule in shadowed {
            outln!("warning: policy {rule}: move it before them, or remove it");
        }
        if code == exit::OK {
            code = exit::FAILED;
        }
    }
    gateway.stop();
    code
}
