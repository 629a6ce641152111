//! Compiled validators.

use std::fmt;
use std::sync::OnceLock;

use jsonschema::{PatternOptions, Retrieve, Uri};
use serde_json::Value;
use toolgate_protocol::quote::{quote_json, shorten_message};

use crate::dialect::Dialect;
use crate::limits::{check_instance, check_schema};
use crate::{Limits, SchemaError, hints};

/// At most this many violations are reported for one instance; an error
/// that lists this many may have left others out.
pub const MAX_VIOLATIONS: usize = 20;

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
    engine: Engine,
    limits: Limits,
    dialect: Dialect,
}

/// How a schema is checked.
enum Engine {
    /// "Any object" or "an empty object" (tools without arguments): checked
    /// by hand, so such tools never load the general validator. The full
    /// validator is built only to explain a failure, with its exact wording.
    Object {
        closed: bool,
        schema: Value,
        explainer: OnceLock<Option<jsonschema::Validator>>,
    },
    /// Everything else.
    Full(jsonschema::Validator),
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
        let dialect = precheck(schema, &limits)?;
        Self::compile_checked(schema, limits, dialect)
    }

    /// Compile `schema` with the default [`Limits`], asserting `format`
    /// (`email`, `uri`, `date`, `date-time`, …) where 2020-12 makes it an
    /// annotation only: for a form a person fills in, such as an
    /// elicitation's requested schema, where a malformed address is an
    /// answer to send back, not one to pass on.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolgate_schema::CompiledSchema;
    /// let email = json!({"type": "string", "format": "email"});
    /// assert!(CompiledSchema::compile(&email).unwrap().validate(&json!("nope")).is_ok());
    /// let strict = CompiledSchema::compile_asserting_formats(&email).unwrap();
    /// assert!(strict.validate(&json!("nope")).is_err());
    /// assert!(strict.validate(&json!("ada@example.com")).is_ok());
    /// ```
    pub fn compile_asserting_formats(schema: &Value) -> Result<Self, SchemaError> {
        let limits = Limits::default();
        let dialect = precheck(schema, &limits)?;
        Ok(Self {
            engine: Engine::Full(build_with(schema, dialect, true)?),
            limits,
            dialect,
        })
    }

    /// Compile a schema that already passed [`precheck`] as `dialect`.
    pub(crate) fn compile_checked(
        schema: &Value,
        limits: Limits,
        dialect: Dialect,
    ) -> Result<Self, SchemaError> {
        let engine = match object_only(schema) {
            Some(closed) => Engine::Object {
                closed,
                schema: schema.clone(),
                explainer: OnceLock::new(),
            },
            None => Engine::Full(build(schema, dialect)?),
        };
        Ok(Self {
            engine,
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
        // The common case — valid input — takes the fast path; only invalid
        // input pays for collecting every violation.
        if self.accepts(instance) {
            return Ok(());
        }
        let Some(validator) = self.explainer() else {
            return Err(vec![Violation {
                pointer: String::new(),
                message: format!(
                    "{} is not an object without properties",
                    quote_json(instance)
                ),
                expected: "an object".into(),
                fix: "send an object".into(),
            }]);
        };
        // Messages quote the offending value briefly (a 1 MiB argument must
        // not come back as a 1 MiB error), and only the first violations are
        // reported: an array of a million bad items yields a short answer.
        let violations: Vec<Violation> = validator
            .iter_errors(instance)
            .take(MAX_VIOLATIONS)
            .map(|e| {
                let (expected, fix) = hints::describe(e.kind());
                Violation {
                    pointer: e.instance_path().to_string(),
                    message: shorten_message(&e.to_string(), e.instance()),
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
        check_instance(instance, &self.limits).is_ok() && self.accepts(instance)
    }

    fn accepts(&self, instance: &Value) -> bool {
        match &self.engine {
            Engine::Object { closed, .. } => instance
                .as_object()
                .is_some_and(|map| !closed || map.is_empty()),
            Engine::Full(validator) => validator.is_valid(instance),
        }
    }

    fn explainer(&self) -> Option<&jsonschema::Validator> {
        match &self.engine {
            Engine::Full(validator) => Some(validator),
            Engine::Object {
                schema, explainer, ..
            } => explainer
                .get_or_init(|| build(schema, self.dialect).ok())
                .as_ref(),
        }
    }
}

/// The checks that need no compiler: a known dialect, within the limits.
pub(crate) fn precheck(schema: &Value, limits: &Limits) -> Result<Dialect, SchemaError> {
    let dialect = match schema {
        Value::Object(map) => Dialect::of(map)?,
        Value::Bool(_) => Dialect::Draft202012,
        other => {
            return Err(SchemaError::Invalid(format!(
                "a schema must be an object or a boolean, not {other}"
            )));
        }
    };
    check_schema(schema, limits)?;
    Ok(dialect)
}

fn build(schema: &Value, dialect: Dialect) -> Result<jsonschema::Validator, SchemaError> {
    build_with(schema, dialect, false)
}

/// `assert_formats`: `format` is checked whatever the dialect says (else
/// the dialect's default stands: an annotation in 2019-09 and 2020-12).
fn build_with(
    schema: &Value,
    dialect: Dialect,
    assert_formats: bool,
) -> Result<jsonschema::Validator, SchemaError> {
    let mut options = jsonschema::options();
    if assert_formats {
        options = options.should_validate_formats(true);
    }
    options
        .with_draft(dialect.draft())
        .with_retriever(NoRetrieval)
        .with_pattern_options(PatternOptions::regex())
        .build(schema)
        .map_err(|e| classify(&e.to_string(), schema))
}

/// `Some(closed)` when `schema` only says "an object" (`closed`: with no
/// properties at all), in words whose validity is plain without a
/// meta-schema; `None` for anything else.
fn object_only(schema: &Value) -> Option<bool> {
    let map = schema.as_object()?;
    if map.get("type")?.as_str()? != "object" {
        return None;
    }
    let mut closed = false;
    for (key, value) in map {
        match key.as_str() {
            "type" => {}
            "additionalProperties" => closed = !value.as_bool()?,
            "properties" if value.as_object()?.is_empty() => {}
            "required" if value.as_array()?.is_empty() => {}
            // `$schema` was already checked against the known dialects.
            "$schema" | "title" | "description" | "$comment" if value.is_string() => {}
            _ => return None,
        }
    }
    Some(closed)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The hand-checked engine must agree with the general validator on
    /// every instance, and explain failures in the same words.
    #[test]
    fn object_only_schemas_agree_with_the_general_validator() {
        let schemas = [
            json!({"type": "object"}),
            json!({"type": "object", "additionalProperties": false}),
            json!({"type": "object", "additionalProperties": true, "properties": {}}),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false,
                   "title": "No arguments", "description": "d", "$comment": "c",
                   "$schema": "https://json-schema.org/draft/2020-12/schema"}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": false}),
        ];
        let instances = [
            json!({}),
            json!({"a": 1}),
            json!({"a": {"b": [1, 2]}, "c": null}),
            json!([]),
            json!("text"),
            json!(null),
            json!(3.5),
            json!(true),
        ];
        for schema in &schemas {
            assert!(
                object_only(schema).is_some(),
                "{schema} takes the hand path"
            );
            let ours = CompiledSchema::compile(schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
            let dialect = precheck(schema, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
            let general = build(schema, dialect).unwrap_or_else(|e| panic!("{schema}: {e}"));
            for instance in &instances {
                assert_eq!(
                    ours.is_valid(instance),
                    general.is_valid(instance),
                    "{schema} on {instance}"
                );
                let expected: Vec<String> = general
                    .iter_errors(instance)
                    .map(|e| e.to_string())
                    .collect();
                let got: Vec<String> = match ours.validate(instance) {
                    Ok(()) => Vec::new(),
                    Err(v) => v.into_iter().map(|v| v.message).collect(),
                };
                assert_eq!(got, expected, "{schema} on {instance}");
            }
        }
    }

    #[test]
    fn anything_more_takes_the_general_validator() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            json!({"type": "object", "required": ["a"]}),
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "minProperties": 1}),
            json!({"type": ["object", "null"]}),
            json!({"type": "object", "title": 3}),
            json!({"type": "object", "$defs": {}}),
            json!({"properties": {}}),
        ] {
            assert_eq!(object_only(&schema), None, "{schema}");
        }
    }

    #[test]
    fn violations_are_few_and_quote_values_briefly() {
        let schema = json!({"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string", "maxLength": 10}
        }});
        let compiled = CompiledSchema::compile(&schema).unwrap();
        let many = json!({"tags": vec![1; 5000]});
        let violations = compiled.validate(&many).unwrap_err();
        assert_eq!(violations.len(), MAX_VIOLATIONS);
        let long = json!({"note": "w".repeat(1 << 20)});
        let violations = compiled.validate(&long).unwrap_err();
        let text = violations[0].to_string();
        assert!(text.len() < 400, "{} bytes", text.len());
        assert!(text.contains("(1048576 bytes)"), "{text}");
    }
}
