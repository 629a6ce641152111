//! What a sandbox costs a stdio server: its start (spawn to the first
//! answer, plain and through `toolgate sandbox exec` in the `strict`
//! profile) and its calls (64 in flight, plain and sandboxed, in the same
//! run). The target: under 20 ms more to start, calls the same within
//! noise. CPU is not compared: the sandboxed server is the launcher's
//! grandchild, outside the process whose CPU time is read.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolgate_bench::report::{Round, Row, median};
use toolgate_bench::stdio;
use toolgate_sandbox::{Request, ServerCommand};

use crate::servers::Bins;

/// The start scenario's label.
pub(crate) const START: &str = "stdio server start (spawn to first answer)";
/// The calls scenario's label.
pub(crate) const CALLS: &str = "stdio tools/call in a sandbox, 64 in flight";
/// The plain server.
pub(crate) const PLAIN: &str = "toolgate server, plain";
/// The same server in the strict profile.
pub(crate) const STRICT: &str = "toolgate server, sandbox strict";
/// Starts per round.
const STARTS: usize = 20;

/// `program args`, and the same in the strict profile through the launcher.
fn commands(bins: &Bins) -> anyhow::Result<[(String, Vec<String>); 2]> {
    let server = bins.toolgate.display().to_string();
    let policy = Request::default().resolve(&ServerCommand {
        program: server.clone(),
        path: std::env::var("PATH").ok(),
        home: std::env::var("HOME").ok().map(Into::into),
        ..ServerCommand::default()
    })?;
    let launcher = vec![
        "sandbox".to_owned(),
        "exec".to_owned(),
        "--policy".to_owned(),
        policy.to_arg(),
        "--".to_owned(),
        server.clone(),
        "--stdio".to_owned(),
    ];
    Ok([
        (server, vec!["--stdio".to_owned()]),
        (bins.cli.display().to_string(), launcher),
    ])
}

/// Milliseconds from spawning `program args` to its answer to one call.
async fn start_once(program: &str, args: &[String]) -> anyhow::Result<f64> {
    let clock = Instant::now();
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}, "_meta": toolgate_bench::request_meta()}
    }))?;
    line.push(b'\n');
    stdin.write_all(&line).await?;
    stdin.flush().await?;
    let mut lines = BufReader::new(stdout).lines();
    while let Some(answer) = lines.next_line().await? {
        if answer.contains("\"id\":1") {
            let elapsed = clock.elapsed().as_secs_f64() * 1000.0;
            drop(stdin);
            child.wait().await?;
            return Ok(elapsed);
        }
    }
    anyhow::bail!("{program} ended without answering")
}

/// The rows: starts and calls, plain and sandboxed, medians over `rounds`.
pub(crate) async fn rows(bins: &Bins, rounds: usize, secs: Duration) -> anyhow::Result<Vec<Row>> {
    let commands = commands(bins)?;
    let labels = [PLAIN, STRICT];
    let mut starts: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    let mut calls: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds.max(1) {
        let mut order = [0, 1];
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (program, args) = &commands[i];
            let mut times = Vec::with_capacity(STARTS);
            for _ in 0..STARTS {
                times.push(start_once(program, args).await?);
            }
            times.sort_by(f64::total_cmp);
            let p99 = times.last().copied().unwrap_or_default();
            let p50 = median(times);
            eprintln!(
                "  {START:<44} {:<32} p50 {p50:>7.2} ms  max {p99:>7.2} ms",
                labels[i]
            );
            starts[i].push(Round {
                rate: 1000.0 / p50.max(f64::MIN_POSITIVE),
                p50_ms: p50,
                p99_ms: p99,
                cpu_per_10k: 0.0,
                peak_mib: 0.0,
                errors: 0,
            });
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = stdio::run(Path::new(program), &argv, 64, secs)
                .await?
                .round(false);
            eprintln!(
                "  {CALLS:<44} {:<32} {:>9.0}/s  p50 {:>7.3} ms  p99 {:>7.3} ms",
                labels[i], r.rate, r.p50_ms, r.p99_ms
            );
            calls[i].push(r);
        }
    }
    let [start_plain, start_strict] = starts;
    let [calls_plain, calls_strict] = calls;
    Ok(vec![
        Row::new(START, PLAIN, start_plain),
        Row::new(START, STRICT, start_strict),
        Row::new(CALLS, PLAIN, calls_plain),
        Row::new(CALLS, STRICT, calls_strict),
    ])
}
