//! toolgate-client against toolgate's own everything-server over stdio.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Map;
use toolgate_client::transport::stdio::{StdioCommand, StdioTransport};
use toolgate_client::{CallOptions, Client, ClientError};

fn client() -> Client {
    let command = StdioCommand {
        program: env!("CARGO_BIN_EXE_everything-server").into(),
        args: vec!["--stdio".into()],
        env: vec![("RUST_LOG".into(), "warn".into())],
        ..Default::default()
    };
    Client::builder("test", "1").build(StdioTransport::spawn(&command).unwrap())
}

#[tokio::test]
async fn lists_calls_reports_progress_and_cancels_over_stdio() {
    let c = client();
    let discover = c.discover().await.unwrap();
    assert_eq!(discover.supported_versions, ["2026-07-28"]);
    let tools = c.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "test_simple_text"));
    let r = c
        .call_tool("test_simple_text", Map::new(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(
        r.content[0].as_text(),
        Some("This is a simple text response for testing.")
    );
    match c
        .call_tool("test_error_handling", Map::new(), &CallOptions::default())
        .await
    {
        Err(ClientError::Tool { text, .. }) => assert!(text.contains("intentionally")),
        other => panic!("{other:?}"),
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let options = CallOptions {
        timeout: None,
        progress: Some(Arc::new(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })),
        ..Default::default()
    };
    c.call_tool("test_tool_with_progress", Map::new(), &options)
        .await
        .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    // A call cut short by its timeout is cancelled; the server keeps serving.
    let short = CallOptions {
        timeout: Some(Duration::from_millis(20)),
        progress: None,
        ..Default::default()
    };
    assert!(matches!(
        c.call_tool("test_tool_with_progress", Map::new(), &short)
            .await,
        Err(ClientError::Timeout(_))
    ));
    assert!(
        c.call_tool("test_simple_text", Map::new(), &CallOptions::default())
            .await
            .is_ok()
    );
}
