//! Reading `text/event-stream` bodies: events with their `id` and `retry`
//! fields, comments skipped.

use bytes::BytesMut;
use futures::{Stream, StreamExt as _};

/// One dispatched event.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Event {
    /// The `data` lines, joined with newlines (may be empty: a priming event).
    pub(super) data: String,
}

/// What the stream told us beyond events.
#[derive(Debug, Default)]
pub(super) struct Cursor {
    /// The last event id seen (for `Last-Event-ID` on resumption).
    pub(super) last_id: Option<String>,
    /// The reconnection delay the server asked for, in milliseconds.
    pub(super) retry_ms: Option<u64>,
}

/// Incremental SSE parser over a byte stream.
pub(super) struct Events<S> {
    body: S,
    buffer: BytesMut,
    data: String,
    has_data: bool,
}

impl<S, E> Events<S>
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    pub(super) fn new(body: S) -> Self {
        Self {
            body,
            buffer: BytesMut::new(),
            data: String::new(),
            has_data: false,
        }
    }

    /// The next event with data; `Ok(None)` at the end of the body. Ids and
    /// retry delays are recorded in `cursor` as they pass.
    pub(super) async fn next(&mut self, cursor: &mut Cursor) -> Result<Option<Event>, String> {
        loop {
            while let Some(pos) = self.buffer.iter().position(|b| *b == b'\n') {
                let raw = self.buffer.split_to(pos + 1);
                let line = String::from_utf8_lossy(&raw);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if self.has_data {
                        self.has_data = false;
                        let data = std::mem::take(&mut self.data);
                        if !data.trim().is_empty() {
                            return Ok(Some(Event { data }));
                        }
                    }
                    continue;
                }
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = match line.split_once(':') {
                    Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                    None => (line, ""),
                };
                match field {
                    "data" => {
                        if self.has_data {
                            self.data.push('\n');
                        }
                        self.data.push_str(value);
                        self.has_data = true;
                    }
                    "id" if !value.contains('\0') => cursor.last_id = Some(value.to_owned()),
                    "retry" => {
                        if let Ok(ms) = value.parse::<u64>() {
                            cursor.retry_ms = Some(ms);
                        }
                    }
                    _ => {}
                }
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(format!("the event stream broke: {e}")),
                None => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_ids_and_retry_are_read_across_chunks() {
        let chunks: Vec<Result<bytes::Bytes, String>> = vec![
            Ok("id: e1\nretry: 500\ndata: \n\n: keep-alive\n\nda".into()),
            Ok("ta: {\"a\":\n".into()),
            Ok("data: 1}\nid: e2\n\n".into()),
        ];
        let mut events = Events::new(futures::stream::iter(chunks));
        let mut cursor = Cursor::default();
        let event = events.next(&mut cursor).await.unwrap().unwrap();
        assert_eq!(event.data, "{\"a\":\n1}");
        assert_eq!(cursor.last_id.as_deref(), Some("e2"));
        assert_eq!(cursor.retry_ms, Some(500));
        assert_eq!(events.next(&mut cursor).await.unwrap(), None);
    }
}
