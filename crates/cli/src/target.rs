//! Turning a TARGET (URL, address, config name, or `-- COMMAND ARGS...`)
//! into a connected client, and naming it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use sha2::{Digest as _, Sha256};
use toolgate_client::transport::http::{HttpOptions, HttpTransport, SseMode};
use toolgate_client::transport::stdio::{StderrTail, StdioCommand, StdioTransport};
use toolgate_client::{Client, ClientBuilder, ClientError};
use toolgate_gateway::config::{GatewayConfig, UpstreamConfig};

use crate::exit;
use crate::term;
use crate::{errln, input};

/// One server of a config file, as the CLI uses it.
#[derive(Clone, Debug, Default)]
pub struct ServerEntry {
    /// Program to run (stdio).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment the program gets on top of the minimal one.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// Pass the whole environment (the config's `inherit_env`).
    pub inherit_env: bool,
    /// URL (Streamable HTTP).
    pub url: Option<String>,
    /// Extra HTTP headers.
    pub headers: BTreeMap<String, String>,
    /// Trust this server's annotations (default false).
    pub trusted: bool,
    /// Whether the URL may be (or is) a 2024-11-05 HTTP+SSE server.
    pub sse: SseMode,
    /// The gateway configuration's entry, when it sets a sandbox: the CLI
    /// starts the server in it too.
    pub sandboxed: Option<Box<UpstreamConfig>>,
}

impl From<UpstreamConfig> for ServerEntry {
    fn from(c: UpstreamConfig) -> Self {
        let sandboxed = c.sandbox.is_some().then(|| Box::new(c.clone()));
        let exposed = |m: BTreeMap<String, toolgate_gateway::config::Secret>| {
            m.into_iter()
                .map(|(k, v)| (k, v.expose().to_owned()))
                .collect()
        };
        ServerEntry {
            command: c.command.map(|c| c.expose().to_owned()),
            args: c.args.iter().map(|a| a.expose().to_owned()).collect(),
            env: exposed(c.env),
            cwd: c.cwd,
            inherit_env: c.inherit_env,
            url: c.url.map(|u| u.expose().to_owned()),
            headers: exposed(c.headers),
            trusted: c.trusted,
            sse: toolgate_gateway::config::HttpKind::sse_mode(c.transport),
            sandboxed,
        }
    }
}

/// How to reach servers: what every subcommand that talks to one accepts.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    /// The `mcpServers` file (default `./mcp.json`).
    pub config: Option<PathBuf>,
    /// The name a `-- COMMAND` server is known by (lock keys, findings).
    pub name: Option<String>,
    /// Give a started server this process's whole environment.
    pub inherit_env: bool,
    /// Treat annotations as trustworthy.
    pub trust: bool,
    /// How long to wait for any answer.
    pub timeout: Duration,
    /// Declare the tasks extension, so the server may run calls as tasks.
    pub tasks: bool,
}

/// Where to find a server, and what it is called.
#[derive(Clone, Debug)]
pub struct Target {
    /// Display name: the config key, the URL, or the command's label.
    pub name: String,
    entry: ServerEntry,
}

impl Target {
    /// Its URL, for an HTTP server.
    pub fn url(&self) -> Option<&str> {
        self.entry.url.as_deref()
    }
}

fn config_path(reach: &Reach) -> PathBuf {
    reach
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from("mcp.json"))
}

/// The servers of a config file: a hosts' `mcpServers` JSON file or a
/// gateway's `toolgate.toml`, by key.
fn load_config(path: &Path) -> anyhow::Result<BTreeMap<String, ServerEntry>> {
    if !path.exists() {
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "no config file {} (name one with --config, or give a URL or `-- COMMAND`)",
                path.display()
            ),
        ));
    }
    let config = GatewayConfig::load(path)
        .map_err(|e| exit::fail(exit::USAGE, toolgate_protocol::error::with_causes(&e)))?;
    Ok(config
        .servers
        .into_iter()
        .map(|(name, c)| (name, ServerEntry::from(c)))
        .collect())
}

/// `http(s)://…` as is; `HOST:PORT[/PATH]` as `http://HOST:PORT/PATH` (path
/// `/mcp` when none is given). `None` for anything else (a config name).
pub fn address(target: &str) -> Option<String> {
    if target.starts_with("http://") || target.starts_with("https://") {
        return Some(target.to_owned());
    }
    let (authority, path) = match target.find('/') {
        Some(i) => target.split_at(i),
        None => (target, "/mcp"),
    };
    let (host, port) = authority.rsplit_once(':')?;
    let port_ok = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    let host_ok = !host.is_empty()
        && (host.starts_with('[') && host.ends_with(']')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
    (port_ok && host_ok).then(|| format!("http://{authority}{path}"))
}

/// `HOST:PORT` (or a URL's authority) as an address to listen on.
pub fn socket_address(text: &str) -> Option<String> {
    let text = text
        .strip_prefix("http://")
        .unwrap_or(text)
        .trim_end_matches('/');
    let (host, port) = text.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // `:PORT` listens on loopback: all interfaces must be asked for.
    let host = if host.is_empty() { "127.0.0.1" } else { host };
    Some(format!("{host}:{port}"))
}

/// Resolve a target from the command line.
pub fn resolve(target: Option<&str>, command: &[String], reach: &Reach) -> anyhow::Result<Target> {
    if !command.is_empty() {
        if let Some(target) = target {
            return Err(exit::fail(
                exit::USAGE,
                format!("give either a TARGET ({target:?}) or `-- COMMAND ARGS...`, not both"),
            ));
        }
        let entry = ServerEntry {
            command: Some(command[0].clone()),
            args: command[1..].to_vec(),
            ..Default::default()
        };
        let name = reach.name.clone().unwrap_or_else(|| label(command));
        return Ok(Target { name, entry });
    }
    let Some(target) = target else {
        return Err(exit::fail(
            exit::USAGE,
            "no server given: pass a URL (or HOST:PORT), a server name from --config, or `-- COMMAND ARGS...`",
        ));
    };
    if let Some(url) = address(target) {
        let entry = ServerEntry {
            url: Some(url.clone()),
            ..Default::default()
        };
        // The name shows in findings and lock keys: never a credential.
        let name = reach
            .name
            .clone()
            .unwrap_or_else(|| toolgate_protocol::redact::url(&url));
        return Ok(Target { name, entry });
    }
    let path = config_path(reach);
    let mut servers = load_config(&path)?;
    let Some(entry) = servers.remove(target) else {
        let known: Vec<&String> = servers.keys().collect();
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "no server {target:?} in {} (it has: {known:?})",
                path.display()
            ),
        ));
    };
    Ok(Target {
        name: target.to_owned(),
        entry,
    })
}

/// Every server of the config file, in name order.
pub fn resolve_all(reach: &Reach) -> anyhow::Result<Vec<Target>> {
    let servers = load_config(&config_path(reach))?;
    Ok(servers
        .into_iter()
        .map(|(name, entry)| Target { name, entry })
        .collect())
}

/// Launchers that run a package named by their first non-flag argument.
const LAUNCHERS: &[&[&str]] = &[
    &["npx"],
    &["bunx"],
    &["pnpx"],
    &["uvx"],
    &["pipx", "run"],
    &["npm", "exec"],
    &["pnpm", "dlx"],
    &["yarn", "dlx"],
    &["bun", "x"],
    &["uv", "tool", "run"],
    &["docker", "run"],
    &["podman", "run"],
];

/// Interpreters whose first non-flag argument is the script.
const INTERPRETERS: &[&str] = &[
    "node", "python", "python3", "deno", "bun", "ruby", "php", "perl", "uv", "tsx", "ts-node",
];

/// Flags of docker and podman `run` that take a value.
const CONTAINER_VALUE_FLAGS: &[&str] = &[
    "-e",
    "--env",
    "-v",
    "--volume",
    "--name",
    "--network",
    "-w",
    "--workdir",
    "-u",
    "--user",
    "--mount",
    "--entrypoint",
    "--platform",
    "--env-file",
    "--publish",
    "-p",
];
/// Flags of the package launchers that take a value.
const LAUNCHER_VALUE_FLAGS: &[&str] = &["--registry", "--python", "--with", "--cache"];
/// Flags whose value is the package or module itself (`npx -p`, `uvx
/// --from`, `python -m`); docker's `-p` publishes a port instead.
const PACKAGE_FLAGS: &[&str] = &["-p", "--package", "--from", "-m"];

/// A stable name for a command-line server: the package a launcher runs
/// (`npx -y @scope/server@1.2` → `@scope/server`, versions dropped so a
/// pinned upgrade keeps its lock entry), the script an interpreter runs,
/// or the program's name; then, when further arguments follow, `#` and 8
/// hex digits of their SHA-256, so two servers of one package with
/// different arguments do not share a name.
pub fn label(command: &[String]) -> String {
    let stem = |s: &str| -> String {
        let file = s.rsplit(['/', '\\']).next().unwrap_or(s);
        for ext in [".exe", ".cmd", ".bat", ".js", ".mjs", ".cjs", ".ts", ".py"] {
            if let Some(base) = file.strip_suffix(ext) {
                return base.to_owned();
            }
        }
        file.to_owned()
    };
    let program = command.first().map(|p| stem(p)).unwrap_or_default();
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let launcher = LAUNCHERS.iter().find(|l| {
        stem(words.first().copied().unwrap_or_default()) == l[0]
            && words.len() > l.len()
            && words[1..l.len()] == l[1..]
    });
    let skip = match launcher {
        Some(l) => l.len(),
        None if INTERPRETERS.contains(&program.as_str()) => 1,
        None => {
            return with_rest(program, &command[1..]);
        }
    };
    let containers = launcher.is_some_and(|l| l[1..] == ["run"] && l[0] != "pipx");
    let mut i = skip;
    let mut package: Option<String> = None;
    while i < words.len() {
        let word = words[i];
        if PACKAGE_FLAGS.contains(&word) && !containers {
            package = words.get(i + 1).map(|p| package_name(p));
            i += 2;
        } else if (containers && CONTAINER_VALUE_FLAGS.contains(&word))
            || (launcher.is_some() && LAUNCHER_VALUE_FLAGS.contains(&word))
        {
            i += 2;
        } else if word.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    let (name, rest_from) = match (package, words.get(i)) {
        (Some(p), _) => (p, (i + 1).min(words.len())),
        (None, Some(w)) if launcher.is_some() => (package_name(w), i + 1),
        (None, Some(w)) => (script_name(w), i + 1),
        (None, None) => (program, words.len()),
    };
    with_rest(name, &command[rest_from..])
}

fn with_rest(name: String, rest: &[String]) -> String {
    if rest.is_empty() {
        return name;
    }
    let mut hash = Sha256::new();
    for arg in rest {
        hash.update(arg.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{name}#{hex}")
}

/// `@scope/name@1.2.3` → `@scope/name`; `name==1.0`, `name@latest` →
/// `name`; an image `org/name:tag` → `org/name`; a git URL → its last
/// segment.
fn package_name(spec: &str) -> String {
    let spec = spec.trim_end_matches('/');
    if spec.contains("://") || spec.starts_with("git+") {
        let last = spec.rsplit('/').next().unwrap_or(spec);
        return last.trim_end_matches(".git").to_owned();
    }
    let (scope, rest) = match spec.strip_prefix('@') {
        Some(rest) => ("@", rest),
        None => ("", spec),
    };
    let cut = rest
        .find(['@', '=', '>', '<', '~', '[', ':'])
        .unwrap_or(rest.len());
    format!("{scope}{}", &rest[..cut])
}

/// A script's name: its stem, with its directory when the stem says
/// nothing (`build/index.js` → `build/index`).
fn script_name(path: &str) -> String {
    let parts: Vec<&str> = path.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
    let file = parts.last().copied().unwrap_or(path);
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    match (
        ["index", "main", "server", "__main__", "app", "cli"].contains(&stem),
        parts.len(),
    ) {
        (true, n) if n >= 2 => format!("{}/{stem}", parts[n - 2]),
        _ => stem.to_owned(),
    }
}

/// A connected client and what is needed to explain its failures.
pub struct Connection {
    /// The client.
    pub client: Client,
    /// The target's name.
    pub name: String,
    /// Whether annotations count.
    pub trusted: bool,
    stderr: Option<StderrTail>,
    /// A started server given the minimal environment (not `--inherit-env`).
    minimal_env: bool,
    /// A started server that runs in its configuration's sandbox.
    sandboxed: bool,
}

impl Connection {
    /// `error`, with the server's last stderr lines shown first when it is
    /// a started server that failed.
    pub fn fail(&self, error: ClientError, what: &str) -> anyhow::Error {
        if !matches!(error, ClientError::Tool { .. } | ClientError::Denied(_)) {
            self.show_stderr();
        }
        let login = matches!(error, ClientError::LoginRequired(_));
        // A started server that died may have missed a variable of this
        // shell: say that it gets only a few, and how to pass the rest.
        let exited = self.stderr.is_some()
            && self.minimal_env
            && matches!(
                error,
                ClientError::ServerExited(_) | ClientError::Transport { .. }
            );
        let error = anyhow::Error::new(error).context(format!("{what} ({})", self.name));
        if login {
            return error.context(format!(
                "{} needs authorization: run `toolgate login {}`, then try again",
                self.name, self.name
            ));
        }
        if exited && self.sandboxed {
            return error.context(format!(
                "{} runs in a sandbox (its stderr above says what it refused); a file or directory it needs may be missing from the sandbox's `read` or `write` (`toolgate sandbox check` says what this machine enforces)",
                self.name
            ));
        }
        if exited {
            return error.context(format!(
                "{} was started with a minimal environment (PATH, HOME, locale, proxy and CA variables, and the config's `env`); if it needs another variable, set it in `env` or pass --inherit-env (-v names the variables not passed)",
                self.name
            ));
        }
        error
    }

    fn show_stderr(&self) {
        let Some(tail) = &self.stderr else { return };
        let lines = tail.lines();
        if lines.is_empty() {
            return;
        }
        errln!("toolgate: the last lines {} wrote to stderr:", self.name);
        for line in lines {
            errln!("  | {}", term::one_line(&line));
        }
    }
}

impl Target {
    /// Start or reach the server. `input` answers its questions.
    pub fn connect(&self, reach: &Reach, input: input::Answers) -> anyhow::Result<Connection> {
        let trusted = reach.trust || self.entry.trusted;
        let builder = Client::builder("toolgate", env!("CARGO_PKG_VERSION"))
            .timeout(reach.timeout)
            .name(self.name.clone())
            .trusted(trusted)
            .input_handler(input);
        let builder = if reach.tasks {
            builder.tasks()
        } else {
            builder
        };
        let (client, stderr) = self.build(builder, reach)?;
        Ok(Connection {
            client,
            name: self.name.clone(),
            trusted,
            stderr,
            minimal_env: !(reach.inherit_env || self.entry.inherit_env),
            sandboxed: self.entry.sandboxed.is_some(),
        })
    }

    fn build(
        &self,
        builder: ClientBuilder,
        reach: &Reach,
    ) -> anyhow::Result<(Client, Option<StderrTail>)> {
        if let Some(url) = &self.entry.url {
            let bearer_token = std::env::var("TOOLGATE_BEARER_TOKEN")
                .ok()
                .filter(|t| !t.is_empty());
            // A token given by hand (or an Authorization header in the
            // config) wins over the ones `toolgate login` keeps.
            let by_hand = bearer_token.is_some()
                || self
                    .entry
                    .headers
                    .keys()
                    .any(|k| k.eq_ignore_ascii_case("authorization"));
            let options = HttpOptions {
                headers: self
                    .entry
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                bearer_token,
                connect_timeout: None,
                limits: Default::default(),
                oauth: if by_hand { None } else { crate::login::kept() },
                sse: self.entry.sse,
            };
            let transport = HttpTransport::new(url.clone(), options)
                .with_context(|| format!("cannot use {}", toolgate_protocol::redact::url(url)))?;
            return Ok((builder.build(transport), None));
        }
        let Some(program) = &self.entry.command else {
            return Err(exit::fail(
                exit::USAGE,
                format!("server {:?} has neither a command nor a url", self.name),
            ));
        };
        let mut command = StdioCommand {
            program: program.clone(),
            args: self.entry.args.clone(),
            env: self
                .entry
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cwd: self.entry.cwd.clone(),
            inherit_env: reach.inherit_env || self.entry.inherit_env,
            // Ctrl-C on the terminal should reach the server too.
            process_group: false,
        };
        if let Some(upstream) = &self.entry.sandboxed {
            // As the gateway would start it: through this binary's launcher.
            let launcher = std::env::current_exe().ok();
            command = toolgate_gateway::call::sandbox::wrap(command, upstream, launcher.as_deref())
                .with_context(|| format!("cannot start {}", self.name))?;
        }
        let transport = StdioTransport::spawn(&command)
            .with_context(|| format!("cannot start {}", self.name))?;
        let stderr = transport.stderr_handle();
        Ok((builder.build(transport), Some(stderr)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(words: &str) -> String {
        label(&words.split(' ').map(str::to_owned).collect::<Vec<_>>())
    }

    #[test]
    fn launchers_are_named_by_their_package_and_versions_do_not_count() {
        assert_eq!(
            l("npx -y @modelcontextprotocol/server-everything@2025.1.1"),
            "@modelcontextprotocol/server-everything"
        );
        assert_eq!(
            l("npx -y @modelcontextprotocol/server-everything"),
            "@modelcontextprotocol/server-everything"
        );
        assert_eq!(l("uvx mcp-server-fetch"), "mcp-server-fetch");
        assert_eq!(
            l("uvx --from mcp-server-git==1.0 mcp-server-git"),
            "mcp-server-git"
        );
        assert_eq!(l("python -m mcp_server_time"), "mcp_server_time");
        assert_eq!(l("docker run -p 80:80 mcp/time"), "mcp/time");
        assert_eq!(
            l("docker run -i --rm -e TOKEN mcp/github:latest"),
            "mcp/github"
        );
        assert_eq!(l("pnpm dlx some-server"), "some-server");
        assert_eq!(l("target/release/basket"), "basket");
        assert_eq!(l("python3 -u servers/weather.py"), "weather");
        assert_eq!(l("node build/index.js"), "build/index");
    }

    #[test]
    fn further_arguments_make_the_name_distinct_and_stable() {
        let a = l("npx -y @modelcontextprotocol/server-filesystem /tmp/a");
        let b = l("npx -y @modelcontextprotocol/server-filesystem /tmp/b");
        assert!(
            a.starts_with("@modelcontextprotocol/server-filesystem#"),
            "{a}"
        );
        assert_ne!(a, b);
        assert_eq!(
            a,
            l("npx -y @modelcontextprotocol/server-filesystem@9 /tmp/a")
        );
        assert_ne!(l("npx -y @a/one"), l("npx -y @a/two"));
    }

    #[test]
    fn addresses_accept_host_and_port() {
        assert_eq!(
            address("localhost:8080").as_deref(),
            Some("http://localhost:8080/mcp")
        );
        assert_eq!(
            address("127.0.0.1:9/api/mcp").as_deref(),
            Some("http://127.0.0.1:9/api/mcp")
        );
        assert_eq!(address("[::1]:80").as_deref(), Some("http://[::1]:80/mcp"));
        assert_eq!(
            address("https://x.example/mcp").as_deref(),
            Some("https://x.example/mcp")
        );
        assert_eq!(address("basket"), None);
        assert_eq!(address("my:server"), None);
    }
}
