//! What a transport receives back for one incoming message.
//!
//! Dispatch answers either at once ([`Reply::Done`]) or with an [`Exchange`]:
//! a sequence of [`Frame`]s, request-scoped notifications first (through a
//! [`frame_queue`](crate::frame_queue)) and the final response last (what
//! the request's work returns). The work is not a task of its
//! own: it runs inside [`Exchange::next`], on the task of whoever reads the
//! frames (the HTTP connection, the stdio request task). That saves a spawn
//! and a cross-thread wake-up per request, and makes cancellation plain:
//! dropping the exchange drops the work. The HTTP transport drops it when
//! the client closes the response stream, stdio when
//! `notifications/cancelled` arrives.
//!
//! A long-lived exchange that produces frames itself (a subscription) is a
//! [`Stream`] instead: no channel, no request context, a few hundred bytes
//! per open stream.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio_util::sync::CancellationToken;

use crate::frame_queue::FrameReceiver;

/// One serialized message on its way to the client.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// A notification related to the request.
    Notification(Vec<u8>),
    /// The final response.
    Response {
        /// The serialized JSON-RPC response.
        body: Vec<u8>,
        /// The error code, when the response is an error (transports map it
        /// to a status).
        error_code: Option<i64>,
    },
}

impl Frame {
    /// The serialized message.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Frame::Notification(b) => b,
            Frame::Response { body, .. } => body,
        }
    }

    /// Whether this is the final response.
    pub fn is_final(&self) -> bool {
        matches!(self, Frame::Response { .. })
    }
}

/// The answer to one incoming message.
#[derive(Debug)]
pub enum Reply {
    /// Nothing to send (the message was a notification).
    Nothing,
    /// The final response, available now.
    Done(Frame),
    /// A response still being produced.
    Streaming(Exchange),
}

/// The work behind an exchange; it ends with the final response (or with
/// nothing, when it was cut short).
pub(crate) type Work = Pin<Box<dyn Future<Output = Option<Frame>> + Send>>;

/// A stream of frames that ends after its last one.
pub(crate) type FrameStream = Pin<Box<dyn Stream<Item = Frame> + Send>>;

/// Frames of a request still in progress. Dropping it stops the work.
pub struct Exchange {
    source: Source,
}

enum Source {
    /// Work that queues notifications and returns the final frame.
    Work {
        notes: FrameReceiver,
        work: Option<Work>,
        last: Option<Frame>,
        cancel: CancellationToken,
    },
    /// Work that is itself the sequence of frames.
    Stream(FrameStream),
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running = match &self.source {
            Source::Work { work, .. } => work.is_some(),
            Source::Stream(_) => true,
        };
        f.debug_struct("Exchange")
            .field("running", &running)
            .finish_non_exhaustive()
    }
}

impl Exchange {
    /// An exchange whose `work` queues notifications into `notes` and
    /// returns the final frame.
    pub(crate) fn new(notes: FrameReceiver, work: Work, cancel: CancellationToken) -> Self {
        Self {
            source: Source::Work {
                notes,
                work: Some(work),
                last: None,
                cancel,
            },
        }
    }

    /// An exchange whose frames are the items of `frames`.
    pub(crate) fn from_stream(frames: FrameStream) -> Self {
        Self {
            source: Source::Stream(frames),
        }
    }

    /// The next frame; `None` once the final response was delivered or the
    /// work ended without one. Drives the work while waiting.
    pub async fn next(&mut self) -> Option<Frame> {
        poll_fn(|cx| self.poll_frame(cx)).await
    }

    /// Polled by hand rather than through an `async` block, so that a
    /// transport holding thousands of idle exchanges holds no second copy
    /// of each one's state in a waiting future.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        let (notes, work, last) = match &mut self.source {
            Source::Stream(frames) => return frames.as_mut().poll_next(cx),
            Source::Work {
                notes, work, last, ..
            } => (notes, work, last),
        };
        loop {
            let Some(running) = work.as_mut() else {
                // Notifications queued before the work ended go first.
                return Poll::Ready(notes.try_recv().or_else(|| last.take()));
            };
            // Notifications before the end: the final response is last.
            if let Poll::Ready(frame) = notes.poll_recv(cx) {
                return Poll::Ready(Some(frame));
            }
            match running.as_mut().poll(cx) {
                Poll::Ready(end) => {
                    *work = None;
                    *last = end;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The frames of the exchange, as [`Exchange::next`] gives them.
impl Stream for Exchange {
    type Item = Frame;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        self.get_mut().poll_frame(cx)
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // Signal first, so work the handler spawned itself can stop too;
        // dropping `work` then stops the handler.
        if let Source::Work { cancel, .. } = &self.source {
            cancel.cancel();
        }
    }
}
