//! Secrets never show: with credentials planted in every position a
//! configuration can hold them (URL userinfo and query, `${VAR}`
//! arguments, `env` and header values, OAuth secrets), no surface — the
//! console's pages, `/status`, `/readyz`, `/metrics`, the audit store,
//! what the upstream's failures are told as — shows any of them, raw,
//! percent-encoded, HTML-escaped or JSON-escaped.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use support::{downstream, http, log_in, serve, shop};
use toolgate_gateway::GatewayOptions;
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;

/// Each planted secret, with characters that every encoding changes.
const PLANTED: &[(&str, &str)] = &[
    ("TG_PW", "pw-9f3e<&\"x>"),
    ("TG_KEY", "key-77a1<&\"y>"),
    ("TG_ARG", "arg-c0de<&\"z>"),
    ("TG_ENV", "env-5b5b<&\"w>"),
    ("TG_HDR", "hdr-d00d<&\"v>"),
    ("TG_OAUTH", "oauth-beef<&\"u>"),
];

/// Every way a surface could spell `secret`.
fn encodings(secret: &str) -> Vec<String> {
    let percent: String = secret
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let html = secret
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let json = serde_json::to_string(secret).unwrap();
    // The distinctive stem alone, too: a partial leak is a leak.
    let stem = secret.split('<').next().unwrap().to_owned();
    vec![
        secret.to_owned(),
        percent,
        html,
        json.trim_matches('"').to_owned(),
        stem,
    ]
}

fn assert_clean(surface: &str, text: &str) {
    for (_, secret) in PLANTED {
        for form in encodings(secret) {
            assert!(!text.contains(&form), "{surface} shows {form:?}:\n{text}");
        }
    }
}

#[tokio::test]
async fn no_surface_shows_a_secret_in_any_encoding() {
    let env = |var: &str| {
        PLANTED
            .iter()
            .find(|(name, _)| *name == var)
            .map(|(_, v)| (*v).to_owned())
    };
    let shop_url = serve(shop(Arc::new(AtomicUsize::new(0)), "Orders an item.")).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = closed.local_addr().unwrap();
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    // `shop` is up and carries secrets in its query and headers; `gone` is
    // refused (its error names its URL); `leaky` prints its argv and
    // environment to stderr and exits.
    let text = format!(
        r#"[servers.shop]
url = "{shop_url}?api_key=${{TG_KEY}}"
headers = {{ Authorization = "Bearer ${{TG_HDR}}" }}
[servers.gone]
url = "http://ops:${{TG_PW}}@{down}/mcp?api_key=${{TG_KEY}}"
oauth = {{ client_id = "gw", client_secret = "${{TG_OAUTH}}" }}
[servers.leaky]
command = "sh"
args = ["-c", "echo \"started with $0 $1, token $API_TOKEN\" >&2; exit 3", "--token=${{TG_ARG}}", "${{TG_PW}}"]
env = {{ API_TOKEN = "${{TG_ENV}}" }}
[audit]
path = {db}
arguments = true
[console]
listen = "127.0.0.1:0"
[policy]
default = "allow"
"#,
        db = support::toml_string(&db.display().to_string())
    );
    let config = GatewayConfig::parse_toml(&text, env).unwrap();
    // The configuration's own Debug is a surface too (logs, panics).
    assert_clean("the configuration's Debug", &format!("{config:?}"));
    let gateway = support::start(config, GatewayOptions::default())
        .await
        .unwrap();
    let c = downstream(&gateway).await;
    assert!(
        support::outcome_of(&c, "shop.order", serde_json::json!({"sku": "SKU-0001"}))
            .await
            .0
    );

    // Both failing upstreams failed while the gateway started: listing
    // their tools is part of starting.
    let status_of = |name: &str| {
        gateway
            .status()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap()
    };
    let leaky = status_of("leaky");
    assert!(
        leaky
            .stderr
            .iter()
            .any(|l| l.contains("started with *** ***, token ***")),
        "{:?}",
        leaky.stderr
    );
    assert!(
        status_of("gone").error.unwrap().contains("http://ops:***@"),
        "the refused upstream's error names it, masked"
    );
    assert_clean("the status", &format!("{:?}", gateway.status()));

    // /status, /readyz and /metrics, as served.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let routes = gateway.health_routes().merge(gateway.status_routes());
    tokio::spawn(toolgate_server::transport::http::serve_listener(
        gateway.server(),
        toolgate_server::transport::http::HttpConfig {
            routes: Some(routes),
            ..Default::default()
        },
        listener,
    ));
    for path in ["/status", "/readyz", "/healthz"] {
        let (_, body) = http("GET", &format!("{base}{path}"), &[], None).await;
        assert_clean(path, &body);
    }
    assert_clean("/metrics", &gateway.metrics().encode());

    // Every page of the console.
    let overview = gateway.console_url().unwrap();
    let console = overview.trim_end_matches("/console").to_owned();
    let cookie = log_in(&gateway.approval_login().unwrap()).await;
    for path in [
        "/console",
        "/console/tools",
        "/console/calls",
        "/console/grants",
        "/console/config",
    ] {
        let (status, page) = http(
            "GET",
            &format!("{console}{path}"),
            &[("Cookie", &cookie)],
            None,
        )
        .await;
        assert_eq!(status, 200, "{path}");
        assert_clean(path, &page);
    }
    let (_, page) = http(
        "GET",
        &format!("{console}/console/config"),
        &[("Cookie", &cookie)],
        None,
    )
    .await;
    assert!(
        page.contains("api_key=***") && page.contains("--token=${TG_ARG}"),
        "the configuration view shows what is safe: {page}"
    );
    gateway.stop();

    // The audit store.
    let rows = query(&db, &Filter::default()).unwrap();
    assert!(!rows.is_empty());
    assert_clean("the audit store", &format!("{rows:?}"));
}
