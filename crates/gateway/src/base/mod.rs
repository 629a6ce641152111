//! Layer 0, `base`: what every other layer may use and that uses nothing
//! of the gateway — names, durations, time, random ids, redaction.

pub mod duration;
pub mod ids;
pub mod names;
pub mod redact;
pub mod time;
