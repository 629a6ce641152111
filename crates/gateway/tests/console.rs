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
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_gateway::store::sqlite::grants;
use toolgate_gateway::{Gateway, GatewayOptions};
use toolgate_review::lock::{LockFile, lock_definition};

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
    start_with(|_| GatewayOptions::default()).await
}

/// A console whose gateway's options `options` makes (given the test's
/// directory).
async fn start_with(options: impl FnOnce(&std::path::Path) -> GatewayOptions) -> Console {
    start_custom(POLICY, options).await
}

/// The same, with `sections` (the policy, and more) in its file.
async fn start_custom(
    sections: &str,
    options: impl FnOnce(&std::path::Path) -> GatewayOptions,
) -> Console {
    let upstream = serve(shop(
        Arc::new(AtomicUsize::new(0)),
        "Orders an item. <script>alert('owned')</script>\u{1b}[2J",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let file = dir.path().join("toolgate.toml");
    std::fs::write(&file, file_text(&upstream, &db, sections)).unwrap();
    let config = GatewayConfig::load(&file).unwrap();
    let gateway = support::start(config, options(dir.path())).await.unwrap();
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
        self.post_form(page, path, "").await.0
    }

    /// The same, with the form's other fields `fields` (`&k=v…`).
    async fn post_form(&self, page: &str, path: &str, fields: &str) -> (u16, String) {
        let token = page_token(&format!("{}{page}", self.base), &self.cookie).await;
        let origin = origin_of(&self.base);
        let headers = [
            ("Cookie", self.cookie.as_str()),
            ("Origin", origin.as_str()),
        ];
        let form = format!("token={token}{fields}");
        http(
            "POST",
            &format!("{}{path}", self.base),
            &headers,
            Some(&form),
        )
        .await
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
        tools.contains("Orders an item. &lt;script&gt;alert('owned')&lt;/script&gt;"),
        "{tools}"
    );
    assert!(
        !tools.contains("<script>") && !tools.contains('\u{1b}'),
        "{tools}"
    );
    assert!(
        tools.contains("allow <small>(default (allow))</small></td><td>no lock file</td>"),
        "{tools}"
    );
    // What `toolgate audit` finds, with its evidence and fix.
    assert!(
        tools.contains("<details><summary>medium <code>TG-E002</code>: no annotations"),
        "{tools}"
    );
    assert!(
        tools.contains("<p>Fix: add &quot;additionalProperties&quot;: false"),
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
    let grant = support::grant_of(Some("alice"), "shop.pay");
    toolgate_gateway::store::sqlite::grants::add(&c.db, &grant).unwrap();
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

/// The value of the hidden input `name` in the form of `section` (an id)
/// of `page`.
fn hidden(page: &str, section: &str, name: &str) -> String {
    let at = page.find(&format!("id=\"{section}\"")).unwrap();
    let rest = &page[at..];
    let key = format!("name=\"{name}\" value=\"");
    let from = rest.find(&key).unwrap() + key.len();
    rest[from..from + rest[from..].find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn a_drifted_definition_is_shown_and_approved_from_the_console() {
    // The lock file approved another `order`, and knows neither `pay` nor
    // `greet`.
    let mut lock = LockFile::default();
    let old = json!({"name": "order", "description": "Orders an item.", "inputSchema": {"type": "object"}});
    lock.servers
        .entry("shop".into())
        .or_default()
        .tools
        .insert("order".into(), lock_definition(&old));
    let mut lock_path = std::path::PathBuf::new();
    let c = start_with(|dir| {
        lock_path = dir.join("toolgate.lock");
        std::fs::write(&lock_path, lock.render()).unwrap();
        GatewayOptions {
            lock: Some(lock.clone()),
            lock_file: Some(lock_path.clone()),
            ..GatewayOptions::default()
        }
    })
    .await;
    assert!(c.gateway.tool_names().is_empty());

    let (_, tools) = c.get("/console/tools").await;
    assert!(
        tools.contains("<h2>Not approved in the lock file</h2>"),
        "{tools}"
    );
    assert!(
        tools.contains("<p>Withheld: its definition changed since it was approved.</p>"),
        "{tools}"
    );
    assert!(
        tools.contains("<p>Withheld: its server added it after the lock file was written.</p>"),
        "{tools}"
    );
    // The change, field by field, with the upstream's text escaped.
    let at = tools.find("id=\"drift-shop-order\"").unwrap();
    let section = &tools[at..at + tools[at..].find("</section>").unwrap()];
    assert!(section.contains("description"), "{section}");
    assert!(section.contains("&lt;script&gt;"), "{section}");
    assert!(
        !tools.contains("<script>alert") && !tools.contains('\u{1b}'),
        "{tools}"
    );

    // Another definition than the one shown is refused; nothing changes.
    let (status, said) = c
        .post_form(
            "/console/tools",
            "/console/tools/approve",
            "&tool=shop.order&digest=sha256%3A00",
        )
        .await;
    assert_eq!(status, 409, "{said}");
    assert!(
        said.contains("changed again since this page showed it"),
        "{said}"
    );
    assert!(c.gateway.tool_names().is_empty());

    let digest = hidden(&tools, "drift-shop-order", "digest");
    let form = format!("&tool=shop.order&digest={}", digest.replace(':', "%3A"));
    let (status, _) = c
        .post_form("/console/tools", "/console/tools/approve", &form)
        .await;
    assert_eq!(status, 303);
    // Offered again; the file on disk has it; the audit store says who.
    assert_eq!(c.gateway.tool_names(), ["shop.order"]);
    let written = LockFile::parse(&std::fs::read_to_string(&lock_path).unwrap()).unwrap();
    assert_eq!(written.servers["shop"].tools["order"].digest, digest);
    let rows = query(
        &c.db,
        &Filter {
            tool: Some("toolgate.lock".into()),
            ..Filter::default()
        },
    )
    .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, "locked");
    assert_eq!(rows[0].caller.as_deref(), Some("console"));
    assert_eq!(rows[0].arguments_digest, digest);
    // Approving it twice is refused: it is no longer withheld.
    let (status, said) = c
        .post_form("/console/tools", "/console/tools/approve", &form)
        .await;
    assert_eq!(status, 409, "{said}");
    let (_, tools) = c.get("/console/tools").await;
    assert!(!tools.contains("id=\"drift-shop-order\""), "{tools}");
    assert!(tools.contains("id=\"drift-shop-pay\""), "{tools}");
    c.gateway.stop();
}

#[tokio::test]
async fn one_call_in_full_the_hour_drawn_and_new_calls_followed_live() {
    let c = start().await;
    let client = downstream(&c.gateway).await;
    let order = |sku: &'static str| {
        let client = client.clone();
        async move {
            client
                .call_tool(
                    "shop.order",
                    args(json!({ "sku": sku })),
                    &CallOptions::default(),
                )
                .await
                .unwrap()
        }
    };
    order("SKU-0001").await;
    let first = query(&c.db, &Filter::default()).unwrap();
    let id = first.last().unwrap().id;

    let (status, one) = c.get(&format!("/console/calls/{id}")).await;
    assert_eq!(status, 200, "{one}");
    assert!(one.contains("<dt>tool</dt><dd>shop.order</dd>"), "{one}");
    assert!(one.contains("<dt>upstream</dt><dd>shop</dd>"), "{one}");
    assert!(one.contains("set [audit] arguments = true"), "{one}");
    // What the answer was, without its content.
    assert!(
        one.contains("<dt>result</dt><dd>1 block: text (16 chars)</dd>"),
        "{one}"
    );
    // Bad addresses and filters get a short answer, and the console serves on.
    for (path, want) in [
        ("/console/calls/abc", 404),
        ("/console/calls/999999", 404),
        ("/console/calls?since=yesterday", 400),
        ("/console/calls?tool=%5B", 400),
    ] {
        let (status, page) = c.get(path).await;
        assert_eq!(status, want, "{path}: {page}");
    }
    let (_, bad) = c.get("/console/calls?since=yesterday").await;
    assert!(bad.contains("since: "), "{bad}");

    let (_, overview) = c.get("/console").await;
    assert!(overview.contains("id=\"per-minute\""), "{overview}");
    assert!(overview.contains("1 allowed</title>"), "{overview}");
    assert!(
        overview.contains("<h2>Latency, the last hour</h2>")
            && overview.contains("<td>shop</td><td>1</td>"),
        "{overview}"
    );

    // The page links its one script, which the policy lets run from here
    // only; the script is served from the binary.
    let (_, calls) = c.get("/console/calls").await;
    assert!(calls.contains("<script src=\"/console/assets/console.js\" defer></script>"));
    assert!(calls.contains("script-src 'self'"), "{calls}");
    assert!(
        calls.contains(&format!("data-live=\"/console/calls/live?after={id}\"")),
        "{calls}"
    );
    let (status, script) = c.get("/console/assets/console.js").await;
    assert_eq!(status, 200);
    assert!(script.contains("text/javascript") && script.contains("EventSource"));
    // Without the session, the stream is refused like every view.
    let (status, _) = http("GET", &format!("{}/console/calls/live", c.base), &[], None).await;
    assert_eq!(status, 401);

    // Following: the stream opened after the first call carries the next.
    toolgate_client::install_default_tls_provider();
    let mut live = reqwest::Client::new()
        .get(format!(
            "{}/console/calls/live?after={id}&tool=shop.*",
            c.base
        ))
        .header("Cookie", &c.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    order("SKU-0002").await;
    let mut seen = String::new();
    let event = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(chunk) = live.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: calls") && seen.contains("\n\n") {
                return seen.clone();
            }
        }
        seen.clone()
    })
    .await
    .unwrap();
    assert!(event.contains("event: calls"), "{event}");
    assert!(event.contains(&format!("id: {}", id + 1)), "{event}");
    assert!(event.contains("\"shop.order\""), "{event}");
    assert!(!event.contains(&format!("\"id\":{id},")), "{event}");
    c.gateway.stop();
}

#[tokio::test]
async fn with_auth_an_operator_logs_in_with_a_token_carrying_the_operator_scope() {
    let jwks =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/auth/jwks.json");
    const AUDIENCE: &str = "https://gateway.test/mcp";
    let sections = format!(
        "{POLICY}[auth]\nissuer = \"{}\"\naudience = \"{AUDIENCE}\"\njwks = {}\n",
        support::ISSUER,
        support::toml_string(&jwks.display().to_string())
    );
    // The lock file withholds `order`, so there is something to approve.
    let mut lock = LockFile::default();
    lock.servers.entry("shop".into()).or_default().tools.insert(
        "order".into(),
        lock_definition(&json!({"name": "order", "inputSchema": {"type": "object"}})),
    );
    let c = start_custom(&sections, |_| GatewayOptions {
        lock: Some(lock.clone()),
        ..GatewayOptions::default()
    })
    .await;
    let origin = origin_of(&c.base);
    let login = format!("{}/login", c.base);
    // The page without a session points at the token login too.
    let (status, page) = http("GET", &format!("{}/console", c.base), &[], None).await;
    assert_eq!(status, 401);
    assert!(
        page.contains("<a href=\"/login\">log in with your token</a>"),
        "{page}"
    );
    let (status, form) = http("GET", &login, &[], None).await;
    assert_eq!(status, 200);
    assert!(form.contains("name=\"token\""), "{form}");

    let post = async |token: &str, origin: Option<&str>| {
        let mut headers = vec![];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        http("POST", &login, &headers, Some(&format!("token={token}"))).await
    };
    let good = support::token("olivia", AUDIENCE, "tools:call toolgate:operator");
    // Not from the page itself (another site logging the browser in): refused.
    assert_eq!(post(&good, None).await.0, 403);
    assert_eq!(post(&good, Some("http://evil.example")).await.0, 403);
    // Not a token of this gateway's issuer, or for another audience.
    let (status, said) = post("not.a.jwt", Some(&origin)).await;
    assert_eq!(status, 401, "{said}");
    assert!(
        said.contains("This token is not valid for this gateway"),
        "{said}"
    );
    let elsewhere = support::token("olivia", "https://other.test/mcp", "toolgate:operator");
    assert_eq!(post(&elsewhere, Some(&origin)).await.0, 401);
    // A valid token without the operator scope.
    let caller = support::token("carl", AUDIENCE, "tools:call");
    let (status, said) = post(&caller, Some(&origin)).await;
    assert_eq!(status, 403, "{said}");
    assert!(
        said.contains("lacks the operator scope toolgate:operator"),
        "{said}"
    );

    // A token with the operator scope that names nobody: its acts would be
    // recorded under no one, so it does not log in.
    let nobody = support::token("", AUDIENCE, "toolgate:operator");
    let (status, said) = post(&nobody, Some(&origin)).await;
    assert_eq!(status, 401, "{said}");
    assert!(said.contains("This token names no subject."), "{said}");

    // The operator's token opens a session; what they approve is theirs.
    let (status, answer) = post(&format!("Bearer%20{good}"), Some(&origin)).await;
    assert_eq!(status, 303, "{answer}");
    let set = answer
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let max_age: u64 = set
        .split("Max-Age=")
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(max_age <= 600, "the session ends with the token: {set}");
    let cookie = set
        .split_once(':')
        .unwrap()
        .1
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let operator = Console { cookie, ..c };
    let (status, tools) = operator.get("/console/tools").await;
    assert_eq!(status, 200);
    let digest = hidden(&tools, "drift-shop-order", "digest");
    let form = format!("&tool=shop.order&digest={}", digest.replace(':', "%3A"));
    let (status, _) = operator
        .post_form("/console/tools", "/console/tools/approve", &form)
        .await;
    assert_eq!(status, 303);
    let rows = query(
        &operator.db,
        &Filter {
            tool: Some("toolgate.lock".into()),
            ..Filter::default()
        },
    )
    .unwrap();
    assert_eq!(rows[0].caller.as_deref(), Some("olivia"));
    operator.gateway.stop();
}

/// The login link: each use makes a successor that the gateway hands on
/// (as `serve` prints it), the link lands on the overview, the overview
/// counts only what waits now, and a revocation is recorded under who did it.
#[tokio::test]
async fn each_login_link_has_a_successor_that_is_handed_on_and_lands_on_the_overview() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let upstream = serve(shop(Arc::new(AtomicUsize::new(0)), "Orders an item.")).await;
    let gateway = support::start(
        GatewayConfig::parse_toml(&file_text(&upstream, &db, POLICY), |_| None).unwrap(),
        GatewayOptions::default(),
    )
    .await
    .unwrap();
    let mut links = gateway.login_links().unwrap();
    let first = links.borrow_and_update().clone();
    assert_eq!(Some(first.clone()), gateway.approval_login());
    let (status, answer) = http("GET", &first, &[], None).await;
    assert_eq!(status, 303);
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("location: /console\r\n"),
        "{answer}"
    );
    // The next link is handed on at once, and works once.
    assert!(links.has_changed().unwrap());
    let next = links.borrow_and_update().clone();
    assert_ne!(next, first);
    assert_eq!(http("GET", &first, &[], None).await.0, 403);
    let cookie = log_in(&next).await;
    let base = gateway
        .console_url()
        .unwrap()
        .trim_end_matches("/console")
        .to_owned();
    let (_, overview) = http(
        "GET",
        &format!("{base}/console"),
        &[("Cookie", &cookie)],
        None,
    )
    .await;
    assert!(
        overview.contains("No call is waiting for a person."),
        "{overview}"
    );
    // A grant revoked on the console is recorded under the session's
    // person.
    let grant = support::grant_of(Some("alice"), "shop.order");
    toolgate_gateway::store::sqlite::grants::add(&db, &grant).unwrap();
    let console = Console {
        gateway,
        base,
        cookie,
        file: dir.path().join("none.toml"),
        db: db.clone(),
        upstream,
        _dir: dir,
    };
    let path = format!("/console/grants/{}/revoke", grant.id);
    assert_eq!(console.post("/console/grants", &path).await, 303);
    let row = query(&db, &Filter::default()).unwrap().pop().unwrap();
    assert_eq!(
        (
            row.tool.as_str(),
            row.caller.as_deref(),
            row.rule.as_deref()
        ),
        (
            "toolgate.grant",
            Some("console"),
            Some("revoked grant for shop.order of alice")
        )
    );
    let kept = grants::list(&db, true).unwrap();
    assert_eq!(kept[0].revoked_by.as_deref(), Some("console"));
    console.gateway.stop();
}

#[tokio::test]
async fn the_console_shows_each_endpoint_its_tools_and_its_calls() {
    let sections = format!(
        "{POLICY}[endpoints.buy]\ntools = [\"shop.order\"]\n[endpoints.buy.shape.\"shop.order\"]\nname = \"buy\"\n"
    );
    let c = start_custom(&sections, |_| GatewayOptions::default()).await;
    let client = support::client_of(c.gateway.endpoints()[0].server()).await;
    client
        .call_tool(
            "buy",
            args(json!({"sku": "SKU-0001"})),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let (_, overview) = c.get("/console").await;
    assert!(
        overview.contains("<td>buy</td><td><code>/mcp/buy</code></td><td>1</td><td>0</td>"),
        "{overview}"
    );
    let (_, tools) = c.get("/console/tools").await;
    assert!(
        tools.contains("<td><code>buy</code></td><td><code>shop.order</code></td>"),
        "{tools}"
    );
    let (_, calls) = c.get("/console/calls?endpoint=buy").await;
    assert!(
        calls.contains("<td>buy</td><td>shop.order (as buy)</td>"),
        "{calls}"
    );
    let (_, calls) = c.get("/console/calls?endpoint=-").await;
    assert!(!calls.contains("(as buy)"), "{calls}");
    c.gateway.stop();
}
