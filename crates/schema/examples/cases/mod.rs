//! Known-pathological schemas and instances, shared by the bound tests and
//! the timing run.
#![allow(dead_code)]

use serde_json::{Map, Value, json};

/// One case.
pub struct Case {
    /// What it attacks.
    pub name: &'static str,
    /// The schema.
    pub schema: Value,
    /// Instances to validate (when the schema is accepted).
    pub instances: Vec<Value>,
    /// The bound that must refuse it, if any.
    pub refused_for: Option<&'static str>,
}

fn nested_any_of(branches: usize, depth: usize) -> Value {
    if depth == 0 {
        return json!({"type": "string", "minLength": 3});
    }
    let inner: Vec<Value> = (0..branches)
        .map(|i| json!({"allOf": [{"minLength": i}, nested_any_of(branches, depth - 1)]}))
        .collect();
    json!({"anyOf": inner})
}

fn compact_any_of(branches: usize, depth: usize) -> Value {
    if depth == 0 {
        return json!({"minLength": 1});
    }
    json!({"anyOf": (0..branches).map(|_| compact_any_of(branches, depth - 1)).collect::<Vec<_>>()})
}

fn ref_dag(levels: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"anyOf": [{"$ref": next}, {"allOf": [{"$ref": next}]}]}),
        );
    }
    defs.insert(format!("d{levels}"), json!({"type": "integer"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

fn ref_chain(length: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..length {
        defs.insert(
            format!("d{i}"),
            json!({"$ref": format!("#/$defs/d{}", i + 1)}),
        );
    }
    defs.insert(format!("d{length}"), json!({"type": "integer"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

fn nested_instance(depth: usize) -> Value {
    let mut v = json!(0);
    for _ in 0..depth {
        v = json!({"a": [v]});
    }
    v
}

/// Every case.
pub fn all() -> Vec<Case> {
    let long_a = format!("{}!", "a".repeat(50_000));
    vec![
        Case {
            name: "nested anyOf fan-out within bounds (6 branches, 4 levels)",
            schema: nested_any_of(6, 3),
            instances: vec![json!("ab"), json!(42), json!("abcdef")],
            refused_for: None,
        },
        Case {
            name: "nested anyOf fan-out beyond the subschema bound",
            schema: compact_any_of(10, 4),
            instances: vec![],
            refused_for: Some("subschemas"),
        },
        Case {
            name: "$ref DAG doubling at each of 16 levels",
            schema: ref_dag(16),
            instances: vec![],
            refused_for: Some("subschemas visited with $ref expanded"),
        },
        Case {
            name: "$ref chain within bounds (30 links)",
            schema: ref_chain(30),
            instances: vec![json!(1), json!("x")],
            refused_for: None,
        },
        Case {
            name: "deep $ref chain (200 links)",
            schema: ref_chain(200),
            instances: vec![],
            refused_for: Some("$ref chain length"),
        },
        Case {
            name: "huge enum (10,000 values)",
            schema: json!({"enum": (0..10_000).map(|i| format!("v{i}")).collect::<Vec<_>>()}),
            instances: vec![json!("v9999"), json!("absent")],
            refused_for: None,
        },
        Case {
            name: "catastrophic-backtracking pattern",
            schema: json!({"type": "string", "pattern": "^(a+)+$"}),
            instances: vec![json!(long_a), json!("a".repeat(50_000))],
            refused_for: None,
        },
        Case {
            name: "deeply nested instance",
            schema: json!({"$defs": {"n": {"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}, "$ref": "#/$defs/n"}),
            instances: vec![nested_instance(30), nested_instance(1_000)],
            refused_for: None,
        },
        Case {
            name: "uniqueItems over a large array",
            schema: json!({"type": "array", "uniqueItems": true}),
            instances: vec![
                json!((0..100_000).collect::<Vec<_>>()),
                json!((0..20_000).map(|i| json!({"k": i})).collect::<Vec<_>>()),
            ],
            refused_for: None,
        },
        Case {
            name: "wide object against patternProperties",
            schema: json!({"type": "object", "patternProperties": {"^[a-z]+[0-9]*$": {"type": "integer"}}, "additionalProperties": false}),
            instances: vec![Value::Object(
                (0..50_000).map(|i| (format!("key{i}"), json!(i))).collect(),
            )],
            refused_for: None,
        },
    ]
}
