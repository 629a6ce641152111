//! `[ratelimit] redis`: budgets shared by every instance, and refused
//! calls (not stuck ones) while Redis is away.
//!
//! Each test starts its own `redis-server` (from
//! `TOOLGATE_TEST_REDIS_SERVER`) on a free loopback port; `cargo xtask
//! scale-out` (part of `cargo xtask ci`) installs it and runs these with
//! `--include-ignored`.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolgate_client::{CallOptions, Client};
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::{Gateway, GatewayOptions};

use support::{args, downstream, serve, shop};

/// A redis-server of the test's own; killed when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    async fn start_on(port: u16) -> Self {
        let binary =
            std::env::var("TOOLGATE_TEST_REDIS_SERVER").expect("run `cargo xtask scale-out`");
        let child = Command::new(binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Owned (killed and reaped on drop) before anything can panic.
        let redis = Self { child, port };
        // Ready when it accepts connections.
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return redis;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server did not start on port {port}");
    }

    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port).await
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn instance(upstream: &str, redis: &str, extra: &str) -> Gateway {
    let toml = format!(
        "[servers.shop]\nurl = \"{upstream}\"\n{extra}\n[ratelimit]\nredis = \"{redis}\"\n[[ratelimit.rules]]\ntools = [\"shop.greet\"]\nper_minute = 3\n[policy]\ndefault = \"allow\"\n"
    );
    let config = GatewayConfig::parse_toml(&toml, |_| None).unwrap();
    Gateway::start(config, GatewayOptions::default())
        .await
        .unwrap()
}

/// The text of calling `tool`, and whether it was an error.
async fn call(c: &Client, tool: &str, arguments: serde_json::Value) -> (bool, String) {
    let raw = c
        .request(
            "tools/call",
            args(json!({"name": tool, "arguments": arguments})),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    (
        raw["isError"] == true,
        raw["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test]
#[ignore = "needs redis-server: run `cargo xtask scale-out`"]
async fn a_callers_budget_is_shared_by_every_instance() {
    let redis = Redis::start().await;
    let upstream = serve(shop(Arc::default(), "Orders an item.")).await;
    let a = instance(&upstream, &redis.url(), "").await;
    let b = instance(&upstream, &redis.url(), "").await;
    let (ca, cb) = (downstream(&a).await, downstream(&b).await);
    let greet = || json!({});
    // Three calls a minute, wherever they land: A, B, A pass; B is refused.
    for c in [&ca, &cb, &ca] {
        let (failed, text) = call(c, "shop.greet", greet()).await;
        assert!(!failed, "{text}");
    }
    let (failed, text) = call(&cb, "shop.greet", greet()).await;
    assert!(failed);
    assert!(
        text.starts_with("Rate limit reached: at most 3 calls per minute for each caller to \"shop.greet\". Try again in "),
        "{text}"
    );
    let (failed, _) = call(&ca, "shop.greet", greet()).await;
    assert!(failed, "refused on the other instance too");
    // Other tools have budgets of their own.
    let (failed, text) = call(&ca, "shop.order", json!({"sku": "SKU-0001"})).await;
    assert!(!failed, "{text}");
    a.stop();
    b.stop();
}

#[tokio::test]
#[ignore = "needs redis-server: run `cargo xtask scale-out`"]
async fn an_upstreams_budget_is_shared_and_an_outage_fails_closed_until_redis_returns() {
    let redis = Redis::start().await;
    let upstream = serve(shop(Arc::default(), "Orders an item.")).await;
    let a = instance(&upstream, &redis.url(), "per_minute = 2").await;
    let b = instance(&upstream, &redis.url(), "per_minute = 2").await;
    let (ca, cb) = (downstream(&a).await, downstream(&b).await);
    let lenient = GatewayConfig::parse_toml(
        &format!(
            "[servers.shop]\nurl = \"{upstream}\"\n[ratelimit]\nredis = \"{}\"\non_outage = \"allow\"\n[[ratelimit.rules]]\ntools = [\"shop.greet\"]\nper_minute = 100\n[policy]\ndefault = \"allow\"\n",
            redis.url()
        ),
        |_| None,
    )
    .unwrap();
    let lenient = Gateway::start(lenient, GatewayOptions::default())
        .await
        .unwrap();
    let c_open = downstream(&lenient).await;
    let order = || json!({"sku": "SKU-0001"});
    assert!(!call(&ca, "shop.order", order()).await.0);
    assert!(!call(&cb, "shop.order", order()).await.0);
    let (failed, text) = call(&ca, "shop.order", order()).await;
    assert!(failed);
    assert!(
        text.contains("the upstream server shop takes at most 2 calls per minute"),
        "{text}"
    );

    // Redis goes away: calls are refused promptly, with no internals shown.
    let port = redis.port;
    drop(redis);
    let (failed, text) = call(&cb, "shop.greet", json!({})).await;
    assert!(failed);
    assert_eq!(
        text,
        "The gateway cannot check its rate limits right now, so the call was not forwarded. Try again shortly."
    );
    // The checks after it do not wait behind the reconnection: refused at
    // once. (Held behind it, each waited a reconnect's backoff, 100 ms or
    // more; 20 of them in under a second cannot have.)
    let started = std::time::Instant::now();
    for _ in 0..20 {
        let (failed, text) = call(&cb, "shop.greet", json!({})).await;
        assert!(failed, "{text}");
        assert!(text.contains("cannot check its rate limits"), "{text}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once while Redis is away: {:?} for 20 calls",
        started.elapsed()
    );
    assert!(ca.list_tools().await.is_ok(), "lists are still served");
    // An instance told to let calls through meanwhile does so.
    let (failed, text) = call(&c_open, "shop.greet", json!({})).await;
    assert!(!failed, "on_outage = allow: {text}");
    // It comes back (empty): calls pass again.
    let _redis = Redis::start_on(port).await;
    let mut passed = false;
    for _ in 0..50 {
        if !call(&cb, "shop.greet", json!({})).await.0 {
            passed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(passed, "service resumed once Redis returned");
    a.stop();
    b.stop();
}
