//! `toolgate serve` exports its spans over OTLP whichever runtime it runs
//! on: one thread (its default on a machine of two cores or fewer) or
//! several workers. The exporter's own thread sends each batch through a
//! task on the gateway's runtime, and the last batch leaves only when the
//! gateway stops, so each runtime gets a run of the real binary that ends
//! the way a service manager ends it: `SIGTERM`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client};

mod support;

use support::{echo_upstream, serve_in};

/// An OTLP/HTTP (JSON) collector; its base URL and what it received.
async fn collector() -> (String, Arc<Mutex<Vec<Value>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
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
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// The names of the spans in the batches, with their service's name.
fn spans(batches: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for rs in batches
        .iter()
        .flat_map(|b| b["resourceSpans"].as_array().into_iter().flatten())
    {
        let service = rs["resource"]["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["key"] == "service.name")
            .and_then(|a| a["value"]["stringValue"].as_str())
            .unwrap_or_default()
            .to_owned();
        for span in rs["scopeSpans"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|ss| ss["spans"].as_array().into_iter().flatten())
        {
            let name = span["name"].as_str().unwrap_or_default().to_owned();
            out.push((service.clone(), name));
        }
    }
    out
}

/// Serve with `--threads threads`, make one call, stop with `SIGTERM`;
/// the spans the collector then holds.
async fn served_and_stopped(threads: &str) -> Vec<(String, String)> {
    let up = echo_upstream().await;
    let (otlp, received) = collector().await;
    let dir = std::env::temp_dir().join(format!("toolgate-otlp-{}-{threads}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("toolgate.toml"),
        format!(
            "[servers.up]\nurl = \"{up}\"\n[policy]\ndefault = \"allow\"\n[telemetry]\notlp = \"{otlp}\"\nservice_name = \"otlp-test\"\n"
        ),
    )
    .unwrap();
    let support::Serving {
        child: mut gateway,
        url,
        ..
    } = serve_in(&dir, &["--threads", threads]).await;

    let client = Client::builder("otlp", "1")
        .timeout(Duration::from_secs(20))
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    let args = json!({ "n": 1 }).as_object().unwrap().clone();
    let result = client
        .call_tool("up.echo", args, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(result.is_error, None, "{result:?}");

    let pid = gateway.id().unwrap().to_string();
    let killed = std::process::Command::new("sh")
        .args(["-c", &format!("kill -TERM {pid}")])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), gateway.wait())
        .await
        .expect("the gateway stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "--threads {threads}: {status}");
    std::fs::remove_dir_all(&dir).ok();
    spans(&received.lock().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_spans_reach_the_collector_when_serve_stops_on_either_runtime() {
    for threads in ["1", "2"] {
        let spans = served_and_stopped(threads).await;
        for name in ["tools/call up.echo", "tools/call echo"] {
            assert!(
                spans.contains(&("otlp-test".to_owned(), name.to_owned())),
                "--threads {threads}: no span {name:?} in {spans:?}"
            );
        }
    }
}
