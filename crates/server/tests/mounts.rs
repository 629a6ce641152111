//! Several MCP endpoints on one listener (`HttpConfig::mounts`): each path
//! answers with its own server, an unknown path is 404, two endpoints at
//! one path are refused before anything is bound, and the mounts change
//! while the listener serves.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_server::transport::http::{HttpConfig, Mount, Mounts, serve_listener};
use toolgate_server::{NoArgs, Server, ToolDef};

fn server(name: &str, tool: &'static str) -> Server {
    Server::builder(name, "1")
        .tool(
            ToolDef::new(tool)
                .description("Says its name.")
                .handler(move |_: NoArgs| async move { Ok(tool.to_owned()) }),
        )
        .build()
        .unwrap()
}

async fn post(client: &reqwest::Client, url: &str, method: &str, params: Value) -> (u16, Value) {
    let body = common::request(1, method, params);
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = body.pointer("/params/name").and_then(Value::as_str) {
        request = request.header("mcp-name", name);
    }
    let response = request.json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn each_path_answers_with_its_own_server() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let main = server("main", "alpha");
    let config = HttpConfig {
        mounts: Mounts::from(vec![Mount {
            path: "/mcp/other".into(),
            server: server("other", "beta"),
            auth: None,
        }]),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(main, config, listener));
    let client = common::http_client().build().unwrap();
    for (path, tool, name) in [("/mcp", "alpha", "main"), ("/mcp/other", "beta", "other")] {
        let url = format!("http://{addr}{path}");
        let (status, listed) = post(&client, &url, "tools/list", json!({})).await;
        assert_eq!(status, 200, "{listed}");
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names, [tool]);
        let (_, found) = post(&client, &url, "server/discover", json!({})).await;
        let info = found.pointer("/result/_meta/io.modelcontextprotocol~1serverInfo/name");
        assert_eq!(info, Some(&json!(name)), "{found}");
        let (_, called) = post(&client, &url, "tools/call", json!({"name": tool})).await;
        assert_eq!(called["result"]["content"][0]["text"], tool, "{called}");
        // The other endpoint's tool is not known here.
        let other = if tool == "alpha" { "beta" } else { "alpha" };
        let (_, refused) = post(&client, &url, "tools/call", json!({"name": other})).await;
        assert!(refused.get("result").is_none(), "{refused}");
    }
    let (status, _) = post(
        &client,
        &format!("http://{addr}/mcp/none"),
        "tools/list",
        json!({}),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn two_endpoints_at_one_path_are_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    for path in ["/mcp", "mcp/x"] {
        let config = HttpConfig {
            mounts: Mounts::from(vec![Mount {
                path: path.into(),
                server: server("other", "beta"),
                auth: None,
            }]),
            ..HttpConfig::default()
        };
        let e = config.validate().unwrap_err().to_string();
        let said = if path == "/mcp" {
            "two endpoints are served at \"/mcp\"; give each its own path"
        } else {
            "path \"mcp/x\" must start with '/'"
        };
        assert_eq!(e, said);
    }
    let config = HttpConfig {
        mounts: Mounts::from(vec![Mount {
            path: "/mcp".into(),
            server: server("other", "beta"),
            auth: None,
        }]),
        ..HttpConfig::default()
    };
    let e = serve_listener(server("main", "alpha"), config, listener)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}

/// The names of the tools listed at `url` (empty when nothing is there).
async fn listed(client: &reqwest::Client, url: &str) -> (u16, Vec<String>) {
    let (status, listed) = post(client, url, "tools/list", json!({})).await;
    let names = listed
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (status, names)
}

#[tokio::test]
async fn mounts_added_and_removed_while_serving_take_effect_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mounts = Mounts::default();
    let config = HttpConfig {
        mounts: mounts.clone(),
        ..HttpConfig::default()
    };
    tokio::spawn(serve_listener(server("main", "alpha"), config, listener));
    let client = common::http_client().build().unwrap();
    let at = |path: &str| format!("http://{addr}{path}");
    assert_eq!(listed(&client, &at("/mcp/b")).await.0, 404);

    let beta = server("b", "beta");
    mounts
        .set(vec![Mount {
            path: "/mcp/b".into(),
            server: beta.clone(),
            auth: None,
        }])
        .unwrap();
    assert_eq!(
        listed(&client, &at("/mcp/b")).await,
        (200, vec!["beta".to_owned()])
    );
    // Moved: the old path is gone, the new one answers.
    mounts
        .set(vec![Mount {
            path: "/mcp/c".into(),
            server: beta,
            auth: None,
        }])
        .unwrap();
    assert_eq!(listed(&client, &at("/mcp/b")).await.0, 404);
    assert_eq!(
        listed(&client, &at("/mcp/c")).await,
        (200, vec!["beta".to_owned()])
    );
    // A table that cannot be served is refused and changes nothing.
    let twice = (0..2)
        .map(|_| Mount {
            path: "/mcp/d".into(),
            server: server("d", "delta"),
            auth: None,
        })
        .collect();
    assert_eq!(
        mounts.set(twice).unwrap_err().to_string(),
        "two endpoints are served at \"/mcp/d\"; give each its own path"
    );
    assert_eq!(listed(&client, &at("/mcp/c")).await.0, 200);
    mounts.set(Vec::new()).unwrap();
    assert_eq!(listed(&client, &at("/mcp/c")).await.0, 404);
    // The main endpoint never moved.
    assert_eq!(
        listed(&client, &at("/mcp")).await,
        (200, vec!["alpha".to_owned()])
    );
}
