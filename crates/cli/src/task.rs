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

/// The options of `toolgate task`.
#[derive(clap::Args)]
pub struct TaskCommand {
    /// `[TARGET] TASK_ID`.
    #[arg(num_args = 1..=2, required = true, value_name = "TARGET/TASK_ID")]
    pub names: Vec<String>,
    /// Ask the server to cancel the task instead of waiting for it.
    #[arg(long)]
    pub cancel: bool,
    /// Print the whole result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write binary content (images, audio, blobs) to FILE (then FILE.2, …).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Answer a field of any form the task asks for (JSON, or text).
    #[arg(long, value_name = "FIELD=JSON", value_parser = crate::input::parse_answer)]
    pub answer: Vec<(String, serde_json::Value)>,
    /// Decline every question the task asks.
    #[arg(long, conflicts_with = "answer")]
    pub decline: bool,
    #[command(flatten)]
    pub reach: crate::args::ReachArgs,
    /// The server as a command over stdio.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `toolgate task`, as the command line gave it.
pub async fn task_command(command: TaskCommand) -> anyhow::Result<u8> {
    let TaskCommand {
        names,
        cancel,
        json,
        output,
        answer,
        decline,
        reach,
        command,
    } = command;
    let (target, task_id) = match names.as_slice() {
        [id] => (None, id.clone()),
        [target, id, ..] => (Some(target.clone()), id.clone()),
        [] => return Err(crate::exit::fail(crate::exit::USAGE, "name the task")),
    };
    let mut reach = reach.reach();
    reach.tasks = true;
    let options = TaskArgs {
        cancel,
        json,
        output,
        answers: answer
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>(),
        decline,
    };
    task(target.as_deref(), &task_id, &command, &reach, options).await
}
