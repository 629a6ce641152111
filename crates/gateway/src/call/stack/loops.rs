//! Loop breaking as a stage: a call going round a loop (`[loops]`) is
//! stopped before anyone is asked or anything is reserved.
//!
//! Layer: `call`.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Call, Next, Reply, Stage};

/// Stops a call the loop detector says goes round again.
pub struct Loops(pub Arc<crate::decide::loops::Loops>);

impl Stage for Loops {
    fn name(&self) -> &'static str {
        "loops"
    }

    fn handle<'a>(&'a self, call: Call, next: Next<'a>) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            if self.0.is_on() {
                let digest = toolgate_server::arguments_digest(&Value::Object(call.args.clone()));
                if let Some(text) = self.0.check(call.caller(), &call.tool, &digest) {
                    return call.refuse("loop", text);
                }
            }
            next.run(call).await
        })
    }
}
