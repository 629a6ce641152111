//! JSON-RPC message parsing and the per-request `_meta` reader: any bytes
//! are either a message or a rejection, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_protocol::jsonrpc::{Incoming, parse_message};
use toolgate_protocol::meta::{RequestMeta, declares_protocol_version};

fuzz_target!(|data: &[u8]| {
    if let Ok(Incoming::Request(request)) = parse_message(data) {
        let _ = RequestMeta::from_raw(request.meta.as_deref());
        let _ = declares_protocol_version(request.meta.as_deref());
        let _ = RequestMeta::from_params(request.params_with_meta().as_ref());
    }
});
