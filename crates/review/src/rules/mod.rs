//! The rules, one module per family. Each rule has a stable id; [`RULES`]
//! documents them all.

pub(crate) mod descriptions;
pub(crate) mod effects;
pub(crate) mod names;
pub(crate) mod output;
pub(crate) mod reach;
pub(crate) mod schema;
pub(crate) mod secrets;

use toolgate_protocol::types::Tool;

use crate::{Finding, Severity};

/// A rule's documentation.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// Stable id.
    pub id: &'static str,
    /// Default severity.
    pub severity: Severity,
    /// One-line summary.
    pub summary: &'static str,
    /// Why it matters.
    pub rationale: &'static str,
}

/// Every rule.
pub const RULES: &[Rule] = &[
    Rule {
        id: "TG-N001",
        severity: Severity::Medium,
        summary: "Tool name breaks the naming rules",
        rationale: "Names should be 1-128 characters of [A-Za-z0-9_.-]; others are rejected by clients and model providers.",
    },
    Rule {
        id: "TG-N002",
        severity: Severity::High,
        summary: "Two tools of one server share a name",
        rationale: "Names must be unique within a server; a client cannot tell which one it calls.",
    },
    Rule {
        id: "TG-N003",
        severity: Severity::Low,
        summary: "Generic name likely to collide across servers",
        rationale: "Names like `search` collide when several servers are combined; namespace them (e.g. `github.search_issues`).",
    },
    Rule {
        id: "TG-N004",
        severity: Severity::High,
        summary: "The same tool name on two audited servers",
        rationale: "One server's tool can shadow another's in a client that does not qualify names.",
    },
    Rule {
        id: "TG-D001",
        severity: Severity::Medium,
        summary: "Missing description",
        rationale: "The description is the model's main clue for choosing a tool.",
    },
    Rule {
        id: "TG-D002",
        severity: Severity::Low,
        summary: "Description too thin to choose by",
        rationale: "A few words cannot say what the tool does, when to use it and when not to.",
    },
    Rule {
        id: "TG-D003",
        severity: Severity::High,
        summary: "Description addresses the model instead of describing the tool",
        rationale: "Instructions to hide things from the user, read secrets, or steer other tools are tool poisoning.",
    },
    Rule {
        id: "TG-D004",
        severity: Severity::High,
        summary: "Invisible or deceptive characters",
        rationale: "Tag characters, zero-width and bidi controls, and terminal escapes hide text from a reviewer that the model still reads.",
    },
    Rule {
        id: "TG-D005",
        severity: Severity::Medium,
        summary: "Embedded URL or encoded blob",
        rationale: "Links and long encoded runs in a description can smuggle instructions or exfiltration targets.",
    },
    Rule {
        id: "TG-D006",
        severity: Severity::Low,
        summary: "Very long description",
        rationale: "Long descriptions cost context on every turn and hide instructions.",
    },
    Rule {
        id: "TG-E001",
        severity: Severity::High,
        summary: "Annotations contradict the evidence, and nothing explains why",
        rationale: "A tool whose name, description or parameters say it writes, deletes, sends, spends or executes, but which claims readOnlyHint: true, destructiveHint: false or openWorldHint: false, may be spoofing its annotations.",
    },
    Rule {
        id: "TG-E002",
        severity: Severity::Medium,
        summary: "No annotations: defaults to destructive and open-world",
        rationale: "Without hints, a client must treat every call as dangerous and ask a person.",
    },
    Rule {
        id: "TG-E003",
        severity: Severity::Info,
        summary: "The tool can write, delete, send, spend or execute",
        rationale: "These tools need a person to approve each call; the finding names the evidence for each effect.",
    },
    Rule {
        id: "TG-E004",
        severity: Severity::Medium,
        summary: "Annotations contradict the evidence, and the description explains why",
        rationale: "A query tool that says it runs in a read-only transaction may be honest; the claim is the server's to prove, so verify it before relying on it.",
    },
    Rule {
        id: "TG-S001",
        severity: Severity::High,
        summary: "Input schema invalid for its dialect",
        rationale: "Clients cannot validate arguments against it.",
    },
    Rule {
        id: "TG-S002",
        severity: Severity::High,
        summary: "Input schema references an external $ref",
        rationale: "Fetching it would be server-side request forgery; not fetching it leaves the schema permissive.",
    },
    Rule {
        id: "TG-S003",
        severity: Severity::High,
        summary: "Input schema exceeds the validator's bounds",
        rationale: "Deep or exploding schemas are a denial-of-service vector against validators.",
    },
    Rule {
        id: "TG-S004",
        severity: Severity::Low,
        summary: "Free text where a fixed choice would do",
        rationale: "A string `mode`/`action`/`type` without enum, pattern or length gives the model room to go wrong.",
    },
    Rule {
        id: "TG-S005",
        severity: Severity::Low,
        summary: "Object accepts undeclared properties",
        rationale: "Without additionalProperties: false, misspelled arguments are silently ignored.",
    },
    Rule {
        id: "TG-S006",
        severity: Severity::Info,
        summary: "No-argument tool without the recommended empty-object schema",
        rationale: "{\"type\": \"object\", \"additionalProperties\": false} states that only {} is accepted.",
    },
    Rule {
        id: "TG-S007",
        severity: Severity::High,
        summary: "x-mcp-header breaks the rules",
        rationale: "Clients must exclude such a tool.",
    },
    Rule {
        id: "TG-S008",
        severity: Severity::High,
        summary: "x-mcp-header on a parameter that looks sensitive",
        rationale: "Header values are visible to every network intermediary.",
    },
    Rule {
        id: "TG-S009",
        severity: Severity::Medium,
        summary: "Free text for what a tool runs or where it sends",
        rationale: "A tool that executes or sends and takes any string for the command or the destination runs anything and reaches anyone; an enum or a pattern narrows it.",
    },
    Rule {
        id: "TG-S010",
        severity: Severity::Medium,
        summary: "Free text for what a tool fetches",
        rationale: "A tool that takes any URL reaches whatever the model names: cloud metadata, the private network, or an attacker's host with the conversation in the query; an enum or a pattern that names the domain pins it.",
    },
    Rule {
        id: "TG-O001",
        severity: Severity::Low,
        summary: "Data-returning tool without an outputSchema",
        rationale: "Without it, clients cannot check results.",
    },
    Rule {
        id: "TG-O002",
        severity: Severity::Medium,
        summary: "Creation tool does not state its handle's lifetime",
        rationale: "Stateful handles should say how long they live so the model can plan.",
    },
    Rule {
        id: "TG-O003",
        severity: Severity::Medium,
        summary: "A tool that spends does not say what a call costs",
        rationale: "A description that states the cost and its terms (per call, on success only, nothing on a miss) lets the model plan the cheaper path; without it, it cannot weigh one call against another.",
    },
    Rule {
        id: "TG-O004",
        severity: Severity::High,
        summary: "The tool returns secrets",
        rationale: "A tool that returns the environment, credentials, keys or passwords puts them in the model's context, where a poisoned tool or an injected instruction can send them anywhere.",
    },
];

/// One tool under review.
pub(crate) struct Subject<'a> {
    pub(crate) server: &'a str,
    pub(crate) tool: &'a Tool,
}

impl Subject<'_> {
    /// The input schema's top-level `properties`, when it has them.
    pub(crate) fn properties(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.tool
            .input_schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
    }

    pub(crate) fn finding(
        &self,
        rule: &'static str,
        message: impl Into<String>,
        evidence: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        let severity = RULES
            .iter()
            .find(|r| r.id == rule)
            .map_or(Severity::Medium, |r| r.severity);
        Finding {
            rule,
            severity,
            server: self.server.to_owned(),
            tool: self.tool.name.clone(),
            message: message.into(),
            evidence: evidence.into(),
            fix: fix.into(),
        }
    }
}
