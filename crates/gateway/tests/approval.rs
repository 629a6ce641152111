//! The approval page, without a browser: a client that cannot show a form
//! is told where a person approves; the approval lets one identical call
//! through; forged, cross-site and misdirected decisions are refused.
//! (`approval_browser.rs` drives the same page in Chromium.)
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use support::{args, config, http, serve, shop};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, CallOptions, Client, ClientError, InputHandler};
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::types::{CallToolResult, ClientCapabilities};

async fn gateway() -> (Gateway, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = serve(shop(calls.clone(), "Orders an item.")).await;
    let gateway = Gateway::start(
        config(&format!(
            "[servers.shop]\nurl = \"{url}\"\n[policy]\ndefault = \"confirm\"\n[approval]\npage = true\nlisten = \"127.0.0.1:0\"\n"
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    (gateway, calls)
}

async fn client(gateway: &Gateway, handler: Option<UrlPerson>) -> Client {
    let url = serve(gateway.server()).await;
    let builder = Client::builder("test", "1").timeout(Duration::from_secs(10));
    let builder = match handler {
        Some(h) => builder.input_handler(h),
        None => builder,
    };
    builder.build(HttpTransport::new(url, HttpOptions::default()).unwrap())
}

fn outcome(r: Result<CallToolResult, ClientError>) -> (bool, String) {
    let result = match r {
        Ok(r) => r,
        Err(ClientError::Tool { result, .. }) => *result,
        Err(e) => panic!("{e}"),
    };
    let text = serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    (result.is_error == Some(true), text)
}

async fn order(c: &Client, sku: &str) -> (bool, String) {
    outcome(
        c.call_tool(
            "shop.order",
            args(json!({ "sku": sku })),
            &CallOptions::default(),
        )
        .await,
    )
}

/// The approval page address the gateway's answer names.
fn page_of(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {text}"))
        .to_owned()
}

/// The anti-forgery token of the page at `url`.
async fn token(url: &str) -> String {
    let (status, page) = http("GET", url, &[], None).await;
    assert_eq!(status, 200, "{page}");
    let at = page.find("name=\"token\" value=\"").unwrap() + 20;
    page[at..at + 32].to_owned()
}

async fn decide(url: &str, decision: &str) -> u16 {
    let token = token(url).await;
    http(
        "POST",
        url,
        &[],
        Some(&format!("token={token}&decision={decision}")),
    )
    .await
    .0
}

#[tokio::test]
async fn a_person_approves_on_the_page_and_one_identical_call_goes_through() {
    let (gateway, calls) = gateway().await;
    let c = client(&gateway, None).await;
    let (error, text) = order(&c, "SKU-0100").await;
    assert!(
        error && text.contains("needs a person's approval"),
        "{text}"
    );
    let url = page_of(&text);
    // The page shows the call as the form would, escaped.
    let (_, page) = http("GET", &url, &[], None).await;
    assert!(
        page.contains("&quot;sku&quot;: &quot;SKU-0100&quot;"),
        "{page}"
    );
    assert!(
        page.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'")
    );
    // Asking again before anyone decides points to the same approval.
    assert_eq!(page_of(&order(&c, "SKU-0100").await.1), url);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(decide(&url, "approve").await, 303);
    // Other arguments are another call.
    let (error, _) = order(&c, "SKU-0101").await;
    assert!(error);
    let (error, text) = order(&c, "SKU-0100").await;
    assert!(!error, "{text}");
    assert!(text.contains("ordered SKU-0100"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The approval is spent: the same call needs a new one.
    let (error, text) = order(&c, "SKU-0100").await;
    assert!(error && page_of(&text) != url, "{text}");
    // A denial ends the call.
    let again = page_of(&text);
    assert_eq!(decide(&again, "deny").await, 303);
    let (error, text) = order(&c, "SKU-0100").await;
    assert!(error && text.contains("denied"), "{text}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}

#[tokio::test]
async fn forged_cross_site_and_misdirected_decisions_are_refused() {
    let (gateway, calls) = gateway().await;
    let c = client(&gateway, None).await;
    let url = page_of(&order(&c, "SKU-0200").await.1);
    let real = token(&url).await;
    let form = format!("token={real}&decision=approve");
    let forged = http("POST", &url, &[], Some("token=0000&decision=approve")).await;
    assert_eq!(forged.0, 403, "{}", forged.1);
    let cross = http(
        "POST",
        &url,
        &[("Origin", "http://evil.example")],
        Some(&form),
    )
    .await;
    assert_eq!(cross.0, 403);
    let site = http(
        "POST",
        &url,
        &[("Sec-Fetch-Site", "cross-site")],
        Some(&form),
    )
    .await;
    assert_eq!(site.0, 403);
    let rebound = http("GET", &url, &[("Host", "evil.example:80")], None).await;
    assert_eq!(rebound.0, 421);
    // None of them decided anything.
    let (error, _) = order(&c, "SKU-0200").await;
    assert!(error);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    gateway.stop();
}

/// A client with URL-mode elicitation only: when sent to the page, the
/// "person" approves there, then answers `accept`.
struct UrlPerson;

impl InputHandler for UrlPerson {
    fn capabilities(&self) -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {"url": {}}})).unwrap()
    }
    fn elicit(
        &self,
        request: toolgate_protocol::types::ElicitRequestParams,
    ) -> BoxFuture<'_, Result<toolgate_protocol::types::ElicitResult, ClientError>> {
        Box::pin(async move {
            let url = request.url.clone().unwrap();
            assert_eq!(decide(&url, "approve").await, 303);
            Ok(serde_json::from_value(json!({"action": "accept"})).unwrap())
        })
    }
}

#[tokio::test]
async fn a_client_with_url_elicitation_is_sent_to_the_page() {
    let (gateway, calls) = gateway().await;
    let c = client(&gateway, Some(UrlPerson)).await;
    let (error, text) = order(&c, "SKU-0300").await;
    assert!(!error, "{text}");
    assert!(text.contains("ordered SKU-0300"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}
