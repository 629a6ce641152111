//! JSON Schema validation for MCP tool inputs and outputs.
//!
//! A schema is compiled once into a [`CompiledSchema`] and reused for every
//! call. Validation reports each violation with the JSON pointer of the
//! offending value, so a model can be told exactly what to fix.
//!
//! Remote references are never fetched: the `jsonschema` crate is built
//! without its HTTP and file resolvers, so a `$ref` that does not resolve
//! inside the schema makes compilation fail.
//!
//! ```
//! use serde_json::json;
//! use toolgate_schema::CompiledSchema;
//!
//! let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
//! let compiled = CompiledSchema::compile(&schema).unwrap();
//! assert!(compiled.validate(&json!({"n": 3})).is_ok());
//! let errors = compiled.validate(&json!({"n": "three"})).unwrap_err();
//! assert_eq!(errors[0].pointer, "/n");
//! ```
#![forbid(unsafe_code)]

use std::fmt;

use serde_json::Value;

/// Why a schema could not be compiled.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON Schema: {0}")]
pub struct SchemaError(String);

/// One way an instance fails its schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// JSON pointer to the offending value (`""` for the root).
    pub pointer: String,
    /// What the schema expected, in words.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "at {at}: {}", self.message)
    }
}

/// A compiled, reusable validator.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema").finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compile `schema`. Schemas without `$schema` are JSON Schema 2020-12.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        // The dialect comes from `$schema`; without one the crate's default,
        // 2020-12, applies, as MCP requires.
        let validator = jsonschema::options()
            .build(schema)
            .map_err(|e| SchemaError(e.to_string()))?;
        Ok(Self { validator })
    }

    /// Validate `instance`, collecting every violation.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        let violations: Vec<Violation> = self
            .validator
            .iter_errors(instance)
            .map(|e| Violation {
                pointer: e.instance_path().to_string(),
                message: e.to_string(),
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
        self.validator.is_valid(instance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_each_violation_with_its_pointer() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
            "required": ["a", "b"],
            "additionalProperties": false
        });
        let c = CompiledSchema::compile(&schema).unwrap();
        let errors = c.validate(&json!({"a": "1", "b": "z"})).unwrap_err();
        let pointers: Vec<_> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert!(
            pointers.contains(&"/a") && pointers.contains(&"/b"),
            "{errors:?}"
        );
    }

    #[test]
    fn dialect_follows_dollar_schema() {
        // Draft-07 `items` as an array means tuple validation; in 2020-12 it is invalid.
        let d7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]});
        let c = CompiledSchema::compile(&d7).unwrap();
        assert!(!c.is_valid(&json!([1])));
        // Default dialect: 2020-12 `prefixItems`.
        let d2020 = json!({"prefixItems": [{"type": "string"}]});
        let c = CompiledSchema::compile(&d2020).unwrap();
        assert!(!c.is_valid(&json!([1])));
    }

    #[test]
    fn never_fetches_remote_refs() {
        let schema = json!({"$ref": "https://example.com/schema.json"});
        assert!(CompiledSchema::compile(&schema).is_err());
    }
}
