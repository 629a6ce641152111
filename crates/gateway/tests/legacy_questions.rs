//! A legacy upstream that asks in the middle of a call: the question
//! reaches the gateway's caller as an `input_required` round, the answer
//! goes back to the call still waiting upstream.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{Pipe, config, downstream, serve, toml_string};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{
    BoxFuture, CallEnd, CallOptions, CallRound, Client, ClientError, InputHandler, RoundInput,
};
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::types::ClientCapabilities;
use toolgate_server::{RequestContext, Server, ToolDef};

/// A legacy (2025-11-25) stdio server in shell: `greet` asks for a name
/// with `elicitation/create` in the middle of the call and greets whoever
/// the answer names, or says `no answer` when the answer is an error.
const ASKING: &str = r#"while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); case "$line" in *server/discover*) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}\n' "$id";; *'"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"1"}}}\n' "$id";; *tools/list*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"greet","inputSchema":{"type":"object"}}]}}\n' "$id";; *tools/call*) printf '{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}\n'; read answer; name=$(printf '%s' "$answer" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p'); case "$answer" in *'"error"'*) text="no answer";; *) text="hello $name";; esac; printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}\n' "$id" "$text";; *) [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}\n' "$id";; esac; done"#;

/// Answers every form with `{"name": "Ada"}` and keeps the messages it saw.
#[derive(Clone, Default)]
struct Ada(Arc<Mutex<Vec<String>>>);

impl InputHandler for Ada {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        request: toolgate_protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>> {
        self.0.lock().unwrap().push(request.message);
        Box::pin(async {
            Ok(
                serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada"}}))
                    .unwrap(),
            )
        })
    }
}

async fn gateway() -> Gateway {
    let toml = format!(
        "[servers.old]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\n",
        toml_string(ASKING)
    );
    Gateway::start(config(&toml), GatewayOptions::default())
        .await
        .unwrap()
}

async fn client(gateway: &Gateway, person: Option<Ada>) -> Client {
    let url = serve(gateway.server()).await;
    let builder = Client::builder("test", "1").timeout(Duration::from_secs(10));
    let builder = match person {
        Some(p) => builder.input_handler(p),
        None => builder,
    };
    builder.build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

async fn greet(c: &Client) -> String {
    let done = c
        .call_tool("old.greet", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    done.content[0].as_text().unwrap().to_owned()
}

#[tokio::test]
async fn a_legacy_upstreams_question_is_asked_of_the_caller_and_answered_upstream() {
    let gateway = gateway().await;
    let person = Ada::default();
    let c = client(&gateway, Some(person.clone())).await;
    assert_eq!(greet(&c).await, "hello Ada");
    assert_eq!(*person.0.lock().unwrap(), ["Your name?"]);
    // Again, on the same upstream process: the first call left nothing behind.
    assert_eq!(greet(&c).await, "hello Ada");
    assert_eq!(person.0.lock().unwrap().len(), 2);
    gateway.stop();
}

#[tokio::test]
async fn a_caller_that_cannot_answer_leaves_the_upstream_to_decide_and_others_unharmed() {
    let gateway = gateway().await;
    // No elicitation capability: the upstream is told, and answers as it
    // chooses (this one says so in its result).
    let mute = client(&gateway, None).await;
    assert_eq!(greet(&mute).await, "no answer");
    // A caller that can answer is served afterwards, by the same upstream.
    let person = Ada::default();
    let c = client(&gateway, Some(person.clone())).await;
    assert_eq!(greet(&c).await, "hello Ada");
    // A caller the gateway itself would ask (a plain downstream) works too.
    let plain = downstream(&gateway).await;
    let text = greet(&plain).await;
    assert_eq!(
        text, "hello ",
        "the support client answers {{\"ok\": true}}"
    );
    gateway.stop();
}

#[tokio::test]
async fn an_answer_that_reaches_another_gateway_process_is_told_to_call_again() {
    // Two gateways with one state key: the second can open the first's
    // requestState, but the call waiting upstream lives in the first.
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("state.key");
    std::fs::write(&key, "k".repeat(40)).unwrap();
    let toml = format!(
        "[servers.old]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\n[state]\nkey_file = {}\n",
        toml_string(ASKING),
        toml_string(&key.display().to_string())
    );
    let first = Gateway::start(config(&toml), GatewayOptions::default())
        .await
        .unwrap();
    let second = Gateway::start(config(&toml), GatewayOptions::default())
        .await
        .unwrap();
    let (a, b) = (
        client(&first, Some(Ada::default())).await,
        client(&second, Some(Ada::default())).await,
    );
    let (requests, state) = match a
        .call_tool_round("old.greet", Map::new(), None, &CallOptions::default())
        .await
        .unwrap()
    {
        CallRound::InputRequired {
            input_requests,
            request_state,
        } => (input_requests, request_state),
        other => panic!("not asked: {other:?}"),
    };
    let (key, question) = requests.iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "Your name?");
    let mut responses = Map::new();
    responses.insert(
        key.clone(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    let answer = RoundInput {
        input_responses: responses,
        request_state: state,
    };
    let elsewhere = b
        .call_tool_round(
            "old.greet",
            Map::new(),
            Some(answer.clone()),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let CallRound::Complete(CallEnd::Result(refused)) = elsewhere else {
        panic!("asked again");
    };
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(
        refused.content[0].as_text().unwrap(),
        "The upstream server old's call that this answer belongs to is no longer waiting: it ended or timed out, or the answer reached another gateway process. Call again."
    );
    // The process holding the call takes the same answer.
    match a
        .call_tool_round(
            "old.greet",
            Map::new(),
            Some(answer),
            &CallOptions::default(),
        )
        .await
        .unwrap()
    {
        CallRound::Complete(CallEnd::Result(r)) => {
            assert_eq!(r.content[0].as_text(), Some("hello Ada"))
        }
        other => panic!("asked again: {other:?}"),
    }
    // Both keep serving.
    assert_eq!(greet(&b).await, "hello Ada");
    first.stop();
    second.stop();
}

#[tokio::test]
async fn a_legacy_host_is_sent_the_legacy_upstreams_question_as_a_request() {
    let gateway = gateway().await;
    let mut p = Pipe::legacy_session(gateway.server()).await;
    p.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "old.greet", "arguments": {}}}))
        .await;
    let ask = p.recv().await;
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(ask["params"]["message"], "Your name?");
    p.send(json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"action": "accept", "content": {"name": "Grace"}}}))
        .await;
    let done = p.recv().await;
    assert_eq!(done["id"], 2, "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "hello Grace");
    gateway.stop();
}

/// A dual-era toolgate server whose `greet` asks for a name: to a legacy
/// session (as the front below makes it) that is an `elicitation/create`
/// on the call's response stream.
fn asking_server() -> Server {
    Server::builder("asking", "1")
        .tool(
            ToolDef::new("greet")
                .description("Greets whoever answers")
                .handler(|ctx: RequestContext| async move {
                    let mut input = ctx.inputs();
                    let form = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
                    let Some(answer) = input.elicit("name", "Your name?", form)? else {
                        return Err(input.ask());
                    };
                    let name = answer
                        .content
                        .as_ref()
                        .and_then(|c| c.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("nobody")
                        .to_owned();
                    Ok(format!("hello {name}"))
                }),
        )
        .build()
        .unwrap()
}

/// An HTTP front that makes `upstream` look like a legacy server: it
/// refuses `server/discover` as a legacy endpoint refuses a request without
/// a session (so the client falls back to `initialize`), and passes
/// everything else through, streams included.
async fn legacy_front(upstream: String) -> String {
    use axum::body::{Body, Bytes};
    use axum::http::{HeaderMap, Method, StatusCode, header};
    use axum::response::{IntoResponse, Response};
    toolgate_client::install_default_tls_provider();
    let client = reqwest::Client::new();
    let forward = move |method: Method, headers: HeaderMap, body: Bytes| {
        let (client, upstream) = (client.clone(), upstream.clone());
        async move {
            if String::from_utf8_lossy(&body).contains("\"server/discover\"") {
                return (
                    StatusCode::BAD_REQUEST,
                    "Bad Request: No valid session ID provided",
                )
                    .into_response();
            }
            let mut request = client.request(method, &upstream).body(body);
            for (k, v) in &headers {
                if k != header::HOST && k != header::CONTENT_LENGTH {
                    request = request.header(k, v);
                }
            }
            let answer = request.send().await.unwrap();
            let mut response = Response::builder().status(answer.status());
            for (k, v) in answer.headers() {
                if k != header::CONTENT_LENGTH && k != header::TRANSFER_ENCODING {
                    response = response.header(k, v);
                }
            }
            response
                .body(Body::from_stream(answer.bytes_stream()))
                .unwrap()
        }
    };
    let app = axum::Router::new().route("/mcp", axum::routing::any(forward));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Answers every form with `{"name": NAME}`.
struct Named(&'static str);

impl InputHandler for Named {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}})).unwrap()
    }
    fn elicit(
        &self,
        _request: toolgate_protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>> {
        let name = self.0;
        Box::pin(async move {
            Ok(
                serde_json::from_value(json!({"action": "accept", "content": {"name": name}}))
                    .unwrap(),
            )
        })
    }
}

#[tokio::test]
async fn over_http_each_question_reaches_the_caller_of_the_call_that_asked() {
    let front = legacy_front(serve(asking_server()).await).await;
    let toml = format!("[servers.old]\nurl = {}\n", toml_string(&front));
    let gateway = Gateway::start(config(&toml), GatewayOptions::default())
        .await
        .unwrap();
    let url = serve(gateway.server()).await;
    let caller = |name: &'static str| {
        Client::builder(name, "1")
            .timeout(Duration::from_secs(10))
            .input_handler(Named(name))
            .build(HttpTransport::new(url.clone(), HttpOptions::default()).unwrap())
    };
    let (ada, grace) = (caller("Ada"), caller("Grace"));
    // Two calls in flight at once on one legacy session: each question is
    // routed by the response stream that carried it.
    let (a, g) = tokio::join!(greet(&ada), greet(&grace));
    assert_eq!((a.as_str(), g.as_str()), ("hello Ada", "hello Grace"));
    for _ in 0..3 {
        let (a, g) = tokio::join!(greet(&grace), greet(&ada));
        assert_eq!((a.as_str(), g.as_str()), ("hello Grace", "hello Ada"));
    }
    gateway.stop();
}
