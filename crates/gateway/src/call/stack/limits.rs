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

/// At most `per_minute` calls of the tool per caller, counted in the
/// gateway's limits (in Redis, across instances, with `[ratelimit] redis`;
/// else in this process, across endpoints); without a limit, the call
/// passes straight on. The file's rules count a caller's calls of a tool
/// wherever it is called from; an endpoint's own rules count those
/// through that endpoint.
pub struct CallerLimit<S> {
    /// Which rules: `None` the file's, `Some(NAME)` endpoint NAME's.
    endpoint: Option<Arc<str>>,
    limit: Option<(Arc<dyn SharedLimits>, u32)>,
    inner: S,
}

impl<S> CallerLimit<S> {
    /// The caller's limit of `per_minute` under the file's rules (or
    /// `endpoint`'s), kept in `limits`, around `inner`.
    pub fn new(
        endpoint: Option<Arc<str>>,
        limit: Option<(Arc<dyn SharedLimits>, u32)>,
        inner: S,
    ) -> Self {
        Self {
            endpoint,
            limit,
            inner,
        }
    }
}

impl<S: Stage> Stage for CallerLimit<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        if self.limit.is_some() {
            out.push(match self.endpoint {
                None => "caller rate limit",
                Some(_) => "endpoint rate limit",
            });
        }
        self.inner.names(out);
    }

    async fn handle(&self, call: Box<Call>) -> Reply {
        if let Some((limits, per_minute)) = &self.limit {
            let per_minute = *per_minute;
            let caller = call.caller().unwrap_or_default();
            let key = match &self.endpoint {
                None => format!("call:{}:{caller}", call.tool),
                Some(name) => format!("endpoint:{name}:call:{}:{caller}", call.tool),
            };
            let on = match &self.endpoint {
                None => String::new(),
                Some(name) => format!(" on endpoint {name}"),
            };
            // Boxed: only limited tools carry the store's future.
            if let Err((status, text)) = Box::pin(take(limits, &key, per_minute, || {
                format!(
                    "at most {per_minute} calls per minute for each caller to {}{on}",
                    quote(&call.shown)
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
