//! `toolgate audit`, `toolgate lock` and `toolgate verify`.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use toolgate_client::Client;
use toolgate_review::lock::{Change, LockFile, compare, lock_server};
use toolgate_review::{ServerTools, Severity, audit, capabilities, sarif};

use crate::target::{self, Target};

/// Which servers a command looks at.
pub struct Targets<'a> {
    /// A URL or config name.
    pub target: Option<&'a str>,
    /// The config file.
    pub config: Option<&'a Path>,
    /// Every server of the config file.
    pub all: bool,
    /// `-- COMMAND ARGS...`.
    pub command: &'a [String],
}

fn targets(t: &Targets<'_>) -> anyhow::Result<Vec<Target>> {
    if t.all {
        return target::resolve_all(t.config);
    }
    Ok(vec![target::resolve(t.target, t.config, t.command)?])
}

async fn fetch(t: &Targets<'_>) -> anyhow::Result<Vec<ServerTools>> {
    let mut out = Vec::new();
    for target in targets(t)? {
        let client = target.client(
            Client::builder("toolgate", env!("CARGO_PKG_VERSION")),
            Duration::from_secs(60),
        )?;
        let tools = client
            .list_tools()
            .await
            .with_context(|| format!("listing the tools of {}", target.name))?;
        out.push(ServerTools {
            server: target.name.clone(),
            tools,
        });
    }
    Ok(out)
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
pub async fn audit_command(
    t: Targets<'_>,
    format: Format,
    fail_on: Option<Severity>,
) -> anyhow::Result<ExitCode> {
    let servers = fetch(&t).await?;
    let findings = audit(&servers);
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&findings)?),
        Format::Sarif => println!(
            "{}",
            serde_json::to_string_pretty(&sarif::to_sarif(&findings, env!("CARGO_PKG_VERSION")))?
        ),
        Format::Text => {
            let tool_count: usize = servers.iter().map(|s| s.tools.len()).sum();
            println!(
                "Audited {tool_count} tool(s) on {} server(s): {} finding(s).\n",
                servers.len(),
                findings.len()
            );
            for f in &findings {
                println!(
                    "[{}] {} {}/{}: {}",
                    f.severity.to_string().to_uppercase(),
                    f.rule,
                    f.server,
                    f.tool,
                    f.message
                );
                println!("    evidence: {}", f.evidence);
                println!("    fix:      {}", f.fix);
            }
            let caps = capabilities(&servers);
            println!();
            if caps.is_empty() {
                println!("No tool looks able to write, delete, send, spend or execute.");
            } else {
                println!("Tools that can change things (a person should approve each call):");
                for (server, tool, effects) in caps {
                    let list: Vec<String> = effects
                        .iter()
                        .map(|e| format!("{e:?}").to_lowercase())
                        .collect();
                    println!("  {server}/{tool}: {}", list.join(", "));
                }
            }
        }
    }
    let failing = fail_on.is_some_and(|level| findings.iter().any(|f| f.severity >= level));
    Ok(if failing {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn read_lock(path: &Path) -> anyhow::Result<Option<LockFile>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(
            LockFile::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn print_changes(server: &str, changes: &[Change]) {
    for change in changes {
        match change {
            Change::Added(tool) => println!("+ {server}/{tool}: added"),
            Change::Removed(tool) => println!("- {server}/{tool}: removed"),
            Change::Changed(tool, what) => {
                println!("~ {server}/{tool}: changed");
                for line in what.iter().flat_map(|w| w.lines()) {
                    println!("    {line}");
                }
            }
        }
    }
}

/// `toolgate lock`.
pub async fn lock_command(t: Targets<'_>, path: &Path, update: bool) -> anyhow::Result<ExitCode> {
    let servers = fetch(&t).await?;
    let mut lock = read_lock(path)?.unwrap_or(LockFile {
        version: 1,
        ..Default::default()
    });
    let mut refused = false;
    for server in &servers {
        if let Some(existing) = lock.servers.get(&server.server) {
            let changes = compare(existing, &server.tools);
            if !changes.is_empty() && !update {
                print_changes(&server.server, &changes);
                eprintln!(
                    "toolgate: {} changed since it was locked; review the changes and pass --update to accept them",
                    server.server
                );
                refused = true;
                continue;
            }
        }
        lock.servers
            .insert(server.server.clone(), lock_server(&server.tools));
        println!("locked {} tool(s) of {}", server.tools.len(), server.server);
    }
    std::fs::write(path, lock.render()).with_context(|| format!("writing {}", path.display()))?;
    Ok(if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `toolgate verify`.
pub async fn verify_command(t: Targets<'_>, path: &Path) -> anyhow::Result<ExitCode> {
    let Some(lock) = read_lock(path)? else {
        anyhow::bail!(
            "no lock file at {}; create it with `toolgate lock`",
            path.display()
        );
    };
    let servers = fetch(&t).await?;
    let mut changed = false;
    for server in &servers {
        let Some(locked) = lock.servers.get(&server.server) else {
            println!(
                "! {}: not in {}; lock it with `toolgate lock`",
                server.server,
                path.display()
            );
            changed = true;
            continue;
        };
        let changes = compare(locked, &server.tools);
        if changes.is_empty() {
            println!(
                "{}: {} tool(s) match the lock",
                server.server,
                server.tools.len()
            );
        } else {
            changed = true;
            print_changes(&server.server, &changes);
        }
    }
    if changed {
        eprintln!(
            "toolgate: the tools differ from {}; review, then `toolgate lock --update` to accept",
            path.display()
        );
    }
    Ok(if changed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
