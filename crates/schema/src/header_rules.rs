//! The `x-mcp-header` extension: which tool parameters are mirrored into
//! `Mcp-Param-{Name}` HTTP headers, and the rules a definition must follow.
//!
//! Servers check the rules when a tool is registered; clients check them on
//! every received definition and exclude a tool that breaks them. Both
//! sides use [`HeaderParam`] to go between argument values and header values.

use std::fmt;

use serde_json::{Map, Value};
use toolgate_protocol::header::{decode_header_value, encode_header_value};
use toolgate_protocol::quote::{quote, quote_json};

use crate::limits::{children, escape};

/// A header that does not agree with the arguments it mirrors: the text
/// says which header and how (the `-32001` error's detail).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HeaderMismatch(pub String);

/// The largest integer JSON numbers carry exactly (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// The primitive type of a mirrored parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `string`: sent as is (Base64 sentinel when not header-safe).
    String,
    /// `integer`: decimal.
    Integer,
    /// `boolean`: `true` / `false`.
    Boolean,
}

/// A parameter mirrored into a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderParam {
    /// The chain of `properties` keys leading to the parameter.
    pub path: Vec<String>,
    /// The `x-mcp-header` value (the `{Name}` of `Mcp-Param-{Name}`).
    pub name: String,
    /// Its type.
    pub kind: ParamKind,
}

/// Why a definition's `x-mcp-header` use is invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderRuleError {
    /// JSON pointer (within the input schema) of the offending annotation.
    pub location: String,
    /// The rule broken.
    pub reason: String,
}

impl fmt::Display for HeaderRuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "x-mcp-header at {}: {}",
            if self.location.is_empty() {
                "(root)"
            } else {
                &self.location
            },
            self.reason
        )
    }
}

impl std::error::Error for HeaderRuleError {}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// Every mirrored parameter of `input_schema`, or the first rule broken.
///
/// ```
/// use serde_json::json;
/// use toolgate_schema::header_rules::header_params;
/// let schema = json!({"type": "object", "properties": {
///     "region": {"type": "string", "x-mcp-header": "Region"}}});
/// let params = header_params(schema.as_object().unwrap()).unwrap();
/// assert_eq!(params[0].header_name(), "Mcp-Param-Region");
/// let bad = json!({"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}});
/// assert!(header_params(bad.as_object().unwrap()).is_err());
/// ```
pub fn header_params(
    input_schema: &Map<String, Value>,
) -> Result<Vec<HeaderParam>, HeaderRuleError> {
    let mut found = Vec::new();
    scan(input_schema, "", Some(Vec::new()), &mut found)?;
    for (i, a) in found.iter().enumerate() {
        if let Some(b) = found[..i]
            .iter()
            .find(|b| b.name.eq_ignore_ascii_case(&a.name))
        {
            return Err(HeaderRuleError {
                location: pointer_of(&a.path),
                reason: format!(
                    "{:?} is already used by /{}; names must be unique, ignoring case",
                    a.name,
                    b.path.join("/")
                ),
            });
        }
    }
    Ok(found)
}

fn pointer_of(path: &[String]) -> String {
    path.iter()
        .map(|p| format!("/properties/{}", escape(p)))
        .collect()
}

fn scan(
    schema: &Map<String, Value>,
    pointer: &str,
    path: Option<Vec<String>>,
    found: &mut Vec<HeaderParam>,
) -> Result<(), HeaderRuleError> {
    if let Some(annotation) = schema.get("x-mcp-header") {
        let error = |reason: String| HeaderRuleError {
            location: pointer.to_owned(),
            reason,
        };
        let path = match &path {
            Some(p) if !p.is_empty() => p.clone(),
            Some(_) => return Err(error("the schema root is not a parameter".into())),
            None => {
                return Err(error(
                    "only properties reachable from the root through \"properties\" alone may be mirrored (not inside items, anyOf/oneOf/allOf/not, if/then/else, $defs or $ref)".into(),
                ));
            }
        };
        let name = annotation
            .as_str()
            .ok_or_else(|| error("the value must be a string".into()))?;
        if name.is_empty() {
            return Err(error("the value must not be empty".into()));
        }
        if let Some(c) = name.chars().find(|c| !is_tchar(*c)) {
            return Err(error(format!(
                "{name:?} contains {c:?}; only HTTP token characters are allowed"
            )));
        }
        let kind = param_kind(schema).ok_or_else(|| {
            error("only string, integer and boolean parameters may be mirrored (never number, object or array; the type must be declared)".into())
        })?;
        found.push(HeaderParam {
            path,
            name: name.to_owned(),
            kind,
        });
    }
    let mut result = Ok(());
    children(schema, |step, child| {
        if result.is_err() {
            return;
        }
        let Value::Object(child) = child else { return };
        let child_path = match (&path, step.strip_prefix("/properties/")) {
            (Some(p), Some(name)) => {
                let mut p = p.clone();
                p.push(name.replace("~1", "/").replace("~0", "~"));
                Some(p)
            }
            _ => None,
        };
        result = scan(child, &format!("{pointer}{step}"), child_path, found);
    });
    result
}

fn param_kind(schema: &Map<String, Value>) -> Option<ParamKind> {
    let kind = |t: &str| match t {
        "string" => Some(ParamKind::String),
        "integer" => Some(ParamKind::Integer),
        "boolean" => Some(ParamKind::Boolean),
        _ => None,
    };
    match schema.get("type")? {
        Value::String(t) => kind(t),
        // `["string", "null"]`: an optional parameter; null omits the header.
        Value::Array(types) => {
            let non_null: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match non_null.as_slice() {
                [t] if types.len() <= 2 => kind(t),
                _ => None,
            }
        }
        _ => None,
    }
}

impl HeaderParam {
    /// `Mcp-Param-{Name}`.
    pub fn header_name(&self) -> String {
        format!("Mcp-Param-{}", self.name)
    }

    /// The argument value at this parameter's path (`None` when absent or null).
    pub fn value_in<'a>(&self, arguments: &'a Map<String, Value>) -> Option<&'a Value> {
        let (last, parents) = self.path.split_last()?;
        let mut current = arguments;
        for step in parents {
            current = current.get(step)?.as_object()?;
        }
        current.get(last).filter(|v| !v.is_null())
    }

    /// The header value a client sends for `value` (`None` if the value has
    /// the wrong type or is an unsafe integer).
    pub fn encode(&self, value: &Value) -> Option<String> {
        match (self.kind, value) {
            (ParamKind::String, Value::String(s)) => Some(encode_header_value(s).into_owned()),
            (ParamKind::Integer, Value::Number(n)) => {
                let i = n.as_i64()?;
                (i.abs() <= MAX_SAFE_INTEGER).then(|| i.to_string())
            }
            (ParamKind::Boolean, Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        }
    }

    /// Server side: compare a received header (if any) with the arguments.
    pub fn check(
        &self,
        header: Option<&[u8]>,
        arguments: &Map<String, Value>,
    ) -> Result<(), HeaderMismatch> {
        let header_name = self.header_name();
        let value = self.value_in(arguments);
        let raw = match (header, value) {
            (None, None) => return Ok(()),
            (None, Some(_)) => {
                return Err(HeaderMismatch(format!(
                    "{header_name} is required because the arguments carry /{}",
                    self.path.join("/")
                )));
            }
            (Some(_), None) => {
                return Err(HeaderMismatch(format!(
                    "{header_name} was sent but the arguments carry no value at /{}",
                    self.path.join("/")
                )));
            }
            (Some(raw), Some(_)) => raw,
        };
        let decoded =
            decode_header_value(raw).map_err(|e| HeaderMismatch(format!("{header_name} {e}")))?;
        let body = value.unwrap_or(&Value::Null);
        let matches = match (self.kind, body) {
            (ParamKind::String, Value::String(s)) => *s == decoded,
            (ParamKind::Integer, Value::Number(n)) => match n.as_i64() {
                Some(i) if i.abs() <= MAX_SAFE_INTEGER => integer_equals(&decoded, i),
                _ => {
                    return Err(HeaderMismatch(format!(
                        "/{} is not an integer in the safe range",
                        self.path.join("/")
                    )));
                }
            },
            (ParamKind::Boolean, Value::Bool(b)) => decoded == b.to_string(),
            _ => false,
        };
        if matches {
            Ok(())
        } else {
            Err(HeaderMismatch(format!(
                "{header_name} header value {} does not match body value {}",
                quote(&decoded),
                quote_json(body)
            )))
        }
    }
}

fn integer_equals(header: &str, body: i64) -> bool {
    let header = header.trim();
    if let Ok(i) = header.parse::<i64>() {
        return i == body;
    }
    // `42.0` equals `42`: compare numerically.
    header
        .parse::<f64>()
        .is_ok_and(|f| f.is_finite() && f.fract() == 0.0 && f == body as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(schema: Value) -> Result<Vec<HeaderParam>, HeaderRuleError> {
        header_params(schema.as_object().unwrap())
    }

    #[test]
    fn finds_nested_properties_and_optional_types() {
        let p = params(json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": ["integer", "null"], "x-mcp-header": "B"}}},
            "c": {"type": "boolean", "x-mcp-header": "C"}
        }}))
        .unwrap();
        assert_eq!(p[0].path, ["a", "b"]);
        assert_eq!(p[0].kind, ParamKind::Integer);
        assert_eq!(p[1].kind, ParamKind::Boolean);
    }

    #[test]
    fn each_rule_is_enforced() {
        let cases = [
            (json!({"type": "string", "x-mcp-header": ""}), "empty"),
            (
                json!({"type": "string", "x-mcp-header": "Bad Name"}),
                "token",
            ),
            (
                json!({"type": "string", "x-mcp-header": "Bad\r\nX"}),
                "token",
            ),
            (json!({"type": "number", "x-mcp-header": "N"}), "number"),
            (json!({"type": "object", "x-mcp-header": "O"}), "number"),
            (json!({"x-mcp-header": "U"}), "declared"),
            (json!({"type": "string", "x-mcp-header": 5}), "string"),
        ];
        for (prop, needle) in cases {
            let e = params(json!({"type": "object", "properties": {"p": prop}})).unwrap_err();
            assert!(e.to_string().contains(needle), "{e}");
            assert_eq!(e.location, "/properties/p");
        }
        let dup = params(json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "Region"}, "b": {"type": "string", "x-mcp-header": "region"}}}));
        assert!(dup.unwrap_err().reason.contains("unique"));
        for unreachable in [
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"type": "object", "$defs": {"a": {"type": "string", "x-mcp-header": "A"}}, "properties": {"a": {"$ref": "#/$defs/a"}}}),
            json!({"type": "object", "if": {"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"type": "string", "x-mcp-header": "Root"}),
        ] {
            assert!(params(unreachable.clone()).is_err(), "{unreachable}");
        }
    }

    #[test]
    fn server_comparison() {
        let p = params(json!({"type": "object", "properties": {
            "r": {"type": "string", "x-mcp-header": "R"}, "n": {"type": "integer", "x-mcp-header": "N"},
            "f": {"type": "boolean", "x-mcp-header": "F"}}}))
        .unwrap();
        let args = json!({"r": "Hello, 世界", "n": 42, "f": true});
        let args = args.as_object().unwrap();
        assert!(
            p[0].check(Some(b"=?base64?SGVsbG8sIOS4lueVjA==?="), args)
                .is_ok()
        );
        assert!(p[0].check(Some(b"Hello"), args).is_err());
        assert!(p[1].check(Some(b"42"), args).is_ok());
        assert!(p[1].check(Some(b"42.0"), args).is_ok());
        assert!(p[1].check(Some(b"43"), args).is_err());
        assert!(p[2].check(Some(b"true"), args).is_ok());
        assert!(p[2].check(Some(b"True"), args).is_err());
        assert!(
            p[0].check(None, args).is_err(),
            "missing header for a present value"
        );
        let empty = Map::new();
        assert!(
            p[0].check(Some(b"x"), &empty).is_err(),
            "header for an absent value"
        );
        assert!(p[0].check(None, &empty).is_ok());
        let null = json!({"r": null});
        assert!(p[0].check(None, null.as_object().unwrap()).is_ok());
    }

    #[test]
    fn client_encoding() {
        let p = params(json!({"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}})).unwrap();
        assert_eq!(p[0].encode(&json!(-7)).as_deref(), Some("-7"));
        assert_eq!(p[0].encode(&json!(9007199254740993_i64)), None);
    }
}
