//! Readiness tells the truth: `/readyz` is 200 only while every enabled
//! upstream is listed and answering. An HTTP+SSE upstream that never comes
//! up is not ready, and a stdio upstream whose process dies is marked down
//! as it exits (an event, not found out at the next call), with its last
//! error in `/status`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::{config, toml_string};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use toolgate_gateway::{Gateway, GatewayOptions, Readiness};

/// A stdio server that answers discovery and listing, and writes its pid.
const SERVES: &str = r#"echo $$ > "$PIDFILE"; while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); [ -z "$id" ] && continue; case "$line" in *server/discover*) printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}}\n' "$id";; *tools/list*) printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","ttlMs":0,"cacheScope":"public","tools":[{"name":"ping","inputSchema":{"type":"object"}}]}}\n' "$id";; esac; done"#;

/// Wait (bounded) until `gateway` says it is not ready: the exit is an
/// event the gateway acts on by itself, so no call is made meanwhile.
async fn until_not_ready(gateway: &Gateway) -> Readiness {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let r = gateway.readiness().await;
            if !r.ready {
                return r;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the gateway noticed the exit by itself")
}

#[tokio::test]
async fn a_stdio_upstream_whose_process_dies_is_down_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let toml = format!(
        "[servers.mine]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\nenv = {{ PIDFILE = {} }}\n",
        toml_string(SERVES),
        toml_string(&pid_file.display().to_string())
    );
    // A long backoff: the test sees it down before any restart.
    let options = GatewayOptions {
        restart_backoff: Some(Duration::from_secs(600)),
        ..Default::default()
    };
    let gateway = Gateway::start(config(&toml), options).await.unwrap();
    assert!(gateway.readiness().await.ready);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let r = until_not_ready(&gateway).await;
    assert_eq!((r.upstreams_up, r.upstreams_down), (0, 1));
    let status = gateway.status();
    let error = status[0].error.as_deref().unwrap();
    assert!(error.starts_with("the server exited (signal: 9"), "{error}");
    gateway.stop();
}

/// An HTTP+SSE server whose `endpoint` event points to another origin.
async fn elsewhere_pointing_sse() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/sse", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\nevent: endpoint\ndata: http://127.0.0.2:9/messages\n\n")
                    .await;
                // The stream stays open, as a real server's does.
                let _ = socket.read(&mut buf).await;
            });
        }
    });
    url
}

#[tokio::test]
async fn an_http_sse_upstream_that_never_comes_up_is_not_ready_and_says_why() {
    let sse = elsewhere_pointing_sse().await;
    let toml = format!("[servers.old]\nurl = \"{sse}\"\ntransport = \"sse\"\n");
    let gateway = Gateway::start(config(&toml), GatewayOptions::default())
        .await
        .unwrap();
    let r = gateway.readiness().await;
    assert!(!r.ready, "{r:?}");
    assert_eq!((r.upstreams_up, r.upstreams_down), (0, 1));
    let error = gateway.status()[0].error.clone().unwrap();
    assert!(error.contains("another origin"), "{error}");
    gateway.stop();
}
