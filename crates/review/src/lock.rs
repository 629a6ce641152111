//! Lock files: the tool definitions a person approved, to compare with what
//! servers offer later.
//!
//! The file is pretty-printed JSON with sorted keys, so it diffs well in
//! review. Version 2 (written since 2026-12) keeps, per tool, the whole
//! definition as the server sent it — every field, including ones this
//! revision does not define, `_meta` and icons — and a SHA-256 digest of
//! its RFC 8785 (JCS) canonical form, which any implementation can
//! reproduce. Version 1 files (digest plus title, description, annotations
//! and schemas) are still read: their digests were taken over the same
//! sorted, compact JSON, so unchanged tools still match, and a change is
//! shown on the fields they kept. See `docs/lock-file.md`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolgate_protocol::types::Tool;

/// The version `toolgate lock` writes.
pub const VERSION: u32 = 2;

/// The lock file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockFile {
    /// Format version.
    pub version: u32,
    /// Servers by label.
    pub servers: BTreeMap<String, LockedServer>,
}

impl Default for LockFile {
    fn default() -> Self {
        Self {
            version: VERSION,
            servers: BTreeMap::new(),
        }
    }
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
    /// `sha256:` digest of the JCS (RFC 8785) form of the whole definition.
    pub digest: String,
    /// The whole definition, as the server sent it (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<Value>,
    /// Version 1 only: the title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Version 1 only: the description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Version 1 only: the annotations, canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Version 1 only: the input schema, canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Version 1 only: the output schema, canonical.
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

/// The `sha256:` digest of `definition`'s JCS (RFC 8785) form.
pub fn digest(definition: &Value) -> String {
    // JCS cannot fail on a `Value` (it has no NaN or infinity); sorted
    // compact JSON is the same text for everything else.
    let bytes = serde_jcs::to_vec(definition)
        .unwrap_or_else(|_| serde_json::to_vec(&canonical(definition)).unwrap_or_default());
    let digest = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// The lock entry of a definition as the server sent it.
pub fn lock_definition(definition: &Value) -> LockedTool {
    LockedTool {
        digest: digest(definition),
        definition: Some(canonical(definition)),
        title: None,
        description: None,
        annotations: None,
        input_schema: None,
        output_schema: None,
    }
}

/// The lock entry of `tool` (which keeps the fields this revision does
/// not define, so nothing the server sent is left out).
pub fn lock_tool(tool: &Tool) -> LockedTool {
    lock_definition(&serde_json::to_value(tool).unwrap_or(Value::Null))
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

/// Why a lock file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// It is not JSON of a lock file's shape.
    #[error("not a toolgate lock file")]
    Malformed(#[source] serde_json::Error),
    /// It is of a version this toolgate does not read.
    #[error("lock file version {found} is not supported (this toolgate reads 1 to {VERSION})")]
    Version {
        /// The file's version.
        found: u32,
    },
}

impl LockFile {
    /// Parse a lock file.
    ///
    /// ```
    /// use toolgate_review::lock::{LockError, LockFile};
    /// let refused = LockFile::parse("{").unwrap_err();
    /// assert!(matches!(refused, LockError::Malformed(_)));
    /// // The cause stays reachable for a caller that shows it.
    /// assert!(std::error::Error::source(&refused).is_some());
    /// ```
    pub fn parse(text: &str) -> Result<Self, LockError> {
        let lock: LockFile = serde_json::from_str(text).map_err(LockError::Malformed)?;
        if !(1..=VERSION).contains(&lock.version) {
            return Err(LockError::Version {
                found: lock.version,
            });
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

/// One field that differs between two definitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldChange {
    /// Where, as a JSON Pointer into the definition (`/inputSchema/properties/path`).
    pub pointer: String,
    /// The approved value (`None`: the field was absent).
    pub old: Option<Value>,
    /// The value now (`None`: the field is gone).
    pub new: Option<Value>,
}

impl FieldChange {
    /// The change as an RFC 6902 JSON Patch operation (old to new).
    pub fn patch(&self) -> Value {
        match (&self.old, &self.new) {
            (None, Some(v)) => serde_json::json!({"op": "add", "path": self.pointer, "value": v}),
            (Some(_), None) => serde_json::json!({"op": "remove", "path": self.pointer}),
            (_, v) => serde_json::json!({"op": "replace", "path": self.pointer, "value": v}),
        }
    }

    /// The change for a person: short values on one line, others
    /// pretty-printed, old (`-`) above new (`+`).
    pub fn render(&self) -> String {
        if self.old.is_none() && self.new.is_none() {
            return self.pointer.clone();
        }
        let short = |v: &Option<Value>| match v {
            None => Some("(none)".to_owned()),
            Some(v @ (Value::Object(_) | Value::Array(_))) => {
                let text = v.to_string();
                (text.len() <= 60).then_some(text)
            }
            Some(Value::String(s)) if s.len() > 60 || s.contains('\n') => None,
            Some(v) => Some(v.to_string()),
        };
        if let (Some(old), Some(new)) = (short(&self.old), short(&self.new)) {
            return format!("{}: {old} -> {new}", self.pointer);
        }
        let long = |v: &Option<Value>, sign: char| match v {
            None => format!("  {sign} (none)"),
            Some(v) => serde_json::to_string_pretty(v)
                .unwrap_or_default()
                .lines()
                .map(|l| format!("  {sign} {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        format!(
            "{}:\n{}\n{}",
            self.pointer,
            long(&self.old, '-'),
            long(&self.new, '+')
        )
    }
}

/// The fields that differ between `old` and `new`, deepest first within
/// objects (an array that changed is one change).
pub fn differences(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk(String::new(), Some(old), Some(new), &mut out);
    out
}

fn walk(pointer: String, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let escaped = k.replace('~', "~0").replace('/', "~1");
                walk(format!("{pointer}/{escaped}"), a.get(k), b.get(k), out);
            }
        }
        (a, b) if a != b => out.push(FieldChange {
            pointer,
            old: a.cloned(),
            new: b.cloned(),
        }),
        _ => {}
    }
}

/// A difference between the lock and the live list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A tool not in the lock: nobody reviewed it.
    Added(String),
    /// A locked tool the server no longer offers.
    Removed(String),
    /// A locked tool whose definition changed, field by field.
    Changed(String, Vec<FieldChange>),
}

impl Change {
    /// What changed, one rendered field change per entry.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Change::Changed(_, fields) => fields.iter().map(FieldChange::render).collect(),
            _ => Vec::new(),
        }
    }
}

/// The fields a version-1 entry kept, as a definition to compare.
fn version_1_view(locked: &LockedTool) -> Value {
    let mut view = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            view.insert(k.to_owned(), v);
        }
    };
    put("title", locked.title.clone().map(Value::String));
    put("description", locked.description.clone().map(Value::String));
    put("annotations", locked.annotations.clone());
    put("inputSchema", locked.input_schema.clone());
    put("outputSchema", locked.output_schema.clone());
    Value::Object(view)
}

/// The same fields of a live definition.
fn version_1_fields(definition: &Value) -> Value {
    let mut view = Map::new();
    for k in [
        "title",
        "description",
        "annotations",
        "inputSchema",
        "outputSchema",
    ] {
        if let Some(v) = definition.get(k) {
            view.insert(k.to_owned(), v.clone());
        }
    }
    Value::Object(view)
}

/// Compare a locked server with its live tools.
pub fn compare(locked: &LockedServer, live: &[Tool]) -> Vec<Change> {
    let definitions: Vec<Value> = live
        .iter()
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .collect();
    compare_definitions(locked, &definitions)
}

/// Compare a locked server with its live definitions, as the server sent
/// them.
pub fn compare_definitions(locked: &LockedServer, live: &[Value]) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for definition in live {
        let name = definition
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        seen.insert(name.clone());
        let Some(then) = locked.tools.get(&name) else {
            changes.push(Change::Added(name));
            continue;
        };
        if then.digest == digest(definition) {
            continue;
        }
        let now = canonical(definition);
        let mut fields = match &then.definition {
            Some(approved) => differences(approved, &now),
            None => differences(&version_1_view(then), &version_1_fields(&now)),
        };
        if fields.is_empty() {
            // A version-1 entry kept only some fields.
            fields.push(FieldChange {
                pointer: "(fields a version-1 lock does not keep: icons, _meta or others; `toolgate lock --update` records whole definitions)".into(),
                old: None,
                new: None,
            });
        }
        changes.push(Change::Changed(name, fields));
    }
    for name in locked.tools.keys() {
        if !seen.contains(name) {
            changes.push(Change::Removed(name.clone()));
        }
    }
    changes
}
