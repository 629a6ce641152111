//! Turning a TARGET (URL, config name, or `-- COMMAND ARGS...`) into a client.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::transport::stdio::{StdioCommand, StdioTransport};
use toolgate_client::{Client, ClientBuilder};

/// One server of an `mcpServers` config file (the format desktop and editor hosts use).
#[derive(Debug, Deserialize)]
pub struct ServerEntry {
    /// Program to run (stdio).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// URL (Streamable HTTP).
    pub url: Option<String>,
    /// Extra HTTP headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Trust this server's annotations (toolgate extension; default false).
    #[serde(default)]
    pub trusted: bool,
}

#[derive(Debug, Deserialize)]
struct ConfigFile {
    #[serde(rename = "mcpServers")]
    servers: BTreeMap<String, ServerEntry>,
}

/// Where to find the server.
pub struct Target {
    /// Display name.
    pub name: String,
    /// How to build the client.
    entry: ServerEntry,
}

fn load_config(path: &Path) -> anyhow::Result<ConfigFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not an mcpServers config file", path.display()))
}

/// Resolve a target from the command line.
pub fn resolve(
    target: Option<&str>,
    config: Option<&Path>,
    command: &[String],
) -> anyhow::Result<Target> {
    if !command.is_empty() {
        if target.is_some() {
            bail!("give either a TARGET or `-- COMMAND ARGS...`, not both");
        }
        let entry = ServerEntry {
            command: Some(command[0].clone()),
            args: command[1..].to_vec(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            trusted: false,
        };
        return Ok(Target {
            name: command[0].clone(),
            entry,
        });
    }
    let Some(target) = target else {
        bail!("no server given: pass a URL, a server name from --config, or `-- COMMAND ARGS...`");
    };
    if target.starts_with("http://") || target.starts_with("https://") {
        let entry = ServerEntry {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: Some(target.to_owned()),
            headers: BTreeMap::new(),
            trusted: false,
        };
        return Ok(Target {
            name: target.to_owned(),
            entry,
        });
    }
    let path = config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("mcp.json"));
    let mut file = load_config(&path)?;
    let entry = file.servers.remove(target).with_context(|| {
        let known: Vec<&String> = file.servers.keys().collect();
        format!(
            "no server {target:?} in {} (it has: {known:?})",
            path.display()
        )
    })?;
    Ok(Target {
        name: target.to_owned(),
        entry,
    })
}

/// Every server of a config file, in name order.
pub fn resolve_all(config: Option<&Path>) -> anyhow::Result<Vec<Target>> {
    let path = config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("mcp.json"));
    let file = load_config(&path)?;
    Ok(file
        .servers
        .into_iter()
        .map(|(name, entry)| Target { name, entry })
        .collect())
}

impl Target {
    /// Whether the config marks this server as trusted.
    pub fn trusted(&self) -> bool {
        self.entry.trusted
    }

    /// Build a client for this target.
    pub fn client(&self, builder: ClientBuilder, timeout: Duration) -> anyhow::Result<Client> {
        let builder = builder
            .timeout(timeout)
            .name(self.name.clone())
            .trusted(self.entry.trusted);
        if let Some(url) = &self.entry.url {
            let options = HttpOptions {
                headers: self
                    .entry
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                bearer_token: std::env::var("TOOLGATE_BEARER_TOKEN").ok(),
                connect_timeout: None,
                limits: Default::default(),
            };
            return Ok(builder.build(HttpTransport::new(url.clone(), options)?));
        }
        let Some(program) = &self.entry.command else {
            bail!("server {:?} has neither a command nor a url", self.name);
        };
        let command = StdioCommand {
            program: program.clone(),
            args: self.entry.args.clone(),
            env: self
                .entry
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cwd: self.entry.cwd.clone(),
        };
        Ok(builder.build(StdioTransport::spawn(&command)?))
    }
}
