//! Reloading the configuration without a restart: what changed moves,
//! calls in flight finish, a configuration that cannot work changes
//! nothing, and the reload is in the audit store.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use serde_json::{Map, json};
use support::{downstream, refused, serve, shop, toml_string, tool_names};
use tokio::sync::Notify;
use toolgate_client::CallOptions;
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::{Gateway, GatewayOptions, Reloaded};
use toolgate_server::{Server, ToolDef};

/// A server whose `hold` tool answers once `release` is notified.
fn holding(release: Arc<Notify>, entered: Arc<Notify>) -> Server {
    Server::builder("slow", "1")
        .tool(
            ToolDef::new("hold")
                .description("Answers when released.")
                .read_only()
                .handler(move || {
                    let (release, entered) = (release.clone(), entered.clone());
                    async move {
                        entered.notify_one();
                        release.notified().await;
                        "released"
                    }
                }),
        )
        .build()
        .unwrap()
}

fn config(text: &str) -> GatewayConfig {
    GatewayConfig::parse_toml(text, |_| None).unwrap()
}

#[tokio::test]
async fn a_reload_moves_only_what_changed_and_calls_in_flight_finish() {
    let (release, entered) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let slow = serve(holding(release.clone(), entered.clone())).await;
    let shop_url = serve(shop(Arc::new(AtomicUsize::new(0)), "Orders an item.")).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let audit = format!(
        "[audit]\npath = {}\n",
        toml_string(&db.display().to_string())
    );
    let first = format!("[servers.slow]\nurl = \"{slow}\"\n{audit}[policy]\ndefault = \"allow\"\n");
    let gateway = Gateway::start(config(&first), GatewayOptions::default())
        .await
        .unwrap();
    let c = downstream(&gateway).await;
    // A call in flight when the configuration changes.
    let in_flight = {
        let c = c.clone();
        tokio::spawn(async move {
            c.call_tool("slow.hold", Map::new(), &CallOptions::default())
                .await
        })
    };
    entered.notified().await;

    // The shop is added, and a rule now denies its payments.
    let second = format!(
        "[servers.slow]\nurl = \"{slow}\"\n[servers.shop]\nurl = \"{shop_url}\"\n{audit}[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"shop.pay\"]\naction = \"deny\"\n"
    );
    let report = gateway.reload(config(&second)).await.unwrap();
    assert_eq!(
        report,
        Reloaded {
            added: vec!["shop".into()],
            rules_changed: true,
            ..Default::default()
        }
    );
    release.notify_one();
    let held = in_flight.await.unwrap().unwrap();
    assert_eq!(held.content[0].as_text(), Some("released"));
    assert_eq!(
        gateway.tool_names(),
        ["shop.greet", "shop.order", "slow.hold"]
    );
    // A new client lists them (one that listed before caches its list
    // until the list-changed notification it may follow).
    assert!(
        tool_names(&downstream(&gateway).await)
            .await
            .contains(&"shop.order".to_owned())
    );
    let said = refused(&c, "shop.pay", json!({})).await;
    assert!(said.contains("policy denies it (rule 1)"), "{said}");

    // A configuration that cannot work changes nothing. (A file with this
    // glob is refused when it loads; one built in code, here.)
    let mut broken = config(&first);
    broken.servers.clear();
    broken
        .policy
        .rules
        .push(toolgate_gateway::config::RuleConfig {
            tools: vec!["[".into()],
            effects: Vec::new(),
            subjects: Vec::new(),
            scopes: Vec::new(),
            action: toolgate_gateway::config::Action::Deny,
            remember: None,
        });
    let e = gateway.reload(broken).await.unwrap_err();
    assert!(e.to_string().contains("policy rule 1: glob \"[\""), "{e}");
    assert!(gateway.tool_names().contains(&"shop.order".to_owned()));

    // The slow server's entry changes: it alone restarts. The shop goes.
    let third = format!(
        "[servers.slow]\nurl = \"{slow}\"\ntimeout = 30\n{audit}[policy]\ndefault = \"allow\"\n"
    );
    let report = gateway.reload(config(&third)).await.unwrap();
    assert_eq!(report.changed, ["slow"]);
    assert_eq!(report.removed, ["shop"]);
    assert!(report.added.is_empty());
    assert_eq!(gateway.tool_names(), ["slow.hold"]);
    let names: Vec<String> = gateway.status().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["slow"]);
    // The restarted upstream serves.
    let again = {
        let c = c.clone();
        tokio::spawn(async move {
            c.call_tool("slow.hold", Map::new(), &CallOptions::default())
                .await
        })
    };
    entered.notified().await;
    release.notify_one();
    assert!(again.await.unwrap().is_ok());

    // Each reload is in the audit store, with what it changed.
    let rows = query(&db, &Filter::default()).unwrap();
    let reloads: Vec<&str> = rows
        .iter()
        .filter(|r| r.tool == "toolgate.reload")
        .map(|r| r.rule.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(
        reloads,
        [
            "added shop; policy and rate limits applied",
            "restarted slow; removed shop; policy and rate limits applied"
        ]
    );
    gateway.stop();
}

/// A file whose servers' tool names collide stops `serve` at start; the
/// same file applied by a reload (SIGHUP, `--watch`, the console's button
/// all call `reload_from`) changes nothing either, says why, and the
/// running deny rule keeps holding.
#[tokio::test]
async fn a_reload_that_start_would_refuse_changes_nothing_and_says_why() {
    let shop_url = serve(shop(Arc::new(AtomicUsize::new(0)), "Orders an item.")).await;
    let twin = serve(shop(Arc::new(AtomicUsize::new(0)), "Orders an item.")).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("toolgate.toml");
    let first = format!(
        "[servers.shop]\nurl = \"{shop_url}\"\n[audit]\ndisabled = true\n[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"shop.pay\"]\naction = \"deny\"\n"
    );
    // The twin takes the same prefix, and the file drops the deny rule.
    let clashing = format!(
        "[servers.shop]\nurl = \"{shop_url}\"\n[servers.twin]\nurl = \"{twin}\"\nprefix = \"shop\"\n[audit]\ndisabled = true\n[policy]\ndefault = \"allow\"\n"
    );
    let start_says = match Gateway::start(config(&clashing), GatewayOptions::default()).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("start accepted a clash"),
    };
    assert!(
        start_says.contains("is offered by both shop/"),
        "{start_says}"
    );

    std::fs::write(&file, &first).unwrap();
    let gateway = Gateway::start(
        GatewayConfig::load(&file).unwrap(),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = downstream(&gateway).await;
    std::fs::write(&file, &clashing).unwrap();
    let e = gateway.reload_from(&file).await.unwrap_err();
    assert_eq!(e.to_string(), start_says);
    // Nothing changed: the twin is not running, the deny rule holds.
    let names: Vec<String> = gateway.status().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["shop"]);
    let said = refused(&c, "shop.pay", json!({})).await;
    assert!(said.contains("policy denies it (rule 1)"), "{said}");
    let last = gateway.last_reload_outcome().unwrap();
    assert!(!last.applied);
    assert_eq!(last.said, start_says);

    // A file that does not load is refused the same way, and recorded.
    std::fs::write(&file, "[servers.shop\n").unwrap();
    assert!(gateway.reload_from(&file).await.is_err());
    let last = gateway.last_reload_outcome().unwrap();
    assert!(
        !last.applied && last.said.contains("toolgate.toml"),
        "{last:?}"
    );
    // And the file fixed applies.
    std::fs::write(&file, &first).unwrap();
    let report = gateway.reload_from(&file).await.unwrap();
    assert_eq!(report.summary(), "nothing changed");
    assert!(gateway.last_reload_outcome().unwrap().applied);
    gateway.stop();
}
