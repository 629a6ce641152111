//! `toolgate import`: a host's `mcpServers` file becomes a `toolgate.toml`,
//! and with `--install` the host runs its servers through the gateway.
//!
//! What carries over: each server's command, arguments, environment,
//! working directory, URL and headers; `"disabled": true` as
//! `enabled = false`; `autoApprove` (and Cline's `alwaysAllow`) as an allow
//! rule for exactly those tools. Keys toolgate has no setting for are
//! reported, not guessed at. Everything not auto-approved follows the
//! gateway's built-in default: a person approves it first.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::exit;
use crate::term::one_line;
use crate::{errln, outln};

/// A host that keeps an `mcpServers`-style file in a known place.
struct Host {
    /// What `toolgate import NAME` calls it.
    name: &'static str,
    /// Where, relative to the home directory (Linux first, then macOS).
    paths: &'static [&'static str],
    /// The key of its servers object.
    key: &'static str,
    /// Whether its client shows form elicitation, so the gateway can ask
    /// the person in the host itself; without it, `--install` turns the
    /// approval page on.
    asks: bool,
}

const HOSTS: &[Host] = &[
    Host {
        name: "claude-desktop",
        paths: &[
            ".config/Claude/claude_desktop_config.json",
            "Library/Application Support/Claude/claude_desktop_config.json",
        ],
        key: "mcpServers",
        asks: false,
    },
    Host {
        name: "claude-code",
        paths: &[".claude.json"],
        key: "mcpServers",
        asks: false,
    },
    Host {
        name: "cursor",
        paths: &[".cursor/mcp.json"],
        key: "mcpServers",
        asks: true,
    },
    Host {
        name: "vscode",
        paths: &[
            ".config/Code/User/mcp.json",
            "Library/Application Support/Code/User/mcp.json",
        ],
        key: "servers",
        asks: true,
    },
    Host {
        name: "windsurf",
        paths: &[".codeium/windsurf/mcp_config.json"],
        key: "mcpServers",
        asks: false,
    },
];

/// Keys of an entry that carry over as they are.
const CARRIED: &[&str] = &["command", "args", "env", "cwd", "url", "headers"];

/// Keys read as something of toolgate's own.
const READ: &[&str] = &["disabled", "autoApprove", "alwaysAllow", "type"];

/// Options of `toolgate import`.
#[derive(clap::Args)]
pub struct ImportArgs {
    /// The host whose file to read.
    #[arg(value_name = "HOST")]
    pub host: Option<String>,
    /// Read this mcpServers file instead of a host's.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Where the configuration goes.
    #[arg(long, value_name = "FILE", default_value = "toolgate.toml")]
    pub output: PathBuf,
    /// Also replace the host's entries with one that runs the gateway.
    #[arg(long)]
    pub install: bool,
    /// Overwrite an existing output file.
    #[arg(long)]
    pub force: bool,
    /// Put the host's servers behind an endpoint of their own
    /// (`[endpoints.NAME]`), and with `--install` point the host at it.
    #[arg(long, value_name = "NAME")]
    pub endpoint: Option<String>,
    /// Run every imported stdio server in this sandbox profile (`strict`
    /// or `network`); a directory a server is given as an argument is
    /// made writable for it.
    #[arg(long, value_name = "PROFILE", value_parser = ["strict", "network"])]
    pub sandbox: Option<String>,
}

/// `toolgate import`.
pub fn import(o: ImportArgs) -> anyhow::Result<u8> {
    if let Some(name) = &o.endpoint
        && !toolgate_gateway::config::valid_endpoint_name(name)
    {
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "--endpoint {name:?}: an endpoint name is 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit"
            ),
        ));
    }
    let (path, key, asks) = source(&o)?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| exit::fail(exit::USAGE, format!("cannot read {}: {e}", path.display())))?;
    let mut document: Value = serde_json::from_str(&text).map_err(|e| {
        exit::fail(
            exit::USAGE,
            format!("{} is not valid JSON: {e}", path.display()),
        )
    })?;
    let servers = document
        .get(key)
        .and_then(Value::as_object)
        .or_else(|| document.get("mcpServers").and_then(Value::as_object))
        .cloned()
        .ok_or_else(|| {
            exit::fail(
                exit::USAGE,
                format!("{} has no \"{key}\" object of servers", path.display()),
            )
        })?;
    if let Some(name) = starts_toolgate(&servers) {
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "{}: the entry {} already runs toolgate; importing it would make the gateway start itself",
                path.display(),
                one_line(&name)
            ),
        ));
    }
    if o.output.exists() && !o.force {
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "{} exists; pass --force to replace it, or --output FILE",
                o.output.display()
            ),
        ));
    }
    // A host whose client cannot show a form cannot approve a call in
    // the host: installed there, the approval page is how a person does.
    let page = o.install && !asks.unwrap_or(false);
    let mut config = to_toml(&servers, &path, page, o.sandbox.as_deref())?;
    if let Some(name) = &o.endpoint {
        config.push_str(&endpoint_section(name, servers.keys()));
    }
    write_private(&o.output, &config).map_err(|e| {
        exit::fail(
            exit::USAGE,
            format!("cannot write {}: {e}", o.output.display()),
        )
    })?;
    errln!(
        "toolgate: wrote {} ({} server(s) from {}), readable and writable by you only (0600): it carries the host's headers and env values",
        o.output.display(),
        servers.len(),
        path.display()
    );
    if !o.install {
        outln!(
            "Next: `toolgate serve --check --config {}`, then `toolgate import --install` to put the host's servers behind it.",
            o.output.display()
        );
        if asks.is_none() {
            outln!(
                "If your host cannot show approval forms, set `[approval] page = true` and `login_file = \"toolgate-login.txt\"` in {} and open the link written there to approve calls.",
                o.output.display()
            );
        }
        return Ok(exit::OK);
    }
    let backup = backup_of(&path);
    std::fs::copy(&path, &backup).map_err(|e| {
        exit::fail(
            exit::USAGE,
            format!(
                "cannot back up {} to {}: {e}",
                path.display(),
                backup.display()
            ),
        )
    })?;
    let config = std::path::absolute(&o.output).unwrap_or_else(|_| o.output.clone());
    let program = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "toolgate".into());
    let mut args = vec![
        "serve".to_owned(),
        "--stdio".to_owned(),
        "--config".to_owned(),
        config.display().to_string(),
    ];
    if let Some(name) = &o.endpoint {
        args.extend(["--endpoint".to_owned(), name.clone()]);
    }
    let entry = json!({
        "command": program,
        "args": args,
    });
    let mut only = Map::new();
    only.insert("toolgate".into(), entry);
    if let Some(root) = document.as_object_mut() {
        let key = if root.contains_key(key) {
            key
        } else {
            "mcpServers"
        };
        root.insert(key.into(), Value::Object(only));
    }
    let written = serde_json::to_string_pretty(&document)? + "\n";
    std::fs::write(&path, written)
        .map_err(|e| exit::fail(exit::USAGE, format!("cannot write {}: {e}", path.display())))?;
    outln!(
        "Installed: {} now starts `toolgate serve --stdio --config {}`; the original is {}.",
        path.display(),
        config.display(),
        backup.display()
    );
    if page {
        let login = config.with_file_name(LOGIN_FILE);
        outln!(
            "This host cannot show approval forms, so the approval page is on: open the link in {} to approve calls (a fresh link is written after each use).",
            login.display()
        );
    }
    Ok(exit::OK)
}

/// `[endpoints.NAME]` over every server imported (their keys), as TOML.
fn endpoint_section<'a>(name: &str, servers: impl Iterator<Item = &'a String>) -> String {
    let keys: Vec<String> = servers
        .map(|k| serde_json::Value::String(k.clone()).to_string())
        .collect();
    format!(
        "\n# The host's servers as one endpoint: `toolgate serve --stdio --endpoint {name}`,\n# or http://HOST:PORT/mcp/{name} with --http.\n[endpoints.{name}]\nservers = [{}]\n",
        keys.join(", ")
    )
}

/// Where an installed gateway writes its approval page's login link.
const LOGIN_FILE: &str = "toolgate-login.txt";

/// Write `text` to `path` readable and writable by its owner only: the
/// configuration carries the host's credentials, so it is never wider
/// than the host's own file should be.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(0o600);
        // An existing file (`--force`) keeps its mode when opened: narrow it first.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())
}

/// The host's file, the key of its servers object, and whether its client
/// shows forms (unknown for `--from`).
fn source(o: &ImportArgs) -> anyhow::Result<(PathBuf, &'static str, Option<bool>)> {
    if let Some(from) = &o.from {
        if o.host.is_some() {
            return Err(exit::fail(
                exit::USAGE,
                "give a HOST or --from FILE, not both",
            ));
        }
        return Ok((from.clone(), "mcpServers", None));
    }
    let names: Vec<&str> = HOSTS.iter().map(|h| h.name).collect();
    let Some(name) = &o.host else {
        return Err(exit::fail(
            exit::USAGE,
            format!("name a host ({}) or pass --from FILE", names.join(", ")),
        ));
    };
    let Some(host) = HOSTS.iter().find(|h| h.name == name) else {
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "unknown host {:?}; known: {}",
                one_line(name),
                names.join(", ")
            ),
        ));
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| exit::fail(exit::USAGE, "HOME is not set; pass --from FILE"))?;
    let found = host.paths.iter().map(|p| home.join(p)).find(|p| p.exists());
    let Some(path) = found else {
        let looked: Vec<String> = host
            .paths
            .iter()
            .map(|p| home.join(p).display().to_string())
            .collect();
        return Err(exit::fail(
            exit::USAGE,
            format!(
                "no {} configuration at {}; pass --from FILE",
                host.name,
                looked.join(" or ")
            ),
        ));
    };
    Ok((path, host.key, Some(host.asks)))
}

/// The name of an entry that runs toolgate, if one does.
fn starts_toolgate(servers: &Map<String, Value>) -> Option<String> {
    servers.iter().find_map(|(name, entry)| {
        let command = entry.get("command")?.as_str()?;
        let program = Path::new(command).file_name()?.to_str()?;
        (program == "toolgate").then(|| name.clone())
    })
}

/// `FILE.toolgate-backup`, or with a number when that exists.
fn backup_of(path: &Path) -> PathBuf {
    let base = format!("{}.toolgate-backup", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        n += 1;
        candidate = PathBuf::from(format!("{base}-{n}"));
    }
    candidate
}

/// `sandbox` of an imported stdio server: the profile, and the directories
/// it is given as arguments (server-filesystem's roots) writable.
fn sandbox_of(name: &str, entry: &Map<String, Value>, profile: &str) -> toml::Value {
    let dirs: Vec<toml::Value> = entry
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|a| Path::new(a).is_absolute() && Path::new(a).is_dir())
        .map(|a| toml::Value::String(a.to_owned()))
        .collect();
    if dirs.is_empty() {
        return toml::Value::String(profile.to_owned());
    }
    errln!(
        "toolgate: {}: its sandbox lets it write {} (the directories it is given); narrow `write` if it only reads them",
        one_line(name),
        dirs.iter()
            .filter_map(toml::Value::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut table = toml::Table::new();
    table.insert("profile".into(), toml::Value::String(profile.to_owned()));
    table.insert("write".into(), toml::Value::Array(dirs));
    toml::Value::Table(table)
}

/// The servers as a `toolgate.toml`, reporting what does not carry over;
/// with `page`, the approval page on and its login link in a file.
fn to_toml(
    servers: &Map<String, Value>,
    from: &Path,
    page: bool,
    sandbox: Option<&str>,
) -> anyhow::Result<String> {
    let mut tables = toml::Table::new();
    let mut allowed = Vec::new();
    for (name, entry) in servers {
        let Some(entry) = entry.as_object() else {
            return Err(exit::fail(
                exit::USAGE,
                format!("the entry {} is not an object", one_line(name)),
            ));
        };
        let mut table = toml::Table::new();
        for key in CARRIED {
            if let Some(value) = entry.get(*key) {
                let value = toml::Value::try_from(value).map_err(|e| {
                    exit::fail(exit::USAGE, format!("{}.{key}: {e}", one_line(name)))
                })?;
                table.insert((*key).to_owned(), value);
            }
        }
        if entry.get("disabled") == Some(&Value::Bool(true)) {
            table.insert("enabled".into(), toml::Value::Boolean(false));
        }
        // The deprecated HTTP+SSE transport (2024-11-05), by name.
        if entry.get("type").and_then(Value::as_str) == Some("sse") {
            table.insert("transport".into(), toml::Value::String("sse".into()));
        }
        if let Some(profile) = sandbox.filter(|_| entry.contains_key("command")) {
            table.insert("sandbox".into(), sandbox_of(name, entry, profile));
        }
        let prefix = toolgate_gateway::config::default_prefix(name);
        for key in ["autoApprove", "alwaysAllow"] {
            if let Some(tools) = entry.get(key).and_then(Value::as_array) {
                // The host names tools exactly: `*` is a tool called `*`
                // there, never every tool, so the name is escaped.
                for tool in tools.iter().filter_map(Value::as_str) {
                    if tool.contains(['*', '?', '[', ']']) {
                        errln!(
                            "toolgate: {}.{key}: {:?} names a tool exactly (the host matches no patterns); it is allowed only if a tool has that very name",
                            one_line(name),
                            one_line(tool)
                        );
                    }
                    allowed.push(toml::Value::String(toolgate_gateway::exactly(
                        &toolgate_gateway::qualify(&prefix, tool),
                    )));
                }
            }
        }
        let dropped: Vec<&str> = entry
            .keys()
            .map(String::as_str)
            .filter(|k| !CARRIED.contains(k) && !READ.contains(k))
            .collect();
        if !dropped.is_empty() {
            errln!(
                "toolgate: {}: not carried over (toolgate has no such setting): {}",
                one_line(name),
                dropped.join(", ")
            );
        }
        tables.insert(name.clone(), toml::Value::Table(table));
    }
    let mut root = toml::Table::new();
    root.insert("servers".into(), toml::Value::Table(tables));
    if !allowed.is_empty() {
        let mut rule = toml::Table::new();
        rule.insert("tools".into(), toml::Value::Array(allowed));
        rule.insert("action".into(), toml::Value::String("allow".into()));
        let mut policy = toml::Table::new();
        policy.insert(
            "rules".into(),
            toml::Value::Array(vec![toml::Value::Table(rule)]),
        );
        root.insert("policy".into(), toml::Value::Table(policy));
    }
    if page {
        let mut approval = toml::Table::new();
        approval.insert("page".into(), toml::Value::Boolean(true));
        approval.insert(
            "login_file".into(),
            toml::Value::String(LOGIN_FILE.to_owned()),
        );
        root.insert("approval".into(), toml::Value::Table(approval));
    }
    let body = toml::to_string(&root)?;
    Ok(format!(
        "# Imported from {} by `toolgate import`.\n# Calls not allowed below are approved by a person first (the built-in\n# default); see docs/gateway.md for [policy], [audit] and [approval].\n\n{body}",
        from.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_file_becomes_a_configuration_the_gateway_loads() {
        let servers: Map<String, Value> = serde_json::from_value(json!({
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                      "env": {"LOG": "1"}, "autoApprove": ["read_text_file"], "disabled": false},
            "old": {"command": "x", "disabled": true, "transportType": "stdio"},
            "web": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "hosted": {"type": "sse", "url": "https://old.example.com/sse"}
        }))
        .unwrap();
        let text = to_toml(&servers, Path::new("/home/u/.cursor/mcp.json"), false, None).unwrap();
        let config = toolgate_gateway::config::GatewayConfig::parse_toml(&text, |v| {
            (v == "TOKEN").then(|| "t".to_owned())
        })
        .unwrap();
        assert_eq!(config.servers["files"].args[2], "/srv");
        assert_eq!(config.servers["files"].env["LOG"], "1");
        assert!(config.servers["files"].enabled && !config.servers["old"].enabled);
        assert_eq!(config.servers["web"].headers["Authorization"], "Bearer t");
        assert_eq!(config.policy.rules[0].tools, ["files.read_text_file"]);
        assert_eq!(
            config.servers["hosted"].transport,
            Some(toolgate_gateway::config::HttpKind::Sse)
        );
        assert!(text.contains("transport = \"sse\""), "{text}");
        assert!(
            text.starts_with("# Imported from /home/u/.cursor/mcp.json"),
            "{text}"
        );
    }

    #[test]
    fn auto_approved_names_are_exact_and_a_formless_host_gets_the_page() {
        let servers: Map<String, Value> = serde_json::from_value(json!({
            "files": {"command": "npx", "autoApprove": ["*", "get_[a-z]*", "read_file"]}
        }))
        .unwrap();
        let text = to_toml(&servers, Path::new("/h/mcp.json"), true, None).unwrap();
        let config = toolgate_gateway::config::GatewayConfig::parse_toml(&text, |_| None).unwrap();
        let globs: Vec<glob::Pattern> = config.policy.rules[0]
            .tools
            .iter()
            .map(|g| glob::Pattern::new(g).unwrap())
            .collect();
        let allowed = |name: &str| globs.iter().any(|g| g.matches(name));
        assert!(allowed("files.read_file") && allowed("files.*"));
        assert!(!allowed("files.write_file"), "`*` allows no other tool");
        assert!(!allowed("files.get_info"), "nor does a bracket pattern");
        assert!(config.approval.page);
        assert_eq!(
            config.approval.login_file.as_deref(),
            Some(Path::new("toolgate-login.txt"))
        );
    }

    #[test]
    fn a_sandbox_profile_goes_into_every_stdio_server_with_its_directories_writable() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let servers: Map<String, Value> = serde_json::from_value(json!({
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", root]},
            "time": {"command": "uvx", "args": ["mcp-server-time"]},
            "web": {"url": "https://mcp.example.com/mcp"}
        }))
        .unwrap();
        let text = to_toml(&servers, Path::new("/h/mcp.json"), false, Some("strict")).unwrap();
        let config = toolgate_gateway::config::GatewayConfig::parse_toml(&text, |_| None).unwrap();
        let files = config.servers["files"].sandbox.as_ref().unwrap().table();
        assert_eq!(files.profile.as_deref(), Some("strict"));
        assert_eq!(files.write, [root]);
        assert_eq!(
            config.servers["time"]
                .sandbox
                .as_ref()
                .unwrap()
                .profile_name(),
            "strict"
        );
        assert!(config.servers["web"].sandbox.is_none());
    }

    #[cfg(unix)]
    #[test]
    fn the_configuration_is_written_for_its_owner_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("toolgate.toml");
        std::fs::write(&out, "old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&out, "new").unwrap();
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        let fresh = dir.path().join("fresh.toml");
        write_private(&fresh, "x").unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn an_entry_that_runs_toolgate_is_found() {
        let servers: Map<String, Value> = serde_json::from_value(json!({
            "a": {"command": "npx"},
            "gw": {"command": "/usr/local/bin/toolgate", "args": ["serve", "--stdio"]}
        }))
        .unwrap();
        assert_eq!(starts_toolgate(&servers).as_deref(), Some("gw"));
    }
}
