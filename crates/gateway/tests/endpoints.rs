//! `[endpoints.NAME]`: virtual servers on one gateway's listener. Each
//! sees only its tools, shaped for the model; a fixed value reaches the
//! upstream; a global deny holds inside an endpoint that allows; an
//! endpoint's own deny narrows; a state sealed on one endpoint does not
//! open on another; bad endpoint configurations are refused at load.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{Yes, config, outcome_of, refused, serve, tool_names as names};
use tokio::net::TcpListener;
use toolgate_client::Client;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_gateway::config::{Action, GatewayConfig};
use toolgate_gateway::decide::policy::{Policy, ToolFacts};
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_server::transport::http::serve_listener;
use toolgate_server::{Server, ToolDef};

#[derive(Deserialize, JsonSchema)]
struct Search {
    /// Whose issues.
    #[schemars(regex(pattern = r"^[a-z]+$"))]
    org: String,
    /// What to look for.
    query: String,
    /// How many at most.
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
}

/// An issue tracker: `search` says what it was asked, `refund` and
/// `drop_project` say they ran.
fn tracker(seen: Arc<Mutex<Vec<Value>>>) -> Server {
    Server::builder("tracker", "1")
        .tool(
            ToolDef::new("search")
                .description("Searches issues.")
                .handler(move |args: Search| {
                    let seen = seen.clone();
                    async move {
                        let said =
                            json!({"org": args.org, "query": args.query, "limit": args.limit});
                        seen.lock().push(said.clone());
                        Ok(said.to_string())
                    }
                }),
        )
        .tool(
            ToolDef::new("refund")
                .description("Refunds an order.")
                .handler(|_: toolgate_server::NoArgs| async { Ok("refunded".to_owned()) }),
        )
        .tool(
            ToolDef::new("drop_project")
                .description("Deletes a project.")
                .handler(|_: toolgate_server::NoArgs| async { Ok("dropped".to_owned()) }),
        )
        .build()
        .unwrap()
}

const ENDPOINTS: &str = r#"
[policy]
default = "allow"
[[policy.rules]]
tools = ["t.drop_*"]
action = "deny"

[endpoints.coding]
tools = ["t.search", "t.drop_project"]
instructions = "Repository tools for ACME."
[endpoints.coding.shape."t.search"]
name = "find_issue"
title = "Find an issue"
description_append = "Only ACME's issues are searched."
fixed = { org = "acme" }
narrow = { limit = { maximum = 20 } }

[endpoints.support]
servers = ["t"]
[[endpoints.support.policy.rules]]
tools = ["t.drop_*", "t.refund"]
action = "allow"
[[endpoints.support.policy.rules]]
tools = ["t.search"]
action = "deny"
"#;

/// The gateway over `upstream`, served as `toolgate serve --http` serves
/// it; the listener's base URL.
async fn start(upstream: &str, extra: &str) -> (Gateway, String) {
    let text = format!("[servers.t]\nurl = \"{upstream}\"\nprefix = \"t\"\n{extra}");
    let gateway = Gateway::start(config(&text), GatewayOptions::default())
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (main, http) = toolgate_gateway::surface::listener::http(&gateway, addr, None).unwrap();
    tokio::spawn(serve_listener(main, http, listener));
    (gateway, format!("http://{addr}"))
}

fn client(url: String) -> Client {
    Client::builder("test", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(Yes)
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

#[tokio::test]
async fn each_endpoint_offers_its_tools_shaped_under_its_own_policy() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let upstream = serve(tracker(seen.clone())).await;
    let (gateway, base) = start(&upstream, ENDPOINTS).await;
    let default = client(format!("{base}/mcp"));
    let coding = client(format!("{base}/mcp/coding"));
    let support_desk = client(format!("{base}/mcp/support"));

    // The default endpoint is as before: every tool the file does not deny.
    assert_eq!(names(&default).await, ["t.refund", "t.search"]);
    // Coding: its one tool, shaped; the globally denied one it names is
    // not there.
    assert_eq!(names(&coding).await, ["find_issue"]);
    let tool = coding.list_tools().await.unwrap().remove(0);
    assert_eq!(tool.title.as_deref(), Some("Find an issue"));
    assert_eq!(
        tool.description.as_deref(),
        Some("Searches issues.\n\nOnly ACME's issues are searched.")
    );
    let schema = Value::Object(tool.input_schema.clone());
    assert_eq!(schema.pointer("/properties/org"), None, "{schema}");
    assert_eq!(schema["required"], json!(["query"]));
    assert_eq!(
        schema.pointer("/properties/limit/maximum"),
        Some(&json!(20.0))
    );
    let found = coding.discover().await.unwrap();
    assert_eq!(
        found.instructions.as_deref(),
        Some("Repository tools for ACME.")
    );
    let info = serde_json::to_value(&found.meta).unwrap();
    assert_eq!(
        info.pointer("/io.modelcontextprotocol~1serverInfo/name"),
        Some(&json!("toolgate-gateway/coding")),
        "{info}"
    );
    // Support: the endpoint's deny narrows the file; its allow of what
    // the file denies widens nothing.
    assert_eq!(names(&support_desk).await, ["t.refund"]);
    let text = refused(&support_desk, "t.drop_project", json!({})).await;
    assert!(text.contains("t.drop_project"), "{text}");

    // The fixed value reaches the upstream; the model never gave it.
    let (ok, text) = outcome_of(&coding, "find_issue", json!({"query": "crash", "limit": 5})).await;
    assert!(ok, "{text}");
    assert_eq!(
        seen.lock().last().cloned(),
        Some(json!({"org": "acme", "query": "crash", "limit": 5}))
    );
    // A call that sets it anyway is refused and never sent; one over the
    // narrowed bound too.
    let before = seen.lock().len();
    let text = refused(&coding, "find_issue", json!({"query": "x", "org": "evil"})).await;
    assert_eq!(
        text,
        "The parameter \"org\" is set by this endpoint and cannot be given; call \"find_issue\" again without it."
    );
    let text = refused(&coding, "find_issue", json!({"query": "x", "limit": 50})).await;
    assert!(text.contains("limit"), "{text}");
    assert_eq!(seen.lock().len(), before);
    // The upstream's name is not callable on the endpoint that renames it.
    let unknown = coding
        .request(
            "tools/call",
            support::args(json!({"name": "t.search", "arguments": {"query": "x", "org": "acme"}})),
            &toolgate_client::CallOptions::default(),
        )
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    assert_eq!(seen.lock().len(), before);
    gateway.stop();
}

#[tokio::test]
async fn a_path_no_endpoint_is_at_is_404_naming_the_endpoints() {
    let upstream = serve(tracker(Arc::default())).await;
    let (gateway, base) = start(&upstream, ENDPOINTS).await;
    let (status, said) = support::http("POST", &format!("{base}/mcp/unknown"), &[], None).await;
    assert_eq!(status, 404, "{said}");
    let body: Value = serde_json::from_str(said.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(
        body["endpoints"],
        json!(["/mcp", "/mcp/coding", "/mcp/support"])
    );
    // Health still answers beside them.
    let (status, _) = support::http("GET", &format!("{base}/healthz"), &[], None).await;
    assert_eq!(status, 200);
    gateway.stop();
}

#[tokio::test]
async fn an_endpoint_at_mcp_takes_the_default_ones_place() {
    let upstream = serve(tracker(Arc::default())).await;
    let (gateway, base) = start(
        &upstream,
        "[endpoints.only]\npath = \"/mcp\"\ntools = [\"t.refund\"]\n",
    )
    .await;
    let only = client(format!("{base}/mcp"));
    assert_eq!(names(&only).await, ["t.refund"]);
    gateway.stop();
}

#[test]
fn endpoints_that_cannot_work_are_refused_at_load_naming_the_key() {
    let base = "[servers.t]\nurl = \"http://127.0.0.1:9/mcp\"\nprefix = \"t\"\n[servers.u]\nurl = \"http://127.0.0.1:9/mcp\"\nprefix = \"u\"\n";
    for (extra, said) in [
        (
            "[endpoints.a]\ntools = [\"t.*\"]\npath = \"/x\"\n[endpoints.b]\ntools = [\"u.*\"]\npath = \"/x\"\n",
            "line 9: [endpoints.b] path \"/x\" is also [endpoints.a]'s; give each its own",
        ),
        (
            "[endpoints.a]\nservers = [\"nope\"]\n",
            "line 8: [endpoints.a] servers names \"nope\", which is not in [servers] (known: t, u)",
        ),
        (
            "[endpoints.a]\n",
            "[endpoints.a] offers nothing: name its tools (`tools = [\"prefix.*\"]`) or its upstreams (`servers = [\"key\"]`)",
        ),
        (
            "[endpoints.a]\ntools = [\"t.*\", \"u.*\"]\n[endpoints.a.shape.\"t.x\"]\nname = \"same\"\n[endpoints.a.shape.\"u.y\"]\nname = \"same\"\n",
            "line 10: [endpoints.a.shape]: \"u.y\" and \"t.x\" would both be called \"same\"; give one another name",
        ),
        (
            "[endpoints.a]\ntools = [\"t.*\"]\n[endpoints.a.shape.\"u.y\"]\ntitle = \"Y\"\n",
            "line 9: [endpoints.a.shape.\"u.y\"]: the endpoint does not offer \"u.y\" (not matched by its tools or servers); shape only what it offers",
        ),
        (
            "[endpoints.A]\ntools = [\"t.*\"]\n",
            "[endpoints.A]: an endpoint name is 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit (it is a path segment and a metric label)",
        ),
        (
            "[endpoints.a]\ntools = [\"t.*\"]\n[[endpoints.a.ratelimit.rules]]\ntools = [\"t.*\"]\nper_minute = 0\n",
            "[endpoints.a.ratelimit] rule 1: per_minute must be at least 1 (deny the tools in [policy] instead)",
        ),
        (
            "[endpoints.-]\ntools = [\"t.*\"]\n",
            "[endpoints.-]: an endpoint name is 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit",
        ),
        (
            "[endpoints.a]\ntools = [\"t.*\"]\n[endpoints.a.shape.\"t.x\"]\nfixed = { n = 1 }\nnarrow = { n = { maximum = 2 } }\n",
            "[endpoints.a.shape.\"t.x\"]: \"n\" is both fixed and narrowed; a fixed parameter has one value",
        ),
        (
            "[endpoints.a]\ntools = [\"t.*\"]\n[endpoints.a.shape.\"t.x\"]\nnarrow = { q = { pattern = \"(\" } }\n",
            "line 10: [endpoints.a.shape.\"t.x\".narrow.q] pattern is not a regular expression",
        ),
        (
            "[endpoints.a]\ntools = [\"t.*\"]\n[endpoints.a.shape.\"t.x\"]\nname = \"bad name\"\n",
            "line 10: [endpoints.a.shape.\"t.x\"] name \"bad name\": a tool name may only contain",
        ),
        (
            "[endpoints.a]\ntools = [\"t.*\"]\ncolour = \"red\"\n",
            "unknown field `colour`",
        ),
    ] {
        let text = format!("{base}{extra}");
        let e = GatewayConfig::parse_toml(&text, |_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(said), "{extra}\n→ {e}");
    }
}

#[tokio::test]
async fn a_shape_the_upstream_refuses_withholds_the_tool_and_says_why() {
    let upstream = serve(tracker(Arc::default())).await;
    let (gateway, base) = start(
        &upstream,
        "[endpoints.a]\ntools = [\"t.search\"]\n[endpoints.a.shape.\"t.search\"]\nfixed = { org = \"ACME\" }\n",
    )
    .await;
    let a = client(format!("{base}/mcp/a"));
    assert!(names(&a).await.is_empty());
    let text = refused(&a, "t.search", json!({"query": "x"})).await;
    assert!(
        text.contains("its shape ([endpoints.a.shape.\"t.search\"]) does not fit the upstream's definition: fixed \"org\" = \"ACME\": the upstream's schema refuses that value"),
        "{text}"
    );
    gateway.stop();
}

#[test]
fn an_endpoint_narrows_the_file_and_never_widens_it() {
    let c = GatewayConfig::parse_toml(
        r#"
        [servers.shop]
        url = "http://127.0.0.1:9/mcp"
        [policy]
        default = "allow"
        [[policy.rules]]
        tools = ["shop.drop_*"]
        action = "deny"
        [[policy.rules]]
        tools = ["shop.pay"]
        action = "confirm"
        [endpoints.support]
        servers = ["shop"]
        [[endpoints.support.policy.rules]]
        tools = ["shop.drop_*", "shop.pay", "shop.refund"]
        action = "allow"
        [[endpoints.support.policy.rules]]
        tools = ["shop.order"]
        action = "deny"
        "#,
        |_| None,
    )
    .unwrap();
    let global = std::sync::Arc::new(Policy::new(&c.policy).unwrap());
    let support = Policy::within(global, "support", &c.endpoints["support"].policy).unwrap();
    let decide = |name: &str| {
        let tool = name.split_once('.').unwrap().1;
        let definition: toolgate_protocol::types::Tool =
            serde_json::from_value(json!({"name": tool, "inputSchema": {"type": "object"}}))
                .unwrap();
        let facts = ToolFacts::of(name, &definition, false);
        (support.decide(&facts, None), support.decide_for_all(&facts))
    };
    // A global deny holds though the endpoint allows; so does a
    // global confirm.
    let (drop, for_all) = decide("shop.drop_table");
    assert_eq!(
        (drop.action, drop.reason.as_str()),
        (Action::Deny, "rule 1")
    );
    assert_eq!(for_all.unwrap().action, Action::Deny);
    assert_eq!(decide("shop.pay").0.action, Action::Confirm);
    // The endpoint denies what the file allows, and says so.
    let (order, for_all) = decide("shop.order");
    assert_eq!(order.action, Action::Deny);
    assert_eq!(order.reason, "endpoint support rule 2");
    assert!(
        order.rule.starts_with("endpoint support rule 2 (tools"),
        "{}",
        order.rule
    );
    assert_eq!(for_all.unwrap().action, Action::Deny);
    // Where the endpoint has no opinion, the file decides.
    assert_eq!(decide("shop.list").0.action, Action::Allow);
    assert_eq!(decide("shop.refund").0.action, Action::Allow);
}

#[tokio::test]
async fn a_call_through_an_endpoint_is_recorded_as_forwarded_with_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let upstream = serve(tracker(Arc::default())).await;
    let store = format!(
        "[audit]\npath = {}\narguments = true\n",
        support::toml_string(&db.display().to_string())
    );
    let (gateway, base) = start(&upstream, &format!("{ENDPOINTS}{store}")).await;
    let coding = client(format!("{base}/mcp/coding"));
    let (ok, text) = outcome_of(&coding, "find_issue", json!({"query": "crash"})).await;
    assert!(ok, "{text}");
    let default = client(format!("{base}/mcp"));
    let (ok, text) = outcome_of(&default, "t.refund", json!({})).await;
    assert!(ok, "{text}");
    gateway.stop();
    use toolgate_gateway::store::calllog::logged::query;
    use toolgate_gateway::store::sqlite::Filter;
    let rows = query(&db, &Filter::default()).unwrap();
    let through = rows.iter().find(|r| r.endpoint.is_some()).unwrap();
    assert_eq!(through.tool, "t.search");
    assert_eq!(through.endpoint.as_deref(), Some("coding"));
    assert_eq!(through.shown.as_deref(), Some("find_issue"));
    assert_eq!(through.status, "ok");
    // What was sent, the fixed value included, and its digest.
    let sent: Value = serde_json::from_str(through.arguments.as_deref().unwrap()).unwrap();
    assert_eq!(sent, json!({"org": "acme", "query": "crash"}));
    assert_eq!(
        through.arguments_digest,
        toolgate_server::arguments_digest(&sent)
    );
    // `toolgate log --endpoint` reads them apart.
    let only = |endpoint: &str| {
        let filter = Filter {
            endpoint: Some(endpoint.to_owned()),
            ..Filter::default()
        };
        query(&db, &filter)
            .unwrap()
            .into_iter()
            .map(|r| r.tool)
            .collect::<Vec<_>>()
    };
    assert_eq!(only("coding"), ["t.search"]);
    assert_eq!(only("-"), ["t.refund"]);
    assert!(only("support").is_empty());
}

#[tokio::test]
async fn operators_see_each_endpoint_in_status_and_metrics() {
    let upstream = serve(tracker(Arc::default())).await;
    let (gateway, base) = start(&upstream, ENDPOINTS).await;
    let coding = client(format!("{base}/mcp/coding"));
    let (ok, text) = outcome_of(&coding, "find_issue", json!({"query": "crash"})).await;
    assert!(ok, "{text}");
    let default = client(format!("{base}/mcp"));
    let (ok, text) = outcome_of(&default, "t.refund", json!({})).await;
    assert!(ok, "{text}");

    // Metrics count each call under the gateway tool it reached, with
    // the endpoint it came through (empty: the default one).
    let metrics = gateway.metrics().encode();
    for line in [
        "toolgate_calls_total{endpoint=\"coding\",upstream=\"t\",tool=\"t.search\",status=\"ok\"} 1",
        "toolgate_calls_total{endpoint=\"\",upstream=\"t\",tool=\"t.refund\",status=\"ok\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }

    // `/status` names each endpoint, where it is and what it offers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let status_base = format!("http://{}", listener.local_addr().unwrap());
    let http = toolgate_server::transport::http::HttpConfig {
        routes: Some(gateway.status_routes()),
        ..Default::default()
    };
    tokio::spawn(serve_listener(gateway.server(), http, listener));
    let (status, body) = support::http("GET", &format!("{status_base}/status"), &[], None).await;
    assert_eq!(status, 200, "{body}");
    let doc: Value = serde_json::from_str(body.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(
        doc["endpoints"],
        json!([
            {"name": "coding", "path": "/mcp/coding", "offered": 1, "withheld": 1},
            {"name": "support", "path": "/mcp/support", "offered": 1, "withheld": 2},
        ])
    );
    // The console's view of one: each tool as called there, and the
    // gateway tool behind it.
    let view = gateway.endpoints()[0].view();
    assert_eq!(
        view.tools,
        [("find_issue".to_owned(), "t.search".to_owned())]
    );
    assert_eq!(view.withheld[0].0, "t.drop_project");
    gateway.stop();
}

/// An upstream whose `wait` answers once `open` says so (after telling
/// `entered` it has the call), and whose `ping` answers at once.
fn gated(entered: Arc<tokio::sync::Notify>, open: tokio::sync::watch::Receiver<bool>) -> Server {
    Server::builder("gated", "1")
        .tool(
            ToolDef::new("wait")
                .description("Waits to be let go.")
                .handler(move |_: toolgate_server::NoArgs| {
                    let entered = entered.clone();
                    let mut open = open.clone();
                    async move {
                        entered.notify_one();
                        let _ = open.wait_for(|o| *o).await;
                        Ok("done".to_owned())
                    }
                }),
        )
        .tool(
            ToolDef::new("ping")
                .description("Answers.")
                .handler(|_: toolgate_server::NoArgs| async { Ok("pong".to_owned()) }),
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_reload_adds_moves_and_removes_endpoints_without_dropping_calls_in_flight() {
    let entered = Arc::new(tokio::sync::Notify::new());
    let (open, gate) = tokio::sync::watch::channel(false);
    let upstream = serve(gated(entered.clone(), gate)).await;
    let file = |endpoints: &str| {
        config(&format!(
            "[servers.t]\nurl = \"{upstream}\"\nprefix = \"t\"\n{endpoints}"
        ))
    };
    let (gateway, base) = start(&upstream, "[endpoints.old]\ntools = [\"t.*\"]\n").await;
    let status = |path: &str| {
        let url = format!("{base}{path}");
        async move { support::http("POST", &url, &[], None).await.0 }
    };
    let old = client(format!("{base}/mcp/old"));
    assert_eq!(names(&old).await, ["t.ping", "t.wait"]);
    let waiting = tokio::spawn(async move { outcome_of(&old, "t.wait", json!({})).await });
    entered.notified().await;

    // `old` goes, `new` comes: served as soon as the reload returns.
    let report = gateway
        .reload(file("[endpoints.new]\ntools = [\"t.ping\"]\n"))
        .await
        .unwrap();
    assert_eq!(
        (
            report.endpoints_added.as_slice(),
            report.endpoints_removed.as_slice()
        ),
        (&["new".to_owned()][..], &["old".to_owned()][..])
    );
    assert!(
        report.needs_restart.is_empty(),
        "{:?}",
        report.needs_restart
    );
    assert_eq!(status("/mcp/old").await, 404);
    let new = client(format!("{base}/mcp/new"));
    assert_eq!(names(&new).await, ["t.ping"]);
    // The call taken by the removed endpoint finishes as it began.
    open.send_replace(true);
    let (ok, text) = waiting.await.unwrap();
    assert!(ok && text == "done", "{text}");

    // Moved: built anew at its new path; its tools changed in place.
    let report = gateway
        .reload(file(
            "[endpoints.new]\npath = \"/agents/new\"\ntools = [\"t.*\"]\n",
        ))
        .await
        .unwrap();
    assert_eq!(report.endpoints_added, ["new"]);
    assert_eq!(report.endpoints_removed, ["new"]);
    assert_eq!(status("/mcp/new").await, 404);
    let moved = client(format!("{base}/agents/new"));
    assert_eq!(names(&moved).await, ["t.ping", "t.wait"]);
    let report = gateway
        .reload(file(
            "[endpoints.new]\npath = \"/agents/new\"\ntools = [\"t.wait\"]\n",
        ))
        .await
        .unwrap();
    assert!(report.endpoints_added.is_empty(), "{report:?}");
    // (A new client: the first one may keep the list it read for its ttl.)
    let again = client(format!("{base}/agents/new"));
    assert_eq!(names(&again).await, ["t.wait"]);
    // The 404 names what is served now.
    let (_, said) = support::http("POST", &format!("{base}/mcp/old"), &[], None).await;
    assert!(
        said.contains(r#""endpoints":["/agents/new","/mcp"]"#),
        "{said}"
    );
    gateway.stop();
}

#[tokio::test]
async fn an_endpoints_rate_limit_counts_its_calls_and_the_files_counts_every_endpoints() {
    let (_open, gate) = tokio::sync::watch::channel(true);
    let upstream = serve(gated(Arc::default(), gate)).await;
    let (gateway, base) = start(
        &upstream,
        "[[ratelimit.rules]]\ntools = [\"t.ping\"]\nper_minute = 3\n\
         [endpoints.a]\ntools = [\"t.*\"]\n[[endpoints.a.ratelimit.rules]]\ntools = [\"t.p*\"]\nper_minute = 2\n\
         [endpoints.a.shape.\"t.ping\"]\nname = \"hello\"\n\
         [endpoints.b]\ntools = [\"t.*\"]\n",
    )
    .await;
    let a = client(format!("{base}/mcp/a"));
    for _ in 0..2 {
        let (ok, text) = outcome_of(&a, "hello", json!({})).await;
        assert!(ok, "{text}");
    }
    // The endpoint's own limit, said with the name the model called.
    let text = refused(&a, "hello", json!({})).await;
    assert!(
        text.starts_with("Rate limit reached: at most 2 calls per minute for each caller to \"hello\" on endpoint a. Try again in "),
        "{text}"
    );
    // The file's limit counted all three, whichever endpoint they came
    // through: the fourth, anywhere, is refused.
    let default = client(format!("{base}/mcp"));
    let text = refused(&default, "t.ping", json!({})).await;
    assert!(
        text.starts_with("Rate limit reached: at most 3 calls per minute for each caller to \"t.ping\". Try again in "),
        "{text}"
    );
    let b = client(format!("{base}/mcp/b"));
    assert!(
        refused(&b, "t.ping", json!({}))
            .await
            .starts_with("Rate limit reached")
    );
    // Other tools are not limited.
    let (ok, text) = outcome_of(&b, "t.wait", json!({})).await;
    assert!(ok, "{text}");
    gateway.stop();
}

#[tokio::test]
async fn a_shape_renaming_a_tool_onto_anothers_name_leaves_that_one_its_name() {
    let upstream = serve(tracker(Arc::default())).await;
    let (gateway, base) = start(
        &upstream,
        "[endpoints.a]\ntools = [\"t.search\", \"t.refund\"]\n[endpoints.a.shape.\"t.refund\"]\nname = \"t.search\"\n",
    )
    .await;
    let a = client(format!("{base}/mcp/a"));
    assert_eq!(names(&a).await, ["t.search"]);
    let view = gateway.endpoints()[0].view();
    assert_eq!(view.tools, [("t.search".to_owned(), "t.search".to_owned())]);
    assert_eq!(view.withheld[0].0, "t.refund");
    assert_eq!(
        view.withheld[0].1,
        "The tool t.refund is not offered here: its name on this endpoint, t.search, is t.search's. Ask the gateway's operator to rename one of them."
    );
    gateway.stop();
}
