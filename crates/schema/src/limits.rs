//! Bounds that keep hostile schemas and instances from becoming a
//! denial-of-service.
//!
//! A schema is measured before it is compiled; one over a bound is refused
//! with the bound named. The measure that matters most is the *expanded*
//! size: the number of subschemas validation may visit once every `$ref` is
//! followed. A handful of `$defs` that each reference the next twice is tiny
//! on the page and exponential to evaluate; the expanded size catches it.
//! Recursive references (a tree type) count once per cycle, since each
//! recursion step must descend into the instance, which is bounded too.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::SchemaError;

/// Limits applied when compiling a schema and before validating an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of subschemas. Default 32.
    pub max_schema_depth: usize,
    /// Subschemas written in the document. Default 2,000.
    pub max_subschemas: usize,
    /// Subschemas validation may visit with every `$ref` expanded. Default 20,000.
    pub max_expanded_subschemas: usize,
    /// Longest chain of `$ref`s followed one after another. Default 32.
    pub max_ref_chain: usize,
    /// Entries of `$defs` (and `definitions`). Default 256.
    pub max_defs: usize,
    /// Serialized size of the schema. Default 256 KiB.
    pub max_schema_bytes: usize,
    /// Deepest nesting of arrays and objects in an instance. Default 64.
    pub max_instance_depth: usize,
    /// Approximate size of an instance in bytes. Default 4 MiB.
    pub max_instance_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_schema_depth: 32,
            max_subschemas: 2_000,
            max_expanded_subschemas: 20_000,
            max_ref_chain: 32,
            max_defs: 256,
            max_schema_bytes: 256 * 1024,
            max_instance_depth: 64,
            max_instance_bytes: 4 * 1024 * 1024,
        }
    }
}

/// Keywords whose value is one subschema.
const SINGLE: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const ARRAYS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value is a map of subschemas.
const MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Visit the direct subschemas of `schema`, with a JSON pointer step.
pub(crate) fn children(schema: &Map<String, Value>, mut visit: impl FnMut(String, &Value)) {
    for (key, value) in schema {
        let k = key.as_str();
        if SINGLE.contains(&k) && (value.is_object() || value.is_boolean()) {
            visit(format!("/{k}"), value);
        } else if ARRAYS.contains(&k) {
            if let Value::Array(items) = value {
                for (i, item) in items.iter().enumerate() {
                    visit(format!("/{k}/{i}"), item);
                }
            }
        } else if MAPS.contains(&k)
            && let Value::Object(map) = value
        {
            for (name, item) in map {
                visit(format!("/{k}/{}", escape(name)), item);
            }
        }
    }
}

/// Escape a JSON pointer token.
pub(crate) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Check `schema` against `limits`.
pub(crate) fn check_schema(schema: &Value, limits: &Limits) -> Result<(), SchemaError> {
    let bytes = serde_json::to_vec(schema)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if bytes > limits.max_schema_bytes {
        return Err(SchemaError::over(
            "schema size in bytes",
            limits.max_schema_bytes,
            bytes,
        ));
    }
    let mut count = 0usize;
    let mut defs = 0usize;
    walk(schema, 0, limits, &mut count, &mut defs)?;
    if defs > limits.max_defs {
        return Err(SchemaError::over("$defs entries", limits.max_defs, defs));
    }
    let mut expander = Expander::new(schema, limits.max_expanded_subschemas);
    let expanded = expander.weight_of_root();
    if expander.longest_chain > limits.max_ref_chain {
        return Err(SchemaError::over(
            "$ref chain length",
            limits.max_ref_chain,
            expander.longest_chain,
        ));
    }
    if expanded > limits.max_expanded_subschemas {
        return Err(SchemaError::over(
            "subschemas visited with $ref expanded",
            limits.max_expanded_subschemas,
            expanded,
        ));
    }
    Ok(())
}

fn walk(
    schema: &Value,
    depth: usize,
    limits: &Limits,
    count: &mut usize,
    defs: &mut usize,
) -> Result<(), SchemaError> {
    if depth > limits.max_schema_depth {
        return Err(SchemaError::over(
            "schema depth",
            limits.max_schema_depth,
            depth,
        ));
    }
    *count += 1;
    if *count > limits.max_subschemas {
        return Err(SchemaError::over(
            "subschemas",
            limits.max_subschemas,
            *count,
        ));
    }
    let Value::Object(map) = schema else {
        return Ok(());
    };
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = map.get(key) {
            *defs += d.len();
        }
    }
    let mut result = Ok(());
    children(map, |_, child| {
        if result.is_ok() {
            result = walk(child, depth + 1, limits, count, defs);
        }
    });
    result
}

/// Computes the expanded size of a schema, following local `$ref`s.
struct Expander<'a> {
    root: &'a Value,
    cap: usize,
    memo: HashMap<String, usize>,
    stack: Vec<String>,
    longest_chain: usize,
}

impl<'a> Expander<'a> {
    fn new(root: &'a Value, cap: usize) -> Self {
        Self {
            root,
            cap,
            memo: HashMap::new(),
            stack: Vec::new(),
            longest_chain: 0,
        }
    }

    fn weight_of_root(&mut self) -> usize {
        self.weight(self.root)
    }

    fn weight(&mut self, schema: &Value) -> usize {
        let Value::Object(map) = schema else { return 1 };
        let mut total = 1usize;
        for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(Value::String(reference)) = map.get(key) {
                total = total.saturating_add(self.reference(reference));
            }
        }
        let mut children_total = 0usize;
        children(map, |path, child| {
            // Definitions are only reached through references.
            if path.starts_with("/$defs/") || path.starts_with("/definitions/") {
                return;
            }
            if children_total <= self.cap {
                children_total = children_total.saturating_add(self.weight(child));
            }
        });
        total.saturating_add(children_total)
    }

    fn reference(&mut self, reference: &str) -> usize {
        // Only fragment pointers can be weighed here; anything else is either
        // refused at compilation (remote) or an anchor counted once.
        let Some(pointer) = reference.strip_prefix('#') else {
            return 1;
        };
        if let Some(&w) = self.memo.get(pointer) {
            return w;
        }
        if self.stack.iter().any(|p| p == pointer) {
            return 1;
        }
        let Some(target) = self.root.pointer(pointer) else {
            return 1;
        };
        self.stack.push(pointer.to_owned());
        self.longest_chain = self.longest_chain.max(self.stack.len());
        // Past the bound the schema is refused anyway; stop descending so a
        // hostile chain cannot exhaust the stack here either.
        if self.stack.len() > self.cap.min(1024) {
            self.stack.pop();
            return 1;
        }
        let w = self.weight(target);
        self.stack.pop();
        self.memo.insert(pointer.to_owned(), w);
        w
    }
}

/// Check an instance's depth and approximate size before validating it.
pub(crate) fn check_instance(instance: &Value, limits: &Limits) -> Result<(), String> {
    // Recursion is bounded by `max_instance_depth`, and saves the work list
    // an explicit stack would allocate on every call.
    fn walk(value: &Value, depth: usize, bytes: &mut usize, limits: &Limits) -> Result<(), String> {
        if depth > limits.max_instance_depth {
            return Err(format!(
                "the value is nested deeper than {} levels",
                limits.max_instance_depth
            ));
        }
        *bytes = bytes.saturating_add(8);
        match value {
            Value::String(s) => *bytes = bytes.saturating_add(s.len()),
            Value::Array(items) => {
                for item in items {
                    walk(item, depth + 1, bytes, limits)?;
                }
            }
            Value::Object(map) => {
                for (k, v) in map {
                    *bytes = bytes.saturating_add(k.len());
                    walk(v, depth + 1, bytes, limits)?;
                }
            }
            _ => {}
        }
        if *bytes > limits.max_instance_bytes {
            return Err(format!(
                "the value is larger than {} bytes",
                limits.max_instance_bytes
            ));
        }
        Ok(())
    }
    walk(instance, 1, &mut 0, limits)
}
