//! The approval page in a real browser: headless Chromium, driven over
//! WebDriver, approves a pending call by clicking its button; the retried
//! call goes through. A screenshot of the page is kept in
//! `target/browser-artifacts/`.
//!
//! Needs Debian's `chromium` and `chromium-driver`: `cargo xtask browser`
//! installs them and runs this test (`cargo xtask ci` does too).
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/browser.rs"]
mod browser;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;
use support::{args, config, serve, shop};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client, ClientError};
use toolgate_gateway::GatewayOptions;

#[tokio::test]
#[ignore = "needs Chromium and ChromeDriver: run by `cargo xtask browser`"]
async fn a_person_approves_a_call_by_clicking_in_chromium() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = serve(shop(calls.clone(), "Orders an item.")).await;
    let gateway = support::start(
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

    let chrome = browser::chromium(1000, 900).await;
    let browser = &chrome.client;
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
    chrome.screenshot("approval-page").await;
    // The click posts the form and lands on the decided call's page.
    chrome
        .click_then("button.approve", "//strong[text()='Approved.']")
        .await;
    chrome.client.clone().close().await.unwrap();

    let result = order().await.unwrap();
    assert_eq!(
        serde_json::to_value(&result.content).unwrap()[0]["text"],
        "ordered SKU-4242"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}
