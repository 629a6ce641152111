//! What a transport receives back for one incoming message.
//!
//! Dispatch answers either at once ([`Reply::Done`]) or with an [`Exchange`]:
//! a channel of [`Frame`]s, request-scoped notifications first and the final
//! response last, fed by a task that is aborted when the exchange is dropped.
//! Dropping it is how a transport cancels: the HTTP transport drops it when
//! the client closes the response stream, stdio when `notifications/cancelled`
//! arrives.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
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

/// Frames of a request still in progress. Dropping it aborts the work.
#[derive(Debug)]
pub struct Exchange {
    rx: mpsc::Receiver<Frame>,
    task: JoinHandle<()>,
    cancel: CancellationToken,
}

impl Exchange {
    pub(crate) fn new(
        rx: mpsc::Receiver<Frame>,
        task: JoinHandle<()>,
        cancel: CancellationToken,
    ) -> Self {
        Self { rx, task, cancel }
    }

    /// The next frame; `None` once the final response was delivered or the
    /// work ended without one.
    pub async fn next(&mut self) -> Option<Frame> {
        self.rx.recv().await
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // Signal first, so work the handler spawned itself can stop too.
        self.cancel.cancel();
        self.task.abort();
    }
}

/// Capacity of the per-request frame channel: enough to absorb bursts of
/// progress without letting a slow client make the server buffer without bound.
pub(crate) const FRAME_BUFFER: usize = 64;
