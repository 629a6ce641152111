//! The launcher: how a sandboxed server is started, in two stages of the
//! `toolgate` binary, each a single-threaded process (namespaces and
//! Landlock apply to the calling thread).
//!
//! 1. **Outside** ([`launch`]): make the private temporary directory and the
//!    cgroups (and join them), unshare the mount, PID, IPC and (for `none` and
//!    `loopback`) network namespaces, then start stage 2 and wait for it; clean up
//!    after it. It is the process the gateway started, so the gateway's
//!    process-group kill ends all three.
//! 2. **Inside** ([`enter`]): PID 1 of the new PID namespace. It mounts that
//!    namespace's `/proc`, brings a private loopback up, sets rlimits,
//!    restricts itself with Landlock, drops every capability, then starts
//!    the server — which inherits all of it — and reaps what it leaves.
//!
//! Layer: the top of this crate; the `toolgate` binary calls it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, getgid, getpid, getuid};

use crate::SandboxError;
use crate::cgroup::Cgroup;
use crate::policy::{Mode, Network, Policy, Stage};

/// The exit code of a launcher that refused or failed to start the server.
pub const REFUSED: i32 = 126;

/// Stage 1: run `command` in the sandbox `policy` describes; its exit code.
pub fn launch(policy: &Policy, command: &[OsString]) -> i32 {
    match launch_inner(policy, command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolgate sandbox: {e}");
            REFUSED
        }
    }
}

fn launch_inner(policy: &Policy, command: &[OsString]) -> Result<i32, SandboxError> {
    if command.is_empty() {
        return Err(SandboxError::Setup("no command to run".to_owned()));
    }
    let root = getuid().is_root();
    let mut gaps = Vec::new();
    let mut stage = Stage::default();
    let tmp = if policy.private_tmp {
        Some(private_tmp()?)
    } else {
        None
    };
    let (cgroup, cgroup_gaps) = Cgroup::create(policy.processes, policy.memory);
    for gap in cgroup_gaps {
        if gap.contains("pids") {
            stage.nproc_rlimit = true;
            if root {
                gaps.push(format!(
                    "{gap}: the process limit cannot hold for root (RLIMIT_NPROC does not apply to uid 0)"
                ));
            }
        } else {
            // RLIMIT_DATA holds the same bound on what it maps.
            stage.data_rlimit = true;
        }
    }
    let mut flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC;
    let isolated = matches!(policy.network, Network::None | Network::Loopback);
    if isolated {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if !root {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    let (uid, gid) = (getuid(), getgid());
    match unshare(flags) {
        Ok(()) => {
            if !root {
                map_ids(uid.as_raw(), gid.as_raw())?;
            }
            // Mounts made inside (its /proc) must not propagate out.
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .map_err(|e| SandboxError::Setup(format!("cannot make mounts private: {e}")))?;
            stage.namespaces = true;
            stage.net = isolated;
        }
        Err(e) => {
            gaps.push(format!(
                "no namespaces ({e}): the server would see other processes, and /proc is left out of its paths"
            ));
            if isolated {
                gaps.push(
                    "no network namespace: UDP and unix sockets would reach the host's network"
                        .to_owned(),
                );
            }
        }
    }
    if !gaps.is_empty() {
        if policy.mode == Mode::Enforce {
            cgroup.remove();
            if let Some(tmp) = &tmp {
                let _ = std::fs::remove_dir_all(tmp);
            }
            return Err(SandboxError::Setup(format!(
                "refusing to start {:?}: {}. Set sandbox_mode = \"best-effort\" to start it with what this machine enforces (`toolgate sandbox check` lists it)",
                command[0],
                gaps.join("; ")
            )));
        }
        for gap in &gaps {
            eprintln!("toolgate sandbox: not enforced: {gap}");
        }
    }
    let exe = std::env::current_exe()
        .map_err(|e| SandboxError::Launcher(format!("cannot find the launcher: {e}")))?;
    let mut inner = Command::new(exe);
    inner
        .args(["sandbox", "enter", "--policy"])
        .arg(policy.to_arg())
        .arg("--stage")
        .arg(serde_json::to_string(&stage).unwrap_or_default())
        .arg("--")
        .args(command);
    if let Some(tmp) = &tmp {
        inner.env("TMPDIR", tmp);
    }
    let status = inner.status();
    cgroup.remove();
    if let Some(tmp) = &tmp {
        let _ = std::fs::remove_dir_all(tmp);
    }
    let status = status.map_err(|e| SandboxError::Launcher(format!("cannot start: {e}")))?;
    Ok(exit_code(status))
}

/// A directory of its own under the temporary directory, only its owner's;
/// those of launchers killed before they removed theirs go first.
fn private_tmp() -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            if crate::cgroup::left_by_a_gone_launcher(&entry.file_name()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(format!("{}{}", crate::cgroup::PREFIX, std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| SandboxError::Setup(format!("cannot make {}: {e}", dir.display())))?;
    Ok(dir)
}

/// Map this user to itself in its new user namespace (a user who is not
/// root makes the other namespaces in one).
fn map_ids(uid: u32, gid: u32) -> Result<(), SandboxError> {
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| SandboxError::Setup(format!("cannot write /proc/self/{file}: {e}")))
    };
    write("setgroups", "deny".to_owned())?;
    write("uid_map", format!("{uid} {uid} 1"))?;
    write("gid_map", format!("{gid} {gid} 1"))
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(REFUSED)
}

/// Stage 2: restrict this process as `policy` says, start `command` in it,
/// and stay as its init; the server's exit code.
pub fn enter(policy: &Policy, stage: &Stage, command: &[OsString]) -> i32 {
    match enter_inner(policy, stage, command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolgate sandbox: {e}");
            REFUSED
        }
    }
}

fn enter_inner(policy: &Policy, stage: &Stage, command: &[OsString]) -> Result<i32, SandboxError> {
    fn setup(what: &'static str) -> impl Fn(nix::Error) -> SandboxError {
        move |e| SandboxError::Setup(format!("{what}: {e}"))
    }
    // If the launcher is killed, so is everything here.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(setup("cannot set pdeathsig"))?;
    let mut gaps = Vec::new();
    let mut extra_read: Vec<&str> = Vec::new();
    if stage.namespaces && getpid() == Pid::from_raw(1) {
        // A /proc that shows this namespace's processes only: no
        // /proc/<gateway>/environ to read.
        let mounted = mount(
            Some("proc"),
            "/proc",
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        );
        match mounted {
            Ok(()) => extra_read.push("/proc"),
            // Unprivileged, the kernel refuses a new /proc where the host's
            // has parts masked (inside a container): the server then gets
            // no /proc at all — stricter, not weaker.
            Err(e) => eprintln!(
                "toolgate sandbox: no /proc of its own ({e}): the server runs without /proc"
            ),
        }
    }
    if stage.net && policy.network == Network::Loopback {
        crate::netlink::loopback_up()?;
    }
    let limit = |resource: Resource, value: u64, what: &str| {
        setrlimit(resource, value, value)
            .map_err(|e| SandboxError::Setup(format!("cannot limit {what}: {e}")))
    };
    limit(Resource::RLIMIT_CORE, 0, "core dumps")?;
    if let Some(seconds) = policy.cpu_seconds {
        // SIGXCPU at the limit, SIGKILL a second later.
        setrlimit(Resource::RLIMIT_CPU, seconds, seconds.saturating_add(1))
            .map_err(setup("cannot limit CPU time"))?;
    }
    if let (Some(n), true) = (policy.processes, stage.nproc_rlimit) {
        limit(Resource::RLIMIT_NPROC, u64::from(n), "processes")?;
    }
    if let (Some(bytes), true) = (policy.memory, stage.data_rlimit) {
        limit(Resource::RLIMIT_DATA, bytes, "memory")?;
    }
    gaps.extend(crate::landlock::restrict(policy, &extra_read).map_err(|e| {
        if policy.mode == Mode::BestEffort {
            return e;
        }
        SandboxError::Setup(format!(
            "refusing to start {:?}: {e}. Set sandbox_mode = \"best-effort\" to start it with what this machine enforces",
            command.first().cloned().unwrap_or_default()
        ))
    })?);
    gaps.extend(drop_capabilities());
    if !gaps.is_empty() {
        if policy.mode == Mode::Enforce {
            return Err(SandboxError::Setup(format!(
                "refusing to start {:?}: {}",
                command[0],
                gaps.join("; ")
            )));
        }
        for gap in &gaps {
            eprintln!("toolgate sandbox: not enforced: {gap}");
        }
    }
    let Some((program, args)) = command.split_first() else {
        return Err(SandboxError::Setup("no command to run".to_owned()));
    };
    let child = Command::new(program).args(args).spawn().map_err(|e| {
        SandboxError::Setup(format!(
            "cannot start {program:?} in the sandbox: {e} (is it, and what it loads, in the sandbox's read paths?)"
        ))
    })?;
    let server = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == server => return Ok(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == server => {
                eprintln!("toolgate sandbox: {}", ended_by(policy, signal));
                return Ok(128 + signal as i32);
            }
            Ok(_) | Err(nix::Error::EINTR) => continue,
            Err(e) => {
                return Err(SandboxError::Setup(format!(
                    "cannot wait for the server: {e}"
                )));
            }
        }
    }
}

/// Why a signal most likely ended the server, in its sandbox's terms.
fn ended_by(policy: &Policy, signal: Signal) -> String {
    match signal {
        Signal::SIGXCPU => format!(
            "the server used its CPU time (cpu_seconds = {}) and was stopped",
            policy.cpu_seconds.unwrap_or_default()
        ),
        Signal::SIGKILL => {
            let mut causes = Vec::new();
            if let Some(m) = policy.memory {
                causes.push(format!("past its memory cap ({} MiB)", m >> 20));
            }
            if let Some(s) = policy.cpu_seconds {
                causes.push(format!("past its CPU time ({s} s)"));
            }
            causes.push("ended by the gateway".to_owned());
            format!("the server was killed (SIGKILL): {}", causes.join(", or "))
        }
        Signal::SIGSYS => "the server was killed by SIGSYS (a forbidden system call)".to_owned(),
        other => format!("the server was killed by {other}"),
    }
}

/// Drop every capability, from the bounding set too, and lock root out of
/// regaining them at `exec`: a server running as root keeps uid 0 but no
/// power over the limits and namespaces set here. What could not be
/// dropped, in words.
fn drop_capabilities() -> Vec<String> {
    use rustix::thread::{
        CapabilitiesSecureBits as Bits, CapabilitySet, CapabilitySets,
        remove_capability_from_bounding_set, set_capabilities, set_capabilities_secure_bits,
    };
    let mut gaps = Vec::new();
    let locked = Bits::NO_ROOT
        | Bits::NO_ROOT_LOCKED
        | Bits::NO_SETUID_FIXUP
        | Bits::NO_SETUID_FIXUP_LOCKED
        | Bits::NO_CAP_AMBIENT_RAISE
        | Bits::NO_CAP_AMBIENT_RAISE_LOCKED;
    if let Err(e) = set_capabilities_secure_bits(locked)
        && getuid().is_root()
    {
        gaps.push(format!("cannot lock root out of capabilities: {e}"));
    }
    for cap in CapabilitySet::all().iter() {
        // Capabilities newer than the kernel are not in its set (EINVAL).
        let _ = remove_capability_from_bounding_set(cap);
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    if let Err(e) = set_capabilities(None, none) {
        gaps.push(format!("cannot drop capabilities: {e}"));
    }
    gaps
}
