//! The audit store's promise, tested the hard way: `kill -9` of
//! `toolgate serve` while 200 calls are in flight loses no call whose
//! result a client received (its row was written ahead of the forward,
//! and the answer waited for it) — with each row committed to SQLite, and
//! with the call log in front of it (`[audit] durability`, both settings:
//! what was written to the log before an answer survives the kill, and is
//! read with the store), and with the indexer held behind (every answered
//! call is in the log, and reaches the store after a restart, once).
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client};
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;

mod support;

use support::{echo_upstream, serve_in};

/// The response to a plain HTTP/1.1 GET of `url`, which must be a `200`.
async fn get(url: &str) -> String {
    let response = support::http_get(url).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_no_call_whose_result_was_received() {
    kill_9_under_load("committed", "durability = \"commit\"\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_the_call_log_written_loses_no_answered_call() {
    kill_9_under_load("process", "durability = \"process\"\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_the_call_log_synced_loses_no_answered_call() {
    kill_9_under_load("sync", "durability = \"sync\"\n").await;
}

async fn kill_9_under_load(label: &str, audit: &str) {
    const CALLS: u64 = 200;
    const KILL_AFTER: usize = 50;
    let up = echo_upstream().await;
    let dir = std::env::temp_dir().join(format!("toolgate-kill9-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("toolgate.toml"),
        format!(
            "[servers.up]\nurl = \"{up}\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n[audit]\narguments = true\n{audit}"
        ),
    )
    .unwrap();
    let support::Serving {
        child: mut gateway,
        url,
        metrics,
    } = serve_in(&dir, &["--metrics", "127.0.0.1:0"]).await;
    let metrics = metrics.expect("the gateway says where its metrics are");
    let client = Client::builder("kill9", "1")
        .timeout(Duration::from_secs(20))
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    client.list_tools().await.unwrap();

    let received = Arc::new(Mutex::new(BTreeSet::new()));
    let enough = Arc::new(tokio::sync::Notify::new());
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..CALLS {
        let (client, received, enough) = (client.clone(), received.clone(), enough.clone());
        calls.spawn(async move {
            let args = json!({ "n": n }).as_object().unwrap().clone();
            if let Ok(result) = client
                .call_tool("echo", args, &CallOptions::default())
                .await
                && result.is_error.is_none()
            {
                let mut got = received.lock().unwrap();
                got.insert(n);
                if got.len() == KILL_AFTER {
                    enough.notify_one();
                }
            }
        });
    }
    tokio::time::timeout(Duration::from_secs(60), enough.notified())
        .await
        .expect("results arrive");
    let counted = get(&metrics).await;
    gateway.start_kill().unwrap();
    gateway.wait().await.unwrap();
    while calls.join_next().await.is_some() {}

    let received = received.lock().unwrap().clone();
    let rows = query(&dir.join("toolgate-audit.db"), &Filter::default()).unwrap();
    let recorded: BTreeSet<u64> = rows
        .iter()
        // A row written ahead may not have had its outcome committed
        // before the kill: it still names the call.
        .filter(|r| r.status == "ok" || r.status == "forwarded")
        .filter_map(|r| {
            let args: Value = serde_json::from_str(r.arguments.as_deref()?).ok()?;
            args["n"].as_u64()
        })
        .collect();
    let forwarded = rows.iter().filter(|r| r.status == "forwarded").count();
    let lost: Vec<&u64> = received.difference(&recorded).collect();
    assert!(
        lost.is_empty(),
        "{label}: results received for calls the store lost: {lost:?}"
    );
    assert!(received.len() >= KILL_AFTER);
    // The metrics had counted calls by tool and status before the kill.
    assert!(
        counted.contains(
            "toolgate_calls_total{endpoint=\"\",upstream=\"up\",tool=\"echo\",status=\"ok\"}"
        ),
        "{counted}"
    );
    eprintln!(
        "{label}: received {} of {CALLS}; recorded {} ({forwarded} forwarded with no outcome: in flight at the kill)",
        received.len(),
        recorded.len()
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_the_indexer_is_held_behind_loses_no_answered_call() {
    const CALLS: u64 = 30;
    let up = echo_upstream().await;
    let dir = std::env::temp_dir().join(format!("toolgate-kill9-behind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("toolgate.toml"),
        format!(
            "[servers.up]\nurl = \"{up}\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n[audit]\narguments = true\ndurability = \"process\"\n"
        ),
    )
    .unwrap();
    let db = dir.join("toolgate-audit.db");
    let support::Serving {
        child: mut gateway,
        url,
        ..
    } = serve_in(&dir, &[]).await;
    // Another writer holds the store: the indexer cannot apply anything.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let client = Client::builder("behind", "1")
        .timeout(Duration::from_secs(20))
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    for n in 0..CALLS {
        let args = json!({ "n": n }).as_object().unwrap().clone();
        let result = client
            .call_tool("echo", args, &CallOptions::default())
            .await
            .unwrap();
        assert!(result.is_error.is_none(), "{result:?}");
    }
    let indexed: i64 = holder
        .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
        .unwrap();
    assert_eq!(indexed, 0, "the indexer was held behind");
    gateway.start_kill().unwrap();
    gateway.wait().await.unwrap();
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);

    let numbers = |rows: &[toolgate_gateway::store::AuditRow]| -> Vec<u64> {
        let mut n: Vec<u64> = rows
            .iter()
            .filter(|r| r.status == "ok")
            .filter_map(|r| {
                let args: Value = serde_json::from_str(r.arguments.as_deref()?).ok()?;
                args["n"].as_u64()
            })
            .collect();
        n.sort_unstable();
        n
    };
    // Read as `toolgate log` reads, with nothing running: all there.
    let rows = query(&db, &Filter::default()).unwrap();
    assert_eq!(numbers(&rows), (0..CALLS).collect::<Vec<_>>());
    // Started again, the gateway serves and indexes what the log holds.
    let support::Serving {
        child: mut gateway,
        url,
        ..
    } = serve_in(&dir, &[]).await;
    let client = Client::builder("behind", "1")
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    let args = json!({ "n": CALLS }).as_object().unwrap().clone();
    client
        .call_tool("echo", args, &CallOptions::default())
        .await
        .unwrap();
    gateway.start_kill().unwrap();
    gateway.wait().await.unwrap();
    // Whatever it had indexed before this kill, opening the store brings
    // the rest in: each call once, in SQLite itself.
    let store = toolgate_gateway::store::calllog::logged::LoggedStore::open(
        &db,
        true,
        toolgate_gateway::store::calllog::writer::Durability::Process,
        toolgate_gateway::store::calllog::logged::BACKLOG,
    )
    .unwrap();
    assert!(store.indexed(Duration::from_secs(30)).await);
    drop(store);
    let rows = toolgate_gateway::store::sqlite::query(&db, &Filter::default()).unwrap();
    assert_eq!(numbers(&rows), (0..=CALLS).collect::<Vec<_>>());
    assert_eq!(rows.len() as u64, CALLS + 1, "each call once");
    std::fs::remove_dir_all(&dir).ok();
}
