//! The policy and a person as a stage: the guard's verdict on this round
//! (allow, deny, or a person's approval on a form or the page).
//!
//! Layer: `call`.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Call, Next, Reply, Stage, refusal};
use crate::call::guard::{Admission, Guard};

/// Passes a call the policy allows or a person approved.
pub struct Approve(pub Arc<Guard>);

impl Stage for Approve {
    fn name(&self) -> &'static str {
        "policy and approval"
    }

    fn handle<'a>(&'a self, mut call: Call, next: Next<'a>) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            match self.0.admit(&call.ctx, &mut call.input, &call.args).await? {
                Admission::Forward { carry } => {
                    call.carry = carry;
                    next.run(call).await
                }
                // The guard noted why.
                Admission::Refuse(text) => Ok(refusal(text)),
            }
        })
    }
}
