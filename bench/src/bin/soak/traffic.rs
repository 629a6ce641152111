//! The soak's load: tool calls at a steady rate across the instances that
//! are up, in a fixed mix (read, confirmed, budgeted, slow, list), each
//! with a trace id of its own so its audit row can be found afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{BoxFuture, CallOptions, Client, ClientError, InputHandler};
use toolgate_server::protocol::trace::TraceContext;
use toolgate_server::protocol::types::{ClientCapabilities, ElicitRequestParams, ElicitResult};

/// What a call was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `everything.echo`: allowed, rate-limited through Redis.
    Read,
    /// `basket.create_basket`: a person approves it.
    Confirmed,
    /// `everything.get-sum`: reserved against a budget in PostgreSQL.
    Budgeted,
    /// `everything.trigger-long-running-operation` for 2 s: a slow upstream.
    Slow,
    /// `tools/list`.
    List,
}

/// One slot of [`MIX`] per call: the mix repeats every 20 calls.
const MIX: [Kind; 20] = {
    use Kind::*;
    [
        Read, Confirmed, Read, Budgeted, List, Read, Read, Confirmed, Budgeted, Read, List, Read,
        Read, Budgeted, Confirmed, Read, Slow, List, Read, Read,
    ]
};

/// How a call ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// A result.
    Ok,
    /// An `isError` result from the gateway: answered, and recorded unless
    /// it says it could not be.
    Refused(String),
    /// No result: a protocol error, a timeout, no connection.
    Failed(String),
}

impl Outcome {
    /// Whether the gateway answered with a result its store must hold.
    pub fn must_be_recorded(&self) -> bool {
        match self {
            Outcome::Ok => true,
            Outcome::Refused(text) => !text.contains("could not be recorded"),
            Outcome::Failed(_) => false,
        }
    }

    /// The cause, short: the known ones by name, others by their first
    /// words with numbers taken out, so that like errors group.
    pub fn cause(&self) -> Option<String> {
        let text = match self {
            Outcome::Ok => return None,
            Outcome::Refused(t) => format!("refused: {t}"),
            Outcome::Failed(t) => t.clone(),
        };
        // The gateway's answer about an upstream first: its text may quote
        // the upstream's own error ("Connection refused").
        if let Some(rest) = text.strip_prefix("refused: The upstream server ") {
            let server = rest.split_whitespace().next().unwrap_or("?");
            let what = if rest.contains("failed during the call") {
                "failed mid-call"
            } else {
                "unavailable"
            };
            return Some(format!("{server} {what}"));
        }
        for (says, cause) in CAUSES {
            if text.contains(says) {
                return Some((*cause).to_owned());
            }
        }
        let mut out = String::new();
        let mut digits = false;
        for c in text.chars().take(60) {
            if c.is_ascii_digit() {
                if !digits {
                    out.push('N');
                }
                digits = true;
            } else {
                digits = false;
                out.push(c);
            }
        }
        Some(out)
    }
}

/// Known answers and the short cause each stands for.
const CAUSES: &[(&str, &str)] = &[
    ("could not be recorded", "not recorded (audit store down)"),
    (
        "cannot check its rate limits",
        "rate limits unavailable (Redis down)",
    ),
    (
        "cannot check the budget",
        "budget unavailable (PostgreSQL down)",
    ),
    (
        "connection closed before message completed",
        "connection closed in flight",
    ),
    ("Connection refused", "connection refused"),
];

/// One call, as the soak saw it.
#[derive(Clone, Debug)]
pub struct Record {
    pub kind: Kind,
    pub instance: usize,
    /// Since the soak began.
    pub start: Duration,
    pub end: Duration,
    pub outcome: Outcome,
    /// The trace id it was sent under (none for `tools/list`).
    pub trace: Option<String>,
}

/// The scripted person: approves every question, ticking each yes/no.
struct Person;

impl InputHandler for Person {
    fn capabilities(&self) -> ClientCapabilities {
        ClientCapabilities {
            elicitation: Some(Default::default()),
            ..Default::default()
        }
    }

    fn elicit(
        &self,
        request: ElicitRequestParams,
    ) -> BoxFuture<'_, Result<ElicitResult, ClientError>> {
        Box::pin(async move {
            let mut content = Map::new();
            let fields = request
                .requested_schema
                .as_ref()
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object);
            for (name, field) in fields.into_iter().flatten() {
                if field.get("type").and_then(Value::as_str) == Some("boolean") {
                    content.insert(name.clone(), Value::Bool(true));
                }
            }
            Ok(ElicitResult::accept(content))
        })
    }
}

/// A client of one instance, answering approvals as the scripted person.
pub fn client(url: &str) -> anyhow::Result<Client> {
    Ok(Client::builder("toolgate-soak", "1")
        .timeout(Duration::from_secs(30))
        .input_handler(Person)
        .build(HttpTransport::new(url, HttpOptions::default())?))
}

/// The load: `rate` calls a second until `stop`.
pub struct Traffic {
    pub clients: Vec<Client>,
    /// Which instances take calls now (a load balancer's health checks).
    pub up: Vec<Arc<AtomicBool>>,
    pub records: Arc<Mutex<Vec<Record>>>,
    pub begun: Instant,
    /// Unique per run, so that earlier runs' rows never match.
    pub run: u64,
}

static NEXT: AtomicU64 = AtomicU64::new(1);

impl Traffic {
    /// Send calls at `rate` per second until `stop` is set; then wait for
    /// those in flight.
    pub async fn run(self: Arc<Self>, rate: f64, stop: Arc<AtomicBool>) {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut inflight = tokio::task::JoinSet::new();
        let mut n: usize = 0;
        while !stop.load(Ordering::Relaxed) {
            tick.tick().await;
            let kind = MIX[n % MIX.len()];
            let Some(instance) = self.pick(n) else {
                n += 1;
                continue;
            };
            n += 1;
            let me = self.clone();
            inflight.spawn(async move { me.one(kind, instance).await });
            while inflight.try_join_next().is_some() {}
        }
        while inflight.join_next().await.is_some() {}
    }

    /// Round-robin over the instances that are up.
    fn pick(&self, n: usize) -> Option<usize> {
        let up: Vec<usize> = (0..self.up.len())
            .filter(|i| self.up[*i].load(Ordering::Relaxed))
            .collect();
        (!up.is_empty()).then(|| up[n % up.len()])
    }

    /// A trace context of its own: the run in the high half, a counter in
    /// the low half.
    pub fn trace(&self) -> (String, Option<TraceContext>) {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:016x}{:016x}", self.run, n);
        let context = TraceContext::parse_traceparent(&format!("00-{id}-00000000000000a1-01"));
        (id, context)
    }

    async fn one(&self, kind: Kind, instance: usize) {
        let start = self.begun.elapsed();
        let (outcome, trace) = match kind {
            Kind::List => (list(&self.clients[instance]).await, None),
            _ => {
                let (id, context) = self.trace();
                let (tool, args) = call_of(kind, NEXT.load(Ordering::Relaxed));
                let options = CallOptions {
                    trace: context,
                    ..CallOptions::default()
                };
                let outcome = call(&self.clients[instance], tool, args, &options).await;
                (outcome, Some(id))
            }
        };
        self.records.lock().push(Record {
            kind,
            instance,
            start,
            end: self.begun.elapsed(),
            outcome,
            trace,
        });
    }
}

/// The tool and arguments of a call of `kind`.
pub fn call_of(kind: Kind, n: u64) -> (&'static str, Map<String, Value>) {
    let (tool, args) = match kind {
        Kind::Read => ("everything.echo", json!({"message": format!("soak {n}")})),
        Kind::Confirmed => ("basket.create_basket", json!({})),
        Kind::Budgeted => ("everything.get-sum", json!({"a": n % 1000, "b": 1})),
        Kind::Slow => (
            "everything.trigger-long-running-operation",
            json!({"duration": 2, "steps": 2}),
        ),
        Kind::List => ("", json!({})),
    };
    (tool, args.as_object().cloned().unwrap_or_default())
}

/// Call `tool` and say how it ended.
pub async fn call(
    client: &Client,
    tool: &str,
    args: Map<String, Value>,
    options: &CallOptions,
) -> Outcome {
    match client.call_tool(tool, args, options).await {
        Ok(r) if r.is_error() => Outcome::Refused(text_of(&r)),
        Ok(_) => Outcome::Ok,
        Err(ClientError::Tool { text, .. }) => Outcome::Refused(text),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

fn text_of(r: &toolgate_server::protocol::types::CallToolResult) -> String {
    serde_json::to_value(&r.content)
        .ok()
        .and_then(|c| c[0]["text"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `tools/list`, from the server rather than the client's cache.
async fn list(client: &Client) -> Outcome {
    match client
        .request("tools/list", Map::new(), &CallOptions::default())
        .await
    {
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    #[test]
    fn causes_group_and_unrecorded_answers_are_told_apart() {
        let down = Outcome::Refused(
            "The call to \"everything.echo\" could not be recorded in the server's audit log"
                .into(),
        );
        assert_eq!(
            down.cause().as_deref(),
            Some("not recorded (audit store down)")
        );
        assert!(!down.must_be_recorded());
        let upstream = Outcome::Refused(
            "The upstream server basket is unavailable (cannot reach the server: POST http://127.0.0.1:4242/mcp: Connection refused (os error 111))".into(),
        );
        assert_eq!(upstream.cause().as_deref(), Some("basket unavailable"));
        assert!(upstream.must_be_recorded());
        let a = Outcome::Failed("no answer within 30s; the request was cancelled".into());
        let b = Outcome::Failed("no answer within 31s; the request was cancelled".into());
        assert_eq!(a.cause(), b.cause());
        assert!(!a.must_be_recorded());
        assert_eq!(Outcome::Ok.cause(), None);
        let budget = Outcome::Refused(
            "The gateway cannot check the budget of \"everything.get-sum\" right now (its store is unavailable), so the call was not forwarded.".into(),
        );
        assert_eq!(
            budget.cause().as_deref(),
            Some("budget unavailable (PostgreSQL down)")
        );
    }
}
