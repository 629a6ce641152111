//! The call log's floor: what the audit's two parts cost on their own, in
//! this process, with no gateway around them — appending a call's two
//! records (encoded, then one `write(2)` each) to a segment in a loop, and
//! indexing the same calls into SQLite (read back, one statement per call,
//! 4,096 calls a transaction: `calllog::logged::drain`). The gateway rows'
//! CPU per call over the unaudited gateway, beside these, shows how much of
//! it is the work itself and how much the call's path around it.

use std::time::Instant;

use toolgate_bench::process::cpu_seconds;
use toolgate_bench::report::{Round, Row};
use toolgate_gateway::store::AuditRow;
use toolgate_gateway::store::calllog::logged::{drain, log_dir};
use toolgate_gateway::store::calllog::record::{Kind, Record, encode};
use toolgate_gateway::store::calllog::segment::Appender;
use toolgate_gateway::store::sqlite::AuditStore;

/// The scenario's label.
pub(crate) const FLOOR: &str = "call log floor (in process)";
/// Appending a call's two records.
pub(crate) const APPEND: &str = "append a call's 2 records (encode + write)";
/// Indexing a call into SQLite.
pub(crate) const INDEX: &str = "index a call into SQLite (read back, 1 statement)";

/// Calls per round.
const CALLS: i64 = 100_000;

/// The rows a gateway call of the bench writes: the begun record, then the
/// outcome (the shapes of `test_simple_text` through the gateway).
fn records(id: i64) -> [Record; 2] {
    let begun = AuditRow {
        id,
        time_ms: 1_765_000_000_000 + id,
        upstream: Some("up".into()),
        tool: "test_simple_text".into(),
        arguments_digest: "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
            .into(),
        decision: Some("allow".into()),
        rule: Some("default".into()),
        status: "forwarded".into(),
        ..AuditRow::default()
    };
    let mut outcome = begun.clone();
    outcome.status = "ok".into();
    outcome.latency_ms = 0.4;
    outcome.result = Some("1 block: text (37 chars)".into());
    [
        Record {
            kind: Kind::Begin,
            row: begun,
        },
        Record {
            kind: Kind::Outcome,
            row: outcome,
        },
    ]
}

/// One round: (append, index) as (calls a second, CPU seconds per 10k).
fn round(n: usize) -> anyhow::Result<[(f64, f64); 2]> {
    let dir = std::env::temp_dir().join(format!("toolgate-bench-floor-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("audit.db");
    drop(AuditStore::open(&db, false)?);
    let me = std::process::id();
    let (mut log, _) = Appender::open(&log_dir(&db))?;
    let mut bytes = Vec::with_capacity(512);
    let (cpu, clock) = (cpu_seconds(me), Instant::now());
    for id in 1..=CALLS {
        for record in records(id) {
            bytes.clear();
            encode(&record, &mut bytes);
            log.append(&bytes)?;
        }
    }
    let append = (clock.elapsed().as_secs_f64(), cpu_seconds(me) - cpu);
    drop(log);
    let (cpu, clock) = (cpu_seconds(me), Instant::now());
    drain(&db)?;
    let index = (clock.elapsed().as_secs_f64(), cpu_seconds(me) - cpu);
    std::fs::remove_dir_all(&dir)?;
    let per = |(wall, cpu): (f64, f64)| (CALLS as f64 / wall, cpu / CALLS as f64 * 10_000.0);
    Ok([per(append), per(index)])
}

/// The floor's rows, medians over `rounds`.
pub(crate) fn rows(rounds: usize) -> anyhow::Result<Vec<Row>> {
    let mut measured: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    for n in 0..rounds.max(1) {
        for (i, (rate, cpu_per_10k)) in round(n)?.into_iter().enumerate() {
            measured[i].push(Round {
                rate,
                p50_ms: 0.0,
                p99_ms: 0.0,
                cpu_per_10k,
                peak_mib: 0.0,
                errors: 0,
            });
        }
    }
    let [append, index] = measured;
    Ok(vec![
        Row::new(FLOOR, APPEND, append),
        Row::new(FLOOR, INDEX, index),
    ])
}
