//! SARIF 2.1.0 output, so code-scanning interfaces can show audit findings.

use serde_json::{Value, json};

use crate::{Finding, RULES, Severity};

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

/// A SARIF 2.1.0 log of `findings`. Each finding's location is a logical
/// location `server/tool`.
pub fn to_sarif(findings: &[Finding], tool_version: &str) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "shortDescription": {"text": r.summary},
                "fullDescription": {"text": r.rationale},
                "defaultConfiguration": {"level": level(r.severity)},
                "properties": {"severity": r.severity.to_string()}
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            json!({
                "ruleId": f.rule,
                "ruleIndex": RULES.iter().position(|r| r.id == f.rule).unwrap_or(0),
                "level": level(f.severity),
                "message": {"text": format!("{} Evidence: {} Fix: {}", f.message, f.evidence, f.fix)},
                "locations": [{
                    "logicalLocations": [{
                        "name": f.tool,
                        "fullyQualifiedName": format!("{}/{}", f.server, f.tool),
                        "kind": "function"
                    }]
                }],
                "properties": {"severity": f.severity.to_string(), "server": f.server, "evidence": f.evidence, "fix": f.fix}
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "toolgate", "version": tool_version, "informationUri": "https://github.com/toolgate/toolgate", "rules": rules}},
            "results": results
        }]
    })
}
