//! Resources and resource templates.
//!
//! A resource is a URI the server can read; a template (RFC 6570, simple
//! `{var}` and reserved `{+var}` expressions) covers a family of URIs and
//! receives the variables it matched.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use toolgate_protocol::types::{Resource, ResourceContents, ResourceTemplate};

use crate::auth::Visibility;
use crate::registry::Listed;
use crate::{AuthContext, RequestContext, ToolError};

type ReadFuture = Pin<Box<dyn Future<Output = Result<Vec<ResourceContents>, ToolError>> + Send>>;
type ReadFn =
    Arc<dyn Fn(String, HashMap<String, String>, RequestContext) -> ReadFuture + Send + Sync>;

/// A resource with its reader.
#[derive(Clone)]
pub struct ResourceEntry {
    pub(crate) resource: Resource,
    pub(crate) read: ReadFn,
    pub(crate) visibility: Option<Visibility>,
}

impl ResourceEntry {
    /// A resource whose contents `read` produces.
    ///
    /// ```
    /// use toolgate_protocol::types::{Resource, ResourceContents};
    /// use toolgate_server::ResourceEntry;
    /// let entry = ResourceEntry::new(Resource::new("test://hello", "hello"), |uri, _ctx| async move {
    ///     Ok(vec![ResourceContents::text(uri, Some("text/plain"), "Hello")])
    /// });
    /// # let _ = entry;
    /// ```
    pub fn new<F, Fut>(resource: Resource, read: F) -> Self
    where
        F: Fn(String, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<ResourceContents>, ToolError>> + Send + 'static,
    {
        let read: ReadFn = Arc::new(move |uri, _vars, ctx| Box::pin(read(uri, ctx)));
        Self {
            resource,
            read,
            visibility: None,
        }
    }

    /// Show the resource only to callers for which `rule` holds.
    pub fn visible_when<F>(mut self, rule: F) -> Self
    where
        F: Fn(Option<&AuthContext>) -> bool + Send + Sync + 'static,
    {
        self.visibility = Some(Arc::new(rule));
        self
    }
}

impl Listed for ResourceEntry {
    type Wire = Resource;
    fn key(&self) -> &str {
        &self.resource.uri
    }
    fn visibility(&self) -> Option<&Visibility> {
        self.visibility.as_ref()
    }
    fn wire(&self) -> &Resource {
        &self.resource
    }
}

/// A resource template with its reader.
#[derive(Clone)]
pub struct TemplateEntry {
    pub(crate) template: ResourceTemplate,
    /// The parsed template, or why it cannot be served (refused when the
    /// template is registered).
    parts: Result<Vec<Part>, String>,
    pub(crate) read: ReadFn,
    pub(crate) visibility: Option<Visibility>,
    pub(crate) completer: Option<crate::prompt::CompleteWith>,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Literal(String),
    Var { name: String, reserved: bool },
}

impl TemplateEntry {
    /// A template whose matching URIs `read` serves; it receives the
    /// variables the URI matched, percent-decoded. Supported expressions are
    /// `{var}` (no `/` in the value) and `{+var}` (any characters); any other
    /// RFC 6570 form is refused when the server is built.
    pub fn new<F, Fut>(template: ResourceTemplate, read: F) -> Self
    where
        F: Fn(String, HashMap<String, String>, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<ResourceContents>, ToolError>> + Send + 'static,
    {
        let parts = parse_template(&template.uri_template);
        let read: ReadFn = Arc::new(move |uri, vars, ctx| Box::pin(read(uri, vars, ctx)));
        Self {
            template,
            parts,
            read,
            visibility: None,
            completer: None,
        }
    }

    /// Offer completions for the template's variables (`completion/complete`).
    pub fn completer<F>(mut self, complete: F) -> Self
    where
        F: Fn(&str, &str, &HashMap<String, String>) -> Vec<String> + Send + Sync + 'static,
    {
        self.completer = Some(crate::prompt::CompleteWith::Now(Arc::new(complete)));
        self
    }

    /// [`TemplateEntry::completer`], answered asynchronously.
    pub fn completer_async<F, Fut>(mut self, complete: F) -> Self
    where
        F: Fn(String, String, HashMap<String, String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<String>> + Send + 'static,
    {
        self.completer = Some(crate::prompt::CompleteWith::Later(Arc::new(
            move |a, v, o| Box::pin(complete(a, v, o)),
        )));
        self
    }

    /// The variables `uri` binds, percent-decoded, if it matches.
    pub(crate) fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        match_parts(self.parts.as_ref().ok()?, uri)
    }

    /// Why the template cannot be registered, if it cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        self.parts.as_ref().err().map(|why| {
            format!(
                "resource template {:?} is not supported: {why}",
                self.template.uri_template
            )
        })
    }
}

impl Listed for TemplateEntry {
    type Wire = ResourceTemplate;
    fn key(&self) -> &str {
        &self.template.uri_template
    }
    fn visibility(&self) -> Option<&Visibility> {
        self.visibility.as_ref()
    }
    fn wire(&self) -> &ResourceTemplate {
        &self.template
    }
}

/// Split a template into literals and variables, refusing what the matcher
/// cannot invert: RFC 6570 operators other than `+`, lists of variables,
/// prefix and explode modifiers, and two variables with nothing between them.
fn parse_template(template: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err("it has a '}' with no '{' before it".into());
        }
        let Some(close) = rest[open..].find('}') else {
            return Err("it has a '{' that is never closed".into());
        };
        if open > 0 {
            parts.push(Part::Literal(rest[..open].to_owned()));
        }
        let expr = &rest[open + 1..open + close];
        let (reserved, name) = match expr.strip_prefix('+') {
            Some(name) => (true, name),
            None => (false, expr),
        };
        if let Some(op) = name.chars().next().filter(|c| "#./;?&=,!@|+".contains(*c)) {
            return Err(format!(
                "the operator {op:?} in {{{expr}}} is not supported (only {{var}} and {{+var}} are)"
            ));
        }
        if name.is_empty() {
            return Err("it has an empty expression {}".into());
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '%'))
        {
            return Err(format!(
                "{{{expr}}} uses {bad:?}, which is not supported: one variable per expression, \
                 without prefix (:n) or explode (*) modifiers"
            ));
        }
        if matches!(parts.last(), Some(Part::Var { .. })) {
            return Err(format!(
                "{{{expr}}} follows another variable directly, so a URI could not be split between them"
            ));
        }
        parts.push(Part::Var {
            name: name.to_owned(),
            reserved,
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_owned()));
    }
    Ok(parts)
}

fn match_parts(parts: &[Part], uri: &str) -> Option<HashMap<String, String>> {
    let mut vars = HashMap::new();
    let mut rest = uri;
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
            Part::Var { name, reserved } => {
                // A variable runs to the next literal (or the end).
                let end = match parts.get(i + 1) {
                    Some(Part::Literal(next)) => rest.find(next.as_str())?,
                    _ => rest.len(),
                };
                let value = &rest[..end];
                if value.is_empty() || (!reserved && value.contains('/')) {
                    return None;
                }
                vars.insert(name.clone(), percent_decode(value)?);
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(vars)
}

/// Undo the percent-encoding that expansion applied; `None` for a broken
/// escape or bytes that are not UTF-8 (such a URI matches no template).
fn percent_decode(value: &str) -> Option<String> {
    if !value.contains('%') {
        return Some(value.to_owned());
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_simple_and_reserved_expressions() {
        let p = parse_template("test://template/{id}/data").unwrap();
        assert_eq!(
            match_parts(&p, "test://template/42/data").map(|v| v["id"].clone()),
            Some("42".into())
        );
        assert_eq!(match_parts(&p, "test://template/4/2/data"), None);
        assert_eq!(match_parts(&p, "test://template//data"), None);
        let p = parse_template("file:///{+path}").unwrap();
        assert_eq!(
            match_parts(&p, "file:///a/b.txt").map(|v| v["path"].clone()),
            Some("a/b.txt".into())
        );
    }

    #[test]
    fn matched_values_are_percent_decoded() {
        let p = parse_template("test://users/{name}/files/{+path}").unwrap();
        let vars = match_parts(&p, "test://users/J%C3%BCrgen%20M/files/a%2Fb/c%25d").unwrap();
        assert_eq!(vars["name"], "Jürgen M");
        assert_eq!(vars["path"], "a/b/c%d");
        // A broken escape or bytes that are not UTF-8 match nothing.
        assert_eq!(match_parts(&p, "test://users/%zz/files/x"), None);
        assert_eq!(match_parts(&p, "test://users/%ff/files/x"), None);
        assert_eq!(match_parts(&p, "test://users/%4/files/x"), None);
    }

    #[test]
    fn unsupported_template_forms_are_refused_with_the_reason() {
        for (template, says) in [
            ("test://{#frag}", "operator '#'"),
            ("test://x{?q,page}", "operator '?'"),
            ("test://x{/seg}", "operator '/'"),
            ("test://{a,b}", "one variable per expression"),
            ("test://{name:3}", "prefix (:n)"),
            ("test://{list*}", "explode (*)"),
            ("test://{a}{b}", "follows another variable"),
            ("test://{open", "never closed"),
            ("test://close}", "no '{'"),
            ("test://{}", "empty expression"),
        ] {
            let why = parse_template(template).unwrap_err();
            assert!(why.contains(says), "{template}: {why}");
        }
    }
}
