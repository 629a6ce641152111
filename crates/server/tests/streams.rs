//! Subscriptions end cleanly: a thousand listen streams opened and closed
//! leave no subscriptions and no tasks behind (and so none of the memory
//! those own).
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::request;
use serde_json::json;
use tokio::net::TcpListener;
use toolgate_server::transport::http::{HttpConfig, serve_listener};

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

async fn settle(check: impl Fn() -> bool) -> bool {
    for _ in 0..250 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_streams_open_and_close_without_leaks() {
    let (server, _) = common::test_server(100);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_listener(
        server.clone(),
        HttpConfig::default(),
        listener,
    ));
    let metrics = tokio::runtime::Handle::current().metrics();
    let client = common::http_client()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let body = request(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );

    let mut rss_after_round = Vec::new();
    let baseline_tasks = metrics.num_alive_tasks();
    for _round in 0..2 {
        let mut open = Vec::new();
        for chunk in 0..10 {
            let batch: Vec<_> = (0..100)
                .map(|i| {
                    let (client, url, body) = (client.clone(), url.clone(), body.clone());
                    async move {
                        let mut response = client
                            .post(&url)
                            .header("accept", "application/json, text/event-stream")
                            .header("mcp-protocol-version", "2026-07-28")
                            .header("mcp-method", "subscriptions/listen")
                            .json(&body)
                            .send()
                            .await
                            .unwrap_or_else(|e| panic!("stream {chunk}/{i}: {e}"));
                        // The acknowledgement arrives first.
                        let first = response.chunk().await.unwrap().unwrap();
                        assert!(String::from_utf8_lossy(&first).contains("acknowledged"));
                        response
                    }
                })
                .collect();
            open.extend(futures::future::join_all(batch).await);
        }
        assert_eq!(server.open_subscriptions(), 1000);
        drop(open);
        assert!(
            settle(|| server.open_subscriptions() == 0).await,
            "{} subscriptions left",
            server.open_subscriptions()
        );
        assert!(
            settle(|| metrics.num_alive_tasks() <= baseline_tasks + 2).await,
            "tasks alive: {} (baseline {baseline_tasks})",
            metrics.num_alive_tasks()
        );
        rss_after_round.push(rss_bytes());
    }
    // Every per-stream allocation is owned by the stream's task and its bus
    // receiver, both counted above; RSS is printed for the record only,
    // since the allocator and concurrently running tests make it noisy.
    eprintln!("RSS after each thousand streams: {rss_after_round:?}");
    // And the server still serves.
    assert_eq!(
        server.tool_names().len(),
        8,
        "every registration, hidden ones included"
    );
}

#[tokio::test]
async fn resource_updates_reach_only_streams_subscribed_to_that_uri() {
    use toolgate_server::protocol::types::{Resource, ResourceContents};
    use toolgate_server::transport::Reply;
    use toolgate_server::{ResourceEntry, Server, TransportContext};
    let server = Server::builder("r", "1")
        .resource(ResourceEntry::new(
            Resource::new("file:///a", "a"),
            |uri, _| async move { Ok(vec![ResourceContents::text(uri, None, "a")]) },
        ))
        .build()
        .unwrap();
    let listen = |id: i64, uris: Vec<&str>| {
        let message = request(
            id,
            "subscriptions/listen",
            json!({"notifications": {"resourceSubscriptions": uris, "toolsListChanged": true}}),
        );
        match server.handle_message(
            &serde_json::to_vec(&message).unwrap(),
            &TransportContext::default(),
        ) {
            Reply::Streaming(exchange) => exchange,
            other => panic!("{other:?}"),
        }
    };
    let (mut a, mut b) = (listen(1, vec!["file:///a"]), listen(2, vec!["file:///b"]));
    for stream in [&mut a, &mut b] {
        let ack: serde_json::Value =
            serde_json::from_slice(stream.next().await.unwrap().bytes()).unwrap();
        common::assert_wire("subscriptions/listen", &ack);
    }
    server.notify_resource_updated("file:///a");
    let update: serde_json::Value =
        serde_json::from_slice(a.next().await.unwrap().bytes()).unwrap();
    common::assert_wire("subscriptions/listen", &update);
    assert_eq!(update["method"], "notifications/resources/updated");
    assert_eq!(update["params"]["uri"], "file:///a");
    assert_eq!(
        update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    // Stream b asked for another URI: nothing arrives.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), b.next())
            .await
            .is_err()
    );
    drop((a, b));
    assert!(settle(|| server.open_subscriptions() == 0).await);
}
