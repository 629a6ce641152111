use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Meta, ResultType};

/// A result asking the client for more input before the request can complete.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// Always `input_required`.
    pub result_type: ResultType,
    /// What the server needs, keyed by a name the client echoes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<Map<String, Value>>,
    /// Opaque state the client passes back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl InputRequiredResult {
    /// An empty `input_required` result.
    pub fn new() -> Self {
        Self {
            result_type: ResultType::InputRequired,
            ..Default::default()
        }
    }

    /// Add an input request (e.g. `elicitation/create`) under `key`.
    pub fn with_request(mut self, key: impl Into<String>, method: &str, params: Value) -> Self {
        let mut request = Map::new();
        request.insert("method".into(), Value::from(method));
        request.insert("params".into(), params);
        self.input_requests
            .get_or_insert_with(Map::new)
            .insert(key.into(), Value::Object(request));
        self
    }

    /// Set the opaque request state.
    pub fn with_state(mut self, state: impl Into<String>) -> Self {
        self.request_state = Some(state.into());
        self
    }
}
