//! Time arithmetic and formatting. The wire's timestamps are microseconds since the Unix epoch,
//! the browser's clock is milliseconds, and `datetime-local` inputs speak local wall time; these
//! conversions are pure (the local offset is passed in) so they are tested on the host.

/// Microseconds in a second.
const US_PER_SEC: i64 = 1_000_000;

/// What a confirmation's countdown shows: the time left until `expires_at`, rounded up to the
/// second (so "0:01" shows until the end rather than "0:00" for up to a second), or "expired".
pub(crate) fn countdown(expires_at_us: i64, now_us: i64) -> String {
    let left = expires_at_us.saturating_sub(now_us);
    if left <= 0 {
        return "expired".to_owned();
    }
    clock(left.saturating_add(US_PER_SEC - 1) / US_PER_SEC)
}

/// Whole seconds as `m:ss`, or `h:mm:ss` from an hour on.
fn clock(secs: i64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// A duration in a unit that fits it: `412 µs`, `12.3 ms`, `4.27 s`, then `m:ss`.
pub(crate) fn duration(us: i64) -> String {
    let us = us.max(0);
    if us < 1_000 {
        format!("{us} µs")
    } else if us < US_PER_SEC {
        format!("{:.1} ms", us as f64 / 1_000.0)
    } else if us < 60 * US_PER_SEC {
        format!("{:.2} s", us as f64 / US_PER_SEC as f64)
    } else {
        clock(us / US_PER_SEC)
    }
}

/// A calendar date and wall-clock time, without a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WallTime {
    pub(crate) year: i64,
    pub(crate) month: u32,
    pub(crate) day: u32,
    pub(crate) hour: u32,
    pub(crate) minute: u32,
    pub(crate) second: u32,
}

impl WallTime {
    /// Reads a `datetime-local` input's value: `YYYY-MM-DDTHH:MM`, optionally `:SS` and a
    /// fraction (dropped); a space may stand for the `T`. `None` for anything else, including
    /// dates that do not exist (February 30th).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (date, time) = s.split_once(['T', ' '])?;
        let mut d = date.splitn(3, '-');
        let year = num(d.next()?, 4)?;
        let month = u32::try_from(num(d.next()?, 2)?).ok()?;
        let day = u32::try_from(num(d.next()?, 2)?).ok()?;
        let time = time.split('.').next()?;
        let mut t = time.split(':');
        let hour = u32::try_from(num(t.next()?, 2)?).ok()?;
        let minute = u32::try_from(num(t.next()?, 2)?).ok()?;
        let second = match t.next() {
            Some(s) => u32::try_from(num(s, 2)?).ok()?,
            None => 0,
        };
        if t.next().is_some() || hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        Some(Self {
            year,
            month,
            day,
            hour,
            minute,
            second,
        })
    }

    /// The instant this wall time names in a zone `offset_min` minutes east of UTC.
    pub(crate) fn to_us(self, offset_min: i64) -> i64 {
        let days = days_from_civil(self.year, self.month, self.day);
        let secs = days * 86_400
            + i64::from(self.hour) * 3600
            + i64::from(self.minute) * 60
            + i64::from(self.second)
            - offset_min * 60;
        secs * US_PER_SEC
    }

    /// The wall time at instant `us` in a zone `offset_min` minutes east of UTC.
    pub(crate) fn from_us(us: i64, offset_min: i64) -> Self {
        let secs = us.div_euclid(US_PER_SEC) + offset_min * 60;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        // rem is in 0..86_400, so these fit.
        let rem = u32::try_from(rem).unwrap_or(0);
        Self {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
        }
    }

    /// `YYYY-MM-DD HH:MM:SS`, as the tables show times.
    pub(crate) fn display(self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// A run of exactly `len` ASCII digits.
fn num(s: &str, len: usize) -> Option<i64> {
    if s.len() != len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (m, d) = (i64::from(month), i64::from(day));
    let y = if m <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const S: i64 = US_PER_SEC;

    #[test]
    fn countdowns_round_up_and_end_in_expired() {
        let cases = [
            (300 * S, "5:00"),
            (299 * S + 1, "5:00"),
            (299 * S, "4:59"),
            (1, "0:01"),
            (0, "expired"),
            (-5 * S, "expired"),
            (3725 * S, "1:02:05"),
        ];
        let got: Vec<(i64, String)> = cases
            .iter()
            .map(|(left, _)| (*left, countdown(1_000 * S + left, 1_000 * S)))
            .collect();
        let want: Vec<(i64, String)> = cases.iter().map(|(l, s)| (*l, s.to_string())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn durations_pick_a_unit() {
        let got: Vec<String> = [-3, 0, 412, 12_345, 4_270_000, 125 * S]
            .into_iter()
            .map(duration)
            .collect();
        assert_eq!(
            got,
            ["0 µs", "0 µs", "412 µs", "12.3 ms", "4.27 s", "2:05"].map(String::from)
        );
    }

    #[test]
    fn datetime_local_values_parse_and_bad_ones_do_not() {
        assert_eq!(
            WallTime::parse("2024-02-29T13:05"),
            Some(WallTime {
                year: 2024,
                month: 2,
                day: 29,
                hour: 13,
                minute: 5,
                second: 0
            })
        );
        assert_eq!(
            WallTime::parse("2024-02-29 13:05:07.250").map(|w| w.second),
            Some(7)
        );
        let bad = [
            "",
            "2024-02-30T10:00",
            "2023-02-29T10:00",
            "2024-13-01T10:00",
            "2024-1-01T10:00",
            "2024-01-01",
            "2024-01-01T24:00",
            "2024-01-01T10:00:00:00",
            "x024-01-01T10:00",
        ];
        let parsed: Vec<Option<WallTime>> = bad.iter().map(|s| WallTime::parse(s)).collect();
        assert_eq!(parsed, vec![None; bad.len()]);
    }

    #[test]
    fn wall_times_convert_to_instants_and_back() {
        let w = WallTime::parse("2024-05-01T12:00:03").unwrap();
        // 2024-05-01T12:00:03Z
        assert_eq!(w.to_us(0), 1_714_564_803 * S);
        // The same wall time two hours east of UTC is two hours earlier.
        assert_eq!(w.to_us(120), (1_714_564_803 - 7200) * S);
        assert_eq!(WallTime::from_us(1_714_564_803 * S + 999_999, 0), w);
        assert_eq!(
            WallTime::from_us((1_714_564_803 - 7200) * S, 120).display(),
            "2024-05-01 12:00:03"
        );
        assert_eq!(WallTime::from_us(0, 0).display(), "1970-01-01 00:00:00");
        assert_eq!(WallTime::from_us(-S, 0).display(), "1969-12-31 23:59:59");
        assert_eq!(
            WallTime::from_us(951_782_400 * S, 0).display(),
            "2000-02-29 00:00:00"
        );
    }
}
