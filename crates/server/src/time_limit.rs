//! Time limits that cost nothing when the work finishes at once.
//!
//! Most limited work here — a request body already in the connection's
//! buffer, a tool that answers without waiting — is done on its first poll.
//! Arming a timer for it would register and cancel an entry in the
//! runtime's timer wheel on every request; [`within`] arms one only once
//! the work has had to wait, for what is left of the limit.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

/// The work did not finish within its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// Run `work` for at most `limit`; like `tokio::time::timeout`, but no
/// timer is armed for work that is ready at once.
pub(crate) async fn within<F: Future>(limit: Duration, work: F) -> Result<F::Output, Elapsed> {
    let start = tokio::time::Instant::now();
    let mut work = pin!(work);
    let first = std::future::poll_fn(|cx| match work.as_mut().poll(cx) {
        Poll::Ready(done) => Poll::Ready(Some(done)),
        Poll::Pending => Poll::Ready(None),
    })
    .await;
    match first {
        Some(done) => Ok(done),
        None => match start.checked_add(limit) {
            Some(deadline) => tokio::time::timeout_at(deadline, work)
                .await
                .map_err(|_| Elapsed),
            // A limit beyond the clock's range is no limit.
            None => Ok(work.await),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ready_work_is_not_timed_and_waiting_work_is() {
        assert_eq!(within(Duration::ZERO, async { 7 }).await, Ok(7));
        let never = std::future::pending::<()>();
        assert_eq!(within(Duration::from_secs(5), never).await, Err(Elapsed));
        // Work that waits and then finishes inside its limit is done.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waited = tokio::spawn(within(Duration::from_secs(5), rx));
        tokio::task::yield_now().await;
        let _ = tx.send(3);
        assert!(matches!(waited.await, Ok(Ok(Ok(3)))));
        // The limit counts from the start, not from the first wait.
        let slow_start = async {
            tokio::time::advance(Duration::from_secs(4)).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        };
        assert_eq!(
            within(Duration::from_secs(5), slow_start).await,
            Err(Elapsed)
        );
        assert_eq!(within(Duration::MAX, async { 1 }).await, Ok(1));
    }
}
