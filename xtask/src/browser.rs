//! `cargo xtask browser`: the approval page driven in headless Chromium.
//!
//! Installs Debian's `chromium` and `chromium-driver` when they are
//! missing (a new machine starts bare), then runs the gateway's browser
//! test. The screenshot it takes is left in `target/browser-artifacts/`.

use std::path::Path;
use std::process::Command;

use crate::{cargo, root, run};

/// The Debian packages the browser test needs.
const PACKAGES: &[&str] = &["chromium", "chromium-driver"];

fn installed() -> bool {
    Path::new("/usr/bin/chromium").exists() && Path::new("/usr/bin/chromedriver").exists()
}

/// `apt-get` as root (directly, or through sudo).
fn apt_get(args: &[&str]) -> Command {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let mut cmd = if is_root {
        Command::new("apt-get")
    } else {
        let mut sudo = Command::new("sudo");
        sudo.arg("apt-get");
        sudo
    };
    cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

fn install() -> anyhow::Result<()> {
    if installed() {
        return Ok(());
    }
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend(PACKAGES);
    // Package lists may be missing on a fresh machine: refresh and retry.
    if run(&mut apt_get(&args)).is_err() {
        run(&mut apt_get(&["update", "-q"]))?;
        run(&mut apt_get(&args))?;
    }
    Ok(())
}

pub fn run_browser() -> anyhow::Result<()> {
    install()?;
    cargo(&[
        "test",
        "--package",
        "toolgate-gateway",
        "--test",
        "approval_browser",
        "--",
        "--ignored",
    ])?;
    eprintln!(
        "browser: screenshot at {}",
        root()
            .join("target/browser-artifacts/approval-page.png")
            .display()
    );
    Ok(())
}
