//! Client against client: toolgate-client and rmcp's client calling the
//! same server, the same tool, at the same concurrency.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::Map;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client};

use crate::load::histogram;

/// What a client run measured.
pub struct ClientOutcome {
    /// Completed calls.
    pub samples: u64,
    /// Failed calls.
    pub errors: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Per-call latency, µs.
    pub latency: Histogram<u64>,
    /// CPU seconds this process (the client) used during the run.
    pub client_cpu_seconds: f64,
}

async fn drive<F, Fut>(
    concurrency: usize,
    duration: Duration,
    call: F,
) -> anyhow::Result<ClientOutcome>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let cpu_before = crate::process::cpu_seconds(std::process::id());
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latency = histogram();
            let (mut ok, mut failed) = (0u64, 0u64);
            while Instant::now() < deadline {
                let at = Instant::now();
                if call().await {
                    ok += 1;
                    let micros = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
                    let _ = latency.record(micros.max(1));
                } else {
                    failed += 1;
                }
            }
            (ok, failed, latency)
        }));
    }
    let mut outcome = ClientOutcome {
        samples: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
        client_cpu_seconds: 0.0,
    };
    for task in tasks {
        let (ok, failed, latency) = task.await?;
        outcome.samples += ok;
        outcome.errors += failed;
        outcome.latency.add(&latency)?;
    }
    outcome.elapsed = started.elapsed();
    outcome.client_cpu_seconds = crate::process::cpu_seconds(std::process::id()) - cpu_before;
    Ok(outcome)
}

/// toolgate-client: one shared `Client`, `concurrency` tasks calling.
pub async fn toolgate(
    url: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<ClientOutcome> {
    let client = Client::builder("toolgate-bench", "1")
        .build(HttpTransport::new(url, HttpOptions::default())?);
    // Discovery and the tool list happen once, outside the measurement.
    client
        .call_tool("test_simple_text", Map::new(), &CallOptions::default())
        .await?;
    drive(concurrency, duration, move || {
        let client = client.clone();
        async move {
            client
                .call_tool("test_simple_text", Map::new(), &CallOptions::default())
                .await
                .is_ok_and(|r| !r.is_error())
        }
    })
    .await
}

#[derive(Clone)]
struct ModernClient;

impl rmcp::ClientHandler for ModernClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.protocol_version = rmcp::model::ProtocolVersion::V_2026_07_28;
        info
    }
}

/// rmcp's client, speaking 2026-07-28: one shared peer, `concurrency` tasks.
pub async fn rmcp(
    url: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<ClientOutcome> {
    use rmcp::ServiceExt as _;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
    let running = ModernClient.serve(transport).await?;
    let peer = running.peer().clone();
    let params = rmcp::model::CallToolRequestParams::new("test_simple_text");
    peer.call_tool(params.clone()).await?;
    let outcome = drive(concurrency, duration, move || {
        let peer = peer.clone();
        let params = params.clone();
        async move { peer.call_tool(params).await.is_ok() }
    })
    .await;
    let _ = running.cancel().await;
    outcome
}
