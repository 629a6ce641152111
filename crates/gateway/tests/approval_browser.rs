//! The approval page in a real browser: headless Chromium, driven over
//! WebDriver, approves a pending call by clicking its button; the retried
//! call goes through. A screenshot of the page is kept in
//! `target/browser-artifacts/`.
//!
//! Needs Debian's `chromium` and `chromium-driver`: `cargo xtask browser`
//! installs them and runs this test (`cargo xtask ci` does too).
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;
use support::{args, config, serve, shop};
use tokio::io::AsyncBufReadExt as _;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client, ClientError};
use toolgate_gateway::{Gateway, GatewayOptions};

/// `chromedriver` on a free port, once it says it is listening.
async fn chromedriver() -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let program = std::env::var("TOOLGATE_CHROMEDRIVER").unwrap_or("chromedriver".into());
    let mut driver = tokio::process::Command::new(program)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver (Debian: chromium-driver; `cargo xtask browser` installs it)");
    let mut lines = tokio::io::BufReader::new(driver.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("started successfully") {
            break;
        }
    }
    // The rest of its output is not read; keep the pipe from filling.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (driver, port)
}

#[tokio::test]
#[ignore = "needs Chromium and ChromeDriver: run by `cargo xtask browser`"]
async fn a_person_approves_a_call_by_clicking_in_chromium() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = serve(shop(calls.clone(), "Orders an item.")).await;
    let gateway = Gateway::start(
        config(&format!(
            "[servers.shop]\nurl = \"{upstream}\"\n[policy]\ndefault = \"confirm\"\n[approval]\npage = true\nlisten = \"127.0.0.1:0\"\n"
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = Client::builder("browser-test", "1")
        .timeout(Duration::from_secs(10))
        .build(HttpTransport::new(serve(gateway.server()).await, HttpOptions::default()).unwrap());
    let options = CallOptions::default();
    let order = || c.call_tool("shop.order", args(json!({"sku": "SKU-4242"})), &options);
    let text = match order().await {
        Err(ClientError::Tool { text, .. }) => text,
        other => panic!("not asked: {other:?}"),
    };
    let url = text
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();

    let (_driver, port) = chromedriver().await;
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": std::env::var("TOOLGATE_CHROMIUM").unwrap_or("/usr/bin/chromium".into()),
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-quic", "--window-size=1000,900",
                format!("--user-data-dir={}", profile.path().display()),
            ]
        }),
    );
    // fantoccini's rustls needs a process-wide provider: toolgate's own.
    toolgate_client::install_default_tls_provider();
    let browser = fantoccini::ClientBuilder::rustls()
        .unwrap()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    // The person logs in with the link only they were shown, then opens
    // the call's page.
    browser
        .goto(&gateway.approval_login().unwrap())
        .await
        .unwrap();
    browser.goto(&url).await.unwrap();
    let shown = browser
        .find(Locator::Css("pre"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(shown.contains("\"sku\": \"SKU-4242\""), "{shown}");
    assert!(shown.contains("Server: shop"), "{shown}");
    let artifacts =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let png = browser.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    std::fs::write(artifacts.join("approval-page.png"), &png).unwrap();
    browser
        .find(Locator::Css("button.approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The click posts the form and lands on the decided call's page.
    let after = browser
        .wait()
        .for_element(Locator::XPath("//strong[text()='Approved.']"))
        .await;
    assert!(
        after.is_ok(),
        "{}",
        browser.source().await.unwrap_or_default()
    );
    browser.close().await.unwrap();

    let result = order().await.unwrap();
    assert_eq!(
        serde_json::to_value(&result.content).unwrap()[0]["text"],
        "ordered SKU-4242"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}
