//! stdio load: one client process keeps a fixed number of `tools/call`
//! requests in flight on a server's stdin and matches the answers on its
//! stdout by id.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::{Mutex, Semaphore};

use crate::load::histogram;

/// What a stdio run measured.
pub struct StdioOutcome {
    /// Completed calls.
    pub samples: u64,
    /// Calls answered with an error.
    pub errors: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Per-call latency, µs.
    pub latency: Histogram<u64>,
    /// Server CPU seconds during the run.
    pub cpu_seconds: f64,
    /// Server peak RSS, KiB.
    pub peak_kib: u64,
}

impl StdioOutcome {
    /// This run as a report's round; `cpu`: with the server's CPU time (not
    /// for a server started through a launcher, whose CPU is not the
    /// server's).
    pub fn round(&self, cpu: bool) -> crate::report::Round {
        crate::report::Round {
            rate: self.samples as f64 / self.elapsed.as_secs_f64(),
            p50_ms: self.latency.value_at_quantile(0.5) as f64 / 1000.0,
            p99_ms: self.latency.value_at_quantile(0.99) as f64 / 1000.0,
            cpu_per_10k: if cpu {
                self.cpu_seconds / self.samples.max(1) as f64 * 10_000.0
            } else {
                0.0
            },
            peak_mib: if cpu {
                self.peak_kib as f64 / 1024.0
            } else {
                0.0
            },
            errors: self.errors,
        }
    }
}

/// Call `test_simple_text` on `program args` (a stdio server) with
/// `in_flight` requests outstanding, for `duration`.
pub async fn run(
    program: &Path,
    args: &[&str],
    in_flight: usize,
    duration: Duration,
) -> anyhow::Result<StdioOutcome> {
    let mut child = Command::new(program)
        .args(args)
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().unwrap_or(0);
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();

    let meta = crate::request_meta();
    // Warm up with one call, unmeasured.
    let call = move |id: u64| {
        let mut line = serde_json::to_vec(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "test_simple_text", "arguments": {}, "_meta": &meta}
        }))
        .unwrap_or_default();
        line.push(b'\n');
        line
    };
    stdin.write_all(&call(0)).await?;
    stdin.flush().await?;
    while let Some(line) = lines.next_line().await? {
        if line.contains("\"id\":0") {
            break;
        }
    }

    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let permits = Arc::new(Semaphore::new(in_flight));
    let cpu_before = crate::process::cpu_seconds(pid);
    let started = Instant::now();
    let deadline = started + duration;
    let writer = {
        let sent = sent.clone();
        let permits = permits.clone();
        tokio::spawn(async move {
            let mut id = 1u64;
            while Instant::now() < deadline {
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    break;
                };
                permit.forget();
                sent.lock().await.insert(id, Instant::now());
                if stdin.write_all(&call(id)).await.is_err() {
                    break;
                }
                // Flush only when the window is full or nothing is waiting:
                // batches writes the way a busy client would.
                if permits.available_permits() == 0 {
                    let _ = stdin.flush().await;
                }
                id += 1;
            }
            let _ = stdin.flush().await;
            (id - 1, stdin)
        })
    };
    let mut latency = histogram();
    let (mut samples, mut errors) = (0u64, 0u64);
    let mut flusher = tokio::time::interval(Duration::from_millis(1));
    loop {
        let line = tokio::select! {
            line = lines.next_line() => line?,
            _ = flusher.tick() => {
                if writer.is_finished() && sent.lock().await.is_empty() {
                    break;
                }
                continue;
            }
        };
        let Some(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = message.get("id").and_then(Value::as_u64) else {
            continue;
        };
        if let Some(at) = sent.lock().await.remove(&id) {
            let micros = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
            if message.get("result").is_some() {
                samples += 1;
                let _ = latency.record(micros.max(1));
            } else {
                errors += 1;
            }
            permits.add_permits(1);
        }
    }
    let elapsed = started.elapsed();
    let cpu_seconds = crate::process::cpu_seconds(pid) - cpu_before;
    let peak_kib = crate::process::memory(pid).peak_kib;
    let (_, stdin) = writer.await?;
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    Ok(StdioOutcome {
        samples,
        errors,
        elapsed,
        latency,
        cpu_seconds,
        peak_kib,
    })
}
