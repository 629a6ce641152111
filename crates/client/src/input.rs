//! What the application supplies: answers to a server's input requests
//! (elicitation, sampling, roots) and approval of tool calls.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use toolgate_protocol::types::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ListRootsResult, Tool,
};

use crate::ClientError;

/// A boxed future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Answers the server's input requests: in multi round-trip requests, in
/// tasks, and a legacy server's requests.
///
/// Each method receives the typed request and returns the typed answer.
/// The defaults refuse, so declare in [`InputHandler::capabilities`] only
/// what you implement.
///
/// ```
/// use toolgate_client::{BoxFuture, ClientError, InputHandler};
/// use toolgate_protocol::types::{ClientCapabilities, ElicitRequestParams, ElicitResult};
///
/// /// Says yes to every form.
/// struct Yes;
///
/// impl InputHandler for Yes {
///     fn capabilities(&self) -> ClientCapabilities {
///         ClientCapabilities { elicitation: Some(Default::default()), ..Default::default() }
///     }
///     fn elicit(&self, request: ElicitRequestParams) -> BoxFuture<'_, Result<ElicitResult, ClientError>> {
///         Box::pin(async move {
///             println!("the server asks: {}", request.message);
///             let mut content = serde_json::Map::new();
///             content.insert("confirm".into(), true.into());
///             Ok(ElicitResult::accept(content))
///         })
///     }
/// }
/// ```
pub trait InputHandler: Send + Sync + 'static {
    /// The capabilities this handler provides (sent on every request).
    fn capabilities(&self) -> ClientCapabilities {
        ClientCapabilities::default()
    }

    /// Answer an `elicitation/create`.
    fn elicit(
        &self,
        _request: ElicitRequestParams,
    ) -> BoxFuture<'_, Result<ElicitResult, ClientError>> {
        Box::pin(async { Err(ClientError::InputUnavailable("elicitation".into())) })
    }

    /// Answer a `sampling/createMessage`.
    fn sample(
        &self,
        _request: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, ClientError>> {
        Box::pin(async { Err(ClientError::InputUnavailable("sampling".into())) })
    }

    /// Answer a `roots/list`.
    fn roots(&self) -> BoxFuture<'_, Result<ListRootsResult, ClientError>> {
        Box::pin(async { Err(ClientError::InputUnavailable("roots".into())) })
    }
}

/// Answer the input request `method(params)` through `handler`: the
/// params read into the typed request (a malformed one is refused), the
/// typed answer written back as JSON.
pub(crate) async fn answer(
    handler: &dyn InputHandler,
    method: &str,
    params: Value,
) -> Result<Value, ClientError> {
    fn parse<T: serde::de::DeserializeOwned>(
        method: &str,
        params: Value,
    ) -> Result<T, ClientError> {
        serde_json::from_value(params)
            .map_err(|e| ClientError::InvalidResponse(format!("malformed {method} request: {e}")))
    }
    fn json<T: serde::Serialize>(answer: T) -> Result<Value, ClientError> {
        serde_json::to_value(answer)
            .map_err(|e| ClientError::InvalidResponse(format!("answer not serializable: {e}")))
    }
    use toolgate_protocol::methods::{CreateMessage, Elicit, ListRoots, Method};
    match method {
        m if m == Elicit::NAME => json(handler.elicit(parse(method, params)?).await?),
        m if m == CreateMessage::NAME => json(handler.sample(parse(method, params)?).await?),
        m if m == ListRoots::NAME => json(handler.roots().await?),
        other => Err(ClientError::InvalidResponse(format!(
            "unknown input request {other:?}"
        ))),
    }
}

/// A handler that provides no input.
pub struct NoInput;

impl InputHandler for NoInput {}

/// How dangerous a call may be, judged from annotations — which are hints a
/// server makes about itself. For a server not configured as trusted, every
/// tool is [`Risk::Destructive`] and open-world, whatever it claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Risk {
    /// Claims not to modify anything (trusted servers only).
    ReadOnly,
    /// Modifies, but only additively.
    Additive,
    /// May destroy or overwrite (the protocol's default).
    Destructive,
}

/// The risk class of `tool`, honouring annotations only when `trusted`.
/// Returns the class and whether the tool reaches an open world.
pub fn classify(tool: &Tool, trusted: bool) -> (Risk, bool) {
    if !trusted {
        return (Risk::Destructive, true);
    }
    let hints = tool.annotations.clone().unwrap_or_default();
    let open_world = hints.open_world_hint.unwrap_or(true);
    if hints.read_only_hint == Some(true) {
        return (Risk::ReadOnly, open_world);
    }
    let risk = if hints.destructive_hint == Some(false) {
        Risk::Additive
    } else {
        Risk::Destructive
    };
    (risk, open_world)
}

/// What an approval hook is shown before a call is sent.
#[derive(Debug)]
pub struct ApprovalRequest<'a> {
    /// The tool, as the server defined it.
    pub tool: &'a Tool,
    /// The exact arguments that will be sent.
    pub arguments: &'a serde_json::Map<String, Value>,
    /// The risk class.
    pub risk: Risk,
    /// Whether the tool may reach an open world.
    pub open_world: bool,
}

/// Decides whether a call may be sent. It cannot change the arguments.
pub trait Approval: Send + Sync + 'static {
    /// `true` to send the call.
    fn approve(&self, request: &ApprovalRequest<'_>) -> BoxFuture<'_, bool>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_protocol::types::ToolAnnotations;

    fn tool(hints: ToolAnnotations) -> Tool {
        serde_json::from_value(serde_json::json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": hints})).unwrap()
    }

    #[test]
    fn annotations_count_only_for_trusted_servers() {
        let ro = tool(ToolAnnotations {
            read_only_hint: Some(true),
            open_world_hint: Some(false),
            ..Default::default()
        });
        assert_eq!(classify(&ro, false), (Risk::Destructive, true));
        assert_eq!(classify(&ro, true), (Risk::ReadOnly, false));
        let additive = tool(ToolAnnotations {
            destructive_hint: Some(false),
            ..Default::default()
        });
        assert_eq!(classify(&additive, true), (Risk::Additive, true));
        assert_eq!(
            classify(&tool(ToolAnnotations::default()), true),
            (Risk::Destructive, true),
            "defaults are destructive"
        );
    }
}
