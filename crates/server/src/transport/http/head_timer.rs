//! The HTTP/1 header-read deadline of one connection, kept without a timer
//! per request.
//!
//! hyper closes a connection whose next request head does not arrive within
//! `header_timeout` (the slowloris guard; it also closes idle keep-alive
//! connections). It asks its timer for a fresh sleep every time it starts
//! reading a head, so with tokio's timer every request registered an entry
//! in the timer wheel and removed it again: about 4 % of the server's time
//! at 32 connections. Here the sleep only notes its deadline in atomics
//! shared with the connection's watcher task, which already wakes
//! periodically; the watcher expires a deadline that has passed and wakes
//! hyper, which then closes the connection as before. The cost is
//! precision: a head that is late is refused at the watcher's next check,
//! at most a quarter of `header_timeout` after its deadline.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::task::AtomicWaker;
use hyper::rt::{Sleep, Timer};

/// No head is being read.
const NONE: u64 = 0;
/// The head being read is late: its sleep is (or becomes) ready.
const EXPIRED: u64 = u64::MAX;

/// One connection's header-read deadline, shared by hyper's sleep and the
/// connection's watcher.
#[derive(Debug)]
pub(super) struct HeadClock {
    base: Instant,
    /// Nanoseconds after `base`, `NONE` or `EXPIRED`.
    deadline: AtomicU64,
    waker: AtomicWaker,
}

impl HeadClock {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            deadline: AtomicU64::new(NONE),
            waker: AtomicWaker::new(),
        })
    }

    fn ticks(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.base).as_nanos();
        // Never NONE (0) nor EXPIRED: a deadline at the very start is one
        // nanosecond late, and one centuries away is capped.
        u64::try_from(nanos)
            .unwrap_or(EXPIRED - 1)
            .clamp(1, EXPIRED - 1)
    }

    /// Expire the head being read if its deadline is before `now`, waking
    /// hyper so that it closes the connection. Returns whether it did.
    pub(super) fn expire_if_due(&self, now: Instant) -> bool {
        let deadline = self.deadline.load(Ordering::Acquire);
        if deadline == NONE || deadline == EXPIRED || self.ticks(now) < deadline {
            return false;
        }
        // Only the sleep that set this deadline is expired: if hyper has
        // meanwhile dropped it (the head came) the exchange fails.
        let expired = self
            .deadline
            .compare_exchange(deadline, EXPIRED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if expired {
            self.waker.wake();
        }
        expired
    }
}

/// The timer hyper's HTTP/1 side is given for one connection: its sleeps
/// are that connection's header-read deadline.
#[derive(Clone, Debug)]
pub(super) struct HeadTimer(pub(super) Arc<HeadClock>);

impl Timer for HeadTimer {
    fn sleep(&self, duration: std::time::Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let clock = self.0.clone();
        clock
            .deadline
            .store(clock.ticks(deadline), Ordering::Release);
        Box::pin(HeadSleep { clock })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        // Rearmed in place: replacing it would drop the old sleep after the
        // new one set its deadline, and the drop would clear it.
        if sleep.as_mut().downcast_mut_pin::<HeadSleep>().is_some() {
            self.0
                .deadline
                .store(self.0.ticks(new_deadline), Ordering::Release);
        } else {
            *sleep = self.sleep_until(new_deadline);
        }
    }
}

/// A header-read deadline as hyper holds it. hyper keeps at most one per
/// HTTP/1 connection, which is what lets the deadline live in the clock.
struct HeadSleep {
    clock: Arc<HeadClock>,
}

impl std::future::Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let clock = &self.clock;
        if clock.deadline.load(Ordering::Acquire) == EXPIRED {
            return Poll::Ready(());
        }
        clock.waker.register(cx.waker());
        // Expired between the look and the registration: the wake may have
        // found no waker.
        if clock.deadline.load(Ordering::Acquire) == EXPIRED {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Sleep for HeadSleep {}

impl Drop for HeadSleep {
    fn drop(&mut self) {
        self.clock.deadline.store(NONE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;
    use std::time::Duration;

    /// A connection's clock, the timer hyper would be given, and now.
    fn clock() -> (Arc<HeadClock>, HeadTimer, Instant) {
        let clock = HeadClock::new();
        (clock.clone(), HeadTimer(clock), Instant::now())
    }

    /// `sleep` is not expired `early` seconds after `start` and stays
    /// pending; it is `late` seconds after, and is then ready.
    fn expires_between(
        clock: &HeadClock,
        sleep: &mut Pin<Box<dyn Sleep>>,
        start: Instant,
        early: u64,
        late: u64,
    ) {
        assert!(!clock.expire_if_due(start + Duration::from_secs(early)));
        assert!(poll(sleep).is_pending());
        assert!(clock.expire_if_due(start + Duration::from_secs(late)));
        assert!(poll(sleep).is_ready());
    }

    fn poll(sleep: &mut Pin<Box<dyn Sleep>>) -> Poll<()> {
        sleep.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_sleep_is_ready_once_the_watcher_finds_its_deadline_passed() {
        let (clock, timer, start) = clock();
        let mut sleep = timer.sleep_until(start + Duration::from_secs(10));
        assert!(poll(&mut sleep).is_pending());
        expires_between(&clock, &mut sleep, start, 9, 11);
    }

    #[test]
    fn a_dropped_sleep_leaves_nothing_to_expire() {
        let (clock, timer, start) = clock();
        drop(timer.sleep_until(start + Duration::from_secs(1)));
        assert!(!clock.expire_if_due(start + Duration::from_secs(60)));
    }

    #[test]
    fn a_reset_sleep_keeps_its_new_deadline() {
        let (clock, timer, start) = clock();
        let mut sleep = timer.sleep_until(start + Duration::from_secs(1));
        timer.reset(&mut sleep, start + Duration::from_secs(30));
        expires_between(&clock, &mut sleep, start, 20, 31);
    }

    #[test]
    fn expiry_wakes_the_task_that_polled() {
        use std::sync::atomic::AtomicBool;
        struct Flag(AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let (clock, timer, start) = clock();
        let mut sleep = timer.sleep_until(start + Duration::from_secs(1));
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        assert!(
            sleep
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert!(clock.expire_if_due(start + Duration::from_secs(2)));
        assert!(flag.0.load(Ordering::SeqCst), "hyper was not woken");
    }
}
