//! What a soak saw, per minute, and whether it passed.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::time::Duration;

use crate::faults::Window;
use crate::traffic::{Kind, Outcome, Record};

/// One reading of an instance's process.
#[derive(Clone, Debug)]
pub struct Sample {
    pub at: Duration,
    pub instance: usize,
    pub pid: u32,
    pub rss_kib: u64,
    pub fds: usize,
}

/// Growth allowed between the settled window and the last one.
const FLAT: f64 = 1.10;
/// The p99 outside faults may be at most this many times the first minutes'.
const P99_FACTOR: f64 = 2.0;
/// Below this, a p99 is scheduling noise on a shared two-core machine, not
/// a trend: the p99 test compares against at least this much.
const P99_FLOOR_MS: f64 = 10.0;

/// Everything the verdict needs.
pub struct Run<'a> {
    pub length: Duration,
    pub rate: f64,
    pub listens: usize,
    pub records: &'a [Record],
    pub windows: &'a [Window],
    pub samples: &'a [Sample],
    /// Trace ids with an audit row.
    pub recorded: &'a HashSet<String>,
    pub instances: &'a [&'static str],
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn ms(r: &Record) -> f64 {
    (r.end.saturating_sub(r.start)).as_secs_f64() * 1000.0
}

/// Calls whose latency is comparable: answered, and not the slow tool.
fn timed(r: &Record) -> bool {
    r.kind != Kind::Slow && matches!(r.outcome, Outcome::Ok)
}

impl Run<'_> {
    fn minutes(&self) -> usize {
        self.length.as_secs().div_ceil(60) as usize
    }

    fn explained(&self, r: &Record) -> bool {
        self.windows.iter().any(|w| w.overlaps(r.start, r.end))
    }

    /// The per-minute table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let names = self.instances;
        let _ = write!(
            out,
            "| min | calls | ok | errors by cause | p50 ms | p99 ms |"
        );
        for n in names {
            let _ = write!(out, " {n} RSS MiB | {n} fds |");
        }
        out.push_str(" faults |\n|---:|---:|---:|---|---:|---:|");
        for _ in names {
            out.push_str("---:|---:|");
        }
        out.push_str("---|\n");
        for m in 0..self.minutes() {
            let from = Duration::from_secs(60 * m as u64);
            let to = from + Duration::from_secs(60);
            let these: Vec<&Record> = self
                .records
                .iter()
                .filter(|r| r.start >= from && r.start < to)
                .collect();
            let ok = these
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Ok))
                .count();
            let mut causes: BTreeMap<String, usize> = BTreeMap::new();
            for r in &these {
                if let Some(c) = r.outcome.cause() {
                    *causes.entry(c).or_default() += 1;
                }
            }
            let errors = if causes.is_empty() {
                "-".to_owned()
            } else {
                causes
                    .iter()
                    .map(|(c, n)| format!("{n}× {}", c.replace('|', "/")))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let lat: Vec<f64> = these.iter().filter(|r| timed(r)).map(|r| ms(r)).collect();
            let _ = write!(
                out,
                "| {} | {} | {ok} | {errors} | {:.1} | {:.1} |",
                m + 1,
                these.len(),
                percentile(lat.clone(), 0.50),
                percentile(lat, 0.99)
            );
            for i in 0..names.len() {
                let last = self
                    .samples
                    .iter()
                    .rfind(|s| s.instance == i && s.at >= from && s.at < to);
                match last {
                    Some(s) => {
                        let _ = write!(out, " {:.1} | {} |", s.rss_kib as f64 / 1024.0, s.fds);
                    }
                    None => out.push_str(" - | - |"),
                }
            }
            let faults: Vec<&str> = self
                .windows
                .iter()
                .filter(|w| w.start >= from && w.start < to)
                .map(|w| w.fault.label())
                .collect();
            let _ = writeln!(
                out,
                " {} |",
                if faults.is_empty() {
                    "-".into()
                } else {
                    faults.join(", ")
                }
            );
        }
        out
    }

    /// Each check, with what it saw; the run passes when every one does.
    pub fn checks(&self) -> Vec<(bool, String)> {
        let mut out = Vec::new();
        // Every answered call has its audit row.
        let answered: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| r.outcome.must_be_recorded() && r.trace.is_some())
            .collect();
        let missing: Vec<&str> = answered
            .iter()
            .filter_map(|r| r.trace.as_deref())
            .filter(|t| !self.recorded.contains(*t))
            .collect();
        out.push((
            missing.is_empty(),
            format!(
                "audit: {} of {} answered calls have their row{}",
                answered.len() - missing.len(),
                answered.len(),
                if missing.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; missing: {}",
                        missing
                            .iter()
                            .take(5)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
        ));
        // No error the faults do not explain.
        let unexplained: Vec<String> = self
            .records
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Ok) && !self.explained(r))
            .map(|r| {
                format!(
                    "{:.1}s {:?} on {}: {}",
                    r.start.as_secs_f64(),
                    r.kind,
                    self.instances[r.instance],
                    r.outcome.cause().unwrap_or_default()
                )
            })
            .collect();
        let errors = self
            .records
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Ok))
            .count();
        out.push((
            unexplained.is_empty(),
            format!(
                "errors: {errors} of {} calls, {} outside every fault window{}",
                self.records.len(),
                unexplained.len(),
                if unexplained.is_empty() {
                    String::new()
                } else {
                    format!(
                        ": {}",
                        unexplained
                            .iter()
                            .take(8)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" | ")
                    )
                }
            ),
        ));
        // Each fault healed.
        for w in self.windows {
            out.push((
                w.recovered_in.is_some(),
                match w.recovered_in {
                    Some(d) => format!(
                        "{} at {:.0}s: serving again after {:.1}s",
                        w.fault.label(),
                        w.start.as_secs_f64(),
                        d.as_secs_f64()
                    ),
                    None => format!(
                        "{} at {:.0}s: not serving again",
                        w.fault.label(),
                        w.start.as_secs_f64()
                    ),
                },
            ));
        }
        // RSS and descriptors flat after warm-up.
        let t = self.length.as_secs_f64();
        let settled = (t / 6.0, t / 3.0);
        let last = (t * 2.0 / 3.0, t);
        for (i, name) in self.instances.iter().enumerate() {
            let window = |(a, b): (f64, f64)| -> Vec<&Sample> {
                self.samples
                    .iter()
                    .filter(|s| {
                        s.instance == i && s.at.as_secs_f64() >= a && s.at.as_secs_f64() <= b
                    })
                    .collect()
            };
            let (base, end) = (window(settled), window(last));
            let max =
                |v: &[&Sample], f: fn(&Sample) -> f64| v.iter().map(|s| f(s)).fold(0.0, f64::max);
            for (what, f) in [
                (
                    "RSS",
                    (|s: &Sample| s.rss_kib as f64 / 1024.0) as fn(&Sample) -> f64,
                ),
                ("fds", |s: &Sample| s.fds as f64),
            ] {
                let (b, e) = (max(&base, f), max(&end, f));
                let flat = b > 0.0 && e <= b * FLAT;
                let restarted = end.iter().any(|s| base.iter().all(|x| x.pid != s.pid));
                out.push((
                    flat,
                    format!(
                        "{name} {what}: at most {b:.1} in minutes {:.1}–{:.1}, {e:.1} in the last third ({:+.1}%){}",
                        settled.0 / 60.0,
                        settled.1 / 60.0,
                        if b > 0.0 { (e / b - 1.0) * 100.0 } else { 0.0 },
                        if restarted { ", the restarted process" } else { "" }
                    ),
                ));
            }
        }
        // p99 outside the faults against the first minutes.
        let first_fault = self.windows.first().map_or(self.length, |w| w.start);
        let warm = self.length.mul_f64(0.05);
        let base: Vec<f64> = self
            .records
            .iter()
            .filter(|r| timed(r) && r.start >= warm && r.end < first_fault)
            .map(ms)
            .collect();
        let quiet: Vec<f64> = self
            .records
            .iter()
            .filter(|r| timed(r) && r.start >= first_fault && !self.explained(r))
            .map(ms)
            .collect();
        let (pb, pq) = (
            percentile(base.clone(), 0.99),
            percentile(quiet.clone(), 0.99),
        );
        let mut slowest: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| timed(r) && r.start >= first_fault && !self.explained(r))
            .collect();
        slowest.sort_by(|a, b| ms(b).total_cmp(&ms(a)));
        let slowest: Vec<String> = slowest
            .iter()
            .take(5)
            .map(|r| {
                format!(
                    "{:?} on {} at {:.1}s: {:.0} ms",
                    r.kind,
                    self.instances[r.instance],
                    r.start.as_secs_f64(),
                    ms(r)
                )
            })
            .collect();
        out.push((
            !base.is_empty() && !quiet.is_empty() && pq <= P99_FACTOR * pb.max(P99_FLOOR_MS),
            format!(
                "p99 outside the faults: {pq:.1} ms over {} calls, against {pb:.1} ms over {} calls before the first (limit {P99_FACTOR}× that, at least {P99_FACTOR}× {P99_FLOOR_MS} ms); slowest: {}",
                quiet.len(),
                base.len(),
                slowest.join(", ")
            ),
        ));
        out
    }

    /// The whole report, in markdown.
    pub fn markdown(&self, checks: &[(bool, String)]) -> String {
        let mut out = format!(
            "{} minutes, {} calls a second in the mix, {} listen streams per instance.\n\n",
            self.length.as_secs_f64() / 60.0,
            self.rate,
            self.listens
        );
        out.push_str(&self.table());
        out.push('\n');
        for (ok, what) in checks {
            let _ = writeln!(out, "- {} {what}", if *ok { "pass:" } else { "FAIL:" });
        }
        let slow: Vec<f64> = self
            .records
            .iter()
            .filter(|r| r.kind == Kind::Slow && matches!(r.outcome, Outcome::Ok))
            .map(ms)
            .collect();
        let _ = writeln!(
            out,
            "- the slow upstream (2 s calls): {} answered, p50 {:.0} ms",
            slow.len(),
            percentile(slow, 0.5)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::percentile;
    use crate::faults::{Fault, Window};

    #[test]
    fn percentiles_are_of_the_values_seen() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(v.clone(), 0.5), 50.0);
        assert_eq!(percentile(v, 0.99), 99.0);
        assert_eq!(percentile(Vec::new(), 0.99), 0.0);
    }

    #[test]
    fn a_call_that_spans_a_fault_is_explained_by_it() {
        let s = Duration::from_secs;
        let w = Window {
            fault: Fault::Redis,
            start: s(10),
            end: s(20),
            recovered_in: Some(s(5)),
        };
        assert!(w.overlaps(s(8), s(11)));
        assert!(w.overlaps(s(19), s(25)));
        assert!(!w.overlaps(s(5), s(9)));
        assert!(!w.overlaps(s(21), s(22)));
    }
}
