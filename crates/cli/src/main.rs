//! The `toolgate` command: list, call and review the tools of any MCP
//! server, safely.
//!
//! ```text
//! toolgate tools [TARGET] [TOOL] [--json] [-- COMMAND ARGS...]
//! toolgate call [TARGET] TOOL [--args JSON] [--answer FIELD=JSON]... [--decline] [--yes] [--json] [--output FILE] [-- COMMAND ARGS...]
//! toolgate audit [TARGET | --all] [--json | --sarif] [--fail-on LEVEL] [--flows] [-- COMMAND ARGS...]
//! toolgate lock [TARGET | --all] [--lock FILE] [--update] [-- COMMAND ARGS...]
//! toolgate verify [TARGET | --all] [--lock FILE] [-- COMMAND ARGS...]
//! toolgate serve [--config FILE] [--http ADDR | --stdio] [--lock FILE] [--check]
//! toolgate login TARGET [--client-id ID] [--no-browser]
//! toolgate logout TARGET
//! toolgate log [--db FILE] [--since DURATION] [--tool GLOB] [--caller S] [--decision D] [--json] [--follow]
//! toolgate header encode|decode VALUE
//! ```
//!
//! TARGET is an `http(s)://` URL, a `HOST:PORT[/PATH]` address, or the
//! name of a server in an `mcpServers` config file (`--config FILE`,
//! default `./mcp.json`). The exit statuses are in [`exit`].

mod args;
mod call;
mod exit;
mod findings;
mod flows;
mod grants;
mod import;
mod input;
mod log;
mod login;
mod review;
mod risk;
mod sandbox;
mod serve;
mod shell;
mod target;
mod task;
mod term;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};
use toolgate_protocol::header::{decode_header_value, encode_header_value};

const ENVIRONMENT: &str = "\
Environment:
  TOOLGATE_BEARER_TOKEN  sent as `Authorization: Bearer …` to URL targets
                         (instead of the tokens `toolgate login` keeps)
  TOOLGATE_CREDENTIALS   the file login keeps tokens in (default:
                         ~/.config/toolgate/credentials.json, mode 0600)
  TOOLGATE_CLIENT_SECRET the secret of login's --client-id
  RUST_LOG               log filter, overriding -v/-q (e.g. toolgate_client=debug)
  NO_COLOR               no colour in logs";

/// The version `--version` prints: with the commit it was built from when
/// the build said (`TOOLGATE_COMMIT`, set by `cargo xtask dist`).
static VERSION: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| match option_env!("TOOLGATE_COMMIT") {
        Some(commit) if !commit.is_empty() => {
            format!("{} (commit {commit})", env!("CARGO_PKG_VERSION"))
        }
        _ => env!("CARGO_PKG_VERSION").to_owned(),
    });

#[derive(Parser)]
#[command(
    name = "toolgate",
    version = VERSION.as_str(),
    about = "List, call and review the tools of MCP servers you do not control yet",
    after_help = format!("{ENVIRONMENT}\n\n{}", exit::HELP),
)]
struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace), on stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Only errors in the log.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List a server's tools, or show one in full.
    #[command(after_help = "\
Examples:
  toolgate tools -- npx -y @modelcontextprotocol/server-everything
  toolgate tools localhost:8080
  toolgate tools basket add_item --config mcp.json
  toolgate tools --all --config mcp.json       # every server of the file
  toolgate tools https://mcp.example.com/mcp --json")]
    Tools(tools::ToolsCommand),
    /// Call a tool: show it and its arguments, ask, send, print the result.
    #[command(after_help = "\
Examples:
  toolgate call echo --args '{\"message\": \"hi\"}' -- npx -y @modelcontextprotocol/server-everything
  toolgate call localhost:8080 add_item --args '{\"sku\": \"A1\", \"quantity\": 2}'
  toolgate call https://mcp.example.com/mcp search --args '{\"q\": \"rust\"}' --yes
  toolgate call basket checkout --answer confirm=true --yes    # answers the server's question

A read-only tool of a trusted server runs without asking; anything else asks
\"Send this call?\" on the terminal, or needs --yes. Questions the server asks
while the call runs (elicitation) are asked field by field on a terminal, or
answered with --answer / --decline.")]
    Call(call::CallCommand),
    /// Wait for a task a call started (or cancel it), and print its result.
    #[command(after_help = "\
Examples:
  toolgate task localhost:8080 task-3q2V9Xb…            # wait, then print the result
  toolgate task https://mcp.example.com/mcp task-3q2V… --cancel

The task id is what `toolgate call --task` printed. Tasks live on the server:
a server started with `-- COMMAND` ends with this command, and its tasks with it.")]
    Task(task::TaskCommand),
    /// Review a server's tool definitions before trusting them.
    #[command(after_help = "\
Examples:
  toolgate audit -- npx -y @modelcontextprotocol/server-filesystem /tmp
  toolgate audit --all --config mcp.json --fail-on high
  toolgate audit localhost:8080 --sarif > toolgate.sarif")]
    Audit(review::AuditCommand),
    /// Record the approved tool definitions in a lock file.
    #[command(after_help = "\
Examples:
  toolgate lock --all --config mcp.json
  toolgate lock --name fs -- npx -y @modelcontextprotocol/server-filesystem /tmp
  toolgate lock basket --update        # accept reviewed changes")]
    Lock(review::LockCommand),
    /// Compare the live tool definitions with the lock file.
    #[command(after_help = "\
Examples:
  toolgate verify --all --config mcp.json      # in CI: exit 1 when a definition changed
  toolgate verify basket --lock toolgate.lock
  toolgate verify --all --json                 # each change as a JSON Patch")]
    Verify(review::VerifyCommand),
    /// Serve the configured servers behind one endpoint (a gateway).
    #[command(after_help = "\
Examples:
  toolgate serve --http 127.0.0.1:8080                 # Streamable HTTP at /mcp, both eras
  toolgate serve --stdio --config ~/.config/toolgate.toml   # as a host's only server
  toolgate serve --check                               # start everything, list, report, exit
  toolgate lock --config toolgate.toml --all && toolgate serve --http :8080 --lock toolgate.lock

Tools are named <server>.<tool>. Arguments are checked against each tool's
inputSchema before the upstream sees them; results are sanitized and checked
against its outputSchema. With --lock, tools whose definition differs from the
lock file are withheld. The configuration is documented in docs/gateway.md.")]
    Serve(serve::ServeArgs),
    /// Turn a host's mcpServers file into a toolgate.toml, and optionally
    /// put the host's servers behind the gateway.
    #[command(after_help = "\
Examples:
  toolgate import claude-desktop                 # writes toolgate.toml
  toolgate import --from ~/.cursor/mcp.json --output cursor.toml
  toolgate import claude-desktop --install       # the host now starts the gateway

Hosts: claude-desktop, claude-code, cursor, vscode, windsurf (their Linux and
macOS locations). \"disabled\": true becomes enabled = false; autoApprove
becomes an allow rule for exactly those tools; every other call is approved by
a person first. Keys toolgate has no setting for are reported. --install
replaces the host's entries with one that runs `toolgate serve --stdio`, after
a backup beside the file (printed); a file whose entries already run toolgate
is refused.")]
    Import(import::ImportArgs),
    /// Authorize toolgate with a server that requires OAuth, and keep the
    /// tokens for the other commands.
    #[command(after_help = "\
Examples:
  toolgate login https://mcp.example.com/mcp
  toolgate login github --config mcp.json --no-browser
  toolgate login https://mcp.example.com/mcp --client-id my-registered-id

A browser opens the server's authorization page (or, with --no-browser, the
URL is printed); the page redirects to a listener on 127.0.0.1. The client is
registered as the authorization server allows: a --client-id you registered,
a Client ID Metadata Document (--client-metadata-url), or dynamic
registration. Tokens are refreshed when they expire.")]
    Login(login::LoginCommand),
    /// Forget the tokens kept for a server.
    Logout(login::LogoutCommand),
    /// Show the gateway's audit store: every decision and call.
    #[command(after_help = "\
Examples:
  toolgate log                                  # the store toolgate.toml names
  toolgate log --since 1h --decision confirm
  toolgate log --db /var/lib/toolgate/audit.db --tool 'basket.*' --json
  toolgate log --follow
  toolgate log --spend --since 30d")]
    Log(log::LogArgs),
    /// List or revoke grants: approvals of a tool for a caller, for a
    /// while (a policy rule's `remember`).
    #[command(after_help = "\
Examples:
  toolgate grants                               # those that hold now
  toolgate grants --all --json
  toolgate grants --revoke g-4f1c2a9e0b7d3c58
  toolgate grants --db postgres://gw@db/audit --revoke g-4f1c2a9e0b7d3c58")]
    Grants(grants::GrantsArgs),
    /// What this machine can enforce of a stdio server's sandbox.
    #[command(after_help = "\
Examples:
  toolgate sandbox check
  toolgate sandbox check --json

A sandbox is set per stdio server (`sandbox = \"strict\"`, docs/gateway.md):
Landlock for files and TCP, namespaces for processes, /proc and the network,
cgroups for the process and memory caps.")]
    Sandbox(sandbox::SandboxArgs),
    /// Encode or decode an Mcp-Name / Mcp-Param-* header value.
    #[command(after_help = "\
Examples:
  toolgate header encode 'héllo'
  toolgate header decode '=?base64?aMOpbGxv?='")]
    Header {
        #[command(subcommand)]
        action: HeaderAction,
    },
    /// Print the completion script for a shell.
    #[command(after_help = "\
Examples:
  toolgate completions bash > ~/.local/share/bash-completion/completions/toolgate
  toolgate completions zsh > ~/.zfunc/_toolgate
  toolgate completions fish > ~/.config/fish/completions/toolgate.fish")]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page, or write every page into a directory.
    #[command(after_help = "\
Examples:
  toolgate man | man -l -
  toolgate man --out /usr/local/share/man/man1")]
    Man {
        /// Write toolgate.1 and a page per subcommand (toolgate-serve.1 …)
        /// here instead.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
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

async fn run(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Tools(command) => tools::tools_command(command).await,
        Command::Call(command) => call::call_command(command).await,
        Command::Task(command) => task::task_command(command).await,
        Command::Audit(command) => review::audit_command(command).await,
        Command::Lock(command) => review::lock_command(command).await,
        Command::Verify(command) => review::verify_command(command).await,
        Command::Import(args) => import::import(args),
        Command::Serve(args) => {
            if args.print_schema {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(
                        &toolgate_gateway::config::GatewayConfig::json_schema()
                    )?
                );
                return Ok(exit::OK);
            }
            serve::serve(args).await
        }
        Command::Login(command) => login::login_command(command).await,
        Command::Logout(command) => login::logout_command(command).await,
        Command::Completions { shell } => shell::completions(shell, Cli::command()),
        Command::Man { out } => shell::man(Cli::command(), out.as_deref()),
        Command::Log(args) => log::log(args).await,
        Command::Grants(args) => grants::grants(args).await,
        Command::Sandbox(args) => match args.action {
            sandbox::SandboxAction::Check { json } => sandbox::check(json),
            // Run before the runtime started (`main`).
            _ => Ok(exit::FAILED),
        },
        Command::Header {
            action: HeaderAction::Encode { value },
        } => {
            outln!("{}", encode_header_value(&value));
            Ok(exit::OK)
        }
        Command::Header {
            action: HeaderAction::Decode { value },
        } => match decode_header_value(value.as_bytes()) {
            Ok(decoded) => {
                outln!("{}", term::clean(&decoded));
                Ok(exit::OK)
            }
            Err(e) => Err(exit::fail(
                exit::USAGE,
                format!("invalid header value: {e}"),
            )),
        },
    }
}

/// A relayed call through `toolgate serve` allocates for two HTTP
/// exchanges and two JSON documents; glibc's allocator spent a fifth of the
/// gateway's CPU time on them (`cargo xtask bench`, gateway rows).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The launcher's modes restrict the process they run in: one thread.
    if let Command::Sandbox(args) = &cli.command
        && let Some(code) = sandbox::before_runtime(&args.action)
    {
        return code;
    }
    let threads = match &cli.command {
        Command::Serve(args) => serve_threads(
            args.threads,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        ),
        _ => None,
    };
    let runtime = match threads {
        // One thread: no worker ever waits for, steals from or wakes another.
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(usize::from(n));
            builder
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build();
    match runtime {
        Ok(runtime) => runtime.block_on(start(cli)),
        Err(e) => {
            errln!("toolgate: cannot start the async runtime: {e}");
            exit::code(exit::FAILED)
        }
    }
}

/// The worker threads of `toolgate serve` on a machine of `cores` cores
/// (`None`: one per core). Without `--threads`, a machine of two cores or
/// fewer runs the gateway on one thread: there it shares the cores with
/// its upstreams and callers, and on the 2-core bench machine one thread
/// relayed more calls per second than two workers, at a quarter less CPU
/// per call (docs/performance.md). On a larger machine every core serves.
fn serve_threads(given: Option<u16>, cores: usize) -> Option<u16> {
    given.or((cores <= 2).then_some(1))
}

async fn start(cli: Cli) -> ExitCode {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    toolgate_protocol::logging::init(level);
    let code = match run(cli.command).await {
        Ok(code) => code,
        Err(e) => {
            errln!("toolgate: {}", term::one_line(&format!("{e:#}")));
            exit::for_error(&e)
        }
    };
    term::report_removed();
    exit::code(code)
}

#[cfg(test)]
mod tests {
    use super::serve_threads;

    #[test]
    fn serve_runs_on_one_thread_on_a_small_machine_unless_told_otherwise() {
        assert_eq!(serve_threads(None, 1), Some(1));
        assert_eq!(serve_threads(None, 2), Some(1));
        // Every core serves on a larger machine.
        assert_eq!(serve_threads(None, 4), None);
        // `--threads` always wins.
        assert_eq!(serve_threads(Some(2), 2), Some(2));
        assert_eq!(serve_threads(Some(1), 64), Some(1));
    }
}
