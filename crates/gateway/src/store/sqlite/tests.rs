//! Tests of the SQLite audit store ([`super`]).
//!
//! Layer: `store`.

use super::*;
use crate::base::time::now_ms;
use crate::store::audit::result_summary;
use std::time::SystemTime;

#[test]
fn a_result_is_summed_up_without_its_content() {
    use toolgate_protocol::types::{CallToolResult, ContentBlock};
    let mut r = CallToolResult::default();
    assert_eq!(result_summary(&r), "no content");
    r.content = vec![ContentBlock::text("secret order 42")];
    assert_eq!(result_summary(&r), "1 block: text (15 chars)");
    r.structured_content = Some(serde_json::json!({"n": 1}));
    r.content.push(ContentBlock::text("x"));
    assert_eq!(
        result_summary(&r),
        "2 blocks: text (15 chars), text (1 chars); structured"
    );
    r.structured_content = None;
    r.content = vec![ContentBlock::text("no such sku")];
    r.is_error = Some(true);
    assert_eq!(
        result_summary(&r),
        "tool error: 1 block: text (11 chars): no such sku"
    );
}

fn row(tool: &str, decision: &str) -> AuditRow {
    AuditRow {
        time_ms: now_ms(SystemTime::now()),
        tool: tool.into(),
        arguments_digest: "d".into(),
        decision: Some(decision.into()),
        status: "ok".into(),
        latency_ms: 1.5,
        ..Default::default()
    }
}

#[tokio::test]
async fn rows_written_together_are_all_durable_and_queryable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let store = std::sync::Arc::new(AuditStore::open(&path, false).unwrap());
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..50 {
        let store = store.clone();
        let decision = if i % 2 == 0 { "allow" } else { "confirm" };
        writes.spawn(async move { store.write(row(&format!("a.t{i}"), decision)).await });
    }
    while let Some(done) = writes.join_next().await {
        done.unwrap().unwrap();
    }
    // A second connection (as `toolgate log` opens) sees every row.
    let all = query(&path, &Filter::default()).unwrap();
    assert_eq!(all.len(), 50);
    assert!(all.windows(2).all(|w| w[0].id < w[1].id));
    let confirmed = query(
        &path,
        &Filter {
            decision: Some("confirm".into()),
            tool: Some("a.t1*".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let tools: Vec<&str> = confirmed.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(tools, ["a.t1", "a.t11", "a.t13", "a.t15", "a.t17", "a.t19"]);
    let last = query(
        &path,
        &Filter {
            limit: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(last.len(), 2);
    assert_eq!(last[1].id, all[49].id);
}

#[tokio::test]
async fn a_nonce_is_spent_once_across_stores_sharing_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let a = AuditStore::open(&path, false).unwrap();
    let b = AuditStore::open(&path, false).unwrap();
    assert!(a.spend("n1".into()).await.unwrap());
    assert!(!b.spend("n1".into()).await.unwrap());
    assert!(!a.spend("n1".into()).await.unwrap());
    assert!(b.spend("n2".into()).await.unwrap());
}

#[tokio::test]
async fn a_store_from_before_grants_is_read_and_then_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn.execute_batch("PRAGMA user_version = 1; INSERT INTO calls (time_ms, tool, arguments_digest, status, latency_ms) VALUES (1, 'a.t', 'd', 'ok', 1.0);")
            .unwrap();
    }
    // `toolgate log` reads it as it is.
    let rows = query(&path, &Filter::default()).unwrap();
    assert_eq!((rows.len(), rows[0].grant.clone()), (1, None));
    assert!(
        crate::store::sqlite::grants::list(&path, true)
            .unwrap()
            .is_empty()
    );
    // The gateway brings it up to date, keeping the rows.
    let store = AuditStore::open(&path, false).unwrap();
    let bound = crate::decide::grants::Bound {
        upstream: "a",
        upstream_tool: "t",
        digest: "sha256:00",
    };
    let grant = Grant::new(None, bound, "a.t", "rule 1", Duration::from_secs(60));
    store.grant(grant.clone()).await.unwrap();
    store
        .write(AuditRow {
            grant: Some(grant.id.clone()),
            ..row("a.t", "confirm")
        })
        .await
        .unwrap();
    let rows = query(&path, &Filter::default()).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].grant.as_deref(), Some(grant.id.as_str()));
    assert_eq!(
        store.granted(None, "a.t".into()).await.unwrap(),
        Some(grant)
    );
}

#[test]
fn a_file_that_is_not_a_store_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    std::fs::write(&path, b"not sqlite at all, just text").unwrap();
    let e = query(&path, &Filter::default()).unwrap_err();
    assert!(matches!(e, StoreError::Sqlite { .. }), "{e:?}");
    let said = toolgate_protocol::error::with_causes(&e);
    assert!(
        said.contains("x.db") && said.contains("not a toolgate audit store"),
        "{said}"
    );
}

#[tokio::test]
async fn a_failed_write_keeps_sqlites_error_as_its_cause() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let store = AuditStore::open(&path, false).unwrap();
    // Another process breaks the file under the writer.
    Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE calls")
        .unwrap();
    let e = store.write(row("a.t", "allow")).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the audit store {} could not be written", path.display())
    );
    let cause = std::error::Error::source(&e).unwrap().to_string();
    assert!(cause.contains("no such table: calls"), "{cause}");
    assert!(matches!(e, StoreError::SqliteWrite { .. }));
}
