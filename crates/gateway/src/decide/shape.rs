//! Tool shaping: what the model reads of an upstream's tool on one
//! endpoint — another name, title or description, parameters fixed to one
//! value (gone from the schema, put into the forwarded arguments), and
//! parameters narrowed. The upstream's definition stays what is locked,
//! approved and audited; shaping only ever narrows what may be sent.
//!
//! Every check is made against the upstream's own schema when the
//! upstream lists the tool: a fixed value it refuses, or a bound looser
//! than its own, is a shape that cannot work, and said so.
//!
//! Layer: `decide`.

use serde_json::{Map, Value};
use toolgate_protocol::types::Tool;

use crate::config::{Narrow, ShapeConfig};

/// A tool as one endpoint shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Shaped {
    /// The definition the model reads.
    pub tool: Tool,
    /// The values every call sends for the parameters the model does not
    /// see.
    pub fixed: Map<String, Value>,
}

/// Why a shape cannot apply to the tool its upstream lists.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

/// The schema of parameter `name` of `schema`, with the root's
/// definitions beside it (so a `$ref` in it still resolves).
fn parameter_schema(schema: &Map<String, Value>, name: &str) -> Option<Value> {
    let mut own = match schema.get("properties")?.get(name)? {
        Value::Object(o) => o.clone(),
        Value::Bool(b) => return Some(Value::Bool(*b)),
        _ => return None,
    };
    for defs in ["$defs", "definitions"] {
        if let Some(d) = schema.get(defs) {
            own.entry(defs).or_insert_with(|| d.clone());
        }
    }
    Some(Value::Object(own))
}

/// Whether the parameter schema `schema` accepts `value`.
fn accepts(schema: &Value, value: &Value) -> Result<bool, ShapeError> {
    let compiled = toolgate_schema::CompiledSchema::compile(schema)
        .map_err(|e| ShapeError(format!("the upstream's schema of it does not compile: {e}")))?;
    Ok(compiled.is_valid(value))
}

/// `tool` as `shape` shows it on an endpoint.
pub fn shape(tool: &Tool, shape: &ShapeConfig) -> Result<Shaped, ShapeError> {
    let mut shown = tool.clone();
    if let Some(name) = &shape.name {
        shown.name = name.clone();
    }
    if let Some(title) = &shape.title {
        shown.title = Some(title.clone());
    }
    if let Some(description) = &shape.description {
        shown.description = Some(description.clone());
    }
    if let Some(more) = &shape.description_append {
        shown.description = Some(match shown.description.take() {
            Some(d) if !d.trim().is_empty() => format!("{}\n\n{more}", d.trim_end()),
            _ => more.clone(),
        });
    }
    let schema = &mut shown.input_schema;
    let upstream = schema.clone();
    let mut fixed = Map::new();
    for (name, value) in &shape.fixed {
        let Some(own) = parameter_schema(&upstream, name) else {
            return Err(ShapeError(format!(
                "fixed {name:?}: the upstream's tool has no parameter {name:?}"
            )));
        };
        if !accepts(&own, value)? {
            return Err(ShapeError(format!(
                "fixed {name:?} = {value}: the upstream's schema refuses that value"
            )));
        }
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            properties.remove(name);
        }
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            required.retain(|r| r.as_str() != Some(name));
        }
        fixed.insert(name.clone(), value.clone());
    }
    for (name, narrow) in &shape.narrow {
        let Some(own) = parameter_schema(&upstream, name) else {
            return Err(ShapeError(format!(
                "narrow {name:?}: the upstream's tool has no parameter {name:?}"
            )));
        };
        let narrowed = narrowed(name, &own, narrow)?;
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            properties.insert(name.clone(), narrowed);
        }
    }
    Ok(Shaped { tool: shown, fixed })
}

/// A bound of `own`, as a number.
fn bound(own: &Value, key: &str) -> Option<f64> {
    own.get(key).and_then(Value::as_f64)
}

/// `own` with `narrow`'s bounds added: each must be at least as tight as
/// the upstream's, and every allowed value one the upstream accepts, so
/// the result accepts a subset of what `own` does.
fn narrowed(name: &str, own: &Value, narrow: &Narrow) -> Result<Value, ShapeError> {
    let not_narrower = |key: &str, ours: f64, theirs: f64| {
        ShapeError(format!(
            "narrow {name:?}: {key} {ours} is looser than the upstream's {theirs}; a shape may only narrow"
        ))
    };
    let mut out = match own {
        Value::Object(o) => o.clone(),
        // `true` accepts anything: every bound narrows it.
        _ => Map::new(),
    };
    if let Some(values) = &narrow.one_of {
        if values.is_empty() {
            return Err(ShapeError(format!(
                "narrow {name:?}: enum lists no value; fix the parameter instead, or hide the tool"
            )));
        }
        for value in values {
            if !accepts(own, value)? {
                return Err(ShapeError(format!(
                    "narrow {name:?}: enum value {value} is refused by the upstream's schema"
                )));
            }
        }
        out.insert("enum".into(), Value::Array(values.clone()));
    }
    if let Some(ours) = narrow.minimum {
        for key in ["minimum", "exclusiveMinimum"] {
            if let Some(theirs) = bound(own, key)
                && (ours < theirs || (key == "exclusiveMinimum" && ours == theirs))
            {
                return Err(not_narrower("minimum", ours, theirs));
            }
        }
        out.insert("minimum".into(), ours.into());
    }
    if let Some(ours) = narrow.maximum {
        for key in ["maximum", "exclusiveMaximum"] {
            if let Some(theirs) = bound(own, key)
                && (ours > theirs || (key == "exclusiveMaximum" && ours == theirs))
            {
                return Err(not_narrower("maximum", ours, theirs));
            }
        }
        out.insert("maximum".into(), ours.into());
    }
    if let Some(ours) = narrow.min_length {
        if let Some(theirs) = bound(own, "minLength")
            && (ours as f64) < theirs
        {
            return Err(not_narrower("min_length", ours as f64, theirs));
        }
        out.insert("minLength".into(), ours.into());
    }
    if let Some(ours) = narrow.max_length {
        if let Some(theirs) = bound(own, "maxLength")
            && (ours as f64) > theirs
        {
            return Err(not_narrower("max_length", ours as f64, theirs));
        }
        out.insert("maxLength".into(), ours.into());
    }
    if let Some(pattern) = &narrow.pattern {
        match out.get("pattern").cloned() {
            // Both must match: the upstream's stays, ours is added.
            Some(theirs) => {
                let mut all = match out.remove("allOf") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                };
                all.push(serde_json::json!({ "pattern": theirs }));
                all.push(serde_json::json!({ "pattern": pattern }));
                out.remove("pattern");
                out.insert("allOf".into(), Value::Array(all));
            }
            None => {
                out.insert("pattern".into(), Value::String(pattern.clone()));
            }
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool() -> Tool {
        serde_json::from_value(json!({
            "name": "search",
            "description": "Searches issues.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "org": {"type": "string", "pattern": "^[a-z]+$"},
                    "query": {"type": "string", "maxLength": 200},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "state": {"type": "string", "enum": ["open", "closed", "all"]}
                },
                "required": ["org", "query"]
            }
        }))
        .unwrap()
    }

    fn config(text: &str) -> ShapeConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_shape_renames_rewrites_fixes_and_narrows() {
        let shaped = shape(
            &tool(),
            &config(
                r#"
                name = "find_issue"
                title = "Find an issue"
                description_append = "Only ACME's issues."
                fixed = { org = "acme" }
                [narrow.limit]
                maximum = 20
                [narrow.state]
                enum = ["open"]
                [narrow.query]
                pattern = "^[^*]*$"
                "#,
            ),
        )
        .unwrap();
        assert_eq!(shaped.tool.name, "find_issue");
        assert_eq!(shaped.tool.title.as_deref(), Some("Find an issue"));
        assert_eq!(
            shaped.tool.description.as_deref(),
            Some("Searches issues.\n\nOnly ACME's issues.")
        );
        assert_eq!(
            shaped.fixed,
            json!({"org": "acme"}).as_object().unwrap().clone()
        );
        let schema = Value::Object(shaped.tool.input_schema.clone());
        assert_eq!(schema.pointer("/properties/org"), None);
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(
            schema.pointer("/properties/limit/maximum"),
            Some(&json!(20.0))
        );
        assert_eq!(schema.pointer("/properties/limit/minimum"), Some(&json!(1)));
        assert_eq!(
            schema.pointer("/properties/state/enum"),
            Some(&json!(["open"]))
        );
        assert_eq!(
            schema.pointer("/properties/query/pattern"),
            Some(&json!("^[^*]*$"))
        );
        // What the shaped schema accepts, the upstream's does too.
        let upstream =
            toolgate_schema::CompiledSchema::compile(&Value::Object(tool().input_schema.clone()))
                .unwrap();
        let shown = toolgate_schema::CompiledSchema::compile(&schema).unwrap();
        let call = json!({"query": "crash", "limit": 20, "state": "open"});
        assert!(shown.is_valid(&call));
        let mut sent = call.as_object().unwrap().clone();
        sent.extend(shaped.fixed.clone());
        assert!(upstream.is_valid(&Value::Object(sent)));
        for wider in [
            json!({"query": "a", "limit": 21}),
            json!({"query": "a", "state": "all"}),
            json!({"query": "a*"}),
        ] {
            assert!(!shown.is_valid(&wider), "{wider}");
        }
    }

    #[test]
    fn a_shape_that_would_widen_or_send_what_the_upstream_refuses_is_named() {
        for (text, said) in [
            (
                r#"fixed = { org = "ACME" }"#,
                "fixed \"org\" = \"ACME\": the upstream's schema refuses that value",
            ),
            (
                r#"fixed = { team = "x" }"#,
                "fixed \"team\": the upstream's tool has no parameter \"team\"",
            ),
            (
                "[narrow.limit]\nmaximum = 500",
                "narrow \"limit\": maximum 500 is looser than the upstream's 100; a shape may only narrow",
            ),
            (
                "[narrow.limit]\nminimum = 0",
                "narrow \"limit\": minimum 0 is looser than the upstream's 1; a shape may only narrow",
            ),
            (
                "[narrow.query]\nmax_length = 1000",
                "narrow \"query\": max_length 1000 is looser than the upstream's 200; a shape may only narrow",
            ),
            (
                "[narrow.state]\nenum = [\"open\", \"stale\"]",
                "narrow \"state\": enum value \"stale\" is refused by the upstream's schema",
            ),
            (
                "[narrow.nope]\nmaximum = 1",
                "narrow \"nope\": the upstream's tool has no parameter \"nope\"",
            ),
        ] {
            assert_eq!(shape(&tool(), &config(text)).unwrap_err().0, said, "{text}");
        }
    }

    #[test]
    fn a_pattern_narrows_beside_the_upstreams_own() {
        let shaped = shape(&tool(), &config("[narrow.org]\npattern = \"^ac\"")).unwrap();
        let schema = Value::Object(shaped.tool.input_schema);
        let org = &schema["properties"]["org"];
        assert_eq!(
            org["allOf"],
            json!([{"pattern": "^[a-z]+$"}, {"pattern": "^ac"}])
        );
        let shown = toolgate_schema::CompiledSchema::compile(&schema).unwrap();
        assert!(shown.is_valid(&json!({"org": "acme", "query": "q"})));
        assert!(!shown.is_valid(&json!({"org": "beta", "query": "q"})));
        assert!(!shown.is_valid(&json!({"org": "AC", "query": "q"})));
    }
}
