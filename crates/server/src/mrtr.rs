//! Multi round-trip requests: asking the client for input, statelessly.
//!
//! A handler that needs input (an elicitation, a sampling completion, the
//! client's roots) asks through [`Inputs`]. When something is missing, the
//! request ends with an `input_required` result listing what is needed and a
//! `requestState`; the client gathers the input and retries the same request
//! with `inputResponses` and the state. On the retry the handler runs again
//! from the top and finds its answers — including those of earlier rounds,
//! which travel inside the state.
//!
//! The state is sealed by [`crate::state`] under the server's key and bound
//! to the request (method, tool/prompt name or URI, a digest of the
//! arguments), to the caller's subject, and to an expiry. Any server process
//! holding the same key can continue a flow another one started; tampered,
//! expired or transplanted state is refused with `-32602`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_protocol::RpcError;
use toolgate_protocol::types::{ClientCapabilities, InputRequiredResult};
use toolgate_schema::CompiledSchema;

use crate::context::RequestContext;
use crate::state::StateKeys;
use crate::tool::{ErrorKind, ToolError};

/// What a request's `requestState` is bound to.
#[derive(Clone, Debug)]
pub(crate) struct Binding {
    pub(crate) method: String,
    pub(crate) name: String,
    pub(crate) digest: String,
    pub(crate) subject: Option<String>,
    /// Each state sealed for it is good for one retry ([`crate::nonce`]).
    pub(crate) once: bool,
}

/// SHA-256 of `arguments` as canonical JSON (object keys sorted),
/// base64url: the same arguments give the same digest whatever their key
/// order. It is what a `requestState` is bound to, and what
/// [`CallRecord::arguments_digest`](crate::CallRecord::arguments_digest)
/// carries.
///
/// ```
/// use serde_json::json;
/// use toolgate_server::arguments_digest;
/// assert_eq!(
///     arguments_digest(&json!({"a": 1, "b": [true]})),
///     arguments_digest(&json!({"b": [true], "a": 1})),
/// );
/// ```
pub fn arguments_digest(arguments: &Value) -> String {
    let mut hasher = Sha256::new();
    canonical(arguments, &mut hasher);
    URL_SAFE_NO_PAD.encode(hasher.finalize())
}

impl Binding {
    pub(crate) fn new(method: &str, name: &str, arguments: &Value, subject: Option<&str>) -> Self {
        let digest = arguments_digest(arguments);
        Binding {
            method: method.to_owned(),
            name: name.to_owned(),
            digest,
            subject: subject.map(str::to_owned),
            once: false,
        }
    }

    /// The same binding, its rounds single-use when `once`.
    pub(crate) fn single_use(mut self, once: bool) -> Self {
        self.once = once;
        self
    }
}

/// Hash JSON with object keys sorted, so key order does not change the digest.
fn canonical(value: &Value, hasher: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            hasher.update(b"{");
            for k in keys {
                hasher.update(serde_json::to_string(k).unwrap_or_default().as_bytes());
                hasher.update(b":");
                canonical(&map[k], hasher);
                hasher.update(b",");
            }
            hasher.update(b"}");
        }
        Value::Array(items) => {
            hasher.update(b"[");
            for item in items {
                canonical(item, hasher);
                hasher.update(b",");
            }
            hasher.update(b"]");
        }
        other => hasher.update(other.to_string().as_bytes()),
    }
}

/// The answer to an elicitation.
#[derive(Clone, Debug, PartialEq)]
pub struct Elicited {
    /// `accept`, `decline` or `cancel`.
    pub action: ElicitAction,
    /// The submitted form (accepted form-mode elicitations only).
    pub content: Option<Map<String, Value>>,
}

/// What the user did with an elicitation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElicitAction {
    /// Submitted.
    Accept,
    /// Explicitly declined.
    Decline,
    /// Dismissed.
    Cancel,
}

/// Input gathered for this request so far, and what it still needs.
///
/// ```no_run
/// # use serde_json::json;
/// # use toolgate_server::{RequestContext, ToolError};
/// # async fn handler(ctx: RequestContext) -> Result<String, ToolError> {
/// let mut input = ctx.inputs();
/// let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
/// let Some(answer) = input.elicit("user_name", "What is your name?", schema)? else {
///     return Err(input.ask()); // ends this round with `input_required`
/// };
/// let name = answer.content.and_then(|c| c.get("name").cloned()).unwrap_or_default();
/// Ok(format!("Hello, {name}!"))
/// # }
/// ```
pub struct Inputs {
    responses: Map<String, Value>,
    app: Option<Value>,
    /// The call's context, for the client's capabilities: shared rather
    /// than copied, since a relay carries its `Inputs` through every await.
    caller: RequestContext,
    requests: Map<String, Value>,
    used: Map<String, Value>,
}

impl std::fmt::Debug for Inputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("responses", &self.responses)
            .field("app", &self.app)
            .field("capabilities", self.capabilities())
            .field("requests", &self.requests)
            .field("used", &self.used)
            .finish()
    }
}

pub(crate) use crate::error::Pending;

fn malformed(key: &str, what: &str) -> ToolError {
    ToolError::protocol(RpcError::invalid_params(format!(
        "inputResponses.{key} {what}"
    )))
}

impl Inputs {
    pub(crate) fn new(
        responses: Map<String, Value>,
        app: Option<Value>,
        caller: RequestContext,
    ) -> Self {
        Self {
            responses,
            app,
            caller,
            requests: Map::new(),
            used: Map::new(),
        }
    }

    fn capabilities(&self) -> &ClientCapabilities {
        self.caller.client_capabilities()
    }

    fn take(&mut self, key: &str, request: Value) -> Option<Value> {
        match self.responses.get(key) {
            Some(v) => {
                self.used.insert(key.to_owned(), v.clone());
                Some(v.clone())
            }
            None => {
                self.requests.insert(key.to_owned(), request);
                None
            }
        }
    }

    /// Ask the user to fill a form. `Ok(None)`: not answered yet (call
    /// [`Inputs::ask`]). The answer's content is validated against
    /// `requested_schema`. Fails with `-32021` if the client cannot elicit.
    pub fn elicit(
        &mut self,
        key: &str,
        message: &str,
        requested_schema: Value,
    ) -> Result<Option<Elicited>, ToolError> {
        if !self.capabilities().supports_elicitation_form() {
            return Err(ToolError::protocol(RpcError::missing_client_capability(
                json!({"elicitation": {"form": {}}}),
            )));
        }
        let request = json!({"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": requested_schema}});
        let Some(answer) = self.take(key, request) else {
            return Ok(None);
        };
        let elicited = parse_elicit(key, &answer)?;
        if let (ElicitAction::Accept, Some(content)) = (elicited.action, &elicited.content) {
            let schema = CompiledSchema::compile(&requested_schema).map_err(|e| {
                ToolError::protocol(RpcError::internal().with_data(json!(e.to_string())))
            })?;
            if let Err(violations) = schema.validate(&Value::Object(content.clone())) {
                let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
                return Err(malformed(
                    key,
                    &format!("does not match the requested schema: {}", list.join("; ")),
                ));
            }
        } else if elicited.action == ElicitAction::Accept {
            return Err(malformed(
                key,
                "accepts a form elicitation but carries no content object",
            ));
        }
        Ok(Some(elicited))
    }

    /// Send the user to `url` (URL-mode elicitation). Fails with `-32021` if
    /// the client does not support URL mode.
    pub fn elicit_url(
        &mut self,
        key: &str,
        message: &str,
        url: &str,
        elicitation_id: &str,
    ) -> Result<Option<Elicited>, ToolError> {
        if !self.capabilities().supports_elicitation_url() {
            return Err(ToolError::protocol(RpcError::missing_client_capability(
                json!({"elicitation": {"url": {}}}),
            )));
        }
        let request = json!({"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}});
        let Some(answer) = self.take(key, request) else {
            return Ok(None);
        };
        parse_elicit(key, &answer).map(Some)
    }

    /// Ask the client's model for a completion; `params` is a
    /// `CreateMessageRequest`'s params. The answer is a `CreateMessageResult`.
    pub fn sample(&mut self, key: &str, params: Value) -> Result<Option<Value>, ToolError> {
        if self.capabilities().sampling.is_none() {
            return Err(ToolError::protocol(RpcError::missing_client_capability(
                json!({"sampling": {}}),
            )));
        }
        let Some(answer) = self.take(
            key,
            json!({"method": "sampling/createMessage", "params": params}),
        ) else {
            return Ok(None);
        };
        let ok = answer.as_object().is_some_and(|o| {
            o.get("role").is_some_and(Value::is_string)
                && o.get("model").is_some_and(Value::is_string)
                && o.get("content")
                    .is_some_and(|c| c.is_object() || c.is_array())
        });
        if !ok {
            return Err(malformed(
                key,
                "must be a CreateMessageResult with role, content and model",
            ));
        }
        Ok(Some(answer))
    }

    /// Ask for the client's roots. The answer is the list of roots (each with a `uri`).
    pub fn roots(&mut self, key: &str) -> Result<Option<Vec<Value>>, ToolError> {
        if self.capabilities().roots.is_none() {
            return Err(ToolError::protocol(RpcError::missing_client_capability(
                json!({"roots": {}}),
            )));
        }
        let Some(answer) = self.take(key, json!({"method": "roots/list", "params": {}})) else {
            return Ok(None);
        };
        match answer.get("roots").and_then(Value::as_array) {
            Some(roots)
                if roots
                    .iter()
                    .all(|r| r.get("uri").is_some_and(Value::is_string)) =>
            {
                Ok(Some(roots.clone()))
            }
            _ => Err(malformed(
                key,
                "must be a ListRootsResult: {\"roots\": [{\"uri\": ...}]}",
            )),
        }
    }

    /// Pass an input request on as it is, for a handler that relays
    /// another server's question (a gateway): `request` is
    /// `{"method": …, "params": …}` for `elicitation/create`,
    /// `sampling/createMessage` or `roots/list`. The answer is returned
    /// raw, for the other server to check. Fails with `-32021` if the
    /// client did not declare what the method needs.
    pub fn relay(&mut self, key: &str, request: Value) -> Result<Option<Value>, ToolError> {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let params = request.get("params");
        let needs = match method {
            "elicitation/create" => {
                let url_mode =
                    params.and_then(|p| p.get("mode")).and_then(Value::as_str) == Some("url");
                let ok = if url_mode {
                    self.capabilities().supports_elicitation_url()
                } else {
                    self.capabilities().supports_elicitation_form()
                };
                (!ok).then(|| {
                    if url_mode {
                        json!({"elicitation": {"url": {}}})
                    } else {
                        json!({"elicitation": {"form": {}}})
                    }
                })
            }
            "sampling/createMessage" => self
                .capabilities()
                .sampling
                .is_none()
                .then(|| json!({"sampling": {}})),
            "roots/list" => self
                .capabilities()
                .roots
                .is_none()
                .then(|| json!({"roots": {}})),
            other => {
                return Err(ToolError::new(format!(
                    "cannot relay an input request of unknown method {}",
                    toolgate_protocol::quote::quote(other)
                )));
            }
        };
        if let Some(needed) = needs {
            return Err(ToolError::protocol(RpcError::missing_client_capability(
                needed,
            )));
        }
        Ok(self.take(key, request))
    }

    /// Data the handler kept from an earlier round.
    pub fn remembered(&self) -> Option<&Value> {
        self.app.as_ref()
    }

    /// Keep `data` for the next round (sealed in the state with everything else).
    pub fn remember(&mut self, data: Value) {
        self.app = Some(data);
    }

    /// Whether every input asked for so far was answered.
    pub fn complete(&self) -> bool {
        self.requests.is_empty()
    }

    /// End this round: the client is asked for everything still missing.
    pub fn ask(self) -> ToolError {
        let mut responses = self.responses;
        // Only answers the handler actually used travel forward; unknown keys are dropped.
        responses.retain(|k, _| self.used.contains_key(k));
        ToolError(ErrorKind::InputRequired(Box::new(Pending {
            requests: self.requests,
            responses,
            app: self.app,
        })))
    }
}

fn parse_elicit(key: &str, answer: &Value) -> Result<Elicited, ToolError> {
    let obj = answer
        .as_object()
        .ok_or_else(|| malformed(key, "must be an ElicitResult object"))?;
    let action = match obj.get("action").and_then(Value::as_str) {
        Some("accept") => ElicitAction::Accept,
        Some("decline") => ElicitAction::Decline,
        Some("cancel") => ElicitAction::Cancel,
        _ => {
            return Err(malformed(
                key,
                "needs \"action\": \"accept\", \"decline\" or \"cancel\"",
            ));
        }
    };
    let content = match obj.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::Object(c)) => Some(c.clone()),
        Some(_) => return Err(malformed(key, "has a \"content\" that is not an object")),
    };
    Ok(Elicited { action, content })
}

/// Build the `input_required` result for a pending round.
pub(crate) fn input_required(
    keys: &StateKeys,
    binding: &Binding,
    ttl_secs: u64,
    pending: Pending,
) -> InputRequiredResult {
    let state = keys.seal(binding, ttl_secs, pending.responses, pending.app);
    let mut result = InputRequiredResult::new().with_state(state);
    if !pending.requests.is_empty() {
        result.input_requests = Some(pending.requests);
    }
    result
}

/// `inputResponses` and `requestState` as sent, type-checked.
pub(crate) struct Retry {
    pub(crate) responses: Map<String, Value>,
    pub(crate) state: Option<String>,
}

/// Take the retry fields out of a request's params (no copy).
pub(crate) fn take_retry_fields(params: &mut Map<String, Value>) -> Result<Retry, RpcError> {
    let responses = match params.remove("inputResponses") {
        None => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "inputResponses must be an object mapping request keys to responses",
            ));
        }
    };
    let state = match params.remove("requestState") {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "requestState must be the string the server sent",
            ));
        }
    };
    Ok(Retry { responses, state })
}

/// Read the retry fields of a request's params.
pub(crate) fn retry_fields(params: Option<&Map<String, Value>>) -> Result<Retry, RpcError> {
    let responses = match params.and_then(|p| p.get("inputResponses")) {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "inputResponses must be an object mapping request keys to responses",
            ));
        }
    };
    let state = match params.and_then(|p| p.get("requestState")) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "requestState must be the string the server sent",
            ));
        }
    };
    Ok(Retry { responses, state })
}
