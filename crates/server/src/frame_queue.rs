//! The bounded queue that carries a request's notifications from its
//! handler to the [`Exchange`](crate::exchange::Exchange) reading them.
//!
//! Most requests never send a notification, so the queue is built to cost
//! almost nothing until used: one small allocation, no slot blocks (a tokio
//! `mpsc` channel allocates 32 slots and two cache-padded halves up front).
//! The final response never passes through it; the work returns it.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::Notify;

use crate::exchange::Frame;

/// How many notifications may wait unread: enough to absorb bursts of
/// progress without letting a slow client make the server buffer without
/// bound (a full queue makes the handler wait).
pub(crate) const CAPACITY: usize = 64;

struct Shared {
    state: Mutex<State>,
    /// Signalled when a full queue gets room, or the reader goes away.
    room: Notify,
}

#[derive(Default)]
struct State {
    frames: VecDeque<Frame>,
    reader: Option<Waker>,
    closed: bool,
}

/// The reader went away; nobody will read this frame.
#[derive(Debug)]
pub(crate) struct Closed;

/// The handler's end. Cheap to clone.
#[derive(Clone)]
pub(crate) struct FrameSender(Arc<Shared>);

/// The exchange's end. Dropping it closes the queue.
pub(crate) struct FrameReceiver(Arc<Shared>);

/// A new, empty queue.
pub(crate) fn queue() -> (FrameSender, FrameReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        room: Notify::new(),
    });
    (FrameSender(shared.clone()), FrameReceiver(shared))
}

impl FrameSender {
    /// Queue `frame`, waiting while the queue is full.
    pub(crate) async fn send(&self, frame: Frame) -> Result<(), Closed> {
        let mut frame = Some(frame);
        loop {
            // Register for "room" before looking, so a pop between the
            // look and the wait cannot be missed.
            let room = self.0.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut state = self.0.state.lock();
                if state.closed {
                    return Err(Closed);
                }
                if state.frames.len() < CAPACITY {
                    if let Some(frame) = frame.take() {
                        state.frames.push_back(frame);
                    }
                    let reader = state.reader.take();
                    drop(state);
                    if let Some(waker) = reader {
                        waker.wake();
                    }
                    return Ok(());
                }
            }
            room.await;
        }
    }
}

impl FrameReceiver {
    /// The oldest queued frame, or `Pending` (waking this task on the next).
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Frame> {
        let mut state = self.0.state.lock();
        match self.pop(&mut state) {
            Some(frame) => Poll::Ready(frame),
            None => {
                if !state
                    .reader
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    state.reader = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// The oldest queued frame, if any.
    pub(crate) fn try_recv(&self) -> Option<Frame> {
        let mut state = self.0.state.lock();
        self.pop(&mut state)
    }

    fn pop(&self, state: &mut State) -> Option<Frame> {
        let was_full = state.frames.len() >= CAPACITY;
        let frame = state.frames.pop_front()?;
        if was_full {
            self.0.room.notify_waiters();
        }
        Some(frame)
    }
}

impl Drop for FrameReceiver {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.closed = true;
        state.frames.clear();
        drop(state);
        self.0.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use super::*;

    fn note(n: u8) -> Frame {
        Frame::Notification(vec![n])
    }

    #[tokio::test]
    async fn frames_arrive_in_order() {
        let (tx, rx) = queue();
        for n in 0..3 {
            assert!(tx.send(note(n)).await.is_ok());
        }
        for n in 0..3 {
            assert_eq!(poll_fn(|cx| rx.poll_recv(cx)).await, note(n));
        }
        assert!(rx.try_recv().is_none());
    }

    async fn full_queue() -> (FrameSender, FrameReceiver) {
        let (tx, rx) = queue();
        for _ in 0..CAPACITY {
            assert!(tx.send(note(0)).await.is_ok());
        }
        (tx, rx)
    }

    #[tokio::test]
    async fn a_full_queue_makes_the_sender_wait_until_read() {
        let (tx, rx) = full_queue().await;
        let sender = tx.clone();
        let blocked = tokio::spawn(async move { sender.send(note(1)).await.is_ok() });
        tokio::task::yield_now().await;
        assert!(!blocked.is_finished(), "a full queue must hold the sender");
        assert!(rx.try_recv().is_some());
        assert!(matches!(blocked.await, Ok(true)));
        let mut last = None;
        while let Some(frame) = rx.try_recv() {
            last = Some(frame);
        }
        assert_eq!(last, Some(note(1)));
    }

    #[tokio::test]
    async fn a_dropped_reader_releases_a_waiting_sender() {
        let (tx, rx) = full_queue().await;
        let sender = tx.clone();
        let blocked = tokio::spawn(async move { sender.send(note(1)).await.is_err() });
        tokio::task::yield_now().await;
        drop(rx);
        assert!(matches!(blocked.await, Ok(true)));
        assert!(tx.send(note(2)).await.is_err());
    }

    #[tokio::test]
    async fn a_send_from_another_task_wakes_the_reader() {
        let (tx, rx) = queue();
        let sender = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            tx.send(note(9)).await.is_ok()
        });
        assert_eq!(poll_fn(|cx| rx.poll_recv(cx)).await, note(9));
        assert!(matches!(sender.await, Ok(true)));
    }
}
