//! What a server asks of the client mid-request, and the answers: an
//! elicitation (`elicitation/create`), a model completion
//! (`sampling/createMessage`), the client's roots (`roots/list`).
//!
//! Fields this crate does not model are kept in `extra`, so a value read
//! from the wire serializes back to the same JSON.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Role;

type JsonObject = Map<String, Value>;

/// How an elicitation is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitMode {
    /// A form the user fills in (the default when `mode` is absent).
    #[default]
    Form,
    /// A page the user opens.
    Url,
}

/// Parameters of `elicitation/create`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestParams {
    /// Form or URL (absent means form).
    #[serde(default)]
    pub mode: ElicitMode,
    /// What to show the user.
    pub message: String,
    /// The form (form mode): a flat object of primitive fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<JsonObject>,
    /// The page to open (URL mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Identifies a URL-mode elicitation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
    /// Everything else (`_meta`, later fields).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// What the user did with an elicitation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitResultAction {
    /// Submitted.
    Accept,
    /// Explicitly declined.
    Decline,
    /// Dismissed.
    Cancel,
}

/// The answer to `elicitation/create`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitResultAction,
    /// The submitted form (accepted form-mode elicitations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<JsonObject>,
    /// Everything else.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ElicitResult {
    /// Submitted with `content`.
    pub fn accept(content: JsonObject) -> Self {
        Self {
            action: ElicitResultAction::Accept,
            content: Some(content),
            extra: JsonObject::new(),
        }
    }

    /// Declined.
    pub fn decline() -> Self {
        Self {
            action: ElicitResultAction::Decline,
            content: None,
            extra: JsonObject::new(),
        }
    }

    /// Dismissed.
    pub fn cancel() -> Self {
        Self {
            action: ElicitResultAction::Cancel,
            content: None,
            extra: JsonObject::new(),
        }
    }
}

/// One message of a sampling conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Who speaks.
    pub role: Role,
    /// A content block, or a list of them.
    pub content: Value,
    /// Everything else.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Parameters of `sampling/createMessage`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageRequestParams {
    /// The conversation so far.
    pub messages: Vec<SamplingMessage>,
    /// The most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// A system prompt the server suggests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Everything else (model preferences, tools, `_meta`, …).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The answer to `sampling/createMessage`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Who speaks (the model: `assistant`).
    pub role: Role,
    /// A content block, or a list of them.
    pub content: Value,
    /// The model that answered.
    pub model: String,
    /// Why generation stopped (`endTurn`, `maxTokens`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Everything else.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A directory or file the client offers the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Everything else.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The answer to `roots/list`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// Everything else.
    #[serde(flatten)]
    pub extra: JsonObject,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_and_answers_survive_a_round_trip() {
        let form = json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}, "_meta": {"k": 1}});
        let parsed: ElicitRequestParams =
            serde_json::from_value(form.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.mode, ElicitMode::Form);
        let back = serde_json::to_value(&parsed).unwrap_or_default();
        assert_eq!(back["_meta"], json!({"k": 1}));
        assert_eq!(back["mode"], "form");
        let url: ElicitRequestParams = serde_json::from_value(json!({"mode": "url", "message": "Open", "url": "https://a.example", "elicitationId": "e1"})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(url.mode, ElicitMode::Url);
        assert_eq!(url.elicitation_id.as_deref(), Some("e1"));
        let answer = serde_json::to_value(ElicitResult::decline()).unwrap_or_default();
        assert_eq!(answer, json!({"action": "decline"}));
        let sample: CreateMessageRequestParams = serde_json::from_value(json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5, "temperature": 0.5})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sample.max_tokens, Some(5));
        assert_eq!(sample.extra["temperature"], 0.5);
        let roots: ListRootsResult =
            serde_json::from_value(json!({"roots": [{"uri": "file:///tmp", "name": "tmp"}]}))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(roots.roots[0].uri, "file:///tmp");
    }
}
