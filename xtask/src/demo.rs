//! `cargo xtask demo [--http ADDR] [--console ADDR]`: the example gateway
//! from a fresh clone with nothing but Rust. Builds `toolgate` and the
//! basket example server, serves `examples/toolgate.toml` (the basket
//! behind it, the embedded SQLite audit store beside the file, the
//! console), and once the gateway answers, prints what to try next. Ctrl-C
//! stops it.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::{built, cargo, root};

/// The gateway's listener and the console's, unless given.
const HTTP: &str = "127.0.0.1:8787";
const CONSOLE: &str = "127.0.0.1:8791";

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

/// `path` as the user should type it from the repository root: relative
/// when it is under it.
fn typed(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let http = flag(args, "--http").unwrap_or(HTTP);
    let console = flag(args, "--console").unwrap_or(CONSOLE);
    let addr: SocketAddr = http
        .parse()
        .with_context(|| format!("--http {http:?} is not HOST:PORT"))?;
    eprintln!(
        "demo: building toolgate and the basket example server (the first build takes a few minutes)"
    );
    cargo(&["build", "--quiet", "-p", "toolgate", "-p", "basket"])?;
    let toolgate = built("debug", "toolgate");
    let bin = toolgate.parent().map(Path::to_path_buf).unwrap_or_default();
    // The example's `command = "basket"` finds the one just built.
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut gateway = Command::new(&toolgate)
        .args(["serve", "--config", "examples/toolgate.toml"])
        .args(["--http", http, "--console", console])
        .current_dir(root())
        .env("PATH", &path)
        .spawn()
        .context("starting toolgate serve")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = gateway.try_wait()? {
            bail!(
                "toolgate serve stopped ({status}) before it answered on {http}: is the port taken? Try `cargo xtask demo --http 127.0.0.1:PORT --console 127.0.0.1:PORT2`"
            );
        }
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            break;
        }
        if Instant::now() > deadline {
            let _ = gateway.kill();
            bail!("toolgate serve did not answer on {http} within a minute");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let cli = typed(&toolgate);
    eprintln!(
        "
demo: the gateway is up at http://{http}/mcp, with the basket example server
behind it and every call in examples/toolgate-audit.db. Open the console
with the login link above. In a second terminal, be the model's host:

  {cli} tools {http}
  {cli} call {http} basket.get_current_time --yes   # reads: runs at once
  {cli} call {http} basket.create_basket --yes      # writes: the gateway asks you first
  {cli} log --config examples/toolgate.toml         # every decision, in the audit store

Ctrl-C stops the gateway.
"
    );
    let status = gateway.wait()?;
    if !status.success() {
        // Ctrl-C reaches the gateway too: that is how a demo ends.
        eprintln!("demo: toolgate serve ended ({status})");
    }
    Ok(())
}
