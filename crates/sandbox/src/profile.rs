//! Named profiles, and what a configuration asks for turned into a
//! [`Policy`]: the system's read-only paths, the server's own install, the
//! paths and network the configuration names.
//!
//! Layer: above [`crate::install`] and [`crate::policy`].

use std::path::PathBuf;

use crate::SandboxError;
use crate::install::{ServerCommand, install_paths};
use crate::policy::{Mode, Network, Policy};

/// A named starting point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    /// No network; the system's read-only paths and the server's own
    /// install; a private temporary directory; writes nowhere else.
    #[default]
    Strict,
    /// `strict`, plus outbound TCP to any address.
    Network,
}

impl Profile {
    /// The profile called `name`.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "strict" => Some(Profile::Strict),
            "network" => Some(Profile::Network),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Strict => "strict",
            Profile::Network => "network",
        }
    }
}

/// Read-only in every profile: programs, libraries, and the few files of
/// `/etc` that starting a program, resolving a name and checking a
/// certificate read. Not `/etc` as a whole (its keys and shadow file),
/// not `/home`, `/root`, `/var`, `/tmp`. Missing ones are skipped.
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/os-release",
    "/etc/mime.types",
    "/etc/alternatives",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
];

/// Devices every program may open for reading and writing.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The default process cap of a profile (threads count: Node starts a
/// dozen).
pub const DEFAULT_PROCESSES: u32 = 256;

/// What a configuration asks for: a profile and what it adds or overrides.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The starting point.
    pub profile: Profile,
    /// More readable paths (absolute; they must exist).
    pub read: Vec<PathBuf>,
    /// Writable paths (absolute; they must exist).
    pub write: Vec<PathBuf>,
    /// The network, if not the profile's.
    pub network: Option<Network>,
    /// The process cap, if not [`DEFAULT_PROCESSES`].
    pub processes: Option<u32>,
    /// A memory cap in bytes.
    pub memory: Option<u64>,
    /// A CPU-time cap in seconds.
    pub cpu_seconds: Option<u64>,
    /// Enforce all or start with what holds.
    pub mode: Mode,
}

impl Request {
    /// The policy for running `command` under this request.
    pub fn resolve(&self, command: &ServerCommand) -> Result<Policy, SandboxError> {
        for path in self.read.iter().chain(&self.write) {
            if !path.is_absolute() {
                return Err(SandboxError::Path(format!(
                    "sandbox path {} is relative: give an absolute path (`~/` and `${{VAR}}` are expanded)",
                    path.display()
                )));
            }
            if !path.exists() {
                return Err(SandboxError::Path(format!(
                    "sandbox path {} does not exist: create it, or remove it from the sandbox",
                    path.display()
                )));
            }
        }
        let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        read.extend(install_paths(command));
        read.extend(self.read.iter().cloned());
        let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
        write.extend(self.write.iter().cloned());
        let network = self.network.clone().unwrap_or(match self.profile {
            Profile::Strict => Network::None,
            Profile::Network => Network::Outbound,
        });
        Ok(Policy {
            profile: self.profile.name().to_owned(),
            read,
            write,
            network,
            processes: Some(self.processes.unwrap_or(DEFAULT_PROCESSES)),
            memory: self.memory,
            cpu_seconds: self.cpu_seconds,
            mode: self.mode,
            private_tmp: true,
        })
    }
}
