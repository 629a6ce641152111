//! A full disk under the call log: `toolgate serve` refuses new calls with
//! an `isError` saying the audit store cannot record them — and forwards
//! nothing it could not record — then takes calls again once there is
//! room, without a restart.
//!
//! The disk is real and really full: the gateway runs in a user and mount
//! namespace of its own (`unshare`, no privileges needed) with a 256 KiB
//! tmpfs over its call log's directory, filled up by the script that
//! starts it. The test tells the script, through a FIFO, when to free it.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncBufReadExt as _;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client};
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;

mod support;

/// Runs `toolgate serve` with its call log on a full tmpfs; a line on
/// `$TG_FREE` frees it (answered on `$TG_FREED`), a second stops it.
const SCRIPT: &str = r#"
set -e
mount -t tmpfs -o size=256k tmpfs "$TG_LOG"
dd if=/dev/zero of="$TG_LOG/filler" bs=4k 2>/dev/null || true
"$TG_BIN" serve --http 127.0.0.1:0 &
gw=$!
read _ < "$TG_FREE"
rm -f "$TG_LOG/filler"
echo freed > "$TG_FREED"
read _ < "$TG_FREE"
kill $gw
wait $gw || true
"#;

async fn call(client: &Client, n: u64) -> (bool, String) {
    let args = json!({ "n": n }).as_object().unwrap().clone();
    match client
        .call_tool("echo", args, &CallOptions::default())
        .await
    {
        Ok(result) => (
            false,
            result.content[0].as_text().unwrap_or_default().to_owned(),
        ),
        Err(toolgate_client::ClientError::Tool { text, .. }) => (true, text),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_calls_unforwarded_and_recovers_when_space_returns() {
    let seen = Arc::new(AtomicUsize::new(0));
    let up = support::counting_upstream(seen.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolgate.toml"),
        format!(
            "[servers.up]\nurl = \"{up}\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n[audit]\narguments = true\ndurability = \"process\"\n"
        ),
    )
    .unwrap();
    let db = dir.path().join("toolgate-audit.db");
    let log = dir.path().join("toolgate-audit.db.log");
    std::fs::create_dir(&log).unwrap();
    let (free, freed) = (dir.path().join("free"), dir.path().join("freed"));
    for fifo in [&free, &freed] {
        let made = std::process::Command::new("mkfifo")
            .arg(fifo)
            .status()
            .unwrap();
        assert!(made.success());
    }
    let mut child = tokio::process::Command::new("unshare")
        .args(["--map-root-user", "--mount", "sh", "-c", SCRIPT])
        .env("TG_LOG", &log)
        .env("TG_BIN", env!("CARGO_BIN_EXE_toolgate"))
        .env("TG_FREE", &free)
        .env("TG_FREED", &freed)
        .env("RUST_LOG", "error")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("unshare (util-linux) runs");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut url = None;
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("serving") {
            url = line.split(" at ").nth(1).map(|a| a.trim().to_owned());
            break;
        }
        assert!(
            !line.contains("unshare:"),
            "user namespaces are needed: {line}"
        );
    }
    let url = url.expect("the gateway says where it serves");
    let errors = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            all.push(line);
        }
        all
    });
    let client = Client::builder("full", "1")
        .timeout(Duration::from_secs(20))
        .build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    client.list_tools().await.unwrap();

    // Full: refused, with a short answer that says why, and not forwarded.
    for n in 0..3 {
        let (is_error, text) = call(&client, n).await;
        assert!(is_error, "{text}");
        assert!(
            text.contains("was not made") && text.contains("audit store cannot record"),
            "{text}"
        );
        assert!(!text.contains("os error"), "no internals: {text}");
    }
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "nothing unrecorded went upstream"
    );

    // Room again: the next call goes through, and is recorded.
    tokio::fs::write(&free, "free\n").await.unwrap();
    assert_eq!(
        tokio::fs::read_to_string(&freed).await.unwrap().trim(),
        "freed"
    );
    let (is_error, text) = call(&client, 7).await;
    assert!(!is_error, "{text}");
    assert_eq!(text, "7");
    assert_eq!(seen.load(Ordering::SeqCst), 1);

    tokio::fs::write(&free, "stop\n").await.unwrap();
    child.wait().await.unwrap();
    let said = errors.await.unwrap().join("\n");
    assert!(
        said.contains("No space left"),
        "the operator is told why: {said}"
    );
    // The log was on the tmpfs (gone with its namespace): what reached the
    // store is what the gateway indexed before it stopped. Either way, no
    // refused call is recorded as made.
    let rows = query(&db, &Filter::default()).unwrap();
    assert!(
        rows.iter()
            .all(|r| r.status != "ok" || r.arguments.as_deref() == Some("{\"n\":7}")),
        "{rows:?}"
    );
}
