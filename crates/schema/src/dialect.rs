//! Which JSON Schema dialects toolgate validates.
//!
//! | `$schema` | Dialect |
//! | --- | --- |
//! | absent | 2020-12 (the MCP default) |
//! | `https://json-schema.org/draft/2020-12/schema` | 2020-12 |
//! | `https://json-schema.org/draft/2019-09/schema` | 2019-09 |
//! | `http://json-schema.org/draft-07/schema` | draft-07 |
//!
//! A trailing `#` and the other scheme (`http`/`https`) are accepted. Any
//! other value, including draft-04 and draft-06, is refused with an error
//! naming it.

use serde_json::{Map, Value};

use crate::SchemaError;

/// A supported dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// JSON Schema 2020-12.
    Draft202012,
    /// JSON Schema 2019-09.
    Draft201909,
    /// JSON Schema draft-07.
    Draft7,
}

impl Dialect {
    /// The dialect a schema declares (2020-12 when it declares none).
    pub fn of(schema: &Map<String, Value>) -> Result<Dialect, SchemaError> {
        let Some(declared) = schema.get("$schema") else {
            return Ok(Dialect::Draft202012);
        };
        let Some(uri) = declared.as_str() else {
            return Err(SchemaError::UnsupportedDialect(declared.to_string()));
        };
        let normalized = uri.trim_end_matches('#').replacen("https://", "http://", 1);
        match normalized.as_str() {
            "http://json-schema.org/draft/2020-12/schema" => Ok(Dialect::Draft202012),
            "http://json-schema.org/draft/2019-09/schema" => Ok(Dialect::Draft201909),
            "http://json-schema.org/draft-07/schema" => Ok(Dialect::Draft7),
            _ => Err(SchemaError::UnsupportedDialect(uri.to_owned())),
        }
    }

    pub(crate) fn draft(self) -> jsonschema::Draft {
        match self {
            Dialect::Draft202012 => jsonschema::Draft::Draft202012,
            Dialect::Draft201909 => jsonschema::Draft::Draft201909,
            Dialect::Draft7 => jsonschema::Draft::Draft7,
        }
    }
}
