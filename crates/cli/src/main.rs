//! The `toolgate` command: list, call and review the tools of any MCP
//! server, safely.
//!
//! ```text
//! toolgate tools [TARGET] [TOOL] [--json] [-- COMMAND ARGS...]
//! toolgate call [TARGET] TOOL [--args JSON] [--answer FIELD=JSON]... [--decline] [--yes] [--json] [--output FILE] [-- COMMAND ARGS...]
//! toolgate audit [TARGET | --all] [--json | --sarif] [--fail-on LEVEL] [-- COMMAND ARGS...]
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

mod call;
mod exit;
mod grants;
mod import;
mod input;
mod log;
mod login;
mod review;
mod serve;
mod shell;
mod target;
mod task;
mod term;
mod tools;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory as _, Parser, Subcommand};
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

/// How to reach servers; shared by every subcommand that talks to one.
#[derive(Args)]
struct ReachArgs {
    /// An mcpServers config file (the format desktop and editor hosts use).
    #[arg(long, value_name = "FILE", default_value = "mcp.json")]
    config: PathBuf,
    /// Name a `-- COMMAND` server (lock keys, audit findings); default: the
    /// package or program it runs.
    #[arg(long)]
    name: Option<String>,
    /// Give a started server this shell's whole environment (default: PATH,
    /// HOME, locale and temporary directory, plus the config's `env`).
    #[arg(long)]
    inherit_env: bool,
    /// Treat the server's annotations as trustworthy.
    #[arg(long)]
    trust: bool,
    /// Seconds to wait for any answer from the server.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    timeout: u64,
}

impl ReachArgs {
    fn reach(&self) -> target::Reach {
        target::Reach {
            config: Some(self.config.clone()),
            name: self.name.clone(),
            inherit_env: self.inherit_env,
            trust: self.trust,
            timeout: Duration::from_secs(self.timeout.max(1)),
            tasks: false,
        }
    }
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
    Tools {
        /// `[TARGET] [TOOL]`: the server (unless given after `--`), then a
        /// tool to show in full.
        #[arg(num_args = 0..=2, value_name = "TARGET/TOOL")]
        names: Vec<String>,
        /// Every server of the config file, one table (also what `--config
        /// FILE` alone does). A server that fails is reported and the rest
        /// still listed.
        #[arg(long)]
        all: bool,
        /// Print the definitions as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        reach: ReachArgs,
        /// The server as a command over stdio.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
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
    Call {
        /// `[TARGET] TOOL`.
        #[arg(num_args = 1..=2, required = true, value_name = "TARGET/TOOL")]
        names: Vec<String>,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Send without asking for confirmation.
        #[arg(long)]
        yes: bool,
        /// Answer a field of any form the server asks for (JSON, or text).
        #[arg(long, value_name = "FIELD=JSON", value_parser = input::parse_answer)]
        answer: Vec<(String, serde_json::Value)>,
        /// Decline every question the server asks.
        #[arg(long, conflicts_with = "answer")]
        decline: bool,
        /// A directory offered to the server as a root (repeatable; default:
        /// the working directory). Some servers, like server-filesystem, then
        /// use the roots instead of the directories on their command line.
        #[arg(long, value_name = "DIR")]
        root: Vec<PathBuf>,
        /// Offer no roots (the server keeps its own directories).
        #[arg(long, conflicts_with = "root")]
        no_roots: bool,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
        /// Write binary content (images, audio, blobs) to FILE (then FILE.2, …).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Let the server run the call as a task (the tasks extension): its
        /// status is shown while it runs, and `toolgate task` picks it up
        /// again if this command is interrupted.
        #[arg(long)]
        task: bool,
        #[command(flatten)]
        reach: ReachArgs,
        /// The server as a command over stdio.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Wait for a task a call started (or cancel it), and print its result.
    #[command(after_help = "\
Examples:
  toolgate task localhost:8080 task-3q2V9Xb…            # wait, then print the result
  toolgate task https://mcp.example.com/mcp task-3q2V… --cancel

The task id is what `toolgate call --task` printed. Tasks live on the server:
a server started with `-- COMMAND` ends with this command, and its tasks with it.")]
    Task {
        /// `[TARGET] TASK_ID`.
        #[arg(num_args = 1..=2, required = true, value_name = "TARGET/TASK_ID")]
        names: Vec<String>,
        /// Ask the server to cancel the task instead of waiting for it.
        #[arg(long)]
        cancel: bool,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
        /// Write binary content (images, audio, blobs) to FILE (then FILE.2, …).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Answer a field of any form the task asks for (JSON, or text).
        #[arg(long, value_name = "FIELD=JSON", value_parser = input::parse_answer)]
        answer: Vec<(String, serde_json::Value)>,
        /// Decline every question the task asks.
        #[arg(long, conflicts_with = "answer")]
        decline: bool,
        #[command(flatten)]
        reach: ReachArgs,
        /// The server as a command over stdio.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Review a server's tool definitions before trusting them.
    #[command(after_help = "\
Examples:
  toolgate audit -- npx -y @modelcontextprotocol/server-filesystem /tmp
  toolgate audit --all --config mcp.json --fail-on high
  toolgate audit localhost:8080 --sarif > toolgate.sarif")]
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
    #[command(after_help = "\
Examples:
  toolgate lock --all --config mcp.json
  toolgate lock --name fs -- npx -y @modelcontextprotocol/server-filesystem /tmp
  toolgate lock basket --update        # accept reviewed changes")]
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
    #[command(after_help = "\
Examples:
  toolgate verify --all --config mcp.json      # in CI: exit 1 when a definition changed
  toolgate verify basket --lock toolgate.lock
  toolgate verify --all --json                 # each change as a JSON Patch")]
    Verify {
        #[command(flatten)]
        servers: ServerArgs,
        /// The lock file.
        #[arg(long, default_value = "toolgate.lock")]
        lock: PathBuf,
        /// Print the result as JSON: per server, the tools added and
        /// removed, and for each changed tool an RFC 6902 JSON Patch from the
        /// locked definition to the live one.
        #[arg(long)]
        json: bool,
    },
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
    Serve {
        /// The configuration: toolgate.toml, or a hosts' mcpServers JSON file.
        #[arg(long, value_name = "FILE", default_value = "toolgate.toml")]
        config: PathBuf,
        /// Serve Streamable HTTP at http://ADDR/mcp (HOST:PORT).
        #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
        http: Option<String>,
        /// Serve one host over stdio.
        #[arg(long)]
        stdio: bool,
        /// Withhold tools whose definition differs from this lock file.
        #[arg(long, value_name = "FILE")]
        lock: Option<PathBuf>,
        /// Start every upstream, list their tools, print a table and exit
        /// (1 if the lock withholds tools or a policy rule matches none, 3
        /// if an upstream fails; tools the policy denies are not a failure).
        #[arg(long)]
        check: bool,
        /// Serve Prometheus metrics at http://ADDR/metrics (keep it on
        /// loopback or a private network: it names every tool and caller
        /// count).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// Serve the console at http://ADDR/console (as `[console] listen`;
        /// keep it on loopback): upstreams, tools, approvals, calls,
        /// grants and the configuration, behind a one-time login link.
        #[arg(long, value_name = "ADDR")]
        console: Option<String>,
        /// Worker threads (default: one per CPU core, and one thread in all
        /// on a machine of two cores or fewer). With 1 the gateway runs on
        /// a single thread, which spends the least CPU per call where it
        /// shares a small machine with its upstreams or callers.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
        threads: Option<u16>,
        /// Print the configuration's JSON Schema and exit.
        #[arg(long)]
        print_schema: bool,
        /// Reload the configuration when its file changes, as on SIGHUP:
        /// only upstreams whose entries changed restart, calls in flight
        /// finish, a file that does not load keeps the running one.
        #[arg(long)]
        watch: bool,
    },
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
    Import {
        /// The host whose file to read.
        #[arg(value_name = "HOST")]
        host: Option<String>,
        /// Read this mcpServers file instead of a host's.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Where the configuration goes.
        #[arg(long, value_name = "FILE", default_value = "toolgate.toml")]
        output: PathBuf,
        /// Also replace the host's entries with one that runs the gateway.
        #[arg(long)]
        install: bool,
        /// Overwrite an existing output file.
        #[arg(long)]
        force: bool,
    },
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
    Login {
        /// A URL, HOST:PORT, or a server name from the config file.
        target: String,
        /// A client id registered with the authorization server beforehand.
        #[arg(long)]
        client_id: Option<String>,
        /// The HTTPS URL of toolgate's Client ID Metadata Document, where
        /// the authorization server supports them.
        #[arg(long, value_name = "URL")]
        client_metadata_url: Option<String>,
        /// Print the authorization URL instead of opening a browser.
        #[arg(long)]
        no_browser: bool,
        /// Seconds to wait for the authorization to complete.
        #[arg(long, value_name = "SECONDS", default_value_t = 300)]
        wait: u64,
        /// An mcpServers config file, for server names.
        #[arg(long, value_name = "FILE", default_value = "mcp.json")]
        config: PathBuf,
    },
    /// Forget the tokens kept for a server.
    Logout {
        /// A URL, HOST:PORT, or a server name from the config file.
        target: String,
        /// An mcpServers config file, for server names.
        #[arg(long, value_name = "FILE", default_value = "mcp.json")]
        config: PathBuf,
    },
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

/// Which servers `audit`, `lock` and `verify` look at.
#[derive(Args)]
struct ServerArgs {
    /// A URL, HOST:PORT, or a server name from the config file.
    target: Option<String>,
    /// Every server of the config file (audit also finds tools shadowing each
    /// other). A server that fails is reported and the rest still run.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    reach: ReachArgs,
    /// The server as a command over stdio.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl ServerArgs {
    fn targets(&self) -> review::Targets<'_> {
        review::Targets {
            target: self.target.as_deref(),
            all: self.all,
            command: &self.command,
            reach: self.reach.reach(),
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

/// How to find a server by name, and nothing else.
fn config_only(config: PathBuf) -> target::Reach {
    target::Reach {
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
fn split_names(names: &[String], command: &[String]) -> (Option<String>, Option<String>) {
    match names {
        [] => (None, None),
        [one] if command.is_empty() => (Some(one.clone()), None),
        [one] => (None, Some(one.clone())),
        [target, name, ..] => (Some(target.clone()), Some(name.clone())),
    }
}

async fn run(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Tools {
            names,
            all,
            json,
            reach,
            command,
        } => {
            let config_alone = names.is_empty() && command.is_empty() && reach.config.exists();
            if all || config_alone {
                if !names.is_empty() || !command.is_empty() {
                    return Err(exit::fail(
                        exit::USAGE,
                        "--all lists every server of the config file; give no TARGET or COMMAND with it",
                    ));
                }
                return tools::tools_of_all(&reach.reach(), json).await;
            }
            let (target, tool) = split_names(&names, &command);
            tools::tools(
                target.as_deref(),
                tool.as_deref(),
                &command,
                &reach.reach(),
                json,
            )
            .await
        }
        Command::Call {
            names,
            args,
            yes,
            answer,
            decline,
            root,
            no_roots,
            json,
            output,
            task,
            reach,
            command,
        } => {
            let roots = match (no_roots, root.is_empty()) {
                (true, _) => None,
                (false, true) => Some(vec![std::env::current_dir().map_err(|e| {
                    exit::fail(
                        exit::USAGE,
                        format!("no working directory to offer as a root: {e}"),
                    )
                })?]),
                (false, false) => Some(root),
            };
            // One word is the tool, whether or not a COMMAND follows.
            let (target, tool) = match names.as_slice() {
                [tool] => (None, tool.clone()),
                [target, tool, ..] => (Some(target.clone()), tool.clone()),
                [] => return Err(exit::fail(exit::USAGE, "name the tool to call")),
            };
            let options = call::CallArgs {
                args,
                yes,
                json,
                output,
                answers: answer.into_iter().collect::<BTreeMap<_, _>>(),
                decline,
                roots,
            };
            let mut reach = reach.reach();
            reach.tasks = task;
            call::call(target.as_deref(), &tool, &command, &reach, options).await
        }
        Command::Task {
            names,
            cancel,
            json,
            output,
            answer,
            decline,
            reach,
            command,
        } => {
            let (target, task_id) = match names.as_slice() {
                [id] => (None, id.clone()),
                [target, id, ..] => (Some(target.clone()), id.clone()),
                [] => return Err(exit::fail(exit::USAGE, "name the task")),
            };
            let mut reach = reach.reach();
            reach.tasks = true;
            let options = task::TaskArgs {
                cancel,
                json,
                output,
                answers: answer.into_iter().collect::<BTreeMap<_, _>>(),
                decline,
            };
            task::task(target.as_deref(), &task_id, &command, &reach, options).await
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
        Command::Verify {
            servers,
            lock,
            json,
        } => review::verify_command(servers.targets(), &lock, json).await,
        Command::Import {
            host,
            from,
            output,
            install,
            force,
        } => import::import(import::ImportArgs {
            host,
            from,
            output,
            install,
            force,
        }),
        Command::Serve {
            config,
            http,
            stdio,
            lock,
            check,
            metrics,
            console,
            print_schema,
            watch,
            threads: _,
        } => {
            if print_schema {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(
                        &toolgate_gateway::config::GatewayConfig::json_schema()
                    )?
                );
                return Ok(exit::OK);
            }
            serve::serve(serve::ServeArgs {
                config,
                http,
                stdio,
                lock,
                check,
                metrics,
                console,
                watch,
            })
            .await
        }
        Command::Login {
            target,
            client_id,
            client_metadata_url,
            no_browser,
            wait,
            config,
        } => {
            let args = login::LoginArgs {
                target,
                client_id,
                client_secret: std::env::var("TOOLGATE_CLIENT_SECRET")
                    .ok()
                    .filter(|s| !s.is_empty()),
                client_metadata_url,
                no_browser,
                wait: Duration::from_secs(wait.max(1)),
            };
            login::login(args, &config_only(config)).await
        }
        Command::Logout { target, config } => login::logout(&target, &config_only(config)),
        Command::Completions { shell } => shell::completions(shell, Cli::command()),
        Command::Man { out } => shell::man(Cli::command(), out.as_deref()),
        Command::Log(args) => log::log(args).await,
        Command::Grants(args) => grants::grants(args).await,
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
    let threads = match &cli.command {
        Command::Serve { threads, .. } => serve_threads(
            *threads,
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
