//! The overview's last hour, drawn from the audit store: calls per minute
//! by outcome as an inline SVG chart (no script, nothing fetched), and each
//! upstream's latency percentiles.
//!
//! Layer: `surface`.

use std::collections::BTreeMap;

use maud::{Markup, html};

use super::console::text;
use crate::store::AuditRow;

/// What became of calls, as the chart groups them, with their colours.
pub(super) const CLASSES: &[(&str, &str)] = &[
    ("allowed", "#1a7f37"),
    ("approved", "#0969da"),
    // A question put to a person (answered or not): how many wait now is
    // the overview's own line, read from the pending approvals.
    ("asked", "#bf8700"),
    ("declined", "#8250df"),
    ("denied", "#cf222e"),
    ("failed", "#57606a"),
];

/// The class (an index into [`CLASSES`]) of a row.
pub(super) fn class(r: &AuditRow) -> usize {
    match r.status.as_str() {
        "ok" => match r.confirmation.as_deref() {
            Some("approved" | "granted") => 1,
            _ => 0,
        },
        "approval_pending" | "input_required" => 2,
        "declined" => 3,
        "approval_unavailable"
        | "denied"
        | "withheld"
        | "rate_limited"
        | "loop"
        | "over_budget"
        | "insufficient_scope"
        | "replayed"
        | "moved"
        | "tampered"
        | "expired" => 4,
        _ => 5,
    }
}

/// The calls among `rows` (the gateway's own rows left out).
pub(super) fn calls(rows: &[AuditRow]) -> impl Iterator<Item = &AuditRow> {
    rows.iter().filter(|r| !r.tool.starts_with("toolgate."))
}

const MINUTES: usize = 60;
const BAR: usize = 12;
const HEIGHT: usize = 120;

/// One bar of the chart: a rectangle per class, bottom up.
struct Bar {
    x: usize,
    ago: usize,
    said: String,
    /// (y, height, colour) of each rectangle.
    parts: Vec<(usize, usize, &'static str)>,
}

/// Calls per minute over the hour before `now_ms`, stacked by class, as
/// inline SVG (SVG elements closed explicitly: inside HTML, a void-style
/// `<rect>` would swallow the next one).
pub(super) fn per_minute(rows: &[AuditRow], now_ms: i64) -> Markup {
    let mut counts = vec![[0usize; 6]; MINUTES];
    for r in calls(rows) {
        let ago = (now_ms - r.time_ms) / 60_000;
        if let Ok(ago) = usize::try_from(ago)
            && ago < MINUTES
        {
            counts[MINUTES - 1 - ago][class(r)] += 1;
        }
    }
    let top = counts
        .iter()
        .map(|c| c.iter().sum::<usize>())
        .max()
        .unwrap_or(0)
        .max(1);
    let bars: Vec<Bar> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.iter().sum::<usize>() > 0)
        .map(|(minute, c)| {
            let said: Vec<String> = CLASSES
                .iter()
                .zip(c)
                .filter(|(_, n)| **n > 0)
                .map(|((label, _), n)| format!("{n} {label}"))
                .collect();
            let mut y = HEIGHT;
            let parts = CLASSES
                .iter()
                .zip(c)
                .filter(|(_, n)| **n > 0)
                .map(|((_, colour), n)| {
                    let h = (n * HEIGHT).div_ceil(top).max(1);
                    y = y.saturating_sub(h);
                    (y, h, *colour)
                })
                .collect();
            Bar {
                x: minute * BAR + 1,
                ago: MINUTES - minute,
                said: said.join(", "),
                parts,
            }
        })
        .collect();
    let width = MINUTES * BAR;
    let height = HEIGHT + 20;
    html! {
        svg xmlns="http://www.w3.org/2000/svg" id="per-minute" role="img"
            aria-label="calls per minute, the last hour" width=(width) height=(height)
            viewBox={ "0 0 " (width) " " (height) } {
            line x1="0" y1=(HEIGHT) x2=(width) y2=(HEIGHT) stroke="#999" {}
            @for bar in &bars {
                g {
                    title { (bar.ago) " min ago: " (bar.said) }
                    @for (y, h, colour) in &bar.parts {
                        rect x=(bar.x) y=(y) width=(BAR - 2) height=(h) fill=(colour) {}
                    }
                }
            }
            text x="0" y=(HEIGHT + 15) font-size="11" { "60 min ago" }
            text x=(width) y=(HEIGHT + 15) font-size="11" text-anchor="end" { "now · top " (top) "/min" }
        }
        p class="legend" {
            @for (label, colour) in CLASSES {
                span {
                    svg width="10" height="10" { rect width="10" height="10" fill=(colour) {} }
                    " " (label)
                }
                " "
            }
        }
    }
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Each upstream's calls that reached it, and their p50 and p99 latency
/// in milliseconds.
pub(super) fn latency(rows: &[AuditRow]) -> Vec<(String, usize, f64, f64)> {
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in calls(rows) {
        let reached = matches!(
            r.status.as_str(),
            "ok" | "tool_error" | "output_invalid" | "upstream_error" | "timeout"
        );
        if let (true, Some(u)) = (reached, r.upstream.as_deref()) {
            by.entry(u).or_default().push(r.latency_ms);
        }
    }
    by.into_iter()
        .map(|(u, mut v)| {
            v.sort_by(f64::total_cmp);
            (u.to_owned(), v.len(), quantile(&v, 0.5), quantile(&v, 0.99))
        })
        .collect()
}

/// The latency table's rows, as cells.
pub(super) fn latency_rows(rows: &[AuditRow]) -> Vec<Vec<Markup>> {
    latency(rows)
        .into_iter()
        .map(|(u, n, p50, p99)| {
            vec![
                text(u),
                text(n.to_string()),
                text(format!("{p50:.1}")),
                text(format!("{p99:.1}")),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ago_ms: i64, status: &str, confirmation: Option<&str>, ms: f64) -> AuditRow {
        AuditRow {
            time_ms: 10_000_000 - ago_ms,
            upstream: Some("shop".into()),
            tool: "shop.order".into(),
            status: status.into(),
            confirmation: confirmation.map(str::to_owned),
            latency_ms: ms,
            ..AuditRow::default()
        }
    }

    #[test]
    fn outcomes_are_grouped_as_a_person_reads_them() {
        assert_eq!(CLASSES[class(&row(0, "ok", None, 1.0))].0, "allowed");
        assert_eq!(
            CLASSES[class(&row(0, "ok", Some("granted"), 1.0))].0,
            "approved"
        );
        assert_eq!(
            CLASSES[class(&row(0, "over_budget", None, 1.0))].0,
            "denied"
        );
        assert_eq!(CLASSES[class(&row(0, "declined", None, 1.0))].0, "declined");
        assert_eq!(CLASSES[class(&row(0, "timeout", None, 1.0))].0, "failed");
    }

    #[test]
    fn the_chart_stacks_each_minute_and_leaves_out_older_calls() {
        let rows = vec![
            row(0, "ok", None, 1.0),
            row(1_000, "denied", None, 1.0),
            row(5 * 60_000, "ok", None, 1.0),
            row(61 * 60_000, "ok", None, 1.0),
        ];
        let svg = per_minute(&rows, 10_000_000).into_string();
        assert!(
            svg.contains("<title>1 min ago: 1 allowed, 1 denied</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>6 min ago: 1 allowed</title>"), "{svg}");
        assert_eq!(svg.matches("<title>").count(), 2, "{svg}");
        assert!(svg.contains("top 2/min"));
    }

    #[test]
    fn percentiles_count_only_calls_that_reached_the_upstream() {
        let mut rows: Vec<AuditRow> = (1..=100)
            .map(|i| row(0, "ok", None, f64::from(i)))
            .collect();
        rows.push(row(0, "denied", None, 9_999.0));
        let l = latency(&rows);
        assert_eq!(l, vec![("shop".to_owned(), 100, 50.0, 99.0)]);
    }
}
