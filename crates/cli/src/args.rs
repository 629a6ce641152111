//! Options several subcommands share: how to reach a server, which
//! servers to review, and the small parsers of their values.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// How to reach servers; shared by every subcommand that talks to one.
#[derive(Args)]
pub struct ReachArgs {
    /// An mcpServers config file (the format desktop and editor hosts use).
    #[arg(long, value_name = "FILE", default_value = "mcp.json")]
    pub config: PathBuf,
    /// Name a `-- COMMAND` server (lock keys, audit findings); default: the
    /// package or program it runs.
    #[arg(long)]
    pub name: Option<String>,
    /// Give a started server this shell's whole environment (default: PATH,
    /// HOME, locale and temporary directory, plus the config's `env`).
    #[arg(long)]
    pub inherit_env: bool,
    /// Treat the server's annotations as trustworthy.
    #[arg(long)]
    pub trust: bool,
    /// Seconds to wait for any answer from the server.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
}

impl ReachArgs {
    pub fn reach(&self) -> crate::target::Reach {
        crate::target::Reach {
            config: Some(self.config.clone()),
            name: self.name.clone(),
            inherit_env: self.inherit_env,
            trust: self.trust,
            timeout: Duration::from_secs(self.timeout.max(1)),
            tasks: false,
        }
    }
}

/// Which servers `audit`, `lock` and `verify` look at.
#[derive(Args)]
pub struct ServerArgs {
    /// A URL, HOST:PORT, or a server name from the config file.
    pub target: Option<String>,
    /// Every server of the config file (audit also finds tools shadowing each
    /// other). A server that fails is reported and the rest still run.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// The server as a command over stdio.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl ServerArgs {
    pub fn targets(&self) -> crate::review::Targets<'_> {
        crate::review::Targets {
            target: self.target.as_deref(),
            all: self.all,
            command: &self.command,
            reach: self.reach.reach(),
        }
    }
}

pub fn parse_severity(s: &str) -> Result<toolgate_review::Severity, String> {
    toolgate_review::Severity::parse(s)
        .ok_or_else(|| format!("{s:?} is not one of info, low, medium, high"))
}

/// How to find a server by name, and nothing else.
pub fn config_only(config: PathBuf) -> crate::target::Reach {
    crate::target::Reach {
        config: Some(config),
        name: None,
        inherit_env: false,
        trust: false,
        timeout: Duration::from_secs(60),
        tasks: false,
    }
}

/// `[TARGET] NAME` from one or two words; with a `-- COMMAND` the single
/// word is the name, otherwise (for `tools`) it is the target.
pub fn split_names(names: &[String], command: &[String]) -> (Option<String>, Option<String>) {
    match names {
        [] => (None, None),
        [one] if command.is_empty() => (Some(one.clone()), None),
        [one] => (None, Some(one.clone())),
        [target, name, ..] => (Some(target.clone()), Some(name.clone())),
    }
}
