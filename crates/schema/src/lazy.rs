//! Schemas compiled on first use.
//!
//! A server may register hundreds of tools of which a session calls a few.
//! Compiling every schema up front costs start-up time and keeps the whole
//! validator (its code and the compiled meta-schema) resident in a process
//! that may never need it. A [`LazySchema`] does the checks that need no
//! compiler (dialect, [`Limits`]) when it is made, and compiles once, on
//! the first validation; the result, success or error, is kept.

use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use crate::validator::precheck;
use crate::{CompiledSchema, Dialect, Limits, SchemaError};

/// A schema that is compiled the first time it is needed.
///
/// ```
/// use serde_json::json;
/// use toolgate_schema::{LazySchema, Limits};
///
/// let schema = LazySchema::new(json!({"type": "object", "required": ["n"]}), Limits::default())?;
/// assert!(!schema.is_compiled());
/// assert!(schema.get().map_err(Clone::clone)?.validate(&json!({})).is_err());
/// assert!(schema.is_compiled());
/// # Ok::<(), toolgate_schema::SchemaError>(())
/// ```
pub struct LazySchema {
    schema: Value,
    limits: Limits,
    dialect: Dialect,
    compiled: OnceLock<Result<CompiledSchema, SchemaError>>,
}

impl fmt::Debug for LazySchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazySchema")
            .field("compiled", &self.is_compiled())
            .finish_non_exhaustive()
    }
}

impl LazySchema {
    /// Check `schema`'s dialect and size now; compile it later.
    pub fn new(schema: Value, limits: Limits) -> Result<Self, SchemaError> {
        let dialect = precheck(&schema, &limits)?;
        Ok(Self {
            schema,
            limits,
            dialect,
            compiled: OnceLock::new(),
        })
    }

    /// The compiled schema, compiling it now if this is the first use.
    pub fn get(&self) -> Result<&CompiledSchema, &SchemaError> {
        self.compiled
            .get_or_init(|| {
                CompiledSchema::compile_checked(&self.schema, self.limits.clone(), self.dialect)
            })
            .as_ref()
    }

    /// Whether [`LazySchema::get`] has run.
    pub fn is_compiled(&self) -> bool {
        self.compiled.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn limits_and_dialect_are_checked_when_made() {
        let unknown =
            json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"});
        assert!(matches!(
            LazySchema::new(unknown, Limits::default()),
            Err(SchemaError::UnsupportedDialect(_))
        ));
        let tight = Limits {
            max_schema_bytes: 16,
            ..Limits::default()
        };
        let big = json!({"type": "object", "description": "longer than sixteen bytes"});
        assert!(matches!(
            LazySchema::new(big, tight),
            Err(SchemaError::OverLimit { .. })
        ));
    }

    #[test]
    fn compile_errors_surface_on_first_use_and_stay() {
        let broken = LazySchema::new(
            json!({"type": "object", "minProperties": "many"}),
            Limits::default(),
        );
        let Ok(broken) = broken else {
            panic!("the precheck does not compile")
        };
        assert!(!broken.is_compiled());
        assert!(matches!(broken.get(), Err(SchemaError::Invalid(_))));
        assert!(broken.is_compiled());
        assert!(broken.get().is_err());
    }
}
