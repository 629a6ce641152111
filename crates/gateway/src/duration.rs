//! Durations as people write them in configuration and on the command
//! line (`90s`, `15m`, `1h`, `7d`), and as sentences.

use std::time::Duration;

/// `90s`, `15m`, `2h`, `7d` (or plain seconds).
///
/// ```
/// use std::time::Duration;
/// use toolgate_gateway::duration::parse_duration;
/// assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
/// assert!(parse_duration("5 weeks").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 90s, 15m, 2h or 7d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "{text:?}: the unit is one of s, m, h, d (as in 90s, 15m, 2h, 7d)"
            ));
        }
    };
    Ok(Duration::from_secs(n.saturating_mul(seconds)))
}

/// `the next hour`, `the next 30 minutes`, `the next 2 hours`: how long a
/// grant lasts, in a sentence.
pub fn the_next(d: Duration) -> String {
    let s = d.as_secs();
    let (n, unit) = if s % 3600 == 0 {
        (s / 3600, "hour")
    } else if s % 60 == 0 {
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
