//! `sandbox` and `sandbox_mode` of a stdio server: a named profile, or a
//! table that starts from one and adds paths, a network and caps.
//!
//! ```toml
//! [servers.files]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "~/notes"]
//! sandbox = { profile = "strict", write = ["~/notes"], memory = "512 MiB" }
//! ```
//!
//! Layer: `config`.

use super::*;
use toolgate_sandbox::{Endpoint, Mode, Network, Profile, Request};

/// A stdio server's sandbox: `"strict"`, `"network"`, or a table.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxConfig {
    /// A profile by name: `strict` (no network, the system's read-only
    /// paths and the server's own install, a private temporary directory,
    /// writes nowhere else) or `network` (strict plus outbound TCP).
    Profile(String),
    /// A profile with additions.
    Table(SandboxTable),
}

/// A sandbox written as a table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxTable {
    /// The profile it starts from (default `strict`).
    pub profile: Option<String>,
    /// More readable paths (`~` and `${VAR}` expanded; they must exist).
    #[serde(default)]
    pub read: Vec<String>,
    /// Writable paths (`~` and `${VAR}` expanded; they must exist).
    #[serde(default)]
    pub write: Vec<String>,
    /// `"none"`, `"loopback"` (its own, not the host's), `"outbound"` (any
    /// TCP), or `["host:port", …]` (TCP to those ports; Landlock rules are
    /// per port, so the host is not enforced). Default: the profile's.
    pub network: Option<NetworkConfig>,
    /// At most this many processes and threads (default 256).
    pub processes: Option<u32>,
    /// At most this much memory, e.g. `"512 MiB"`.
    pub memory: Option<ByteSize>,
    /// At most this many seconds of CPU time; then it is killed.
    pub cpu_seconds: Option<u64>,
}

/// `network` of a sandbox table.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NetworkConfig {
    /// `none`, `loopback` or `outbound`.
    Named(String),
    /// `host:port` entries.
    Endpoints(Vec<String>),
}

/// `sandbox_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Refuse to start the server unless every rule is enforced.
    #[default]
    Enforce,
    /// Start it with what this machine enforces, logging each rule it
    /// cannot.
    BestEffort,
}

impl SandboxConfig {
    /// The table form (a name is a table with only the profile).
    pub fn table(&self) -> SandboxTable {
        match self {
            SandboxConfig::Profile(name) => SandboxTable {
                profile: Some(name.clone()),
                ..SandboxTable::default()
            },
            SandboxConfig::Table(t) => t.clone(),
        }
    }

    /// The profile's name as written (default `strict`).
    pub fn profile_name(&self) -> String {
        self.table().profile.unwrap_or_else(|| "strict".to_owned())
    }

    /// Check what is wrong without touching the file system.
    pub(super) fn check(&self, server: &str) -> Result<(), ConfigError> {
        let table = self.table();
        let name = table.profile.as_deref().unwrap_or("strict");
        if Profile::named(name).is_none() {
            return Err(err(format!(
                "server {server:?}: sandbox profile {name:?} is unknown: use \"strict\" or \"network\""
            )));
        }
        network(&table.network)
            .map_err(|m| err(format!("server {server:?}: sandbox network: {m}")))?;
        if table.processes == Some(0) {
            return Err(err(format!(
                "server {server:?}: sandbox processes must be at least 1"
            )));
        }
        if table.cpu_seconds == Some(0) {
            return Err(err(format!(
                "server {server:?}: sandbox cpu_seconds must be at least 1"
            )));
        }
        Ok(())
    }

    /// Expand `~` and `${VAR}` in its paths.
    pub(super) fn expand(
        &mut self,
        server: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let SandboxConfig::Table(table) = self else {
            return Ok(());
        };
        for path in table.read.iter_mut().chain(table.write.iter_mut()) {
            let mut text =
                expand(path, env).map_err(|unset| err(format!("server {server:?}: {unset}")))?;
            if text == "~" || text.starts_with("~/") {
                let home = env("HOME").ok_or_else(|| {
                    err(format!(
                        "server {server:?}: sandbox path {path:?} starts with ~ but HOME is not set"
                    ))
                })?;
                text = format!("{home}{}", &text[1..]);
            }
            *path = text;
        }
        Ok(())
    }

    /// What to ask the sandbox crate for.
    pub fn request(&self, mode: Option<SandboxMode>) -> Request {
        let table = self.table();
        Request {
            profile: table
                .profile
                .as_deref()
                .and_then(Profile::named)
                .unwrap_or_default(),
            read: table.read.iter().map(PathBuf::from).collect(),
            write: table.write.iter().map(PathBuf::from).collect(),
            network: network(&table.network).ok().flatten(),
            processes: table.processes,
            memory: table.memory.map(|m| m.0),
            cpu_seconds: table.cpu_seconds,
            mode: match mode.unwrap_or_default() {
                SandboxMode::Enforce => Mode::Enforce,
                SandboxMode::BestEffort => Mode::BestEffort,
            },
        }
    }
}

/// The network a table names (`None`: the profile's).
fn network(config: &Option<NetworkConfig>) -> Result<Option<Network>, String> {
    Ok(match config {
        None => None,
        Some(NetworkConfig::Named(name)) => Some(match name.as_str() {
            "none" => Network::None,
            "loopback" => Network::Loopback,
            "outbound" => Network::Outbound,
            other => {
                return Err(format!(
                    "{other:?} is unknown: use \"none\", \"loopback\", \"outbound\" or a list of \"host:port\""
                ));
            }
        }),
        Some(NetworkConfig::Endpoints(list)) => {
            let mut endpoints = Vec::with_capacity(list.len());
            for entry in list {
                let (host, port) = entry
                    .rsplit_once(':')
                    .filter(|(h, _)| !h.is_empty())
                    .ok_or_else(|| format!("{entry:?} is not host:port"))?;
                let port: u16 = port
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("{entry:?}: the port is not 1 to 65535"))?;
                endpoints.push(Endpoint {
                    host: host.to_owned(),
                    port,
                });
            }
            Some(Network::Ports(endpoints))
        }
    })
}
