//! The client's SSE reader on arbitrary bytes in arbitrary chunks: it ends
//! or refuses, and never holds more than its limits allow (asserted inside).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolgate_client::transport::http::fuzz_events(data);
});
