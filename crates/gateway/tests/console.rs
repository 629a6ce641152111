//! The console, without a browser: only the person logged in sees it; it
//! shows the upstreams, the tools (upstream text escaped), the calls and
//! the configuration (secrets left out); grants are revoked and the file
//! reloaded from it, with forged and cross-site forms refused.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use serde_json::json;
use support::{args, downstream, http, log_in, origin_of, page_token, serve, shop};
use toolgate_client::CallOptions;
use toolgate_gateway::audit::{AuditSink, AuditStore};
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::grants::{self, Grant};
use toolgate_gateway::{Gateway, GatewayOptions};

const POLICY: &str = "[policy]\ndefault = \"allow\"\n";

struct Console {
    gateway: Gateway,
    base: String,
    cookie: String,
    file: std::path::PathBuf,
    db: std::path::PathBuf,
    upstream: String,
    _dir: tempfile::TempDir,
}

fn file_text(upstream: &str, db: &std::path::Path, policy: &str) -> String {
    format!(
        "[servers.shop]\nurl = \"{upstream}\"\nheaders = {{ Authorization = \"Bearer s3cret-token\" }}\n[audit]\npath = {}\n[console]\nlisten = \"127.0.0.1:0\"\n{policy}",
        support::toml_string(&db.display().to_string())
    )
}

async fn start() -> Console {
    let upstream = serve(shop(
        Arc::new(AtomicUsize::new(0)),
        "Orders an item. <script>alert('owned')</script>\u{1b}[2J",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let file = dir.path().join("toolgate.toml");
    std::fs::write(&file, file_text(&upstream, &db, POLICY)).unwrap();
    let config = GatewayConfig::load(&file).unwrap();
    let gateway = Gateway::start(config, GatewayOptions::default())
        .await
        .unwrap();
    let overview = gateway.console_url().unwrap();
    let base = overview.trim_end_matches("/console").to_owned();
    let cookie = log_in(&gateway.approval_login().unwrap()).await;
    Console {
        gateway,
        base,
        cookie,
        file,
        db,
        upstream,
        _dir: dir,
    }
}

impl Console {
    async fn get(&self, path: &str) -> (u16, String) {
        http(
            "GET",
            &format!("{}{path}", self.base),
            &[("Cookie", &self.cookie)],
            None,
        )
        .await
    }

    /// Post the form of the page at `page` to `path`, as the page does.
    async fn post(&self, page: &str, path: &str) -> u16 {
        let token = page_token(&format!("{}{page}", self.base), &self.cookie).await;
        let origin = origin_of(&self.base);
        let headers = [
            ("Cookie", self.cookie.as_str()),
            ("Origin", origin.as_str()),
        ];
        let form = format!("token={token}");
        http(
            "POST",
            &format!("{}{path}", self.base),
            &headers,
            Some(&form),
        )
        .await
        .0
    }
}

#[tokio::test]
async fn only_the_person_logged_in_sees_the_console() {
    let c = start().await;
    for path in [
        "/console",
        "/console/tools",
        "/console/calls",
        "/console/grants",
        "/console/config",
    ] {
        let (status, page) = http("GET", &format!("{}{path}", c.base), &[], None).await;
        assert_eq!(status, 401, "{path}");
        assert!(page.contains("Open the login link"), "{path}: {page}");
    }
    // A request for another host (DNS rebinding) is refused.
    let (status, _) = http(
        "GET",
        &format!("{}/console", c.base),
        &[("Host", "evil.example:80"), ("Cookie", &c.cookie)],
        None,
    )
    .await;
    assert_eq!(status, 421);
    c.gateway.stop();
}

#[tokio::test]
async fn the_console_shows_upstreams_tools_calls_and_the_configuration() {
    let c = start().await;
    let client = downstream(&c.gateway).await;
    client
        .call_tool(
            "shop.order",
            args(json!({"sku": "SKU-0001"})),
            &CallOptions::default(),
        )
        .await
        .unwrap();

    let (status, overview) = c.get("/console").await;
    assert_eq!(status, 200, "{overview}");
    assert!(
        overview.contains(
            "<td>shop</td><td>http</td><td><span class=\"good\">up</span></td><td>3</td>"
        ),
        "{overview}"
    );
    assert!(overview.contains("<td>ok</td><td>1</td>"), "{overview}");

    let (_, tools) = c.get("/console/tools").await;
    assert!(tools.contains("<code>shop.order</code>"), "{tools}");
    // Text from the upstream is text: escaped, and no escape sequence left.
    assert!(
        tools.contains("Orders an item. &lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;"),
        "{tools}"
    );
    assert!(
        !tools.contains("<script>") && !tools.contains('\u{1b}'),
        "{tools}"
    );
    assert!(
        tools.contains("allow <small>(default (allow))</small>"),
        "{tools}"
    );

    let (_, calls) = c.get("/console/calls").await;
    assert!(
        calls.contains("<td>shop.order</td><td>allow</td><td></td><td>ok</td>"),
        "{calls}"
    );
    let (_, none) = c.get("/console/calls?tool=shop.pay").await;
    assert!(!none.contains("<td>shop.order</td>"), "{none}");

    let (_, config) = c.get("/console/config").await;
    assert!(config.contains("[servers.shop]"), "{config}");
    assert!(
        config.contains("[policy]\ndefault = &quot;allow&quot;\n"),
        "{config}"
    );
    assert!(
        config.contains("headers = [&quot;Authorization&quot;]  # values not shown"),
        "{config}"
    );
    assert!(!config.contains("s3cret"), "{config}");
    // The approval page is one of its views.
    let (status, approvals) = c.get("/approvals").await;
    assert_eq!(status, 200);
    assert!(
        approvals.contains("<a href=\"/console\">Overview</a>"),
        "{approvals}"
    );
    c.gateway.stop();
}

#[tokio::test]
async fn a_grant_is_revoked_and_the_file_reloaded_from_the_console() {
    let c = start().await;
    // A grant, as an approval for the next hour leaves one.
    let store = AuditStore::open(&c.db, false).unwrap();
    let grant = Grant::new(
        Some("alice"),
        "shop",
        "shop.pay",
        "rule 1",
        Duration::from_secs(3600),
    );
    store.grant(grant.clone()).await.unwrap();
    let (_, page) = c.get("/console/grants").await;
    assert!(
        page.contains(&format!("<code>{}</code>", grant.id)),
        "{page}"
    );

    // A forged token and a cross-site form are refused; nothing changes.
    let origin = origin_of(&c.base);
    let revoke = format!("{}/console/grants/{}/revoke", c.base, grant.id);
    let forged = http(
        "POST",
        &revoke,
        &[("Cookie", &c.cookie), ("Origin", &origin)],
        Some("token=0000"),
    )
    .await;
    assert_eq!(forged.0, 403);
    let real = page_token(&format!("{}/console/grants", c.base), &c.cookie).await;
    let cross = http(
        "POST",
        &revoke,
        &[("Cookie", &c.cookie), ("Origin", "http://evil.example")],
        Some(&format!("token={real}")),
    )
    .await;
    assert_eq!(cross.0, 403);
    assert_eq!(grants::list(&c.db, false).unwrap().len(), 1);

    assert_eq!(
        c.post(
            "/console/grants",
            &format!("/console/grants/{}/revoke", grant.id)
        )
        .await,
        303
    );
    assert!(grants::list(&c.db, false).unwrap().is_empty());
    let (_, page) = c.get("/console/grants").await;
    assert!(page.contains("No grants hold now."), "{page}");

    // The file changes; the button reloads it, and the page says what moved.
    let tighter = "[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"shop.pay\"]\naction = \"deny\"\n";
    std::fs::write(&c.file, file_text(&c.upstream, &c.db, tighter)).unwrap();
    assert_eq!(
        c.post("/console/config", "/console/config/reload").await,
        303
    );
    let (_, config) = c.get("/console/config").await;
    assert!(
        config.contains("<strong>Last reload:</strong> reloaded: policy and rate limits applied"),
        "{config}"
    );
    assert!(!c.gateway.tool_names().contains(&"shop.pay".to_owned()));
    // A broken file keeps the running configuration, and says why.
    std::fs::write(&c.file, "[servers.shop\n").unwrap();
    assert_eq!(
        c.post("/console/config", "/console/config/reload").await,
        303
    );
    let (_, config) = c.get("/console/config").await;
    assert!(
        config.contains("not reloaded, the running configuration stays"),
        "{config}"
    );
    assert!(c.gateway.tool_names().contains(&"shop.order".to_owned()));
    c.gateway.stop();
}
