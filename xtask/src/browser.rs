//! `cargo xtask browser`: the approval page and the console driven in
//! headless Chromium.
//!
//! Installs Debian's `chromium` and `chromium-driver` when they are
//! missing (a new machine starts bare), then runs the gateway's browser
//! tests. The screenshots they take (one per view) are left in
//! `target/browser-artifacts/`.

use std::path::Path;

use crate::cargo;

/// The Debian packages the browser test needs.
const PACKAGES: &[&str] = &["chromium", "chromium-driver"];

fn installed() -> bool {
    Path::new("/usr/bin/chromium").exists() && Path::new("/usr/bin/chromedriver").exists()
}

pub fn install() -> anyhow::Result<()> {
    if installed() {
        return Ok(());
    }
    crate::support::apt_install(PACKAGES)
}

pub fn run_browser() -> anyhow::Result<()> {
    install()?;
    cargo(&[
        "test",
        "--package",
        "toolgate-gateway",
        "--test",
        "approval_browser",
        "--test",
        "console_browser",
        "--",
        "--ignored",
    ])?;
    eprintln!(
        "browser: screenshots in {}",
        crate::target_dir().join("browser-artifacts").display()
    );
    Ok(())
}
