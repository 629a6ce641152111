//! The fixtures of the tasks extension's scenarios: tools that run as
//! tasks (slowly, failing, asking for input) beside one that never does.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_server::protocol::RpcError;
use toolgate_server::tasks::TaskSupport;
use toolgate_server::{ElicitAction, NoArgs, RequestContext, ToolDef, ToolEntry, ToolError};

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

/// A form asking for a yes/no confirmation (and a name, for `multi_input`).
fn form(with_name: bool) -> serde_json::Value {
    let mut properties = json!({"confirm": {"type": "boolean", "description": "Go ahead?"}});
    if with_name {
        properties["name"] = json!({"type": "string", "description": "Your name"});
    }
    json!({"type": "object", "properties": properties})
}

/// The tasks scenarios' tools.
pub fn tools() -> Vec<ToolEntry> {
    vec![
        ToolDef::new("greet")
            .description("Greets someone at once (never a task).")
            .read_only()
            .handler(|args: GreetArgs, _ctx: RequestContext| async move {
                Ok::<_, ToolError>(format!("Hello, {}!", args.name))
            }),
        ToolDef::new("slow_compute")
            .description("Works for `seconds` seconds, then reports it; runs as a task when it can.")
            .read_only()
            .task_support(TaskSupport::Optional)
            .handler(|args: SlowArgs, ctx: RequestContext| async move {
                let seconds = args.seconds.clamp(0.0, 3600.0);
                if seconds > 0.0 {
                    ctx.progress(0.0, Some(seconds), Some("computing")).await;
                    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                }
                let label = args.label.unwrap_or_default();
                Ok::<_, ToolError>(format!("Computed for {seconds} s ({label})."))
            }),
        ToolDef::new("failing_job")
            .description("Fails after about a second with a tool error; only as a task.")
            .read_only()
            .task_support(TaskSupport::Required)
            .handler(|_: NoArgs, _ctx: RequestContext| async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Err::<String, _>(ToolError::new("The job failed: the input data is invalid."))
            }),
        ToolDef::new("protocol_error_job")
            .description("Ends with a JSON-RPC internal error; runs as a task when it can.")
            .read_only()
            .task_support(TaskSupport::Optional)
            .handler(|_: NoArgs, _ctx: RequestContext| async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Err::<String, _>(ToolError::protocol(
                    RpcError::internal().with_data(json!({"reason": "the job's worker crashed"})),
                ))
            }),
        ToolDef::new("confirm_delete")
            .description("Deletes a file after the user confirms; runs as a task when it can.")
            .destructive(true)
            .task_support(TaskSupport::Optional)
            .handler(|args: ConfirmArgs, ctx: RequestContext| async move {
                let mut inputs = ctx.inputs();
                let question = format!("Delete {}?", args.filename);
                let Some(answer) = inputs.elicit("confirm", &question, form(false))? else {
                    return Err(inputs.ask());
                };
                let confirmed = answer.action == ElicitAction::Accept
                    && answer
                        .content
                        .as_ref()
                        .and_then(|c| c.get("confirm"))
                        .and_then(serde_json::Value::as_bool)
                        == Some(true);
                Ok::<_, ToolError>(if confirmed {
                    format!("Deleted {}.", args.filename)
                } else {
                    format!("Kept {}.", args.filename)
                })
            }),
        ToolDef::new("multi_input")
            .description("Asks two questions at once; runs as a task when it can.")
            .read_only()
            .task_support(TaskSupport::Optional)
            .handler(|_: NoArgs, ctx: RequestContext| async move {
                let mut inputs = ctx.inputs();
                let first = inputs.elicit("first", "First question", form(true))?;
                let second = inputs.elicit("second", "Second question", form(true))?;
                let (Some(first), Some(second)) = (first, second) else {
                    return Err(inputs.ask());
                };
                let name = |e: &toolgate_server::Elicited| {
                    e.content
                        .as_ref()
                        .and_then(|c| c.get("name"))
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                Ok::<_, ToolError>(format!("Answers: {} and {}.", name(&first), name(&second)))
            }),
        ToolDef::new("test_tool_with_task")
            .description("Asks for your name in the request, then greets you from a task.")
            .read_only()
            .task_support(TaskSupport::Required)
            .task_started_by_handler()
            .handler(|_: NoArgs, ctx: RequestContext| async move {
                let mut inputs = ctx.inputs();
                let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
                let Some(answer) = inputs.elicit("user_name", "What is your name?", schema)? else {
                    return Err(inputs.ask());
                };
                let name = answer
                    .content
                    .as_ref()
                    .and_then(|c| c.get("name"))
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("stranger")
                    .to_owned();
                ctx.run_as_task().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                Ok::<_, ToolError>(format!("Hello, {name}!"))
            }),
    ]
}
