//! Opening a `requestState`: any text is refused cleanly unless it was
//! sealed with the key (which the fuzzer cannot forge).
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_server::StateKey;
use toolgate_server::fuzzing::open_state as fuzz_open_state;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let key = StateKey::new([7; 32]);
    assert!(!fuzz_open_state(&key, text), "a forged state opened");
});
