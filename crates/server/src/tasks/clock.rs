//! Times as the tasks extension writes them.

use std::time::{Duration, SystemTime};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `t` as an ISO 8601 (RFC 3339) UTC timestamp with milliseconds.
pub(crate) fn iso8601(t: SystemTime) -> String {
    let t = OffsetDateTime::from(t);
    let t = t.replace_millisecond(t.millisecond()).unwrap_or(t);
    t.format(&Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// `d` in whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        assert_eq!(iso8601(t), "2026-11-18T11:06:40.123Z");
        assert_eq!(millis(Duration::from_secs(3600)), 3_600_000);
    }
}
