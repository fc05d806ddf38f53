//! Values several commands read from their command line, as `bd` writes them (priorities, times,
//! lease lengths), durations and node ids, and the wall clock they are judged against. Each
//! parser's error says what it accepts; clap prints it after the flag it is about.

use api::model::Timestamp;

/// A priority as bd writes it: 0 to 4, or P0 to P4.
pub fn parse_priority(text: &str) -> Result<u8, String> {
    let digits = text.strip_prefix(['P', 'p']).unwrap_or(text);
    match digits.parse::<u8>() {
        Ok(priority) if priority <= 4 => Ok(priority),
        _ => Err(format!("invalid priority {text:?} (expected 0-4 or P0-P4, not words like high/medium/low)")),
    }
}

/// A time as bd takes it: RFC 3339, a date (midnight UTC), or relative to now (`+2d`, `-6h`).
pub fn parse_time(text: &str) -> Result<i64, String> {
    if let Some(time) = Timestamp::parse_rfc3339(text) {
        return Ok(time.0);
    }
    if let Some(midnight) = Timestamp::parse_rfc3339(&format!("{text}T00:00:00Z")) {
        return Ok(midnight.0);
    }
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let unit_ms = match rest.chars().last() {
        Some('h') => 3_600_000,
        Some('d') => 86_400_000,
        Some('w') => 7 * 86_400_000,
        _ => return Err(format!("invalid time {text:?}; write RFC 3339, YYYY-MM-DD, or +N/-N with h, d or w")),
    };
    let count: i64 = rest[..rest.len() - 1].parse().map_err(|_| format!("invalid time {text:?}"))?;
    Ok(now_ms() + sign * count * unit_ms)
}

/// A duration (`5s`, `2m`, `1h30m`). A negative one is refused as such: an option that takes a
/// duration takes a leading hyphen too (`main::with_negative_values`), so that it gets here.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    duration_like(text, "5s or 2m")
}

/// A duration, refused with `example` as what to write instead.
fn duration_like(text: &str, example: &str) -> Result<std::time::Duration, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!("a duration cannot be negative; write one such as {example}"));
    }
    humantime::parse_duration(text).map_err(|error| {
        format!("not a duration ({error}); write a duration such as {example}, which cannot be negative")
    })
}

/// A node id: a whole number of 1 or more (0 is no node).
pub fn parse_node_id(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(id) if id >= 1 => Ok(id),
        _ => Err("a node id is a whole number of 1 or more".into()),
    }
}

/// `HOST:PORT` with a port from 1 to 65535 (a member's peer or client address).
pub fn parse_host_port(text: &str) -> Result<String, String> {
    if api::validate::is_host_port(text) {
        Ok(text.to_string())
    } else {
        Err("not HOST:PORT with a port from 1 to 65535 (for example 10.0.0.4:7500)".into())
    }
}

/// A lease's length (`10m`, `1h`, `90s`) in milliseconds, within what a cluster grants.
pub fn parse_lease(text: &str) -> Result<u64, String> {
    let duration = duration_like(text, "10m")?;
    let lease_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    api::validate::validate_lease(lease_ms).map_err(|refusal| refusal.to_string())?;
    Ok(lease_ms)
}

/// A span of milliseconds in whole seconds, as `1m 5s` (negative: `-1m 5s`).
pub fn span(ms: i64) -> String {
    let text = humantime::format_duration(std::time::Duration::from_secs(ms.unsigned_abs() / 1000)).to_string();
    if ms < 0 { format!("-{text}") } else { text }
}

/// The wall clock, in milliseconds (for relative times and `ready --sort hybrid`).
#[allow(clippy::disallowed_methods)]
pub fn now_ms() -> i64 {
    let elapsed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
}
