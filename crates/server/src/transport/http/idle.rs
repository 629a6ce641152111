//! Which HTTP/2 connections are idle, so they can be closed.
//!
//! hyper closes an HTTP/1.1 connection that sends no request within the
//! header timeout, and HTTP/2 keep-alive PINGs drop dead peers, but a live
//! HTTP/2 peer could hold a connection (and a place under
//! `max_connections`) forever without asking anything. Each connection
//! counts its open HTTP/2 streams — a response counts until its body has
//! been sent, so an open `subscriptions/listen` stream keeps its connection
//! busy — and notes when the last one ended.

use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};

/// One connection's HTTP/2 activity.
pub(super) struct Activity {
    open: AtomicUsize,
    http2: AtomicBool,
    last: Mutex<Instant>,
}

impl Activity {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            open: AtomicUsize::new(0),
            http2: AtomicBool::new(false),
            last: Mutex::new(Instant::now()),
        })
    }

    /// An HTTP/2 stream began; it ends when the guard is dropped.
    pub(super) fn stream(self: &Arc<Self>) -> StreamGuard {
        self.http2.store(true, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::AcqRel);
        StreamGuard(self.clone())
    }

    /// How long an HTTP/2 connection has had no open stream (`None` while
    /// one is open, or for a connection that never spoke HTTP/2).
    pub(super) fn idle_for(&self) -> Option<Duration> {
        if !self.http2.load(Ordering::Relaxed) || self.open.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.last.lock().elapsed())
    }
}

/// Marks a stream open until dropped.
pub(super) struct StreamGuard(Arc<Activity>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        *self.0.last.lock() = Instant::now();
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its stream counted until it is done.
pub(super) struct Guarded {
    pub(super) inner: Body,
    pub(super) _guard: StreamGuard,
}

impl hyper::body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_http2_connection_without_open_streams_is_idle() {
        let activity = Activity::new();
        assert_eq!(activity.idle_for(), None, "HTTP/1 is left to hyper");
        let stream = activity.stream();
        assert_eq!(activity.idle_for(), None, "a stream is open");
        drop(stream);
        assert!(activity.idle_for().is_some());
    }
}
