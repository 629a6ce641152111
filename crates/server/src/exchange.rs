//! What a transport receives back for one incoming message.
//!
//! Dispatch answers either at once ([`Reply::Done`]) or with an [`Exchange`]:
//! a channel of [`Frame`]s, request-scoped notifications first and the final
//! response last, fed by the request's work. The work is not a task of its
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

use std::future::Future;
use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// The work behind an exchange.
pub(crate) type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A stream of frames that ends after its last one.
pub(crate) type FrameStream = Pin<Box<dyn Stream<Item = Frame> + Send>>;

/// Frames of a request still in progress. Dropping it stops the work.
pub struct Exchange {
    source: Source,
}

enum Source {
    /// Work that sends into a channel.
    Channel {
        rx: mpsc::Receiver<Frame>,
        work: Option<Work>,
        cancel: CancellationToken,
    },
    /// Work that is itself the sequence of frames.
    Stream(FrameStream),
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running = match &self.source {
            Source::Channel { work, .. } => work.is_some(),
            Source::Stream(_) => true,
        };
        f.debug_struct("Exchange")
            .field("running", &running)
            .finish_non_exhaustive()
    }
}

impl Exchange {
    /// An exchange whose `work` sends its frames into the channel `rx` reads.
    pub(crate) fn new(rx: mpsc::Receiver<Frame>, work: Work, cancel: CancellationToken) -> Self {
        Self {
            source: Source::Channel {
                rx,
                work: Some(work),
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
        let (rx, work) = match &mut self.source {
            Source::Stream(frames) => return frames.next().await,
            Source::Channel { rx, work, .. } => (rx, work),
        };
        loop {
            let Some(running) = work.as_mut() else {
                return rx.recv().await;
            };
            tokio::select! {
                biased;
                frame = rx.recv() => return frame,
                () = running => *work = None,
            }
        }
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // Signal first, so work the handler spawned itself can stop too;
        // dropping `work` then stops the handler.
        if let Source::Channel { cancel, .. } = &self.source {
            cancel.cancel();
        }
    }
}

/// Capacity of the per-request frame channel: enough to absorb bursts of
/// progress without letting a slow client make the server buffer without bound.
pub(crate) const FRAME_BUFFER: usize = 64;
