//! What the stores keep of calls (layer `store`): the audit row, the
//! store trait every backend implements, and how a call record becomes a
//! row. The backends are [`crate::store::sqlite`] (embedded) and
//! [`crate::store::pg`] (shared by instances).

use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolgate_server::{CallRecord, NonceStore};

use crate::base::time::now_ms;
use crate::decide::grants::Grant;
use crate::store::StoreError;
use crate::store::ledger::Ledger;
use crate::store::sqlite::Filter;

/// One row of the audit store.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditRow {
    /// Row number, increasing.
    pub id: i64,
    /// When the call was taken, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The caller's verified subject.
    pub caller: Option<String>,
    /// The upstream server's name.
    pub upstream: Option<String>,
    /// The gateway tool name.
    pub tool: String,
    /// SHA-256 of the canonical arguments, base64url.
    pub arguments_digest: String,
    /// The arguments, when `[audit] arguments = true`.
    pub arguments: Option<String>,
    /// `allow`, `confirm` or `deny`.
    pub decision: Option<String>,
    /// Which rule decided, by place and conditions (`rule 2 (tools
    /// ["*.pay"])`, `default (confirm)`, `built-in default (…)`), or what
    /// withheld the tool (`lock file: …`).
    pub rule: Option<String>,
    /// `asked`, `approved`, `granted` (let through by a grant),
    /// `declined`, `cancelled` or `unsolicited`.
    pub confirmation: Option<String>,
    /// `ok`, `tool_error`, `invalid_arguments`, `output_invalid`,
    /// `upstream_error`, `timeout`, `forwarded` (written ahead, no outcome
    /// recorded: the gateway stopped first), `denied`, `declined`,
    /// `approval_pending`, `approval_unavailable`, `rate_limited`,
    /// `withheld`, `input_required`,
    /// `failed`; for a refused `requestState`: `replayed`, `moved`,
    /// `tampered` or `expired`; `insufficient_scope`; `loop` (stopped by
    /// `[loops]`); `over_budget` (`[[budget]]`); `reloaded` and
    /// `revoked` for the rows of `toolgate.reload` and `toolgate.grant`;
    /// `locked` for `toolgate.lock` (a definition approved on the console,
    /// `caller` who approved it, `arguments_digest` its digest).
    pub status: String,
    /// Milliseconds from taking the call to its answer.
    pub latency_ms: f64,
    /// The grant this row is about: the one a person gave with this call
    /// (`confirmation` `approved`), the one that let it through
    /// (`granted`), or the one revoked (tool `toolgate.grant`).
    pub grant: Option<String>,
    /// What the call cost, under its `[[budget]]`, when it was charged.
    pub cost: Option<f64>,
    /// What the answer was, without its content: `2 blocks: text (15
    /// chars), image; structured` (and for a tool error, the start of what
    /// it said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The W3C trace id the call ran under (the gateway's span, or the
    /// caller's `traceparent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The endpoint (`[endpoints.NAME]`) the call came through; none for
    /// the default one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The name the caller called the tool by, when its endpoint renames
    /// it (`tool` is the gateway tool it reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<String>,
    /// The flow the call was in (`caller`, `trace <id>`), when flows are
    /// tracked and the tool has a flow class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
    /// The classes of content that had entered that flow when the call was
    /// decided (`private,untrusted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_labels: Option<String>,
    /// Whose identity the call carried upstream and how (`alice
    /// (exchange)`), when not the gateway's own.
    pub identity: Option<String>,
    /// How the caller reached the tool, when not by its name: `search`
    /// (through a searching endpoint's `call_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// The future of a store operation.
pub type StoreFuture<T> =
    Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'static>>;

/// Where the record of each call goes (its rows), and is read back.
pub trait AuditRows: Send + Sync {
    /// Write `row`; resolves once it is durable.
    fn write(&self, row: AuditRow) -> StoreFuture<()>;
    /// Write `row` ahead of its call's effect; resolves with its id once
    /// it is durable.
    fn begin(&self, row: AuditRow) -> StoreFuture<i64>;
    /// Complete the row `id` written ahead with the call's outcome (every
    /// column but its time, caller, tool and arguments). Resolves once the
    /// outcome is committed and readers see it, without waiting for a sync
    /// of its own where the store can avoid one: the row it completes is
    /// durable already.
    fn complete(&self, id: i64, row: AuditRow) -> StoreFuture<()>;
    /// Whether rows keep the arguments, not only their digest.
    fn keeps_arguments(&self) -> bool;
    /// Rows, oldest first, as `toolgate log` reads them.
    fn rows(&self, filter: Filter) -> StoreFuture<Vec<AuditRow>>;
}

/// Where grants (approvals that remember a tool) are kept.
pub trait GrantStore: Send + Sync {
    /// Keep `grant`; resolves once it is durable.
    fn grant(&self, grant: Grant) -> StoreFuture<()>;
    /// The newest grant that holds now for `caller` calling `tool`
    /// (revocations by any process included); whether it is for the tool
    /// as it is now is [`Grant::ended_by`]'s to say.
    fn granted(&self, caller: Option<String>, tool: String) -> StoreFuture<Option<Grant>>;
    /// The grants that hold now, or with `all` every one kept.
    fn grants(&self, all: bool) -> StoreFuture<Vec<Grant>>;
    /// Revoke the grant `id` as `by` (a console session's subject, or
    /// `cli`), and record it.
    fn revoke(&self, id: String, by: String) -> StoreFuture<crate::decide::grants::Revoked>;
}

/// The audit store: the calls' record, grants, spent rounds and budgets'
/// ledger kept together (one SQLite file, or one PostgreSQL database shared
/// by several instances, [`crate::store::pg`]). Each part is a narrow trait
/// of its own; a component takes only the one it uses.
pub trait AuditSink: AuditRows + GrantStore + NonceStore + Send + Sync {
    /// Where it is, for messages (a file, or a database URL without its
    /// password).
    fn location(&self) -> String;
    /// Whether a row could be written now (for readiness).
    fn check(&self) -> StoreFuture<()>;
    /// The same store, where the gateway's single-use rounds are spent.
    fn nonces(self: std::sync::Arc<Self>) -> crate::store::SharedNonces;
    /// The same store, where budgets' spending is kept.
    fn ledger(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn Ledger>;
    /// The same store, where people's linked accounts are kept.
    fn accounts(
        self: std::sync::Arc<Self>,
    ) -> std::sync::Arc<dyn crate::store::accounts::AccountStore>;
    /// The gateway stopped: make what was written durable and let go of
    /// the store's writers' lock, so another gateway may open it in this
    /// process (a call log refuses rows after this). The default does
    /// nothing.
    fn close(&self) {}
}

fn note(notes: &Map<String, Value>, key: &str) -> Option<String> {
    notes.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl AuditRow {
    /// The confirmation with the grant it made or used, as tables show it:
    /// `approved (g-…)`, `granted (g-…)`, a grant alone, or nothing.
    pub fn confirmation_shown(&self) -> String {
        match (&self.confirmation, &self.grant) {
            (Some(c), Some(g)) => format!("{c} ({g})"),
            (Some(c), None) => c.clone(),
            (None, Some(g)) => g.clone(),
            (None, None) => String::new(),
        }
    }
}

/// The row for a call record: the gateway's notes (`upstream`,
/// `decision`, `rule`, `confirmation`, `status`) on top of what the
/// server saw.
pub fn row_of(record: &CallRecord) -> AuditRow {
    let notes = &record.notes;
    // An endpoint's fixed parameters are part of what was sent: the row
    // keeps the arguments as forwarded.
    let forwarded = notes.get("forwarded");
    AuditRow {
        id: 0,
        time_ms: now_ms(record.started),
        caller: record.caller.clone(),
        upstream: note(notes, "upstream"),
        tool: record.tool.clone(),
        arguments_digest: match forwarded {
            Some(sent) => toolgate_server::arguments_digest(sent),
            None => record.arguments_digest.clone(),
        },
        arguments: record
            .arguments
            .as_ref()
            .map(|given| forwarded.unwrap_or(given).to_string()),
        decision: note(notes, "decision"),
        rule: note(notes, "rule"),
        confirmation: note(notes, "confirmation"),
        status: note(notes, "status").unwrap_or_else(|| record.outcome.as_str().to_owned()),
        latency_ms: record.elapsed.as_secs_f64() * 1000.0,
        grant: note(notes, "grant"),
        cost: notes.get("cost").and_then(Value::as_f64),
        result: note(notes, "result"),
        trace_id: note(notes, "trace"),
        endpoint: note(notes, "endpoint"),
        shown: note(notes, "shown"),
        flow: note(notes, "flow"),
        flow_labels: note(notes, "flow_labels"),
        identity: note(notes, "identity"),
        via: note(notes, "via"),
    }
}

/// At most 64 characters of an upstream's label.
fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

/// What an answer was, without its content (for the `result` column):
/// its blocks by kind and size, and whether it has structured content;
/// for a tool error, the start of what it said, which the model was shown
/// anyway.
pub fn result_summary(result: &toolgate_protocol::types::CallToolResult) -> String {
    use std::fmt::Write as _;
    use toolgate_protocol::types::ContentBlock;
    // Written into one string: this runs for every relayed call.
    let mut out = String::with_capacity(48);
    if result.is_error == Some(true) {
        out.push_str("tool error: ");
    }
    match result.content.len() {
        0 => out.push_str("no content"),
        1 => out.push_str("1 block: "),
        n => {
            let _ = write!(out, "{n} blocks: ");
        }
    }
    for (i, block) in result.content.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = match block {
            ContentBlock::Text(t) => write!(out, "text ({} chars)", t.text.chars().count()),
            ContentBlock::Image(i) => write!(out, "image ({})", short(&i.mime_type)),
            ContentBlock::Audio(a) => write!(out, "audio ({})", short(&a.mime_type)),
            ContentBlock::ResourceLink(_) => write!(out, "resource link"),
            ContentBlock::EmbeddedResource(_) => write!(out, "resource"),
        };
    }
    if result.structured_content.is_some() {
        out.push_str("; structured");
    }
    if result.is_error == Some(true) {
        out.push_str(": ");
        let said = result.content.iter().find_map(|c| c.as_text());
        out.extend(said.unwrap_or_default().chars().take(160));
    }
    out
}
