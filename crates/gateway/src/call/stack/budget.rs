//! Budgets as a stage: a call's cost is reserved before anyone is asked or
//! anything sent, so calls sent together cannot all fit into what one
//! would; and it is settled here, whichever way the rest of the stack
//! ends.
//!
//! Layer: `call`.

use std::sync::Arc;

use toolgate_server::ToolReply;

use super::{Call, Reply, Stage};
use crate::base::time::now_ms;
use crate::store::ledger::{Ledger, admit};

/// Reserves the tool's cost under its `[[budget]]`'s caps, and settles it
/// (a tool without a budget passes straight on).
pub struct Budget<S> {
    budget: Option<(Arc<crate::decide::budget::Budget>, Arc<dyn Ledger>)>,
    /// What [`Stage::names`] calls it (the global budget, or an
    /// endpoint's).
    label: &'static str,
    inner: S,
}

impl<S> Budget<S> {
    /// The stage of `budget` kept in its ledger, around `inner`, named
    /// `label`.
    pub fn new(
        label: &'static str,
        budget: Option<(Arc<crate::decide::budget::Budget>, Arc<dyn Ledger>)>,
        inner: S,
    ) -> Self {
        Self {
            budget,
            label,
            inner,
        }
    }
}

impl<S: Stage> Stage for Budget<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        if self.budget.is_some() {
            out.push(self.label);
        }
        self.inner.names(out);
    }

    async fn handle(&self, call: Box<Call>) -> Reply {
        let Some((budget, ledger)) = &self.budget else {
            return self.inner.handle(call).await;
        };
        let now = now_ms(std::time::SystemTime::now());
        // Boxed (as the other stages' store calls): only budgeted tools
        // carry a ledger's future.
        let held = match Box::pin(admit(ledger, budget, &call.tool, call.caller(), now)).await {
            Ok(held) => held,
            Err(said) => return call.refuse("over_budget", said.0),
        };
        // The reservation follows the call's own `sent`: dropped before
        // the relay sends the call (the caller went away while a person
        // was asked), it is released; after, it is charged in full.
        let held = held.watching(call.sent.clone());
        let ctx = call.ctx.clone();
        let tool = call.tool.clone();
        let reply = self.inner.handle(call).await;
        // A result charges what it cost; a question for the caller (the
        // upstream asked), a refusal, a protocol error or a failure
        // charges nothing.
        let cost = match &reply {
            Ok(ToolReply::Complete(result)) => budget.cost_of(result),
            _ => 0.0,
        };
        if cost > 0.0 {
            ctx.note("cost", cost);
        }
        if let Err(e) = held.settle(cost).await {
            tracing::warn!(%tool, error = %e, "a call's reservation was not settled; it stays reserved");
        }
        reply
    }
}
