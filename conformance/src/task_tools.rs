//! The fixtures of the tasks extension's scenarios: tools that run as
//! tasks (slowly, failing, asking for input) beside one that never does.
//! Written with `#[toolgate_server::tools]`; the rest of
//! `everything-server` uses the builder.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toolgate_server::protocol::RpcError;
use toolgate_server::{Elicitation, RequestContext, ToolEntry, ToolError};

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct SlowArgs {
    /// How long to work, in seconds (0: at once).
    #[serde(default)]
    seconds: f64,
    /// A label echoed in the result.
    #[serde(default)]
    label: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct ConfirmArgs {
    /// The file to delete.
    filename: String,
}

/// A yes/no confirmation.
#[derive(Deserialize, JsonSchema)]
struct Confirm {
    /// Go ahead?
    confirm: Option<bool>,
}

/// One of two answers asked at once.
#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
struct Answer {
    /// Your name.
    name: Option<String>,
    /// Go ahead?
    confirm: Option<bool>,
}

/// A name, for the question asked before the task starts.
#[derive(Deserialize, JsonSchema)]
struct Name {
    /// Your name.
    name: String,
}

struct TaskTools;

fn name_of(answer: &Elicitation<Answer>) -> String {
    match answer {
        Elicitation::Accepted(a) => a.name.clone().unwrap_or_default(),
        _ => String::new(),
    }
}

#[toolgate_server::tools]
impl TaskTools {
    /// Greets someone at once (never a task).
    #[tool(read_only)]
    async fn greet(&self, args: GreetArgs) -> String {
        format!("Hello, {}!", args.name)
    }

    /// Works for `seconds` seconds, then reports it; runs as a task when it can.
    #[tool(read_only, tasks = "optional")]
    async fn slow_compute(&self, args: SlowArgs, ctx: RequestContext) -> String {
        let seconds = args.seconds.clamp(0.0, 3600.0);
        if seconds > 0.0 {
            ctx.progress(0.0, Some(seconds), Some("computing")).await;
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        }
        let label = args.label.unwrap_or_default();
        format!("Computed for {seconds} s ({label}).")
    }

    /// Fails after about a second with a tool error; only as a task.
    #[tool(read_only, tasks = "required")]
    async fn failing_job(&self) -> Result<String, ToolError> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Err(ToolError::new("The job failed: the input data is invalid."))
    }

    /// Ends with a JSON-RPC internal error; runs as a task when it can.
    #[tool(read_only, tasks = "optional")]
    async fn protocol_error_job(&self) -> Result<String, ToolError> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Err(ToolError::protocol(RpcError::internal().with_data(
            serde_json::json!({"reason": "the job's worker crashed"}),
        )))
    }

    /// Deletes a file after the user confirms; runs as a task when it can.
    #[tool(destructive = true, tasks = "optional")]
    async fn confirm_delete(
        &self,
        args: ConfirmArgs,
        ctx: RequestContext,
    ) -> Result<String, ToolError> {
        let question = format!("Delete {}?", args.filename);
        let confirmed = matches!(
            ctx.elicit::<Confirm>(&question)?,
            Elicitation::Accepted(Confirm {
                confirm: Some(true)
            })
        );
        Ok(if confirmed {
            format!("Deleted {}.", args.filename)
        } else {
            format!("Kept {}.", args.filename)
        })
    }

    /// Asks two questions at once; runs as a task when it can.
    #[tool(read_only, tasks = "optional")]
    async fn multi_input(&self, ctx: RequestContext) -> Result<String, ToolError> {
        let mut inputs = ctx.inputs();
        let first = inputs.elicit_form::<Answer>("first", "First question")?;
        let second = inputs.elicit_form::<Answer>("second", "Second question")?;
        let (Some(first), Some(second)) = (first, second) else {
            return Err(inputs.ask());
        };
        Ok(format!(
            "Answers: {} and {}.",
            name_of(&first),
            name_of(&second)
        ))
    }

    /// Asks for your name in the request, then greets you from a task.
    #[tool(read_only, tasks = "required", task_started_by_handler)]
    async fn test_tool_with_task(&self, ctx: RequestContext) -> Result<String, ToolError> {
        let name = match ctx.elicit::<Name>("What is your name?")? {
            Elicitation::Accepted(Name { name }) => name,
            _ => "stranger".to_owned(),
        };
        ctx.run_as_task().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(format!("Hello, {name}!"))
    }
}

/// The tasks scenarios' tools.
pub fn tools() -> Vec<ToolEntry> {
    Arc::new(TaskTools).tools()
}
