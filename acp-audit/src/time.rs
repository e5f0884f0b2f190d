//! RFC 3339 timestamps in UTC with millisecond precision, from [`SystemTime`], without a
//! date-time crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats `time` as RFC 3339 in UTC with milliseconds, e.g. `2026-11-22T15:04:05.123Z`.
///
/// Sub-millisecond digits are truncated (not rounded), so a timestamp never lies in the
/// future of the instant it describes. Instants before 1970 are supported; years outside
/// 0000–9999 (which RFC 3339 cannot express) are written with more digits or a sign
/// rather than failing.
pub fn rfc3339_millis(time: SystemTime) -> String {
    let millis: i128 = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_millis() as i128,
        // Before the epoch: round towards minus infinity so the fields below stay positive.
        Err(before) => {
            let d = before.duration();
            let whole = d.as_millis() as i128;
            if d.as_nanos() % 1_000_000 == 0 {
                -whole
            } else {
                -whole - 1
            }
        }
    };
    let days = millis.div_euclid(86_400_000);
    let in_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (second, milli) = (in_day / 1000 % 60, in_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i128) -> (i128, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st, 0..=365
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i128::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(millis: u64) -> String {
        rfc3339_millis(UNIX_EPOCH + Duration::from_millis(millis))
    }

    #[test]
    fn epoch() {
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn milliseconds_are_three_digits_and_truncated() {
        assert_eq!(at(7), "1970-01-01T00:00:00.007Z");
        assert_eq!(at(1_999), "1970-01-01T00:00:01.999Z");
        let almost = UNIX_EPOCH + Duration::from_nanos(1_999_999_999);
        assert_eq!(rfc3339_millis(almost), "1970-01-01T00:00:01.999Z");
    }

    #[test]
    fn a_known_instant() {
        // date -u -d @1795359845 => Sun Nov 22 15:04:05 UTC 2026
        assert_eq!(at(1_795_359_845_123), "2026-11-22T15:04:05.123Z");
        // The last millisecond of a year.
        assert_eq!(at(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(at(1_798_761_600_000), "2027-01-01T00:00:00.000Z");
    }

    #[test]
    fn leap_years() {
        // 2024 is a leap year: Feb 29 exists.
        assert_eq!(at(1_709_164_800_000), "2024-02-29T00:00:00.000Z");
        assert_eq!(at(1_709_251_200_000), "2024-03-01T00:00:00.000Z");
        // 2000 is a leap year (divisible by 400).
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        // 2100 is not (divisible by 100, not 400): Feb 28 is followed by Mar 1.
        assert_eq!(at(4_107_456_000_000), "2100-02-28T00:00:00.000Z");
        assert_eq!(at(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn before_the_epoch() {
        let t = UNIX_EPOCH - Duration::from_millis(1);
        assert_eq!(rfc3339_millis(t), "1969-12-31T23:59:59.999Z");
        let t = UNIX_EPOCH - Duration::from_nanos(1);
        assert_eq!(rfc3339_millis(t), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn every_day_of_four_centuries_round_trips_through_the_calendar() {
        // Independent check: count days forward with a month-length table.
        let mut days = 0i128;
        for year in 1970..2370i128 {
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
            let lengths = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
            for (m, len) in lengths.iter().enumerate() {
                for d in 1..=*len {
                    assert_eq!(civil_from_days(days), (year, m as u32 + 1, d));
                    days += 1;
                }
            }
        }
    }
}
