//! The client the official conformance suite tests. The runner passes the
//! server URL as the last argument and the scenario in
//! `MCP_CONFORMANCE_SCENARIO` (with extra data in `MCP_CONFORMANCE_CONTEXT`);
//! each scenario gets the behaviour a real application would show.

#[path = "../client_auth.rs"]
mod client_auth;

use anyhow::Context as _;
use serde_json::{Map, Value, json};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, CallOptions, Client, ClientError, InputHandler};
use toolgate_server::protocol::methods::{ListPrompts, ListResources};
use toolgate_server::protocol::types::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ListRootsResult, Role, Root,
};

/// Answers every input request the way a cooperative user would.
struct Cooperative;

/// A value that satisfies a (simple) JSON Schema property: its default
/// when it has one (a form shows defaults prefilled), else a plausible value.
fn sample_value(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("boolean") => json!(true),
        Some("integer") | Some("number") => json!(1),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("test"),
    }
}

impl InputHandler for Cooperative {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}, "sampling": {}, "roots": {}}))
            .unwrap_or_default()
    }

    fn elicit(
        &self,
        request: ElicitRequestParams,
    ) -> BoxFuture<'_, Result<ElicitResult, ClientError>> {
        Box::pin(async move {
            let mut content = Map::new();
            if let Some(props) = request
                .requested_schema
                .as_ref()
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
            {
                for (name, schema) in props {
                    content.insert(name.clone(), sample_value(schema));
                }
            }
            Ok(ElicitResult::accept(content))
        })
    }

    fn sample(
        &self,
        _request: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, ClientError>> {
        Box::pin(async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: json!({"type": "text", "text": "Hello from the conformance client"}),
                model: "test-model".into(),
                stop_reason: Some("endTurn".into()),
                extra: Map::new(),
            })
        })
    }

    fn roots(&self) -> BoxFuture<'_, Result<ListRootsResult, ClientError>> {
        Box::pin(async {
            Ok(ListRootsResult {
                roots: vec![Root {
                    uri: "file:///tmp/conformance".into(),
                    name: Some("conformance".into()),
                    extra: Map::new(),
                }],
                extra: Map::new(),
            })
        })
    }
}

fn object(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Call a tool, logging rather than failing on its errors: the scenario
/// judges what was sent.
async fn call(client: &Client, name: &str, args: Map<String, Value>) {
    match client.call_tool(name, args, &CallOptions::default()).await {
        Ok(r) => tracing::info!(tool = name, result = ?r.content.first(), "called"),
        Err(e) => tracing::warn!(tool = name, error = %e, "call failed"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    toolgate_protocol::logging::init("info");
    let url = std::env::args()
        .next_back()
        .context("usage: everything-client URL")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let client = Client::builder("toolgate-everything-client", env!("CARGO_PKG_VERSION"))
        .input_handler(Cooperative)
        .name(scenario.clone())
        .build(HttpTransport::new(
            url,
            HttpOptions {
                oauth: client_auth::for_scenario(&scenario, &context)?,
                ..HttpOptions::default()
            },
        )?);

    if scenario == "request-metadata" {
        client.discover().await.context("server/discover")?;
        client.list_tools().await.context("tools/list")?;
        return Ok(());
    }
    let tools = client.list_tools().await.context("tools/list")?;
    match scenario.as_str() {
        "json-schema-ref-no-deref" => {}
        "tools_call" | "tools-call" => {
            if let Some(tool) = tools.first() {
                call(&client, &tool.name, object(&json!({"a": 2, "b": 3}))).await;
            }
        }
        "json-schema-2020-12-preservation" => {
            let focal = tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .context("the focal tool is not listed")?;
            let args = object(&json!({"schema": Value::Object(focal.input_schema.clone())}));
            call(&client, "json_schema_echo", args).await;
        }
        _ if context.get("toolCalls").is_some() => {
            for planned in context["toolCalls"].as_array().into_iter().flatten() {
                let name = planned["name"].as_str().unwrap_or_default();
                call(&client, name, object(&planned["arguments"])).await;
            }
        }
        _ => {
            // Exercise everything the server offers.
            for tool in &tools {
                call(&client, &tool.name, Map::new()).await;
            }
            if let Ok(resources) = client.list::<ListResources>().await {
                for r in resources {
                    let _ = client.read_resource(&r.uri).await;
                }
            }
            if let Ok(prompts) = client.list::<ListPrompts>().await {
                for p in prompts {
                    let _ = client.get_prompt(&p.name, Map::new()).await;
                }
            }
        }
    }
    Ok(())
}
