//! `toolgate grants`: the approvals people gave for a tool, listed and
//! revoked; each revocation is in `toolgate log`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use toolgate_gateway::store::{AuditRows as _, GrantStore as _};

use toolgate_gateway::decide::grants::Grant;
use toolgate_gateway::store::sqlite::AuditStore;

/// `toolgate ARGS --db DB` in `dir`.
async fn grants_in(dir: &std::path::Path, db: &str, args: &[&str]) -> support::Run {
    let mut all = args.to_vec();
    all.extend(["--db", db]);
    support::toolgate_in(dir, &all, &[]).await
}

#[tokio::test]
async fn grants_are_listed_revoked_once_and_the_revocation_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = AuditStore::open(&db, false).unwrap();
    let hour = Duration::from_secs(3600);
    let alice = Grant::new(
        Some("alice"),
        toolgate_gateway::decide::grants::Bound {
            upstream: "shop",
            upstream_tool: "order",
            digest: "sha256:00",
        },
        "shop.order",
        "rule 1 (tools [\"shop.order\"])",
        hour,
    );
    let anyone = Grant::new(
        None,
        toolgate_gateway::decide::grants::Bound {
            upstream: "shop",
            upstream_tool: "order",
            digest: "sha256:00",
        },
        "shop.pay",
        "rule 2 (tools [\"shop.pay\"])",
        hour,
    );
    store.grant(alice.clone()).await.unwrap();
    store.grant(anyone.clone()).await.unwrap();
    let path = db.display().to_string();
    let here = dir.path();

    let listed = grants_in(here, &path, &["grants"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    for shown in [
        &alice.id,
        &anyone.id,
        "alice",
        "every caller without credentials",
        "shop.order",
        "active",
    ] {
        assert!(
            listed.stdout.contains(shown),
            "{shown} in {}",
            listed.stdout
        );
    }
    let json = grants_in(here, &path, &["grants", "--json"]).await;
    let first: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["id"], alice.id.as_str());
    assert_eq!(first["state"], "active");
    assert_eq!(first["rule"], "rule 1 (tools [\"shop.order\"])");

    let id = alice.id.as_str();
    let revoked = grants_in(here, &path, &["grants", "--revoke", id]).await;
    assert_eq!(revoked.code, 0, "{}", revoked.stderr);
    assert!(
        revoked.stdout.starts_with(&format!(
            "revoked {id}: shop.order for alice (it was good until "
        )),
        "{}",
        revoked.stdout
    );
    let again = grants_in(here, &path, &["grants", "--revoke", id]).await;
    assert_eq!(
        (again.code, again.stderr.trim()),
        (0, format!("{id} had already ended (revoked)").as_str())
    );
    let unknown = grants_in(here, &path, &["grants", "--revoke", "g-0000000000000000"]).await;
    assert_eq!(unknown.code, 2);
    assert_eq!(
        unknown.stderr.trim(),
        "toolgate: no grant \"g-0000000000000000\" in this audit store (toolgate grants --all lists them)"
    );

    // Only the other one holds now; --all shows both.
    let now = grants_in(here, &path, &["grants", "--json"]).await;
    assert_eq!(now.stdout.lines().count(), 1);
    assert!(now.stdout.contains(&anyone.id));
    let all = grants_in(here, &path, &["grants", "--all"]).await;
    assert!(
        all.stdout.contains("revoked") && all.stdout.contains(&anyone.id),
        "{}",
        all.stdout
    );

    let log = grants_in(here, &path, &["log", "--json"]).await;
    let row: serde_json::Value = serde_json::from_str(log.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(row["tool"], "toolgate.grant");
    assert_eq!(row["status"], "revoked");
    assert_eq!(row["grant"], id);
    // Recorded as who revoked it; whose grant it was is in the rule.
    assert_eq!(row["caller"], "cli");
    assert_eq!(row["rule"], "revoked grant for shop.order of alice");
    let table = grants_in(here, &path, &["log"]).await;
    assert!(table.stdout.contains(id), "{}", table.stdout);
}

#[tokio::test]
async fn a_store_that_is_not_there_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let run = support::toolgate_in(dir.path(), &["grants", "--db", "nowhere.db"], &[]).await;
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr.trim(),
        "toolgate: no audit store at nowhere.db (toolgate serve writes it; give --db FILE or --config FILE)"
    );
}

#[tokio::test]
async fn log_spend_sums_what_charged_calls_cost_by_day_caller_and_tool() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = AuditStore::open(&db, false).unwrap();
    // 2026-12-03 10:00 UTC, and the next day.
    let day = 1_796_292_000_000_i64;
    for (time_ms, caller, cost) in [
        (day, "alice", Some(25.0)),
        (day + 60_000, "alice", Some(25.0)),
        (day + 120_000, "alice", None),
        (day + 86_400_000, "bob", Some(2.5)),
    ] {
        let row = toolgate_gateway::store::AuditRow {
            time_ms,
            caller: Some(caller.into()),
            tool: "rich.lookup".into(),
            arguments_digest: "d".into(),
            status: "ok".into(),
            cost,
            ..Default::default()
        };
        store.write(row).await.unwrap();
    }
    let path = db.display().to_string();
    let json = grants_in(dir.path(), &path, &["log", "--spend", "--json"]).await;
    assert_eq!(json.code, 0, "{}", json.stderr);
    let lines: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            serde_json::json!({"day": "2026-12-03", "caller": "alice", "tool": "rich.lookup", "calls": 2, "spent": 50.0}),
            serde_json::json!({"day": "2026-12-04", "caller": "bob", "tool": "rich.lookup", "calls": 1, "spent": 2.5}),
        ]
    );
    let table = grants_in(dir.path(), &path, &["log", "--spend", "--caller", "bob"]).await;
    assert!(
        table.stdout.contains("2026-12-04") && !table.stdout.contains("alice"),
        "{}",
        table.stdout
    );

    // A hold a gateway left (it stopped between forwarding and settling)
    // is listed as reserved, with what is spent beside it.
    use toolgate_gateway::decide::budget::{Held, Hold, SpendKey};
    use toolgate_gateway::store::ledger::Ledger as _;
    let key = SpendKey {
        budget: "rich".into(),
        scope: "alice".into(),
        period: "2026-12-03".into(),
    };
    let hold = Hold {
        keys: vec![(key.clone(), 100.0)],
        amount: 25.0,
    };
    assert_eq!(store.reserve(hold.clone()).await.unwrap(), Held::Taken);
    store.settle(vec![key.clone()], 25.0, 25.0).await.unwrap();
    assert_eq!(store.reserve(hold).await.unwrap(), Held::Taken);
    let json = grants_in(dir.path(), &path, &["log", "--spend", "--json"]).await;
    let balance: serde_json::Value =
        serde_json::from_str(json.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        balance,
        serde_json::json!({"budget": "rich", "scope": "alice", "period": "2026-12-03", "spent": 25.0, "reserved": 25.0})
    );
    let table = grants_in(dir.path(), &path, &["log", "--spend"]).await;
    assert!(
        table.stdout.contains("reserved") && table.stdout.contains("2026-12-03"),
        "{}",
        table.stdout
    );
}

#[tokio::test]
async fn beside_a_gateway_with_a_call_log_a_revocation_goes_through_and_takes_no_call_s_id() {
    use toolgate_client::transport::http::{HttpOptions, HttpTransport};
    use toolgate_client::{CallOptions, Client};
    let dir = tempfile::tempdir().unwrap();
    let up = support::echo_upstream().await;
    // No `durability`: the default is the call log.
    std::fs::write(
        dir.path().join("toolgate.toml"),
        format!("[servers.up]\nurl = \"{up}\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n"),
    )
    .unwrap();
    let db = dir.path().join("toolgate-audit.db");
    let grant = Grant::new(
        Some("alice"),
        toolgate_gateway::decide::grants::Bound {
            upstream: "up",
            upstream_tool: "echo",
            digest: "sha256:00",
        },
        "up.echo",
        "rule 1",
        Duration::from_secs(3600),
    );
    let mut gateway = support::serve_in(dir.path(), &[]).await;
    let client = Client::builder("grants", "1")
        .build(HttpTransport::new(gateway.url.clone(), HttpOptions::default()).unwrap());
    client.list_tools().await.unwrap();
    let call = |n: u64| {
        let client = client.clone();
        async move {
            let args = serde_json::json!({ "n": n }).as_object().unwrap().clone();
            let result = client
                .call_tool("echo", args, &CallOptions::default())
                .await
                .unwrap();
            assert!(result.is_error.is_none(), "{result:?}");
        }
    };
    call(1).await;
    toolgate_gateway::store::sqlite::grants::add(&db, &grant).unwrap();
    let path = db.display().to_string();
    let revoked = grants_in(dir.path(), &path, &["grants", "--revoke", &grant.id]).await;
    assert_eq!(revoked.code, 0, "{}", revoked.stderr);
    assert!(
        toolgate_gateway::store::sqlite::grants::list(&db, false)
            .unwrap()
            .is_empty()
    );
    call(2).await;
    // A check of the configuration leaves the store alone, and works.
    let checked = support::toolgate_in(dir.path(), &["serve", "--check"], &[]).await;
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    gateway.child.start_kill().unwrap();
    gateway.child.wait().await.unwrap();
    // Two calls and the revocation, each its own row, whatever indexed
    // them (the log's indexer, or the next reader's drain).
    let logged = grants_in(dir.path(), &path, &["log", "--json"]).await;
    assert_eq!(logged.code, 0, "{}", logged.stderr);
    let rows: Vec<serde_json::Value> = logged
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tools: Vec<&str> = rows.iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(
        tools.iter().filter(|t| **t == "echo").count(),
        2,
        "{tools:?}"
    );
    assert!(tools.contains(&"toolgate.grant"), "{tools:?}");
    let ids: std::collections::BTreeSet<i64> =
        rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), rows.len(), "{rows:?}");
}
