//! `toolgate log --verify`: the call log beside a store is checked record
//! by record; an edited byte is found and named, a clean log passes, and a
//! store without a log says so.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use toolgate_gateway::store::AuditRow;
use toolgate_gateway::store::AuditRows as _;
use toolgate_gateway::store::calllog::logged::{BACKLOG, LoggedStore, log_dir};
use toolgate_gateway::store::calllog::segment;
use toolgate_gateway::store::calllog::writer::Durability;

fn verify(db: &std::path::Path) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["log", "--verify", "--db"])
        .arg(db)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_log_passes_and_an_edited_byte_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = LoggedStore::open(&db, false, Durability::Sync, BACKLOG).unwrap();
    for i in 0..3 {
        store
            .write(AuditRow {
                tool: format!("t.{i}"),
                arguments_digest: "d".into(),
                status: "denied".into(),
                ..AuditRow::default()
            })
            .await
            .unwrap();
    }
    drop(store);
    let logs = log_dir(&db);
    let (code, out) = verify(&db);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("checks out") || out.contains("everything is indexed"),
        "{out}"
    );
    // Edit a byte of a segment (the indexer may have removed none yet: the
    // newest is kept until another begins).
    let newest = *segment::list(&logs).unwrap().last().unwrap();
    let path = segment::path_of(&logs, newest);
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(!bytes.is_empty());
    bytes[10] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let (code, out) = verify(&db);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not check out"), "{out}");

    // A store without a log.
    let plain = dir.path().join("plain.db");
    std::fs::write(&plain, b"").unwrap();
    let (code, out) = verify(&plain);
    assert_eq!(code, 0);
    assert!(out.contains("no call log beside"), "{out}");
}
