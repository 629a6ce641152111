//! Helpers the tasks share: installing npm packages once, running servers
//! for the length of a check.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// Kills the child when dropped.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh directory of this process's own under the system's temporary
/// directory, removed with everything in it when dropped: a check's files
/// (configurations, a gateway's audit store) never outlive it, even when
/// it fails half-way.
pub struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    /// `$TMPDIR/NAME-PID`, emptied if an earlier run left it behind.
    pub fn new(name: &str) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free port on 127.0.0.1.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Wait until something listens on `addr` (30 s at most).
pub fn wait_for(addr: SocketAddr, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{what} did not start listening on {addr}")
}

/// Start `cmd` with no input and its output dropped, and wait until it
/// listens on `port` of loopback: a server for the length of a check.
pub fn start_quiet(cmd: &mut Command, port: u16, what: &str) -> anyhow::Result<ChildGuard> {
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let guard = ChildGuard(child);
    wait_for(SocketAddr::from(([127, 0, 0, 1], port)), what)?;
    Ok(guard)
}

/// Install `packages` from npm into `dir`, unless a stamp says these exact
/// versions are already there. `node_bin` goes first on PATH when given.
pub fn npm_install(
    dir: &Path,
    package_json: &str,
    packages: &[&str],
    node_bin: Option<&Path>,
) -> anyhow::Result<()> {
    let stamp = dir.join(".installed");
    let wanted = packages.join(" ");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("package.json"), package_json)?;
    let mut npm = Command::new("npm");
    npm.args([
        "install",
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--loglevel=error",
    ])
    .args(packages)
    .current_dir(dir);
    if let Some(bin) = node_bin {
        npm.env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    }
    crate::run(&mut npm).with_context(|| format!("installing {wanted} from npm"))?;
    std::fs::write(stamp, wanted)?;
    Ok(())
}

/// A Python virtual environment at `venv` with `requirement` (`name==x.y`)
/// installed from PyPI, made once: a stamp says what is there.
pub fn pip_venv(venv: &Path, requirement: &str) -> anyhow::Result<()> {
    let stamp = venv.join(".installed");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(requirement)
        && venv.join("bin/python").exists()
    {
        return Ok(());
    }
    crate::run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    crate::run(Command::new(venv.join("bin/pip")).args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        requirement,
    ]))
    .with_context(|| format!("installing {requirement} from PyPI"))?;
    std::fs::write(stamp, requirement)?;
    Ok(())
}

/// `apt-get` as root (directly, or through sudo).
fn apt_get(args: &[&str]) -> std::process::Command {
    let mut cmd = if is_root() {
        std::process::Command::new("apt-get")
    } else {
        let mut sudo = std::process::Command::new("sudo");
        sudo.arg("apt-get");
        sudo
    };
    cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Install Debian `packages` (a new machine starts bare).
pub fn apt_install(packages: &[&str]) -> anyhow::Result<()> {
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend(packages);
    // Package lists may be missing on a fresh machine: refresh and retry.
    if crate::run(&mut apt_get(&args)).is_err() {
        crate::run(&mut apt_get(&["update", "-q"]))?;
        crate::run(&mut apt_get(&args))?;
    }
    Ok(())
}

/// The cargo subcommand `name` at `version`, installed once into
/// `.tools/NAME` from crates.io (`--locked`); the path of its binary.
pub fn cargo_tool(name: &str, version: &str) -> anyhow::Result<PathBuf> {
    let dir = crate::root().join(".tools").join(name);
    let binary = dir.join("bin").join(name);
    let stamp = dir.join("version");
    if binary.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(version) {
        return Ok(binary);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    crate::run(
        Command::new(cargo)
            .args(["install", name, "--locked", "--version", version])
            .arg("--root")
            .arg(&dir),
    )?;
    std::fs::write(&stamp, version)?;
    Ok(binary)
}
