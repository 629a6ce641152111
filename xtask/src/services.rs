//! `cargo xtask scale-out`: the gateway's shared-state tests against a real
//! PostgreSQL and Redis, which this task installs (Debian's `postgresql`
//! and `redis-server`) when they are missing. PostgreSQL is started here:
//! a fresh cluster in a temporary directory, on a free loopback port, owned
//! by the `postgres` user when run as root (the server refuses to run as
//! root), stopped afterwards whatever happens. The Redis tests start their
//! own servers on loopback, since one of them stops its server mid-run.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::support::{free_port, is_root};
use crate::{cargo_with, run};

/// The newest installed PostgreSQL's `bin` directory.
fn postgres_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("pg_ctl").exists() && bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

/// A command run as the cluster's owner.
fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// A running PostgreSQL cluster; stopped when dropped.
pub struct Postgres {
    /// `postgres://…` for its superuser.
    pub url: String,
    /// The data directory.
    pub data: PathBuf,
    /// Its `pg_ctl`.
    pub pg_ctl: PathBuf,
    /// The server's options (port, address, socket directory).
    options: String,
    dir: PathBuf,
}

impl Postgres {
    /// Install if needed, create a cluster and start it.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_in(&std::env::temp_dir(), "")
    }

    /// [`Postgres::start`] with the cluster under `base` and `extra` server
    /// options (the soak puts it on tmpfs, or else does not wait for the
    /// disk at commit, so that the disk's fsync stalls do not read as the
    /// gateway's latency).
    pub fn start_in(base: &Path, extra: &str) -> anyhow::Result<Self> {
        let bin = match postgres_bin() {
            Some(bin) => bin,
            None => {
                crate::support::apt_install(&["postgresql"])?;
                postgres_bin().context("postgresql was installed but no pg_ctl was found")?
            }
        };
        let dir = base.join(format!("toolgate-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        if is_root() {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir))?;
        }
        let data = dir.join("data");
        run(as_owner(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "toolgate", "--no-sync", "-E", "UTF8"])
            .stdout(std::process::Stdio::null()))?;
        let port = free_port()?;
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={}{extra}",
            dir.display()
        );
        let pg = Self {
            url: format!("postgres://toolgate@127.0.0.1:{port}/postgres"),
            data,
            pg_ctl: bin.join("pg_ctl"),
            options,
            dir,
        };
        run(as_owner(&pg.pg_ctl)
            .arg("-D")
            .arg(&pg.data)
            .arg("-l")
            .arg(pg.dir.join("server.log"))
            .args(["-o", &pg.options, "-w", "start"])
            .stdout(std::process::Stdio::null()))?;
        Ok(pg)
    }

    /// `pg_ctl` as the owner, with what `start` needs, for tests that
    /// stop and start the server (a shell command; the action follows).
    pub fn control(&self) -> String {
        let owner = if is_root() {
            "runuser -u postgres -- "
        } else {
            ""
        };
        format!(
            "{owner}{} -D {} -l {} -o '{}' -w",
            self.pg_ctl.display(),
            self.data.display(),
            self.dir.join("server.log").display(),
            self.options
        )
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = as_owner(&self.pg_ctl)
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Debian's `redis-server`, installed when missing; the tests start
/// their own servers with it (one of them stops its server mid-run).
pub(crate) fn redis_server() -> anyhow::Result<PathBuf> {
    let path = PathBuf::from("/usr/bin/redis-server");
    if !path.exists() {
        crate::support::apt_install(&["redis-server"])?;
    }
    if !path.exists() {
        bail!(
            "redis-server was installed but {} is missing",
            path.display()
        );
    }
    Ok(path)
}

/// A `redis-server` on a free loopback port, with nothing saved to disk;
/// killed when dropped.
pub struct Redis {
    /// `redis://…` for it.
    pub url: String,
    _child: crate::support::ChildGuard,
}

impl Redis {
    /// Install if needed and start one.
    pub fn start() -> anyhow::Result<Self> {
        let binary = redis_server()?;
        let port = free_port()?;
        let child = Command::new(binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .context("starting redis-server")?;
        let guard = crate::support::ChildGuard(child);
        crate::support::wait_for(
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            "redis-server",
        )?;
        Ok(Self {
            url: format!("redis://127.0.0.1:{port}"),
            _child: guard,
        })
    }
}

/// The tests that need PostgreSQL and Redis, with them at hand.
pub fn scale_out() -> anyhow::Result<()> {
    let redis = redis_server()?;
    let redis = redis.display().to_string();
    let pg = Postgres::start()?;
    let control = pg.control();
    let envs = [
        ("TOOLGATE_TEST_POSTGRES", pg.url.as_str()),
        ("TOOLGATE_TEST_PG_CTL", control.as_str()),
        ("TOOLGATE_TEST_REDIS_SERVER", redis.as_str()),
    ];
    let outcome = cargo_with(
        &[
            "test",
            "--package",
            "toolgate-gateway",
            "--test",
            "scale_out",
            "--test",
            "shared_limits",
            "--package",
            "toolgate",
            "--test",
            "log_postgres",
            "--",
            "--include-ignored",
            // One test stops the server the others use.
            "--test-threads=1",
        ],
        &envs,
    );
    drop(pg);
    if let Err(e) = outcome {
        bail!("the PostgreSQL tests failed: {e}");
    }
    Ok(())
}
