//! The last stage: send the call upstream and relay it, round by round or
//! as an upstream task, to its answer.
//!
//! Layer: `call`.

use super::{Call, Reply, Stage};

/// Sends the call (marking it sent) and relays it.
pub struct Relay;

impl Stage for Relay {
    fn names(&self, out: &mut Vec<&'static str>) {
        out.push("relay");
    }

    async fn handle(&self, call: Box<Call>) -> Reply {
        let call = *call;
        // From here the upstream may do the work.
        call.sent.mark();
        let server = call.upstream.config.name.clone();
        // Boxed: the relay is by far the largest part of a call's state;
        // inline, every stage's future would hold it and each would copy
        // it when it starts the stage inside (a future moves when it is
        // built). Boxed, the stack's futures stay a few words each.
        Box::pin(crate::call::forward::relayed(
            call.upstream,
            call.upstream_tool,
            call.args,
            call.ctx,
            (call.input, call.carry),
            call.bearer,
            &server,
        ))
        .await
    }
}
