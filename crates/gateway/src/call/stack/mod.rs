//! The stages a `tools/call` passes, in order (layer `call`).
//!
//! Each stage is a small type implementing [`Stage`]: it owns one decision
//! and the audit fields it writes, and either answers the call itself or
//! hands it to the stage inside it — the way tower layers or linkerd's
//! proxy stacks compose: each stage is generic over the rest of the stack,
//! so a call's way through it is one state machine, with no allocation
//! per stage. A stage a tool does not need (no budget, no shared limits)
//! passes the call straight on. A stage that reserves something settles
//! it itself, on every path out of it, since the rest of the stack returns
//! to it (or is dropped inside it).
//!
//! The stack of a tool is built once per configuration, when the tool is
//! registered (a reload registers it anew), by [`Stack::for_tool`]: adding
//! a stage is one file here and one line in [`ToolStack`] and
//! [`Stack::for_tool`].
//!
//! Layer: `call`.

mod approve;
mod budget;
mod flow;
mod identity;
mod limits;
mod loops;
mod relay;
mod shape;

use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value};
use toolgate_protocol::types::CallToolResult;
use toolgate_server::{Inputs, RequestContext, ToolError, ToolReply};

use crate::call::guard::Guard;
use crate::call::upstream::Upstream;
use crate::store::ledger::{Ledger, Sent};

pub use approve::Approve;
pub use budget::Budget;
pub use flow::{Flow, FlowPart};
pub use identity::Identity;
pub use limits::{CallerLimit, UpstreamLimit};
pub use loops::Loops;
pub use relay::Relay;
pub use shape::Shape;

/// How a call ends: the caller's reply, or a protocol-level error (which
/// includes the `input_required` that ends a round).
pub type Reply = Result<ToolReply, ToolError>;

/// One call of a gateway tool as it passes the stack.
pub struct Call {
    /// The downstream request.
    pub ctx: RequestContext,
    /// The gateway tool's name (`<prefix>.<tool>`).
    pub tool: Arc<str>,
    /// The name the caller called it by (another, on an endpoint that
    /// renames it).
    pub shown: Arc<str>,
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
    /// What the call's flow holds it to (set by the flow stage): the
    /// policy and approval stage asks a person, or refuses, accordingly.
    pub hold: Option<crate::decide::flows::Hold>,
    /// The token the call carries upstream for its caller (set by the
    /// identity stage); `None`: the gateway's own credentials.
    pub bearer: Option<toolgate_client::transport::Bearer>,
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

/// One step of a call's way through the gateway, and the steps inside it.
pub trait Stage: Send + Sync + 'static {
    /// The names of the stages that are on, outermost first.
    fn names(&self, out: &mut Vec<&'static str>);

    /// Decide `call`: answer it, or pass it to the stage inside. The call
    /// is boxed: each stage's future keeps what it was given, so a call
    /// passed by value would be held (and copied) once per stage.
    fn handle(&self, call: Box<Call>) -> impl Future<Output = Reply> + Send + '_;
}

/// The stack every tool has: each stage inside the one before it.
pub type ToolStack = Shape<
    CallerLimit<CallerLimit<Loops<Budget<Budget<Flow<Approve<Identity<UpstreamLimit<Relay>>>>>>>>>,
>;

/// A tool's stages, in order.
pub struct Stack {
    stages: ToolStack,
}

/// What the stages of one tool are built from.
pub struct ToolParts {
    /// The guard: policy, confirmation, approvals, grants.
    pub guard: Arc<Guard>,
    /// Where callers' rate limits are counted: Redis with `[ratelimit]
    /// redis`, else this process.
    pub caller_limits: Arc<dyn crate::store::limits::SharedLimits>,
    /// This tool's per-caller limit under the file's `[[ratelimit.rules]]`
    /// (calls per minute).
    pub per_minute: Option<u32>,
    /// Its per-caller limit under the rules of the endpoint the call came
    /// through: the endpoint's name and the calls per minute.
    pub endpoint_limit: Option<(Arc<str>, u32)>,
    /// Rate limits shared by instances (`[ratelimit] redis`), where the
    /// upstream's `per_minute` is counted too; else it is counted in the
    /// upstream.
    pub shared: Option<Arc<dyn crate::store::limits::SharedLimits>>,
    /// Failures counted to stop loops (`[loops]`).
    pub loops: Arc<crate::decide::loops::Loops>,
    /// The tool's `[[budget]]`, if it has one.
    pub budget: Option<Arc<crate::decide::budget::Budget>>,
    /// Its budget on the endpoint the call came through, if that has one.
    pub endpoint_budget: Option<Arc<crate::decide::budget::Budget>>,
    /// The values of the parameters the endpoint fixes.
    pub fixed: Option<Arc<Map<String, Value>>>,
    /// Flow control, when flows are on and the tool has a class.
    pub flow: Option<FlowPart>,
    /// Where spending is kept.
    pub ledger: Arc<dyn Ledger>,
    /// The caller's identity at the tool's upstream, when it has one.
    pub identity: Option<crate::call::identity::SharedIdentity>,
    /// Linked accounts (the connect page, the store, the keys), when the
    /// gateway has them.
    pub linking: Option<Arc<crate::call::linked::Linking>>,
}

impl Stack {
    /// The stack of one tool, in the order a call passes it: an
    /// endpoint's fixed parameters put in first (everything after sees the
    /// call as forwarded), the caller's rate limits next (the file's, then
    /// the endpoint's), loops and budgets before anyone is asked, the person
    /// next, then — only for calls that will go — the caller's token at the
    /// upstream and the upstream's own rate limit, and the relay last.
    pub fn for_tool(parts: ToolParts) -> Self {
        let caller_limit = parts.per_minute.map(|n| (parts.caller_limits.clone(), n));
        let (endpoint, endpoint_limit) = match parts.endpoint_limit {
            Some((name, n)) => (Some(name), Some((parts.caller_limits.clone(), n))),
            None => (None, None),
        };
        let upstream_limit = parts.shared;
        let budget = parts.budget.map(|b| (b, parts.ledger.clone()));
        let endpoint_budget = parts.endpoint_budget.map(|b| (b, parts.ledger));
        let approve = Flow::new(
            parts.flow,
            Approve::new(
                parts.guard,
                Identity::new(
                    parts.identity,
                    parts.linking,
                    UpstreamLimit::new(upstream_limit, Relay),
                ),
            ),
        );
        Self {
            stages: Shape::new(
                parts.fixed,
                CallerLimit::new(
                    None,
                    caller_limit,
                    CallerLimit::new(
                        endpoint,
                        endpoint_limit,
                        Loops::new(
                            parts.loops,
                            Budget::new(
                                "budget",
                                budget,
                                Budget::new("endpoint budget", endpoint_budget, approve),
                            ),
                        ),
                    ),
                ),
            ),
        }
    }

    /// The names of the stages that are on, in order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        self.stages.names(&mut out);
        out
    }

    /// Run `call` through the stack.
    pub fn run(&self, call: Call) -> impl Future<Output = Reply> + Send + '_ {
        self.stages.handle(Box::new(call))
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
            called_as: None,
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
            caller_limits: Arc::new(crate::store::limits_memory::MemoryLimits::default()),
            per_minute: None,
            endpoint_limit: None,
            shared: None,
            loops: Arc::new(crate::decide::loops::Loops::new(&LoopsConfig::default()).unwrap()),
            budget,
            endpoint_budget: None,
            fixed: None,
            flow: None,
            ledger: Arc::new(MemoryLedger::default()),
            identity: None,
            linking: None,
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
        // Rate limits: the file's, then the endpoint's, before anything
        // else is counted.
        let mut limited = parts(false);
        limited.per_minute = Some(10);
        limited.endpoint_limit = Some(("coding".into(), 5));
        assert_eq!(
            Stack::for_tool(limited).names()[..3],
            ["caller rate limit", "endpoint rate limit", "loops"]
        );
    }
}
