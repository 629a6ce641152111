//! Results: one row per (scenario, server), medians over rounds, the ratios
//! to rmcp and to the ceiling, and the targets they are judged by.

use serde::Serialize;

/// One measured round.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// Samples per second.
    pub rate: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Server CPU seconds per 10,000 samples (client CPU for client rows).
    pub cpu_per_10k: f64,
    /// Server peak RSS, MiB.
    pub peak_mib: f64,
    /// Failed samples.
    pub errors: u64,
}

/// A (scenario, server) row: the median of its rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Scenario label.
    pub scenario: String,
    /// Server (or client) label.
    pub server: String,
    /// Median over rounds.
    pub median: Round,
    /// Every round, in order.
    pub rounds: Vec<Round>,
}

/// The median of `values` (0 for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

impl Row {
    /// A row from its rounds.
    pub fn new(scenario: &str, server: &str, rounds: Vec<Round>) -> Self {
        let pick = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
        let median = Round {
            rate: pick(|r| r.rate),
            p50_ms: pick(|r| r.p50_ms),
            p99_ms: pick(|r| r.p99_ms),
            cpu_per_10k: pick(|r| r.cpu_per_10k),
            peak_mib: pick(|r| r.peak_mib),
            errors: rounds.iter().map(|r| r.errors).sum(),
        };
        Self {
            scenario: scenario.into(),
            server: server.into(),
            median,
            rounds,
        }
    }
}

/// A memory figure.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryRow {
    /// What was measured.
    pub what: String,
    /// Server.
    pub server: String,
    /// The figure, in `unit`.
    pub mib: f64,
    /// `MiB`, or `KiB per stream`.
    pub unit: String,
}

/// A target from the performance issue, and whether it held.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// The target.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Whether it held.
    pub holds: bool,
}

/// Everything a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// When, machine, settings.
    pub context: serde_json::Value,
    /// Throughput and latency rows.
    pub rows: Vec<Row>,
    /// Memory rows.
    pub memory: Vec<MemoryRow>,
    /// The targets.
    pub targets: Vec<Target>,
}

impl Report {
    /// The row of `server` in `scenario`.
    pub fn row(&self, scenario: &str, server: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.scenario == scenario && r.server == server)
    }

    /// The markdown tables.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        if let Some(allocator) = self.context.get("allocator").and_then(|a| a.as_str()) {
            out.push_str(&format!("Allocator: {allocator}.\n\n"));
        }
        out.push_str("| Scenario | Server | req/s | p50 ms | p99 ms | CPU s / 10k | peak RSS MiB | × rmcp best | × ceiling |\n");
        out.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for row in &self.rows {
            let ratio = |other: &str| {
                self.row(&row.scenario, other)
                    .filter(|o| o.median.rate > 0.0 && o.server != row.server)
                    .map_or_else(
                        || "—".to_owned(),
                        |o| format!("{:.2}", row.median.rate / o.median.rate),
                    )
            };
            let m = &row.median;
            out.push_str(&format!(
                "| {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.1} | {} | {} |{}\n",
                row.scenario,
                row.server,
                m.rate,
                m.p50_ms,
                m.p99_ms,
                m.cpu_per_10k,
                m.peak_mib,
                ratio(crate::report::RMCP_BEST),
                ratio(crate::report::CEILING),
                if m.errors > 0 {
                    format!(" {} errors", m.errors)
                } else {
                    String::new()
                },
            ));
        }
        out.push_str("\n| Memory | Server | Resident |\n| --- | --- | ---: |\n");
        for m in &self.memory {
            out.push_str(&format!(
                "| {} | {} | {:.1} {} |\n",
                m.what, m.server, m.mib, m.unit
            ));
        }
        if self.targets.is_empty() {
            return out;
        }
        out.push_str("\n| Target | Measured | Holds |\n| --- | --- | --- |\n");
        for t in &self.targets {
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                t.target,
                t.measured,
                if t.holds { "yes" } else { "**no**" }
            ));
        }
        out
    }
}

/// Label of rmcp in its best settings.
pub const RMCP_BEST: &str = "rmcp (JSON, NODELAY)";
/// Label of rmcp as it ships.
pub const RMCP_DEFAULT: &str = "rmcp (defaults)";
/// Label of the ceiling.
pub const CEILING: &str = "axum fixed bytes (ceiling)";
/// Label of toolgate.
pub const TOOLGATE: &str = "toolgate";
