//! The console in a real browser: headless Chromium, driven over
//! WebDriver, the way a person uses it. Refused without the login; an
//! upstream seen going down and coming back; a drifted definition read
//! and approved; a waiting call approved and another denied, the Rust
//! client's calls then finishing; calls followed live; one call in full;
//! a grant revoked; upstream text containing `<script>` and escape
//! sequences shown as text. Each view's screenshot is kept in
//! `target/browser-artifacts/console-*.png`.
//!
//! Needs Debian's `chromium` and `chromium-driver`: `cargo xtask browser`
//! installs them and runs this test (`cargo xtask ci` does too).
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/browser.rs"]
mod browser;
mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;
use support::{outcome_of, serve, shop, toml_string};
use toolgate_client::Client;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_gateway::GatewayOptions;
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_review::lock::{LockFile, lock_definition};

/// A stdio upstream that will not start while the file `$DOWN` exists
/// (saying so on stderr), and exits on `crash`.
const CRASHY: &str = r#"if [ -f "$DOWN" ]; then echo "cannot start: down for maintenance" >&2; exit 1; fi; while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); [ -z "$id" ] && continue; case "$line" in *server/discover*) printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}}\n' "$id";; *tools/list*) printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","ttlMs":0,"cacheScope":"public","tools":[{"name":"crash","inputSchema":{"type":"object"}},{"name":"ping","inputSchema":{"type":"object"}}]}}\n' "$id";; *'"name":"crash"'*) exit 3;; *'"name":"ping"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[{"type":"text","text":"pong"}]}}\n' "$id";; esac; done"#;

const DESCRIPTION: &str = "Orders an item. <script>alert('owned')</script>\u{1b}[2J";

/// Reload the page until `test` holds for its text (as a person would),
/// within 30 s.
async fn refresh_until(b: &browser::Browser, what: &str, test: impl Fn(&str) -> bool) -> String {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let text = b.text().await;
            if test(&text) {
                return text;
            }
            b.client.refresh().await.unwrap();
        }
    })
    .await;
    match found {
        Ok(text) => text,
        Err(_) => panic!("never saw {what}: {}", b.text().await),
    }
}

/// The id of the pending approval in a refusal's text (its page address).
fn approval_id(text: &str) -> String {
    let url = text
        .split_whitespace()
        .find(|w| w.contains("/approvals/"))
        .unwrap();
    url.rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches(['.', ',', ')'])
        .to_owned()
}

#[tokio::test]
#[ignore = "needs Chromium and ChromeDriver: run by `cargo xtask browser`"]
async fn a_person_sees_and_acts_on_the_gateway_from_the_console_in_chromium() {
    let upstream = serve(shop(Arc::new(AtomicUsize::new(0)), DESCRIPTION)).await;
    let dir = tempfile::tempdir().unwrap();
    let down = dir.path().join("down");
    let db = dir.path().join("audit.db");
    let file = dir.path().join("toolgate.toml");
    std::fs::write(
        &file,
        format!(
            "[servers.shop]\nurl = \"{upstream}\"\n[servers.crashy]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\nenv = {{ DOWN = {} }}\n[audit]\npath = {}\n[approval]\npage = true\n[console]\nlisten = \"127.0.0.1:0\"\n[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"shop.order\"]\naction = \"confirm\"\n",
            toml_string(CRASHY),
            toml_string(&down.display().to_string()),
            toml_string(&db.display().to_string()),
        ),
    )
    .unwrap();
    // The lock file approved another `order`; crashy's tools as they are.
    let mut lock = LockFile::default();
    let shop_lock = lock.servers.entry("shop".into()).or_default();
    shop_lock.tools.insert(
        "order".into(),
        lock_definition(&json!({"name": "order", "description": "Orders an item.", "inputSchema": {"type": "object"}})),
    );
    let crashy_lock = lock.servers.entry("crashy".into()).or_default();
    for name in ["crash", "ping"] {
        crashy_lock.tools.insert(
            name.into(),
            lock_definition(&json!({"name": name, "inputSchema": {"type": "object"}})),
        );
    }
    let lock_file = dir.path().join("toolgate.lock");
    std::fs::write(&lock_file, lock.render()).unwrap();
    let options = GatewayOptions {
        lock: Some(lock),
        lock_file: Some(lock_file.clone()),
        restart_backoff: Some(Duration::from_millis(50)),
        ..GatewayOptions::default()
    };
    let gateway = support::start(GatewayConfig::load(&file).unwrap(), options)
        .await
        .unwrap();
    assert_eq!(gateway.tool_names(), ["crashy.crash", "crashy.ping"]);
    let base = gateway
        .console_url()
        .unwrap()
        .trim_end_matches("/console")
        .to_owned();
    // A client that cannot show a form: its person approves on the page.
    let client = Client::builder("console-test", "1")
        .timeout(Duration::from_secs(10))
        .build(HttpTransport::new(serve(gateway.server()).await, HttpOptions::default()).unwrap());
    let b = browser::chromium(1100, 900).await;
    let go = |path: &str| format!("{base}{path}");

    // Without the login, nothing is shown.
    b.client.goto(&go("/console")).await.unwrap();
    let refused = b.text().await;
    assert!(refused.contains("Open the login link"), "{refused}");
    assert!(!refused.contains("crashy"), "{refused}");
    b.screenshot("console-login").await;
    // The person opens the link toolgate printed.
    b.client
        .goto(&gateway.approval_login().unwrap())
        .await
        .unwrap();
    b.client.goto(&go("/console")).await.unwrap();
    let overview = b.text().await;
    assert!(overview.contains("crashy stdio up"), "{overview}");

    // An upstream goes down, is seen down with what it said, and comes back.
    std::fs::write(&down, "").unwrap();
    let (ok, _) = outcome_of(&client, "crashy.crash", json!({})).await;
    assert!(!ok);
    let seen = refresh_until(&b, "crashy down", |t| {
        t.contains("crashy stdio down") && t.contains("cannot start: down for maintenance")
    })
    .await;
    assert!(seen.contains("restarting"), "{seen}");
    b.screenshot("console-upstream-down").await;
    std::fs::remove_file(&down).unwrap();
    refresh_until(&b, "crashy up again", |t| t.contains("crashy stdio up")).await;

    // The drifted definition: its change read, upstream text as text.
    b.client.goto(&go("/console/tools")).await.unwrap();
    let diff = b
        .client
        .find(Locator::Css("#drift-shop-order pre"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(diff.contains("<script>alert('owned')</script>"), "{diff}");
    assert!(!diff.contains('\u{1b}'), "{diff}");
    b.screenshot("console-tools").await;
    b.click_then("#lock-shop-order", "//td/code[text()='shop.order']")
        .await;
    let tools = b.text().await;
    assert!(tools.contains("<script>alert('owned')</script>"), "{tools}");
    assert!(gateway.tool_names().contains(&"shop.order".to_owned()));
    let written = LockFile::parse(&std::fs::read_to_string(&lock_file).unwrap()).unwrap();
    assert_ne!(written.servers["shop"].tools["order"].digest, "");

    // A waiting call approved from the console: the client's call finishes.
    let (ok, asked) = outcome_of(&client, "shop.order", json!({"sku": "SKU-0001"})).await;
    assert!(!ok, "{asked}");
    let first = approval_id(&asked);
    b.client.goto(&go("/approvals")).await.unwrap();
    let waiting = b.text().await;
    assert!(waiting.contains("\"sku\": \"SKU-0001\""), "{waiting}");
    b.screenshot("console-approvals").await;
    b.click_then(&format!("#approve-{first}"), "//strong[text()='Approved.']")
        .await;
    let (ok, done) = outcome_of(&client, "shop.order", json!({"sku": "SKU-0001"})).await;
    assert!(ok, "{done}");
    assert_eq!(done, "ordered SKU-0001");
    // The call in full shows its rounds: asked, then approved and answered.
    let rows = query(
        &db,
        &Filter {
            tool: Some("shop.order".into()),
            ..Filter::default()
        },
    )
    .unwrap();
    let answered = rows.iter().rev().find(|r| r.status == "ok").unwrap();
    b.client
        .goto(&go(&format!("/console/calls/{}", answered.id)))
        .await
        .unwrap();
    let full = b.text().await;
    assert!(full.contains("Its rounds"), "{full}");
    assert!(
        full.contains("approval_pending") && full.contains("1 block: text (16 chars)"),
        "{full}"
    );
    // And one denied: the client's call ends refused.
    let (_, asked) = outcome_of(&client, "shop.order", json!({"sku": "SKU-0002"})).await;
    let second = approval_id(&asked);
    b.client.goto(&go("/approvals")).await.unwrap();
    b.click_then(&format!("#deny-{second}"), "//strong[text()='Denied.']")
        .await;
    let (ok, refused) = outcome_of(&client, "shop.order", json!({"sku": "SKU-0002"})).await;
    assert!(!ok && refused.contains("denied"), "{refused}");

    // Calls followed live: a call made while the page is open appears.
    b.client.goto(&go("/console/calls")).await.unwrap();
    b.wait_for("//p[@id='live-state' and text()='Following new calls live.']")
        .await;
    let (ok, pong) = outcome_of(&client, "crashy.ping", json!({})).await;
    assert!(ok, "{pong}");
    let row = b
        .wait_for("//tr[@class='new']/td[text()='crashy.ping']/..")
        .await;
    assert!(row.text().await.unwrap().contains("ok"));
    b.screenshot("console-calls").await;
    // One call in full.
    row.find(Locator::Css("a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("//dd[text()='crashy.ping']").await;
    b.screenshot("console-call").await;

    // A grant revoked.
    let grant = support::grant_of(Some("alice"), "shop.order");
    toolgate_gateway::store::sqlite::grants::add(&db, &grant).unwrap();
    b.client.goto(&go("/console/grants")).await.unwrap();
    b.screenshot("console-grants").await;
    b.click_then(
        &format!("#revoke-{}", grant.id),
        "//p[text()='No grants hold now.']",
    )
    .await;

    b.client.goto(&go("/console/config")).await.unwrap();
    let config = b.text().await;
    assert!(config.contains("[servers.crashy]"), "{config}");
    b.screenshot("console-config").await;
    b.client.goto(&go("/console")).await.unwrap();
    let overview = b.text().await;
    assert!(overview.contains("The last hour"), "{overview}");
    b.client.find(Locator::Css("svg#per-minute")).await.unwrap();
    b.screenshot("console-overview").await;
    // No script from an upstream ever ran.
    assert!(b.client.get_alert_text().await.is_err());
    b.client.clone().close().await.unwrap();
    gateway.stop();
}
