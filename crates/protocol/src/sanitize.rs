//! Output sanitizing: text a model or a terminal will read, with the
//! characters that hide or rewrite it removed.
//!
//! A tool's output and a server's descriptions are written by parties the
//! reader does not control. Some characters are invisible to a person yet
//! read by a model (Unicode tag characters can carry a whole hidden
//! instruction), reorder what is shown (bidirectional overrides), or drive
//! the terminal that displays them (escape sequences that move the cursor,
//! retitle the window or rewrite the line above). This module removes:
//!
//! | Kind | What |
//! | --- | --- |
//! | [`escapes`](Removed::escapes) | terminal escape sequences: CSI, OSC, DCS, SOS, PM, APC (7-bit `ESC …` and 8-bit C1 introducers), and any other `ESC` with its next character |
//! | [`controls`](Removed::controls) | C0 controls but `\n`, `\r`, `\t`; `DEL`; C1 controls |
//! | [`tags`](Removed::tags) | Unicode tag characters U+E0000–U+E007F |
//! | [`bidi`](Removed::bidi) | bidirectional embeddings, overrides, isolates and marks |
//! | [`invisible`](Removed::invisible) | zero-width and other invisible format characters (a zero-width joiner between two emoji is kept: it builds one emoji) |
//!
//! Text without any of them is returned borrowed, at the cost of one scan.
//!
//! ```
//! use toolgate_protocol::sanitize::{Removed, sanitize_text};
//! let mut removed = Removed::default();
//! let clean = sanitize_text("ok\u{1b}[2K\u{1b}[1A\u{202e}txt.exe\u{e0041}", &mut removed);
//! assert_eq!(clean, "oktxt.exe");
//! assert_eq!((removed.escapes, removed.bidi, removed.tags), (2, 1, 1));
//! ```

use std::borrow::Cow;

use serde_json::Value;

/// How many characters or sequences of each kind were removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Terminal escape sequences (each counted once, whatever its length).
    pub escapes: usize,
    /// C0 and C1 control characters.
    pub controls: usize,
    /// Unicode tag characters.
    pub tags: usize,
    /// Bidirectional controls.
    pub bidi: usize,
    /// Zero-width and other invisible format characters.
    pub invisible: usize,
}

impl Removed {
    /// Everything removed.
    pub fn total(&self) -> usize {
        self.escapes + self.controls + self.tags + self.bidi + self.invisible
    }

    /// Whether nothing was removed.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The non-zero counts by kind name, for a log line.
    pub fn kinds(&self) -> impl Iterator<Item = (&'static str, usize)> {
        [
            ("escapes", self.escapes),
            ("controls", self.controls),
            ("tags", self.tags),
            ("bidi", self.bidi),
            ("invisible", self.invisible),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
    }
}

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';

enum Class {
    Keep,
    Escape,
    Control,
    Tag,
    Bidi,
    Invisible,
}

fn class(c: char) -> Class {
    match c {
        '\n' | '\r' | '\t' => Class::Keep,
        ESC | '\u{90}' | '\u{98}' | '\u{9b}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => Class::Escape,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => Class::Control,
        '\u{e0000}'..='\u{e007f}' => Class::Tag,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}' => {
            Class::Bidi
        }
        '\u{200b}'..='\u{200d}'
        | '\u{2060}'..='\u{2064}'
        | '\u{feff}'
        | '\u{ad}'
        | '\u{180e}'
        | '\u{115f}'
        | '\u{1160}'
        | '\u{3164}'
        | '\u{ffa0}'
        | '\u{fff9}'..='\u{fffb}' => Class::Invisible,
        _ => Class::Keep,
    }
}

fn is_emoji(c: char) -> bool {
    matches!(c, '\u{1f000}'..='\u{1faff}' | '\u{2600}'..='\u{27bf}' | '\u{2b00}'..='\u{2bff}')
}

/// `text` with every character of the kinds above removed, counted into
/// `removed`.
pub fn sanitize_text<'a>(text: &'a str, removed: &mut Removed) -> Cow<'a, str> {
    // Printable ASCII and line breaks are always kept: skip them a byte at
    // a time before looking at characters. An ASCII byte is always on a
    // character boundary, so `plain` is one.
    let plain = text
        .bytes()
        .position(|b| !matches!(b, 0x20..=0x7e | b'\n' | b'\r' | b'\t'))
        .unwrap_or(text.len());
    let Some(first) = text[plain..]
        .char_indices()
        .find(|&(_, c)| !matches!(class(c), Class::Keep))
        .map(|(i, _)| plain + i)
    else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..first]);
    let mut chars = text[first..].chars().peekable();
    while let Some(c) = chars.next() {
        match class(c) {
            Class::Keep => out.push(c),
            Class::Escape => {
                removed.escapes += 1;
                skip_sequence(c, &mut chars);
            }
            Class::Control => removed.controls += 1,
            Class::Tag => removed.tags += 1,
            Class::Bidi => removed.bidi += 1,
            Class::Invisible => {
                let joins_emoji = c == '\u{200d}'
                    && out.chars().next_back().is_some_and(is_emoji)
                    && chars.peek().copied().is_some_and(is_emoji);
                if joins_emoji {
                    out.push(c);
                } else {
                    removed.invisible += 1;
                }
            }
        }
    }
    Cow::Owned(out)
}

/// Consume the rest of an escape sequence begun by `introducer`.
fn skip_sequence(introducer: char, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    let kind = if introducer == ESC {
        match chars.peek().copied() {
            Some(c @ ('[' | ']' | 'P' | 'X' | '^' | '_')) => {
                chars.next();
                c
            }
            // Any other escape: ESC and the one character after it.
            Some(c) if (' '..='~').contains(&c) => {
                chars.next();
                return;
            }
            _ => return,
        }
    } else {
        match introducer {
            '\u{9b}' => '[',
            '\u{9d}' => ']',
            _ => 'P',
        }
    };
    if kind == '[' {
        // CSI: parameter and intermediate bytes, then one final byte.
        while let Some(&c) = chars.peek() {
            chars.next();
            if ('\u{40}'..='\u{7e}').contains(&c) || !(' '..='?').contains(&c) {
                return;
            }
        }
        return;
    }
    // OSC, DCS, SOS, PM, APC: a string ended by ST (ESC \ or U+009C), or
    // BEL for OSC.
    while let Some(c) = chars.next() {
        match c {
            BEL if kind == ']' => return,
            '\u{9c}' => return,
            ESC => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

/// Sanitize every string inside `value` in place (object keys are left as
/// they are: a schema names them).
pub fn sanitize_value(value: &mut Value, removed: &mut Removed) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(clean) = sanitize_text(s, removed) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| sanitize_value(v, removed)),
        Value::Object(map) => map.values_mut().for_each(|v| sanitize_value(v, removed)),
        _ => {}
    }
}

/// Sanitize an owned string in place.
pub fn sanitize_string(text: &mut String, removed: &mut Removed) {
    if let Cow::Owned(clean) = sanitize_text(text, removed) {
        *text = clean;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn clean(text: &str) -> (String, Removed) {
        let mut removed = Removed::default();
        (sanitize_text(text, &mut removed).into_owned(), removed)
    }

    #[test]
    fn plain_text_is_borrowed_untouched() {
        let mut removed = Removed::default();
        let text = "Hello, 世界 — tabs\tand\nnew lines\r\n, emoji 👍🏽";
        assert!(matches!(
            sanitize_text(text, &mut removed),
            Cow::Borrowed(_)
        ));
        assert!(removed.is_empty());
    }

    #[test]
    fn what_follows_plain_ascii_is_still_read() {
        let long = "plain words ".repeat(100);
        assert!(matches!(
            sanitize_text(&long, &mut Removed::default()),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            clean(&format!("{long}\u{1b}[1mbold")).0,
            format!("{long}bold")
        );
        assert_eq!(clean("\u{7f}abc").0, "abc");
        assert_eq!(clean("abc é\u{200b}").0, "abc é");
        assert_eq!(clean("tail\u{0}").0, "tail");
    }

    #[test]
    fn terminal_escape_sequences_are_removed_whole() {
        // Colour, cursor up and erase line (CSI), a window title and a
        // hyperlink (OSC, ended by BEL and by ST), DCS, a bare ESC, 8-bit CSI.
        let (text, removed) = clean(
            "a\u{1b}[31mred\u{1b}[0m\u{1b}[1A\u{1b}[2Kb\u{1b}]0;pwned\u{7}c\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\\u{1b}Pq#0\u{1b}\\d\u{1b}e\u{9b}2Jf\u{1b}",
        );
        assert_eq!(text, "aredbclinkdf");
        assert_eq!(removed.escapes, 11);
        assert_eq!(removed.total(), 11);
    }

    #[test]
    fn controls_tags_bidi_and_invisibles_are_counted_by_kind() {
        let hidden: String = "ignore previous"
            .chars()
            .map(|c| char::from_u32(0xe0000 + c as u32).unwrap())
            .collect();
        let (text, removed) = clean(&format!(
            "x\u{0}\u{8}\u{7f}\u{85}y{hidden}\u{202e}z\u{2066}\u{200b}w\u{feff}\u{ad}"
        ));
        assert_eq!(text, "xyzw");
        assert_eq!(
            removed,
            Removed {
                escapes: 0,
                controls: 4,
                tags: 15,
                bidi: 2,
                invisible: 3
            }
        );
    }

    #[test]
    fn a_joiner_inside_an_emoji_sequence_is_kept() {
        let family = "👨\u{200d}👩\u{200d}👧";
        assert_eq!(clean(family).0, family);
        assert_eq!(clean("a\u{200d}b").0, "ab");
    }

    #[test]
    fn strings_inside_json_are_cleaned_keys_kept() {
        let mut value = json!({"k\u{1b}": ["a\u{1b}[1mb", {"n": 1, "s": "\u{202e}c"}]});
        let mut removed = Removed::default();
        sanitize_value(&mut value, &mut removed);
        assert_eq!(value, json!({"k\u{1b}": ["ab", {"n": 1, "s": "c"}]}));
        assert_eq!((removed.escapes, removed.bidi), (1, 1));
    }
}
