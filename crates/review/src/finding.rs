//! What an audit reports.

use std::fmt;

use serde::Serialize;

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// A weakness.
    Low,
    /// Likely to cause trouble or hide risk.
    Medium,
    /// Likely an attack or a serious safety gap.
    High,
}

impl Severity {
    /// Parse `info`, `low`, `medium` or `high`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "info" => Severity::Info,
            "low" => Severity::Low,
            "medium" => Severity::Medium,
            "high" => Severity::High,
            _ => return None,
        })
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        })
    }
}

/// One problem found in one tool (or across tools).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable rule id, e.g. `TG-D003`.
    pub rule: &'static str,
    /// Severity.
    pub severity: Severity,
    /// The server's label.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// What is wrong.
    pub message: String,
    /// The exact text or schema location that shows it.
    pub evidence: String,
    /// How to fix it.
    pub fix: String,
}
