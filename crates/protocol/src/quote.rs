//! Short quotations of peer-supplied values for error messages.
//!
//! An error that repeats what a peer sent goes back to that peer — often
//! into a model's context. Repeating a 1 MiB argument in full would turn one
//! bad call into a megabyte of tokens, so every error that quotes a value
//! quotes at most [`QUOTE_CHARS`] characters of it and says how long it was.

use std::fmt::Write as _;

use serde_json::Value;

/// How many characters of a value an error message repeats.
pub const QUOTE_CHARS: usize = 64;

/// `text` debug-quoted, cut after [`QUOTE_CHARS`] characters with its full
/// length noted.
///
/// ```
/// use toolgate_protocol::quote::quote;
/// assert_eq!(quote("basket"), "\"basket\"");
/// let long = "x".repeat(1 << 20);
/// assert_eq!(quote(&long), format!("\"{}…\" (1048576 bytes)", "x".repeat(64)));
/// ```
pub fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => {
            let shown = format!("{:?}", &text[..cut]);
            // Put the ellipsis inside the quotes: the value goes on.
            format!("{}…\" ({} bytes)", &shown[..shown.len() - 1], text.len())
        }
    }
}

/// `value` as compact JSON, cut the same way: strings as by [`quote`],
/// arrays and objects summarised by their size once their JSON is long.
///
/// ```
/// use serde_json::json;
/// use toolgate_protocol::quote::quote_json;
/// assert_eq!(quote_json(&json!({"a": 1})), r#"{"a":1}"#);
/// assert_eq!(quote_json(&json!(vec![0; 1000])), "an array of 1000 items");
/// ```
pub fn quote_json(value: &Value) -> String {
    match value {
        Value::String(s) => quote(s),
        Value::Array(items) => {
            small_json(value).unwrap_or_else(|| format!("an array of {} items", items.len()))
        }
        Value::Object(map) => {
            small_json(value).unwrap_or_else(|| format!("an object of {} members", map.len()))
        }
        other => other.to_string(),
    }
}

/// The compact JSON of `value` if it has at most [`QUOTE_CHARS`] characters;
/// the writer stops as soon as it is longer, so a huge value costs little.
fn small_json(value: &Value) -> Option<String> {
    struct Bounded(String);
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + buf.len() > QUOTE_CHARS {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.0.push_str(&String::from_utf8_lossy(buf));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded(String::new());
    serde_json::to_writer(&mut out, value).ok()?;
    Some(out.0)
}

/// `message` with any long quotation of `instance` in it replaced by
/// [`quote_json`], and cut to a few hundred characters in any case. For
/// messages built by libraries that repeat the offending value in full.
pub fn shorten_message(message: &str, instance: &Value) -> String {
    const MESSAGE_CHARS: usize = 300;
    if message.len() <= MESSAGE_CHARS {
        return message.to_owned();
    }
    let full = instance.to_string();
    let replaced = match message.find(&full) {
        Some(at) if !full.is_empty() => {
            let mut out = String::with_capacity(MESSAGE_CHARS);
            out.push_str(&message[..at]);
            out.push_str(&quote_json(instance));
            out.push_str(&message[at + full.len()..]);
            out
        }
        _ => message.to_owned(),
    };
    match replaced.char_indices().nth(MESSAGE_CHARS) {
        None => replaced,
        Some((cut, _)) => {
            let mut out = replaced[..cut].to_owned();
            let _ = write!(out, "… ({} bytes in all)", replaced.len());
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn short_values_are_quoted_whole() {
        assert_eq!(quote("a\"b"), r#""a\"b""#);
        assert_eq!(quote_json(&json!(42)), "42");
        assert_eq!(quote_json(&json!([1, 2])), "[1,2]");
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let long = "é".repeat(100);
        let q = quote(&long);
        assert!(q.starts_with(&format!("\"{}", "é".repeat(64))));
        assert!(q.ends_with("…\" (200 bytes)"), "{q}");
        let object: serde_json::Map<String, Value> =
            (0..50).map(|i| (format!("key{i}"), json!(i))).collect();
        assert_eq!(
            quote_json(&Value::Object(object)),
            "an object of 50 members"
        );
    }

    #[test]
    fn messages_that_repeat_a_huge_value_are_shortened() {
        let instance = json!("z".repeat(1 << 20));
        let message = format!("{instance} is longer than 10 characters");
        let short = shorten_message(&message, &instance);
        assert!(short.len() < 200, "{short}");
        assert!(
            short.ends_with("(1048576 bytes) is longer than 10 characters"),
            "{short}"
        );
        // A message that does not contain the value is still bounded.
        let other = "y".repeat(10_000);
        assert!(shorten_message(&other, &json!(1)).len() < 400);
        assert_eq!(shorten_message("short", &instance), "short");
    }
}
