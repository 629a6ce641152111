//! The server the official conformance suite tests: every tool, prompt and
//! resource its server scenarios call, served at `http://127.0.0.1:PORT/mcp`
//! (or on stdio with `--stdio`).

#[path = "../input_tools.rs"]
mod input_tools;
#[path = "../task_tools.rs"]
mod task_tools;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use serde_json::json;
use toolgate_server::protocol::types::{
    Annotations, CallToolResult, ContentBlock, GetPromptResult, InputRequiredResult, LoggingLevel,
    PromptMessage, Resource, ResourceContents, ResourceTemplate, Role,
};
use toolgate_server::transport::http::{HttpConfig, serve_http};
use toolgate_server::transport::stdio::serve_stdio;
use toolgate_server::{
    ClientCapability, PromptEntry, RequestContext, ResourceEntry, Server, TemplateEntry, ToolDef,
    ToolEntry, ToolError, ToolReply,
};

/// A 1x1 red PNG.
const IMAGE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const AUDIO_WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

#[derive(Parser)]
#[command(about = "toolgate's server for the MCP conformance suite")]
struct Args {
    /// TCP port on 127.0.0.1.
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// Serve on stdin/stdout instead of HTTP.
    #[arg(long)]
    stdio: bool,
}

fn simple(
    name: &str,
    description: &str,
    reply: impl Fn() -> CallToolResult + Send + Sync + 'static,
) -> ToolEntry {
    let reply = Arc::new(reply);
    ToolDef::new(name)
        .description(description)
        .read_only()
        .open_world(false)
        .handler(move || {
            let reply = reply.clone();
            async move { Ok(reply()) }
        })
}

fn tools() -> Vec<ToolEntry> {
    vec![
        simple(
            "test_simple_text",
            "Tests simple text content response",
            || CallToolResult::text("This is a simple text response for testing."),
        ),
        simple("test_image_content", "Tests image content response", || {
            CallToolResult::new(vec![ContentBlock::image(IMAGE_PNG, "image/png")])
        }),
        simple("test_audio_content", "Tests audio content response", || {
            CallToolResult::new(vec![ContentBlock::audio(AUDIO_WAV, "audio/wav")])
        }),
        simple(
            "test_embedded_resource",
            "Tests embedded resource content response",
            || {
                CallToolResult::new(vec![ContentBlock::embedded(ResourceContents::text(
                    "test://embedded-resource",
                    Some("text/plain"),
                    "This is an embedded resource content.",
                ))])
            },
        ),
        simple(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            || {
                CallToolResult::new(vec![
                    ContentBlock::text("Multiple content types test:"),
                    ContentBlock::image(IMAGE_PNG, "image/png").with_annotations(Annotations {
                        audience: Some(vec![Role::User]),
                        priority: Some(0.9),
                        last_modified: None,
                    }),
                    ContentBlock::embedded(ResourceContents::text(
                        "test://mixed-content-resource",
                        Some("application/json"),
                        json!({"test": "data", "value": 123}).to_string(),
                    )),
                ])
            },
        ),
        ToolDef::new("test_error_handling")
            .description("Tests error response handling: always fails with a tool execution error")
            .read_only()
            .handler(|| async {
                Err::<String, _>(ToolError::new(
                    "This tool intentionally returns an error for testing",
                ))
            }),
        ToolDef::new("test_tool_with_progress")
            .description("Tests tool that reports progress notifications (0, 50, 100 of 100)")
            .read_only()
            .handler(|ctx: RequestContext| async move {
                for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    ctx.progress(step, Some(100.0), Some(&format!("step {}", i + 1)))
                        .await;
                }
                Ok(format!(
                    "Progress test completed{}",
                    if ctx.wants_progress() {
                        ""
                    } else {
                        " (no progress token)"
                    }
                ))
            }),
        ToolDef::new("test_tool_with_logging")
            .description("Tests tool that emits log messages during execution")
            .read_only()
            .handler(|ctx: RequestContext| async move {
                for message in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ] {
                    ctx.log(
                        LoggingLevel::Info,
                        Some("conformance-test-server"),
                        json!(message),
                    )
                    .await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok("Tool with logging executed successfully")
            }),
        ToolDef::new("test_logging_tool")
            .description(
                "Logs at info level; sends messages only when the request sets a log level",
            )
            .read_only()
            .handler(|ctx: RequestContext| async move {
                ctx.log(
                    LoggingLevel::Info,
                    Some("conformance-test-server"),
                    json!("logging tool ran"),
                )
                .await;
                Ok("Logged")
            }),
        ToolDef::new("test_missing_capability")
            .description("Requires the client's sampling capability; fails with -32021 without it")
            .read_only()
            .handler(|ctx: RequestContext| async move {
                ctx.require(ClientCapability::Sampling)?;
                Ok("The client declared sampling")
            }),
        ToolDef::new("test_streaming_elicitation")
            .description("Asks the user for a username through an elicitation input request")
            .read_only()
            .handler(|ctx: RequestContext| async move {
                ctx.require(ClientCapability::Elicitation)?;
                Ok(ToolReply::InputRequired(
                    InputRequiredResult::new().with_request(
                        "username",
                        "elicitation/create",
                        json!({
                            "mode": "form",
                            "message": "Please provide your username",
                            "requestedSchema": {
                                "type": "object",
                                "properties": {"username": {"type": "string"}},
                                "required": ["username"]
                            }
                        }),
                    ),
                ))
            }),
    ]
}

/// The schema of `json_schema_2020_12_tool`: the full 2020-12 vocabulary,
/// which must survive `tools/list` untouched.
fn json_schema_2020_12() -> serde_json::Map<String, serde_json::Value> {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    });
    schema.as_object().cloned().unwrap_or_default()
}

fn schema_tools() -> Vec<ToolEntry> {
    vec![
        ToolDef::new("json_schema_2020_12_tool")
            .description("Tool whose inputSchema uses JSON Schema 2020-12 composition, conditionals and $defs")
            .read_only()
            .dynamic(json_schema_2020_12(), None, |args, _ctx| async move {
                Ok(ToolReply::Complete(CallToolResult::text(format!("received {}", serde_json::Value::Object(args)))))
            }),
        ToolDef::new("test_header_routing")
            .description("Runs a query in a region; the region is mirrored into the Mcp-Param-Region header")
            .read_only()
            .dynamic(
                json!({
                    "type": "object",
                    "properties": {
                        "region": {"type": "string", "description": "Region to run in", "x-mcp-header": "Region"},
                        "query": {"type": "string", "description": "The query"}
                    },
                    "required": ["region", "query"]
                })
                .as_object()
                .cloned()
                .unwrap_or_default(),
                None,
                |args: serde_json::Map<String, serde_json::Value>, _ctx| async move {
                    let region = args.get("region").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
                    Ok(ToolReply::Complete(CallToolResult::text(format!("ran in {region}"))))
                },
            ),
    ]
}

fn name_form() -> serde_json::Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
}

fn field(answer: &toolgate_server::Elicited, key: &str) -> String {
    answer
        .content
        .as_ref()
        .and_then(|c| c.get(key))
        .and_then(|v| v.as_str())
        .unwrap_or("unknown")
        .to_owned()
}

fn sampled_text(answer: &serde_json::Value) -> String {
    answer
        .pointer("/content/text")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned()
}

/// Tools of the multi round-trip request (MRTR) scenarios.
fn mrtr_tools() -> Vec<ToolEntry> {
    let tool =
        |name: &str, description: &str| ToolDef::new(name).description(description).read_only();
    vec![
        tool("test_input_required_result_elicitation", "Asks the user's name through an elicitation, then greets them")
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let Some(answer) = input.elicit("user_name", "What is your name?", name_form())? else {
                    return Err(input.ask());
                };
                Ok(format!("Hello, {}!", field(&answer, "name")))
            }),
        tool("test_input_required_result_sampling", "Asks the client's model a question through sampling")
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
                    "maxTokens": 100
                });
                let Some(answer) = input.sample("capital_question", params)? else { return Err(input.ask()) };
                Ok(format!("The model said: {}", sampled_text(&answer)))
            }),
        tool("test_input_required_result_list_roots", "Asks the client for its roots")
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let Some(roots) = input.roots("client_roots")? else { return Err(input.ask()) };
                let uris: Vec<&str> = roots.iter().filter_map(|r| r.get("uri").and_then(|u| u.as_str())).collect();
                Ok(format!("Roots: {}", uris.join(", ")))
            }),
        tool("test_input_required_result_request_state", "Asks for confirmation, carrying sealed requestState")
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                let Some(_answer) = input.elicit("confirm", "Please confirm", form)? else { return Err(input.ask()) };
                // Reaching here on a retry means the state verified.
                Ok("state-ok: confirmation received".to_owned())
            }),
        tool("test_input_required_result_multiple_inputs", "Asks for an elicitation, a sampling and the roots at once")
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let name = input.elicit("user_name", "What is your name?", name_form())?;
                let greeting = input.sample(
                    "greeting",
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}], "maxTokens": 50}),
                )?;
                let roots = input.roots("client_roots")?;
                let (Some(name), Some(greeting), Some(roots)) = (name, greeting, roots) else { return Err(input.ask()) };
                Ok(format!("{} {} ({} roots)", sampled_text(&greeting), field(&name, "name"), roots.len()))
            }),
        tool("test_input_required_result_multi_round", "Asks two questions in two rounds")
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let Some(step1) = input.elicit("step1", "Step 1: What is your name?", name_form())? else {
                    return Err(input.ask());
                };
                let color = json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]});
                let Some(step2) = input.elicit("step2", "Step 2: What is your favorite color?", color)? else {
                    return Err(input.ask());
                };
                Ok(format!("{} likes {}", field(&step1, "name"), field(&step2, "color")))
            }),
        tool("test_input_required_result_tampered_state", "Issues integrity-protected requestState")
            .handler(|ctx: RequestContext| async move {
                let mut input = ctx.inputs();
                let Some(_ok) = input.elicit("confirm", "Please confirm", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}))? else {
                    return Err(input.ask());
                };
                Ok("state verified".to_owned())
            }),
        tool("test_input_required_result_capabilities", "Asks only for input the client declared it can give")
            .handler(|ctx: RequestContext| async move {
                let caps = ctx.client_capabilities().clone();
                let mut input = ctx.inputs();
                let mut asked = Vec::new();
                if caps.supports_elicitation_form() {
                    asked.push(input.elicit("user_name", "What is your name?", name_form())?.is_some());
                }
                if caps.sampling.is_some() {
                    let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 10});
                    asked.push(input.sample("hello", params)?.is_some());
                }
                if caps.roots.is_some() {
                    asked.push(input.roots("client_roots")?.is_some());
                }
                if !input.complete() {
                    return Err(input.ask());
                }
                Ok(format!("received {} inputs", asked.len()))
            }),
    ]
}

fn dynamic_tool() -> ToolEntry {
    simple(
        "test_dynamic_tool",
        "A tool that appears and disappears (test_trigger_tool_change)",
        || CallToolResult::text("dynamic tool"),
    )
}

fn prompts() -> Vec<PromptEntry> {
    vec![
        PromptEntry::new("test_simple_prompt", |_, _| async {
            Ok(GetPromptResult {
                result_type: Default::default(),
                description: None,
                messages: vec![PromptMessage {
                    role: Role::User,
                    content: ContentBlock::text("This is a simple prompt for testing."),
                }],
                meta: None,
            })
        })
        .description("A simple prompt without arguments"),
        PromptEntry::new("test_prompt_with_arguments", |args, _| async move {
            let get = |k: &str| args.get(k).cloned().unwrap_or_default();
            Ok(GetPromptResult {
                result_type: Default::default(),
                description: None,
                messages: vec![PromptMessage {
                    role: Role::User,
                    content: ContentBlock::text(format!(
                        "Prompt with arguments: arg1='{}', arg2='{}'",
                        get("arg1"),
                        get("arg2")
                    )),
                }],
                meta: None,
            })
        })
        .description("A prompt with required arguments")
        .argument("arg1", "First test argument", true)
        .argument("arg2", "Second test argument", true)
        .completer(|_arg, value, _others| {
            ["paris", "park", "party", "test", "testing"].iter().filter(|c| c.starts_with(value)).map(|c| (*c).to_owned()).collect()
        }),
        PromptEntry::new("test_prompt_with_embedded_resource", |args, _| async move {
            let uri = args.get("resourceUri").cloned().unwrap_or_default();
            Ok(GetPromptResult {
                result_type: Default::default(),
                description: None,
                messages: vec![
                    PromptMessage {
                        role: Role::User,
                        content: ContentBlock::embedded(ResourceContents::text(uri, Some("text/plain"), "Embedded resource content for testing.")),
                    },
                    PromptMessage { role: Role::User, content: ContentBlock::text("Please process the embedded resource above.") },
                ],
                meta: None,
            })
        })
        .description("A prompt that embeds a resource")
        .argument("resourceUri", "URI of the resource to embed", true),
        PromptEntry::new("test_prompt_with_image", |_, _| async {
            Ok(GetPromptResult {
                result_type: Default::default(),
                description: None,
                messages: vec![
                    PromptMessage { role: Role::User, content: ContentBlock::image(IMAGE_PNG, "image/png") },
                    PromptMessage { role: Role::User, content: ContentBlock::text("Please analyze the image above.") },
                ],
                meta: None,
            })
        })
        .description("A prompt with an image"),
        PromptEntry::new("test_input_required_result_prompt", |_, ctx| async move {
            let mut input = ctx.inputs();
            let form = json!({"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]});
            let Some(answer) = input.elicit("user_context", "What context should the prompt use?", form)? else {
                return Err(input.ask());
            };
            Ok(GetPromptResult {
                result_type: Default::default(),
                description: None,
                messages: vec![PromptMessage { role: Role::User, content: ContentBlock::text(format!("Context: {}", field(&answer, "context"))) }],
                meta: None,
            })
        })
        .description("A prompt that asks the user for context first"),
    ]
}

fn resources() -> (Vec<ResourceEntry>, Vec<TemplateEntry>) {
    let mut text = Resource::new("test://static-text", "static-text");
    text.description = Some("A static text resource for testing".into());
    text.mime_type = Some("text/plain".into());
    let mut binary = Resource::new("test://static-binary", "static-binary");
    binary.description = Some("A static binary resource (image) for testing".into());
    binary.mime_type = Some("image/png".into());
    let template = ResourceTemplate {
        uri_template: "test://template/{id}/data".into(),
        name: "template".into(),
        title: None,
        description: Some("A resource template with an id parameter".into()),
        mime_type: Some("application/json".into()),
        annotations: None,
        icons: None,
        meta: None,
    };
    (
        vec![
            ResourceEntry::new(text, |uri, _| async move {
                Ok(vec![ResourceContents::text(
                    uri,
                    Some("text/plain"),
                    "This is the content of the static text resource.",
                )])
            }),
            ResourceEntry::new(binary, |uri, _| async move {
                Ok(vec![ResourceContents::blob(
                    uri,
                    Some("image/png"),
                    IMAGE_PNG,
                )])
            }),
        ],
        vec![TemplateEntry::new(template, |uri, vars, _| async move {
            let id = vars.get("id").cloned().unwrap_or_default();
            Ok(vec![ResourceContents::text(
                uri,
                Some("application/json"),
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string(),
            )])
        })],
    )
}

fn build() -> anyhow::Result<Server> {
    let (resources, templates) = resources();
    let mut builder = Server::builder("toolgate-everything-server", env!("CARGO_PKG_VERSION"))
        .instructions("The toolgate conformance server: test tools, prompts and resources.");
    for t in tools()
        .into_iter()
        .chain(schema_tools())
        .chain(mrtr_tools())
        .chain(input_tools::tools())
        .chain(task_tools::tools())
    {
        builder = builder.tool(t);
    }
    for p in prompts() {
        builder = builder.prompt(p);
    }
    for r in resources {
        builder = builder.resource(r);
    }
    for t in templates {
        builder = builder.resource_template(t);
    }
    let server = builder
        .build()
        .context("registering the conformance tools")?;

    // Hooks that change the tool and prompt sets at run time.
    let toggled = Arc::new(AtomicBool::new(false));
    let handle = server.clone();
    server.add_tool(
        ToolDef::new("test_trigger_tool_change")
            .description("Adds or removes test_dynamic_tool, changing the tool list")
            .handler(move || {
                let (server, toggled) = (handle.clone(), toggled.clone());
                async move {
                    if toggled.fetch_xor(true, Ordering::SeqCst) {
                        server.remove_tool("test_dynamic_tool");
                        Ok("removed test_dynamic_tool")
                    } else {
                        server
                            .add_tool(dynamic_tool())
                            .map_err(|e| ToolError::new(e.to_string()))?;
                        Ok("added test_dynamic_tool")
                    }
                }
            }),
    )?;
    let handle = server.clone();
    let prompt_toggled = Arc::new(AtomicBool::new(false));
    server.add_tool(
        ToolDef::new("test_trigger_prompt_change")
            .description("Adds or removes test_dynamic_prompt, changing the prompt list")
            .handler(move || {
                let (server, toggled) = (handle.clone(), prompt_toggled.clone());
                async move {
                    if toggled.fetch_xor(true, Ordering::SeqCst) {
                        server.remove_prompt("test_dynamic_prompt");
                    } else {
                        let prompt = PromptEntry::new("test_dynamic_prompt", |_, _| async {
                            Ok(GetPromptResult {
                                result_type: Default::default(),
                                description: None,
                                messages: vec![],
                                meta: None,
                            })
                        })
                        .description("A prompt that appears and disappears");
                        server
                            .add_prompt(prompt)
                            .map_err(|e| ToolError::new(e.to_string()))?;
                    }
                    Ok("prompt list changed")
                }
            }),
    )?;
    Ok(server)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    toolgate_protocol::logging::init("info");
    let args = Args::parse();
    let server = build()?;
    if args.stdio {
        serve_stdio(server).await?;
    } else {
        let config = HttpConfig {
            bind: ([127, 0, 0, 1], args.port).into(),
            ..HttpConfig::default()
        };
        let shutdown = server.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                shutdown.shutdown();
            }
        });
        serve_http(server, config).await?;
    }
    Ok(())
}
