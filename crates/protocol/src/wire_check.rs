//! Validation of messages against the specification's `schema.json`
//! (feature `wire-check`; for tests).
//!
//! The schema file is generated from the TypeScript source of truth and kept
//! in the repository at `testdata/spec/` (its README names the source commit
//! and licence), so a clone with nothing beside it can run every test. [`WireChecker`] compiles
//! one validator per definition on demand and reports every violation with
//! the JSON pointer where it occurred.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// A value that breaks a definition of the schema: which definition, every
/// violation as `pointer: message`, and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{definition}: {}\nvalue: {value}", violations.join("; "))]
pub struct Violations {
    /// The definition checked against (`#/$defs/…`).
    pub definition: String,
    /// Each violation, `pointer: message`.
    pub violations: Vec<String>,
    /// The value, as JSON text.
    pub value: String,
}

/// Validates JSON values against definitions of the 2026-07-28 schema.
pub struct WireChecker {
    document: Value,
    compiled: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

/// Where the specification data lives: `$TOOLGATE_SPEC_DIR`, or the
/// repository's own `testdata/spec`.
pub fn spec_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("TOOLGATE_SPEC_DIR") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/spec")
}

impl WireChecker {
    /// The checker for revision 2026-07-28, loaded once per process.
    ///
    /// # Panics
    /// If the schema file is missing or invalid: tests cannot run without it.
    pub fn modern() -> &'static WireChecker {
        static CHECKER: OnceLock<WireChecker> = OnceLock::new();
        CHECKER.get_or_init(|| WireChecker::load("2026-07-28"))
    }

    /// The checker for the legacy revision 2025-11-25 (its result types are
    /// the bare `*Result` definitions, checked with [`WireChecker::check`]).
    ///
    /// # Panics
    /// If the schema file is missing or invalid.
    pub fn legacy() -> &'static WireChecker {
        static CHECKER: OnceLock<WireChecker> = OnceLock::new();
        CHECKER.get_or_init(|| WireChecker::load("2025-11-25"))
    }

    fn load(version: &str) -> WireChecker {
        let path = spec_dir().join(version).join("schema.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let document = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        WireChecker {
            document,
            compiled: Mutex::new(HashMap::new()),
        }
    }

    fn validator(&self, definition: &str) -> Arc<jsonschema::Validator> {
        let mut compiled = self.compiled.lock();
        if let Some(v) = compiled.get(definition) {
            return v.clone();
        }
        let mut root = self.document.clone();
        if let Some(obj) = root.as_object_mut() {
            obj.insert("$ref".into(), Value::from(format!("#/$defs/{definition}")));
        }
        let validator =
            Arc::new(jsonschema::validator_for(&root).unwrap_or_else(|e| {
                panic!("schema definition {definition} does not compile: {e}")
            }));
        compiled.insert(definition.to_owned(), validator.clone());
        validator
    }

    /// Whether `definition` exists in the schema.
    pub fn has_definition(&self, definition: &str) -> bool {
        self.document
            .get("$defs")
            .and_then(|d| d.get(definition))
            .is_some()
    }

    /// Validate `value` against `#/$defs/{definition}`; `Err` lists every
    /// violation as `pointer: message`.
    pub fn check(&self, definition: &str, value: &Value) -> Result<(), Violations> {
        let validator = self.validator(definition);
        let violations: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{}: {}", e.instance_path(), e))
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(Violations {
                definition: definition.to_owned(),
                violations,
                value: value.to_string(),
            })
        }
    }

    /// Validate a message a server sent in answer to (or during) a request
    /// for `method`: a result response against the method's response type,
    /// an error response against `JSONRPCErrorResponse`, a notification
    /// against its own type.
    pub fn check_server_message(&self, method: &str, message: &Value) -> Result<(), Violations> {
        if let Some(notification) = message.get("method").and_then(Value::as_str) {
            let definition = notification_definition(notification).unwrap_or("JSONRPCNotification");
            return self.check(definition, message);
        }
        if message.get("error").is_some() {
            return self.check("JSONRPCErrorResponse", message);
        }
        let input_required = message
            .pointer("/result/resultType")
            .and_then(Value::as_str)
            == Some("input_required");
        match (response_definition(method), input_required) {
            (_, true) => {
                self.check("JSONRPCResultResponse", message)?;
                let result = message.get("result").cloned().unwrap_or(Value::Null);
                self.check("InputRequiredResult", &result)
            }
            (Some(definition), false) => self.check(definition, message),
            (None, false) => self.check("JSONRPCResultResponse", message),
        }
    }
}

/// The response type of a request method.
pub fn response_definition(method: &str) -> Option<&'static str> {
    Some(match method {
        "server/discover" => "DiscoverResultResponse",
        "tools/list" => "ListToolsResultResponse",
        "tools/call" => "CallToolResultResponse",
        "resources/list" => "ListResourcesResultResponse",
        "resources/templates/list" => "ListResourceTemplatesResultResponse",
        "resources/read" => "ReadResourceResultResponse",
        "prompts/list" => "ListPromptsResultResponse",
        "prompts/get" => "GetPromptResultResponse",
        "completion/complete" => "CompleteResultResponse",
        "subscriptions/listen" => "SubscriptionsListenResultResponse",
        _ => return None,
    })
}

/// The type of a notification method.
pub fn notification_definition(method: &str) -> Option<&'static str> {
    Some(match method {
        "notifications/progress" => "ProgressNotification",
        "notifications/cancelled" => "CancelledNotification",
        "notifications/message" => "LoggingMessageNotification",
        "notifications/tools/list_changed" => "ToolListChangedNotification",
        "notifications/prompts/list_changed" => "PromptListChangedNotification",
        "notifications/resources/list_changed" => "ResourceListChangedNotification",
        "notifications/resources/updated" => "ResourceUpdatedNotification",
        "notifications/subscriptions/acknowledged" => "SubscriptionsAcknowledgedNotification",
        _ => return None,
    })
}
