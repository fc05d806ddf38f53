//! Go's durations: `time.ParseDuration` and `Duration.String`, exactly, because bd's gates and
//! Gas City's orders and `[daemon]` settings write durations in Go's syntax (`30m`, `1h30m`, `1.5h`).

use std::time::Duration;

/// Nanoseconds per unit of Go's duration syntax.
const GO_UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// The longest duration Go has: `i64::MAX` nanoseconds.
const GO_NANOS_MAX: u128 = i64::MAX as u128;

/// A duration as Go's `time.ParseDuration` reads it: one or more decimal numbers, each with a
/// unit (`300ms`, `1.5h`, `2h45m`); `0` alone is zero. Exact: a fraction is scaled in integers,
/// then truncated to whole nanoseconds, as Go does. Negative durations are refused.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("{text:?} is not a duration ({why}); write e.g. 30m, 2h or 1h30m");
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return Err(bad(if rest.is_empty() { "it is empty" } else { "it is negative" }));
    }
    let too_long = || bad("it is longer than Go's longest duration, about 292 years");
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len())),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(bad("a number is missing"));
        }
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let (_, scale) =
            GO_UNITS.iter().find(|(name, _)| *name == unit).ok_or_else(|| bad("units are ns, us, ms, s, m, h"))?;
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| too_long())? };
        let mut part = whole.checked_mul(*scale).ok_or_else(too_long)?;
        // The fraction's digits, scaled by the unit; digits past nanoseconds change nothing.
        let mut place = *scale;
        for digit in fraction.bytes() {
            place /= 10;
            part += u128::from(digit - b'0') * place;
        }
        nanos = nanos.checked_add(part).filter(|nanos| *nanos <= GO_NANOS_MAX).ok_or_else(too_long)?;
        rest = after;
    }
    Ok(Duration::from_nanos(u64::try_from(nanos).map_err(|_| too_long())?))
}

/// `value / 10^digits` with its fraction, trailing zeros dropped (Go's `fmtFrac`).
fn with_fraction(value: u128, digits: u32) -> String {
    let divisor = 10u128.pow(digits);
    let (whole, fraction) = (value / divisor, value % divisor);
    if fraction == 0 {
        return whole.to_string();
    }
    let fraction = format!("{fraction:0width$}", width = digits as usize);
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

/// A duration as Go's `Duration.String` prints it (`1h30m0s`, `45s`, `1.5ms`, `250µs`), which
/// `parse_go_duration` reads back.
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    match nanos {
        0 => return "0s".into(),
        n if n < 1_000 => return format!("{n}ns"),
        n if n < 1_000_000 => return format!("{}µs", with_fraction(n, 3)),
        n if n < 1_000_000_000 => return format!("{}ms", with_fraction(n, 6)),
        _ => {}
    }
    let seconds = duration.as_secs();
    let second_text = format!(
        "{}s",
        with_fraction(u128::from(seconds % 60) * 1_000_000_000 + u128::from(duration.subsec_nanos()), 9)
    );
    match (seconds / 3600, seconds / 60 % 60) {
        (0, 0) => second_text,
        (0, minutes) => format!("{minutes}m{second_text}"),
        (hours, minutes) => format!("{hours}h{minutes}m{second_text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_and_print_as_go_does() {
        for (text, nanos) in [
            ("30m", 1_800_000_000_000u64),
            ("1h30m", 5_400_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("300ms", 300_000_000),
            ("4.1s", 4_100_000_000),
            ("2.3h", 8_280_000_000_000),
            (".5s", 500_000_000),
            ("1.0000000019s", 1_000_000_001),
            ("0", 0),
            ("+0", 0),
        ] {
            assert_eq!(parse_go_duration(text), Ok(Duration::from_nanos(nanos)), "{text}");
        }
        for bad in ["", "-5m", "5", "5d", "m", ".s", "1h-3m", "1e400h", "2562048h", "99999999999999999999999h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
        for (seconds, text) in [(5400, "1h30m0s"), (45, "45s"), (7200, "2h0m0s"), (0, "0s"), (61, "1m1s")] {
            assert_eq!(format_go_duration(Duration::from_secs(seconds)), text);
            assert_eq!(parse_go_duration(text), Ok(Duration::from_secs(seconds)), "{text} reads back");
        }
        for (nanos, text) in [
            (250_000_000u64, "250ms"),
            (1_500_000_000, "1.5s"),
            (1_500_000, "1.5ms"),
            (1_000, "1µs"),
            (999, "999ns"),
            (8_280_000_000_000, "2h18m0s"),
        ] {
            assert_eq!(format_go_duration(Duration::from_nanos(nanos)), text);
            assert_eq!(parse_go_duration(text), Ok(Duration::from_nanos(nanos)), "{text} reads back");
        }
    }
}
