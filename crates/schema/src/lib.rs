//! Bounded JSON Schema validation for MCP tool inputs and outputs, and the
//! `x-mcp-header` rules.
//!
//! A schema is measured against [`Limits`], then compiled once into a
//! [`CompiledSchema`] and reused for every call ([`LazySchema`] defers the
//! compilation to the first call). Validation reports each
//! violation with the JSON pointer of the offending value, what was expected
//! there, and how to fix it, so a model can correct itself.
//!
//! Safety properties:
//! - **No network, ever.** The `jsonschema` crate is built without its HTTP
//!   and file resolvers; a `$ref` that does not resolve inside the schema
//!   makes compilation fail with an error naming it.
//! - **Bounded cost.** Depth, subschema count, `$ref`-expanded size, `$defs`
//!   count and byte size of schemas are capped; instances are capped in depth
//!   and size before validation; `pattern` uses a linear-time regex engine, so
//!   no pattern can backtrack catastrophically (look-around and
//!   back-references are therefore not supported, and a schema using them is
//!   refused when compiled).
//! - **Known dialects only** (see [`dialect`]).
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

pub mod dialect;
pub mod header_rules;
mod hints;
mod lazy;
mod limits;
mod validator;

pub use dialect::Dialect;
pub use lazy::LazySchema;
pub use limits::Limits;
pub use validator::{CompiledSchema, MAX_VIOLATIONS, Violation};

/// Why a schema cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// `$schema` names a dialect toolgate does not validate.
    #[error(
        "unsupported JSON Schema dialect {0:?}; supported: 2020-12 (default), 2019-09, draft-07"
    )]
    UnsupportedDialect(String),
    /// The schema exceeds one of the [`Limits`].
    #[error("schema exceeds the limit on {bound}: {actual} > {limit}")]
    OverLimit {
        /// Which bound.
        bound: &'static str,
        /// The limit.
        limit: usize,
        /// What the schema has (at least).
        actual: usize,
    },
    /// A `$ref` that does not resolve within the schema.
    #[error("unresolvable $ref {0:?}: references must point inside the schema; nothing is fetched")]
    UnresolvedRef(String),
    /// The schema is not valid for its dialect.
    #[error("invalid JSON Schema: {0}")]
    Invalid(String),
}

impl SchemaError {
    pub(crate) fn over(bound: &'static str, limit: usize, actual: usize) -> Self {
        SchemaError::OverLimit {
            bound,
            limit,
            actual,
        }
    }
}

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
