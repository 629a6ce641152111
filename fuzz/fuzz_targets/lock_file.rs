//! The lock-file parser: any text is a lock or a clear refusal, and a lock
//! that parses renders to text that parses to the same lock.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_review::lock::LockFile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(lock) = LockFile::parse(text) {
        let rendered = lock.render();
        assert_eq!(LockFile::parse(&rendered).ok(), Some(lock));
    }
});
