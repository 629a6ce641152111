//! Schema compilation and validation under the bounds: a JSON array
//! `[schema, instance]` (or any JSON, taken as a schema) compiles or is
//! refused, and validation answers, within the bounds' time and memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use toolgate_schema::{CompiledSchema, Limits, MAX_VIOLATIONS};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let (schema, instances) = match value {
        Value::Array(mut pair) if pair.len() == 2 => {
            let instance = pair.pop().unwrap_or_default();
            (pair.pop().unwrap_or_default(), vec![instance])
        }
        schema => (schema, vec![json!({}), json!([]), json!("x"), json!(1)]),
    };
    let Ok(compiled) = CompiledSchema::compile_with(&schema, Limits::default()) else {
        return;
    };
    for instance in &instances {
        if let Err(violations) = compiled.validate(instance) {
            assert!(violations.len() <= MAX_VIOLATIONS);
            assert!(!compiled.is_valid(instance));
        }
    }
});
