//! Lock files: the tool definitions a person approved, to compare with what
//! servers offer later.
//!
//! The file is pretty-printed JSON with sorted keys, so it diffs well in
//! review. Per tool it keeps a SHA-256 digest of the canonical definition
//! and, readably, the fields a reviewer cares about (title, description,
//! annotations, schemas), so a change can be shown, not just detected.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolgate_protocol::types::Tool;

/// The lock file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockFile {
    /// Format version.
    pub version: u32,
    /// Servers by label.
    pub servers: BTreeMap<String, LockedServer>,
}

/// One server's approved tools.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockedServer {
    /// Tools by name.
    pub tools: BTreeMap<String, LockedTool>,
}

/// One approved tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockedTool {
    /// `sha256:` digest of the canonical JSON of the whole definition.
    pub digest: String,
    /// Title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Annotations, canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Input schema, canonical.
    pub input_schema: Value,
    /// Output schema, canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// JSON with object keys sorted at every level.
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The lock entry of `tool`.
pub fn lock_tool(tool: &Tool) -> LockedTool {
    let whole = canonical(&serde_json::to_value(tool).unwrap_or(Value::Null));
    let digest = Sha256::digest(serde_json::to_vec(&whole).unwrap_or_default());
    LockedTool {
        digest: format!(
            "sha256:{}",
            digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
        title: tool.title.clone(),
        description: tool.description.clone(),
        annotations: tool
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok())
            .map(|v| canonical(&v)),
        input_schema: canonical(&Value::Object(tool.input_schema.clone())),
        output_schema: tool
            .output_schema
            .as_ref()
            .map(|s| canonical(&Value::Object(s.clone()))),
    }
}

/// The lock entry of a server's tools.
pub fn lock_server(tools: &[Tool]) -> LockedServer {
    LockedServer {
        tools: tools
            .iter()
            .map(|t| (t.name.clone(), lock_tool(t)))
            .collect(),
    }
}

impl LockFile {
    /// Parse a lock file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let lock: LockFile =
            serde_json::from_str(text).map_err(|e| format!("not a toolgate lock file: {e}"))?;
        if lock.version != 1 {
            return Err(format!(
                "lock file version {} is not supported (expected 1)",
                lock.version
            ));
        }
        Ok(lock)
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut text = serde_json::to_string_pretty(&canonical(
            &serde_json::to_value(self).unwrap_or(Value::Null),
        ))
        .unwrap_or_default();
        text.push('\n');
        text
    }
}

/// A difference between the lock and the live list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A tool not in the lock.
    Added(String),
    /// A locked tool the server no longer offers.
    Removed(String),
    /// A locked tool whose definition changed; each line says what.
    Changed(String, Vec<String>),
}

fn show(value: &Option<Value>) -> String {
    value
        .as_ref()
        .map_or_else(|| "(none)".into(), Value::to_string)
}

fn text(value: &Option<String>) -> String {
    value
        .as_ref()
        .map_or_else(|| "(none)".into(), |s| format!("{s:?}"))
}

/// Compare a locked server with its live tools.
pub fn compare(locked: &LockedServer, live: &[Tool]) -> Vec<Change> {
    let current = lock_server(live);
    let mut changes = Vec::new();
    for (name, now) in &current.tools {
        match locked.tools.get(name) {
            None => changes.push(Change::Added(name.clone())),
            Some(then) if then.digest != now.digest => {
                let mut what = Vec::new();
                if then.title != now.title {
                    what.push(format!(
                        "title: {} -> {}",
                        text(&then.title),
                        text(&now.title)
                    ));
                }
                if then.description != now.description {
                    what.push(format!(
                        "description:\n  - {}\n  + {}",
                        text(&then.description),
                        text(&now.description)
                    ));
                }
                if then.annotations != now.annotations {
                    what.push(format!(
                        "annotations: {} -> {}",
                        show(&then.annotations),
                        show(&now.annotations)
                    ));
                }
                if then.input_schema != now.input_schema {
                    what.push(format!(
                        "inputSchema:\n  - {}\n  + {}",
                        then.input_schema, now.input_schema
                    ));
                }
                if then.output_schema != now.output_schema {
                    what.push(format!(
                        "outputSchema:\n  - {}\n  + {}",
                        show(&then.output_schema),
                        show(&now.output_schema)
                    ));
                }
                if what.is_empty() {
                    what.push("other fields (icons or _meta) changed".into());
                }
                changes.push(Change::Changed(name.clone(), what));
            }
            Some(_) => {}
        }
    }
    for name in locked.tools.keys() {
        if !current.tools.contains_key(name) {
            changes.push(Change::Removed(name.clone()));
        }
    }
    changes
}
