//! Reviewing MCP tool definitions before trusting them, and noticing when
//! they change.
//!
//! [`audit`] runs every rule in [`RULES`] over the tools of one or more
//! servers and returns [`Finding`]s: a severity, the tool, a stable rule id,
//! the evidence (the exact text or schema location), and how to fix it. The
//! analysis is local, deterministic and needs neither a network nor a model.
//!
//! [`lock`] records the definitions a person approved; [`lock::compare`]
//! reports what was added, removed or changed since.
//!
//! ```
//! use toolgate_review::{audit, ServerTools};
//! let tool = serde_json::from_value(serde_json::json!({
//!     "name": "search",
//!     "inputSchema": {"type": "object"}
//! })).unwrap();
//! let findings = audit(&[ServerTools { server: "demo".into(), tools: vec![tool] }]);
//! assert!(findings.iter().any(|f| f.rule == "TG-N003")); // generic name
//! assert!(findings.iter().any(|f| f.rule == "TG-D001")); // no description
//! ```
#![forbid(unsafe_code)]

mod finding;
pub mod flows;
pub mod lock;
mod rules;
pub mod sarif;
mod text;

use std::collections::BTreeMap;

use toolgate_protocol::types::Tool;

pub use finding::{Finding, Severity};
pub use rules::effects::{Effect, Effects, Evidence, Source, classify as classify_effects};
pub use rules::{RULES, Rule};

use rules::Subject;

/// The tools of one server.
#[derive(Clone, Debug)]
pub struct ServerTools {
    /// A label for the server.
    pub server: String,
    /// Its tools, as listed.
    pub tools: Vec<Tool>,
}

/// Run every rule over `servers`. Findings are sorted by severity (highest
/// first), then server, tool and rule, so output is deterministic.
pub fn audit(servers: &[ServerTools]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut owners: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for server in servers {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for tool in &server.tools {
            let subject = Subject {
                server: &server.server,
                tool,
            };
            rules::names::check(&subject, &mut findings);
            rules::descriptions::check(&subject, &mut findings);
            let effects = Effects::of(tool);
            rules::effects::check(&subject, &effects, &mut findings);
            rules::effects::free_text::check(&subject, &effects, &mut findings);
            rules::schema::check(&subject, &mut findings);
            rules::output::check(&subject, &effects, &mut findings);
            rules::secrets::check(&subject, &mut findings);
            rules::reach::check(&subject, &effects, &mut findings);
            *seen.entry(&tool.name).or_default() += 1;
            let list = owners.entry(&tool.name).or_default();
            if !list.contains(&server.server.as_str()) {
                list.push(&server.server);
            }
        }
        for (name, count) in seen.into_iter().filter(|(_, c)| *c > 1) {
            let tool = server
                .tools
                .iter()
                .find(|t| t.name == name)
                .map_or_else(String::new, |t| t.name.clone());
            let subject_tool = server.tools.iter().find(|t| t.name == name);
            if let Some(t) = subject_tool {
                let subject = Subject {
                    server: &server.server,
                    tool: t,
                };
                findings.push(subject.finding(
                    "TG-N002",
                    format!("{count} tools are named {tool:?}"),
                    format!("name: {tool:?} (x{count})"),
                    "give every tool of a server a unique name",
                ));
            }
        }
    }
    for (name, servers_with_it) in owners.into_iter().filter(|(_, s)| s.len() > 1) {
        for server in servers
            .iter()
            .filter(|s| servers_with_it.contains(&s.server.as_str()))
        {
            if let Some(tool) = server.tools.iter().find(|t| t.name == name) {
                let subject = Subject {
                    server: &server.server,
                    tool,
                };
                findings.push(subject.finding(
                    "TG-N004",
                    format!("{name:?} is also offered by {}", servers_with_it.iter().filter(|s| **s != server.server).cloned().collect::<Vec<_>>().join(", ")),
                    format!("name: {name:?}"),
                    "qualify tool names per server in the client (toolgate's MultiClient does: prefix.tool)",
                ));
            }
        }
    }
    findings.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then_with(|| {
            (&a.server, &a.tool, a.rule, &a.message).cmp(&(&b.server, &b.tool, b.rule, &b.message))
        })
    });
    findings
}

/// The tools that can write, delete, send, spend or execute, with those effects.
pub fn capabilities(servers: &[ServerTools]) -> Vec<(String, String, Vec<Effect>)> {
    let mut out = Vec::new();
    for server in servers {
        for tool in &server.tools {
            let effects = Effects::of(tool).risky();
            if !effects.is_empty() {
                out.push((server.server.clone(), tool.name.clone(), effects));
            }
        }
    }
    out
}

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
