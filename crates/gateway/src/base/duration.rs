//! Durations as people write them in configuration and on the command
//! line (`90s`, `15m`, `1h`, `7d`), and as sentences.
//!
//! Layer: `base`.

use std::time::Duration;

/// A duration that [`parse_duration`] cannot read; the text says how to
/// write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Not a number followed by a unit (the text given).
    #[error("{0:?} is not a duration such as 90s, 15m, 2h or 7d")]
    NotADuration(String),
    /// A number with a unit other than `s`, `m`, `h` or `d`.
    #[error("{0:?}: the unit is one of s, m, h, d (as in 90s, 15m, 2h, 7d)")]
    Unit(String),
}

/// `90s`, `15m`, `2h`, `7d` (or plain seconds).
///
/// ```
/// use std::time::Duration;
/// use toolgate_gateway::base::duration::parse_duration;
/// assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
/// assert!(parse_duration("5 weeks").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| DurationError::NotADuration(text.to_owned()))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(DurationError::Unit(text.to_owned())),
    };
    Ok(Duration::from_secs(n.saturating_mul(seconds)))
}

/// `the next hour`, `the next 30 minutes`, `the next 2 hours`: how long a
/// grant lasts, in a sentence.
pub fn the_next(d: Duration) -> String {
    let s = d.as_secs();
    let (n, unit) = if s.is_multiple_of(3600) {
        (s / 3600, "hour")
    } else if s.is_multiple_of(60) {
        (s / 60, "minute")
    } else {
        (s, "second")
    };
    if n == 1 {
        format!("the next {unit}")
    } else {
        format!("the next {n} {unit}s")
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a day since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `YYYY-MM-DD hh:mm:ss` (with `millis`, `.mmm` after) in UTC, from
/// milliseconds since the Unix epoch.
///
/// ```
/// use toolgate_gateway::base::duration::utc;
/// assert_eq!(utc(951_782_400_123, true), "2000-02-29 00:00:00.123");
/// ```
pub fn utc(ms: i64, millis: bool) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    let mut out = format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    if millis {
        out.push_str(&format!(".{:03}", ms.rem_euclid(1000)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("5 weeks").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn spans_read_as_sentences() {
        assert_eq!(the_next(Duration::from_secs(3600)), "the next hour");
        assert_eq!(the_next(Duration::from_secs(7200)), "the next 2 hours");
        assert_eq!(the_next(Duration::from_secs(1800)), "the next 30 minutes");
        assert_eq!(the_next(Duration::from_secs(60)), "the next minute");
        assert_eq!(the_next(Duration::from_secs(90)), "the next 90 seconds");
    }
}
