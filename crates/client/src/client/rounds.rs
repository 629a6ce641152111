//! Requests that may answer `input_required`: followed through the input
//! handler ([`Client::call_tool`]), or one round at a time for a program
//! that relays them ([`Client::call_tool_round`]).

use super::tasks;
use super::*;
use toolgate_protocol::methods::{CallTool, Method};
use toolgate_protocol::types::ResultType;

/// The answers to the previous round of a relayed call
/// ([`Client::call_tool_round`]).
#[derive(Clone, Debug, Default)]
pub struct RoundInput {
    /// `inputResponses`, by the keys the server used.
    pub input_responses: Map<String, Value>,
    /// The server's `requestState`, echoed exactly.
    pub request_state: Option<String>,
}

/// How a relayed tool call came back ([`Client::call_tool_round`]).
#[derive(Clone, Debug)]
pub enum CallEnd {
    /// The result, as the server sent it.
    Result(CallToolResult),
    /// The server runs the call as this task (only when the call declared
    /// the tasks extension, and the client accepts tasks:
    /// [`ClientBuilder::tasks`]).
    Task(toolgate_protocol::types::Task),
}

/// One round of a relayed tool call.
pub type CallRound = Round<CallEnd>;

/// How one round of a relayed request ended: `T` is what it came back with
/// (the raw result object for [`Client::request_round`], a [`CallEnd`] for
/// [`Client::call_tool_round`]).
#[derive(Clone, Debug)]
pub enum Round<T = Value> {
    /// The request's answer.
    Complete(T),
    /// The server needs input first.
    InputRequired {
        /// `inputRequests`, by key.
        input_requests: Map<String, Value>,
        /// The state to echo on the next round.
        request_state: Option<String>,
    },
}

impl<T> Round<T> {
    /// The same round with its answer read by `read`.
    fn try_map<U>(
        self,
        read: impl FnOnce(T) -> Result<U, ClientError>,
    ) -> Result<Round<U>, ClientError> {
        Ok(match self {
            Self::Complete(answer) => Round::Complete(read(answer)?),
            Self::InputRequired {
                input_requests,
                request_state,
            } => Round::InputRequired {
                input_requests,
                request_state,
            },
        })
    }
}

/// A round's answer as [`Client::classify`] classified it, so
/// that its `resultType` is read once.
enum Ended {
    Result(Answer),
    /// A `tools/call` the server runs as a task.
    Task(Answer),
}

impl Client {
    /// Run a request that may answer `input_required`, answering its input
    /// requests through the input handler and retrying (new id, same
    /// params, `inputResponses`, the untouched `requestState`).
    ///
    /// A `tools/call` the server answers with a task (when the client
    /// declared the extension, [`ClientBuilder::tasks`]) is followed to
    /// its end.
    pub(super) async fn with_rounds(
        &self,
        method: &str,
        params: Map<String, Value>,
        headers: Vec<(String, String)>,
        options: &CallOptions,
    ) -> Result<Value, ClientError> {
        let result = self
            .rounds_until_result(method, params, headers, options)
            .await?;
        self.follow_task(result, options).await
    }

    /// [`Client::with_rounds`] up to the first result that is not
    /// `input_required`: a task is returned, not followed.
    pub(super) async fn rounds_until_result(
        &self,
        method: &str,
        params: Map<String, Value>,
        headers: Vec<(String, String)>,
        options: &CallOptions,
    ) -> Result<Value, ClientError> {
        let mut attempt = params.clone();
        for _ in 0..=self.inner.max_rounds {
            let result = self
                .request_with_headers(method, attempt.clone(), headers.clone(), options)
                .await?
                .into_value()?;
            match result.get("resultType").and_then(Value::as_str) {
                None | Some("complete") => return Ok(result),
                // Only a tools/call may become a task, and only for a
                // client that declared the extension; anything else is an
                // invalid answer.
                Some("task") if method == CallTool::NAME && self.inner.tasks => return Ok(result),
                Some("input_required") => {}
                Some(other) => {
                    return Err(ClientError::InvalidResponse(format!(
                        "unexpected resultType {other:?} for {method}"
                    )));
                }
            }
            let mut responses = Map::new();
            if let Some(requests) = result.get("inputRequests").and_then(Value::as_object) {
                for (key, request) in requests {
                    responses.insert(key.clone(), self.answer_input(request).await?);
                }
            }
            attempt = params.clone();
            if !responses.is_empty() {
                attempt.insert("inputResponses".into(), Value::Object(responses));
            }
            if let Some(state) = result.get("requestState") {
                attempt.insert("requestState".into(), state.clone());
            }
        }
        Err(ClientError::TooManyRounds(self.inner.max_rounds))
    }

    /// One round of a tool call, for a program that relays the call
    /// rather than answers the server's questions itself (a gateway):
    /// `round` carries the answers and `requestState` of the previous
    /// round. The result comes back as the server sent it: an `isError`
    /// result is not turned into [`ClientError::Tool`], and structured
    /// content is not checked against the `outputSchema` (see
    /// [`Client::check_output`]). Header mirroring applies as in
    /// [`Client::call_tool`].
    pub async fn call_tool_round(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        round: Option<RoundInput>,
        options: &CallOptions,
    ) -> Result<CallRound, ClientError> {
        let known = self.known_tool(name).await?;
        let headers = self.mirrored_headers(&known, &arguments);
        let mut params = Map::new();
        params.insert("name".into(), Value::from(name));
        params.insert("arguments".into(), Value::Object(arguments));
        // Read from the text the server sent, typed, when the transport
        // kept it (a relayed call's answer is never a `Value` on its way
        // through).
        let answer = self
            .round_answer(CallTool::NAME, params, round, headers, options)
            .await?;
        // Nearly every answer is a complete result: read it as one in a
        // single pass, and classify only what does not read as one.
        let answer =
            match answer.read_if(|r: &CallToolResult| r.result_type == ResultType::Complete) {
                Ok(result) => return Ok(Round::Complete(CallEnd::Result(result))),
                Err(answer) => answer,
            };
        self.classify(CallTool::NAME, answer)?
            .try_map(|ended| match ended {
                Ended::Task(task) => task.parse(tasks::CREATE_TASK_RESULT).map(CallEnd::Task),
                Ended::Result(result) => result
                    .parse(format_args!("{} result", CallTool::NAME))
                    .map(CallEnd::Result),
            })
    }

    /// One round of any request that may answer `input_required`
    /// (`prompts/get`, `resources/read`, …), for a program that relays it:
    /// the result object as the server sent it, or its questions.
    pub async fn request_round(
        &self,
        method: &str,
        params: Map<String, Value>,
        round: Option<RoundInput>,
        options: &CallOptions,
    ) -> Result<Round, ClientError> {
        let answer = self
            .round_answer(method, params, round, Vec::new(), options)
            .await?;
        self.classify(method, answer)?
            .try_map(|(Ended::Result(answer) | Ended::Task(answer))| answer.into_value())
    }

    /// Send one round of `method`, the previous round's answers with it.
    async fn round_answer(
        &self,
        method: &str,
        mut params: Map<String, Value>,
        round: Option<RoundInput>,
        headers: Vec<(String, String)>,
        options: &CallOptions,
    ) -> Result<Answer, ClientError> {
        if let Some(round) = round {
            if !round.input_responses.is_empty() {
                params.insert(
                    "inputResponses".into(),
                    Value::Object(round.input_responses),
                );
            }
            if let Some(state) = round.request_state {
                params.insert("requestState".into(), Value::String(state));
            }
        }
        self.request_with_headers(method, params, headers, options)
            .await
    }

    /// What a round's answer is, by its `resultType`.
    fn classify(&self, method: &str, result: Answer) -> Result<Round<Ended>, ClientError> {
        let ended: fn(Answer) -> Ended = match result.result_type().as_deref() {
            None | Some("complete") => Ended::Result,
            // Passed up as it is; `call_tool_round` makes it a task.
            Some("task") if method == CallTool::NAME && self.inner.tasks => Ended::Task,
            Some("input_required") => return input_required(result),
            Some(other) => {
                return Err(ClientError::InvalidResponse(format!(
                    "unknown resultType {other:?}"
                )));
            }
        };
        Ok(Round::Complete(ended(result)))
    }
}

/// The questions of an `input_required` answer, and the state to echo.
fn input_required(result: Answer) -> Result<Round<Ended>, ClientError> {
    let mut result = result.into_value()?;
    let input_requests = match result.get_mut("inputRequests") {
        Some(Value::Object(requests)) => std::mem::take(requests),
        _ => Map::new(),
    };
    let request_state = match result.get_mut("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(std::mem::take(s)),
        Some(_) => {
            return Err(ClientError::InvalidResponse(
                "requestState is not a string".into(),
            ));
        }
    };
    Ok(Round::InputRequired {
        input_requests,
        request_state,
    })
}
