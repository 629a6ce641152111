//! An endpoint's fixed parameters as a stage: the values the model never
//! sees are put into the arguments before anything else looks at them,
//! so the policy, the person asked and the audit store all see the call
//! as it is forwarded. A call that supplies one itself is refused.
//!
//! Layer: `call`.

use std::sync::Arc;

use serde_json::{Map, Value};
use toolgate_protocol::quote::quote;

use super::{Call, Reply, Stage};

/// Puts an endpoint's fixed parameters into each call.
pub struct Shape<S> {
    fixed: Option<Arc<Map<String, Value>>>,
    inner: S,
}

impl<S> Shape<S> {
    /// The stage of `fixed` (none: the call passes straight on), around
    /// `inner`.
    pub fn new(fixed: Option<Arc<Map<String, Value>>>, inner: S) -> Self {
        Self {
            fixed: fixed.filter(|f| !f.is_empty()),
            inner,
        }
    }
}

impl<S: Stage> Stage for Shape<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        if self.fixed.is_some() {
            out.push("fixed parameters");
        }
        self.inner.names(out);
    }

    async fn handle(&self, mut call: Box<Call>) -> Reply {
        let Some(fixed) = &self.fixed else {
            return self.inner.handle(call).await;
        };
        // The value is not said: the model was never shown it.
        if let Some(name) = fixed.keys().find(|k| call.args.contains_key(*k)) {
            return call.refuse(
                "invalid_arguments",
                format!(
                    "The parameter {name:?} is set by this endpoint and cannot be given; call {} again without it.",
                    quote(&call.shown)
                ),
            );
        }
        for (name, value) in fixed.iter() {
            call.args.insert(name.clone(), value.clone());
        }
        call.ctx.note("forwarded", Value::Object(call.args.clone()));
        self.inner.handle(call).await
    }
}
