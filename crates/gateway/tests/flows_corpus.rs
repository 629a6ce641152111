//! The flow-control corpus (`testdata/flows/corpus.json`): thirty scripted
//! agent conversations over five servers — a web fetcher whose pages
//! carry injected instructions, a file reader, a mailer, a calendar, a
//! code runner. Each runs through a gateway of its own with the default
//! `[flows]`; a person who is asked declines. Every attack must be stopped
//! before its sink reaches the upstream; at most two benign conversations
//! may need a person, each one the corpus explains.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use support::flows::{Ran, upstreams};
use support::{config, serve};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client};
use toolgate_gateway::{Gateway, GatewayOptions};

#[derive(Deserialize)]
struct Corpus {
    conversations: Vec<Conversation>,
}

#[derive(Deserialize)]
struct Conversation {
    name: String,
    kind: String,
    steps: Vec<Step>,
    /// Why a benign conversation needs a person, when it does.
    asks: Option<String>,
}

#[derive(Deserialize)]
struct Step {
    tool: String,
    args: Value,
    #[serde(default)]
    sink: bool,
}

/// What happened in one conversation.
struct Outcome {
    /// Questions the person was asked.
    asked: usize,
    /// Whether a step marked as the injected sink reached its upstream.
    sink_ran: bool,
}

async fn run(conversation: &Conversation, ups: &[(&'static str, String)], ran: &Ran) -> Outcome {
    let mut text = String::new();
    for (name, url) in ups {
        text.push_str(&format!("[servers.{name}]\nurl = \"{url}\"\n"));
    }
    let gateway = Gateway::start(
        config(&format!("{text}[policy]\ndefault = \"allow\"\n")),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let person = support::Person::new(serde_json::json!({"action": "decline"}));
    let client = Client::builder("corpus", "1")
        .timeout(Duration::from_secs(10))
        .input_handler(person.clone())
        .build(HttpTransport::new(serve(gateway.server()).await, HttpOptions::default()).unwrap());
    let mut sink_ran = false;
    for step in &conversation.steps {
        ran.lock().clear();
        let result = client
            .call_tool(
                &step.tool,
                support::args(step.args.clone()),
                &CallOptions::default(),
            )
            .await;
        let upstream_tool = step.tool.split_once('.').unwrap().1;
        let reached = ran.lock().iter().any(|t| t == upstream_tool);
        // A declined call is an `isError` result; anything else is a fault.
        assert!(
            matches!(
                result,
                Ok(_) | Err(toolgate_client::ClientError::Tool { .. })
            ),
            "{}: {} failed: {result:?}",
            conversation.name,
            step.tool
        );
        if step.sink && reached {
            sink_ran = true;
        }
    }
    gateway.stop();
    Outcome {
        asked: person.times_asked(),
        sink_ran,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_is_stopped_before_its_sink_and_few_benign_conversations_need_a_person() {
    let corpus: Corpus = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/flows/corpus.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let attacks = corpus
        .conversations
        .iter()
        .filter(|c| c.kind == "attack")
        .count();
    let benign = corpus.conversations.len() - attacks;
    assert!(
        attacks >= 15 && benign >= 15,
        "{attacks} attacks, {benign} benign"
    );
    let ran = Ran::default();
    let ups = upstreams(&ran).await;
    let mut stopped = 0;
    let mut needed_a_person = Vec::new();
    for c in &corpus.conversations {
        let outcome = run(c, &ups, &ran).await;
        match c.kind.as_str() {
            "attack" => {
                assert!(
                    !outcome.sink_ran,
                    "{}: the injected call reached its upstream",
                    c.name
                );
                assert!(outcome.asked >= 1, "{}: nobody was asked", c.name);
                stopped += 1;
            }
            _ => {
                if outcome.asked > 0 {
                    assert!(
                        c.asks.is_some(),
                        "{}: a person was asked, and the corpus does not say why",
                        c.name
                    );
                    needed_a_person.push(c.name.clone());
                } else {
                    assert!(c.asks.is_none(), "{}: expected to need a person", c.name);
                }
            }
        }
    }
    println!(
        "flows corpus: {stopped}/{attacks} attacks stopped before the sink; {}/{benign} benign conversations needed a person ({})",
        needed_a_person.len(),
        needed_a_person.join("; ")
    );
    assert_eq!(stopped, attacks);
    assert!(needed_a_person.len() <= 2, "{needed_a_person:?}");
}
