//! Loop breaking as a stage: a call going round a loop (`[loops]`) is
//! stopped before anyone is asked or anything is reserved.
//!
//! Layer: `call`.

use std::sync::Arc;

use serde_json::Value;

use super::{Call, Reply, Stage};

/// Stops a call the loop detector says goes round again.
pub struct Loops<S> {
    loops: Arc<crate::decide::loops::Loops>,
    inner: S,
}

impl<S> Loops<S> {
    /// The stage of `loops`, around `inner`.
    pub fn new(loops: Arc<crate::decide::loops::Loops>, inner: S) -> Self {
        Self { loops, inner }
    }
}

impl<S: Stage> Stage for Loops<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        out.push("loops");
        self.inner.names(out);
    }

    async fn handle(&self, call: Box<Call>) -> Reply {
        if self.loops.is_on() {
            let digest = toolgate_server::arguments_digest(&Value::Object(call.args.clone()));
            if let Some(text) = self.loops.check(call.caller(), &call.tool, &digest) {
                return call.refuse("loop", text);
            }
        }
        self.inner.handle(call).await
    }
}
