//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a
//! `tools/call` answered with a durable task handle the client polls.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Meta;

/// The extension's identifier, as declared in both sides' `extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `resultType` of a `CreateTaskResult`.
pub const TASK_RESULT_TYPE: &str = "task";

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The work is in progress.
    Working,
    /// The server waits for the client to answer `inputRequests`.
    InputRequired,
    /// The work finished with a result (a tool error included).
    Completed,
    /// The work ended with a JSON-RPC error.
    Failed,
    /// The work was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task can no longer change (`completed`, `failed`, `cancelled`).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task's metadata: what `CreateTaskResult` carries, and the base of
/// every [`DetailedTask`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The server-minted, unguessable identifier.
    pub task_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// What the task is doing, or why it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// ISO 8601 creation time.
    pub created_at: String,
    /// ISO 8601 time of the last change.
    pub last_updated_at: String,
    /// Lifetime from creation in milliseconds; `null` for unlimited. Always
    /// present on the wire.
    pub ttl_ms: Option<u64>,
    /// Suggested polling interval in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
}

/// A task with the payload its status carries: `inputRequests` while
/// `input_required`, `result` once `completed`, `error` once `failed`. It
/// is what `tasks/get` returns and what `notifications/tasks` carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailedTask {
    /// The metadata.
    #[serde(flatten)]
    pub task: Task,
    /// Outstanding server-to-client requests, by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<Map<String, Value>>,
    /// The original request's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Map<String, Value>>,
    /// The JSON-RPC error the work ended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Map<String, Value>>,
}

/// Parameters of `tasks/get` and `tasks/cancel`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    /// The task.
    pub task_id: String,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Parameters of `tasks/update`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task.
    pub task_id: String,
    /// Answers to outstanding `inputRequests`, by key.
    pub input_responses: Map<String, Value>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Method names of the tasks extension.
pub mod task_methods {
    use crate::methods::{CancelTask, GetTask, Method as _, UpdateTask};

    /// Poll a task.
    pub const GET: &str = GetTask::NAME;
    /// Answer a task's input requests.
    pub const UPDATE: &str = UpdateTask::NAME;
    /// Ask for a task to be cancelled.
    pub const CANCEL: &str = CancelTask::NAME;
    /// A task's full state, pushed on a `subscriptions/listen` stream.
    pub const STATUS_NOTIFICATION: &str = "notifications/tasks";
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_detailed_task_is_flat_and_keeps_a_null_ttl() {
        let task = DetailedTask {
            task: Task {
                task_id: "t1".into(),
                status: TaskStatus::Completed,
                status_message: None,
                created_at: "2026-12-01T10:00:00Z".into(),
                last_updated_at: "2026-12-01T10:00:01Z".into(),
                ttl_ms: None,
                poll_interval_ms: Some(500),
            },
            input_requests: None,
            result: json!({"content": []}).as_object().cloned(),
            error: None,
        };
        let v = serde_json::to_value(&task).unwrap_or_default();
        assert_eq!(
            v,
            json!({"taskId": "t1", "status": "completed", "createdAt": "2026-12-01T10:00:00Z",
                   "lastUpdatedAt": "2026-12-01T10:00:01Z", "ttlMs": null, "pollIntervalMs": 500,
                   "result": {"content": []}})
        );
        let back: DetailedTask = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, task);
        assert!(TaskStatus::Cancelled.is_terminal() && !TaskStatus::InputRequired.is_terminal());
    }
}
