//! The memory figures: what a listen stream costs the toolgate server, in
//! resident memory per stream, over HTTP/1.1 and HTTP/2, after calls have
//! warmed its allocator.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_bench::listen;
use toolgate_bench::load::{self, Target};
use toolgate_bench::report::{MemoryRow, TOOLGATE};
use toolgate_bench::tools::{self, ORDER_TOOL};

use crate::servers::*;
use crate::{IDLE, request};

async fn calls_then_rest(addr: std::net::SocketAddr, params: Value) -> anyhow::Result<()> {
    let (body, headers) = request("tools/call", params);
    let target = Target {
        addr,
        also: None,
        body,
        headers,
        walk: false,
        fresh_ids: false,
    };
    load::run(&target, 1, Duration::from_millis(100)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

pub(crate) async fn rows(bins: &Bins, streams: usize) -> anyhow::Result<Vec<MemoryRow>> {
    let mut rows = Vec::new();
    let mib = |kib: u64| kib as f64 / 1024.0;
    for kind in [Kind::Toolgate, Kind::RmcpDefault, Kind::RmcpBest] {
        let server = start(bins, kind, 0).await?;
        let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
        calls_then_rest(addr, json!({"name": "test_simple_text", "arguments": {}})).await?;
        let m = server.memory();
        rows.push(MemoryRow {
            what: IDLE.into(),
            server: kind.label().into(),
            mib: mib(m.rss_kib),
            unit: "MiB".into(),
        });
        rows.push(MemoryRow {
            what: "idle, anonymous (heap and stacks, without code pages)".into(),
            server: kind.label().into(),
            mib: mib(m.anon_kib),
            unit: "MiB".into(),
        });
        // toolgate compiles a schema on its tool's first call: show what a
        // compiled validator (with a pattern) adds once the tool is used.
        calls_then_rest(
            addr,
            json!({"name": ORDER_TOOL, "arguments": tools::order_arguments()}),
        )
        .await?;
        rows.push(MemoryRow {
            what: "idle, after calls to the validated tool too".into(),
            server: kind.label().into(),
            mib: mib(server.memory().rss_kib),
            unit: "MiB".into(),
        });
    }
    let server = start(bins, Kind::Toolgate, 0).await?;
    let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
    let before = server.memory();
    let open = listen::open_h2(addr, streams, 100).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = server.memory();
    eprintln!(
        "  {streams} listen streams (HTTP/2, 100 per connection): {:.1} MiB → {:.1} MiB",
        mib(before.rss_kib),
        mib(after.rss_kib)
    );
    rows.push(MemoryRow {
        what: format!("{streams} open subscriptions/listen streams (HTTP/2, 100 per connection)"),
        server: TOOLGATE.into(),
        mib: mib(after.rss_kib),
        unit: "MiB".into(),
    });
    drop(open);
    drop(server);
    // Over HTTP/1.1 every stream is a connection of its own; hyper keeps
    // ~16 KiB of buffers per connection, so report that case per stream.
    let server = start(bins, Kind::Toolgate, 0).await?;
    let addr = server.addr.ok_or_else(|| anyhow::anyhow!("no address"))?;
    let h1 = streams.min(2000);
    let before = server.memory();
    let open = listen::open(addr, h1).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = server.memory();
    rows.push(MemoryRow {
        what: format!("{h1} listen streams over HTTP/1.1 (a connection each)"),
        server: TOOLGATE.into(),
        mib: (after.rss_kib.saturating_sub(before.rss_kib)) as f64 / h1 as f64,
        unit: "KiB per stream".into(),
    });
    drop(open);
    Ok(rows)
}
