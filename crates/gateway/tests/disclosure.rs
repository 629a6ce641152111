//! Progressive disclosure (`disclosure = "search"`): the endpoint lists
//! its pinned tools and `find_tools`/`call_tool`, the same whatever was
//! searched; a found tool's call is that tool's own call — checked,
//! approved naming it, recorded as it with `via = "search"`; what the
//! endpoint withholds is answered as if it did not exist; each kind of bad
//! input gets its own short answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{Person, config, outcome_of, serve, toml_string, tool_names as names};
use tokio::net::TcpListener;
use toolgate_client::Client;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_server::transport::http::serve_listener;
use toolgate_server::{Server, ToolDef};

#[derive(Deserialize, JsonSchema)]
struct Mail {
    /// Who to write to.
    to: String,
    /// The subject line.
    subject: String,
}

#[derive(Deserialize, JsonSchema)]
struct Range {
    /// From (a date).
    from: String,
    /// To (a date).
    to: String,
}

/// An office suite: what reached it is kept.
fn office(seen: Arc<Mutex<Vec<String>>>) -> Server {
    let (a, b, c) = (seen.clone(), seen.clone(), seen);
    Server::builder("office", "1")
        .tool(
            ToolDef::new("list_events")
                .description("Lists the events on your calendar between two dates.")
                .read_only()
                .handler(move |r: Range| {
                    a.lock().push("list_events".into());
                    async move { Ok(format!("2 events from {} to {}", r.from, r.to)) }
                }),
        )
        .tool(
            ToolDef::new("send_email")
                .description("Sends an email message to one recipient.")
                .handler(move |m: Mail| {
                    b.lock().push(format!("send_email {}", m.to));
                    async move { Ok(format!("sent {:?}", m.subject)) }
                }),
        )
        .tool(
            ToolDef::new("refund")
                .description("Refunds an order to the customer's card.")
                .handler(move |_: toolgate_server::NoArgs| {
                    c.lock().push("refund".into());
                    async { Ok("refunded".to_owned()) }
                }),
        )
        .tool(
            ToolDef::new("drop_project")
                .description("Deletes a project and everything in it.")
                .handler(|_: toolgate_server::NoArgs| async { Ok("dropped".to_owned()) }),
        )
        .build()
        .unwrap()
}

const SEARCH: &str = r#"
[policy]
default = "allow"
[[policy.rules]]
tools = ["t.drop_*"]
action = "deny"
[[policy.rules]]
tools = ["t.refund"]
action = "confirm"

[endpoints.s]
servers = ["t"]
disclosure = "search"
pinned = ["t.list_events"]

[endpoints.nothing]
tools = ["none.*"]
disclosure = "search"
"#;

struct Running {
    gateway: Gateway,
    base: String,
    seen: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let upstream = serve(office(seen.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let db = toml_string(&dir.path().join("audit.db").display().to_string());
    let text = format!(
        "[servers.t]\nurl = \"{upstream}\"\nprefix = \"t\"\n[audit]\npath = {db}\n{SEARCH}"
    );
    let gateway = Gateway::start(config(&text), GatewayOptions::default())
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (main, http) = toolgate_gateway::surface::listener::http(&gateway, addr, None).unwrap();
    tokio::spawn(serve_listener(main, http, listener));
    Running {
        gateway,
        base: format!("http://{addr}"),
        seen,
        _dir: dir,
    }
}

fn client(url: String, person: Person) -> Client {
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(person)
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

/// `find_tools`' answer: whether it is not an error, the names found,
/// and the first text.
async fn find(c: &Client, arguments: Value) -> (bool, Vec<String>, Value) {
    let result = match c
        .call_tool(
            "find_tools",
            support::args(arguments),
            &toolgate_client::CallOptions::default(),
        )
        .await
    {
        Ok(r) => r,
        Err(toolgate_client::ClientError::Tool { result, .. }) => *result,
        Err(e) => panic!("{e}"),
    };
    let found = result
        .structured_content
        .as_ref()
        .and_then(|s| s["tools"].as_array().cloned())
        .unwrap_or_default();
    let names = found
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    let text = json!(result.content[0].as_text().unwrap_or_default());
    (
        result.is_error != Some(true),
        names,
        json!({"text": text, "tools": found}),
    )
}

#[tokio::test]
async fn a_searching_endpoint_lists_pinned_tools_and_finds_the_rest() {
    let r = start().await;
    let c = client(
        format!("{}/mcp/s", r.base),
        Person::new(json!({"action": "accept", "content": {"approve": true}})),
    );
    let listed = ["call_tool", "find_tools", "t.list_events"];
    assert_eq!(names(&c).await, listed);
    let (ok, found, said) = find(&c, json!({"query": "what meetings do I have tomorrow"})).await;
    assert!(ok, "{said}");
    assert_eq!(
        found.first().map(String::as_str),
        Some("t.list_events"),
        "{said}"
    );
    // Definitions in full: the schema a call is checked against.
    assert_eq!(
        said["tools"][0]["inputSchema"]["required"],
        json!(["from", "to"])
    );
    let (_, found, _) = find(&c, json!({"query": "email someone", "limit": 1})).await;
    assert_eq!(found, ["t.send_email"]);
    // The denied tool is never found.
    let (_, found, _) = find(&c, json!({"query": "delete a project", "limit": 50})).await;
    assert!(!found.contains(&"t.drop_project".to_owned()), "{found:?}");
    // An effects filter: tools that only read.
    let (_, found, _) = find(
        &c,
        json!({"query": "email calendar events refund", "effects": ["read"], "limit": 50}),
    )
    .await;
    assert_eq!(found, ["t.list_events"]);
    // Searching changed nothing of the list.
    assert_eq!(names(&c).await, listed);
    r.gateway.stop();
}

#[tokio::test]
async fn a_found_tool_s_call_is_that_tool_s_own_call() {
    let r = start().await;
    let person = Person::new(json!({"action": "accept", "content": {"approve": true}}));
    let c = client(format!("{}/mcp/s", r.base), person.clone());
    let (ok, text) = outcome_of(
        &c,
        "call_tool",
        json!({"name": "t.send_email", "arguments": {"to": "ana@example.com", "subject": "hi"}}),
    )
    .await;
    assert!(ok, "{text}");
    assert_eq!(text, "sent \"hi\"");
    // Checked against the tool's own schema, naming the field.
    let (ok, text) = outcome_of(
        &c,
        "call_tool",
        json!({"name": "t.send_email", "arguments": {"to": "ana@example.com"}}),
    )
    .await;
    assert!(!ok && text.contains("subject"), "{text}");
    // A confirmed tool: the person is asked about the real tool.
    let (ok, text) = outcome_of(&c, "call_tool", json!({"name": "t.refund"})).await;
    assert!(ok, "{text}");
    let asked = person.approvals();
    assert_eq!(asked.len(), 1);
    let question = asked[0]["message"].as_str().unwrap();
    assert!(question.contains("Tool: t.refund"), "{question}");
    // By its own name an unlisted tool is unknown: tools/list is the set
    // of tools a client can call.
    let direct = c
        .request(
            "tools/call",
            support::args(json!({"name": "t.send_email", "arguments": {"to": "bo@example.com", "subject": "x"}})),
            &toolgate_client::CallOptions::default(),
        )
        .await;
    assert!(direct.is_err(), "{direct:?}");
    assert_eq!(*r.seen.lock(), ["send_email ana@example.com", "refund"]);
    let rows = r
        .gateway
        .audit_sink()
        .unwrap()
        .rows(Filter::default())
        .await
        .unwrap();
    let seen: Vec<(&str, &str, Option<&str>, Option<&str>)> = rows
        .iter()
        .map(|row| {
            (
                row.tool.as_str(),
                row.status.as_str(),
                row.via.as_deref(),
                row.endpoint.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("t.send_email", "ok", Some("search"), Some("s")),
            (
                "t.send_email",
                "invalid_arguments",
                Some("search"),
                Some("s")
            ),
            // The approval's round, then the approved call.
            ("t.refund", "input_required", Some("search"), Some("s")),
            ("t.refund", "ok", Some("search"), Some("s")),
        ],
        "{rows:?}"
    );
    r.gateway.stop();
}

#[tokio::test]
async fn what_the_endpoint_withholds_is_answered_as_if_it_did_not_exist() {
    let r = start().await;
    let c = client(
        format!("{}/mcp/s", r.base),
        Person::new(json!({"action": "decline"})),
    );
    let (ok, denied) = outcome_of(&c, "call_tool", json!({"name": "t.drop_project"})).await;
    assert!(!ok);
    assert!(
        denied.starts_with("This endpoint has no tool named \"t.drop_project\"."),
        "{denied}"
    );
    assert!(
        !denied.contains("deny") && !denied.contains("rule"),
        "{denied}"
    );
    let (ok, typo) = outcome_of(
        &c,
        "call_tool",
        json!({"name": "t.send_mail", "arguments": {}}),
    )
    .await;
    assert!(!ok);
    assert!(typo.contains("Closest: \"t.send_email\""), "{typo}");
    assert!(r.seen.lock().is_empty());
    r.gateway.stop();
}

#[tokio::test]
async fn each_kind_of_bad_input_gets_its_own_answer() {
    let r = start().await;
    let c = client(
        format!("{}/mcp/s", r.base),
        Person::new(json!({"action": "decline"})),
    );
    // find_tools: empty, 1 MB, control characters only, limits out of range.
    let (ok, _, said) = find(&c, json!({"query": ""})).await;
    assert!(
        !ok && said["text"].as_str().unwrap().contains("query"),
        "{said}"
    );
    let huge = "calendar ".repeat(120_000);
    let (ok, _, said) = find(&c, json!({"query": huge})).await;
    assert!(
        !ok && said["text"].as_str().unwrap().contains("query"),
        "{said}"
    );
    assert!(said["text"].as_str().unwrap().len() < 600, "short: {said}");
    let (ok, _, said) = find(&c, json!({"query": "\u{0}\u{1b}\u{7f} \t the of"})).await;
    assert!(
        !ok && said["text"].as_str().unwrap().contains("no words"),
        "{said}"
    );
    // Control characters separate words; they are never part of one.
    let (ok, found, said) = find(&c, json!({"query": "send\u{0}an\u{1b}email", "limit": 1})).await;
    assert!(ok && found == ["t.send_email"], "{said}");
    for limit in [0, 10_000] {
        let (ok, _, said) = find(&c, json!({"query": "email", "limit": limit})).await;
        assert!(
            !ok && said["text"].as_str().unwrap().contains("limit"),
            "{limit}: {said}"
        );
    }
    let (ok, _, said) = find(&c, json!({"query": "email", "effects": ["teleport"]})).await;
    assert!(
        !ok && said["text"].as_str().unwrap().contains("effects"),
        "{said}"
    );
    // call_tool: no name, arguments not an object, a meta-call inside a
    // meta-call, find_tools through call_tool.
    let (ok, text) = outcome_of(&c, "call_tool", json!({})).await;
    assert!(!ok && text.contains("\"name\""), "{text}");
    let (ok, text) = outcome_of(
        &c,
        "call_tool",
        json!({"name": "t.send_email", "arguments": [1]}),
    )
    .await;
    assert!(
        !ok && text.contains("\"arguments\" must be an object"),
        "{text}"
    );
    let nested = json!({"name": "call_tool", "arguments": {"name": "t.send_email", "arguments": {"to": "x", "subject": "y"}}});
    let (ok, text) = outcome_of(&c, "call_tool", nested).await;
    assert!(!ok && text.contains("call it directly"), "{text}");
    let (ok, text) = outcome_of(
        &c,
        "call_tool",
        json!({"name": "find_tools", "arguments": {"query": "x"}}),
    )
    .await;
    assert!(!ok && text.contains("call it directly"), "{text}");
    assert!(r.seen.lock().is_empty());
    // A search on an endpoint with no tools.
    let empty = client(
        format!("{}/mcp/nothing", r.base),
        Person::new(json!({"action": "decline"})),
    );
    assert_eq!(names(&empty).await, ["call_tool", "find_tools"]);
    let (ok, found, said) = find(&empty, json!({"query": "anything at all"})).await;
    assert!(ok && found.is_empty(), "{said}");
    assert!(
        said["text"].as_str().unwrap().contains("no tools"),
        "{said}"
    );
    // The gateway is still there for everyone else.
    let (ok, _) = outcome_of(
        &c,
        "call_tool",
        json!({"name": "t.list_events", "arguments": {"from": "a", "to": "b"}}),
    )
    .await;
    assert!(ok);
    r.gateway.stop();
}

#[test]
fn a_searching_endpoint_is_configured_or_refused_by_name() {
    let base = "[servers.t]\nurl = \"http://127.0.0.1:9/mcp\"\nprefix = \"t\"\n";
    let refused = |extra: &str| {
        toolgate_gateway::config::GatewayConfig::parse_toml(&format!("{base}{extra}"), |_| None)
            .unwrap_err()
            .to_string()
    };
    let e = refused("[endpoints.e]\nservers = [\"t\"]\npinned = [\"t.a\"]\n");
    assert!(
        e.contains("[endpoints.e] pinned") && e.contains("disclosure = \"search\""),
        "{e}"
    );
    let e =
        refused("[endpoints.e]\nservers = [\"t\"]\ndisclosure = \"search\"\npinned = [\"[\"]\n");
    assert!(e.contains("not a glob"), "{e}");
    let e = refused(
        "[endpoints.e]\nservers = [\"t\"]\ndisclosure = \"search\"\n[endpoints.e.shape.\"t.a\"]\nname = \"call_tool\"\n",
    );
    assert!(e.contains("one of the search's own tools"), "{e}");
    let e = refused("[endpoints.e]\nservers = [\"t\"]\ndisclosure = \"everything\"\n");
    assert!(e.contains("disclosure") || e.contains("everything"), "{e}");
}
