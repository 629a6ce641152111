//! The faults a soak injects, on a schedule scaled to its length, and the
//! windows they open: from the fault until every instance serves again,
//! plus a margin for calls that were in flight.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Map;
use toolgate_client::CallOptions;

use crate::traffic::{Outcome, Traffic, call};
use crate::world::{Instance, Service, Setup, children, kill_pid, runs};

/// What is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The basket (HTTP, shared) killed with SIGKILL and started again.
    Basket,
    /// Instance A's server-everything (stdio) killed; the gateway restarts it.
    Everything,
    /// PostgreSQL stopped for five seconds and started again.
    Postgres,
    /// Redis killed with SIGKILL and started again after three seconds.
    Redis,
    /// Instance B killed with SIGKILL and started again.
    Instance,
}

impl Fault {
    pub fn label(self) -> &'static str {
        match self {
            Fault::Basket => "basket killed",
            Fault::Everything => "server-everything killed",
            Fault::Postgres => "PostgreSQL restarted",
            Fault::Redis => "Redis restarted",
            Fault::Instance => "instance B killed (SIGKILL)",
        }
    }
}

/// When each fault comes, as a fraction of the run: every kind at least
/// once, the upstreams every few minutes of a long run.
pub const SCHEDULE: [(f64, Fault); 7] = [
    (0.20, Fault::Basket),
    (0.32, Fault::Postgres),
    (0.44, Fault::Everything),
    (0.56, Fault::Redis),
    (0.68, Fault::Instance),
    (0.80, Fault::Basket),
    (0.90, Fault::Everything),
];

/// Calls in flight when a fault ends may still fail for it.
const MARGIN: Duration = Duration::from_secs(5);

/// How long the soak waits for everything to serve again.
const RECOVERY: Duration = Duration::from_secs(90);

/// A fault and the time it spanned (since the soak began).
#[derive(Clone, Debug)]
pub struct Window {
    pub fault: Fault,
    pub start: Duration,
    pub end: Duration,
    /// How long until every instance served again.
    pub recovered_in: Option<Duration>,
}

impl Window {
    /// Whether a call spanning `[start, end]` overlaps this window.
    pub fn overlaps(&self, start: Duration, end: Duration) -> bool {
        start <= self.end && end >= self.start
    }
}

/// What the faults act on.
pub struct Targets<'a> {
    pub setup: &'a Setup,
    pub redis: &'a mut Service,
    pub basket: &'a mut Service,
    pub instances: &'a mut [Instance],
    pub traffic: &'a Arc<Traffic>,
    /// Listen streams held open on each instance, reopened after a restart.
    pub listens: &'a mut [Vec<toolgate_bench::listen::Stream>],
    pub listen_count: usize,
}

/// Inject `fault` and wait until every instance serves again.
pub async fn inject(fault: Fault, t: &mut Targets<'_>) -> anyhow::Result<Window> {
    let start = t.traffic.begun.elapsed();
    match fault {
        Fault::Basket => {
            t.basket.kill().await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            t.basket.up().await?;
        }
        Fault::Everything => {
            let pid = t.instances[0].pid();
            let child = children(pid).into_iter().find(|c| runs(*c, "everything"));
            match child {
                Some(c) => kill_pid(c).await?,
                None => anyhow::bail!("instance A has no server-everything process to kill"),
            }
        }
        Fault::Postgres => {
            t.setup.pg_ctl("stop -m fast").await?;
            tokio::time::sleep(Duration::from_secs(5)).await;
            t.setup.pg_ctl("start").await?;
        }
        Fault::Redis => {
            t.redis.kill().await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            t.redis.up().await?;
        }
        Fault::Instance => {
            t.traffic.up[1].store(false, Ordering::Relaxed);
            t.instances[1].kill().await;
            t.listens[1].clear();
            tokio::time::sleep(Duration::from_secs(2)).await;
            t.instances[1].up(t.setup).await?;
            t.listens[1] =
                toolgate_bench::listen::open(t.instances[1].addr, t.listen_count).await?;
            t.traffic.up[1].store(true, Ordering::Relaxed);
        }
    }
    let recovered = recovered(t.traffic, t.instances).await;
    let now = t.traffic.begun.elapsed();
    Ok(Window {
        fault,
        start,
        end: now + MARGIN,
        recovered_in: recovered.then(|| now - start),
    })
}

/// Probe each instance with a call of each upstream (recorded, rate-limited,
/// budgeted) until all succeed, or [`RECOVERY`] passes.
async fn recovered(traffic: &Traffic, instances: &[Instance]) -> bool {
    let deadline = tokio::time::Instant::now() + RECOVERY;
    for i in 0..instances.len() {
        for (tool, args) in [
            ("everything.get-sum", serde_json::json!({"a": 1, "b": 2})),
            ("basket.get_current_time", serde_json::json!({})),
        ] {
            loop {
                let (_, context) = traffic.trace();
                let options = CallOptions {
                    trace: context,
                    ..CallOptions::default()
                };
                let args: Map<_, _> = args.as_object().cloned().unwrap_or_default();
                if matches!(
                    call(&traffic.clients[i], tool, args, &options).await,
                    Outcome::Ok
                ) {
                    break;
                }
                if tokio::time::Instant::now() > deadline {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
    true
}
