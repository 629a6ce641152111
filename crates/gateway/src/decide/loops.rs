//! Loop breaking: a model that keeps retrying a failing call is stopped.
//!
//! Execution errors go back to the model so it can correct itself, which is
//! also how a model stuck on one failing call burns calls, money and rate
//! budget. With `[loops]`, the gateway counts each caller's failures of a
//! tool — with the same arguments (by their canonical digest), and with
//! any — within a window; past the limit, the next such call is not
//! forwarded: an `isError` tells the model plainly to stop, what failed
//! last, and to ask the user or change approach (recorded as `loop`). A
//! success of the call (or, for the tool's count, of any call of the
//! tool) or the window's end resets the count.
//!
//! Counts live in this process: a restart, or another instance, starts
//! them afresh (each instance stops a loop within its own limit).
//!
//! Layer: `decide`.

use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use toolgate_protocol::quote::quote;

use crate::config::ConfigError;
pub use crate::config::LoopsConfig;

/// Callers and tools followed at most; the least recently failing are
/// forgotten first (a flood of distinct calls cannot grow the table).
const MAX_FOLLOWED: usize = 10_000;

/// Statuses that count as a failure of the call.
const FAILURES: &[&str] = &["tool_error", "upstream_error", "timeout", "output_invalid"];

/// Failed attempts, with what the last one said.
#[derive(Default)]
struct Failures {
    at: VecDeque<Instant>,
    last: String,
}

impl Failures {
    fn within(&mut self, window: Duration, now: Instant) -> usize {
        while self
            .at
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            self.at.pop_front();
        }
        self.at.len()
    }

    fn add(&mut self, now: Instant, what: &str) {
        self.at.push_back(now);
        // The counts never need more than the largest limit.
        if self.at.len() > 1024 {
            self.at.pop_front();
        }
        self.last = what.chars().take(300).collect();
    }
}

/// One caller's failures of one tool.
#[derive(Default)]
struct Followed {
    any: Failures,
    by_arguments: HashMap<String, Failures>,
    touched: Option<Instant>,
}

struct Limits {
    identical: Option<u32>,
    tool: Option<u32>,
    window: Duration,
}

/// The counts, and the limits they are held to.
pub struct Loops {
    limits: RwLock<Limits>,
    followed: Mutex<HashMap<(Option<String>, String), Followed>>,
}

fn limits(config: &LoopsConfig) -> Result<Limits, ConfigError> {
    Ok(Limits {
        window: config.checked_window()?,
        identical: config.identical_failures,
        tool: config.tool_failures,
    })
}

/// `10 minutes`, `90 seconds`, `1 hour`.
fn span(d: Duration) -> String {
    crate::base::duration::the_next(d)
        .trim_start_matches("the next ")
        .to_owned()
}

impl Loops {
    /// Counts held to `config` (checked: a bad window or a zero limit is
    /// an error naming it).
    pub fn new(config: &LoopsConfig) -> Result<Self, ConfigError> {
        Ok(Self {
            limits: RwLock::new(limits(config)?),
            followed: Mutex::default(),
        })
    }

    /// Hold the counts to a new `config` (a reload); counts are kept.
    pub fn configure(&self, config: &LoopsConfig) -> Result<(), ConfigError> {
        let new = limits(config)?;
        *self.limits.write() = new;
        Ok(())
    }

    /// Whether any limit is set (else nothing is counted).
    pub fn is_on(&self) -> bool {
        let l = self.limits.read();
        l.identical.is_some() || l.tool.is_some()
    }

    /// The refusal of this call, when it would go round the loop again.
    pub fn check(&self, caller: Option<&str>, tool: &str, digest: &str) -> Option<String> {
        if !self.is_on() {
            return None;
        }
        let (identical, tool_limit, window) = {
            let l = self.limits.read();
            (l.identical, l.tool, l.window)
        };
        let now = Instant::now();
        let mut followed = self.followed.lock();
        let f = followed.get_mut(&(caller.map(str::to_owned), tool.to_owned()))?;
        let name = quote(tool);
        if let (Some(limit), Some(same)) = (identical, f.by_arguments.get_mut(digest)) {
            let n = same.within(window, now);
            if n >= limit as usize {
                return Some(format!(
                    "Stopped: this exact call of {name} failed {n} times in the last {} (last time: {}), so the gateway did not send it again. Do not retry it with the same arguments: tell the user what failed and ask how to go on, or change the approach.",
                    span(window),
                    same.last
                ));
            }
        }
        if let Some(limit) = tool_limit {
            let n = f.any.within(window, now);
            if n >= limit as usize {
                return Some(format!(
                    "Stopped: calls of {name} failed {n} times in the last {} (last time: {}), so the gateway did not send this one. Stop calling {name} for now: tell the user what failed and ask how to go on, or use another approach.",
                    span(window),
                    f.any.last
                ));
            }
        }
        None
    }

    /// Count how a call ended: `status` as the audit store records it,
    /// `what` the text the model was given when it failed.
    pub fn observe(
        &self,
        caller: Option<&str>,
        tool: &str,
        digest: &str,
        status: &str,
        what: Option<&str>,
    ) {
        if !self.is_on() {
            return;
        }
        let key = (caller.map(str::to_owned), tool.to_owned());
        let mut followed = self.followed.lock();
        if status == "ok" {
            if let Some(f) = followed.get_mut(&key) {
                f.by_arguments.remove(digest);
                f.any = Failures::default();
            }
            return;
        }
        if !FAILURES.contains(&status) {
            return;
        }
        if followed.len() >= MAX_FOLLOWED && !followed.contains_key(&key) {
            let stalest = followed
                .iter()
                .min_by_key(|(_, f)| f.touched)
                .map(|(k, _)| k.clone());
            if let Some(stalest) = stalest {
                followed.remove(&stalest);
            }
        }
        let now = Instant::now();
        let what = what.map_or_else(|| status.replace('_', " "), str::to_owned);
        let f = followed.entry(key).or_default();
        f.touched = Some(now);
        f.any.add(now, &what);
        if f.by_arguments.len() >= MAX_FOLLOWED {
            f.by_arguments.clear();
        }
        f.by_arguments
            .entry(digest.to_owned())
            .or_default()
            .add(now, &what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loops(text: &str) -> Loops {
        Loops::new(&toml::from_str(text).unwrap()).unwrap()
    }

    #[test]
    fn the_same_failing_call_is_stopped_at_the_limit_and_reset_by_a_success() {
        let l = loops("identical_failures = 3\n");
        for _ in 0..2 {
            l.observe(Some("a"), "s.t", "d1", "tool_error", Some("no such city"));
        }
        assert_eq!(l.check(Some("a"), "s.t", "d1"), None);
        l.observe(Some("a"), "s.t", "d1", "tool_error", Some("no such city"));
        assert_eq!(
            l.check(Some("a"), "s.t", "d1").unwrap(),
            "Stopped: this exact call of \"s.t\" failed 3 times in the last 10 minutes (last time: no such city), so the gateway did not send it again. Do not retry it with the same arguments: tell the user what failed and ask how to go on, or change the approach."
        );
        // Other arguments, another caller, another tool: not stopped.
        assert_eq!(l.check(Some("a"), "s.t", "d2"), None);
        assert_eq!(l.check(Some("b"), "s.t", "d1"), None);
        assert_eq!(l.check(None, "s.t", "d1"), None);
        // Refusals by the gateway are not failures of the call.
        l.observe(Some("b"), "s.t", "d1", "denied", None);
        l.observe(Some("b"), "s.t", "d1", "loop", None);
        assert_eq!(l.check(Some("b"), "s.t", "d1"), None);
        l.observe(Some("a"), "s.t", "d1", "ok", None);
        assert_eq!(l.check(Some("a"), "s.t", "d1"), None);
    }

    #[test]
    fn a_tool_failing_with_any_arguments_is_stopped_for_that_caller() {
        let l = loops("tool_failures = 2\nwindow = \"1h\"\n");
        l.observe(Some("a"), "s.t", "d1", "timeout", None);
        l.observe(Some("a"), "s.t", "d2", "upstream_error", Some("it crashed"));
        let said = l.check(Some("a"), "s.t", "d3").unwrap();
        assert!(
            said.starts_with(
                "Stopped: calls of \"s.t\" failed 2 times in the last hour (last time: it crashed)"
            ),
            "{said}"
        );
        assert_eq!(l.check(Some("a"), "s.u", "d3"), None);
        l.observe(Some("a"), "s.t", "d9", "ok", None);
        assert_eq!(l.check(Some("a"), "s.t", "d3"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_older_than_the_window_no_longer_count() {
        let l = loops("identical_failures = 1\nwindow = \"90s\"\n");
        l.observe(None, "s.t", "d", "tool_error", None);
        assert!(
            l.check(None, "s.t", "d")
                .unwrap()
                .contains("(last time: tool error)")
        );
        tokio::time::advance(Duration::from_secs(91)).await;
        assert_eq!(l.check(None, "s.t", "d"), None);
    }

    #[test]
    fn off_by_default_and_bad_settings_are_named() {
        let l = loops("");
        l.observe(None, "s.t", "d", "tool_error", None);
        assert_eq!(l.check(None, "s.t", "d"), None);
        let bad = |text: &str| {
            Loops::new(&toml::from_str(text).unwrap())
                .err()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            bad("identical_failures = 0\n"),
            "[loops] identical_failures must be at least 1 (leave it out to not count)"
        );
        assert!(
            bad("window = \"soon\"\n").starts_with("[loops] window: \"soon\" is not a duration")
        );
    }
}
