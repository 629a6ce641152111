//! What a handler knows about the request it serves, and how it talks back.
//!
//! A [`RequestContext`] carries the request's metadata (protocol version,
//! client capabilities, client identity), the caller's [`AuthContext`], a
//! cancellation signal, and the channel for request-scoped notifications:
//! progress (only when the client sent a `progressToken`) and log messages
//! (only at or above the client's `io.modelcontextprotocol/logLevel`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_protocol::RequestId;
use toolgate_protocol::jsonrpc::encode_notification;
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::types::{
    ClientCapabilities, LoggingLevel, LoggingMessageNotificationParams, ProgressNotificationParams,
    methods,
};

use crate::AuthContext;
use crate::exchange::Frame;
use crate::frame_queue::FrameSender;
use crate::mrtr::Inputs;
use crate::tasks::Slot;
use crate::tool::StateMap;
use crate::tool::ToolError;

/// The request-scoped view a handler gets.
#[derive(Clone)]
pub struct RequestContext {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) id: RequestId,
    pub(crate) meta: RequestMeta,
    pub(crate) auth: Option<AuthContext>,
    pub(crate) sink: FrameSender,
    pub(crate) cancel: CancellationToken,
    /// Input gathered in earlier rounds and sent with this retry.
    pub(crate) round: Round,
    /// Bits of the last progress value sent (f64), to keep progress increasing.
    last_progress: AtomicU64,
    /// Facts the handler noted for the call log, and its row written ahead.
    pub(crate) notes: Arc<parking_lot::Mutex<Noted>>,
    /// The task this call may become (tools that support tasks, called by
    /// a client that declared the extension).
    pub(crate) task: Option<Arc<Slot>>,
    /// The server's shared state (none for a detached context).
    pub(crate) states: Option<Arc<StateMap>>,
    /// The questions typed elicitation asked in this run, and the answers
    /// it used ([`RequestContext::elicit`]).
    pub(crate) inputs: parking_lot::Mutex<Option<Inputs>>,
}

/// What a call's handler gave its record: notes, and the row written
/// ahead ([`RequestContext::write_ahead`]).
#[derive(Default)]
pub(crate) struct Noted {
    notes: serde_json::Map<String, serde_json::Value>,
    ahead: Option<Ahead>,
}

/// A call that may be written ahead: where, what, and the write once begun.
pub(crate) struct Ahead {
    log: Arc<dyn crate::CallLog>,
    /// The record as far as it is known before the handler runs.
    start: crate::CallRecord,
    clock: std::time::Instant,
    begun: Option<BeginTask>,
    /// The log refused the write ahead at once.
    refused: bool,
}

/// The write ahead: done when it was begun (a log that writes at once),
/// or running beside the handler.
pub(crate) enum BeginTask {
    Done(Result<Option<i64>, crate::BoxError>),
    Running(tokio::task::JoinHandle<Result<Option<i64>, crate::BoxError>>),
}

impl Ahead {
    pub(crate) fn new(
        log: Arc<dyn crate::CallLog>,
        start: crate::CallRecord,
        clock: std::time::Instant,
    ) -> Self {
        Self {
            log,
            start,
            clock,
            begun: None,
            refused: false,
        }
    }
}

/// A client capability a handler may need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCapability {
    /// Sampling (`sampling/createMessage` input requests).
    Sampling,
    /// Form-mode elicitation.
    Elicitation,
    /// URL-mode elicitation.
    ElicitationUrl,
    /// Roots (`roots/list` input requests).
    Roots,
}

impl RequestContext {
    pub(crate) fn new(
        id: RequestId,
        meta: RequestMeta,
        auth: Option<AuthContext>,
        sink: FrameSender,
        cancel: CancellationToken,
        round: Round,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                id,
                meta,
                auth,
                sink,
                cancel,
                round,
                last_progress: AtomicU64::new(f64::NEG_INFINITY.to_bits()),
                notes: Arc::default(),
                task: None,
                states: None,
                inputs: parking_lot::Mutex::new(None),
            }),
        }
    }

    /// The same context with the server's shared state.
    pub(crate) fn with_states(self, states: Arc<StateMap>) -> Self {
        self.changed(|inner| inner.states = Some(states))
    }

    /// Shared state of type `S`, registered with
    /// [`ServerBuilder::state`](crate::ServerBuilder::state) (a clone);
    /// `None` if the server has none of that type. Handlers usually take
    /// [`State<S>`](crate::State) instead.
    pub fn state<S: Clone + Send + Sync + 'static>(&self) -> Option<S> {
        self.inner.states.as_ref()?.get::<S>()
    }

    /// The same context for a call that may become a task.
    pub(crate) fn in_task(self, slot: Arc<Slot>) -> Self {
        self.changed(|inner| inner.task = Some(slot))
    }

    /// The context for the next run of a task's handler, with the answers
    /// gathered so far.
    pub(crate) fn next_round(self, round: Round) -> Self {
        self.changed(|inner| {
            inner.round = round;
            // Questions of the last run were asked; this run asks afresh.
            inner.inputs = parking_lot::Mutex::new(None);
        })
    }

    /// This context with `change` applied: in place when nothing else holds
    /// it (fresh from `new`: no second allocation), else as a copy, so that
    /// other holders never see it change.
    fn changed(mut self, change: impl FnOnce(&mut Inner)) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => {
                change(inner);
                self
            }
            None => self.rebuilt(change),
        }
    }

    fn rebuilt(self, change: impl FnOnce(&mut Inner)) -> Self {
        let inner = &self.inner;
        let mut fresh = Inner {
            id: inner.id.clone(),
            meta: inner.meta.clone(),
            auth: inner.auth.clone(),
            sink: inner.sink.clone(),
            cancel: inner.cancel.clone(),
            round: inner.round.clone(),
            last_progress: AtomicU64::new(inner.last_progress.load(Ordering::Relaxed)),
            notes: inner.notes.clone(),
            task: inner.task.clone(),
            states: inner.states.clone(),
            inputs: parking_lot::Mutex::new(None),
        };
        change(&mut fresh);
        Self {
            inner: Arc::new(fresh),
        }
    }

    /// A context that belongs to no request, for calling handlers (or
    /// stores such as [`Handles`](crate::Handles)) directly, in tests and
    /// tools: its id is `0`, the client declared no capabilities (so it asks
    /// for no input), notifications go nowhere, and it is never cancelled.
    pub fn detached() -> Self {
        let (sink, _reader) = crate::frame_queue::queue();
        let meta = RequestMeta {
            protocol_version: toolgate_protocol::version::MODERN_VERSIONS[0].to_owned(),
            client_info: None,
            client_capabilities: ClientCapabilities::default(),
            progress_token: None,
            log_level: None,
            trace: None,
        };
        Self::new(
            RequestId::Number(0),
            meta,
            None,
            sink,
            CancellationToken::new(),
            Round::default(),
        )
    }

    /// The same context acting for `auth` (see [`RequestContext::detached`]).
    pub fn with_auth(self, auth: AuthContext) -> Self {
        self.changed(|inner| inner.auth = Some(auth))
    }

    /// Continue this call as a task, if it can be one: the tool supports
    /// tasks ([`ToolDef::task_support`](crate::ToolDef::task_support)) and
    /// the client declared the extension. The client is answered at once
    /// with the task, and this handler keeps running; what it returns
    /// becomes the task's result. `true` when the call is (now) a task;
    /// `false` when it stays in the request (the handler just goes on).
    ///
    /// Tools start their task before the handler runs, unless marked
    /// [`ToolDef::task_started_by_handler`](crate::ToolDef::task_started_by_handler):
    /// those gather their input first, synchronously, then call this.
    pub async fn run_as_task(&self) -> bool {
        match &self.inner.task {
            Some(slot) => slot.start().await.unwrap_or(false),
            None => false,
        }
    }

    /// The id of the task this call runs as, if it is one.
    pub fn task_id(&self) -> Option<&str> {
        self.inner.task.as_ref().and_then(|slot| slot.task_id())
    }

    /// The JSON-RPC id of the request.
    pub fn request_id(&self) -> &RequestId {
        &self.inner.id
    }

    /// The request's metadata.
    pub fn meta(&self) -> &RequestMeta {
        &self.inner.meta
    }

    /// The capabilities the client declared on this request.
    pub fn client_capabilities(&self) -> &ClientCapabilities {
        &self.inner.meta.client_capabilities
    }

    /// The caller's authorization, if the transport attached one.
    pub fn auth(&self) -> Option<&AuthContext> {
        self.inner.auth.as_ref()
    }

    /// Fail with `-32021 MissingRequiredClientCapability` unless the client
    /// declared `capability` on this request.
    ///
    /// ```no_run
    /// # use toolgate_server::{RequestContext, ClientCapability, ToolError};
    /// # fn f(ctx: &RequestContext) -> Result<(), ToolError> {
    /// ctx.require(ClientCapability::Sampling)?;
    /// # Ok(()) }
    /// ```
    pub fn require(&self, capability: ClientCapability) -> Result<(), ToolError> {
        let caps = self.client_capabilities();
        let (ok, required) = match capability {
            ClientCapability::Sampling => (caps.sampling.is_some(), json!({"sampling": {}})),
            ClientCapability::Elicitation => (
                caps.supports_elicitation_form(),
                json!({"elicitation": {"form": {}}}),
            ),
            ClientCapability::ElicitationUrl => (
                caps.supports_elicitation_url(),
                json!({"elicitation": {"url": {}}}),
            ),
            ClientCapability::Roots => (caps.roots.is_some(), json!({"roots": {}})),
        };
        if ok {
            Ok(())
        } else {
            Err(ToolError::protocol(
                toolgate_protocol::RpcError::missing_client_capability(required),
            ))
        }
    }

    /// Resolves when the client cancels the request (closes the HTTP stream,
    /// or sends `notifications/cancelled` on stdio). Handlers doing long work
    /// can `select!` on it; dropping the handler is the default anyway.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// The input gathered for this request (multi round-trip requests): read
    /// answers, ask for more. See [`Inputs`].
    pub fn inputs(&self) -> Inputs {
        let round = &self.inner.round;
        Inputs::new(round.responses.clone(), round.app.clone(), self.clone())
    }

    /// Add a fact to this call's record in the server's
    /// [`CallLog`](crate::CallLog) (a later note with the same key
    /// replaces it). Without a call log, notes go nowhere.
    ///
    /// ```
    /// # use toolgate_server::RequestContext;
    /// let ctx = RequestContext::detached();
    /// ctx.note("upstream", "basket");
    /// ```
    pub fn note(&self, key: &str, value: impl Into<serde_json::Value>) {
        self.inner
            .notes
            .lock()
            .notes
            .insert(key.to_owned(), value.into());
    }

    /// Write this call's record to the server's [`CallLog`](crate::CallLog)
    /// now, before the handler does what cannot be undone (a gateway
    /// forwarding the call, a tool sending the payment): the record so far,
    /// its notes included, goes to [`CallLog::begin`](crate::CallLog::begin)
    /// while the handler goes on, and the answer waits for that row to be
    /// durable instead of for a write begun after the work. If the process
    /// dies before the answer, the row says the call was in flight.
    ///
    /// Returns whether a write was started (or had been already): `false`
    /// without a call log that writes ahead
    /// ([`CallLog::writes_ahead`](crate::CallLog::writes_ahead)), for a call
    /// that runs as a task, and outside a `tools/call`. `Err` when the log
    /// refused the record at once (a log that writes as it is asked, and
    /// could not: its disk is full): the handler must not go ahead, since
    /// nothing would record that it did — answer with
    /// [`NotRecorded::answer`](crate::NotRecorded::answer) instead.
    ///
    /// ```
    /// # use toolgate_server::RequestContext;
    /// let ctx = RequestContext::detached();
    /// ctx.note("upstream", "basket");
    /// assert!(!ctx.write_ahead().unwrap(), "no call log behind a detached context");
    /// ```
    pub fn write_ahead(&self) -> Result<bool, crate::NotRecorded> {
        let mut noted = self.inner.notes.lock();
        let Noted { notes, ahead } = &mut *noted;
        let Some(ahead) = ahead.as_mut() else {
            return Ok(false);
        };
        if ahead.refused {
            return Err(crate::NotRecorded {
                tool: ahead.start.tool.clone(),
            });
        }
        if ahead.begun.is_none() {
            let mut record = ahead.start.clone();
            record.notes = notes.clone();
            record.elapsed = ahead.clock.elapsed();
            let tool = record.tool.clone();
            let mut begin = ahead.log.begin(record);
            // A log that writes as it is asked has answered already: no
            // task for it, and a refusal is known before the work begins.
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match begin.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(Err(e)) => {
                    let e = toolgate_protocol::error::with_causes(&*e);
                    tracing::error!(tool = %tool, error = %e, "call not recorded ahead; it is refused");
                    // The outcome is recorded the ordinary way (and
                    // refused there too if the log still cannot write).
                    ahead.refused = true;
                    return Err(crate::NotRecorded { tool });
                }
                std::task::Poll::Ready(done) => ahead.begun = Some(BeginTask::Done(done)),
                // Spawned so the write goes on, whatever the handler awaits next.
                std::task::Poll::Pending => {
                    ahead.begun = Some(BeginTask::Running(tokio::spawn(begin)));
                }
            }
        }
        Ok(true)
    }

    /// Make [`RequestContext::write_ahead`] write to `ahead`'s log.
    pub(crate) fn arm_write_ahead(&self, ahead: Ahead) {
        self.inner.notes.lock().ahead = Some(ahead);
    }

    /// The notes made so far, taken out.
    pub(crate) fn take_notes(&self) -> serde_json::Map<String, serde_json::Value> {
        std::mem::take(&mut self.inner.notes.lock().notes)
    }

    /// The notes made so far, the write ahead if one was started, and
    /// whether the log refused it at once.
    pub(crate) fn take_record(
        &self,
    ) -> (
        serde_json::Map<String, serde_json::Value>,
        Option<BeginTask>,
        bool,
    ) {
        let mut noted = self.inner.notes.lock();
        let ahead = noted.ahead.take();
        let refused = ahead.as_ref().is_some_and(|a| a.refused);
        let begun = ahead.and_then(|a| a.begun);
        (std::mem::take(&mut noted.notes), begun, refused)
    }

    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Whether the client asked for progress (sent a `progressToken`).
    pub fn wants_progress(&self) -> bool {
        self.inner.meta.progress_token.is_some()
    }

    /// Report progress. Does nothing when the client sent no
    /// `progressToken`; a value that does not increase is dropped, because
    /// the protocol requires progress to increase with each notification.
    ///
    /// In a task, progress becomes the task's `statusMessage` instead (the
    /// extension carries no progress notifications): `message`, or
    /// "`progress` of `total`".
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(slot) = self.inner.task.as_ref().filter(|s| s.task_id().is_some()) {
            let text = match (message, total) {
                (Some(m), _) => m.to_owned(),
                (None, Some(total)) => format!("{progress} of {total}"),
                (None, None) => format!("{progress}"),
            };
            slot.status_message(text).await;
            return;
        }
        let Some(token) = self.inner.meta.progress_token.clone() else {
            return;
        };
        let previous = f64::from_bits(self.inner.last_progress.load(Ordering::Relaxed));
        if !progress.is_finite() || progress <= previous {
            tracing::debug!(progress, previous, "dropping non-increasing progress");
            return;
        }
        self.inner
            .last_progress
            .store(progress.to_bits(), Ordering::Relaxed);
        let params = ProgressNotificationParams {
            progress_token: token,
            progress,
            total,
            message: message.map(str::to_owned),
            meta: None,
        };
        self.send(encode_notification(methods::PROGRESS, Some(&params)))
            .await;
    }

    /// Send a log message for this request, if the client asked for messages
    /// at `level` or above with `io.modelcontextprotocol/logLevel`.
    pub async fn log(&self, level: LoggingLevel, logger: Option<&str>, data: Value) {
        let Some(min) = self.inner.meta.log_level else {
            return;
        };
        if level < min {
            return;
        }
        let params = LoggingMessageNotificationParams {
            level,
            logger: logger.map(str::to_owned),
            data,
            meta: None,
        };
        self.send(encode_notification(methods::MESSAGE, Some(&params)))
            .await;
    }

    async fn send(&self, bytes: Vec<u8>) {
        if self.inner.cancel.is_cancelled() {
            return;
        }
        // A closed channel means the client went away; the handler will be
        // dropped shortly, so there is nobody to tell.
        let _ = self.inner.sink.send(Frame::Notification(bytes)).await;
    }
}

/// Answers carried into this round.
#[derive(Clone, Debug, Default)]
pub(crate) struct Round {
    pub(crate) responses: serde_json::Map<String, Value>,
    pub(crate) app: Option<Value>,
    /// The nonce this round spends before it runs (single-use rounds).
    pub(crate) once: Option<String>,
}
