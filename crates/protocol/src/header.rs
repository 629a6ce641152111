//! The header value codec of the Streamable HTTP transport.
//!
//! `Mcp-Name` and `Mcp-Param-{Name}` values that are not plain, header-safe
//! ASCII travel as `=?base64?{Base64 of the UTF-8 bytes}?=`. A plain value
//! that itself looks like that sentinel is encoded too, so decoding is never
//! ambiguous.

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Header carrying the protocol version.
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// Header mirroring the JSON-RPC method.
pub const METHOD_HEADER: &str = "mcp-method";
/// Header mirroring `params.name` / `params.uri`.
pub const NAME_HEADER: &str = "mcp-name";
/// Header naming a legacy (2025-era) session.
pub const SESSION_HEADER: &str = "mcp-session-id";

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// Why a received header value is unacceptable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderValueError {
    /// A byte outside visible ASCII, space and tab.
    InvalidChar(u8),
    /// The sentinel's payload is not valid Base64.
    InvalidBase64,
    /// The decoded bytes are not UTF-8.
    InvalidUtf8,
}

impl fmt::Display for HeaderValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderValueError::InvalidChar(b) => write!(
                f,
                "contains byte 0x{b:02x}; header values must be visible ASCII, space or tab (use the =?base64?...?= encoding otherwise)"
            ),
            HeaderValueError::InvalidBase64 => {
                write!(f, "the =?base64?...?= value is not valid Base64")
            }
            HeaderValueError::InvalidUtf8 => {
                write!(f, "the =?base64?...?= value does not decode to UTF-8")
            }
        }
    }
}

impl std::error::Error for HeaderValueError {}

/// A byte a received value may carry: visible ASCII, space and tab.
fn is_plain(b: &u8) -> bool {
    (0x20..=0x7e).contains(b) || *b == b'\t'
}

fn is_sentinel(value: &str) -> bool {
    value.len() >= PREFIX.len() + SUFFIX.len()
        && value.starts_with(PREFIX)
        && value.ends_with(SUFFIX)
}

/// Whether `value` can be sent as a plain header value.
pub fn is_plain_safe(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge_ws = |b: &u8| *b == b' ' || *b == b'\t';
    bytes
        .iter()
        .all(|b| (0x20..=0x7e).contains(b) || *b == b'\t')
        && !bytes.first().is_some_and(edge_ws)
        && !bytes.last().is_some_and(edge_ws)
        && !is_sentinel(value)
}

/// Encode a value for a `Mcp-Name` or `Mcp-Param-*` header.
///
/// ```
/// use toolgate_protocol::header::encode_header_value;
/// assert_eq!(encode_header_value("us-west1"), "us-west1");
/// assert_eq!(encode_header_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
/// assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
/// ```
pub fn encode_header_value(value: &str) -> Cow<'_, str> {
    if is_plain_safe(value) {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!(
            "{PREFIX}{}{SUFFIX}",
            STANDARD.encode(value.as_bytes())
        ))
    }
}

/// Decode a received header value: validate its characters and undo the
/// Base64 sentinel.
///
/// ```
/// use toolgate_protocol::header::decode_header_value;
/// assert_eq!(decode_header_value(b"=?base64?bGluZTEKbGluZTI=?=").unwrap(), "line1\nline2");
/// assert!(decode_header_value(b"caf\xc3\xa9").is_err());
/// ```
pub fn decode_header_value(raw: &[u8]) -> Result<String, HeaderValueError> {
    if let Some(b) = raw.iter().find(|b| !is_plain(b)) {
        return Err(HeaderValueError::InvalidChar(*b));
    }
    // Every byte is ASCII now, so this conversion cannot fail.
    let text = std::str::from_utf8(raw).map_err(|_| HeaderValueError::InvalidUtf8)?;
    if !is_sentinel(text) {
        return Ok(text.to_owned());
    }
    let payload = &text[PREFIX.len()..text.len() - SUFFIX.len()];
    // Canonical, padded Base64 only: a value with broken padding is refused.
    let bytes = STANDARD
        .decode(payload)
        .map_err(|_| HeaderValueError::InvalidBase64)?;
    String::from_utf8(bytes).map_err(|_| HeaderValueError::InvalidUtf8)
}

/// Whether the received header value `raw` decodes to `expected`: what
/// [`decode_header_value`] would say, without allocating when the value was
/// sent plainly (the usual case, checked on every request).
///
/// ```
/// use toolgate_protocol::header::{encode_header_value, header_value_matches};
/// assert_eq!(header_value_matches(b"get_weather", "get_weather"), Ok(true));
/// let encoded = encode_header_value("caf\u{e9}");
/// assert_eq!(header_value_matches(encoded.as_bytes(), "caf\u{e9}"), Ok(true));
/// assert_eq!(header_value_matches(b"other", "get_weather"), Ok(false));
/// ```
pub fn header_value_matches(raw: &[u8], expected: &str) -> Result<bool, HeaderValueError> {
    if raw == expected.as_bytes() && !is_sentinel(expected) && raw.iter().all(is_plain) {
        return Ok(true);
    }
    Ok(decode_header_value(raw)? == expected)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_match_is_what_decoding_says() {
        use super::{HeaderValueError, decode_header_value, header_value_matches};
        for (raw, expected) in [
            ("plain", "plain"),
            ("=?base64?aGk=?=", "hi"),
            ("=?base64?aGk=?=", "=?base64?aGk=?="),
            ("a\tb", "a\tb"),
            ("x", "y"),
        ] {
            let decoded = decode_header_value(raw.as_bytes()).map(|d| d == expected);
            assert_eq!(
                header_value_matches(raw.as_bytes(), expected),
                decoded,
                "{raw}"
            );
        }
        assert_eq!(
            header_value_matches(b"caf\xc3\xa9", "caf\u{e9}"),
            Err(HeaderValueError::InvalidChar(0xc3))
        );
    }

    /// Found by the `header_codec` fuzz target (a wrong assertion in the
    /// target, kept as a test of what the codec promises): a tab inside a
    /// value is sent plainly, as HTTP allows, and round-trips.
    #[test]
    fn an_inner_tab_is_plain_and_round_trips() {
        let value = "=?base64?SGVs\ta8=??";
        let encoded = super::encode_header_value(value);
        assert_eq!(encoded, value);
        assert_eq!(
            super::decode_header_value(encoded.as_bytes()).unwrap(),
            value
        );
    }

    use super::*;

    #[test]
    fn spec_encoding_table() {
        let table = [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ];
        for (plain, encoded) in table {
            assert_eq!(encode_header_value(plain), encoded);
            assert_eq!(
                decode_header_value(encoded.as_bytes()).as_deref(),
                Ok(plain)
            );
        }
    }

    #[test]
    fn rejects_bad_values() {
        assert_eq!(
            decode_header_value(b"a\x01b"),
            Err(HeaderValueError::InvalidChar(1))
        );
        assert_eq!(
            decode_header_value(b"=?base64?***?="),
            Err(HeaderValueError::InvalidBase64)
        );
        assert_eq!(
            decode_header_value(b"=?base64?/w==?="),
            Err(HeaderValueError::InvalidUtf8)
        );
    }

    #[test]
    fn sentinel_markers_are_case_sensitive() {
        assert_eq!(
            decode_header_value(b"=?BASE64?YQ==?=").as_deref(),
            Ok("=?BASE64?YQ==?=")
        );
    }
}
