//! `toolgate log --db postgres://…`: the rows every gateway instance
//! wrote to the shared store. Needs PostgreSQL: `cargo xtask scale-out`
//! starts one and runs this with `--include-ignored`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use toolgate_gateway::audit::{AuditRow, AuditSink};
use toolgate_gateway::audit_pg::PgStore;

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
