//! Input schemas: valid, bounded, precise, and careful with headers.

use serde_json::{Map, Value};
use toolgate_schema::header_rules::header_params;
use toolgate_schema::{CompiledSchema, SchemaError};

use super::Subject;
use crate::Finding;
use crate::text::words;

/// Parameter names that usually want a fixed set of values.
const CHOICE_NAMES: &[&str] = &[
    "mode",
    "action",
    "operation",
    "op",
    "type",
    "kind",
    "format",
    "level",
    "status",
    "method",
    "sort",
    "order",
    "direction",
    "unit",
    "scope",
    "category",
];
/// Parameter-name words that suggest a secret or personal data.
const SENSITIVE: &[&str] = &[
    "password",
    "passwd",
    "token",
    "secret",
    "key",
    "apikey",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "cookie",
    "session",
    "ssn",
    "email",
    "phone",
    "address",
    "card",
    "iban",
    "pin",
    "otp",
];

pub(crate) fn check(s: &Subject<'_>, out: &mut Vec<Finding>) {
    let schema = &s.tool.input_schema;
    match CompiledSchema::compile(&Value::Object(schema.clone())) {
        Ok(_) => {}
        Err(SchemaError::UnresolvedRef(r)) => out.push(s.finding(
            "TG-S002",
            format!("the input schema references {r:?}, outside the schema"),
            format!("inputSchema $ref: {r}"),
            "inline the referenced schema under $defs and point to it with #/$defs/...",
        )),
        Err(e @ SchemaError::OverLimit { .. }) => out.push(s.finding(
            "TG-S003",
            e.to_string(),
            "inputSchema",
            "simplify the schema: fewer nested compositions and references",
        )),
        Err(e) => out.push(s.finding(
            "TG-S001",
            e.to_string(),
            "inputSchema",
            "fix the schema so it is valid for its dialect",
        )),
    }
    if let Err(e) = header_params(schema) {
        out.push(s.finding(
            "TG-S007",
            e.reason.clone(),
            format!("inputSchema{}", e.location),
            "fix or remove the x-mcp-header annotation",
        ));
    } else if let Ok(params) = header_params(schema) {
        for p in params {
            let sensitive = p
                .path
                .iter()
                .flat_map(|seg| words(seg))
                .find(|w| SENSITIVE.contains(&w.as_str()));
            if let Some(word) = sensitive {
                out.push(s.finding(
                    "TG-S008",
                    format!("the parameter /{} looks sensitive ({word}) but is mirrored into the {} header", p.path.join("/"), p.header_name()),
                    format!("inputSchema/properties/{}/x-mcp-header: {:?}", p.path.join("/properties/"), p.name),
                    "remove x-mcp-header from parameters carrying secrets or personal data",
                ));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let no_params = properties.is_none_or(Map::is_empty)
        && !["oneOf", "anyOf", "allOf", "$ref"]
            .iter()
            .any(|k| schema.contains_key(*k));
    if no_params {
        if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
            out.push(s.finding(
                "TG-S006",
                "the tool takes no arguments but its schema accepts any object",
                format!("inputSchema: {}", Value::Object(schema.clone())),
                "use {\"type\": \"object\", \"additionalProperties\": false}",
            ));
        }
        return;
    }
    if properties.is_some()
        && !matches!(schema.get("additionalProperties"), Some(Value::Bool(false)))
        && !schema.contains_key("unevaluatedProperties")
    {
        out.push(s.finding(
            "TG-S005",
            "the arguments object accepts properties it does not declare",
            "inputSchema/additionalProperties: (absent or true)",
            "add \"additionalProperties\": false so misspelled arguments are refused",
        ));
    }
    for (name, prop) in properties.into_iter().flatten() {
        let is_free_string = prop.get("type").and_then(Value::as_str) == Some("string")
            && ![
                "enum",
                "const",
                "pattern",
                "format",
                "maxLength",
                "oneOf",
                "anyOf",
            ]
            .iter()
            .any(|k| prop.get(*k).is_some());
        let choice_like = words(name)
            .iter()
            .any(|w| CHOICE_NAMES.contains(&w.as_str()));
        if is_free_string && choice_like {
            out.push(s.finding(
                "TG-S004",
                format!("/{name} is free text although its name suggests a fixed choice"),
                format!("inputSchema/properties/{name}: {prop}"),
                "list the allowed values with enum (or constrain with pattern/maxLength)",
            ));
        }
    }
}
