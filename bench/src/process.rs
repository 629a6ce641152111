//! Server processes under test: start, wait for the port, and read their
//! memory and CPU time from `/proc`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// A running server, killed on drop.
pub struct Server {
    /// The child process.
    pub child: Child,
    /// Where it listens (HTTP servers).
    pub addr: Option<SocketAddr>,
    /// A server this one needs running (a gateway's upstream); stopped
    /// with it. Memory and CPU figures are this process's alone.
    pub upstream: Option<Box<Server>>,
    /// The bearer token its callers send, when it asks for one.
    pub bearer: Option<String>,
    /// A directory of its own, removed when it stops.
    pub scratch: Option<std::path::PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Server {
    /// Start `program args` serving HTTP on `addr` and wait until it accepts.
    pub async fn http(program: &Path, args: &[String], addr: SocketAddr) -> anyhow::Result<Self> {
        Self::http_with(program, args, addr, &[], Duration::from_secs(10)).await
    }

    /// [`Server::http`] with `env` set, waiting up to `startup` (a peer
    /// that migrates a database first takes seconds).
    pub async fn http_with(
        program: &Path,
        args: &[String],
        addr: SocketAddr,
        env: &[(&str, String)],
        startup: Duration,
    ) -> anyhow::Result<Self> {
        let child = Command::new(program)
            .args(args)
            .env("RUST_LOG", "error")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let deadline = Instant::now() + startup;
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            if Instant::now() > deadline {
                anyhow::bail!("{} did not listen on {addr}", program.display());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            child,
            addr: Some(addr),
            upstream: None,
            bearer: None,
            scratch: None,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Resident memory now and at its peak, in KiB.
    pub fn memory(&self) -> Memory {
        memory(self.pid())
    }

    /// CPU seconds (user + system) used so far.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.pid())
    }
}

/// Resident set sizes, KiB.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    /// `VmRSS`.
    pub rss_kib: u64,
    /// `VmHWM`: the peak.
    pub peak_kib: u64,
    /// `RssAnon`: resident memory that is the process's own (heap, stacks),
    /// as opposed to code and data pages mapped from the binary.
    pub anon_kib: u64,
}

/// Memory of process `pid` (zeros when unreadable).
pub fn memory(pid: u32) -> Memory {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("VmRSS:"),
        peak_kib: field("VmHWM:"),
        anon_kib: field("RssAnon:"),
    }
}

/// CPU seconds of process `pid` (user + system; 0 when unreadable).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // The kernel's USER_HZ is 100 on every Linux this runs on.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// A free TCP port on the loopback.
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_cpu_time() {
        let pid = std::process::id();
        let m = memory(pid);
        assert!(m.rss_kib > 0 && m.peak_kib >= m.rss_kib);
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(cpu_seconds(pid) >= 0.0);
    }
}
