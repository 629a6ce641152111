//! Rate limits on tool calls, per caller and tool.
//!
//! The Tools page says servers MUST rate limit tool invocations. Each tool
//! with a limit has its own GCRA limiter (the `governor` crate) keyed by the
//! caller's subject, so one caller exhausting its budget never slows
//! another. A call over the limit is a *tool execution error*
//! (`isError: true`, HTTP 200) that says the limit and when to retry, so a
//! model can back off instead of treating it as a protocol failure.
//!
//! Callers without a subject (no authentication, or stdio without a
//! principal) share one budget per tool.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

/// `calls` per `period` for each caller, refilled evenly, with bursts of up
/// to `calls`.
///
/// ```
/// use std::time::Duration;
/// use toolgate_server::RateLimit;
/// assert_eq!(RateLimit::per_minute(60), RateLimit::new(60, Duration::from_secs(60)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls allowed per period (at least 1).
    pub calls: u32,
    /// The period (more than zero).
    pub period: Duration,
}

impl RateLimit {
    /// `calls` per `period`.
    pub fn new(calls: u32, period: Duration) -> Self {
        Self { calls, period }
    }

    /// `calls` per minute.
    pub fn per_minute(calls: u32) -> Self {
        Self::new(calls, Duration::from_secs(60))
    }

    /// Refuse a zero count or period, and a period too short to spread the
    /// calls over.
    pub(crate) fn quota(&self) -> Result<Quota, String> {
        let calls = NonZeroU32::new(self.calls)
            .ok_or("a rate limit of zero calls would refuse every call")?;
        let interval = self.period / self.calls;
        Quota::with_period(interval)
            .map(|q| q.allow_burst(calls))
            .ok_or_else(|| format!("a rate limit period of {:?} is too short", self.period))
    }
}

/// One tool's limiter.
pub(crate) struct Limiter {
    limit: RateLimit,
    limiter: DefaultKeyedRateLimiter<String>,
    checks: AtomicU64,
}

/// How often idle callers' state is dropped, in checks.
const PRUNE_EVERY: u64 = 4096;

impl Limiter {
    pub(crate) fn new(limit: RateLimit) -> Result<Self, String> {
        Ok(Self {
            limit,
            limiter: DefaultKeyedRateLimiter::keyed(limit.quota()?),
            checks: AtomicU64::new(0),
        })
    }

    /// `Ok` if `caller` may call now; else the text of the tool error.
    pub(crate) fn check(&self, tool: &str, caller: Option<&str>) -> Result<(), String> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            // Callers whose budget is full again carry no state worth keeping.
            self.limiter.retain_recent();
        }
        let key = caller.unwrap_or_default().to_owned();
        self.limiter.check_key(&key).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            // Rounded up to a tenth of a second, so "now" never shows.
            let tenths = wait.as_millis().div_ceil(100).max(1);
            format!(
                "Rate limit reached for tool {}: at most {} calls per {} for each caller. Try again in {}.{} s.",
                toolgate_protocol::quote::quote(tool),
                self.limit.calls,
                period(self.limit.period),
                tenths / 10,
                tenths % 10
            )
        })
    }
}

fn period(d: Duration) -> String {
    match d.as_secs() {
        60 => "minute".into(),
        3600 => "hour".into(),
        1 => "second".into(),
        s if d.subsec_nanos() == 0 => format!("{s} s"),
        _ => format!("{:?}", d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_has_its_own_budget() {
        let limiter = Limiter::new(RateLimit::per_minute(2)).unwrap();
        assert!(limiter.check("t", Some("alice")).is_ok());
        assert!(limiter.check("t", Some("alice")).is_ok());
        let refused = limiter.check("t", Some("alice")).unwrap_err();
        assert!(refused.starts_with("Rate limit reached for tool \"t\": at most 2 calls per minute for each caller. Try again in "), "{refused}");
        assert!(refused.ends_with(" s."), "{refused}");
        assert!(limiter.check("t", Some("bob")).is_ok());
        assert!(limiter.check("t", None).is_ok());
    }

    #[test]
    fn nonsensical_limits_are_refused() {
        assert!(RateLimit::per_minute(0).quota().is_err());
        assert!(RateLimit::new(5, Duration::ZERO).quota().is_err());
        assert!(RateLimit::new(1, Duration::from_millis(1)).quota().is_ok());
    }
}
