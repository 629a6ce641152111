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
    parts: Vec<Part>,
    pub(crate) read: ReadFn,
    pub(crate) visibility: Option<Visibility>,
    pub(crate) completer: Option<crate::prompt::Completer>,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Literal(String),
    Var { name: String, reserved: bool },
}

impl TemplateEntry {
    /// A template whose matching URIs `read` serves; it receives the
    /// variables the URI matched.
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
        self.completer = Some(Arc::new(complete));
        self
    }

    /// The variables `uri` binds, if it matches.
    pub(crate) fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        match_parts(&self.parts, uri)
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

fn parse_template(template: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        if open > 0 {
            parts.push(Part::Literal(rest[..open].to_owned()));
        }
        let expr = &rest[open + 1..open + close];
        let (reserved, name) = match expr.strip_prefix('+') {
            Some(name) => (true, name),
            None => (false, expr),
        };
        parts.push(Part::Var {
            name: name.to_owned(),
            reserved,
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_owned()));
    }
    parts
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
                vars.insert(name.clone(), value.to_owned());
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_simple_and_reserved_expressions() {
        let p = parse_template("test://template/{id}/data");
        assert_eq!(
            match_parts(&p, "test://template/42/data").map(|v| v["id"].clone()),
            Some("42".into())
        );
        assert_eq!(match_parts(&p, "test://template/4/2/data"), None);
        assert_eq!(match_parts(&p, "test://template//data"), None);
        let p = parse_template("file:///{+path}");
        assert_eq!(
            match_parts(&p, "file:///a/b.txt").map(|v| v["path"].clone()),
            Some("a/b.txt".into())
        );
    }
}
