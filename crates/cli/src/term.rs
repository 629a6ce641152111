//! Everything the CLI writes: stdout that survives a closed pipe, and
//! server-supplied text made safe for a terminal.
//!
//! A server's names, descriptions, results and errors are written by a
//! party the user does not control yet. Printed raw, an escape sequence
//! can erase the line above, retitle the window or redraw the "Send this
//! call?" question; a bidi override can make `exe.txt` read `txt.exe`. So
//! every server string goes through [`clean`] (or [`one_line`]) before it
//! is printed for people; `--json` output stays exact JSON, whose encoder
//! escapes control characters anyway.

use parking_lot::Mutex;
use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};

use toolgate_protocol::sanitize::{Removed, sanitize_text};

static PIPE_CLOSED: AtomicBool = AtomicBool::new(false);
static REMOVED: Mutex<Removed> = Mutex::new(Removed {
    escapes: 0,
    controls: 0,
    tags: 0,
    bidi: 0,
    invisible: 0,
});

/// Write to stdout. Once the reader has gone (`toolgate … | head -1`),
/// further output is dropped: the command finishes and exits with its own
/// status instead of panicking.
pub fn write_stdout(text: std::fmt::Arguments<'_>) {
    if PIPE_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|()| out.flush())
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        PIPE_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Write to stderr, ignoring failure (there is nowhere left to report it).
pub fn write_stderr(text: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(text).and_then(|()| err.flush());
}

/// `println!` to stdout, quiet on a closed pipe.
#[macro_export]
macro_rules! outln {
    () => { $crate::term::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::term::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics.
#[macro_export]
macro_rules! errln {
    () => { $crate::term::write_stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::term::write_stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that never panics.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => { $crate::term::write_stderr(format_args!($($arg)*)) };
}

/// `text` from a server, safe to print: escape sequences, controls, tag,
/// bidi and invisible characters removed, and a carriage return that is
/// not part of a line break shown as `\r` (it would return the cursor and
/// let the rest of the text overwrite the line).
pub fn clean(text: &str) -> String {
    let mut removed = Removed::default();
    let text = sanitize_text(text, &mut removed);
    if !removed.is_empty() {
        let mut total = REMOVED.lock();
        total.escapes += removed.escapes;
        total.controls += removed.controls;
        total.tags += removed.tags;
        total.bidi += removed.bidi;
        total.invisible += removed.invisible;
    }
    if !text.contains('\r') {
        return text.into_owned();
    }
    text.replace("\r\n", "\n").replace('\r', "\\r")
}

/// [`clean`], on one line: line breaks and tabs become spaces, runs of
/// spaces one space.
pub fn one_line(text: &str) -> String {
    clean(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`one_line`], cut to `max` characters with an ellipsis.
pub fn short(text: &str, max: usize) -> String {
    let line = one_line(text);
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Tell the user, once at the end of a command, what was removed from the
/// server's text, so a hidden instruction does not pass unnoticed.
pub fn report_removed() {
    let total = *REMOVED.lock();
    if total.is_empty() {
        return;
    }
    let kinds: Vec<String> = total
        .kinds()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    errln!(
        "toolgate: removed characters that could hide text or drive the terminal from the server's output ({})",
        kinds.join(", ")
    );
}

/// Whether a person can be asked: stdin and stderr are both terminals.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Ask on stderr and read one line from stdin (without blocking the
/// runtime). `None` at end of input.
pub async fn ask(question: String) -> Option<String> {
    err!("{question}");
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
        }
    })
    .await
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_cannot_drive_the_terminal() {
        assert_eq!(clean("ok\u{1b}[1A\u{1b}[2Kfine"), "okfine");
        assert_eq!(clean("a\r\nb\rSend? y"), "a\nb\\rSend? y");
        assert_eq!(one_line("two\nlines\t here"), "two lines here");
        assert_eq!(short("abcdefgh", 5), "abcd…");
        assert_eq!(short("\u{202e}abc", 5), "abc");
    }
}
