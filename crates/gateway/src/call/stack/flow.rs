//! Flow control as a stage: before the policy decides, what has entered the
//! call's flow may hold it (a person must approve, or it is refused); after
//! the relay answers, what the call brought in enters the flow.
//!
//! Layer: `call`.

use std::sync::Arc;
use std::time::SystemTime;

use toolgate_review::flows::FlowClass;
use toolgate_server::ToolReply;

use super::{Call, Reply, Stage};
use crate::base::time::now_ms;
use crate::decide::flows::{Flows, Label, origin};
use crate::store::flows::FlowStore;

/// What the flow stage of one tool is made of.
pub struct FlowPart {
    /// The running `[flows]`.
    pub flows: Arc<Flows>,
    /// Where labels are kept.
    pub store: Arc<dyn FlowStore>,
    /// The tool's classes.
    pub classes: Arc<[FlowClass]>,
    /// The endpoint its calls come through (empty: the default one).
    pub endpoint: Arc<str>,
}

/// Holds a call its flow forbids; labels the flow with what a call brings
/// in. A tool of no class passes straight on.
pub struct Flow<S> {
    part: Option<FlowPart>,
    inner: S,
}

impl<S> Flow<S> {
    /// The stage of `part` (none: flows are off, or the tool has no
    /// class), around `inner`.
    pub fn new(part: Option<FlowPart>, inner: S) -> Self {
        Self { part, inner }
    }
}

impl<S: Stage> Stage for Flow<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        if self.part.is_some() {
            out.push("flow control");
        }
        self.inner.names(out);
    }

    async fn handle(&self, call: Box<Call>) -> Reply {
        match &self.part {
            // Boxed: only classed tools carry the store's futures.
            Some(part) => Box::pin(through(part, call, &self.inner)).await,
            None => self.inner.handle(call).await,
        }
    }
}

/// Whether a reply brought content into the conversation: a result that
/// is not an error.
fn brought(reply: &Reply) -> bool {
    matches!(reply, Ok(ToolReply::Complete(r)) if r.is_error != Some(true))
}

async fn through<S: Stage>(part: &FlowPart, mut call: Box<Call>, inner: &S) -> Reply {
    let trace = call
        .ctx
        .meta()
        .trace
        .as_ref()
        .map(|t| t.trace_id().to_owned());
    let Some(flow) = part
        .flows
        .flow_of(call.caller(), &part.endpoint, trace.as_deref())
    else {
        return inner.handle(call).await;
    };
    call.ctx.note("flow", flow.shown.clone());
    let now = now_ms(SystemTime::now());
    if part.flows.may_hold(&part.classes) {
        match part.store.clone().labels(flow.key.clone(), now).await {
            Ok(labels) => {
                if !labels.is_empty() {
                    let mut entered: Vec<&str> = labels.iter().map(|l| l.class.label()).collect();
                    entered.sort_unstable();
                    entered.dedup();
                    call.ctx.note("flow_labels", entered.join(","));
                }
                call.hold = part.flows.decide(&call.shown, &part.classes, &labels);
                if let Some(hold) = &call.hold {
                    call.ctx.note("flow_rule", hold.rule.clone());
                }
            }
            // Fail closed: what the flow holds cannot be known.
            Err(e) => {
                tracing::error!(error = %e, "flow labels cannot be read; refusing the call");
                return call.refuse(
                    "failed",
                    "The gateway cannot read what this conversation has seen right now, so the call was not forwarded. Try again shortly.".to_owned(),
                );
            }
        }
    }
    let adds: Vec<FlowClass> = part
        .classes
        .iter()
        .copied()
        .filter(|c| matches!(c, FlowClass::Untrusted | FlowClass::Private))
        .collect();
    if adds.is_empty() {
        return inner.handle(call).await;
    }
    let from = origin(&call.args);
    let tool = call.shown.to_string();
    let reply = inner.handle(call).await;
    if brought(&reply) {
        let expires =
            now.saturating_add(i64::try_from(part.flows.window().as_millis()).unwrap_or(i64::MAX));
        for class in adds {
            let label = Label {
                class,
                tool: tool.clone(),
                time_ms: now,
                from: from.clone(),
            };
            if let Err(e) = part
                .store
                .clone()
                .add(flow.key.clone(), label, expires)
                .await
            {
                // The answer stands; the flow is unlabelled, which the log
                // must say.
                tracing::error!(error = %e, tool = %tool, "a flow label was not kept");
            }
        }
    }
    reply
}
