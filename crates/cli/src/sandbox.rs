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
