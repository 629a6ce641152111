//! `toolgate audit`'s report for people: a finding that repeats across a
//! server's tools is one entry, with the count and the tools' names
//! (server-filesystem's 13 "undeclared properties" were 13 entries that
//! hid its 5 others). JSON and SARIF keep one result per tool.

use toolgate_review::{Finding, RULES};

use crate::outln;
use crate::review::print_finding;
use crate::term::one_line;

/// How many tool names a grouped entry lists before "and N more".
const NAMED: usize = 12;

/// Findings in report order, the repeated ones grouped: each group is the
/// findings of one rule on one server, in the order their first appeared.
pub(crate) fn grouped(findings: &[Finding]) -> Vec<Vec<&Finding>> {
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    for f in findings {
        match groups
            .iter_mut()
            .find(|g| g[0].rule == f.rule && g[0].server == f.server)
        {
            Some(group) => group.push(f),
            None => groups.push(vec![f]),
        }
    }
    groups
}

/// Print `findings`, a repeated one once with its tools.
pub(crate) fn print(findings: &[Finding]) {
    for group in grouped(findings) {
        let [first, ..] = group[..] else { continue };
        if group.len() == 1 {
            print_finding(first, "fix:     ");
            continue;
        }
        let severity = group
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(first.severity);
        let summary = RULES
            .iter()
            .find(|r| r.id == first.rule)
            .map_or(first.message.as_str(), |r| r.summary);
        outln!(
            "[{}] {} {}: {} ({} tools)",
            severity.to_string().to_uppercase(),
            first.rule,
            one_line(&first.server),
            summary,
            group.len()
        );
        let mut names: Vec<String> = group
            .iter()
            .take(NAMED)
            .map(|f| one_line(&f.tool))
            .collect();
        if group.len() > NAMED {
            names.push(format!("and {} more", group.len() - NAMED));
        }
        outln!("    tools:    {}", names.join(", "));
        outln!(
            "    e.g.:     {}: {}",
            one_line(&first.tool),
            one_line(&first.message)
        );
        outln!("    evidence: {}", one_line(&first.evidence));
        outln!("    fix:      {}", one_line(&first.fix));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_review::Severity;

    fn finding(rule: &'static str, server: &str, tool: &str) -> Finding {
        Finding {
            rule,
            severity: Severity::Low,
            server: server.into(),
            tool: tool.into(),
            message: format!("{tool} is loose"),
            evidence: String::new(),
            fix: String::new(),
        }
    }

    #[test]
    fn a_rule_repeated_across_a_server_s_tools_is_one_entry() {
        let findings = [
            finding("TG-S005", "fs", "read_file"),
            finding("TG-E003", "fs", "write_file"),
            finding("TG-S005", "fs", "write_file"),
            finding("TG-S005", "other", "read_file"),
            finding("TG-S005", "fs", "move_file"),
        ];
        let groups = grouped(&findings);
        let shape: Vec<(&str, &str, usize)> = groups
            .iter()
            .map(|g| (g[0].rule, g[0].server.as_str(), g.len()))
            .collect();
        assert_eq!(
            shape,
            [
                ("TG-S005", "fs", 3),
                ("TG-E003", "fs", 1),
                ("TG-S005", "other", 1)
            ]
        );
    }
}
