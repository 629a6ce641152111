//! Text helpers shared by the rules.

/// Characters that are invisible or change how text is displayed, with a name.
pub(crate) fn hidden_char(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{E0000}'..='\u{E007F}' => "Unicode tag character",
        '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}' => {
            "zero-width character"
        }
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{061C}' => "bidirectional control",
        '\u{1B}' => "terminal escape sequence",
        c if c.is_control() && c != '\n' && c != '\t' && c != '\r' => "control character",
        _ => return None,
    })
}

/// A short excerpt around byte offset `at`, with hidden characters made visible.
pub(crate) fn excerpt(text: &str, at: usize, len: usize) -> String {
    let start = text[..at.min(text.len())]
        .char_indices()
        .rev()
        .nth(30)
        .map_or(0, |(i, _)| i);
    let end = text[at.min(text.len())..]
        .char_indices()
        .nth(len + 30)
        .map_or(text.len(), |(i, _)| at + i);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    for c in text[start..end].chars() {
        if hidden_char(c).is_some() {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    if end < text.len() {
        out.push('…');
    }
    out
}

/// Lower-cased words of an identifier or sentence (`get_userData` → get, user, data).
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            prev_lower = c.is_lowercase();
            current.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
