//! `[telemetry]`: a span per call through the gateway and a child per
//! upstream call, exported over OTLP/HTTP (JSON) to a collector, with the
//! W3C trace context carried in `_meta` from the caller to the upstream.
//! (Its own test binary: the exporter is installed process-wide.)
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};

use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_client::CallOptions;
use toolgate_gateway::call::telemetry::Telemetry;
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::trace::TraceContext;

use support::{args, downstream, serve};

const CALLER: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

/// Every span the collector received.
fn spans(batches: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for batch in batches {
        for rs in batch["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                out.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_is_traced_from_the_caller_through_the_gateway_to_the_upstream() {
    // The collector.
    let received = Arc::new(Mutex::new(Vec::<Value>::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = format!("http://{}", listener.local_addr().unwrap());
    let store = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: String| async move {
            store
                .lock()
                .unwrap()
                .push(serde_json::from_str(&body).unwrap_or(Value::Null));
            "{}"
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    // An upstream that says which trace context it was given.
    let url = serve(support::probe()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let toml = format!(
        "[servers.probe]\nurl = \"{url}\"\n[telemetry]\notlp = \"{collector}\"\nservice_name = \"gw-test\"\n[policy]\ndefault = \"allow\"\n[audit]\npath = {}\n",
        support::toml_string(&db.display().to_string())
    );
    let config = GatewayConfig::parse_toml(&toml, |_| None).unwrap();
    let telemetry = Telemetry::install(&config.telemetry).unwrap().unwrap();
    let gateway = Gateway::start(config, GatewayOptions::default())
        .await
        .unwrap();
    let c = downstream(&gateway).await;
    let options = CallOptions {
        trace: TraceContext::parse_traceparent(CALLER),
        ..CallOptions::default()
    };
    let result = c
        .call_tool("probe.whoami", args(json!({})), &options)
        .await
        .unwrap();
    let seen_upstream = serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    telemetry.flush().await;

    let spans = spans(&received.lock().unwrap());
    let server = spans
        .iter()
        .find(|s| s["name"] == "tools/call probe.whoami")
        .unwrap_or_else(|| panic!("no gateway span in {spans:?}"));
    assert_eq!(
        server["traceId"], "0af7651916cd43dd8448eb211c80319c",
        "joins the caller's trace"
    );
    assert_eq!(server["parentSpanId"], "00f067aa0ba902b7");
    let child = spans
        .iter()
        .find(|s| s["name"] == "tools/call whoami")
        .unwrap_or_else(|| panic!("no upstream span in {spans:?}"));
    assert_eq!(child["parentSpanId"], server["spanId"]);
    assert_eq!(child["traceId"], server["traceId"]);
    // The upstream was given the child span's context.
    let given = TraceContext::parse_traceparent(&seen_upstream).unwrap();
    assert_eq!(given.trace_id(), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(Some(given.parent_id()), child["spanId"].as_str());
    // The call's row names its trace, to find it in the collector.
    let rows = toolgate_gateway::store::calllog::logged::query(&db, &Default::default()).unwrap();
    assert_eq!(
        rows[0].trace_id.as_deref(),
        Some("0af7651916cd43dd8448eb211c80319c")
    );
    gateway.stop();
}

#[test]
fn without_a_collector_nothing_is_installed() {
    let config = GatewayConfig::parse_toml("", |_| None).unwrap();
    assert!(Telemetry::install(&config.telemetry).unwrap().is_none());
}
