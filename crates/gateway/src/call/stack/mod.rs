//! The stages a `tools/call` passes, in order (layer `call`).
//!
//! Each stage is a small type implementing [`Stage`]: it owns one decision
//! and the audit fields it writes, and either answers the call itself or
//! hands it to the rest of the stack ([`Next`]) — the way tower layers or
//! linkerd's proxy stacks compose, without `poll_ready` (no stage applies
//! back-pressure: each decides about one call) and over a [`Call`] each
//! stage may change. A stage that reserves something settles it itself,
//! on every path out of it, since the rest of the stack returns to it (or
//! is dropped inside it).
//!
//! The stack of a tool is built once per configuration, when the tool is
//! registered (a reload registers it anew), by [`Stack::for_tool`]: adding
//! a stage is one file here and one line there.

mod approve;
mod budget;
mod limits;
mod loops;
mod relay;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use toolgate_protocol::types::CallToolResult;
use toolgate_server::{Inputs, RequestContext, ToolError, ToolReply};

use crate::call::guard::Guard;
use crate::call::upstream::Upstream;
use crate::store::ledger::{Ledger, Sent};

pub use approve::Approve;
pub use budget::Budget;
pub use limits::{CallerLimit, UpstreamLimit};
pub use loops::Loops;
pub use relay::Relay;

/// How a call ends: the caller's reply, or a protocol-level error (which
/// includes the `input_required` that ends a round).
pub type Reply = Result<ToolReply, ToolError>;

/// One call of a gateway tool as it passes the stack.
pub struct Call {
    /// The downstream request.
    pub ctx: RequestContext,
    /// The gateway tool's name (`<prefix>.<tool>`).
    pub tool: Arc<str>,
    /// The upstream the call goes to.
    pub upstream: Arc<Upstream>,
    /// The tool's name there.
    pub upstream_tool: String,
    /// The arguments, validated against the tool's `inputSchema`.
    pub args: Map<String, Value>,
    /// This round's answers to questions, and where new questions go.
    pub input: Inputs,
    /// What later rounds of this call carry (a person's approval, once
    /// spent).
    pub carry: Map<String, Value>,
    /// Set by the stage that sends the call upstream: from then on, the
    /// upstream may have done the work.
    pub sent: Sent,
}

impl Call {
    /// The caller's verified subject.
    pub fn caller(&self) -> Option<&str> {
        self.ctx.auth().and_then(|a| a.subject())
    }

    /// End the call here with `text` as an `isError` result, recording
    /// `status` as its outcome.
    pub fn refuse(&self, status: &str, text: String) -> Reply {
        self.ctx.note("status", status);
        Ok(refusal(text))
    }
}

/// An `isError` result with `text`.
pub(crate) fn refusal(text: String) -> ToolReply {
    ToolReply::Complete(CallToolResult::error(text))
}

/// One step of a call's way through the gateway.
pub trait Stage: Send + Sync + 'static {
    /// What the stage is, for the stack's description.
    fn name(&self) -> &'static str;

    /// Decide `call`: answer it, or pass it on with `next.run(call)`.
    fn handle<'a>(&'a self, call: Call, next: Next<'a>) -> BoxFuture<'a, Reply>;
}

/// The rest of the stack after a stage.
pub struct Next<'a> {
    rest: &'a [Box<dyn Stage>],
}

impl<'a> Next<'a> {
    /// Pass `call` to the next stage.
    pub fn run(self, call: Call) -> BoxFuture<'a, Reply> {
        match self.rest.split_first() {
            Some((stage, rest)) => stage.handle(call, Next { rest }),
            // The last stage answers: a stack that runs out is built wrong.
            None => Box::pin(async move {
                tracing::error!(tool = %call.tool, "the call's stack ended without an answer");
                call.refuse(
                    "failed",
                    "The gateway could not handle this call (an internal fault); it was not forwarded.".to_owned(),
                )
            }),
        }
    }
}

/// A tool's stages, in order.
pub struct Stack {
    stages: Vec<Box<dyn Stage>>,
}

/// What the stages of one tool are built from.
pub struct ToolParts {
    /// The guard: policy, confirmation, approvals, grants.
    pub guard: Arc<Guard>,
    /// Rate limits in Redis, with this tool's per-caller limit (calls per
    /// minute), when `[ratelimit] redis` is set.
    pub shared: Option<(Arc<dyn crate::store::limits::SharedLimits>, Option<u32>)>,
    /// Failures counted to stop loops (`[loops]`).
    pub loops: Arc<crate::decide::loops::Loops>,
    /// The tool's `[[budget]]`, if it has one.
    pub budget: Option<Arc<crate::decide::budget::Budget>>,
    /// Where spending is kept.
    pub ledger: Arc<dyn Ledger>,
}

impl Stack {
    /// The stack of one tool, in the order a call passes it: the caller's
    /// shared rate limit first (as the embedded limiter runs before the
    /// handler), loops and budgets before anyone is asked, the person
    /// next, the upstream's own rate limit only for calls that will go,
    /// and the relay last.
    pub fn for_tool(parts: ToolParts) -> Self {
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        if let Some((limits, Some(per_minute))) = &parts.shared {
            stages.push(Box::new(CallerLimit::new(limits.clone(), *per_minute)));
        }
        stages.push(Box::new(Loops(parts.loops)));
        if let Some(budget) = parts.budget {
            stages.push(Box::new(Budget::new(budget, parts.ledger)));
        }
        stages.push(Box::new(Approve(parts.guard)));
        stages.push(Box::new(UpstreamLimit(
            parts.shared.map(|(limits, _)| limits),
        )));
        stages.push(Box::new(Relay));
        Self { stages }
    }

    /// The stages' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.stages.iter().map(|s| s.name()).collect()
    }

    /// Run `call` through the stack.
    pub fn run(&self, call: Call) -> BoxFuture<'_, Reply> {
        Next { rest: &self.stages }.run(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoopsConfig, PolicyConfig};
    use crate::decide::budget::Budgets;
    use crate::decide::policy::{Policy, ToolFacts};
    use crate::store::ledger::MemoryLedger;

    fn parts(budget: bool) -> ToolParts {
        let guard = Guard {
            policy: Arc::new(Policy::new(&PolicyConfig::default()).unwrap()),
            facts: ToolFacts::new("shop.pay", "pay", None, None, false),
            definition: serde_json::from_value(
                serde_json::json!({"name": "pay", "inputSchema": {"type": "object"}}),
            )
            .unwrap(),
            server: "shop".into(),
            trusted: false,
            approvals: None,
            grants: None,
            digest: String::new(),
        };
        let budget = budget.then(|| {
            Budgets::from_toml(
                "[[budget]]\ntools = [\"*\"]\ncost = 1\ntotal = { amount = 2, per = \"day\" }\n",
            )
            .unwrap()
            .of("shop.pay")
            .unwrap()
        });
        ToolParts {
            guard: Arc::new(guard),
            shared: None,
            loops: Arc::new(crate::decide::loops::Loops::new(&LoopsConfig::default()).unwrap()),
            budget,
            ledger: Arc::new(MemoryLedger::default()),
        }
    }

    #[test]
    fn a_call_passes_the_stages_in_order_and_only_those_its_tool_has() {
        assert_eq!(
            Stack::for_tool(parts(false)).names(),
            [
                "loops",
                "policy and approval",
                "upstream rate limit",
                "relay"
            ]
        );
        // The cost is reserved before anyone is asked, and settled by the
        // same stage after the relay answers.
        assert_eq!(
            Stack::for_tool(parts(true)).names(),
            [
                "loops",
                "budget",
                "policy and approval",
                "upstream rate limit",
                "relay"
            ]
        );
    }
}
