//! What a sandboxed server may do, resolved to absolute paths and numbers:
//! the one value the gateway hands the launcher, and what `serve --check`
//! compares with what the kernel can enforce.
//!
//! Layer: the bottom of this crate; everything else reads a [`Policy`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::probe::Support;

/// What a sandboxed server may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The profile it was built from (`strict`, `network`), for reports.
    pub profile: String,
    /// Readable (and executable) paths, each with everything beneath it.
    pub read: Vec<PathBuf>,
    /// Writable paths (every file-system right), each with everything beneath it.
    pub write: Vec<PathBuf>,
    /// What it may reach over the network.
    pub network: Network,
    /// At most this many processes and threads at once (its own included).
    pub processes: Option<u32>,
    /// At most this many bytes of memory.
    pub memory: Option<u64>,
    /// At most this many seconds of CPU time; past them it is killed.
    pub cpu_seconds: Option<u64>,
    /// Refuse to start unless every rule is enforced, or start with what can be.
    pub mode: Mode,
    /// Give it a temporary directory of its own (`TMPDIR`), removed after it.
    pub private_tmp: bool,
}

/// What a sandboxed server may reach over the network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// Nothing: a network namespace of its own with no interface up, and no
    /// TCP connect or bind.
    #[default]
    None,
    /// Its own loopback only: a network namespace of its own with `lo` up,
    /// so it and its children can talk to each other; nothing outside.
    Loopback,
    /// Outbound TCP to any address; no listening socket.
    Outbound,
    /// Outbound TCP to these ports only (Landlock rules are per port: the
    /// host part is documentation, not enforced), no listening socket.
    Ports(Vec<Endpoint>),
}

/// One `host:port` a server may connect to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The host as written.
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

/// Whether every rule must hold before the server starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Refuse to start the server unless the kernel enforces every rule.
    #[default]
    Enforce,
    /// Start it with what the kernel enforces, and log each rule it cannot.
    BestEffort,
}

/// What stage 1 achieved, for stage 2.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stage {
    /// In a PID and mount namespace of its own (mount `/proc`).
    pub namespaces: bool,
    /// In a network namespace of its own.
    pub net: bool,
    /// The process cap falls back to `RLIMIT_NPROC` (no pids cgroup).
    pub nproc_rlimit: bool,
    /// The memory cap falls back to `RLIMIT_DATA` (no memory cgroup).
    pub data_rlimit: bool,
}

/// The Landlock ABI the rules are written for: file-system rights up to
/// device ioctls (5), TCP rules (4), and the scopes that keep a server from
/// signalling or reaching abstract sockets outside its domain (6).
pub const LANDLOCK_ABI: u8 = 6;

impl Policy {
    /// The rules this machine cannot enforce, each said as what the server
    /// could then do. Empty: all of it holds.
    pub fn gaps(&self, support: &Support) -> Vec<String> {
        let mut gaps = Vec::new();
        match support.landlock_abi {
            0 => gaps.push(
                "Landlock is unavailable: the server could read and write every file the gateway can"
                    .to_owned(),
            ),
            abi if abi < LANDLOCK_ABI => gaps.push(format!(
                "Landlock ABI {abi} (of {LANDLOCK_ABI}): {}",
                missing_below(abi, &self.network)
            )),
            _ => {}
        }
        let namespaces = support.namespaces();
        if !namespaces {
            gaps.push(
                "no PID and mount namespaces: the server would see other processes, and /proc is left out of its paths"
                    .to_owned(),
            );
        }
        if matches!(self.network, Network::None | Network::Loopback) && !support.net_namespace {
            gaps.push(
                "no network namespace: UDP and unix sockets would reach the host's network"
                    .to_owned(),
            );
        }
        if self.processes.is_some() && !support.pids_cgroup && support.root {
            gaps.push(
                "no pids cgroup: the process limit cannot hold for root (RLIMIT_NPROC does not apply to uid 0)"
                    .to_owned(),
            );
        }
        gaps
    }
}

/// What an older ABI leaves out of these rules.
pub(crate) fn missing_below(abi: u8, network: &Network) -> String {
    let mut missing = Vec::new();
    if abi < 2 {
        missing.push("moving files across directories");
    }
    if abi < 3 {
        missing.push("truncating files");
    }
    if abi < 4 && matches!(network, Network::None | Network::Ports(_)) {
        missing.push("TCP connect and bind rules");
    }
    if abi < 5 {
        missing.push("device ioctls");
    }
    if abi < 6 {
        missing.push("signals and abstract unix sockets outside the sandbox");
    }
    format!("not enforced: {}", missing.join(", "))
}

impl Policy {
    /// The policy as one command-line argument for the launcher.
    pub fn to_arg(&self) -> String {
        // A struct of strings, numbers and paths always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The policy the launcher was given.
    pub fn from_arg(arg: &str) -> Result<Self, crate::SandboxError> {
        serde_json::from_str(arg).map_err(|e| crate::SandboxError::Policy(e.to_string()))
    }
}
