//! Flow classes: what a tool's results and calls can do to a conversation,
//! read from the same evidence as its effects. A tool that returns content
//! from outside the user's control (`untrusted`) can instruct the model; one
//! that reads the user's own data (`private`) puts it in reach; one that
//! sends where others can read (`sink`) can carry it out; one that destroys
//! (`destructive`) can be turned against the user. A conversation holding
//! untrusted content, private data and a sink is the shape of most real
//! prompt-injection incidents; [`combinations`] finds it ahead of time, and
//! the gateway holds it at run time.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_protocol::types::Tool;

use crate::rules::effects::{Effect, Effects, first_sentence};
use crate::text::words;
use crate::{Finding, Severity};

/// A class of tool, for flow control.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum FlowClass {
    /// Returns content from outside the user's control: web pages, search
    /// results, mail, issues, comments.
    Untrusted,
    /// Reads the user's own data: files, databases, mailboxes, secrets.
    Private,
    /// Sends data where others can read it: messages, mail, HTTP posts,
    /// public comments, code that runs.
    Sink,
    /// Destroys, spends or runs what cannot be undone.
    Destructive,
}

impl FlowClass {
    /// Every class, in order.
    pub const ALL: [FlowClass; 4] = [
        FlowClass::Untrusted,
        FlowClass::Private,
        FlowClass::Sink,
        FlowClass::Destructive,
    ];

    /// Its lower-case name, as in configuration files.
    pub fn label(self) -> &'static str {
        match self {
            FlowClass::Untrusted => "untrusted",
            FlowClass::Private => "private",
            FlowClass::Sink => "sink",
            FlowClass::Destructive => "destructive",
        }
    }

    /// The class named `label`.
    pub fn parse(label: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.label() == label)
    }
}

impl fmt::Display for FlowClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Why a tool has a class.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassEvidence {
    /// The class.
    pub class: FlowClass,
    /// What shows it (`name word "fetch"`, `effect send: …`,
    /// `parameter /url`, `annotations.openWorldHint`).
    pub why: String,
}

/// A tool's flow classes with the evidence for each.
///
/// ```
/// use toolgate_review::flows::{FlowClass, FlowClasses};
/// let tool = serde_json::from_value(serde_json::json!({
///     "name": "fetch_page",
///     "description": "Fetches a web page and returns its text.",
///     "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}}
/// })).unwrap();
/// assert_eq!(FlowClasses::of(&tool, false).list(), vec![FlowClass::Untrusted]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowClasses {
    /// Every piece of evidence, sorted by class.
    pub evidence: Vec<ClassEvidence>,
}

/// Words of content that comes from others: reading it lets them speak to
/// the model.
const UNTRUSTED_WORDS: &[&str] = &[
    "web", "url", "urls", "http", "https", "page", "pages", "webpage", "website", "site", "html",
    "browser", "browse", "scrape", "crawl", "fetch", "download", "internet", "online", "rss",
    "feed", "feeds", "news", "email", "emails", "mail", "mails", "inbox", "message", "messages",
    "issue", "issues", "comment", "comments", "ticket", "tickets", "tweet", "tweets", "post",
    "posts", "review", "reviews", "chat", "channel", "slack", "discord", "forum", "wiki",
    "article", "articles", "search",
];

/// Words of the user's own data.
const PRIVATE_WORDS: &[&str] = &[
    "file",
    "files",
    "directory",
    "directories",
    "folder",
    "folders",
    "path",
    "document",
    "documents",
    "doc",
    "docs",
    "drive",
    "database",
    "databases",
    "db",
    "sql",
    "table",
    "tables",
    "record",
    "records",
    "row",
    "rows",
    "mailbox",
    "inbox",
    "email",
    "emails",
    "mail",
    "message",
    "messages",
    "contact",
    "contacts",
    "calendar",
    "event",
    "events",
    "appointment",
    "note",
    "notes",
    "secret",
    "secrets",
    "password",
    "passwords",
    "credential",
    "credentials",
    "token",
    "tokens",
    "env",
    "environment",
    "memory",
    "memories",
    "history",
    "account",
    "accounts",
    "profile",
    "customer",
    "customers",
    "invoice",
    "invoices",
    "repository",
    "repo",
    "clipboard",
];

/// What a write makes public: writing one of these is sending.
const PUBLIC_WORDS: &[&str] = &[
    "comment", "comments", "issue", "post", "tweet", "gist", "review", "reply", "webhook", "pr",
    "pull", "publish", "upload", "push", "commit",
];

/// Parameters that name a place on the network.
const NETWORK_PARAMS: &[&str] = &["url", "uri", "urls", "endpoint", "webhook", "webhook_url"];

impl FlowClasses {
    /// Read the classes of `tool`. With `trusted` (the upstream is
    /// `trusted = true`), its annotations are facts and rule classes out:
    /// `openWorldHint: false` untrusted and sink, `readOnlyHint: true`
    /// sink and destructive, `destructiveHint: false` destructive.
    pub fn of(tool: &Tool, trusted: bool) -> Self {
        let effects = Effects::of(tool);
        let params: Vec<String> = tool
            .input_schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .map(|p| p.keys().map(|k| words(k).join("_")).collect())
            .unwrap_or_default();
        let sentence = tool
            .description
            .as_deref()
            .map(first_sentence)
            .unwrap_or("");
        let name_words = words(&tool.name);
        let sentence_words = words(sentence);
        let found = |list: &[&str]| -> Option<String> {
            name_words
                .iter()
                .find(|w| list.contains(&w.as_str()))
                .map(|w| format!("name word {w:?}"))
                .or_else(|| {
                    sentence_words
                        .iter()
                        .find(|w| list.contains(&w.as_str()))
                        .map(|w| format!("description word {w:?}"))
                })
        };
        let network = params
            .iter()
            .find(|p| NETWORK_PARAMS.contains(&p.as_str()))
            .map(|p| format!("parameter /{p}"));
        let mut out = Vec::new();
        let mut add = |class, why: String| out.push(ClassEvidence { class, why });
        let effect = |e: Effect| effects.has(e).then(|| effects.explain(&[e]));

        // What it does to the world.
        if let Some(why) = effect(Effect::Send) {
            add(FlowClass::Sink, format!("effect {why}"));
        }
        if let Some(why) = effect(Effect::Execute) {
            add(
                FlowClass::Sink,
                format!("effect {why} (code can reach the network)"),
            );
            add(FlowClass::Destructive, format!("effect {why}"));
        }
        if effects.has(Effect::Write) {
            if let Some(why) = found(PUBLIC_WORDS) {
                add(FlowClass::Sink, format!("writes where others read: {why}"));
            } else if let Some(why) = &network {
                add(FlowClass::Sink, format!("writes to the network: {why}"));
            }
        }
        for e in [Effect::Delete, Effect::Spend] {
            if let Some(why) = effect(e) {
                add(FlowClass::Destructive, format!("effect {why}"));
            }
        }
        let hints = tool.annotations.clone().unwrap_or_default();
        if hints.destructive_hint == Some(true) && hints.read_only_hint != Some(true) {
            add(
                FlowClass::Destructive,
                "annotations.destructiveHint: true".to_owned(),
            );
        }

        // What it brings into the conversation: only a tool that reads
        // (a sender's result is its own receipt).
        let reads = effects.has(Effect::Read) || effects.risky().is_empty();
        let acts = [Effect::Send, Effect::Delete, Effect::Spend, Effect::Write]
            .iter()
            .any(|e| effects.has(*e));
        if reads && !acts {
            if let Some(why) = found(UNTRUSTED_WORDS) {
                add(FlowClass::Untrusted, why);
            } else if let Some(why) = &network {
                add(
                    FlowClass::Untrusted,
                    format!("reads from the network: {why}"),
                );
            } else if hints.open_world_hint == Some(true) {
                add(
                    FlowClass::Untrusted,
                    "annotations.openWorldHint: true".to_owned(),
                );
            }
            if let Some(why) = found(PRIVATE_WORDS).or_else(|| {
                params
                    .iter()
                    .find(|p| matches!(p.as_str(), "path" | "file" | "filename" | "sql"))
                    .map(|p| format!("parameter /{p}"))
            }) {
                add(FlowClass::Private, why);
            }
        }

        if trusted {
            let mut ruled_out = Vec::new();
            if hints.open_world_hint == Some(false) {
                ruled_out.extend([FlowClass::Untrusted, FlowClass::Sink]);
            }
            if hints.read_only_hint == Some(true) {
                ruled_out.extend([FlowClass::Sink, FlowClass::Destructive]);
            }
            if hints.destructive_hint == Some(false) {
                ruled_out.push(FlowClass::Destructive);
            }
            out.retain(|e| !ruled_out.contains(&e.class));
        }
        out.sort();
        out.dedup();
        FlowClasses { evidence: out }
    }

    /// Classes given by configuration, with where they were given.
    pub fn configured(classes: &[FlowClass], why: &str) -> Self {
        let mut evidence: Vec<ClassEvidence> = classes
            .iter()
            .map(|c| ClassEvidence {
                class: *c,
                why: why.to_owned(),
            })
            .collect();
        evidence.sort();
        evidence.dedup();
        FlowClasses { evidence }
    }

    /// The classes found, each once, in order.
    pub fn list(&self) -> Vec<FlowClass> {
        let mut out: Vec<FlowClass> = self.evidence.iter().map(|e| e.class).collect();
        out.dedup();
        out
    }

    /// Whether it has `class`.
    pub fn has(&self, class: FlowClass) -> bool {
        self.evidence.iter().any(|e| e.class == class)
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.evidence.is_empty()
    }

    /// `untrusted: name word "fetch"; sink: effect send: …`.
    pub fn explain(&self) -> String {
        self.list()
            .into_iter()
            .map(|class| {
                let why: Vec<&str> = self
                    .evidence
                    .iter()
                    .filter(|e| e.class == class)
                    .map(|e| e.why.as_str())
                    .collect();
                format!("{class}: {}", why.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One tool of a configuration, with its classes.
#[derive(Clone, Debug)]
pub struct ClassedTool {
    /// Its server's label.
    pub server: String,
    /// Its name (as callers call it).
    pub tool: String,
    /// Its classes.
    pub classes: FlowClasses,
}

/// The combinations across `tools` that can leak or destroy, one finding
/// per tool that ends them:
/// - `TG-F001` (high): a sink reachable after untrusted content and private
///   data have entered the conversation — the data can be sent out on the
///   untrusted content's instruction;
/// - `TG-F002` (medium): a destructive tool reachable after untrusted
///   content.
///
/// `held` says, for each, what will hold it at run time (the rule).
pub fn combinations(tools: &[ClassedTool], held: impl Fn(FlowClass) -> String) -> Vec<Finding> {
    let with = |class: FlowClass| -> Vec<&ClassedTool> {
        tools.iter().filter(|t| t.classes.has(class)).collect()
    };
    let (untrusted, private) = (with(FlowClass::Untrusted), with(FlowClass::Private));
    let named = |ts: &[&ClassedTool]| -> String {
        const SHOWN: usize = 3;
        let mut names: Vec<String> = ts.iter().take(SHOWN).map(|t| t.tool.clone()).collect();
        if ts.len() > SHOWN {
            names.push(format!("{} more", ts.len() - SHOWN));
        }
        names.join(", ")
    };
    let evidence = |ts: &[&ClassedTool], class: FlowClass| -> String {
        ts.iter()
            .map(|t| {
                let why: Vec<&str> = t
                    .classes
                    .evidence
                    .iter()
                    .filter(|e| e.class == class)
                    .map(|e| e.why.as_str())
                    .collect();
                format!("{} ({})", t.tool, why.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut out = Vec::new();
    if untrusted.is_empty() {
        return out;
    }
    for sink in with(FlowClass::Sink) {
        if private.is_empty() {
            break;
        }
        out.push(Finding {
            rule: "TG-F001",
            severity: Severity::High,
            server: sink.server.clone(),
            tool: sink.tool.clone(),
            message: format!(
                "data leak: after untrusted content (from {}) and private data (from {}) enter a conversation, {} can send the data out on the content's instruction",
                named(&untrusted),
                named(&private),
                sink.tool
            ),
            evidence: format!(
                "untrusted: {}. private: {}. sink: {}",
                evidence(&untrusted, FlowClass::Untrusted),
                evidence(&private, FlowClass::Private),
                evidence(&[sink], FlowClass::Sink)
            ),
            fix: held(FlowClass::Sink),
        });
    }
    for destructive in with(FlowClass::Destructive) {
        out.push(Finding {
            rule: "TG-F002",
            severity: Severity::Medium,
            server: destructive.server.clone(),
            tool: destructive.tool.clone(),
            message: format!(
                "destruction on instruction: after untrusted content (from {}) enters a conversation, {} can be called on its instruction",
                named(&untrusted),
                destructive.tool
            ),
            evidence: format!(
                "untrusted: {}. destructive: {}",
                evidence(&untrusted, FlowClass::Untrusted),
                evidence(&[destructive], FlowClass::Destructive)
            ),
            fix: held(FlowClass::Destructive),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, params: &[&str]) -> Tool {
        let properties: serde_json::Map<String, serde_json::Value> = params
            .iter()
            .map(|p| ((*p).to_owned(), json!({"type": "string"})))
            .collect();
        serde_json::from_value(json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": properties}
        }))
        .unwrap()
    }

    fn classes(name: &str, description: &str, params: &[&str]) -> Vec<FlowClass> {
        FlowClasses::of(&tool(name, description, params), false).list()
    }

    use FlowClass::{Destructive, Private, Sink, Untrusted};

    #[test]
    fn the_tools_of_the_trifecta_are_classed() {
        assert_eq!(
            classes(
                "fetch",
                "Fetches a URL and returns the page as text.",
                &["url"]
            ),
            [Untrusted]
        );
        assert_eq!(
            classes("web_search", "Searches the web.", &["query"]),
            [Untrusted]
        );
        assert_eq!(
            classes("read_file", "Reads a file from the workspace.", &["path"]),
            [Private]
        );
        assert_eq!(
            classes(
                "list_emails",
                "Lists the messages in the inbox.",
                &["folder"]
            ),
            [Untrusted, Private]
        );
        assert_eq!(
            classes("send_email", "Sends an email.", &["to", "subject", "body"]),
            [Sink]
        );
        assert_eq!(
            classes(
                "create_comment",
                "Adds a comment to an issue.",
                &["issue", "body"]
            ),
            [Sink]
        );
        assert_eq!(
            classes("run_code", "Runs Python code in a sandbox.", &["code"]),
            [Sink, Destructive]
        );
        assert_eq!(
            classes("delete_event", "Deletes a calendar event.", &["id"]),
            [Destructive]
        );
        // A tool with no such evidence has no class.
        assert!(classes("add", "Adds two numbers.", &["a", "b"]).is_empty());
    }

    #[test]
    fn a_trusted_upstreams_annotations_rule_classes_out() {
        let mut t = tool("fetch_wiki", "Fetches a wiki page.", &["url"]);
        t.annotations = Some(
            serde_json::from_value(json!({"readOnlyHint": true, "openWorldHint": false})).unwrap(),
        );
        assert_eq!(FlowClasses::of(&t, false).list(), [Untrusted]);
        assert!(FlowClasses::of(&t, true).is_empty());
    }

    #[test]
    fn a_leak_needs_all_three_and_names_them() {
        let classed = |name: &str, description: &str, params: &[&str]| ClassedTool {
            server: "s".into(),
            tool: name.into(),
            classes: FlowClasses::of(&tool(name, description, params), false),
        };
        let fetch = classed("fetch", "Fetches a URL.", &["url"]);
        let read = classed("read_file", "Reads a file.", &["path"]);
        let send = classed("send_email", "Sends an email.", &["to", "body"]);
        let held = |c: FlowClass| format!("held: {c}");
        assert!(combinations(&[fetch.clone(), send.clone()], held).is_empty());
        let found = combinations(&[fetch, read, send], held);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rule, "TG-F001");
        assert_eq!(found[0].tool, "send_email");
        assert!(
            found[0].message.contains("from fetch") && found[0].message.contains("from read_file")
        );
        assert!(
            found[0].evidence.contains("fetch (name word \"fetch\")"),
            "{}",
            found[0].evidence
        );
        assert_eq!(found[0].fix, "held: sink");
    }
}
