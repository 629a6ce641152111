//! What the application supplies: answers to a server's input requests
//! (elicitation, sampling, roots) and approval of tool calls.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use toolgate_protocol::types::{ClientCapabilities, Tool};

use crate::ClientError;

/// A boxed future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Answers the server's input requests (multi round-trip requests).
///
/// Each method receives the request's `params` and returns the matching
/// result (`ElicitResult`, `CreateMessageResult`, `ListRootsResult`). The
/// defaults refuse, so declare in [`InputHandler::capabilities`] only what
/// you implement.
pub trait InputHandler: Send + Sync + 'static {
    /// The capabilities this handler provides (sent on every request).
    fn capabilities(&self) -> ClientCapabilities {
        ClientCapabilities::default()
    }

    /// Answer an `elicitation/create`.
    fn elicit(&self, _params: Value) -> BoxFuture<'_, Result<Value, ClientError>> {
        Box::pin(async { Err(ClientError::InputUnavailable("elicitation".into())) })
    }

    /// Answer a `sampling/createMessage`.
    fn sample(&self, _params: Value) -> BoxFuture<'_, Result<Value, ClientError>> {
        Box::pin(async { Err(ClientError::InputUnavailable("sampling".into())) })
    }

    /// Answer a `roots/list`.
    fn roots(&self) -> BoxFuture<'_, Result<Value, ClientError>> {
        Box::pin(async { Err(ClientError::InputUnavailable("roots".into())) })
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
