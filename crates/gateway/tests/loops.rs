//! `[loops]`: a model that keeps retrying a failing call is stopped before
//! the upstream sees the call again, told plainly to stop, and the stop is
//! in the audit store; a success resets the count.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use support::{config, downstream, serve};
use toolgate_client::Client;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_server::{Server, ToolDef, ToolError};

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

/// An upstream whose `weather` finds no city while `down` is set, and
/// counts the calls that reach it.
fn weather(calls: Arc<AtomicUsize>, down: Arc<AtomicBool>) -> Server {
    Server::builder("weather", "1")
        .tool(
            ToolDef::new("weather")
                .description("The weather in a city.")
                .handler(move |a: City| {
                    let (calls, down) = (calls.clone(), down.clone());
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        if down.load(Ordering::SeqCst) {
                            return Err(ToolError::new(format!(
                                "no weather station in {}",
                                a.city
                            )));
                        }
                        Ok(format!("sunny in {}", a.city))
                    }
                }),
        )
        .build()
        .unwrap()
}

async fn call(c: &Client, city: &str) -> (bool, String) {
    support::outcome_of(c, "w.weather", json!({ "city": city })).await
}

#[tokio::test]
async fn the_same_failing_call_is_stopped_and_a_success_resets_the_count() {
    let calls = Arc::new(AtomicUsize::new(0));
    let down = Arc::new(AtomicBool::new(true));
    let upstream = serve(weather(calls.clone(), down.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let gateway = Gateway::start(
        config(&format!(
            "[servers.w]\nurl = \"{upstream}\"\n[audit]\npath = {}\n[loops]\nidentical_failures = 2\nwindow = \"10m\"\n",
            support::toml_string(&db.display().to_string())
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;

    // One failure, then a success of the same call: the count starts over.
    assert!(!call(&c, "Atlantis").await.0);
    down.store(false, Ordering::SeqCst);
    assert_eq!(
        call(&c, "Atlantis").await,
        (true, "sunny in Atlantis".into())
    );
    down.store(true, Ordering::SeqCst);
    assert!(!call(&c, "Atlantis").await.0);
    assert!(!call(&c, "Atlantis").await.0);
    assert_eq!(calls.load(Ordering::SeqCst), 4);

    // Twice in a row now: the third is not sent, and the model is told why.
    let (ok, text) = call(&c, "Atlantis").await;
    assert!(!ok);
    assert_eq!(
        text,
        "Stopped: this exact call of \"w.weather\" failed 2 times in the last 10 minutes (last time: no weather station in Atlantis), so the gateway did not send it again. Do not retry it with the same arguments: tell the user what failed and ask how to go on, or change the approach."
    );
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    let rows = query(&db, &Filter::default()).unwrap();
    let last = rows.last().unwrap();
    assert_eq!(
        (last.tool.as_str(), last.status.as_str()),
        ("w.weather", "loop")
    );

    // Other arguments still go through, and the gateway serves on.
    down.store(false, Ordering::SeqCst);
    assert_eq!(call(&c, "Paris").await, (true, "sunny in Paris".into()));
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    gateway.stop();
}

#[tokio::test]
async fn a_tool_failing_with_any_arguments_is_stopped_for_its_caller() {
    let calls = Arc::new(AtomicUsize::new(0));
    let down = Arc::new(AtomicBool::new(true));
    let upstream = serve(weather(calls.clone(), down)).await;
    let gateway = Gateway::start(
        config(&format!(
            "[servers.w]\nurl = \"{upstream}\"\n[loops]\ntool_failures = 3\n"
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;
    for city in ["A", "B", "C"] {
        assert!(!call(&c, city).await.0);
    }
    let (ok, text) = call(&c, "D").await;
    assert!(!ok);
    assert!(
        text.starts_with("Stopped: calls of \"w.weather\" failed 3 times in the last 10 minutes (last time: no weather station in C)"),
        "{text}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    gateway.stop();
}
