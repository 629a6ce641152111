//! `soak`: two gateway instances on one PostgreSQL and one Redis, in front
//! of the basket (HTTP) and server-everything (stdio), under a steady mixed
//! load for N minutes while upstreams, PostgreSQL, Redis and one instance
//! are broken on a schedule. It reports per minute (calls, errors by cause,
//! p50/p99, each instance's RSS and open descriptors) and passes when every
//! answered call has its audit row, every error falls in a fault's window,
//! memory and descriptors stay flat, and p99 outside the faults stays
//! within 2× of the first minutes.
//!
//! Run it with `cargo xtask soak --minutes N`, which starts PostgreSQL,
//! installs what is missing and passes the paths in `TOOLGATE_SOAK_*`.

mod faults;
mod report;
mod traffic;
mod world;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use parking_lot::Mutex;

use report::{Run, Sample};
use toolgate_bench::process::{free_addr, memory};
use traffic::Traffic;
use world::{Instance, Service, Setup, open_fds};

#[derive(Parser)]
#[command(about = "Soak two gateway instances under load, with faults")]
struct Args {
    /// How long the load runs.
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Calls a second, across both instances.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// Listen streams held open on each instance.
    #[arg(long, default_value_t = 150)]
    listens: usize,
    /// Where to write the markdown report.
    #[arg(long, default_value = "target/soak/report.md")]
    report: PathBuf,
}

const NAMES: [&str; 2] = ["A", "B"];

fn toml_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The configuration both instances share.
fn config(setup: &Setup, basket: &Service, redis: &Service, dir: &Path) -> anyhow::Result<PathBuf> {
    let key = dir.join("state.key");
    std::fs::write(
        &key,
        format!("{:064x}", u128::from(std::process::id()) << 7 | 1),
    )?;
    let toml = format!(
        r#"[servers.basket]
url = "http://{basket}/mcp"

[servers.everything]
command = {everything}

[store]
url = {postgres}

[state]
key_file = {key}

[ratelimit]
redis = "redis://{redis}"

[[ratelimit.rules]]
tools = ["everything.*"]
per_minute = 1000000

[[budget]]
tools = ["everything.get-sum"]
cost = 1
total = {{ amount = 1000000000, per = "day" }}

[policy]
default = "allow"

[[policy.rules]]
tools = ["basket.create_basket"]
action = "confirm"
"#,
        basket = basket.addr,
        everything = toml_string(&setup.everything.display().to_string()),
        postgres = toml_string(&setup.postgres),
        key = toml_string(&key.display().to_string()),
        redis = redis.addr,
    );
    let path = dir.join("toolgate.toml");
    std::fs::write(&path, toml)?;
    Ok(path)
}

/// The trace ids of every audit row, read with `toolgate log` as an
/// operator would.
async fn recorded(setup: &Setup) -> anyhow::Result<HashSet<String>> {
    let out = tokio::process::Command::new(&setup.toolgate)
        .args([
            "log",
            "--db",
            &setup.postgres,
            "--json",
            "--limit",
            "100000000",
        ])
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "toolgate log failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut ids = HashSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let row: serde_json::Value = serde_json::from_str(line)?;
        if let Some(id) = row["trace_id"].as_str() {
            ids.insert(id.to_owned());
        }
    }
    Ok(ids)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let setup = Setup::from_env()?;
    let length = Duration::from_secs_f64(args.minutes * 60.0);
    let dir = std::env::temp_dir().join(format!("toolgate-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let mut redis = Service::redis(&setup, free_addr()?).await?;
    let mut basket = Service::basket(&setup, free_addr()?).await?;
    let config = config(&setup, &basket, &redis, &dir)?;
    let mut instances = Vec::new();
    for name in NAMES {
        instances.push(Instance::start(&setup, name, free_addr()?, &config, &dir).await?);
    }
    let mut listens = Vec::new();
    for i in &instances {
        listens.push(toolgate_bench::listen::open(i.addr, args.listens).await?);
    }
    let clients = instances
        .iter()
        .map(|i| traffic::client(&i.url()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let begun = Instant::now();
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        | 1 << 62;
    let traffic = Arc::new(Traffic {
        clients,
        up: NAMES
            .iter()
            .map(|_| Arc::new(AtomicBool::new(true)))
            .collect(),
        records: Arc::new(Mutex::new(Vec::new())),
        begun,
        run,
    });
    eprintln!(
        "soak: {:.1} min, {} calls/s, {} listen streams per instance; logs in {}",
        args.minutes,
        args.rate,
        args.listens,
        dir.display()
    );

    // Each instance's RSS and descriptors every two seconds.
    let pids: Arc<Vec<AtomicU32>> =
        Arc::new(instances.iter().map(|i| AtomicU32::new(i.pid())).collect());
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (pids, samples, stop) = (pids.clone(), samples.clone(), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                for (i, pid) in pids.iter().enumerate() {
                    let pid = pid.load(Ordering::Relaxed);
                    let rss_kib = memory(pid).rss_kib;
                    if rss_kib > 0 {
                        samples.lock().push(Sample {
                            at: begun.elapsed(),
                            instance: i,
                            pid,
                            rss_kib,
                            fds: open_fds(pid),
                        });
                    }
                }
            }
        })
    };
    let load = tokio::spawn(traffic.clone().run(args.rate, stop.clone()));

    let mut windows = Vec::new();
    for (at, fault) in faults::SCHEDULE {
        let when = length.mul_f64(at);
        if let Some(wait) = when.checked_sub(begun.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        eprintln!(
            "soak: {:.0}s {}",
            begun.elapsed().as_secs_f64(),
            fault.label()
        );
        let mut targets = faults::Targets {
            setup: &setup,
            redis: &mut redis,
            basket: &mut basket,
            instances: &mut instances,
            traffic: &traffic,
            listens: &mut listens,
            listen_count: args.listens,
        };
        let window = faults::inject(fault, &mut targets)
            .await
            .with_context(|| format!("injecting {}", fault.label()))?;
        for (i, instance) in instances.iter().enumerate() {
            pids[i].store(instance.pid(), Ordering::Relaxed);
        }
        windows.push(window);
    }
    if let Some(wait) = length.checked_sub(begun.elapsed()) {
        tokio::time::sleep(wait).await;
    }
    stop.store(true, Ordering::Relaxed);
    load.await?;
    sampler.await?;
    let kinds: Vec<String> = instances
        .iter()
        .map(|i| {
            let kinds = world::fd_kinds(i.pid());
            let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
            format!("{}: {}", i.name, list.join(", "))
        })
        .collect();
    drop(listens);
    for i in &mut instances {
        i.kill().await;
    }
    redis.kill().await;
    basket.kill().await;

    let recorded = recorded(&setup).await?;
    let records = traffic.records.lock().clone();
    let samples = samples.lock().clone();
    let run = Run {
        length,
        rate: args.rate,
        listens: args.listens,
        records: &records,
        windows: &windows,
        samples: &samples,
        recorded: &recorded,
        instances: &NAMES,
    };
    let checks = run.checks();
    let mut text = run.markdown(&checks);
    text.push_str(&format!(
        "- descriptors at the end (with the listen streams open): {}\n",
        kinds.join("; ")
    ));
    if let Some(parent) = args.report.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.report, &text)?;
    // Every call, for a closer look: start, kind, instance, milliseconds, cause.
    let mut csv = String::from("start_s,kind,instance,ms,cause\n");
    for r in &records {
        csv.push_str(&format!(
            "{:.3},{:?},{},{:.1},{}\n",
            r.start.as_secs_f64(),
            r.kind,
            NAMES[r.instance],
            r.end.saturating_sub(r.start).as_secs_f64() * 1000.0,
            r.outcome.cause().unwrap_or_default().replace(',', ";")
        ));
    }
    std::fs::write(args.report.with_extension("csv"), csv)?;
    println!("{text}");
    let failed = checks.iter().filter(|(ok, _)| !ok).count();
    if failed > 0 {
        anyhow::bail!(
            "the soak failed {failed} check(s); the gateways' logs are in {}",
            dir.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
