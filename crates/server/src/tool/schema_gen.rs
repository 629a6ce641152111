//! JSON Schemas derived from Rust types (schemars, dialect 2020-12).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The 2020-12 schema of `T`, as a JSON object.
pub(crate) fn schema_for<T: JsonSchema>() -> Map<String, Value> {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut map = match schema.to_value() {
        Value::Object(map) => map,
        // `true`/`false` schemas: express them as objects.
        Value::Bool(true) => Map::new(),
        other => {
            let mut m = Map::new();
            m.insert("not".into(), Value::Object(Map::new()));
            tracing::warn!(schema = %other, "unexpected boolean schema");
            m
        }
    };
    // The Rust type name says nothing useful to a model and leaks internals.
    map.remove("title");
    strip_numeric_formats(&mut map);
    map
}

/// schemars annotates integers with Rust-flavoured formats (`uint32`,
/// `int64`, `double`...). They are not JSON Schema formats: validators of
/// other SDKs warn about each one on every list. The range they imply is
/// already stated by `minimum`/`maximum` where it matters.
fn strip_numeric_formats(map: &mut Map<String, Value>) {
    const RUST_FORMATS: &[&str] = &[
        "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
        "uint64", "uint128", "float", "double",
    ];
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| RUST_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    for value in map.values_mut() {
        match value {
            Value::Object(child) => strip_numeric_formats(child),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(child) = item {
                        strip_numeric_formats(child);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Order {
        quantity: u32,
        lines: Vec<Line>,
        /// An email address.
        #[schemars(email)]
        contact: String,
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Line {
        cents: u64,
        weight: f64,
    }

    #[test]
    fn derived_schemas_carry_no_rust_number_formats_but_keep_real_ones() {
        let schema = Value::Object(schema_for::<Order>());
        let text = schema.to_string();
        for f in ["uint32", "uint64", "double"] {
            assert!(!text.contains(f), "{f} left in {text}");
        }
        assert_eq!(
            schema.pointer("/properties/contact/format"),
            Some(&Value::from("email"))
        );
        // The range survives the format.
        assert_eq!(
            schema.pointer("/properties/quantity/minimum"),
            Some(&Value::from(0))
        );
    }
}
