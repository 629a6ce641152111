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
use support::{args, config, http, log_in, origin_of, page_token, serve, shop};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, CallOptions, Client, ClientError, InputHandler};
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_protocol::types::{CallToolResult, ClientCapabilities};

async fn gateway() -> (Gateway, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = serve(shop(calls.clone(), "Orders an item.")).await;
    let gateway = support::start(
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

/// Decide as the page's own form does, in the session `cookie`.
async fn decide(url: &str, cookie: &str, decision: &str) -> u16 {
    let token = page_token(url, cookie).await;
    let origin = origin_of(url);
    let headers = [("Cookie", cookie), ("Origin", origin.as_str())];
    let form = format!("token={token}&decision={decision}");
    http("POST", url, &headers, Some(&form)).await.0
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
    let cookie = log_in(&gateway.approval_login().unwrap()).await;
    // The page shows the call as the form would, escaped.
    let (_, page) = http("GET", &url, &[("Cookie", &cookie)], None).await;
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
    assert_eq!(decide(&url, &cookie, "approve").await, 303);
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
    assert_eq!(decide(&again, &cookie, "deny").await, 303);
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
    let cookie = log_in(&gateway.approval_login().unwrap()).await;
    let real = page_token(&url, &cookie).await;
    let form = format!("token={real}&decision=approve");
    let origin = origin_of(&url);
    let same = [("Cookie", cookie.as_str()), ("Origin", origin.as_str())];
    let forged = http("POST", &url, &same, Some("token=0000&decision=approve")).await;
    assert_eq!(forged.0, 403, "{}", forged.1);
    let evil = [
        ("Cookie", cookie.as_str()),
        ("Origin", "http://evil.example"),
    ];
    let cross = http("POST", &url, &evil, Some(&form)).await;
    assert_eq!(cross.0, 403);
    let across = [
        ("Cookie", cookie.as_str()),
        ("Sec-Fetch-Site", "cross-site"),
    ];
    let site = http("POST", &url, &across, Some(&form)).await;
    assert_eq!(site.0, 403);
    // A script sends neither Origin nor Sec-Fetch-Site: refused too.
    let (status, said) = http("POST", &url, &[("Cookie", &cookie)], Some(&form)).await;
    assert_eq!(status, 403);
    assert!(
        said.ends_with("refused: a decision must come from the approval page itself"),
        "{said}"
    );
    let rebound = http("GET", &url, &[("Host", "evil.example:80")], None).await;
    assert_eq!(rebound.0, 421);
    // None of them decided anything.
    let (error, _) = order(&c, "SKU-0200").await;
    assert!(error);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    gateway.stop();
}

/// A client with URL-mode elicitation only: when sent to the page, the
/// person (logged in with this cookie) approves there, then answers `accept`.
struct UrlPerson(String);

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
            assert_eq!(decide(&url, &self.0, "approve").await, 303);
            Ok(serde_json::from_value(json!({"action": "accept"})).unwrap())
        })
    }
}

#[tokio::test]
async fn a_client_with_url_elicitation_is_sent_to_the_page() {
    let (gateway, calls) = gateway().await;
    let cookie = log_in(&gateway.approval_login().unwrap()).await;
    let c = client(&gateway, Some(UrlPerson(cookie))).await;
    let (error, text) = order(&c, "SKU-0300").await;
    assert!(!error, "{text}");
    assert!(text.contains("ordered SKU-0300"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    gateway.stop();
}

#[tokio::test]
async fn the_page_shows_and_decides_nothing_without_the_persons_login() {
    let (gateway, calls) = gateway().await;
    let c = client(&gateway, None).await;
    let url = page_of(&order(&c, "SKU-0400").await.1);
    let list = url.rsplit_once('/').unwrap().0.to_owned();
    // Knowing the address is not enough: no list, no call, no token.
    for page in [&list, &url] {
        let (status, body) = http("GET", page, &[], None).await;
        assert_eq!(status, 401, "{body}");
        assert!(
            body.contains("Only the person who started the gateway can see and act here"),
            "{body}"
        );
        assert!(
            !body.contains("SKU-0400") && !body.contains("name=\"token\""),
            "{body}"
        );
    }
    let origin = origin_of(&url);
    let form = "token=0&decision=approve";
    let anonymous = http("POST", &url, &[("Origin", &origin)], Some(form)).await;
    assert_eq!(anonymous.0, 401);
    let forged_cookie = [
        ("Origin", origin.as_str()),
        ("Cookie", "toolgate_approval=00"),
    ];
    assert_eq!(http("POST", &url, &forged_cookie, Some(form)).await.0, 401);
    // The login link works once; the next one the gateway gives works.
    let first = gateway.approval_login().unwrap();
    assert!(first.starts_with(&format!("{origin}/login/")), "{first}");
    let cookie = log_in(&first).await;
    let (status, said) = http("GET", &first, &[], None).await;
    assert_eq!(status, 403, "{said}");
    assert!(said.contains("used already"), "{said}");
    let second = gateway.approval_login().unwrap();
    assert_ne!(first, second);
    let other = log_in(&second).await;
    assert_ne!(cookie, other);
    // Nothing was decided so far; the person's session decides.
    assert!(order(&c, "SKU-0400").await.0);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(decide(&url, &other, "approve").await, 303);
    let (error, text) = order(&c, "SKU-0400").await;
    assert!(!error && text.contains("ordered SKU-0400"), "{text}");
    gateway.stop();
}

#[tokio::test]
async fn on_the_page_a_person_can_approve_the_tool_for_the_next_hour() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = serve(shop(calls.clone(), "Orders an item.")).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let gateway = support::start(
        config(&format!(
            "[servers.shop]\nurl = \"{url}\"\n[audit]\npath = {}\n[policy]\ndefault = \"confirm\"\n[[policy.rules]]\ntools = [\"shop.order\"]\naction = \"confirm\"\nremember = \"1h\"\n[approval]\npage = true\nlisten = \"127.0.0.1:0\"\n",
            support::toml_string(&db.display().to_string())
        )),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let c = client(&gateway, None).await;
    let page = page_of(&order(&c, "SKU-0300").await.1);
    let cookie = log_in(&gateway.approval_login().unwrap()).await;
    let (_, shown) = http("GET", &page, &[("Cookie", &cookie)], None).await;
    assert!(
        shown.contains(">Approve: This tool, any arguments, for the next hour</button>"),
        "{shown}"
    );
    assert_eq!(decide(&page, &cookie, "remember").await, 303);
    assert_eq!(
        order(&c, "SKU-0300").await,
        (false, "ordered SKU-0300".into())
    );
    // Any arguments now, with no page in between.
    assert_eq!(
        order(&c, "SKU-0301").await,
        (false, "ordered SKU-0301".into())
    );
    let rows = toolgate_gateway::store::calllog::logged::query(&db, &Default::default()).unwrap();
    let last: Vec<_> = rows
        .iter()
        .rev()
        .take(2)
        .map(|r| (r.confirmation.as_deref(), r.grant.is_some()))
        .collect();
    assert_eq!(last, [(Some("granted"), true), (Some("approved"), true)]);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // A decision the page did not offer is refused: `shop.pay` has no remember.
    let (error, text) = outcome(
        c.call_tool("shop.pay", args(json!({})), &CallOptions::default())
            .await,
    );
    assert!(error, "{text}");
    let pay_page = page_of(&text);
    assert_eq!(decide(&pay_page, &cookie, "remember").await, 409);
    gateway.stop();
}
