//! Why the gateway withholds a tool: what the model is told when it calls
//! one anyway, and what the audit row records (`decision`, `rule`,
//! `status`), in one place.
//!
//! Layer: `gateway`.

use toolgate_server::Withheld;

/// One reason a tool is not offered.
pub(super) enum Refusal<'a> {
    /// The policy denies it to every caller.
    Denied {
        name: &'a str,
        reason: &'a str,
        rule: String,
    },
    /// A lock file is enforced and does not have its server.
    ServerNotLocked { name: &'a str, server: &'a str },
    /// The server is locked, and this tool came after.
    Added { name: &'a str, server: &'a str },
    /// Its definition changed since it was locked. The new definition is
    /// untrusted text the lock keeps from the model: the caller is told only
    /// that it changed; the change itself goes to the operator.
    Changed { name: &'a str },
    /// An endpoint's shape of it cannot apply to the upstream's
    /// definition (`key`: the shape's table). The operator's to fix.
    Shape {
        name: &'a str,
        key: String,
        error: String,
    },
    /// The gateway tool `tool` would be called `shown` on the endpoint,
    /// which is the name of `other` there, which keeps it.
    Collides {
        tool: &'a str,
        shown: &'a str,
        other: &'a str,
    },
    /// The gateway's own server refused the definition.
    Invalid {
        name: &'a str,
        server: &'a str,
        error: String,
    },
}

impl Refusal<'_> {
    /// The answer to a call of the withheld tool, with its audit notes.
    pub(super) fn withheld(self) -> Withheld {
        match self {
            Refusal::Denied { name, reason, rule } => Withheld::new(format!(
                "The tool {name} is not offered: the gateway's policy denies it ({reason}). Ask the gateway's operator if it should be allowed."
            ))
            .note("decision", "deny")
            .note("rule", rule)
            .note("status", "denied"),
            Refusal::ServerNotLocked { name, server } => withheld(
                "lock file: server not locked",
                format!(
                    "The tool {name} is withheld: its server {server} is not in the lock file. Review it, then approve it with `toolgate lock --config FILE --all`."
                ),
            ),
            Refusal::Added { name, server } => withheld(
                "lock file: tool added",
                format!(
                    "The tool {name} is withheld: it was added to {server} after the lock file was written. Review it, then approve it with `toolgate lock --update --config FILE --all`."
                ),
            ),
            Refusal::Changed { name } => withheld(
                "lock file: definition changed",
                format!(
                    "The tool {name} is disabled: its definition changed since the gateway's operator approved it, and it stays disabled until they review the change (`toolgate verify`) and approve it again (`toolgate lock --update --config FILE --all`)."
                ),
            ),
            Refusal::Shape { name, key, error } => withheld(
                "endpoint shape",
                format!(
                    "The tool {name} is not offered here: its shape ({key}) does not fit the upstream's definition: {error}. Ask the gateway's operator to fix the shape."
                ),
            ),
            Refusal::Collides { tool, shown, other } => withheld(
                "endpoint name taken",
                format!(
                    "The tool {tool} is not offered here: its name on this endpoint, {shown}, is {other}'s. Ask the gateway's operator to rename one of them."
                ),
            ),
            Refusal::Invalid {
                name,
                server,
                error,
            } => withheld(
                "invalid definition",
                format!(
                    "The tool {name} is not offered: its definition is invalid ({error}). This is a fault in the upstream server {server}."
                ),
            ),
        }
    }
}

fn withheld(rule: &str, text: String) -> Withheld {
    Withheld::new(text)
        .note("rule", rule)
        .note("status", "withheld")
}
