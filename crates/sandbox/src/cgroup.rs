//! Control groups that cap a sandbox's processes and memory: the one cap on
//! processes that holds for root (the kernel exempts uid 0 from
//! `RLIMIT_NPROC`), and a memory cap that counts what a process maps, not
//! what it reserves (V8 reserves gigabytes it never touches).
//!
//! Layer: used by the launcher's first stage only.

use std::path::{Path, PathBuf};

/// The name prefix of what a launcher makes (its groups, its temporary
/// directory): `toolgate-sandbox-<launcher pid>`.
pub(crate) const PREFIX: &str = "toolgate-sandbox-";

/// Whether `name` is something a launcher made that is no longer running
/// (killed before it could remove it).
pub(crate) fn left_by_a_gone_launcher(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix(PREFIX))
        .is_some_and(|pid| pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists())
}

/// The groups of one sandbox, one per controller.
#[derive(Debug, Default)]
pub struct Cgroup {
    dirs: Vec<PathBuf>,
}

/// Where this process's group of `controller` is, cgroup v1 first (this
/// project's machines have pids and memory on v1 only), then v2.
fn own_dir(controller: &str) -> Option<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in table.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if controllers.split(',').any(|c| c == controller) {
            let dir = Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(path.trim_start_matches('/'));
            if dir.is_dir() {
                return Some(dir);
            }
        }
    }
    for line in table.lines() {
        if let Some(path) = line.strip_prefix("0::") {
            for root in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
                let dir = Path::new(root).join(path.trim_start_matches('/'));
                let offered =
                    std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
                if offered.split_whitespace().any(|c| c == controller) {
                    return Some(dir);
                }
            }
        }
    }
    None
}

/// Whether a group of `controller` can be made here (for `sandbox check`).
pub fn available(controller: &str) -> bool {
    let Some(parent) = own_dir(controller) else {
        return false;
    };
    let dir = parent.join(format!("{PREFIX}probe-{}", std::process::id()));
    let made = std::fs::create_dir(&dir).is_ok();
    let _ = std::fs::remove_dir(&dir);
    made
}

impl Cgroup {
    /// Make the groups for these caps; what could not be made is returned
    /// as gaps in words.
    pub fn create(processes: Option<u32>, memory: Option<u64>) -> (Self, Vec<String>) {
        let mut group = Cgroup::default();
        let mut gaps = Vec::new();
        let name = format!("{PREFIX}{}", std::process::id());
        // The launcher and its init join the group before the server starts:
        // two more processes than the server's own limit.
        let caps = [
            ("pids", processes.map(|n| (n.saturating_add(2)).to_string())),
            ("memory", memory.map(|m| m.to_string())),
        ];
        for (controller, cap) in caps {
            let Some(cap) = cap else { continue };
            let Some(parent) = own_dir(controller) else {
                gaps.push(format!("no {controller} cgroup to join"));
                continue;
            };
            sweep(&parent);
            let dir = parent.join(&name);
            let file = match controller {
                "pids" => "pids.max",
                _ if dir.join("memory.max").exists() || parent.join("memory.max").exists() => {
                    "memory.max"
                }
                _ => "memory.limit_in_bytes",
            };
            let made = std::fs::create_dir(&dir)
                .and_then(|()| std::fs::write(dir.join(file), &cap))
                .and_then(|()| {
                    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
                });
            match made {
                Ok(()) => group.dirs.push(dir),
                Err(e) => {
                    let _ = std::fs::remove_dir(&dir);
                    gaps.push(format!("cannot make a {controller} cgroup: {e}"));
                }
            }
        }
        (group, gaps)
    }

    /// Leave the groups and remove them (after the sandbox ended).
    pub fn remove(self) {
        for dir in self.dirs {
            if let Some(parent) = dir.parent() {
                let _ = std::fs::write(parent.join("cgroup.procs"), std::process::id().to_string());
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// Remove the groups of launchers that were killed before they could: a
/// group with a process in it is never removed (`rmdir` refuses).
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        if left_by_a_gone_launcher(&entry.file_name()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
