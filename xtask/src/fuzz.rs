//! `cargo xtask fuzz [--secs N] [--asan] [TARGET...]`: the coverage-guided
//! fuzz targets of `fuzz/`, each run for N seconds (default 60).
//!
//! cargo-fuzz is installed into `.tools/cargo-fuzz` at a pinned version;
//! the targets build with the nightly toolchain. Each target's corpus lives
//! in `target/fuzz-corpus/<target>` and is seeded from the specification's
//! examples in `testdata/spec` and a few hand-written inputs, so a run starts
//! from real messages rather than from nothing. A crash, an input slower
//! than the per-input timeout, or memory over the cap fails the run and
//! leaves the input in `fuzz/artifacts/<target>/`: turn it into a
//! regression test before fixing it.
//!
//! The targets build without a sanitizer by default (the workspace forbids
//! `unsafe`, and the build is several times faster); `--asan` builds them
//! with AddressSanitizer to check the dependencies' unsafe code too.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::{root, run};

/// Every target in `fuzz/Cargo.toml`.
pub const TARGETS: &[&str] = &[
    "jsonrpc",
    "header_codec",
    "schema",
    "header_rules",
    "sse",
    "request_state",
    "lock_file",
];

const CARGO_FUZZ_VERSION: &str = "0.13.2";
/// Per-input time limit (seconds): every bound the parsers keep must hold
/// well within it.
const INPUT_TIMEOUT_SECS: u32 = 5;
/// Memory cap of a fuzzing process.
const RSS_LIMIT_MB: u32 = 1536;

pub fn run_args(args: &[String]) -> anyhow::Result<()> {
    let mut secs = 60u32;
    let mut asan = false;
    let mut targets = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--secs" => {
                secs = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .context("--secs takes a whole number of seconds")?;
            }
            "--asan" => asan = true,
            name if TARGETS.contains(&name) => targets.push(name),
            other => bail!("unknown fuzz target or option {other:?}; targets: {TARGETS:?}"),
        }
    }
    if targets.is_empty() {
        targets = TARGETS.to_vec();
    }
    fuzz(&targets, secs, asan)
}

/// Build the targets and run each for `secs` seconds.
pub fn fuzz(targets: &[&str], secs: u32, asan: bool) -> anyhow::Result<()> {
    let cargo_fuzz = install()?;
    let sanitizer = if asan { "address" } else { "none" };
    run(nightly(&cargo_fuzz)
        .args(["fuzz", "build", "--sanitizer", sanitizer])
        .current_dir(root()))?;
    let logs = crate::target_dir().join("fuzz-logs");
    std::fs::create_dir_all(&logs)?;
    for target in targets {
        let corpus = seed(target)?;
        let log_path = logs.join(format!("{target}.log"));
        let log = std::fs::File::create(&log_path)?;
        eprintln!("fuzz: {target} for {secs} s (log: {})", log_path.display());
        let status = nightly(&cargo_fuzz)
            .args(["fuzz", "run", "--sanitizer", sanitizer, target])
            .arg(&corpus)
            .arg("--")
            .arg(format!("-max_total_time={secs}"))
            .arg(format!("-timeout={INPUT_TIMEOUT_SECS}"))
            .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
            .arg("-max_len=262144")
            .arg("-print_final_stats=1")
            .current_dir(root())
            .stdout(log.try_clone()?)
            .stderr(log)
            .status()
            .context("could not start cargo-fuzz")?;
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if !status.success() {
            // The log's end holds the panic, the input and how to replay it.
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("{}", lines[lines.len().saturating_sub(80)..].join("\n"));
            bail!(
                "fuzz target {target} failed: the input is in fuzz/artifacts/{target}/ \
                 (replay it with `cargo +nightly fuzz run --sanitizer {sanitizer} {target} FILE`)"
            );
        }
        for line in text.lines().filter(|l| {
            l.starts_with("Done ")
                || l.starts_with("stat::number_of_executed_units")
                || l.starts_with("stat::peak_rss_mb")
        }) {
            eprintln!("  {line}");
        }
    }
    Ok(())
}

/// cargo-fuzz under the nightly toolchain, without the variables the
/// stable cargo that runs xtask set for its own children.
fn nightly(cargo_fuzz: &Path) -> Command {
    let mut cmd = Command::new(cargo_fuzz);
    cmd.env("RUSTUP_TOOLCHAIN", "nightly");
    for var in ["CARGO", "RUSTC", "RUSTDOC", "CARGO_TARGET_DIR", "RUSTFLAGS"] {
        cmd.env_remove(var);
    }
    cmd
}

/// cargo-fuzz at the pinned version, installed once into `.tools/`.
fn install() -> anyhow::Result<PathBuf> {
    crate::support::cargo_tool("cargo-fuzz", CARGO_FUZZ_VERSION)
}

/// The target's corpus directory, with the seeds written into it.
fn seed(target: &str) -> anyhow::Result<PathBuf> {
    let dir = crate::target_dir().join("fuzz-corpus").join(target);
    std::fs::create_dir_all(&dir)?;
    let seeds = seeds(target)?;
    for (i, seed) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:03}")), seed)?;
    }
    Ok(dir)
}

fn examples_dir() -> PathBuf {
    root().join("testdata/spec/2026-07-28/examples")
}

/// Every example of the specification in folders whose name passes `keep`.
fn examples(keep: impl Fn(&str) -> bool) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    let dir = examples_dir();
    let mut folders: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| keep(&e.file_name().to_string_lossy()))
        .collect();
    folders.sort_by_key(|e| e.file_name());
    for folder in folders {
        let mut files: Vec<_> = std::fs::read_dir(folder.path())?
            .filter_map(Result::ok)
            .collect();
        files.sort_by_key(|e| e.file_name());
        for file in files {
            let text = std::fs::read_to_string(file.path())?;
            out.push(
                serde_json::from_str(&text)
                    .with_context(|| format!("{} is not JSON", file.path().display()))?,
            );
        }
    }
    Ok(out)
}

fn input_schemas() -> anyhow::Result<Vec<Value>> {
    Ok(examples(|f| f == "Tool")?
        .into_iter()
        .filter_map(|tool| tool.get("inputSchema").cloned())
        .chain([json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}}
        }})])
        .collect())
}

fn seeds(target: &str) -> anyhow::Result<Vec<Vec<u8>>> {
    let json = |v: &Value| v.to_string().into_bytes();
    Ok(match target {
        "jsonrpc" => {
            let mut seeds: Vec<Vec<u8>> = examples(|f| {
                f.ends_with("Request") || f.ends_with("Notification") || f.ends_with("Response")
            })?
            .iter()
            .map(json)
            .collect();
            seeds.push(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#.to_vec());
            seeds.push(br#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#.to_vec());
            seeds
        }
        "header_codec" => [
            "plain",
            "=?base64?SGVsbG8=?=",
            "=?base64?!!?=",
            " padded ",
            "caf\u{e9}",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect(),
        "schema" => input_schemas()?
            .iter()
            .map(|s| json(&json!([s, {}])))
            .chain([json(
                &json!([{"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, 1]),
            )])
            .collect(),
        "header_rules" => input_schemas()?.iter().map(json).collect(),
        "sse" => [
            "\u{1b}data: {\"a\":1}\n\n",
            "\u{0c}id: e1\r\nretry: 99\r\n\r\n",
            "\u{04}data\u{03}: x\r\u{02}\n\n",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect(),
        "request_state" => ["a.b", "e1.k.AAAA", "eyJ2IjoxfQ.AAAA", "e1..", "."]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
        "lock_file" => vec![json(
            &json!({"version": 1, "servers": {"s": {"tools": {"t": {
                "digest": "sha256:00",
                "description": "Adds.",
                "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}
            }}}}}),
        )],
        other => bail!("no seeds for fuzz target {other}"),
    })
}
