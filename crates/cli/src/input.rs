//! Answering a server's questions during `toolgate call`: form
//! elicitations field by field on a terminal or from `--answer`, URL
//! elicitations as a link the person opens themselves, and roots (the
//! working directory unless `--root` names others, none with `--no-roots`).
//!
//! Every question names the server that asks, shows its text cleaned of
//! terminal tricks, and can be declined or cancelled; a form's answers are
//! shown for review before they are sent, and checked against the
//! requested schema (a server's `--answer` is checked the same way).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_client::{BoxFuture, ClientError, InputHandler};
use toolgate_protocol::types::{
    ClientCapabilities, ElicitMode, ElicitRequestParams, ElicitResult, ListRootsResult, Root,
};

use crate::errln;
use crate::term::{self, ask, clean, one_line};

/// How questions are answered.
#[derive(Clone, Debug, Default)]
pub struct Answers {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The server's name, shown with every question.
    server: String,
    /// `--answer FIELD=JSON`: fills that field of any form.
    given: BTreeMap<String, Value>,
    /// `--decline`: decline every question.
    decline: bool,
    /// A person can be asked.
    interactive: bool,
    /// Declare the capabilities at all (only `call` answers questions).
    enabled: bool,
    /// Declare what the gateway declares to its upstreams, answer nothing.
    as_gateway: bool,
    /// The roots offered; `None` declares no roots capability.
    roots: Option<Vec<PathBuf>>,
    /// Required fields a form asked for that nobody could answer (no
    /// terminal, no `--answer`): the form was declined for them.
    unanswered: parking_lot::Mutex<Vec<String>>,
}

impl Answers {
    /// Answers for `call`. `roots`: the directories offered as roots
    /// (`None`: no roots capability).
    pub fn new(
        server: &str,
        given: BTreeMap<String, Value>,
        decline: bool,
        roots: Option<Vec<PathBuf>>,
    ) -> Self {
        Answers {
            inner: Arc::new(Inner {
                server: server.to_owned(),
                given,
                decline,
                interactive: term::interactive(),
                enabled: true,
                as_gateway: false,
                roots,
                unanswered: parking_lot::Mutex::default(),
            }),
        }
    }

    /// The required fields of forms declined because nobody could answer
    /// them (empty when every form was answered or declined by choice).
    pub fn unanswered(&self) -> Vec<String> {
        self.inner.unanswered.lock().clone()
    }

    /// For commands that only list: no input capabilities declared.
    pub fn none() -> Self {
        Self::default()
    }

    /// For commands that review or lock what `toolgate serve` will offer:
    /// the capabilities the gateway declares to its upstreams (a server
    /// may list more tools to such a client), and every question refused,
    /// as the gateway refuses those that belong to no call.
    pub fn as_gateway() -> Self {
        Answers {
            inner: Arc::new(Inner {
                as_gateway: true,
                ..Inner::default()
            }),
        }
    }
}

/// Parse `FIELD=JSON` (a value that is not JSON is taken as a string, so
/// `--answer name=Ada` works).
pub fn parse_answer(text: &str) -> Result<(String, Value), String> {
    let Some((field, value)) = text.split_once('=') else {
        return Err(format!(
            "{text:?} is not FIELD=VALUE (for example --answer confirm=true)"
        ));
    };
    if field.is_empty() {
        return Err(format!("{text:?} has no field name before '='"));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((field.to_owned(), value))
}

fn declined(why: &str) -> Value {
    errln!("toolgate: {why}");
    json!({"action": "decline"})
}

impl InputHandler for Answers {
    fn capabilities(&self) -> ClientCapabilities {
        if self.inner.as_gateway {
            return toolgate_gateway::declared_capabilities();
        }
        if !self.inner.enabled {
            return ClientCapabilities::default();
        }
        ClientCapabilities {
            elicitation: Some(
                serde_json::from_value(json!({"form": {}, "url": {}})).unwrap_or_default(),
            ),
            roots: self.inner.roots.as_ref().map(|_| Map::new()),
            ..Default::default()
        }
    }

    fn elicit(
        &self,
        request: ElicitRequestParams,
    ) -> BoxFuture<'_, Result<ElicitResult, ClientError>> {
        Box::pin(async move {
            let inner = &self.inner;
            if inner.as_gateway {
                return Err(ClientError::InputUnavailable("elicitation".into()));
            }
            errln!("\n{} asks: {}", inner.server, clean(&request.message));
            // The prompts below read the request as the JSON it came as.
            let params = serde_json::to_value(&request).unwrap_or_default();
            let answer = if inner.decline {
                declined("declined (--decline)")
            } else {
                match request.mode {
                    ElicitMode::Url => url_mode(inner, &params).await,
                    ElicitMode::Form => form_mode(inner, &params).await,
                }
            };
            serde_json::from_value(answer)
                .map_err(|e| ClientError::InvalidResponse(format!("elicitation answer: {e}")))
        })
    }

    fn roots(&self) -> BoxFuture<'_, Result<ListRootsResult, ClientError>> {
        Box::pin(async {
            let Some(dirs) = &self.inner.roots else {
                return Err(ClientError::InputUnavailable("roots".into()));
            };
            let roots = dirs
                .iter()
                .map(|dir| {
                    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
                    let name = dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "/".into());
                    Root {
                        uri: file_uri(&dir),
                        name: Some(name),
                        extra: Map::new(),
                    }
                })
                .collect();
            Ok(ListRootsResult {
                roots,
                extra: Map::new(),
            })
        })
    }
}

/// `file://` URI of a directory, percent-encoded.
fn file_uri(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    let mut uri = String::from("file://");
    if !text.starts_with('/') {
        uri.push('/');
    }
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(b as char)
            }
            b'\\' => uri.push('/'),
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri
}

async fn url_mode(inner: &Inner, params: &Value) -> Value {
    let Some(url) = params.get("url").and_then(Value::as_str) else {
        return declined("declined: the URL request has no url");
    };
    let host = url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
        .map(|authority| authority.rsplit('@').next().unwrap_or(authority))
        .unwrap_or("");
    errln!("  link:   {}", clean(url));
    errln!("  domain: {}", one_line(host));
    if host.split('.').any(|label| label.starts_with("xn--")) || !host.is_ascii() {
        errln!(
            "  warning: the domain uses internationalized characters (punycode); check it is the site you expect"
        );
    }
    if !url.starts_with("https://") {
        errln!("  warning: not an https link");
    }
    if !inner.interactive {
        return declined(
            "declined: a link must be opened by a person; run on a terminal to answer",
        );
    }
    errln!("  toolgate does not open links. Open it yourself in a browser if you trust it.");
    match ask("  Done? [Enter] = accept, n = decline, c = cancel: ".into())
        .await
        .as_deref()
        .map(str::trim)
    {
        Some("" | "y" | "yes") => json!({"action": "accept"}),
        Some("c" | "cancel") | None => json!({"action": "cancel"}),
        _ => json!({"action": "decline"}),
    }
}

/// One field of a form.
struct Field<'a> {
    name: &'a str,
    schema: &'a Value,
    required: bool,
}

async fn form_mode(inner: &Inner, params: &Value) -> Value {
    let schema = params.get("requestedSchema").unwrap_or(&Value::Null);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let fields: Vec<Field<'_>> = properties
        .iter()
        .map(|(name, schema)| Field {
            name,
            schema,
            required: required.contains(&name.as_str()),
        })
        .collect();
    let mut content = Map::new();
    let mut missing = Vec::new();
    for field in &fields {
        if let Some(value) = inner.given.get(field.name) {
            if let Err(why) = check(field, value) {
                return declined(&format!(
                    "declined: --answer {}: {why}",
                    one_line(field.name)
                ));
            }
            content.insert(field.name.to_owned(), value.clone());
        } else if !inner.interactive {
            // A required field is a question for a person: its default is
            // no answer (an approval form's `approve` defaults to false).
            match field.schema.get("default") {
                _ if field.required => missing.push(one_line(field.name)),
                Some(default) => {
                    content.insert(field.name.to_owned(), default.clone());
                }
                None => {}
            }
        }
    }
    if !missing.is_empty() {
        inner.unanswered.lock().extend(missing.iter().cloned());
        return declined(&format!(
            "declined: no terminal to ask on and no answer for {}; pass --answer FIELD=JSON for each",
            missing.join(", ")
        ));
    }
    if !inner.interactive {
        return json!({"action": "accept", "content": content});
    }
    loop {
        for field in fields.iter().filter(|f| !inner.given.contains_key(f.name)) {
            match prompt(field, content.get(field.name)).await {
                Prompted::Value(Some(v)) => {
                    content.insert(field.name.to_owned(), v);
                }
                Prompted::Value(None) => {
                    content.remove(field.name);
                }
                Prompted::Decline => return json!({"action": "decline"}),
                Prompted::Cancel => return json!({"action": "cancel"}),
            }
        }
        errln!(
            "  answers: {}",
            one_line(&Value::Object(content.clone()).to_string())
        );
        match ask("  Send these answers? [Y]es, e = edit, n = decline, c = cancel: ".into())
            .await
            .as_deref()
            .map(str::trim)
        {
            Some("" | "y" | "Y" | "yes") => return json!({"action": "accept", "content": content}),
            Some("e" | "edit") => continue,
            Some("c" | "cancel") | None => return json!({"action": "cancel"}),
            _ => return json!({"action": "decline"}),
        }
    }
}

enum Prompted {
    Value(Option<Value>),
    Decline,
    Cancel,
}

fn choices(schema: &Value) -> Vec<(Value, String)> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let titles = schema.get("enumNames").and_then(Value::as_array);
        return values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let title = titles
                    .and_then(|t| t.get(i))
                    .and_then(Value::as_str)
                    .map(one_line)
                    .unwrap_or_else(|| display(v));
                (v.clone(), title)
            })
            .collect();
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return options
                .iter()
                .filter_map(|o| {
                    let value = o.get("const")?.clone();
                    let title = o
                        .get("title")
                        .and_then(Value::as_str)
                        .map(one_line)
                        .unwrap_or_else(|| display(&value));
                    Some((value, title))
                })
                .collect();
        }
    }
    Vec::new()
}

fn display(v: &Value) -> String {
    match v {
        Value::String(s) => one_line(s),
        other => one_line(&other.to_string()),
    }
}

async fn prompt(field: &Field<'_>, current: Option<&Value>) -> Prompted {
    let schema = field.schema;
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    let title = schema
        .get("title")
        .and_then(Value::as_str)
        .map(one_line)
        .unwrap_or_else(|| one_line(field.name));
    let items = schema.get("items").unwrap_or(&Value::Null);
    let options = if kind == "array" {
        choices(items)
    } else {
        choices(schema)
    };
    errln!();
    errln!(
        "  {title}{}",
        if field.required { " (required)" } else { "" }
    );
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        errln!("    {}", one_line(d));
    }
    for (i, (_, label)) in options.iter().enumerate() {
        errln!("    {}) {label}", i + 1);
    }
    let default = current.or_else(|| schema.get("default"));
    let hint = match (kind, options.is_empty()) {
        ("boolean", _) => "y/n".to_owned(),
        ("array", false) => "numbers, comma-separated".to_owned(),
        (_, false) => "number".to_owned(),
        ("integer", _) => "whole number".to_owned(),
        ("number", _) => "number".to_owned(),
        _ => schema
            .get("format")
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_else(|| "text".into()),
    };
    loop {
        let shown_default = match default {
            Some(Value::Bool(b)) => format!(" [{}]", if *b { "y" } else { "n" }),
            Some(d) => format!(" [{}]", display(d)),
            None => String::new(),
        };
        let Some(line) = ask(format!("    {hint}{shown_default} (!decline, !cancel): ")).await
        else {
            return Prompted::Cancel;
        };
        let line = line.trim();
        match line {
            "!decline" => return Prompted::Decline,
            "!cancel" => return Prompted::Cancel,
            "" => match default {
                Some(d) => return Prompted::Value(Some(d.clone())),
                None if !field.required => return Prompted::Value(None),
                None => {
                    errln!("    an answer is required");
                    continue;
                }
            },
            _ => {}
        }
        let value = match parse(kind, &options, line) {
            Ok(v) => v,
            Err(why) => {
                errln!("    {why}");
                continue;
            }
        };
        match check(field, &value) {
            Ok(()) => return Prompted::Value(Some(value)),
            Err(why) => errln!("    {why}"),
        }
    }
}

fn parse(kind: &str, options: &[(Value, String)], line: &str) -> Result<Value, String> {
    let pick = |text: &str| -> Result<Value, String> {
        text.trim()
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| options.get(i))
            .map(|(v, _)| v.clone())
            .ok_or_else(|| format!("choose a number from 1 to {}", options.len()))
    };
    match kind {
        "array" if !options.is_empty() => line
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(pick)
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        _ if !options.is_empty() => pick(line),
        "boolean" => match line {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("answer y or n".into()),
        },
        "integer" => line
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "enter a whole number".into()),
        "number" => line
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| "enter a number".into()),
        _ => Ok(Value::String(line.to_owned())),
    }
}

/// Check an answer against its field's schema: the choices (named by
/// their titles, as they were offered), then everything else (type,
/// length, range, format) by the same bounded validator that checks tool
/// arguments, asserting formats as a form should.
fn check(field: &Field<'_>, value: &Value) -> Result<(), String> {
    let schema = field.schema;
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    let options = if kind == "array" {
        choices(schema.get("items").unwrap_or(&Value::Null))
    } else {
        choices(schema)
    };
    if !options.is_empty() {
        let allowed = |v: &Value| options.iter().any(|(o, _)| o == v);
        let all = match value {
            Value::Array(items) => items.iter().all(allowed),
            v => allowed(v),
        };
        if !all {
            let names: Vec<String> = options.iter().map(|(v, _)| display(v)).collect();
            return Err(format!("choose from {}", names.join(", ")));
        }
    }
    let compiled = toolgate_schema::CompiledSchema::compile_asserting_formats(schema)
        .map_err(|e| format!("the server asked with a schema that cannot be checked ({e})"))?;
    compiled.validate(value).map_err(|violations| {
        violations
            .first()
            .map(|v| v.expected.clone())
            .unwrap_or_else(|| "not what the form asks for".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'a>(schema: &'a Value) -> Field<'a> {
        Field {
            name: "f",
            schema,
            required: true,
        }
    }

    #[test]
    fn answers_are_checked_against_the_requested_schema() {
        let s = json!({"type": "string", "maxLength": 3});
        assert!(check(&field(&s), &json!("abc")).is_ok());
        assert!(check(&field(&s), &json!("abcd")).is_err());
        assert!(check(&field(&s), &json!(1)).is_err());
        let e = json!({"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}]});
        assert!(check(&field(&e), &json!("#f00")).is_ok());
        assert!(check(&field(&e), &json!("Red")).is_err());
        let m = json!({"type": "array", "items": {"enum": ["a", "b"]}});
        assert!(check(&field(&m), &json!(["a", "b"])).is_ok());
        assert!(check(&field(&m), &json!(["c"])).is_err());
        let n = json!({"type": "integer", "minimum": 1, "maximum": 9});
        assert!(check(&field(&n), &json!(5)).is_ok());
        assert!(check(&field(&n), &json!(10)).is_err());
        assert!(check(&field(&n), &json!(1.5)).is_err());
        let d = json!({"type": "string", "format": "date"});
        assert!(check(&field(&d), &json!("2026-12-01")).is_ok());
        assert!(check(&field(&d), &json!("tomorrow")).is_err());
        let email = json!({"type": "string", "format": "email"});
        assert!(check(&field(&email), &json!("ada@example.com")).is_ok());
        assert_eq!(
            check(&field(&email), &json!("ada at example")),
            Err("a valid email".into())
        );
        let short = json!({"type": "string", "maxLength": 3});
        assert_eq!(
            check(&field(&short), &json!("abcd")),
            Err("at most 3 characters".into())
        );
    }

    #[test]
    fn typed_input_is_parsed_by_kind() {
        let options = vec![(json!("x"), "X".to_owned()), (json!("y"), "Y".to_owned())];
        assert_eq!(parse("string", &options, "2"), Ok(json!("y")));
        assert_eq!(parse("array", &options, "1, 2"), Ok(json!(["x", "y"])));
        assert!(parse("string", &options, "3").is_err());
        assert_eq!(parse("boolean", &[], "y"), Ok(json!(true)));
        assert_eq!(parse("integer", &[], "42"), Ok(json!(42)));
        assert!(parse("integer", &[], "4.2").is_err());
    }

    #[test]
    fn answers_given_on_the_command_line_parse_as_json_or_text() {
        assert_eq!(parse_answer("n=3"), Ok(("n".into(), json!(3))));
        assert_eq!(parse_answer("name=Ada"), Ok(("name".into(), json!("Ada"))));
        assert!(parse_answer("nothing").is_err());
        assert!(parse_answer("=1").is_err());
    }

    #[test]
    fn roots_are_file_uris() {
        assert_eq!(
            file_uri(std::path::Path::new("/home/a b/x")),
            "file:///home/a%20b/x"
        );
    }
}
