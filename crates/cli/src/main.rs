//! The `toolgate` command: list and call the tools of any MCP server.
//!
//! ```text
//! toolgate tools [TARGET] [--json] [-- COMMAND ARGS...]
//! toolgate call [TARGET] TOOL [--args JSON] [--yes] [--json] [--timeout SECONDS] [-- COMMAND ARGS...]
//! toolgate audit [TARGET] [--json | --sarif] [--fail-on LEVEL] [-- COMMAND ARGS...]
//! toolgate lock [TARGET] [--lock FILE] [--update] [-- COMMAND ARGS...]
//! toolgate verify [TARGET] [--lock FILE] [-- COMMAND ARGS...]
//! toolgate header encode|decode VALUE
//! ```
//!
//! TARGET is an `http(s)://` URL or the name of a server in an `mcpServers`
//! config file (`--config FILE`, default `./mcp.json`).

mod commands;
mod review;
mod target;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolgate_protocol::header::{decode_header_value, encode_header_value};

#[derive(Parser)]
#[command(
    name = "toolgate",
    version,
    about = "List, call and audit the tools of MCP servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List a server's tools: name, title, risk, annotations, output schema.
    Tools {
        /// A URL, or a server name from the config file.
        target: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// An mcpServers config file (default ./mcp.json).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Treat the server's annotations as trustworthy.
        #[arg(long)]
        trust: bool,
        /// The server as a command over stdio (after `--`).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Call a tool, after showing it and its arguments.
    Call {
        /// `[TARGET] TOOL`.
        #[arg(num_args = 1..=2, required = true)]
        names: Vec<String>,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
        /// Seconds before the call is cancelled.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// An mcpServers config file (default ./mcp.json).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Treat the server's annotations as trustworthy.
        #[arg(long)]
        trust: bool,
        /// The server as a command over stdio (after `--`).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Review a server's tool definitions before trusting them.
    Audit {
        #[command(flatten)]
        servers: ServerArgs,
        /// Findings as JSON.
        #[arg(long, conflicts_with = "sarif")]
        json: bool,
        /// Findings as SARIF 2.1.0 (for code-scanning interfaces).
        #[arg(long)]
        sarif: bool,
        /// Exit 1 if any finding is at least this severe (info, low, medium, high).
        #[arg(long, value_name = "LEVEL", value_parser = parse_severity)]
        fail_on: Option<toolgate_review::Severity>,
    },
    /// Record the approved tool definitions in a lock file.
    Lock {
        #[command(flatten)]
        servers: ServerArgs,
        /// The lock file.
        #[arg(long, default_value = "toolgate.lock")]
        lock: PathBuf,
        /// Accept changes to servers already locked.
        #[arg(long)]
        update: bool,
    },
    /// Compare the live tool definitions with the lock file.
    Verify {
        #[command(flatten)]
        servers: ServerArgs,
        /// The lock file.
        #[arg(long, default_value = "toolgate.lock")]
        lock: PathBuf,
    },
    /// Encode or decode an Mcp-Name / Mcp-Param-* header value.
    Header {
        #[command(subcommand)]
        action: HeaderAction,
    },
}

/// Which servers `audit`, `lock` and `verify` look at.
#[derive(clap::Args)]
struct ServerArgs {
    /// A URL, or a server name from the config file.
    target: Option<String>,
    /// An mcpServers config file (default ./mcp.json).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Every server of the config file (audit also finds tools shadowing each other).
    #[arg(long)]
    all: bool,
    /// The server as a command over stdio (after `--`).
    #[arg(last = true)]
    command: Vec<String>,
}

impl ServerArgs {
    fn targets(&self) -> review::Targets<'_> {
        review::Targets {
            target: self.target.as_deref(),
            config: self.config.as_deref(),
            all: self.all,
            command: &self.command,
        }
    }
}

#[derive(Subcommand)]
enum HeaderAction {
    /// Print the header form of VALUE (plain, or =?base64?...?= when needed).
    Encode {
        /// The parameter value.
        value: String,
    },
    /// Print the value a received header carries.
    Decode {
        /// The header value as received.
        value: String,
    },
}

fn parse_severity(s: &str) -> Result<toolgate_review::Severity, String> {
    toolgate_review::Severity::parse(s)
        .ok_or_else(|| format!("{s:?} is not one of info, low, medium, high"))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let outcome = match Cli::parse().command {
        Command::Tools {
            target,
            json,
            config,
            trust,
            command,
        } => commands::tools(target.as_deref(), config.as_deref(), &command, json, trust).await,
        Command::Call {
            names,
            args,
            yes,
            json,
            timeout,
            config,
            trust,
            command,
        } => {
            let (target, tool) = match names.as_slice() {
                [tool] => (None, tool.clone()),
                [target, tool] => (Some(target.as_str()), tool.clone()),
                _ => unreachable!("clap enforces one or two names"),
            };
            let options = commands::CallArgs {
                args,
                yes,
                json,
                timeout,
                trust,
            };
            commands::call(target, &tool, config.as_deref(), &command, options).await
        }
        Command::Audit {
            servers,
            json,
            sarif,
            fail_on,
        } => {
            let format = if sarif {
                review::Format::Sarif
            } else if json {
                review::Format::Json
            } else {
                review::Format::Text
            };
            review::audit_command(servers.targets(), format, fail_on).await
        }
        Command::Lock {
            servers,
            lock,
            update,
        } => review::lock_command(servers.targets(), &lock, update).await,
        Command::Verify { servers, lock } => review::verify_command(servers.targets(), &lock).await,
        Command::Header {
            action: HeaderAction::Encode { value },
        } => {
            println!("{}", encode_header_value(&value));
            Ok(ExitCode::SUCCESS)
        }
        Command::Header {
            action: HeaderAction::Decode { value },
        } => match decode_header_value(value.as_bytes()) {
            Ok(decoded) => {
                println!("{decoded}");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => Err(anyhow::anyhow!("invalid header value: {e}")),
        },
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            ExitCode::from(2)
        }
    }
}
