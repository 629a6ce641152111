//! The caller's identity upstream as a stage: a call of an upstream with
//! `[servers.X.identity]` gets a token obtained for its verified caller
//! (see [`crate::call::identity`]), or ends here with an `isError` that
//! says why — before the upstream's rate limit is counted, and after a
//! person approved it (nothing is exchanged for a call that is refused).
//!
//! Layer: `call`.

use super::{Call, Reply, Stage};
use crate::call::identity::SharedIdentity;

/// Obtains the token a call carries for its caller.
pub struct Identity<S> {
    identity: Option<SharedIdentity>,
    inner: S,
}

impl<S> Identity<S> {
    /// The stage of `identity` (none: calls pass straight on), around
    /// `inner`.
    pub fn new(identity: Option<SharedIdentity>, inner: S) -> Self {
        Self { identity, inner }
    }
}

impl<S: Stage> Stage for Identity<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        if self.identity.is_some() {
            out.push("caller identity");
        }
        self.inner.names(out);
    }

    async fn handle(&self, mut call: Box<Call>) -> Reply {
        let Some(identity) = &self.identity else {
            return self.inner.handle(call).await;
        };
        // Boxed: obtaining a token is a large future that the calls of
        // other upstreams' tools need not carry.
        let obtained = Box::pin(identity.token_for(call.ctx.auth(), &call.upstream_tool)).await;
        match obtained {
            Ok(obtained) => {
                call.ctx.note("identity", obtained.label);
                call.bearer = Some(obtained.bearer);
                self.inner.handle(call).await
            }
            Err(no) => {
                let text = no.text(&call.upstream.config.name);
                call.refuse(no.status(), text)
            }
        }
    }
}
