//! Tools that ask the client for input: sampling and elicitation in the
//! shapes the legacy-era scenarios describe. Written once with
//! [`Inputs`](toolgate_server::Inputs), they serve both eras: a modern
//! client gets `input_required` and retries, a legacy session gets
//! server-initiated requests.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_server::{Elicited, RequestContext, ToolDef, ToolEntry};

#[derive(Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the LLM.
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct ElicitationArgs {
    /// The message to show the user.
    message: String,
}

fn describe(answer: &Elicited) -> String {
    let action = match answer.action {
        toolgate_server::ElicitAction::Accept => "accept",
        toolgate_server::ElicitAction::Decline => "decline",
        toolgate_server::ElicitAction::Cancel => "cancel",
    };
    let content = answer
        .content
        .clone()
        .map(Value::Object)
        .unwrap_or(Value::Null);
    format!("action={action}, content={content}")
}

fn defaults_form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        }
    })
}

fn enums_form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    })
}

/// The input-asking tools of the 2025-era scenarios.
pub fn tools() -> Vec<ToolEntry> {
    vec![
        ToolDef::new("test_sampling")
            .description("Asks the client's LLM to answer a prompt (sampling)")
            .read_only()
            .handler(|args: SamplingArgs, ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": args.prompt}}],
                    "maxTokens": 100
                });
                let Some(answer) = input.sample("completion", params)? else {
                    return Err(input.ask());
                };
                let text = answer
                    .pointer("/content/text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Ok(format!("LLM response: {text}"))
            }),
        ToolDef::new("test_elicitation")
            .description("Asks the user for a username and an email (elicitation)")
            .read_only()
            .handler(|args: ElicitationArgs, ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let form = json!({
                    "type": "object",
                    "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"}
                    },
                    "required": ["username", "email"]
                });
                let Some(answer) = input.elicit("user_info", &args.message, form)? else {
                    return Err(input.ask());
                };
                Ok(format!("User response: {}", describe(&answer)))
            }),
        ToolDef::new("test_elicitation_sep1034_defaults")
            .description("Asks for a form whose every field has a default (SEP-1034)")
            .read_only()
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let Some(answer) =
                    input.elicit("defaults", "Please review these details", defaults_form())?
                else {
                    return Err(input.ask());
                };
                Ok(format!("Elicitation completed: {}", describe(&answer)))
            }),
        ToolDef::new("test_elicitation_sep1330_enums")
            .description("Asks for a form with every enum shape (SEP-1330)")
            .read_only()
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let Some(answer) = input.elicit("enums", "Please choose", enums_form())? else {
                    return Err(input.ask());
                };
                Ok(format!("Elicitation completed: {}", describe(&answer)))
            }),
    ]
}
