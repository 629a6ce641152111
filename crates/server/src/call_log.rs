//! An audit hook: every tool call, recorded before its answer is sent.
//!
//! A server given a [`CallLog`] ([`ServerBuilder::call_log`](crate::ServerBuilder::call_log))
//! hands it one [`CallRecord`] per `tools/call` that named a tool — run,
//! refused by its rate limit or by [`unlisted_answer`](crate::ServerBuilder::unlisted_answer),
//! failed validation, timed out or asked for input — and waits for
//! [`CallLog::record`] to finish before the answer leaves. A log that makes
//! its write durable before it returns therefore never loses a call whose
//! result a client received. When the write fails, the result is
//! withheld: the client gets an `isError` saying the call could not be
//! recorded.
//!
//! Handlers add their own facts to the record with
//! [`RequestContext::note`](crate::RequestContext::note) (a gateway notes
//! the upstream, the policy decision, the confirmation).
//!
//! **Writing ahead.** A handler about to do what cannot be undone (a
//! gateway forwarding the call upstream) calls
//! [`RequestContext::write_ahead`](crate::RequestContext::write_ahead):
//! the server hands [`CallLog::begin`] the record so far (outcome
//! [`CallOutcome::InFlight`]) and lets the handler go on at once, the
//! write and the work running side by side. The answer waits for that row
//! to be durable, and for the outcome, which goes to [`CallLog::record`]
//! with [`CallRecord::begun`] set, to be handed to the log, which completes
//! the row without a second sync where it can. So a call's latency is
//! about the larger of the write and the work, not their sum, and a call
//! whose answer never came (the process killed mid-call) is in the log too. A
//! log that does not write ahead (the default [`CallLog::begin`]) is
//! asked to record the outcome as before, and the answer waits for it.
//!
//! Every refusal of a tool that exists is recorded too: a hidden tool
//! (its caller is told it is unknown), missing scopes, a `requestState`
//! that was forged, moved to another request or caller, expired, or
//! replayed. Protocol errors that name no tool the server has (malformed
//! params, unknown tools) are not calls and are not recorded.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

/// How a call ended, as the server saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallOutcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError` (from the tool, or an output that broke the
    /// tool's `outputSchema`).
    ToolError,
    /// The arguments broke the tool's `inputSchema`; the tool did not run.
    InvalidArguments,
    /// Over the tool's rate limit; the tool did not run.
    RateLimited,
    /// Answered by [`unlisted_answer`](crate::ServerBuilder::unlisted_answer).
    Withheld,
    /// The tool did not finish within its timeout.
    Timeout,
    /// The round ended asking the client for input.
    InputRequired,
    /// The handler ended with a protocol error or panicked.
    Failed,
    /// A single-use round's state came back a second time; nothing ran.
    Replayed,
    /// The `requestState` was not sealed by this server, or was altered.
    Tampered,
    /// The `requestState` is genuine but belongs to another request
    /// (tool, arguments) or another caller.
    Moved,
    /// The `requestState` expired.
    Expired,
    /// The tool is hidden from this caller by its visibility rule (the
    /// caller was told it is unknown).
    Hidden,
    /// The caller lacks the scopes the tool needs.
    InsufficientScope,
    /// Written ahead ([`CallLog::begin`]): the call went on to its effect
    /// and its outcome is not known yet. A row left so after a crash is a
    /// call whose answer may or may not have reached the client.
    InFlight,
}

impl CallOutcome {
    /// `ok`, `tool_error`, `invalid_arguments`, `rate_limited`,
    /// `withheld`, `timeout`, `input_required`, `failed`, `replayed`,
    /// `tampered`, `moved`, `expired`, `hidden`, `insufficient_scope` or
    /// `in_flight`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::InvalidArguments => "invalid_arguments",
            CallOutcome::RateLimited => "rate_limited",
            CallOutcome::Withheld => "withheld",
            CallOutcome::Timeout => "timeout",
            CallOutcome::InputRequired => "input_required",
            CallOutcome::Failed => "failed",
            CallOutcome::Replayed => "replayed",
            CallOutcome::Tampered => "tampered",
            CallOutcome::Moved => "moved",
            CallOutcome::Expired => "expired",
            CallOutcome::Hidden => "hidden",
            CallOutcome::InsufficientScope => "insufficient_scope",
            CallOutcome::InFlight => "in_flight",
        }
    }
}

/// One tool call.
#[derive(Clone, Debug)]
pub struct CallRecord {
    /// When the server took the call.
    pub started: SystemTime,
    /// How long it took, up to the answer.
    pub elapsed: Duration,
    /// The tool's name.
    pub tool: String,
    /// The caller's verified subject, if any.
    pub caller: Option<String>,
    /// SHA-256 of the arguments as canonical JSON (keys sorted),
    /// base64url: the same arguments always give the same digest.
    pub arguments_digest: String,
    /// The arguments themselves, when [`CallLog::wants_arguments`].
    pub arguments: Option<Value>,
    /// How it ended.
    pub outcome: CallOutcome,
    /// What the handler noted ([`RequestContext::note`](crate::RequestContext::note)).
    pub notes: Map<String, Value>,
    /// The key [`CallLog::begin`] gave this call's row when it was written
    /// ahead: the log completes that row, and need not make the answer
    /// wait for it (the row is durable already). `None` for a call not
    /// written ahead, whose record the answer waits for.
    pub begun: Option<i64>,
}

/// The future [`CallLog::record`] returns.
pub type Recorded = Pin<Box<dyn Future<Output = Result<(), crate::BoxError>> + Send + 'static>>;

/// The future [`CallLog::begin`] returns: the key of the row written, once
/// it is durable, or `None` from a log that does not write ahead.
pub type Begun =
    Pin<Box<dyn Future<Output = Result<Option<i64>, crate::BoxError>> + Send + 'static>>;

/// Where call records go: one [`CallRecord`] per `tools/call` that reached
/// a tool, kept before its answer is sent.
///
/// A log that can write a row and complete it later implements
/// [`CallLog::begin`] too: a handler about to do what cannot be undone
/// calls [`RequestContext::write_ahead`](crate::RequestContext::write_ahead),
/// the row is written beside the work, and the answer waits only for that
/// row; the outcome then arrives at [`CallLog::record`] with
/// [`CallRecord::begun`] set.
pub trait CallLog: Send + Sync + 'static {
    /// Whether records carry the arguments (default: only their digest).
    fn wants_arguments(&self) -> bool {
        false
    }

    /// Keep `record`; the answer is sent once this resolves. `Err` withholds
    /// the result (the error is logged with its causes, not sent).
    ///
    /// When [`CallRecord::begun`] is set, the call's row was written ahead
    /// and is durable: complete it without a sync of its own if the log
    /// can (the answer waits for this future, so a second sync here gives
    /// back what writing ahead won).
    fn record(&self, record: CallRecord) -> Recorded;

    /// Write `record` (outcome [`CallOutcome::InFlight`], the notes made so
    /// far) ahead of the call's effect, and resolve with the row's key once
    /// it is durable. The server runs this beside the handler and holds
    /// the answer until it resolves. `Err` withholds the result, unless
    /// the outcome can still be recorded the ordinary way.
    ///
    /// The default writes nothing and resolves with `None`: the outcome is
    /// then recorded by [`CallLog::record`] before the answer, as for a
    /// call that was not written ahead.
    fn begin(&self, record: CallRecord) -> Begun {
        drop(record);
        Box::pin(async { Ok(None) })
    }

    /// Whether [`CallLog::begin`] writes anything. A log that only ever
    /// resolves it with `None` (metrics with no store behind them) says
    /// `false`, and the server then neither builds a record ahead nor
    /// starts the write for each call. The default is `true`, so that a log
    /// implementing `begin` is never skipped by mistake.
    fn writes_ahead(&self) -> bool {
        true
    }
}

/// A call its log refused to record ahead of its effect
/// ([`RequestContext::write_ahead`](crate::RequestContext::write_ahead)):
/// the handler must not go ahead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the call to {tool} could not be recorded ahead of its effect")]
pub struct NotRecorded {
    /// The tool called.
    pub tool: String,
}

impl NotRecorded {
    /// What the caller is told: the call was not made, and why, without
    /// the log's own error (that goes to the server's log).
    pub fn answer(&self) -> String {
        format!(
            "The call to {} was not made: the audit store cannot record calls now (the operator's log says why). Try again later.",
            toolgate_protocol::quote::quote(&self.tool)
        )
    }
}

/// The text a client gets when its call could not be recorded.
pub(crate) fn unrecorded(tool: &str) -> String {
    format!(
        "The call to {} could not be recorded in the server's audit log, so its result is withheld. Try again later; if the tool changes anything, check first whether this call took effect.",
        toolgate_protocol::quote::quote(tool)
    )
}
