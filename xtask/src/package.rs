//! `cargo xtask package`: every published crate packaged as crates.io would
//! receive it, in dependency order, and its contents checked.
//!
//! `cargo package --workspace` packages the crates together (a crate's
//! dependencies on its siblings resolve to the packages just made, so
//! nothing needs to be on crates.io first) and, unless `--no-verify`,
//! builds each from its package alone. Then each package's file list is
//! checked: its README and both licences are in it, no test corpora,
//! fixtures, benches or fuzz inputs are, and the compressed `.crate` stays
//! within its size budget.

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::{cargo, root};

/// The published crates, in dependency order, with their `.crate` size
/// budgets (compressed). A budget is about twice today's size: reaching it
/// means something that should not ship did.
pub const CRATES: &[(&str, u64)] = &[
    ("toolgate-protocol", 96 * 1024),
    ("toolgate-schema", 64 * 1024),
    ("toolgate-macros", 32 * 1024),
    ("toolgate-server", 320 * 1024),
    ("toolgate-client", 224 * 1024),
    ("toolgate-review", 80 * 1024),
    ("toolgate-gateway", 320 * 1024),
    ("toolgate", 176 * 1024),
];

/// Paths a package must not contain: tests and their corpora and
/// fixtures, timing examples, benches, fuzzing (they need the repository
/// around them, and no user of the library needs them).
const FORBIDDEN: &[&str] = &[
    "tests/",
    "examples/",
    "testdata/",
    "benches/",
    "fuzz/",
    "target/",
];

/// Files every package must contain.
const REQUIRED: &[&str] = &["README.md", "LICENSE-MIT", "LICENSE-APACHE", "Cargo.toml"];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let verify = !args.iter().any(|a| a == "--no-verify");
    let mut package = vec!["package", "--workspace", "--allow-dirty"];
    for name in EXCLUDED {
        package.extend(["--exclude", name]);
    }
    if !verify {
        package.push("--no-verify");
    }
    cargo(&package)?;
    let version = workspace_version()?;
    let mut report = Vec::new();
    for (name, budget) in CRATES {
        let files = list(name)?;
        check_contents(name, &files)?;
        let file = crate::target_dir().join(format!("package/{name}-{version}.crate"));
        let size = std::fs::metadata(&file)
            .with_context(|| format!("{} was not written", file.display()))?
            .len();
        if size > *budget {
            bail!(
                "{name}: the package is {} KiB, over its budget of {} KiB: see what `cargo package --list -p {name}` ships",
                size / 1024,
                budget / 1024
            );
        }
        report.push(format!(
            "{name:<18} {:>4} files  {:>4} KiB (budget {} KiB)",
            files.len(),
            size.div_ceil(1024),
            budget / 1024
        ));
    }
    eprintln!(
        "package: every crate packaged{}:",
        if verify {
            " and built from its package"
        } else {
            ""
        }
    );
    for line in report {
        eprintln!("  {line}");
    }
    Ok(())
}

/// Workspace members that are not published.
const EXCLUDED: &[&str] = &["xtask", "toolgate-conformance", "basket", "toolgate-bench"];

pub fn workspace_version() -> anyhow::Result<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml"))?;
    manifest
        .lines()
        .skip_while(|l| l.trim() != "[workspace.package]")
        .find_map(|l| l.strip_prefix("version = "))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .context("no version in [workspace.package]")
}

/// The files `cargo package` puts in `name`'s package.
fn list(name: &str) -> anyhow::Result<Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["package", "--list", "--allow-dirty", "--package", name])
        .current_dir(root())
        .output()
        .with_context(|| format!("cargo package --list -p {name}"))?;
    if !out.status.success() {
        bail!(
            "cargo package --list -p {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

fn check_contents(name: &str, files: &[String]) -> anyhow::Result<()> {
    for required in REQUIRED {
        if !files.iter().any(|f| f == required) {
            bail!("{name}: the package lacks {required}");
        }
    }
    if let Some(bad) = files
        .iter()
        .find(|f| FORBIDDEN.iter().any(|p| f.starts_with(p)))
    {
        bail!(
            "{name}: the package ships {bad}, which only the repository's own checks need: exclude it in its Cargo.toml"
        );
    }
    // The licences are the workspace's own, not stale copies.
    for licence in ["LICENSE-MIT", "LICENSE-APACHE"] {
        let dir = crate_dir(name);
        let here = std::fs::read(dir.join(licence))?;
        let top = std::fs::read(root().join(licence))?;
        if here != top {
            bail!("{name}: its {licence} differs from the workspace's");
        }
    }
    Ok(())
}

fn crate_dir(name: &str) -> std::path::PathBuf {
    let dir = match name {
        "toolgate" => "cli",
        other => other.trim_start_matches("toolgate-"),
    };
    root().join("crates").join(dir)
}
