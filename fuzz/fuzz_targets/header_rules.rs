//! `x-mcp-header` rules: any input schema is accepted or refused with a
//! reason, and for an accepted parameter the header a client would send for
//! a value matches arguments that hold that value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use toolgate_schema::header_rules::header_params;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Object(schema)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(params) = header_params(&schema) else {
        return;
    };
    for param in params {
        for sample in [Value::from("a b\u{e9}\n"), Value::from(42), Value::from(true)] {
            let Some(encoded) = param.encode(&sample) else {
                continue;
            };
            // Build arguments holding `sample` at the parameter's path.
            let mut value = sample.clone();
            for key in param.path.iter().rev() {
                let mut map = Map::new();
                map.insert(key.clone(), value);
                value = Value::Object(map);
            }
            let Value::Object(arguments) = value else {
                continue;
            };
            assert_eq!(param.check(Some(encoded.as_bytes()), &arguments), Ok(()));
        }
    }
});
