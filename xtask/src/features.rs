//! Each crate's features build alone, and the lean build stays lean.
//!
//! `cargo hack clippy --each-feature` checks every feature of the crates
//! that have some, one at a time and with none (cargo-hack, installed at a
//! pinned version into `.tools/`). Then the dependency tree of a stdio-only
//! tool server (`toolgate-server` with only `macros`) and of a stdio-only
//! client (`toolgate-client` without features) must hold none of the HTTP,
//! TLS or JWT stacks: that is the promise their feature lists make.

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::{root, run};

const CARGO_HACK_VERSION: &str = "0.6.46";

/// The crates with features of their own.
const CRATES: &[&str] = &[
    "toolgate-protocol",
    "toolgate-server",
    "toolgate-client",
    "toolgate-gateway",
];

/// What a stdio-only server must not compile.
const HEAVY: &[&str] = &["axum", "hyper", "reqwest", "rustls", "jsonwebtoken"];

pub fn run_features() -> anyhow::Result<()> {
    let hack = crate::support::cargo_tool("cargo-hack", CARGO_HACK_VERSION)?;
    let mut cmd = Command::new(hack);
    crate::one_shot(&mut cmd);
    cmd.args(["hack", "clippy", "--each-feature", "--no-dev-deps"]);
    for krate in CRATES {
        cmd.args(["--package", krate]);
    }
    // Lints as errors through clippy, not RUSTFLAGS: a flag there would
    // rebuild every dependency the main build has already checked.
    run(cmd.args(["--", "-D", "warnings"]).current_dir(root()))?;
    lean()
}

/// The stdio-only builds: the server with only `macros`, the client with
/// no features. Neither may compile the HTTP, TLS or JWT stacks.
fn lean() -> anyhow::Result<()> {
    lean_build(
        "toolgate-server",
        &["--features", "macros"],
        "http` or `jwt",
    )?;
    lean_build("toolgate-client", &[], "http` or `oauth")?;
    eprintln!(
        "features: each feature builds alone; a stdio-only server or client compiles none of {}",
        HEAVY.join(", ")
    );
    Ok(())
}

/// The normal dependencies of `krate` without its default features and
/// with `features`: none of [`HEAVY`].
fn lean_build(krate: &str, features: &[&str], gates: &str) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "--package", krate, "--no-default-features"])
        .args(features)
        .args(["--edges", "normal", "--prefix", "none", "--format", "{p}"])
        .current_dir(root())
        .output()
        .context("could not run cargo tree")?;
    if !output.status.success() {
        bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    let found: Vec<&str> = HEAVY
        .iter()
        .copied()
        .filter(|name| {
            tree.lines()
                .any(|line| line.split_whitespace().next() == Some(name))
        })
        .collect();
    if !found.is_empty() {
        bail!(
            "a stdio-only {krate} ({}) compiles {}; gate them behind `{gates}`",
            if features.is_empty() {
                "no features".to_owned()
            } else {
                features.join(" ")
            },
            found.join(", ")
        );
    }
    Ok(())
}
