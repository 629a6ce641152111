//! `toolgate log --db postgres://…`: the rows every gateway instance
//! wrote to the shared store. Needs PostgreSQL: `cargo xtask scale-out`
//! starts one and runs this with `--include-ignored`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::sync::Arc;

use toolgate_gateway::store::pg::PgStore;
use toolgate_gateway::store::{AuditRow, AuditRows as _, GrantStore as _};

#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn log_reads_the_shared_postgres_store() {
    let url = std::env::var("TOOLGATE_TEST_POSTGRES").expect("run `cargo xtask scale-out`");
    let store = Arc::new(PgStore::connect(&url, false).await.unwrap());
    let marker = format!("logtest{}", std::process::id());
    for (i, caller) in ["alice", "bob"].into_iter().enumerate() {
        let row = AuditRow {
            time_ms: 1_800_000_000_000 + i as i64,
            caller: Some(caller.into()),
            tool: format!("{marker}.t{i}"),
            arguments_digest: "d".into(),
            decision: Some("allow".into()),
            status: "ok".into(),
            latency_ms: 2.5,
            ..AuditRow::default()
        };
        store.write(row).await.unwrap();
    }
    let dir = std::env::temp_dir();
    let glob = format!("{marker}.*");
    let run =
        support::toolgate_in(&dir, &["log", "--db", &url, "--tool", &glob, "--json"], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(
        lines[0].contains("alice") && lines[1].contains("bob"),
        "{}",
        run.stdout
    );
    let bob = support::toolgate_in(
        &dir,
        &["log", "--db", &url, "--tool", &glob, "--caller", "bob"],
        &[],
    )
    .await;
    assert!(
        bob.stdout.contains(&format!("{marker}.t1")) && !bob.stdout.contains("alice"),
        "{}",
        bob.stdout
    );

    // A store that cannot be reached: a clear error, the password never shown.
    let down = support::toolgate_in(
        &dir,
        &[
            "log",
            "--db",
            "postgres://toolgate:hunter2@127.0.0.1:1/none",
        ],
        &[],
    )
    .await;
    assert_eq!(down.code, 3, "{}", down.stderr);
    assert!(
        down.stderr.contains("unavailable") && !down.stderr.contains("hunter2"),
        "{}",
        down.stderr
    );
}

/// `kill -9` of a gateway under load: every call whose result a client
/// received has its row in the shared store (rows are committed before
/// answers leave).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn kill_9_under_load_loses_no_answered_call() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncBufReadExt as _;
    use toolgate_client::transport::http::{HttpOptions, HttpTransport};
    use toolgate_client::{CallOptions, Client};
    use toolgate_gateway::store::sqlite::Filter;
    use toolgate_server::transport::http::{HttpConfig, serve_listener};
    use toolgate_server::{Server, ToolDef};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Note {
        text: String,
    }
    let url = std::env::var("TOOLGATE_TEST_POSTGRES").expect("run `cargo xtask scale-out`");
    let upstream = Server::builder("notes", "1")
        .tool(
            ToolDef::new("keep")
                .description("Keeps a note.")
                .handler(|n: Note| async move { Ok(format!("kept {}", n.text)) }),
        )
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_listener(upstream, HttpConfig::default(), listener));

    let dir = std::env::temp_dir().join(format!("toolgate-kill9-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = format!("k9m{}", std::process::id());
    std::fs::write(
        dir.join("toolgate.toml"),
        format!(
            "[servers.notes]\nurl = \"{upstream_url}\"\n[store]\nurl = \"{url}\"\n[audit]\narguments = true\n[policy]\ndefault = \"allow\"\n"
        ),
    )
    .unwrap();
    let mut gateway = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(gateway.stderr.take().unwrap()).lines();
    let endpoint = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the gateway did not start");
        if let Some(at) = line
            .split(" at ")
            .nth(1)
            .filter(|_| line.contains("serving"))
        {
            break at.trim().to_owned();
        }
    };
    // Sixteen callers, each calling until the gateway is gone; the kill
    // comes once 200 calls were answered.
    let answered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(tokio::sync::Notify::new());
    let mut callers = tokio::task::JoinSet::new();
    for i in 0..16 {
        let client = Client::builder("load", "1")
            .build(HttpTransport::new(&endpoint, HttpOptions::default()).unwrap());
        let (answered, count, enough, marker) = (
            answered.clone(),
            count.clone(),
            enough.clone(),
            marker.clone(),
        );
        callers.spawn(async move {
            for j in 0.. {
                let text = format!("{marker}-{i}-{j}");
                let args = serde_json::json!({"text": text})
                    .as_object()
                    .cloned()
                    .unwrap();
                match client
                    .call_tool("notes.keep", args, &CallOptions::default())
                    .await
                {
                    Ok(_) => {
                        answered.lock().unwrap().push(text);
                        if count.fetch_add(1, Ordering::SeqCst) + 1 == 200 {
                            enough.notify_one();
                        }
                    }
                    Err(_) => return,
                }
            }
        });
    }
    enough.notified().await;
    gateway.start_kill().unwrap();
    gateway.wait().await.unwrap();
    while callers.join_next().await.is_some() {}

    let store = PgStore::connect(&url, false).await.unwrap();
    let rows = store
        .query(&Filter {
            tool: Some("notes.keep".into()),
            ..Filter::default()
        })
        .await
        .unwrap();
    let recorded: std::collections::HashSet<String> = rows
        .iter()
        .filter_map(|r| r.arguments.as_deref())
        .filter_map(|a| serde_json::from_str::<serde_json::Value>(a).ok())
        .filter_map(|a| a["text"].as_str().map(str::to_owned))
        .collect();
    let answered = answered.lock().unwrap();
    assert!(answered.len() >= 200);
    let lost: Vec<&String> = answered.iter().filter(|t| !recorded.contains(*t)).collect();
    assert!(
        lost.is_empty(),
        "{} answered calls have no row: {lost:?}",
        lost.len()
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Grants in the shared store: what one instance granted is listed and
/// revoked from anywhere, and no instance finds it afterwards.
#[tokio::test]
#[ignore = "needs PostgreSQL: run `cargo xtask scale-out`"]
async fn grants_in_the_shared_postgres_store_are_listed_and_revoked() {
    use toolgate_gateway::decide::grants::Grant;
    let url = std::env::var("TOOLGATE_TEST_POSTGRES").expect("run `cargo xtask scale-out`");
    let one = Arc::new(PgStore::connect(&url, false).await.unwrap());
    let other = Arc::new(PgStore::connect(&url, false).await.unwrap());
    let tool = format!("grantstest{}.order", std::process::id());
    let bound = toolgate_gateway::decide::grants::Bound {
        upstream: "shop",
        upstream_tool: "order",
        digest: "sha256:00",
    };
    let grant = Grant::new(
        Some("alice"),
        bound,
        &tool,
        "rule 1",
        std::time::Duration::from_secs(600),
    );
    one.grant(grant.clone()).await.unwrap();
    let found = other
        .granted(Some("alice".into()), tool.clone())
        .await
        .unwrap();
    assert_eq!(found.map(|g| g.id), Some(grant.id.clone()));
    assert_eq!(
        other
            .granted(Some("bob".into()), tool.clone())
            .await
            .unwrap(),
        None
    );
    assert_eq!(other.granted(None, tool.clone()).await.unwrap(), None);
    let dir = std::env::temp_dir();
    let listed = support::toolgate_in(&dir, &["grants", "--db", &url, "--json"], &[]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains(&grant.id), "{}", listed.stdout);
    let revoked =
        support::toolgate_in(&dir, &["grants", "--db", &url, "--revoke", &grant.id], &[]).await;
    assert_eq!(revoked.code, 0, "{}", revoked.stderr);
    assert!(
        revoked
            .stdout
            .starts_with(&format!("revoked {}: {tool} for alice", grant.id)),
        "{}",
        revoked.stdout
    );
    assert_eq!(
        one.granted(Some("alice".into()), tool.clone())
            .await
            .unwrap(),
        None
    );
    let again =
        support::toolgate_in(&dir, &["grants", "--db", &url, "--revoke", &grant.id], &[]).await;
    assert_eq!(
        again.stderr.trim(),
        format!("{} had already ended (revoked)", grant.id)
    );
    let log = support::toolgate_in(
        &dir,
        &["log", "--db", &url, "--tool", "toolgate.grant", "--json"],
        &[],
    )
    .await;
    assert!(log.stdout.contains(&grant.id), "{}", log.stdout);
}
