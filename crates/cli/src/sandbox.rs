//! `toolgate sandbox`: what this machine can enforce (`check`), and the
//! launcher modes the gateway starts a sandboxed stdio server through
//! (`exec`, `enter`, `probe`; hidden). The launcher modes run before the
//! async runtime exists: namespaces and Landlock apply to the calling
//! thread, so the process must have only one.

use std::ffi::OsString;
use std::process::ExitCode;

use toolgate_sandbox::{Policy, Support};

use crate::{exit, outln};

/// What `toolgate sandbox` was asked.
#[derive(clap::Args)]
pub struct SandboxArgs {
    #[command(subcommand)]
    pub action: SandboxAction,
}

/// The sandbox's subcommands.
#[derive(clap::Subcommand)]
pub enum SandboxAction {
    /// Print what this machine can enforce, mechanism by mechanism.
    Check {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Probe the kernel in this process and print it as JSON (what `check`
    /// runs: probing restricts the prober).
    #[command(hide = true)]
    Probe,
    /// Run COMMAND in the sandbox POLICY describes (what the gateway starts).
    #[command(hide = true)]
    Exec {
        /// The resolved policy, as JSON.
        #[arg(long)]
        policy: String,
        /// The server's command.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
    /// The launcher's second stage, inside the namespaces.
    #[command(hide = true)]
    Enter {
        /// The resolved policy, as JSON.
        #[arg(long)]
        policy: String,
        /// What the first stage achieved, as JSON.
        #[arg(long)]
        stage: String,
        /// The server's command.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
}

/// Run the modes that must not start a runtime; `None` for `check`.
pub fn before_runtime(action: &SandboxAction) -> Option<ExitCode> {
    match action {
        SandboxAction::Check { .. } => None,
        SandboxAction::Probe => {
            let support = Support::probe_here();
            println!("{}", serde_json::to_string(&support).unwrap_or_default());
            Some(ExitCode::SUCCESS)
        }
        SandboxAction::Exec { policy, command } => Some(launcher_exit(
            Policy::from_arg(policy).map(|p| run_launch(&p, command)),
        )),
        SandboxAction::Enter {
            policy,
            stage,
            command,
        } => {
            let stage = serde_json::from_str(stage).unwrap_or_default();
            Some(launcher_exit(
                Policy::from_arg(policy).map(|p| run_enter(&p, &stage, command)),
            ))
        }
    }
}

#[cfg(target_os = "linux")]
fn run_launch(policy: &Policy, command: &[OsString]) -> i32 {
    toolgate_sandbox::launch(policy, command)
}

#[cfg(target_os = "linux")]
fn run_enter(policy: &Policy, stage: &toolgate_sandbox::Stage, command: &[OsString]) -> i32 {
    toolgate_sandbox::enter(policy, stage, command)
}

#[cfg(not(target_os = "linux"))]
fn run_launch(_: &Policy, _: &[OsString]) -> i32 {
    eprintln!("toolgate sandbox: sandboxes need Linux (Landlock and namespaces)");
    126
}

#[cfg(not(target_os = "linux"))]
fn run_enter(_: &Policy, _: &toolgate_sandbox::Stage, _: &[OsString]) -> i32 {
    126
}

fn launcher_exit(code: Result<i32, toolgate_sandbox::SandboxError>) -> ExitCode {
    match code {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(126)),
        Err(e) => {
            eprintln!("toolgate sandbox: {e}");
            ExitCode::from(126)
        }
    }
}

/// `toolgate sandbox check`.
pub fn check(json: bool) -> anyhow::Result<u8> {
    let exe = std::env::current_exe()?;
    let support = Support::query(&exe)?;
    if json {
        outln!("{}", serde_json::to_string(&support)?);
        return Ok(exit::OK);
    }
    let lines = support.lines();
    for (what, here) in &lines {
        outln!("{} {what}", if *here { "yes" } else { "no " });
    }
    let strict = toolgate_sandbox::Request::default()
        .resolve(&toolgate_sandbox::ServerCommand::default())
        .map(|p| p.gaps(&support))
        .unwrap_or_default();
    if strict.is_empty() {
        outln!("\nThe strict and network profiles are enforced in full here.");
        Ok(exit::OK)
    } else {
        outln!(
            "\nNot enforced here (a sandbox refuses to start unless sandbox_mode = \"best-effort\"):"
        );
        for gap in strict {
            outln!("  - {gap}");
        }
        Ok(exit::FAILED)
    }
}

/// For `serve --check`: each sandboxed server's profile, and whether this
/// machine enforces all of it. An enforced sandbox that would not hold
/// fails the check.
pub fn report(servers: &[toolgate_gateway::config::UpstreamConfig]) -> u8 {
    if servers.is_empty() {
        return exit::OK;
    }
    let support = std::env::current_exe()
        .map_err(anyhow::Error::from)
        .and_then(|exe| Support::query(&exe).map_err(anyhow::Error::from));
    outln!();
    outln!("Sandboxes:");
    let mut code = exit::OK;
    for server in servers {
        let Some(sandbox) = &server.sandbox else {
            continue;
        };
        let mode = server.sandbox_mode.unwrap_or_default();
        let name = crate::term::one_line(&server.name);
        let profile = sandbox.profile_name();
        let policy = match toolgate_gateway::call::sandbox::policy_of(server) {
            Some(Ok(policy)) => policy,
            Some(Err(e)) => {
                code = exit::FAILED;
                outln!(
                    "  {name}: {profile}: {}",
                    crate::term::one_line(&e.to_string())
                );
                continue;
            }
            None => continue,
        };
        let gaps = match &support {
            Ok(support) => policy.gaps(support),
            Err(e) => vec![format!("cannot ask the kernel: {e}")],
        };
        let shape = describe(&policy);
        if gaps.is_empty() {
            outln!("  {name}: {profile} ({shape}): enforced in full");
            continue;
        }
        let how = match mode {
            toolgate_gateway::config::SandboxMode::Enforce => {
                code = exit::FAILED;
                "NOT STARTED (sandbox_mode = \"enforce\"): not enforced here"
            }
            toolgate_gateway::config::SandboxMode::BestEffort => {
                "started best-effort; not enforced here"
            }
        };
        outln!("  {name}: {profile} ({shape}): {how}:");
        for gap in gaps {
            outln!("      - {gap}");
        }
    }
    code
}

/// A policy in a few words: what it writes, its network and caps.
fn describe(policy: &Policy) -> String {
    let mut parts = Vec::new();
    let writes: Vec<String> = policy
        .write
        .iter()
        .filter(|p| {
            !toolgate_sandbox::DEVICES
                .iter()
                .any(|d| p.as_os_str() == *d)
        })
        .map(|p| p.display().to_string())
        .collect();
    parts.push(if writes.is_empty() {
        "writes nowhere".to_owned()
    } else {
        format!("writes {}", writes.join(", "))
    });
    parts.push(match &policy.network {
        toolgate_sandbox::Network::None => "no network".to_owned(),
        toolgate_sandbox::Network::Loopback => "its own loopback".to_owned(),
        toolgate_sandbox::Network::Outbound => "outbound TCP".to_owned(),
        toolgate_sandbox::Network::Ports(list) => format!(
            "TCP to {}",
            list.iter()
                .map(|e| format!("{}:{}", e.host, e.port))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    });
    if let Some(n) = policy.processes {
        parts.push(format!("{n} processes"));
    }
    if let Some(m) = policy.memory {
        parts.push(format!("{} MiB", m >> 20));
    }
    if let Some(s) = policy.cpu_seconds {
        parts.push(format!("{s} s of CPU"));
    }
    parts.join("; ")
}
