//! The `Mcp-Param` / `Mcp-Name` header value codec: decoding never panics,
//! and every string survives encoding and decoding unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_protocol::header::{decode_header_value, encode_header_value};

fuzz_target!(|data: &[u8]| {
    let _ = decode_header_value(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let encoded = encode_header_value(text);
        let safe = |b: u8| (0x20..0x7f).contains(&b) || b == b'\t';
        assert!(encoded.bytes().all(safe), "header-safe");
        assert_eq!(decode_header_value(encoded.as_bytes()).as_deref(), Ok(text));
    }
});
