//! Wall-clock time for timestamps and TTLs. `MEMCTL_NOW` pins it, so tests and replays are
//! deterministic. Nothing orders by this clock: ordering is always by seq.

use crate::error::{Error, Result};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where "now" comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    System,
    /// Fixed epoch seconds.
    Fixed(f64),
}

impl Clock {
    /// `MEMCTL_NOW` if set (RFC 3339 or epoch seconds), else the system clock.
    pub fn from_env() -> Result<Clock> {
        match std::env::var("MEMCTL_NOW") {
            Ok(text) if !text.trim().is_empty() => parse_timestamp(&text)
                .map(Clock::Fixed)
                .map_err(|e| Error::invalid(format!("MEMCTL_NOW: {}", e.message()))),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid("MEMCTL_NOW is not valid UTF-8")),
            _ => Ok(Clock::System),
        }
    }

    /// Epoch seconds.
    pub fn now(&self) -> f64 {
        match self {
            Clock::Fixed(t) => *t,
            Clock::System => {
                SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs_f64()
            }
        }
    }
}

/// Parses epoch seconds (`1700000000`, `1700000000.5`) or an RFC 3339 date-time
/// (`2026-01-02T03:04:05Z`, `2026-01-02T03:04:05.25+02:00`).
pub fn parse_timestamp(text: &str) -> Result<f64> {
    let text = text.trim();
    let secs = match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() => secs,
        _ => parse_rfc3339(text).ok_or_else(|| {
            Error::invalid(format!(
                "'{text}' is neither epoch seconds nor an RFC 3339 time like 2026-01-02T03:04:05Z"
            ))
        })?,
    };
    // Times are shown as dates of four-digit years.
    if !(0.0..=LAST_SECOND).contains(&secs) {
        return Err(Error::invalid(format!("'{text}' is not a time between 1970 and the end of 9999")));
    }
    Ok(secs)
}

/// 9999-12-31T23:59:59Z.
const LAST_SECOND: f64 = 253_402_300_799.0;

fn parse_rfc3339(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(range)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut fraction = 0.0;
    if let Some(after_dot) = rest.strip_prefix('.') {
        let digits = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        fraction = format!("0.{}", &after_dot[..digits]).parse().ok()?;
        rest = &after_dot[digits..];
    }
    let offset_secs = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(secs as f64 + fraction)
}

/// `2026-01-02 03:04:05` (UTC) for epoch seconds: how memctl shows times to people. Written
/// straight into the text around it, as a whole view shows one per event.
pub fn utc_datetime(epoch: f64) -> UtcDateTime {
    UtcDateTime(epoch)
}

/// A time shown to people (see [`utc_datetime`]).
#[derive(Debug, Clone, Copy)]
pub struct UtcDateTime(f64);

impl fmt::Display for UtcDateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.floor() as i64;
        let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        let (hour, minute, second) = (rest / 3600, rest % 3600 / 60, rest % 60);
        if !(0..=9999).contains(&year) {
            return write!(f, "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}");
        }
        // The digits put in place by hand: a listing shows thousands of times, and `write!`'s
        // padded integers cost ten times as much.
        let mut text = *b"0000-00-00 00:00:00";
        for (at, width, mut n) in
            [(0, 4, year), (5, 2, month), (8, 2, day), (11, 2, hour), (14, 2, minute), (17, 2, second)]
        {
            for digit in text[at..at + width].iter_mut().rev() {
                *digit = b'0' + (n % 10) as u8;
                n /= 10;
            }
        }
        f.write_str(std::str::from_utf8(&text).expect("ASCII digits"))
    }
}

/// The proleptic Gregorian date of days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses a TTL: plain seconds (`90`, `1.5`) or a human duration (`30m`, `2h 15m`, `7days`).
pub fn parse_duration(text: &str) -> Result<f64> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(Error::invalid(format!("duration '{text}' must be positive")));
    }
    let secs = match text.parse::<f64>() {
        Ok(secs) => secs,
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| Error::invalid(format!("invalid duration '{text}': {e} (try 90, 30m or 2h)")))?
            .as_secs_f64(),
    };
    if !secs.is_finite() {
        return Err(Error::invalid(format!("duration '{text}' is not a finite number of seconds")));
    }
    if secs <= 0.0 {
        return Err(Error::invalid(format!("duration '{text}' must be positive")));
    }
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_epoch_and_rfc3339() {
        assert_eq!(parse_timestamp("1700000000").unwrap(), 1_700_000_000.0);
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z").unwrap(), 0.0);
        assert_eq!(parse_timestamp("2023-11-14T22:13:20Z").unwrap(), 1_700_000_000.0);
        assert_eq!(parse_timestamp("2023-11-15T00:13:20.5+02:00").unwrap(), 1_700_000_000.5);
        assert!(parse_timestamp("yesterday").is_err());
        assert!(parse_timestamp("2023-13-01T00:00:00Z").is_err());
        // Only times a four-digit year shows.
        assert_eq!(parse_timestamp("9999-12-31T23:59:59Z").unwrap(), LAST_SECOND);
        for outside in ["-5", "1e300", "253402300800", "1969-12-31T23:59:59Z"] {
            assert!(parse_timestamp(outside).is_err(), "{outside}");
        }
    }

    #[test]
    fn formats_utc() {
        assert_eq!(utc_datetime(0.0).to_string(), "1970-01-01 00:00:00");
        assert_eq!(utc_datetime(1_700_000_000.9).to_string(), "2023-11-14 22:13:20");
        assert_eq!(utc_datetime(951_782_400.0).to_string(), "2000-02-29 00:00:00");
        for epoch in [0.0, 951_782_400.0, 1_700_000_000.0, -86_400.0] {
            let date = &utc_datetime(epoch).to_string()[..10];
            let (y, m, d) =
                (date[..4].parse().unwrap(), date[5..7].parse().unwrap(), date[8..].parse().unwrap());
            assert_eq!(days_from_civil(y, m, d) * 86_400, (epoch as i64).div_euclid(86_400) * 86_400);
        }
    }

    /// The digits put in place by hand read as `write!`'s padded integers, and years outside
    /// 0000–9999 are written by it.
    #[test]
    fn formats_as_padded_integers() {
        let padded = |epoch: f64| {
            let secs = epoch.floor() as i64;
            let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
            let (y, m, d) = civil_from_days(days);
            format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
        };
        let mut epoch = -62_200_000_000.0;
        while epoch < 253_500_000_000.0 {
            assert_eq!(utc_datetime(epoch).to_string(), padded(epoch), "{epoch}");
            epoch += 987_654_321.123;
        }
        assert_eq!(utc_datetime(253_402_300_799.0).to_string(), "9999-12-31 23:59:59");
        assert_eq!(utc_datetime(253_402_300_800.0).to_string(), "10000-01-01 00:00:00");
        assert_eq!(utc_datetime(-62_167_219_200.0).to_string(), "0000-01-01 00:00:00");
        assert_eq!(utc_datetime(-62_167_219_201.0).to_string(), "-001-12-31 23:59:59");
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("90").unwrap(), 90.0);
        assert_eq!(parse_duration("2h 15m").unwrap(), 8100.0);
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
