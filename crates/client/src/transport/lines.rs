//! Reading a child's output line by line with a cap on a line's length.
//!
//! A line over the cap is skipped to its end and reported once as
//! [`Line::TooLong`]; reading then goes on with the next line, so one
//! oversized message neither exhausts memory nor ends the conversation.

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt as _};

/// One line, or the news that one was too long.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// A line without its terminator.
    Line(BytesMut),
    /// A line over the cap was skipped.
    TooLong,
}

/// Bounded lines from `R`.
pub(crate) struct BoundedLines<R> {
    reader: R,
    buffer: BytesMut,
    /// How much of `buffer` is known to hold no newline.
    scanned: usize,
    max: usize,
    /// Inside a line over the cap, dropping bytes until its end.
    skipping: bool,
}

impl<R: AsyncRead + Unpin> BoundedLines<R> {
    pub(crate) fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            buffer: BytesMut::new(),
            scanned: 0,
            max,
            skipping: false,
        }
    }

    /// The next line; `None` at the end of input or on a read error.
    pub(crate) async fn next(&mut self) -> Option<Line> {
        loop {
            if let Some(offset) = memchr::memchr(b'\n', &self.buffer[self.scanned..]) {
                let end = self.scanned + offset;
                let mut line = self.buffer.split_to(end + 1);
                self.scanned = 0;
                if std::mem::take(&mut self.skipping) || end > self.max {
                    return Some(Line::TooLong);
                }
                line.truncate(end);
                return Some(Line::Line(line));
            }
            self.scanned = self.buffer.len();
            if self.buffer.len() > self.max {
                self.buffer.clear();
                self.scanned = 0;
                self.skipping = true;
            }
            self.buffer.reserve(8 * 1024);
            match self.reader.read_buf(&mut self.buffer).await {
                Ok(0) | Err(_) => {
                    // A last line without a newline still counts.
                    self.scanned = 0;
                    if std::mem::take(&mut self.skipping) {
                        self.buffer.clear();
                        return Some(Line::TooLong);
                    }
                    if self.buffer.is_empty() {
                        return None;
                    }
                    return Some(Line::Line(self.buffer.split()));
                }
                Ok(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_skipped_and_reading_goes_on() {
        let input = format!("short\n{}\nnext\n{}", "x".repeat(100), "y".repeat(50));
        let mut lines = BoundedLines::new(input.as_bytes(), 10);
        let mut got = Vec::new();
        while let Some(line) = lines.next().await {
            got.push(match line {
                Line::Line(l) => String::from_utf8(l.to_vec()).unwrap(),
                Line::TooLong => "<too long>".into(),
            });
        }
        assert_eq!(got, ["short", "<too long>", "next", "<too long>"]);
    }

    #[tokio::test]
    async fn a_line_longer_than_the_cap_arriving_whole_is_refused_too() {
        let (mut tx, rx) = tokio::io::duplex(1 << 16);
        tokio::io::AsyncWriteExt::write_all(&mut tx, b"0123456789abc\nok\n")
            .await
            .unwrap();
        drop(tx);
        let mut lines = BoundedLines::new(rx, 10);
        assert_eq!(lines.next().await, Some(Line::TooLong));
        assert_eq!(lines.next().await, Some(Line::Line("ok".into())));
        assert_eq!(lines.next().await, None);
    }
}
