//! What happens to a call before it is forwarded: the policy decides, and
//! a person approves when it says so. (The approval is spent with the
//! single-use round that carries it.)
//!
//! Each fact of the way goes into the call's audit record
//! ([`RequestContext::note`]): `decision`, `rule`, `confirmation`, and
//! `status` when the call ends here.
//!
//! Layer: `call`.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_protocol::quote::quote;
use toolgate_protocol::types::Tool;
use toolgate_server::{
    AuthContext, ElicitAction, Inputs, RequestContext, ToolError, arguments_digest,
};

use crate::call::approvals::{Approvals, Ask};

use crate::decide::confirm::{self, Remember, Subject, Verdict};
use crate::decide::flows::Hold;
use crate::decide::grants::Grant;
use crate::decide::policy::{Action, Policy, ToolFacts};
use crate::store::GrantStore;
use crate::store::pending::Status;

/// One gateway tool's guard.
pub struct Guard {
    /// The gateway's policy.
    pub policy: Arc<Policy>,
    /// What the policy knows of the tool.
    pub facts: ToolFacts,
    /// The upstream's definition (shown to the person asked).
    pub definition: Tool,
    /// The upstream server's name.
    pub server: String,
    /// Whether that server is trusted.
    pub trusted: bool,
    /// The approval page, for clients that cannot show a form.
    pub approvals: Option<Arc<dyn Approvals>>,
    /// Where grants are kept (the audit store); without one, a rule's
    /// `remember` is not offered.
    pub grants: Option<Arc<dyn GrantStore>>,
    /// The digest of `definition` (as lock files compute it): what a
    /// grant of this tool is bound to.
    pub digest: String,
    /// The endpoint and the name the tool is called by there, on a named
    /// endpoint (said in the question to the person).
    pub called_as: Option<(String, String)>,
}

/// How strict an action is: deny over confirm over allow.
fn strictness(action: Action) -> u8 {
    match action {
        Action::Allow => 0,
        Action::Confirm => 1,
        Action::Deny => 2,
    }
}

/// The guard's verdict on this round.
pub enum Admission {
    /// Forward the call; `carry` goes with any later round.
    Forward {
        /// Kept between rounds (the approval, once spent).
        carry: Map<String, Value>,
    },
    /// End the call with this tool error (already noted).
    Refuse(String),
}

impl Admission {
    /// Forward, remembering for later rounds that a person approved.
    fn approved() -> Self {
        let mut carry = Map::new();
        carry.insert("approved".into(), Value::Bool(true));
        Admission::Forward { carry }
    }
}

impl Guard {
    /// The decision of a call the policy allows or denies outright, made
    /// at once; `None` when a person may be asked (then [`Guard::admit`]
    /// decides). Most calls end here, so a call's state never holds the
    /// asking machinery (a large future) unless it needs it.
    pub fn admit_now(&self, ctx: &RequestContext, hold: Option<&Hold>) -> Option<Admission> {
        // A call its flow holds is decided by `admit`, which asks.
        if hold.is_some() {
            return None;
        }
        let decision = self.policy.decide(&self.facts, ctx.auth());
        match decision.action {
            Action::Allow => {
                ctx.note("decision", decision.action.to_string());
                ctx.note("rule", decision.rule);
                Some(Admission::Forward { carry: Map::new() })
            }
            Action::Deny | Action::Confirm => None,
        }
    }

    /// Decide this round of a call with `args`, held by its flow to
    /// `hold` if it is. `Err` ends the round: a question for the person
    /// (`input_required`), or `-32021` when the client cannot show one.
    pub async fn admit(
        &self,
        ctx: &RequestContext,
        input: &mut Inputs,
        args: &Map<String, Value>,
        hold: Option<&Hold>,
    ) -> Result<Admission, ToolError> {
        let kept = input.remembered().cloned().unwrap_or(Value::Null);
        let mut decision = self.policy.decide(&self.facts, ctx.auth());
        // The flow makes the decision stricter, never looser; when it
        // holds a call the policy confirms anyway, the person is told why,
        // and a grant does not cover it.
        let flow = hold.filter(|h| strictness(h.action) >= strictness(decision.action));
        if let Some(h) = flow {
            decision.action = h.action;
            decision.rule = format!("flow: {}", h.rule);
            decision.remember = None;
        }
        ctx.note("decision", decision.action.to_string());
        ctx.note("rule", decision.rule.clone());
        // The tool's quoted name is only for refusals and questions, so
        // an allowed call does not build it.
        let tool = || quote(&self.facts.name);
        let refuse = |status: &str, text: String| {
            ctx.note("status", status);
            Ok(Admission::Refuse(text))
        };
        match decision.action {
            Action::Allow => Ok(Admission::Forward { carry: Map::new() }),
            Action::Deny if flow.is_some() => refuse(
                "flow_denied",
                format!(
                    "The gateway holds this call of {}: {}. It was not forwarded; tell the user, who can make the call themselves if they meant it.",
                    tool(),
                    flow.map_or("", |h| h.why.as_str())
                ),
            ),
            Action::Deny => refuse(
                "denied",
                format!(
                    "The gateway's policy denies {} to this caller ({}). It was not forwarded; ask the gateway's operator if it should be allowed.",
                    tool(),
                    decision.reason
                ),
            ),
            // Approved and spent in an earlier round of this call (the
            // upstream asked something since): sealed in the state.
            Action::Confirm if kept.get("approved") == Some(&Value::Bool(true)) => {
                ctx.note("confirmation", "approved");
                Ok(Admission::approved())
            }
            Action::Confirm => {
                let tool = tool();
                let caller = ctx.auth().and_then(AuthContext::subject);
                // A grant counts only while the policy still lets this
                // rule remember, so tightening the policy ends it.
                let grants = self.grants.as_ref().filter(|_| decision.remember.is_some());
                // A grant holds only for the tool as the person saw it:
                // same upstream, same tool there, same definition.
                let mut ended = None;
                if let Some(store) = grants {
                    match store
                        .granted(caller.map(str::to_owned), self.facts.name.clone())
                        .await
                    {
                        Ok(Some(grant)) => match grant.ended_by(self.bound()) {
                            None => {
                                ctx.note("confirmation", "granted");
                                ctx.note("grant", grant.id);
                                return Ok(Admission::approved());
                            }
                            Some(why) => {
                                tracing::info!(tool = %self.facts.name, grant = %grant.id, "{why}");
                                ctx.note("grant_ended", grant.id);
                                ended = Some(why);
                            }
                        },
                        Ok(None) => {}
                        // Without the store, the person is asked.
                        Err(e) => tracing::warn!(error = %e, "grants could not be read"),
                    }
                }
                let remember = decision
                    .remember
                    .filter(|_| grants.is_some())
                    .map(|span| Remember { span, caller });
                let subject = Subject {
                    server: &self.server,
                    tool: &self.facts.name,
                    title: self.definition.title.as_deref().or_else(|| {
                        self.definition
                            .annotations
                            .as_ref()
                            .and_then(|a| a.title.as_deref())
                    }),
                    description: self.definition.description.as_deref(),
                    destructive: self
                        .definition
                        .annotations
                        .as_ref()
                        .and_then(|a| a.destructive_hint),
                    trusted: self.trusted,
                    facts: &self.facts,
                    ended: ended.as_deref(),
                    flow: flow.map(|h| h.why.as_str()),
                    called_as: self
                        .called_as
                        .as_ref()
                        .map(|(e, n)| (e.as_str(), n.as_str())),
                };
                if !ctx.client_capabilities().supports_elicitation_form() {
                    if let Some(approvals) = &self.approvals {
                        return self
                            .by_page(
                                approvals.as_ref(),
                                ctx,
                                input,
                                &subject,
                                args,
                                remember.as_ref(),
                                &decision.rule,
                            )
                            .await;
                    }
                    // Such hosts never declare elicitation, so `-32021`
                    // would leave them no way forward: say what would.
                    let because = flow.map_or_else(String::new, |h| format!(" ({})", h.why));
                    return refuse(
                        "approval_unavailable",
                        format!(
                            "This call of {tool} needs a person's approval{because}, and this client cannot ask for one (it declares no form elicitation), so it was not forwarded. Tell the user: the gateway's operator can turn on the approval page (`[approval] page = true`) to approve calls in a browser, or allow {tool} in `[policy]`."
                        ),
                    );
                }
                // The round that carries the answer is single-use (the
                // server spends it before this runs), so an approval lets
                // one call through however often its state is re-sent.
                let asked = kept.get("asked") == Some(&Value::Bool(true));
                let Some(answer) = confirm::ask(input, &subject, args, remember.as_ref())? else {
                    ctx.note("confirmation", "asked");
                    input.remember(json!({ "asked": true }));
                    return Err(std::mem::replace(input, ctx.inputs()).ask());
                };
                let verdict = answer.verdict;
                ctx.note("confirmation", verdict.as_str());
                match verdict {
                    Verdict::Declined | Verdict::Cancelled => refuse(
                        "declined",
                        format!(
                            "The person {} the call to {tool}, so it was not forwarded. Do not call it again unless they ask for it.",
                            verdict.as_str()
                        ),
                    ),
                    // Only an answer to a question this gateway sealed
                    // counts: `inputResponses` on a first call were never asked.
                    Verdict::Approved if !asked => {
                        ctx.note("confirmation", "unsolicited");
                        refuse(
                            "declined",
                            format!(
                                "The approval sent with this call of {tool} answers no question of the gateway. Call the tool without inputResponses and let the person answer the question it asks."
                            ),
                        )
                    }
                    Verdict::Approved => {
                        if let Some(remember) = remember.as_ref().filter(|_| answer.remember) {
                            self.grant(ctx, remember, &decision.rule).await;
                        }
                        Ok(Admission::approved())
                    }
                }
            }
        }
    }

    /// The tool as a grant of it is bound to.
    fn bound(&self) -> crate::decide::grants::Bound<'_> {
        crate::decide::grants::Bound {
            upstream: &self.server,
            upstream_tool: &self.definition.name,
            digest: &self.digest,
        }
    }

    /// Keep the person's approval of this tool for this caller; the call
    /// goes through even if it cannot be kept (it was approved).
    async fn grant(&self, ctx: &RequestContext, remember: &Remember<'_>, rule: &str) {
        let Some(store) = &self.grants else { return };
        let grant = Grant::new(
            remember.caller,
            self.bound(),
            &self.facts.name,
            rule,
            remember.span,
        );
        let id = grant.id.clone();
        match store.grant(grant).await {
            Ok(()) => {
                tracing::info!(tool = %self.facts.name, grant = %id, "approved for {}", crate::base::duration::the_next(remember.span));
                ctx.note("grant", id);
            }
            Err(e) => tracing::warn!(error = %e, "the grant was not kept; this call goes through"),
        }
    }

    /// Confirmation on the approval page: the person decides there; the
    /// call (same caller, tool and arguments) goes through once after an
    /// approval. A client with URL-mode elicitation is sent to the page;
    /// any other is told to have the user open it.
    #[allow(clippy::too_many_arguments)]
    async fn by_page(
        &self,
        desk: &dyn Approvals,
        ctx: &RequestContext,
        input: &mut Inputs,
        subject: &Subject<'_>,
        args: &Map<String, Value>,
        remember: Option<&Remember<'_>>,
        rule: &str,
    ) -> Result<Admission, ToolError> {
        let tool = quote(&self.facts.name);
        let digest = arguments_digest(&Value::Object(args.clone()));
        let caller = ctx.auth().and_then(AuthContext::subject);
        let decided = async |status: Status| {
            if status == Status::Remembered
                && let Some(remember) = remember
            {
                self.grant(ctx, remember, rule).await;
            }
            if matches!(status, Status::Approved | Status::Remembered) {
                ctx.note("confirmation", "approved");
                Admission::approved()
            } else {
                ctx.note("confirmation", "declined");
                ctx.note("status", "declined");
                Admission::Refuse(format!(
                    "The person denied the call to {tool} on the approval page, so it was not forwarded. Do not call it again unless they ask for it."
                ))
            }
        };
        // When the pending approvals cannot be reached (a shared store
        // down), nothing goes through and nothing is asked.
        let unreachable = |e: crate::store::StoreError| {
            let e = toolgate_protocol::error::with_causes(&e);
            tracing::warn!(error = %e, "the pending approvals cannot be reached");
            ctx.note("status", "approval_unavailable");
            Admission::Refuse(format!(
                "This call of {tool} needs a person's approval, and the gateway cannot reach its pending approvals now, so it was not forwarded. Try again in a moment."
            ))
        };
        match desk.take(caller, &self.facts.name, &digest).await {
            Ok(Some(status)) => return Ok(decided(status).await),
            Ok(None) => {}
            Err(e) => return Ok(unreachable(e)),
        }
        let question = confirm::question(subject, args);
        let opened = match desk
            .open(Ask {
                caller: caller.map(str::to_owned),
                tool: self.facts.name.clone(),
                server: self.server.clone(),
                digest: digest.clone(),
                question,
                remember: remember.map(Remember::label),
            })
            .await
        {
            Ok(opened) => opened,
            Err(e) => return Ok(unreachable(e)),
        };
        if ctx.client_capabilities().supports_elicitation_url() {
            let message = format!(
                "The gateway needs your approval of a call to {tool}: review it on the approval page, approve or deny it there, then come back."
            );
            let Some(answer) =
                input.elicit_url(confirm::APPROVE_KEY, &message, &opened.url, &opened.id)?
            else {
                ctx.note("confirmation", "asked");
                return Err(std::mem::replace(input, ctx.inputs()).ask());
            };
            match desk.take(caller, &self.facts.name, &digest).await {
                Ok(Some(status)) => return Ok(decided(status).await),
                Ok(None) => {}
                Err(e) => return Ok(unreachable(e)),
            }
            if answer.action != ElicitAction::Accept {
                ctx.note("confirmation", "declined");
                ctx.note("status", "declined");
                return Ok(Admission::Refuse(format!(
                    "The person dismissed the approval of {tool}, so it was not forwarded. Do not call it again unless they ask for it."
                )));
            }
        }
        ctx.note("confirmation", "asked");
        ctx.note("status", "approval_pending");
        Ok(Admission::Refuse(format!(
            "This call of {tool} needs a person's approval, and it has none yet. Ask the user to review and approve it at the address below, then call {tool} again with exactly the same arguments.\n{}",
            opened.url
        )))
    }
}
