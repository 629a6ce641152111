//! Reading `text/event-stream` bodies: events with their `id` and `retry`
//! fields, comments skipped, every buffer bounded.
//!
//! Lines end with CR, LF or CRLF, as the SSE format allows (a CRLF split
//! across two chunks counts once). The buffer is scanned incrementally: each
//! byte is looked at once however the body is chunked, so a long line
//! arriving a byte at a time costs linear, not quadratic, time.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf as _, BytesMut};
use futures::{Stream, StreamExt as _};

use crate::ClientError;
use crate::transport::Limits;

/// One dispatched event.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Event {
    /// The `data` lines, joined with newlines (may be empty: a priming event).
    pub(super) data: String,
    /// Its `event` type, when it named one (the default is `message`).
    pub(super) kind: Option<String>,
}

/// What the stream told us beyond events.
#[derive(Debug, Default)]
pub(super) struct Cursor {
    /// The last event id seen (for `Last-Event-ID` on resumption).
    pub(super) last_id: Option<String>,
    /// The reconnection delay the server asked for, capped by
    /// [`Limits::max_retry_delay`].
    pub(super) retry: Option<Duration>,
}

/// Incremental SSE parser over a byte stream.
pub(super) struct Events<S> {
    body: S,
    buffer: BytesMut,
    /// How much of `buffer` is known to hold no line ending.
    scanned: usize,
    /// The last line ended with CR: an LF right after it belongs to it.
    after_cr: bool,
    data: String,
    has_data: bool,
    kind: Option<String>,
    events: usize,
    /// Events allowed on this stream.
    max_events: usize,
    limits: Limits,
    server: Arc<str>,
}

impl<S, E> Events<S>
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    pub(super) fn new(body: S, limits: &Limits, server: Arc<str>) -> Self {
        Self {
            body,
            buffer: BytesMut::new(),
            scanned: 0,
            after_cr: false,
            data: String::new(),
            has_data: false,
            kind: None,
            events: 0,
            max_events: limits.max_events_per_response,
            limits: limits.clone(),
            server,
        }
    }

    /// A stream that lasts as long as a session (the 2024-11-05 HTTP+SSE
    /// transport's): its events are not counted, each is still bounded.
    pub(super) fn lasting(mut self) -> Self {
        self.max_events = usize::MAX;
        self
    }

    fn over(&self, limit: &'static str, detail: String) -> ClientError {
        ClientError::LimitExceeded {
            server: self.server.to_string(),
            limit,
            detail,
        }
    }

    /// The next event with data; `Ok(None)` at the end of the body. Ids and
    /// retry delays are recorded in `cursor` as they pass.
    pub(super) async fn next(&mut self, cursor: &mut Cursor) -> Result<Option<Event>, ClientError> {
        loop {
            if self.after_cr && !self.buffer.is_empty() {
                if self.buffer[0] == b'\n' {
                    self.buffer.advance(1);
                }
                self.after_cr = false;
            }
            let found = memchr::memchr2(b'\n', b'\r', &self.buffer[self.scanned..]);
            let Some(offset) = found else {
                self.scanned = self.buffer.len();
                if self.buffer.len() > self.limits.max_sse_line_bytes {
                    return Err(self.over(
                        "max_sse_line_bytes",
                        format!(
                            "an event-stream line longer than {} bytes",
                            self.limits.max_sse_line_bytes
                        ),
                    ));
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                    Some(Err(e)) => {
                        return Err(ClientError::transport(format!(
                            "the event stream from {} broke: {e}",
                            self.server
                        )));
                    }
                    None => return Ok(None),
                }
                continue;
            };
            let end = self.scanned + offset;
            self.after_cr = self.buffer[end] == b'\r';
            let raw = self.buffer.split_to(end + 1);
            self.scanned = 0;
            if let Some(event) = self.line(&raw[..end], cursor)? {
                return Ok(Some(event));
            }
        }
    }

    /// Interpret one line; an event when it ends one.
    fn line(&mut self, raw: &[u8], cursor: &mut Cursor) -> Result<Option<Event>, ClientError> {
        let line = String::from_utf8_lossy(raw);
        if line.is_empty() {
            let kind = self.kind.take();
            if !self.has_data {
                return Ok(None);
            }
            self.has_data = false;
            let data = std::mem::take(&mut self.data);
            if data.trim().is_empty() {
                return Ok(None);
            }
            self.events += 1;
            if self.events > self.max_events {
                return Err(self.over(
                    "max_events_per_response",
                    format!(
                        "more than {} events in one response",
                        self.limits.max_events_per_response
                    ),
                ));
            }
            return Ok(Some(Event { data, kind }));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (&*line, ""),
        };
        match field {
            "data" => {
                if self.data.len() + value.len() + 1 > self.limits.max_message_bytes {
                    return Err(self.over(
                        "max_message_bytes",
                        format!(
                            "an event larger than {} bytes",
                            self.limits.max_message_bytes
                        ),
                    ));
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => cursor.last_id = Some(value.to_owned()),
            "event" => self.kind = Some(value.to_owned()),
            "retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    cursor.retry = Some(Duration::from_millis(ms).min(self.limits.max_retry_delay));
                }
            }
            _ => {}
        }
        Ok(None)
    }
}

/// Feed `data` to the reader in chunks (each chunk's length taken from the
/// byte before it) with small limits, reading every event: for the fuzz
/// targets. Returns the number of events read.
#[cfg(feature = "fuzzing")]
pub fn fuzz_events(data: &[u8]) -> usize {
    let mut chunks = Vec::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let take = usize::from(len).min(tail.len());
        let (chunk, after) = tail.split_at(take);
        chunks.push(Ok::<_, String>(bytes::Bytes::copy_from_slice(chunk)));
        rest = after;
    }
    let limits = Limits {
        max_message_bytes: 4096,
        max_sse_line_bytes: 4096,
        max_events_per_response: 64,
        ..Limits::default()
    };
    let mut events = Events::new(futures::stream::iter(chunks), &limits, "fuzz".into());
    let mut cursor = Cursor::default();
    futures::executor::block_on(async {
        let mut n = 0;
        while let Ok(Some(event)) = events.next(&mut cursor).await {
            assert!(event.data.len() <= limits.max_message_bytes);
            n += 1;
        }
        assert!(n <= limits.max_events_per_response);
        assert!(cursor.retry.is_none_or(|d| d <= limits.max_retry_delay));
        n
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(
        chunks: Vec<&'static str>,
        limits: Limits,
    ) -> Events<impl Stream<Item = Result<bytes::Bytes, String>> + Unpin> {
        let chunks: Vec<Result<bytes::Bytes, String>> =
            chunks.into_iter().map(|c| Ok(c.into())).collect();
        Events::new(
            futures::stream::iter(chunks),
            &limits,
            "http://test/mcp".into(),
        )
    }

    #[tokio::test]
    async fn events_ids_and_retry_are_read_across_chunks() {
        let mut events = events(
            vec![
                "id: e1\nretry: 500\ndata: \n\n: keep-alive\n\nda",
                "ta: {\"a\":\n",
                "data: 1}\nid: e2\n\n",
            ],
            Limits::default(),
        );
        let mut cursor = Cursor::default();
        let event = events.next(&mut cursor).await.unwrap().unwrap();
        assert_eq!(event.data, "{\"a\":\n1}");
        assert_eq!(cursor.last_id.as_deref(), Some("e2"));
        assert_eq!(cursor.retry, Some(Duration::from_millis(500)));
        assert_eq!(events.next(&mut cursor).await.unwrap(), None);
    }

    #[tokio::test]
    async fn cr_lf_and_crlf_all_end_lines_even_split_across_chunks() {
        let mut events = events(
            vec![
                "data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r",
                "\n\r",
                "\n",
            ],
            Limits::default(),
        );
        let mut cursor = Cursor::default();
        let mut seen = Vec::new();
        while let Some(event) = events.next(&mut cursor).await.unwrap() {
            seen.push(event.data);
        }
        assert_eq!(seen, ["a", "b", "c", "d"]);
    }

    #[tokio::test]
    async fn every_buffer_is_bounded_and_the_error_names_the_limit() {
        let small = Limits {
            max_sse_line_bytes: 16,
            max_message_bytes: 24,
            max_events_per_response: 2,
            max_retry_delay: Duration::from_secs(2),
            ..Limits::default()
        };
        let mut cursor = Cursor::default();
        // A line that never ends.
        let err = events(vec!["data: 0123456789", "0123456789"], small.clone())
            .next(&mut cursor)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("max_sse_line_bytes"), "{err}");
        assert!(err.to_string().contains("http://test/mcp"), "{err}");
        // Short lines that add up to a huge event.
        let err = events(
            vec!["data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n"],
            small.clone(),
        )
        .next(&mut cursor)
        .await
        .unwrap_err();
        assert!(err.to_string().contains("max_message_bytes"), "{err}");
        // Too many events.
        let mut many = events(vec!["data: 1\n\ndata: 2\n\ndata: 3\n\n"], small.clone());
        assert!(many.next(&mut cursor).await.unwrap().is_some());
        assert!(many.next(&mut cursor).await.unwrap().is_some());
        let err = many.next(&mut cursor).await.unwrap_err();
        assert!(err.to_string().contains("max_events_per_response"), "{err}");
        // A retry delay of a year is cut to the cap.
        let mut slow = events(vec!["retry: 31536000000\ndata: x\n\n"], small);
        slow.next(&mut cursor).await.unwrap();
        assert_eq!(cursor.retry, Some(Duration::from_secs(2)));
    }

    #[tokio::test]
    async fn a_long_line_in_tiny_chunks_is_read_whole() {
        // 200 KiB arriving a byte at a time (the incremental scan is what
        // keeps this linear; `cargo xtask fuzz` runs the reader on odd input).
        let line = format!("data: {}\n\n", "x".repeat(200 * 1024));
        let chunks: Vec<Result<bytes::Bytes, String>> = line
            .into_bytes()
            .into_iter()
            .map(|b| Ok(bytes::Bytes::from(vec![b])))
            .collect();
        let mut events = Events::new(
            futures::stream::iter(chunks),
            &Limits::default(),
            "s".into(),
        );
        let event = events.next(&mut Cursor::default()).await.unwrap().unwrap();
        assert_eq!(event.data.len(), 200 * 1024);
    }
}
