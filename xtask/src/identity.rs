//! `cargo xtask identity`: the gateway's upstream identity tests against a
//! real authorization server — npm's `oidc-provider` (OpenID-certified),
//! installed here with the Node.js the conformance run uses, and started
//! by the tests on loopback (`testdata/oidc/provider.mjs`) — token
//! exchange, and linked accounts with the browser steps driven in the
//! headless Chromium the browser tests use (installed when missing).

use crate::support::npm_install;
use crate::{cargo_with, root};

/// The authorization server, pinned.
const OIDC_PROVIDER: &str = "oidc-provider@9.13.3";

/// Install Node.js and oidc-provider; the directory the tests start it
/// from (the script sits beside its `node_modules`).
fn install() -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let node_bin = crate::conformance::install()?;
    let dir = root().join(".tools/oidc-provider");
    npm_install(
        &dir,
        "{\"private\": true, \"type\": \"module\"}\n",
        &[OIDC_PROVIDER],
        Some(&node_bin),
    )?;
    std::fs::copy(
        root().join("testdata/oidc/provider.mjs"),
        dir.join("provider.mjs"),
    )?;
    Ok((dir, node_bin.join("node")))
}

pub fn run() -> anyhow::Result<()> {
    let (dir, node) = install()?;
    crate::browser::install()?;
    cargo_with(
        &[
            "test",
            "--package",
            "toolgate-gateway",
            "--test",
            "identity",
            "--test",
            "identity_user",
            "--",
            "--ignored",
        ],
        &[
            ("TOOLGATE_OIDC_DIR", dir.display().to_string()),
            ("TOOLGATE_NODE", node.display().to_string()),
        ],
    )
}
