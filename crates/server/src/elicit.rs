//! Typed elicitation: `ctx.elicit::<T>("message")` asks the user to fill
//! a form built from `T`'s schema and hands back a `T`.
//!
//! The form is the restricted schema the protocol allows: one flat object
//! whose properties are strings, numbers, integers, booleans or enums
//! (optional fields allowed). A `T` that cannot be such a form is a bug in
//! the tool: the call fails with an internal error and the reason is
//! logged. The multi-round mechanics stay hidden: an unanswered question
//! ends the round (`?` propagates it), and the retry finds the answer.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolgate_protocol::RpcError;

use crate::context::RequestContext;
use crate::mrtr::{ElicitAction, Inputs};
use crate::tool::{ToolError, schema_for};

/// What the user did with a typed form ([`RequestContext::elicit`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Elicitation<T> {
    /// Submitted: the form's values.
    Accepted(T),
    /// Explicitly declined.
    Declined,
    /// Dismissed without a choice.
    Cancelled,
}

/// String formats a form may carry.
const FORMATS: &[&str] = &["email", "uri", "date", "date-time"];

/// `T`'s schema as an elicitation form, or why it cannot be one.
pub(crate) fn form_schema<T: JsonSchema>() -> Result<Map<String, Value>, String> {
    let mut root = schema_for::<T>();
    root.remove("$schema");
    let defs = match root.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        return Err("a form must be a struct (a JSON object)".into());
    }
    let Some(Value::Object(properties)) = root.get_mut("properties") else {
        return Err("a form needs named fields".into());
    };
    for (name, property) in properties.iter_mut() {
        *property =
            field(property.clone(), &defs).map_err(|why| format!("field {name:?}: {why}"))?;
    }
    root.remove("additionalProperties");
    Ok(root)
}

/// `T`'s form, or the internal error a type that cannot be one is (the
/// reason is logged: it is the tool's bug, not the caller's).
fn form<T: JsonSchema>() -> Result<Map<String, Value>, ToolError> {
    form_schema::<T>().map_err(|why| {
        tracing::error!(form = std::any::type_name::<T>(), %why, "a form type cannot be elicited");
        ToolError::protocol(RpcError::internal())
    })
}

/// One field, with references inlined and `Option`'s null removed.
fn field(value: Value, defs: &Map<String, Value>) -> Result<Value, String> {
    let Value::Object(mut map) = resolve(value, defs) else {
        return Err("not a schema object".into());
    };
    // `Option<T>`: `anyOf: [T, null]` or `type: [t, "null"]`.
    if let Some(Value::Array(branches)) = map.get("anyOf").cloned() {
        let others: Vec<&Value> = branches
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if others.len() == 1 && branches.len() == 2 {
            map.remove("anyOf");
            if let Value::Object(inner) = resolve(others[0].clone(), defs) {
                for (k, v) in inner {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(Value::Array(types)) = map.get("type").cloned() {
        let named: Vec<&Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .collect();
        if named.len() == 1 {
            map.insert("type".into(), named[0].clone());
        }
    }
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !FORMATS.contains(&f))
    {
        map.remove("format");
    }
    match map.get("type").and_then(Value::as_str) {
        Some("string" | "number" | "integer" | "boolean") => {}
        Some("array") => {
            let items = map.get("items").cloned().unwrap_or(Value::Null);
            let items = resolve(items, defs);
            let choices = items.get("enum").is_some() || items.get("anyOf").is_some();
            if !choices {
                return Err(
                    "a list in a form must be a multiple choice (a Vec of a unit-variant enum)"
                        .into(),
                );
            }
            map.insert("items".into(), items);
        }
        _ if map.get("enum").is_some() || map.get("oneOf").is_some() => {
            map.entry("type").or_insert_with(|| Value::from("string"));
        }
        other => {
            return Err(format!(
                "{} cannot be a form field; use strings, numbers, booleans or unit-variant enums",
                other.unwrap_or("a nested value")
            ));
        }
    }
    Ok(Value::Object(map))
}

/// `value` with a local `$ref` replaced by its definition (siblings kept).
fn resolve(value: Value, defs: &Map<String, Value>) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    let target = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| defs.get(name))
        .cloned();
    if let Some(Value::Object(def)) = target {
        map.remove("$ref");
        for (k, v) in def {
            map.entry(k).or_insert(v);
        }
    }
    Value::Object(map)
}

impl RequestContext {
    /// Ask the user to fill a form built from `T` (a struct of strings,
    /// numbers, booleans and unit-variant enums, its doc comments as field
    /// descriptions) and get a `T` back.
    ///
    /// An unanswered question ends this round: return the error with `?`
    /// and the client asks the user and calls again, when this returns the
    /// answer. Questions are told apart by their message and form, so ask
    /// each one with the same message on every round. Fails with `-32021`
    /// when the client cannot elicit.
    ///
    /// ```no_run
    /// # use schemars::JsonSchema;
    /// # use serde::Deserialize;
    /// # use toolgate_server::{Elicitation, RequestContext, ToolError};
    /// #[derive(Deserialize, JsonSchema)]
    /// struct Confirm {
    ///     /// Send the payment now?
    ///     confirm: bool,
    /// }
    ///
    /// async fn pay(ctx: RequestContext) -> Result<String, ToolError> {
    ///     match ctx.elicit::<Confirm>("Pay 25.00 EUR?")? {
    ///         Elicitation::Accepted(Confirm { confirm: true }) => Ok("paid".into()),
    ///         _ => Ok("nothing was charged".into()),
    ///     }
    /// }
    /// ```
    pub fn elicit<T: DeserializeOwned + JsonSchema>(
        &self,
        message: &str,
    ) -> Result<Elicitation<T>, ToolError> {
        let schema = form::<T>()?;
        let key = question_key(message, &schema);
        let mut shared = self.inner.inputs.lock();
        let inputs = shared.get_or_insert_with(|| self.inputs());
        match inputs.ask_form(&key, message, schema)? {
            Some(answer) => Ok(answer),
            None => Err(match shared.take() {
                Some(inputs) => inputs.ask(),
                None => ToolError::protocol(RpcError::internal()),
            }),
        }
    }
}

impl Inputs {
    /// Ask for a form built from `T`, under `key` (see
    /// [`RequestContext::elicit`]): `Ok(None)` while unanswered, so that a
    /// handler can ask several questions at once and then call
    /// [`Inputs::ask`].
    pub fn elicit_form<T: DeserializeOwned + JsonSchema>(
        &mut self,
        key: &str,
        message: &str,
    ) -> Result<Option<Elicitation<T>>, ToolError> {
        let schema = form::<T>()?;
        self.ask_form(key, message, schema)
    }

    fn ask_form<T: DeserializeOwned>(
        &mut self,
        key: &str,
        message: &str,
        schema: Map<String, Value>,
    ) -> Result<Option<Elicitation<T>>, ToolError> {
        let Some(answer) = self.elicit(key, message, Value::Object(schema))? else {
            return Ok(None);
        };
        match answer.action {
            ElicitAction::Decline => Ok(Some(Elicitation::Declined)),
            ElicitAction::Cancel => Ok(Some(Elicitation::Cancelled)),
            ElicitAction::Accept => {
                let content = Value::Object(answer.content.unwrap_or_default());
                serde_path_to_error::deserialize(content)
                    .map(|v| Some(Elicitation::Accepted(v)))
                    .map_err(|e| {
                        ToolError::protocol(RpcError::invalid_params(format!(
                            "inputResponses.{key}: the answer does not fit the form at {}: {}",
                            e.path(),
                            e.inner()
                        )))
                    })
            }
        }
    }
}

/// A stable key for a question: the same message and form give the same
/// key on every round.
fn question_key(message: &str, schema: &Map<String, Value>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(message.as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(schema).unwrap_or_default());
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("form-{hex}")
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Size {
        Small,
        Large,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Order {
        /// How many.
        quantity: u32,
        size: Size,
        note: Option<String>,
        email: Option<String>,
        gift: bool,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Address {
        street: String,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Nested {
        address: Address,
    }

    #[test]
    fn structs_of_primitives_and_enums_become_flat_forms() {
        let form = form_schema::<Order>().unwrap_or_else(|e| panic!("{e}"));
        let p = &form["properties"];
        assert_eq!(p["quantity"]["type"], "integer");
        assert_eq!(p["quantity"]["description"], "How many.");
        assert_eq!(p["size"]["type"], "string");
        assert_eq!(p["size"]["enum"], json!(["small", "large"]));
        assert_eq!(p["note"]["type"], "string");
        assert_eq!(p["gift"]["type"], "boolean");
        assert!(form.get("$defs").is_none() && form.get("$schema").is_none());
        let required = form["required"].as_array().cloned().unwrap_or_default();
        assert!(required.contains(&json!("quantity")) && !required.contains(&json!("note")));
    }

    #[test]
    fn nested_values_cannot_be_forms() {
        let why = form_schema::<Nested>().err().unwrap_or_default();
        assert!(why.contains("address"), "{why}");
        assert!(form_schema::<u32>().is_err());
    }
}
