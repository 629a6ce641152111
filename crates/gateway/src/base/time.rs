//! Wall-clock time as the stores keep it (layer `base`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 before it).
pub fn now_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Nonces older than this are forgotten (a state that old is refused as
/// expired by the server anyway; the margin covers clock skew between
/// instances). The configuration bounds `[state] ttl` by it, so it lives
/// below both.
pub const NONCE_MARGIN: Duration = Duration::from_secs(3600);
