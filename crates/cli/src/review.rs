//! `toolgate audit`, `toolgate lock` and `toolgate verify`.

use std::path::Path;

use toolgate_client::ClientError;
use toolgate_review::lock::{Change, LockFile, compare, lock_server};
use toolgate_review::{ServerTools, Severity, audit, capabilities, sarif};

use crate::exit;
use crate::input::Answers;
use crate::target::{self, Reach, Target};
use crate::term::one_line;
use crate::{errln, outln};

/// Which servers a command looks at.
pub struct Targets<'a> {
    /// A URL, address or config name.
    pub target: Option<&'a str>,
    /// Every server of the config file.
    pub all: bool,
    /// `-- COMMAND ARGS...`.
    pub command: &'a [String],
    /// How to reach them.
    pub reach: Reach,
}

/// The servers whose tools could be listed, and the exit status the
/// others call for (0 when every server answered).
struct Fetched {
    servers: Vec<ServerTools>,
    failure: u8,
}

async fn fetch(t: &Targets<'_>) -> anyhow::Result<Fetched> {
    let targets: Vec<Target> = if t.all {
        if t.target.is_some() || !t.command.is_empty() {
            return Err(exit::fail(
                exit::USAGE,
                "--all takes every server of the config file; give no TARGET or COMMAND with it",
            ));
        }
        target::resolve_all(&t.reach)?
    } else {
        vec![target::resolve(t.target, t.command, &t.reach)?]
    };
    let mut fetched = Fetched {
        servers: Vec::new(),
        failure: exit::OK,
    };
    let progress = Progress::new(targets.len());
    for target in targets {
        progress.start(&target.name);
        // Listed as the gateway lists it, so a lock file holds exactly
        // what `toolgate serve --lock` will compare.
        let listed = match target.connect(&t.reach, Answers::as_gateway()) {
            Ok(conn) => conn
                .client
                .list_tools()
                .await
                .map_err(|e: ClientError| conn.fail(e, "listing tools")),
            Err(e) => Err(e),
        };
        match listed {
            Ok(tools) => fetched.servers.push(ServerTools {
                server: target.name.clone(),
                tools,
            }),
            // One server is the whole command: its failure is the answer.
            Err(e) if !t.all => return Err(e),
            Err(e) => {
                progress.say(&format!(
                    "toolgate: skipping {}: {}",
                    one_line(&target.name),
                    one_line(&format!("{e:#}"))
                ));
                // Timeouts only when every failure was one.
                let code = exit::for_error(&e);
                fetched.failure = match fetched.failure {
                    exit::OK => code,
                    previous if previous == code => code,
                    _ => exit::PROTOCOL,
                };
            }
        }
        progress.advance();
    }
    progress.finish();
    if fetched.failure != exit::OK {
        let failed = "some servers could not be listed (see above); the rest were";
        errln!("toolgate: {failed}");
    }
    Ok(fetched)
}

/// A progress bar over the servers being listed, drawn on stderr when it
/// is a terminal and there is more than one server; nothing otherwise.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new(servers: usize) -> Self {
        use std::io::IsTerminal as _;
        if servers < 2 || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new(servers as u64);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} servers  {wide_msg}")
        {
            bar.set_style(style);
        }
        Progress(Some(bar))
    }

    /// Listing `server` now.
    fn start(&self, server: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(format!("listing {}", one_line(server)));
        }
    }

    /// One more server listed (or skipped).
    fn advance(&self) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
        }
    }

    /// A line on stderr, above the bar.
    fn say(&self, line: &str) {
        match &self.0 {
            Some(bar) => bar.suspend(|| errln!("{line}")),
            None => errln!("{line}"),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

/// The worse of a command's own status and the listing failures.
fn status(own: u8, fetched: &Fetched) -> u8 {
    if fetched.failure != exit::OK {
        fetched.failure
    } else {
        own
    }
}

/// `findings` as JSON, or as SARIF 2.1.0 (for code-scanning interfaces).
pub(crate) fn print_data(
    findings: &[toolgate_review::Finding],
    format: Format,
) -> anyhow::Result<()> {
    if format == Format::Sarif {
        let report = sarif::to_sarif(findings, env!("CARGO_PKG_VERSION"));
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!("{}", serde_json::to_string_pretty(findings)?);
    }
    Ok(())
}

/// Output format of `audit`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// For people.
    Text,
    /// JSON findings.
    Json,
    /// SARIF 2.1.0.
    Sarif,
}

/// `toolgate audit`.
pub async fn run_audit(
    t: Targets<'_>,
    format: Format,
    fail_on: Option<Severity>,
) -> anyhow::Result<u8> {
    let fetched = fetch(&t).await?;
    let servers = &fetched.servers;
    let findings = audit(servers);
    match format {
        Format::Json | Format::Sarif => print_data(&findings, format)?,
        Format::Text => {
            let tool_count: usize = servers.iter().map(|s| s.tools.len()).sum();
            outln!(
                "Audited {tool_count} tool(s) on {} server(s): {} finding(s).\n",
                servers.len(),
                findings.len()
            );
            crate::findings::print(&findings);
            let caps = capabilities(servers);
            outln!();
            if caps.is_empty() {
                outln!("No tool looks able to write, delete, send, spend or execute.");
            } else {
                outln!("Tools that can change things (a person should approve each call):");
                for (server, tool, effects) in caps {
                    let list: Vec<String> = effects
                        .iter()
                        .map(|e| format!("{e:?}").to_lowercase())
                        .collect();
                    outln!(
                        "  {}/{}: {}",
                        one_line(&server),
                        one_line(&tool),
                        list.join(", ")
                    );
                }
            }
        }
    }
    let failing = fail_on.is_some_and(|level| findings.iter().any(|f| f.severity >= level));
    Ok(status(
        if failing { exit::FAILED } else { exit::OK },
        &fetched,
    ))
}

fn read_lock(path: &Path) -> anyhow::Result<Option<LockFile>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(LockFile::parse(&text).map_err(|e| {
            exit::fail_with(exit::USAGE, path.display().to_string(), e)
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(exit::fail(
            exit::USAGE,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// The changes of one server, in three sections: tools nobody reviewed,
/// tools gone, and tools changed (field by field, old above new).
fn print_changes(server: &str, changes: &[Change]) {
    let server = one_line(server);
    let (mut added, mut removed, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    for change in changes {
        match change {
            Change::Added(t) => added.push(t),
            Change::Removed(t) => removed.push(t),
            Change::Changed(..) => changed.push(change),
        }
    }
    if !added.is_empty() {
        outln!("{server}: {} new tool(s), not reviewed:", added.len());
        for tool in added {
            outln!("+ {server}/{}: added", one_line(tool));
        }
    }
    if !removed.is_empty() {
        outln!("{server}: {} tool(s) removed:", removed.len());
        for tool in removed {
            outln!("- {server}/{}: removed", one_line(tool));
        }
    }
    if !changed.is_empty() {
        outln!("{server}: {} tool(s) changed:", changed.len());
        for change in changed {
            if let Change::Changed(tool, _) = change {
                outln!("~ {server}/{}: changed", one_line(tool));
            }
            for line in change.lines().iter().flat_map(|w| w.lines()) {
                outln!("    {}", one_line(line));
            }
        }
    }
}

/// `toolgate lock`.
pub async fn run_lock(t: Targets<'_>, path: &Path, update: bool) -> anyhow::Result<u8> {
    let fetched = fetch(&t).await?;
    let mut lock = read_lock(path)?.unwrap_or_default();
    // Entries written now are version 2; version-1 entries still compare.
    lock.version = toolgate_review::lock::VERSION;
    let mut refused = false;
    for server in &fetched.servers {
        if let Some(existing) = lock.servers.get(&server.server) {
            let changes = compare(existing, &server.tools);
            if !changes.is_empty() && !update {
                print_changes(&server.server, &changes);
                errln!(
                    "toolgate: {} changed since it was locked; review the changes and pass --update to accept them",
                    one_line(&server.server)
                );
                refused = true;
                continue;
            }
        }
        lock.servers
            .insert(server.server.clone(), lock_server(&server.tools));
        outln!(
            "locked {} tool(s) of {}",
            server.tools.len(),
            one_line(&server.server)
        );
    }
    std::fs::write(path, lock.render())
        .map_err(|e| exit::fail(exit::USAGE, format!("cannot write {}: {e}", path.display())))?;
    Ok(status(
        if refused { exit::FAILED } else { exit::OK },
        &fetched,
    ))
}

/// One server's changes as JSON: added and removed tools, and each changed
/// tool as a JSON Patch from the locked definition to the live one.
fn changes_json(changes: &[Change]) -> serde_json::Value {
    let mut added = Vec::new();
    let mut removed = Vec::new();
    let mut changed = serde_json::Map::new();
    for change in changes {
        match change {
            Change::Added(t) => added.push(t.clone()),
            Change::Removed(t) => removed.push(t.clone()),
            Change::Changed(t, fields) => {
                let patch: Vec<serde_json::Value> = fields.iter().map(|f| f.patch()).collect();
                changed.insert(t.clone(), serde_json::Value::Array(patch));
            }
        }
    }
    serde_json::json!({
        "status": if changes.is_empty() { "matches" } else { "changed" },
        "added": added,
        "removed": removed,
        "changed": changed,
    })
}

/// `toolgate verify`.
pub async fn run_verify(t: Targets<'_>, path: &Path, json: bool) -> anyhow::Result<u8> {
    let Some(lock) = read_lock(path)? else {
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "no lock file at {}; create it with `toolgate lock`",
                path.display()
            ),
        ));
    };
    let fetched = fetch(&t).await?;
    let mut changed = false;
    let mut report = serde_json::Map::new();
    for server in &fetched.servers {
        let Some(locked) = lock.servers.get(&server.server) else {
            if json {
                report.insert(
                    server.server.clone(),
                    serde_json::json!({"status": "not locked"}),
                );
            } else {
                outln!(
                    "! {}: not in {}; lock it with `toolgate lock`",
                    one_line(&server.server),
                    path.display()
                );
            }
            changed = true;
            continue;
        };
        let changes = compare(locked, &server.tools);
        changed |= !changes.is_empty();
        if json {
            report.insert(server.server.clone(), changes_json(&changes));
        } else if changes.is_empty() {
            outln!(
                "{}: {} tool(s) match the lock",
                one_line(&server.server),
                server.tools.len()
            );
        } else {
            print_changes(&server.server, &changes);
        }
    }
    if json {
        let out = serde_json::json!({"lock": path.display().to_string(), "servers": report});
        outln!("{}", serde_json::to_string_pretty(&out)?);
    }
    if changed {
        errln!(
            "toolgate: the tools differ from {}; review, then `toolgate lock --update` to accept",
            path.display()
        );
    }
    Ok(status(
        if changed { exit::FAILED } else { exit::OK },
        &fetched,
    ))
}

/// One finding as `audit` prints it: severity, rule, where, what; its
/// evidence; and its last line under `last` (`fix:`, or what holds it).
pub(crate) fn print_finding(f: &toolgate_review::Finding, last: &str) {
    outln!(
        "[{}] {} {}/{}: {}",
        f.severity.to_string().to_uppercase(),
        f.rule,
        one_line(&f.server),
        one_line(&f.tool),
        one_line(&f.message)
    );
    outln!("    evidence: {}", one_line(&f.evidence));
    outln!("    {last} {}", one_line(&f.fix));
}

/// The options of `toolgate audit`.
#[derive(clap::Args)]
pub struct AuditCommand {
    #[command(flatten)]
    pub servers: crate::args::ServerArgs,
    /// Findings as JSON.
    #[arg(long, conflicts_with = "sarif")]
    pub json: bool,
    /// Findings as SARIF 2.1.0 (for code-scanning interfaces).
    #[arg(long)]
    pub sarif: bool,
    /// Exit 1 if any finding is at least this severe (info, low, medium, high).
    #[arg(long, value_name = "LEVEL", value_parser = crate::args::parse_severity)]
    pub fail_on: Option<toolgate_review::Severity>,
    /// Report flows instead: each tool's flow classes (untrusted, private,
    /// sink, destructive) and the combinations across the servers that can
    /// leak private data or destroy on an injected instruction, with the
    /// `[flows]` rule that holds each at run time.
    #[arg(long)]
    pub flows: bool,
}

/// `toolgate audit`, as the command line gave it.
pub async fn audit_command(command: AuditCommand) -> anyhow::Result<u8> {
    let AuditCommand {
        servers,
        json,
        sarif,
        fail_on,
        flows,
    } = command;
    let format = if sarif {
        Format::Sarif
    } else if json {
        Format::Json
    } else {
        Format::Text
    };
    if flows {
        let t = servers.targets();
        let fetched = fetch(&t).await?;
        let config = t
            .reach
            .config
            .clone()
            .unwrap_or_else(|| std::path::PathBuf::from("mcp.json"));
        let code = crate::flows::report(&fetched.servers, Some(&config), format, fail_on)?;
        return Ok(status(code, &fetched));
    }
    run_audit(servers.targets(), format, fail_on).await
}

/// The options of `toolgate lock`.
#[derive(clap::Args)]
pub struct LockCommand {
    #[command(flatten)]
    pub servers: crate::args::ServerArgs,
    /// The lock file.
    #[arg(long, default_value = "toolgate.lock")]
    pub lock: std::path::PathBuf,
    /// Accept changes to servers already locked.
    #[arg(long)]
    pub update: bool,
}

/// `toolgate lock`, as the command line gave it.
pub async fn lock_command(command: LockCommand) -> anyhow::Result<u8> {
    let LockCommand {
        servers,
        lock,
        update,
    } = command;
    run_lock(servers.targets(), &lock, update).await
}

/// The options of `toolgate verify`.
#[derive(clap::Args)]
pub struct VerifyCommand {
    #[command(flatten)]
    pub servers: crate::args::ServerArgs,
    /// The lock file.
    #[arg(long, default_value = "toolgate.lock")]
    pub lock: std::path::PathBuf,
    /// Print the result as JSON: per server, the tools added and
    /// removed, and for each changed tool an RFC 6902 JSON Patch from the
    /// locked definition to the live one.
    #[arg(long)]
    pub json: bool,
}

/// `toolgate verify`, as the command line gave it.
pub async fn verify_command(command: VerifyCommand) -> anyhow::Result<u8> {
    let VerifyCommand {
        servers,
        lock,
        json,
    } = command;
    run_verify(servers.targets(), &lock, json).await
}
