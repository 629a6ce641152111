//! `toolgate task`, and the task side of `toolgate call --task`: a task's
//! states as they change, its result once it ends.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use toolgate_client::{CallOptions, ClientError, TaskFn};
use toolgate_protocol::types::{CallToolResult, DetailedTask};

use crate::call::print_result;
use crate::exit;
use crate::input::Answers;
use crate::target::{self, Reach};
use crate::term::{clean, one_line};
use crate::{errln, outln};

/// Options of `toolgate task`.
pub struct TaskArgs {
    /// Cancel instead of waiting.
    pub cancel: bool,
    /// Print the whole result as JSON.
    pub json: bool,
    /// Where binary content goes.
    pub output: Option<PathBuf>,
    /// `--answer FIELD=JSON`.
    pub answers: BTreeMap<String, Value>,
    /// `--decline`.
    pub decline: bool,
}

/// The command that picks a task up again.
pub fn resume_hint(target: &str, task_id: &str) -> String {
    format!("toolgate task {} {}", one_line(target), one_line(task_id))
}

/// An `on_task` callback that prints each state on stderr, and remembers
/// the task's id.
pub fn watcher(target: &str) -> (TaskFn, Arc<Mutex<Option<String>>>) {
    let seen = Arc::new(Mutex::new(None::<String>));
    let (remember, target) = (seen.clone(), target.to_owned());
    let callback: TaskFn = Arc::new(move |task: &DetailedTask| {
        let mut known = remember.lock();
        if known.is_none() {
            errln!(
                "task:      {} (if this command stops, `{}` picks it up)",
                one_line(&task.task.task_id),
                resume_hint(&target, &task.task.task_id)
            );
            *known = Some(task.task.task_id.clone());
        }
        let message = task
            .task
            .status_message
            .as_deref()
            .map(|m| format!(" — {}", one_line(m)))
            .unwrap_or_default();
        errln!("status:    {}{message}", task.task.status);
    });
    (callback, seen)
}

/// `toolgate task`.
pub async fn task(
    target: Option<&str>,
    task_id: &str,
    command: &[String],
    reach: &Reach,
    o: TaskArgs,
) -> anyhow::Result<u8> {
    let target = target::resolve(target, command, reach)?;
    let conn = target.connect(
        reach,
        Answers::new(&target.name, o.answers, o.decline, None),
    )?;
    if o.cancel {
        conn.client
            .cancel_task(task_id)
            .await
            .map_err(|e| conn.fail(e, &format!("cancelling task {}", one_line(task_id))))?;
        errln!(
            "cancel requested for task {}; the server decides when it stops (`{}` shows how it ended)",
            one_line(task_id),
            resume_hint(&conn.name, task_id)
        );
        return Ok(exit::OK);
    }
    let (on_task, _) = watcher(&conn.name);
    let options = CallOptions {
        on_task: Some(on_task),
        ..CallOptions::default()
    };
    let value = conn
        .client
        .wait_task(task_id, &options)
        .await
        .map_err(|e| conn.fail(e, &format!("waiting for task {}", one_line(task_id))))?;
    let result: CallToolResult = serde_json::from_value(value).map_err(|e| {
        conn.fail(
            ClientError::InvalidResponse(format!("the task's result is not a tool result: {e}")),
            "reading the result",
        )
    })?;
    if result.is_error() {
        if o.json {
            outln!("{}", serde_json::to_string_pretty(&result)?);
        }
        let text: Vec<&str> = result.content.iter().filter_map(|c| c.as_text()).collect();
        errln!("tool error: {}", clean(&text.join("\n")));
        return Ok(exit::FAILED);
    }
    print_result(&result, o.json, o.output.as_deref())?;
    Ok(exit::OK)
}
