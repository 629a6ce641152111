//! Hostile schemas and instances: each is either refused when compiled, with
//! the bound named, or validated within the bounds. (How long the accepted
//! ones take is measured by `cargo run --release -p toolgate-schema
//! --example pathological`, which `cargo xtask ci` runs; timings do not
//! belong in unit tests.)
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../examples/cases/mod.rs"]
mod cases;

use serde_json::json;
use toolgate_schema::{CompiledSchema, SchemaError};

fn refused(schema: serde_json::Value) -> SchemaError {
    CompiledSchema::compile(&schema).expect_err("must be refused")
}

#[test]
fn every_accepted_case_compiles_and_every_refused_one_names_its_bound() {
    // Building the case table takes a large frame in debug builds.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(check_cases)
        .unwrap()
        .join()
        .unwrap();
}

fn check_cases() {
    for case in cases::all() {
        match (CompiledSchema::compile(&case.schema), case.refused_for) {
            (Ok(compiled), None) => {
                for instance in &case.instances {
                    // Validation completes and gives an answer.
                    let _ = compiled.validate(instance);
                }
            }
            (Err(SchemaError::OverLimit { bound, .. }), Some(expected)) => {
                assert_eq!(bound, expected, "{}", case.name)
            }
            (other, expected) => panic!(
                "{}: got {other:?}, expected refusal for {expected:?}",
                case.name
            ),
        }
    }
}

#[test]
fn schema_depth_and_size_bounds() {
    let mut deep = json!({"type": "string"});
    for _ in 0..40 {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    assert!(matches!(
        refused(deep),
        SchemaError::OverLimit {
            bound: "schema depth",
            ..
        }
    ));
    let defs: serde_json::Map<_, _> = (0..300)
        .map(|i| (format!("d{i}"), json!({"type": "string"})))
        .collect();
    assert!(matches!(
        refused(json!({"$defs": defs})),
        SchemaError::OverLimit {
            bound: "$defs entries",
            ..
        }
    ));
    let huge = json!({"enum": (0..40_000).map(|i| format!("value-{i}")).collect::<Vec<_>>()});
    assert!(matches!(
        refused(huge),
        SchemaError::OverLimit {
            bound: "schema size in bytes",
            ..
        }
    ));
}

#[test]
fn instance_bounds() {
    let c = CompiledSchema::compile(&json!({})).unwrap();
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!([deep]);
    }
    let errors = c.validate(&deep).unwrap_err();
    assert!(errors[0].message.contains("nested deeper"), "{errors:?}");
    let big = json!("x".repeat(5 * 1024 * 1024));
    assert!(
        c.validate(&big).unwrap_err()[0]
            .message
            .contains("larger than")
    );
}

#[test]
fn dialects_and_references() {
    assert!(
        CompiledSchema::compile(
            &json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"})
        )
        .is_ok()
    );
    assert!(
        CompiledSchema::compile(
            &json!({"$schema": "https://json-schema.org/draft/2019-09/schema"})
        )
        .is_ok()
    );
    for other in [
        "http://json-schema.org/draft-04/schema#",
        "https://example.com/my-dialect",
    ] {
        let e = refused(json!({"$schema": other}));
        assert_eq!(e, SchemaError::UnsupportedDialect(other.into()));
        assert!(e.to_string().contains(other));
    }
    let e = refused(json!({"properties": {"a": {"$ref": "https://evil.example/schema.json"}}}));
    assert_eq!(
        e,
        SchemaError::UnresolvedRef("https://evil.example/schema.json".into())
    );
    assert!(matches!(
        refused(json!({"$ref": "#/$defs/missing"})),
        SchemaError::Invalid(_) | SchemaError::UnresolvedRef(_)
    ));
    // Local references work.
    let c = CompiledSchema::compile(
        &json!({"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}),
    )
    .unwrap();
    assert!(!c.is_valid(&json!({"a": "x"})));
}

#[test]
fn violations_say_what_was_expected_and_how_to_fix_it() {
    let c = CompiledSchema::compile(&json!({
        "type": "object",
        "properties": {"mode": {"enum": ["fast", "safe"]}, "n": {"type": "integer", "minimum": 1}},
        "required": ["mode"],
        "additionalProperties": false
    }))
    .unwrap();
    let v = c.validate(&json!({"n": 0, "extra": 1})).unwrap_err();
    let text: Vec<String> = v.iter().map(ToString::to_string).collect();
    let all = text.join("\n");
    assert!(all.contains("\"mode\"") && all.contains("add"), "{all}");
    assert!(all.contains("at /n") && all.contains("≥ 1"), "{all}");
    assert!(all.contains("remove \"extra\""), "{all}");
    let v = c.validate(&json!({"mode": "slow"})).unwrap_err();
    assert!(v[0].expected.contains("fast"), "{v:?}");
}

#[test]
fn backtracking_patterns_use_a_linear_engine() {
    // Look-around needs a backtracking engine: refused rather than risked.
    assert!(matches!(
        refused(json!({"pattern": "(?=a)a"})),
        SchemaError::Invalid(_)
    ));
    let c = CompiledSchema::compile(&json!({"pattern": "^(a+)+$"})).unwrap();
    assert!(!c.is_valid(&json!(format!("{}!", "a".repeat(10_000)))));
}
