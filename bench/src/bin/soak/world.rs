//! The processes a soak runs and breaks: Redis, the basket over HTTP, and
//! the gateway instances, each restartable on the address it had; and
//! PostgreSQL, which `cargo xtask soak` started and this drives with
//! `pg_ctl`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};

/// Where the programs and services are, from the environment
/// `cargo xtask soak` sets.
pub struct Setup {
    pub toolgate: PathBuf,
    pub basket: PathBuf,
    pub everything: PathBuf,
    /// Prepended to the gateways' PATH (node, for server-everything).
    pub node_dir: Option<PathBuf>,
    pub redis_server: PathBuf,
    pub postgres: String,
    /// `pg_ctl` with its options, as a shell command the action follows.
    pub pg_ctl: String,
}

impl Setup {
    /// Read the setup from `TOOLGATE_SOAK_*`.
    pub fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str| {
            std::env::var(name)
                .with_context(|| format!("{name} is not set: run `cargo xtask soak`"))
        };
        Ok(Self {
            toolgate: var("TOOLGATE_SOAK_TOOLGATE")?.into(),
            basket: var("TOOLGATE_SOAK_BASKET")?.into(),
            everything: var("TOOLGATE_SOAK_EVERYTHING")?.into(),
            node_dir: std::env::var("TOOLGATE_SOAK_NODE_DIR")
                .ok()
                .map(PathBuf::from),
            redis_server: var("TOOLGATE_SOAK_REDIS_SERVER")?.into(),
            postgres: var("TOOLGATE_SOAK_POSTGRES")?,
            pg_ctl: var("TOOLGATE_SOAK_PG_CTL")?,
        })
    }

    /// `pg_ctl ACTION` on the soak's cluster.
    pub async fn pg_ctl(&self, action: &str) -> anyhow::Result<()> {
        let status = Command::new("sh")
            .args(["-c", &format!("{} {action} >/dev/null 2>&1", self.pg_ctl)])
            .status()
            .await?;
        if !status.success() {
            bail!("pg_ctl {action} failed ({status})");
        }
        Ok(())
    }
}

/// A child process that is killed with SIGKILL when dropped.
pub struct Proc(Child);

impl Proc {
    fn spawn(cmd: &mut Command) -> anyhow::Result<Self> {
        Ok(Self(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?,
        ))
    }

    /// The process id (0 once it has been reaped).
    pub fn pid(&self) -> u32 {
        self.0.id().unwrap_or(0)
    }

    /// SIGKILL, and reap it.
    pub async fn kill(&mut self) {
        let _ = self.0.kill().await;
    }
}

/// Wait until `addr` accepts connections.
async fn listening(addr: SocketAddr, what: &str, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() > deadline {
            bail!("{what} did not listen on {addr} within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The status code of `GET path` on `addr` (HTTP/1.0, one connection).
pub async fn get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    tcp.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).await.ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// A helper process on a fixed loopback address (Redis, the basket),
/// started again on the same address after a fault.
pub struct Service {
    pub addr: SocketAddr,
    what: &'static str,
    program: PathBuf,
    args: Vec<String>,
    proc: Option<Proc>,
}

impl Service {
    /// A `redis-server` on `addr`'s port, nothing saved to disk.
    pub async fn redis(setup: &Setup, addr: SocketAddr) -> anyhow::Result<Self> {
        let port = addr.port().to_string();
        let args = [
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ];
        Self::start("redis-server", &setup.redis_server, &args, addr).await
    }

    /// The basket example serving HTTP on `addr`: the upstream both
    /// instances share.
    pub async fn basket(setup: &Setup, addr: SocketAddr) -> anyhow::Result<Self> {
        let at = addr.to_string();
        Self::start("basket", &setup.basket, &["--http", &at], addr).await
    }

    async fn start(
        what: &'static str,
        program: &Path,
        args: &[&str],
        addr: SocketAddr,
    ) -> anyhow::Result<Self> {
        let mut service = Self {
            addr,
            what,
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            proc: None,
        };
        service.up().await?;
        Ok(service)
    }

    /// Start it (again) and wait until it listens.
    pub async fn up(&mut self) -> anyhow::Result<()> {
        self.proc = Some(Proc::spawn(Command::new(&self.program).args(&self.args))?);
        listening(self.addr, self.what, Duration::from_secs(10)).await
    }

    /// SIGKILL, and reap it.
    pub async fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill().await;
        }
    }
}

/// One `toolgate serve` instance.
pub struct Instance {
    pub name: &'static str,
    pub addr: SocketAddr,
    config: PathBuf,
    log: PathBuf,
    proc: Option<Proc>,
}

impl Instance {
    pub async fn start(
        setup: &Setup,
        name: &'static str,
        addr: SocketAddr,
        config: &Path,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let mut instance = Self {
            name,
            addr,
            config: config.to_owned(),
            log: dir.join(format!("{name}.log")),
            proc: None,
        };
        instance.up(setup).await?;
        Ok(instance)
    }

    /// Start it (again) and wait until `/readyz` says ready.
    pub async fn up(&mut self, setup: &Setup) -> anyhow::Result<()> {
        let mut cmd = Command::new(&setup.toolgate);
        cmd.args(["serve", "--config"])
            .arg(&self.config)
            .args(["--http", &self.addr.to_string()])
            .env("RUST_LOG", "warn");
        if let Some(node) = &setup.node_dir {
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", node.display()));
        }
        // Appended, so a restart keeps what the first run said.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        self.proc = Some(Proc(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(log))
                .kill_on_drop(true)
                .spawn()?,
        ));
        let deadline = Instant::now() + Duration::from_secs(60);
        while get_status(self.addr, "/readyz").await != Some(200) {
            if Instant::now() > deadline {
                bail!(
                    "gateway {} was not ready within 60 s (see {})",
                    self.name,
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// SIGKILL: no chance to finish anything.
    pub async fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill().await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.proc.as_ref().map_or(0, Proc::pid)
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

/// The children of process `pid` (every thread's).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// Whether process `pid`'s command line mentions `word`.
pub fn runs(pid: u32, word: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains(word))
        .unwrap_or(false)
}

/// SIGKILL to a process this program did not start (an instance's stdio
/// upstream), through kill(1): no `unsafe` here.
pub async fn kill_pid(pid: u32) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .await?;
    if !status.success() {
        bail!("kill -9 {pid} failed");
    }
    Ok(())
}

/// Open file descriptors of process `pid` (0 when unreadable).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Process `pid`'s open descriptors by kind (`socket`, `pipe`,
/// `anon_inode:[eventfd]`, or `file`), to tell a pool from a leak.
pub fn fd_kinds(pid: u32) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return out;
    };
    for fd in dir.flatten() {
        let target = std::fs::read_link(fd.path())
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        let kind = match target.split_once(':') {
            Some((k, rest)) if k == "anon_inode" => format!("{k}:{rest}"),
            Some((k, _)) if k == "socket" || k == "pipe" => k.to_owned(),
            _ => "file".to_owned(),
        };
        *out.entry(kind).or_default() += 1;
    }
    out
}
