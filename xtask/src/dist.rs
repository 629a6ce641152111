//! `cargo xtask dist`: the release archive, and a check that it works on
//! its own.
//!
//! `target/dist/toolgate-VERSION-x86_64-unknown-linux-gnu.tar.gz` holds the
//! release binary (its `--version` names the commit), shell completions
//! for bash, zsh and fish, the manual pages, the licences, the README, the
//! changelog and an example `toolgate.toml`; beside it, its SHA-256 in the
//! form `sha256sum -c` reads. The archive is reproducible (sorted entries,
//! fixed owner and times). Then it is unpacked into an empty directory and
//! run with a bare environment (a `PATH` holding only the example basket
//! server): `--version`, `tools -- basket`, `serve --check`.
//!
//! `--fast` builds at `opt-level = 1` without LTO instead of the release
//! profile's fat LTO (about half the build time): CI uses it to check the
//! archive within its time budget; a release is built without it.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::{cargo_with, root, run};

const TARGET: &str = "x86_64-unknown-linux-gnu";

pub fn dist(args: &[String]) -> anyhow::Result<()> {
    let fast = args.iter().any(|a| a == "--fast");
    let version = crate::package::workspace_version()?;
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    let epoch = git(&["log", "-1", "--format=%ct"]).unwrap_or_else(|_| "0".into());
    // A shipped binary keeps its symbols (backtraces name functions) but
    // not the line tables the release profile keeps for profiling.
    let mut envs = vec![
        ("TOOLGATE_COMMIT", commit.clone()),
        ("CARGO_PROFILE_RELEASE_STRIP", "debuginfo".into()),
    ];
    if fast {
        envs.extend(crate::quick_release());
        envs.push(("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1".into()));
    } else {
        envs.push(("CARGO_PROFILE_RELEASE_DEBUG", "0".into()));
    }
    cargo_with(
        &[
            "build",
            "--release",
            "--package",
            "toolgate",
            "--package",
            "basket",
        ],
        &envs,
    )?;
    // The fast build names its own target directory; the other goes where
    // cargo puts builds (`CARGO_TARGET_DIR` included).
    let release = if fast {
        root().join(crate::QUICK_TARGET).join("release")
    } else {
        crate::target_dir().join("release")
    };
    let name = format!("toolgate-{version}-{TARGET}");
    let out = crate::target_dir().join("dist");
    let stage = out.join(&name);
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(stage.join("completions"))?;
    let binary = stage.join("toolgate");
    std::fs::copy(release.join("toolgate"), &binary)?;
    for (shell, file) in [
        ("bash", "toolgate.bash"),
        ("zsh", "_toolgate"),
        ("fish", "toolgate.fish"),
    ] {
        let script = output(Command::new(&binary).args(["completions", shell]))?;
        std::fs::write(stage.join("completions").join(file), script)?;
    }
    run(Command::new(&binary)
        .args(["man", "--out"])
        .arg(stage.join("man/man1")))?;
    for file in ["LICENSE-MIT", "LICENSE-APACHE", "README.md", "CHANGELOG.md"] {
        std::fs::copy(root().join(file), stage.join(file))?;
    }
    std::fs::copy(
        root().join("examples/toolgate.toml"),
        stage.join("toolgate.toml"),
    )?;
    let archive = format!("{name}.tar.gz");
    // Sorted, owned by root, dated at the commit, gzip without a name or a
    // time: the same tree gives the same bytes.
    run(Command::new("sh").current_dir(&out).args([
        "-c",
        &format!(
            "tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@{epoch} -cf - {name} | gzip -9n > {archive}"
        ),
    ]))?;
    run(Command::new("sh")
        .current_dir(&out)
        .args(["-c", &format!("sha256sum {archive} > {archive}.sha256")]))?;
    check(
        &out,
        &archive,
        &name,
        &version,
        &commit,
        &release.join("basket"),
    )?;
    let size = std::fs::metadata(out.join(&archive))?.len();
    eprintln!(
        "dist: {} ({} KiB) and its .sha256, checked",
        out.join(&archive).display(),
        size / 1024
    );
    Ok(())
}

/// Unpack the archive into an empty directory and run the command from it
/// with nothing of this machine's environment but a `PATH` holding the
/// example server.
fn check(
    out: &Path,
    archive: &str,
    name: &str,
    version: &str,
    commit: &str,
    basket: &Path,
) -> anyhow::Result<()> {
    let scratch = crate::support::ScratchDir::new("dist-check")?;
    let dir = scratch.path();
    std::fs::copy(out.join(archive), dir.join(archive))?;
    std::fs::copy(
        out.join(format!("{archive}.sha256")),
        dir.join(format!("{archive}.sha256")),
    )?;
    run(Command::new("sha256sum")
        .current_dir(dir)
        .args(["--check", &format!("{archive}.sha256")]))?;
    run(Command::new("tar").current_dir(dir).args(["xzf", archive]))?;
    let unpacked = dir.join(name);
    let path = dir.join("path");
    std::fs::create_dir_all(&path)?;
    std::fs::copy(basket, path.join("basket"))?;
    let home = dir.join("home");
    std::fs::create_dir_all(&home)?;
    let toolgate = |args: &[&str]| -> anyhow::Result<String> {
        let mut cmd = Command::new(unpacked.join("toolgate"));
        cmd.args(args)
            .current_dir(&unpacked)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home);
        output(&mut cmd)
    };
    let said = toolgate(&["--version"])?;
    let want = if commit.is_empty() {
        format!("toolgate {version}")
    } else {
        format!("toolgate {version} (commit {commit})")
    };
    if said.trim() != want {
        bail!("--version said {said:?}, not {want:?}");
    }
    let tools = toolgate(&["tools", "--", "basket"])?;
    if !tools.contains("create_basket") {
        bail!("`toolgate tools -- basket` from the archive listed no create_basket:\n{tools}");
    }
    let checked = toolgate(&["serve", "--check", "--config", "toolgate.toml"])?;
    if !checked.contains("basket") {
        bail!("`toolgate serve --check` from the archive did not show basket:\n{checked}");
    }
    for file in [
        "completions/toolgate.bash",
        "completions/_toolgate",
        "completions/toolgate.fish",
        "LICENSE-MIT",
        "LICENSE-APACHE",
    ] {
        if std::fs::metadata(unpacked.join(file)).map_or(0, |m| m.len()) == 0 {
            bail!("the archive's {file} is missing or empty");
        }
    }
    for page in ["toolgate.1", "toolgate-serve.1", "toolgate-call.1"] {
        let text = std::fs::read_to_string(unpacked.join("man/man1").join(page))
            .with_context(|| format!("the archive has no man/man1/{page}"))?;
        if !text.contains(".TH ") {
            bail!("man/man1/{page} is not a manual page");
        }
    }
    eprintln!(
        "dist: from the archive, `--version` says {said:?}; `tools` and `serve --check` work"
    );
    Ok(())
}

fn output(cmd: &mut Command) -> anyhow::Result<String> {
    eprintln!("+ {cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed with {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root())
        .output()
        .context("git")?;
    if !out.status.success() {
        bail!("git {args:?} failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
