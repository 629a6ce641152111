//! Compiled validators.

use std::fmt;

use jsonschema::{PatternOptions, Retrieve, Uri};
use serde_json::Value;

use crate::dialect::Dialect;
use crate::limits::{check_instance, check_schema};
use crate::{Limits, SchemaError, hints};

/// One way an instance fails its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer to the offending value (`""` for the root).
    pub pointer: String,
    /// The validator's message (what is wrong).
    pub message: String,
    /// What the schema expects there.
    pub expected: String,
    /// How to fix it.
    pub fix: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(
            f,
            "at {at}: {} (expected {}; {})",
            self.message, self.expected, self.fix
        )
    }
}

/// Refuses every external reference: nothing is ever fetched.
struct NoRetrieval;

impl Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("external reference {uri} refused: toolgate never fetches schemas").into())
    }
}

/// A compiled, reusable validator.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
    limits: Limits,
    dialect: Dialect,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compile `schema` with the default [`Limits`].
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        Self::compile_with(schema, Limits::default())
    }

    /// Compile `schema` with explicit limits.
    pub fn compile_with(schema: &Value, limits: Limits) -> Result<Self, SchemaError> {
        let dialect = match schema {
            Value::Object(map) => Dialect::of(map)?,
            Value::Bool(_) => Dialect::Draft202012,
            other => {
                return Err(SchemaError::Invalid(format!(
                    "a schema must be an object or a boolean, not {other}"
                )));
            }
        };
        check_schema(schema, &limits)?;
        let validator = jsonschema::options()
            .with_draft(dialect.draft())
            .with_retriever(NoRetrieval)
            .with_pattern_options(PatternOptions::regex())
            .build(schema)
            .map_err(|e| classify(&e.to_string(), schema))?;
        Ok(Self {
            validator,
            limits,
            dialect,
        })
    }

    /// The schema's dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Validate `instance`, collecting every violation.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        if let Err(reason) = check_instance(instance, &self.limits) {
            return Err(vec![Violation {
                pointer: String::new(),
                message: reason,
                expected: "a smaller value".into(),
                fix: "send less deeply nested or smaller data".into(),
            }]);
        }
        // The common case — valid input — takes the validator's fast path;
        // only invalid input pays for collecting every violation.
        if self.validator.is_valid(instance) {
            return Ok(());
        }
        let violations: Vec<Violation> = self
            .validator
            .iter_errors(instance)
            .map(|e| {
                let (expected, fix) = hints::describe(e.kind());
                Violation {
                    pointer: e.instance_path().to_string(),
                    message: e.to_string(),
                    expected,
                    fix,
                }
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    /// Whether `instance` is valid.
    pub fn is_valid(&self, instance: &Value) -> bool {
        check_instance(instance, &self.limits).is_ok() && self.validator.is_valid(instance)
    }
}

/// Turn a compiler message into the most specific error.
fn classify(message: &str, schema: &Value) -> SchemaError {
    if message.contains("refused")
        || message.contains("Unresolvable")
        || message.contains("resolve")
    {
        // Name the reference when we can find it.
        let mut refs = Vec::new();
        collect_refs(schema, &mut refs);
        if let Some(r) = refs.into_iter().find(|r| !r.starts_with('#')) {
            return SchemaError::UnresolvedRef(r);
        }
    }
    SchemaError::Invalid(message.to_owned())
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Value::String(s) = v {
                        out.push(s.clone());
                    }
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
