//! Rate limits as stages: the caller's budget of calls per minute shared
//! by instances (in Redis), and the upstream's, shared by all its callers.
//!
//! Layer: `call`.

use std::sync::Arc;

use toolgate_protocol::quote::quote;

use super::{Call, Reply, Stage};
use crate::store::limits::{SharedLimits, Verdict, seconds};

/// Take a call from the shared budget `key` of `per_minute`; `Err` with
/// the status and text when it is spent, or when Redis cannot say (fail
/// closed unless `on_outage = "allow"`).
async fn take(
    limits: &Arc<dyn SharedLimits>,
    key: &str,
    per_minute: u32,
    what: impl FnOnce() -> String,
) -> Result<(), (&'static str, String)> {
    match limits
        .clone()
        .check(
            key.to_owned(),
            per_minute,
            std::time::Duration::from_secs(60),
        )
        .await
    {
        Ok(Verdict::Allowed) => Ok(()),
        Ok(Verdict::Wait(wait)) => Err((
            "rate_limited",
            format!(
                "Rate limit reached: {}. Try again in {} s.",
                what(),
                seconds(wait)
            ),
        )),
        Err(e) if limits.allows_on_outage() => {
            tracing::warn!(error = %e, "rate limits cannot be checked; letting the call through (on_outage = \"allow\")");
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "rate limits cannot be checked; refusing the call");
            Err((
                "failed",
                "The gateway cannot check its rate limits right now, so the call was not forwarded. Try again shortly.".to_owned(),
            ))
        }
    }
}

/// At most `per_minute` calls of the tool per caller, counted across
/// instances (`[ratelimit] redis` with a per-tool limit); without one, the
/// call passes straight on.
pub struct CallerLimit<S> {
    limit: Option<(Arc<dyn SharedLimits>, u32)>,
    inner: S,
}

impl<S> CallerLimit<S> {
    /// The caller's limit of `per_minute` kept in its store, around `inner`.
    pub fn new(limit: Option<(Arc<dyn SharedLimits>, u32)>, inner: S) -> Self {
        Self { limit, inner }
    }
}

impl<S: Stage> Stage for CallerLimit<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        if self.limit.is_some() {
            out.push("caller rate limit");
        }
        self.inner.names(out);
    }

    async fn handle(&self, call: Box<Call>) -> Reply {
        if let Some((limits, per_minute)) = &self.limit {
            let per_minute = *per_minute;
            let key = format!("call:{}:{}", call.tool, call.caller().unwrap_or_default());
            // Boxed: only shared limits carry the store's future.
            if let Err((status, text)) = Box::pin(take(limits, &key, per_minute, || {
                format!(
                    "at most {per_minute} calls per minute for each caller to {}",
                    quote(&call.tool)
                )
            }))
            .await
            {
                return call.refuse(status, text);
            }
        }
        self.inner.handle(call).await
    }
}

/// The upstream's `per_minute`: in the shared store when limits are
/// shared, else in this process. Passed only by calls that will be sent.
pub struct UpstreamLimit<S> {
    shared: Option<Arc<dyn SharedLimits>>,
    inner: S,
}

impl<S> UpstreamLimit<S> {
    /// The upstream's limit, in `shared` when given, around `inner`.
    pub fn new(shared: Option<Arc<dyn SharedLimits>>, inner: S) -> Self {
        Self { shared, inner }
    }
}

impl<S: Stage> Stage for UpstreamLimit<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        out.push("upstream rate limit");
        self.inner.names(out);
    }

    async fn handle(&self, call: Box<Call>) -> Reply {
        let server = &call.upstream.config.name;
        let taken = match (&self.shared, call.upstream.config.per_minute) {
            (Some(limits), Some(per_minute)) => {
                let key = format!("upstream:{server}");
                Box::pin(take(limits, &key, per_minute, || {
                    format!("the upstream server {server} takes at most {per_minute} calls per minute through this gateway, from all callers together")
                }))
                .await
            }
            _ => call
                .upstream
                .take_budget()
                .map_err(|limited| ("rate_limited", limited.0)),
        };
        if let Err((status, text)) = taken {
            return call.refuse(status, text);
        }
        self.inner.handle(call).await
    }
}
