//! The call log in front of the SQLite audit store (`[audit]
//! durability`): every answered call is readable at once (indexed or not),
//! survives the gateway stopping with the indexer behind, and reaches the
//! store; a torn last record is dropped, never applied half.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use toolgate_gateway::store::AuditRow;
use toolgate_gateway::store::AuditRows as _;
use toolgate_gateway::store::calllog::logged::{BACKLOG, LoggedStore, log_dir, query};
use toolgate_gateway::store::calllog::segment;
use toolgate_gateway::store::calllog::writer::Durability;
use toolgate_gateway::store::sqlite::Filter;

fn row(tool: &str) -> AuditRow {
    AuditRow {
        time_ms: 1_765_000_000_000,
        caller: Some("alice".into()),
        tool: tool.into(),
        arguments_digest: "sha256:00".into(),
        arguments: Some(r#"{"n":1}"#.into()),
        status: "forwarded".into(),
        ..AuditRow::default()
    }
}

async fn record_calls(store: &LoggedStore, n: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = store.begin(row(&format!("t.{i}"))).await.unwrap();
        let mut done = row(&format!("t.{i}"));
        done.status = "ok".into();
        done.result = Some("1 block: text (2 chars)".into());
        store.complete(id, done).await.unwrap();
        ids.push(id);
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answered_call_is_read_at_once_and_survives_a_stop_with_the_indexer_behind() {
    for durability in [Durability::Process, Durability::Sync] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("audit.db");
        let store = LoggedStore::open(&db, true, durability, BACKLOG).unwrap();
        let ids = record_calls(&store, 50).await;
        // Read after the answers: all there, with their outcomes, through
        // the store and through what `toolgate log` reads.
        let rows = store.rows(Filter::default()).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
        assert!(rows.iter().all(|r| r.status == "ok"), "{durability:?}");
        let read = query(&db, &Filter::default()).unwrap();
        assert_eq!(read.len(), 50);
        assert!(read.iter().all(|r| r.status == "ok"));
        // The newest few, as the console asks.
        let last = query(
            &db,
            &Filter {
                limit: Some(3),
                ..Filter::default()
            },
        )
        .unwrap();
        assert_eq!(
            last.iter().map(|r| r.id).collect::<Vec<_>>(),
            ids[47..].to_vec()
        );
        // Stopped at once, whatever the indexer had done; opened again,
        // nothing answered is missing, and new calls get new ids.
        drop(store);
        let store = LoggedStore::open(&db, true, durability, BACKLOG).unwrap();
        let more = record_calls(&store, 5).await;
        // The indexer brings them all into SQLite, each once.
        assert!(store.indexed(std::time::Duration::from_secs(30)).await);
        let conn = rusqlite::Connection::open(&db).unwrap();
        let (n, ok): (i64, i64) = conn
            .query_row("SELECT count(*), sum(status = 'ok') FROM calls", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((n, ok), (55, 55), "{durability:?}");
        assert!(more[0] > ids[49], "{more:?}");
        let rows = store.rows(Filter::default()).await.unwrap();
        assert_eq!(rows.len(), 55);
        assert!(rows.iter().all(|r| r.status == "ok"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_last_record_is_dropped_and_the_rest_applied_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = LoggedStore::open(&db, false, Durability::Sync, BACKLOG).unwrap();
    let ids = record_calls(&store, 3).await;
    drop(store);
    // Power lost in the middle of a record: half of one at the end.
    let logs = log_dir(&db);
    let newest = *segment::list(&logs).unwrap().last().unwrap();
    let path = segment::path_of(&logs, newest);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3, 4, 1, 7]);
    std::fs::write(&path, &bytes).unwrap();
    let store = LoggedStore::open(&db, false, Durability::Sync, BACKLOG).unwrap();
    let rows = store.rows(Filter::default()).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    // Opened twice more: each call is in the store once.
    drop(store);
    let store = LoggedStore::open(&db, false, Durability::Sync, BACKLOG).unwrap();
    let rows = store.rows(Filter::default()).await.unwrap();
    assert_eq!(rows.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_gateway_on_the_same_log_is_refused_and_told_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let first = LoggedStore::open(&db, false, Durability::Process, BACKLOG).unwrap();
    let second = LoggedStore::open(&db, false, Durability::Process, BACKLOG)
        .err()
        .expect("one appender per log")
        .to_string();
    assert!(
        second.contains("call log written by another gateway") && second.contains("[audit] path"),
        "{second}"
    );
    // What a gateway with `durability` unset asks: not now.
    assert!(
        LoggedStore::open_unless_held(&db, false, Durability::Process, BACKLOG)
            .unwrap()
            .is_none()
    );
    drop(first);
    LoggedStore::open(&db, false, Durability::Process, BACKLOG).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_is_recorded_through_the_log_and_takes_no_call_s_id() {
    use toolgate_gateway::decide::grants::{Bound, Grant, Revoked};
    use toolgate_gateway::store::GrantStore as _;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = LoggedStore::open(&db, false, Durability::Process, BACKLOG).unwrap();
    let bound = Bound {
        upstream: "shop",
        upstream_tool: "pay",
        digest: "sha256:aa",
    };
    let grant = Grant::new(
        Some("alice"),
        bound,
        "shop.pay",
        "rule 1",
        std::time::Duration::from_secs(600),
    );
    store.grant(grant.clone()).await.unwrap();
    // Calls not indexed yet hold the next ids; the revocation must not
    // take one of them.
    let calls = record_calls(&store, 5).await;
    let Revoked::Now(_) = store.revoke(grant.id.clone(), "ops".into()).await.unwrap() else {
        panic!("revoked now");
    };
    assert!(store.indexed(std::time::Duration::from_secs(30)).await);
    drop(store);
    let rows = toolgate_gateway::store::sqlite::query(&db, &Filter::default()).unwrap();
    let revocation = rows
        .iter()
        .find(|r| r.status == "revoked")
        .expect("recorded");
    assert_eq!(revocation.tool, "toolgate.grant");
    assert_eq!(revocation.grant.as_deref(), Some(grant.id.as_str()));
    assert!(!calls.contains(&revocation.id));
    let ok = rows.iter().filter(|r| r.status == "ok").count();
    assert_eq!(ok, calls.len(), "every call kept its row: {rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_writer_after_a_log_left_unindexed_takes_the_ids_after_its_calls() {
    use toolgate_gateway::store::calllog::logged::drain;
    use toolgate_gateway::store::calllog::record::{Kind, Record, encode};
    use toolgate_gateway::store::sqlite::AuditStore;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    drop(AuditStore::open(&db, false).unwrap());
    // A gateway with a log wrote three calls and was killed before its
    // indexer ran.
    let (mut log, _) = segment::Appender::open(&log_dir(&db)).unwrap();
    let mut bytes = Vec::new();
    for id in 1..=3 {
        let mut done = row(&format!("t.{id}"));
        done.id = id;
        done.status = "ok".into();
        encode(
            &Record {
                kind: Kind::Row,
                row: done,
            },
            &mut bytes,
        );
    }
    log.append(&bytes).unwrap();
    drop(log);
    drain(&db).unwrap();
    let store = AuditStore::open(&db, false).unwrap();
    store.write(row("after")).await.unwrap();
    drop(store);
    let rows = toolgate_gateway::store::sqlite::query(&db, &Filter::default()).unwrap();
    let ids: Vec<(i64, &str)> = rows.iter().map(|r| (r.id, r.tool.as_str())).collect();
    assert_eq!(ids, [(1, "t.1"), (2, "t.2"), (3, "t.3"), (4, "after")]);
    // Drained twice is drained once.
    drain(&db).unwrap();
    assert_eq!(
        toolgate_gateway::store::sqlite::query(&db, &Filter::default())
            .unwrap()
            .len(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_writers_write_beside_a_live_log_and_no_two_rows_share_an_id() {
    use toolgate_gateway::store::sqlite::AuditStore;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let logged =
        std::sync::Arc::new(LoggedStore::open(&db, false, Durability::Process, BACKLOG).unwrap());
    // Another host's gateway, committing each row, and the command line.
    let committed = std::sync::Arc::new(AuditStore::open(&db, false).unwrap());
    let mut writers = tokio::task::JoinSet::new();
    for n in 0..200 {
        let (logged, committed) = (logged.clone(), committed.clone());
        writers.spawn(async move {
            if n % 2 == 0 {
                let id = logged.begin(row(&format!("log.{n}"))).await.unwrap();
                let mut done = row(&format!("log.{n}"));
                done.status = "ok".into();
                logged.complete(id, done).await.unwrap();
            } else {
                committed.write(row(&format!("commit.{n}"))).await.unwrap();
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    // Read while the log's calls may not be indexed yet, then once they are.
    for _ in 0..2 {
        let rows = logged.rows(Filter::default()).await.unwrap();
        assert_eq!(rows.len(), 200, "every call once");
        let ids: std::collections::BTreeSet<i64> = rows.iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), 200, "no two rows share an id");
        assert!(logged.indexed(std::time::Duration::from_secs(30)).await);
    }
    drop(logged);
    drop(committed);
    let rows = toolgate_gateway::store::sqlite::query(&db, &Filter::default()).unwrap();
    assert_eq!(rows.len(), 200);
    let tools: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(tools.len(), 200, "no row overwrote another");
    // Each log call's outcome reached its own row.
    assert!(
        rows.iter()
            .all(|r| (r.status == "ok") == r.tool.starts_with("log.")),
        "{rows:?}"
    );
}
