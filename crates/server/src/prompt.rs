//! Prompts: named message templates with string arguments.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use toolgate_protocol::types::{GetPromptResult, Prompt, PromptArgument};

use crate::auth::Visibility;
use crate::registry::Listed;
use crate::{RequestContext, ToolError};

type PromptFuture = Pin<Box<dyn Future<Output = Result<GetPromptResult, ToolError>> + Send>>;
type PromptFn = Arc<dyn Fn(HashMap<String, String>, RequestContext) -> PromptFuture + Send + Sync>;

/// Suggests values for an argument: `(argument name, partial value, other
/// arguments already given) -> candidates`, best first.
pub type Completer = Arc<dyn Fn(&str, &str, &HashMap<String, String>) -> Vec<String> + Send + Sync>;

/// [`Completer`], for suggestions that take a while to find (another
/// server's, a database's): `(argument name, partial value, other
/// arguments) -> candidates`.
pub type AsyncCompleter = Arc<
    dyn Fn(
            String,
            String,
            HashMap<String, String>,
        ) -> Pin<Box<dyn Future<Output = Vec<String>> + Send>>
        + Send
        + Sync,
>;

/// How a prompt or template completes its arguments.
#[derive(Clone)]
pub(crate) enum CompleteWith {
    Now(Completer),
    Later(AsyncCompleter),
}

/// A prompt with its handler.
#[derive(Clone)]
pub struct PromptEntry {
    pub(crate) prompt: Prompt,
    pub(crate) handler: PromptFn,
    pub(crate) visibility: Option<Visibility>,
    pub(crate) completer: Option<CompleteWith>,
}

impl PromptEntry {
    /// A prompt named `name`, rendered by `handler` from its arguments.
    /// Required arguments are checked before the handler runs.
    pub fn new<F, Fut>(name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(HashMap<String, String>, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<GetPromptResult, ToolError>> + Send + 'static,
    {
        Self {
            prompt: Prompt {
                name: name.into(),
                title: None,
                description: None,
                arguments: None,
                icons: None,
                meta: None,
            },
            handler: Arc::new(move |args, ctx| Box::pin(handler(args, ctx))),
            visibility: None,
            completer: None,
        }
    }

    /// A prompt defined by a wire [`Prompt`] (every field kept), for a
    /// server that re-offers another server's prompts (a gateway).
    pub fn from_prompt<F, Fut>(prompt: Prompt, handler: F) -> Self
    where
        F: Fn(HashMap<String, String>, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<GetPromptResult, ToolError>> + Send + 'static,
    {
        Self {
            prompt,
            ..Self::new(String::new(), handler)
        }
    }

    /// Description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.prompt.description = Some(description.into());
        self
    }

    /// Declare an argument.
    pub fn argument(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        required: bool,
    ) -> Self {
        self.prompt
            .arguments
            .get_or_insert_with(Vec::new)
            .push(PromptArgument {
                name: name.into(),
                title: None,
                description: Some(description.into()),
                required: Some(required),
            });
        self
    }

    /// Offer completions for this prompt's arguments (`completion/complete`).
    pub fn completer<F>(mut self, complete: F) -> Self
    where
        F: Fn(&str, &str, &HashMap<String, String>) -> Vec<String> + Send + Sync + 'static,
    {
        self.completer = Some(CompleteWith::Now(Arc::new(complete)));
        self
    }

    /// [`PromptEntry::completer`], answered asynchronously.
    pub fn completer_async<F, Fut>(mut self, complete: F) -> Self
    where
        F: Fn(String, String, HashMap<String, String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<String>> + Send + 'static,
    {
        self.completer = Some(CompleteWith::Later(Arc::new(move |a, v, o| {
            Box::pin(complete(a, v, o))
        })));
        self
    }

    /// Names of required arguments missing from `args`.
    pub(crate) fn missing_arguments(&self, args: &HashMap<String, String>) -> Vec<&str> {
        self.prompt
            .arguments
            .iter()
            .flatten()
            .filter(|a| a.required == Some(true) && !args.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect()
    }
}

impl Listed for PromptEntry {
    type Wire = Prompt;
    fn key(&self) -> &str {
        &self.prompt.name
    }
    fn visibility(&self) -> Option<&Visibility> {
        self.visibility.as_ref()
    }
    fn wire(&self) -> &Prompt {
        &self.prompt
    }
}
