//! Progressive disclosure (#65): how well and how fast `find_tools`
//! ranks, and what a searching endpoint saves the model.
//!
//! - Quality: recall@5 and MRR of the 125 questions of
//!   `testdata/search/queries.json` over the 320 tools of
//!   `catalogue.json`, and apart, the 30 held-out questions the ranking
//!   was never tuned on.
//! - Tokens: the bytes of `tools/list` through a real gateway over an
//!   upstream that lists the 320 tools, on an endpoint that lists them and
//!   on one with `disclosure = "search"`, counted as bytes/4 (no tokenizer
//!   crate: the ratio is what is judged, and every BPE tokenizer gives
//!   JSON of this kind 3.5–4.5 bytes a token).
//! - Speed: each question's ranking over 1,000 tools (the catalogue
//!   repeated under other server names), p50 and p99.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_bench::report::{Report, Round, Row};
use toolgate_gateway::decide::search::quality::{Known, judge};
use toolgate_gateway::decide::search::{Catalogue, Question, ToolSearch};
use toolgate_server::protocol::types::Tool;

/// The speed scenario's label.
pub(crate) const SEARCH: &str = "find_tools ranking over 1,000 tools";
/// Its one server.
pub(crate) const RANKER: &str = "toolgate search (BM25 + concepts)";

fn load<T: serde::de::DeserializeOwned>(name: &str) -> anyhow::Result<T> {
    let path = format!("{}/../testdata/search/{name}", env!("CARGO_MANIFEST_DIR"));
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

/// The speed row, and the quality and token figures (for the report's
/// context and its targets).
pub(crate) async fn rows(rounds: usize) -> anyhow::Result<(Vec<Row>, Value)> {
    let tools: Vec<Tool> = load("catalogue.json")?;
    let known: Vec<Known> = load("queries.json")?;
    let heldout: Vec<Known> = load("heldout.json")?;
    let catalogue = Catalogue::new(tools.iter().map(|t| (t.name.as_str(), t)));
    let tuned = judge(&catalogue, &known, 5);
    let unseen = judge(&catalogue, &heldout, 5);
    eprintln!(
        "recall@5 {:.3} (MRR {:.3}); held out {:.3} (MRR {:.3})",
        tuned.recall, tuned.mrr, unseen.recall, unseen.mrr
    );
    // 1,000 tools: the catalogue again under other server names.
    let mut many: Vec<Tool> = Vec::new();
    for copy in 0.. {
        for tool in &tools {
            if many.len() == 1_000 {
                break;
            }
            let mut tool = tool.clone();
            if copy > 0 {
                tool.name = format!("c{copy}{}", tool.name);
            }
            many.push(tool);
        }
        if many.len() == 1_000 {
            break;
        }
    }
    let big = Catalogue::new(many.iter().map(|t| (t.name.as_str(), t)));
    let all = |_: &str| true;
    let mut measured = Vec::new();
    for _ in 0..rounds {
        let mut times = Vec::new();
        let started = Instant::now();
        for _ in 0..8 {
            for q in known.iter().chain(&heldout) {
                let clock = Instant::now();
                let found = big.find(&Question {
                    text: &q.query,
                    effects: None,
                    limit: 5,
                    visible: &all,
                });
                times.push(clock.elapsed());
                std::hint::black_box(found);
            }
        }
        let wall = started.elapsed();
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        measured.push(Round {
            rate: times.len() as f64 / wall.as_secs_f64(),
            p50_ms: ms(at(0.5)),
            p99_ms: ms(at(0.99)),
            cpu_per_10k: 0.0,
            peak_mib: 0.0,
            errors: 0,
        });
    }
    let (listed, searching) = list_bytes(&tools).await?;
    let figures = json!({
        "tools": tools.len(),
        "questions": known.len(),
        "recall_at_5": tuned.recall,
        "mrr": tuned.mrr,
        "heldout_questions": heldout.len(),
        "heldout_recall_at_5": unseen.recall,
        "heldout_mrr": unseen.mrr,
        "list_tokens": listed / 4,
        "search_list_tokens": searching / 4,
        "tokens": "bytes/4 of the tools/list result",
    });
    Ok((vec![Row::new(SEARCH, RANKER, measured)], figures))
}

/// Bytes of `tools/list` (every page) on a listing endpoint and on a
/// searching one, through a gateway over an upstream listing `tools`.
async fn list_bytes(tools: &[Tool]) -> anyhow::Result<(usize, usize)> {
    use toolgate_server::{Server, ToolDef};
    let mut builder = Server::builder("catalogue", "1");
    for tool in tools {
        builder = builder.tool(
            ToolDef::from_tool(tool.clone()).forward(|_args, _ctx| async {
                Ok(toolgate_server::ToolReply::Complete(Default::default()))
            }),
        );
    }
    let upstream = builder.build()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    tokio::spawn(toolgate_server::transport::http::serve_listener(
        upstream,
        toolgate_server::transport::http::HttpConfig::default(),
        listener,
    ));
    let text = format!(
        "[servers.c]\nurl = \"{url}\"\nprefix = \"c\"\n[policy]\ndefault = \"allow\"\n[endpoints.all]\nservers = [\"c\"]\n[endpoints.found]\nservers = [\"c\"]\ndisclosure = \"search\"\n"
    );
    let config = toolgate_gateway::config::GatewayConfig::parse_toml(&text, |_| None)?;
    let gateway =
        toolgate_gateway::Gateway::start(config, toolgate_gateway::GatewayOptions::default())
            .await?;
    let mut sizes = [0usize; 2];
    for (i, name) in ["all", "found"].into_iter().enumerate() {
        let endpoint = gateway
            .endpoints()
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| anyhow::anyhow!("no endpoint {name}"))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let at = format!("http://{}/mcp", listener.local_addr()?);
        tokio::spawn(toolgate_server::transport::http::serve_listener(
            endpoint.server(),
            toolgate_server::transport::http::HttpConfig::default(),
            listener,
        ));
        let transport = toolgate_client::transport::http::HttpTransport::new(
            at,
            toolgate_client::transport::http::HttpOptions::default(),
        )?;
        let client = toolgate_client::Client::builder("bench", "1").build(transport);
        let listed = client.list_tools().await?;
        sizes[i] = serde_json::to_vec(&json!({ "tools": listed }))?.len();
    }
    gateway.stop();
    Ok((sizes[0], sizes[1]))
}

/// #65: the search's quality, what it saves the model, and its speed.
pub(crate) fn targets(report: &Report, check: &mut impl FnMut(String, Option<(String, bool)>)) {
    let figures = &report.context["search"];
    let f = |key: &str| figures[key].as_f64();
    if let (Some(recall), Some(mrr), Some(unseen), Some(unseen_mrr)) = (
        f("recall_at_5"),
        f("mrr"),
        f("heldout_recall_at_5"),
        f("heldout_mrr"),
    ) {
        check(
            format!(
                "search: recall@5 ≥ 0.9 over {} questions, {} tools",
                figures["questions"], figures["tools"]
            ),
            Some((
                format!(
                    "{recall:.3} (MRR {mrr:.3}); {} held out: {unseen:.3} (MRR {unseen_mrr:.3})",
                    figures["heldout_questions"]
                ),
                recall >= 0.9,
            )),
        );
    }
    if let (Some(list), Some(search)) = (f("list_tokens"), f("search_list_tokens")) {
        let saved = 1.0 - search / list;
        check(
            format!(
                "search: tools/list ≥ 90% fewer tokens at {} tools (bytes/4)",
                figures["tools"]
            ),
            Some((
                format!("{list:.0} → {search:.0} (−{:.1}%)", saved * 100.0),
                saved >= 0.9,
            )),
        );
    }
    if let Some(row) = report.row(SEARCH, RANKER) {
        check(
            "search over 1,000 tools: p50 < 1 ms".to_owned(),
            Some((
                format!(
                    "p50 {:.3} ms, p99 {:.3} ms",
                    row.median.p50_ms, row.median.p99_ms
                ),
                row.median.p50_ms < 1.0,
            )),
        );
    }
}
