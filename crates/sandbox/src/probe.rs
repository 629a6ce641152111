//! What this machine can enforce: the Landlock ABI (asked of the syscall,
//! never of `/sys/kernel/security`, which is often not mounted), the
//! namespaces an unshare gets, and the cgroups a sandbox can join.
//!
//! Probing unshares and restricts the process that probes, so it runs in a
//! process of its own: `toolgate sandbox probe`, started by [`Support::query`].
//!
//! Layer: beside [`crate::policy`]; read by the launcher and by reports.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// What the kernel offers a sandbox here.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Support {
    /// The Landlock ABI (0: none).
    pub landlock_abi: u8,
    /// The launcher runs as root (uid 0).
    pub root: bool,
    /// A user namespace can be made (what lets a non-root user make the others).
    pub user_namespace: bool,
    /// A PID namespace can be made (the server sees only its own processes).
    pub pid_namespace: bool,
    /// A mount namespace can be made (for a `/proc` of its own).
    pub mount_namespace: bool,
    /// A network namespace can be made (no interface but its own loopback).
    pub net_namespace: bool,
    /// A pids cgroup can be made (a process cap that holds for root).
    pub pids_cgroup: bool,
    /// A memory cgroup can be made.
    pub memory_cgroup: bool,
}

impl Support {
    /// PID and mount namespaces both: a `/proc` of the server's own.
    pub fn namespaces(&self) -> bool {
        self.pid_namespace && self.mount_namespace
    }

    /// Ask `launcher sandbox probe` (a process of its own: probing
    /// restricts the prober).
    pub fn query(launcher: &Path) -> Result<Self, SandboxError> {
        let out = std::process::Command::new(launcher)
            .args(["sandbox", "probe"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .map_err(|e| SandboxError::Launcher(e.to_string()))?;
        serde_json::from_slice(&out.stdout).map_err(|e| SandboxError::Launcher(e.to_string()))
    }

    /// Probe in this process. It unshares namespaces and restricts itself
    /// with Landlock: call it only in a process that exits afterwards.
    #[cfg(target_os = "linux")]
    pub fn probe_here() -> Self {
        use nix::sched::{CloneFlags, unshare};
        let root = nix::unistd::geteuid().is_root();
        let mut support = Support {
            root,
            pids_cgroup: crate::cgroup::available("pids"),
            memory_cgroup: crate::cgroup::available("memory"),
            ..Support::default()
        };
        // A non-root user needs a user namespace before the others; root
        // makes the others without one, and tries it last.
        if !root {
            support.user_namespace = unshare(CloneFlags::CLONE_NEWUSER).is_ok();
        }
        support.mount_namespace = unshare(CloneFlags::CLONE_NEWNS).is_ok();
        support.pid_namespace = unshare(CloneFlags::CLONE_NEWPID).is_ok();
        support.net_namespace = unshare(CloneFlags::CLONE_NEWNET).is_ok();
        if root {
            support.user_namespace = unshare(CloneFlags::CLONE_NEWUSER).is_ok();
        }
        support.landlock_abi = crate::landlock::abi();
        support
    }

    /// Elsewhere nothing is enforced.
    #[cfg(not(target_os = "linux"))]
    pub fn probe_here() -> Self {
        Support::default()
    }

    /// One line per mechanism: what it is, and whether it is here.
    pub fn lines(&self) -> Vec<(String, bool)> {
        let abi = if self.landlock_abi == 0 {
            "Landlock: unavailable".to_owned()
        } else {
            format!(
                "Landlock ABI {} (the rules need {})",
                self.landlock_abi,
                crate::policy::LANDLOCK_ABI
            )
        };
        vec![
            (abi, self.landlock_abi >= crate::policy::LANDLOCK_ABI),
            (
                "PID namespace (its own /proc)".to_owned(),
                self.pid_namespace,
            ),
            ("mount namespace".to_owned(), self.mount_namespace),
            (
                "network namespace (network = none | loopback)".to_owned(),
                self.net_namespace,
            ),
            (
                format!(
                    "user namespace{}",
                    if self.root {
                        " (not needed as root)"
                    } else {
                        ""
                    }
                ),
                self.user_namespace || self.root,
            ),
            match (self.pids_cgroup, self.root) {
                (true, _) => ("pids cgroup (processes)".to_owned(), true),
                (false, true) => (
                    "pids cgroup (processes: root is exempt from RLIMIT_NPROC)".to_owned(),
                    false,
                ),
                (false, false) => (
                    "processes: RLIMIT_NPROC in its user namespace (no pids cgroup to join)"
                        .to_owned(),
                    true,
                ),
            },
            (
                if self.memory_cgroup {
                    "memory cgroup (memory)".to_owned()
                } else {
                    "memory: RLIMIT_DATA (no memory cgroup to join)".to_owned()
                },
                true,
            ),
        ]
    }
}
