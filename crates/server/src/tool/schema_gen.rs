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
    map
}
