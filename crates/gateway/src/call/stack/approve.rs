//! The policy and a person as a stage: the guard's verdict on this round
//! (allow, deny, or a person's approval on a form or the page), made
//! stricter by what the call's flow holds it to.
//!
//! Layer: `call`.

use std::sync::Arc;

use super::{Call, Reply, Stage, refusal};
use crate::call::guard::{Admission, Guard};

/// Passes a call the policy allows or a person approved.
pub struct Approve<S> {
    guard: Arc<Guard>,
    inner: S,
}

impl<S> Approve<S> {
    /// The stage of `guard`, around `inner`.
    pub fn new(guard: Arc<Guard>, inner: S) -> Self {
        Self { guard, inner }
    }
}

impl<S: Stage> Stage for Approve<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        out.push("policy and approval");
        self.inner.names(out);
    }

    async fn handle(&self, mut call: Box<Call>) -> Reply {
        let admission = match self.guard.admit_now(&call.ctx, call.hold.as_ref()) {
            Some(now) => now,
            // Boxed: asking a person is a large future that an allowed
            // call's state would otherwise carry, and copy at each stage.
            None => {
                let Call {
                    ctx,
                    input,
                    args,
                    hold,
                    ..
                } = &mut *call;
                Box::pin(self.guard.admit(ctx, input, args, hold.as_ref())).await?
            }
        };
        match admission {
            Admission::Forward { carry } => {
                call.carry = carry;
                self.inner.handle(call).await
            }
            // The guard noted why.
            Admission::Refuse(text) => Ok(refusal(text)),
        }
    }
}
