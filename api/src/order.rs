//! Orders: automations the leader's controller fires, in the TOML of Gas City's `orders/*.toml`.
//!
//! ```toml
//! [order]
//! description = "Generate the daily digest"
//! formula = "mol-digest-generate"   # a formula stored in the same namespace
//! gate = "cooldown"                 # or `trigger`: cooldown, cron, event, condition, manual
//! interval = "24h"                  # Go duration syntax
//! pool = "dog"                      # route the wisp to a pool (or `agent = "..."`)
//! [order.vars]
//! scope = "all"
//! ```
//!
//! Triggers:
//! - `cooldown`: `interval` after the last firing (never fired: at once).
//! - `cron`: `schedule`, five fields (minute hour day-of-month month day-of-week, with `*`, lists,
//!   ranges, steps and names) or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`, read in
//!   `timezone` (an IANA name, default UTC). A day-of-month and a day-of-week that are both
//!   restricted match either, as cron does.
//! - `event`: `on`, an event type; fires once for all such events applied since its last firing.
//! - `condition`: `[order.when]`, a bead query (`status` ready, open, in_progress or blocked;
//!   optional `label` and `type`; `at_least`, default 1), at most once per `interval` (default
//!   1m) while it holds. Gas City's `check` runs a shell command; a leader never runs user
//!   commands, so `check` is refused with this alternative named.
//! - `manual`: only `strand order run NAME`.
//!
//! `exec` orders are refused for the same reason as `check`. `timeout` is accepted and has no
//! effect: a firing is one replicated command, with nothing left running.
//!
//! Everything here is pure and deterministic (time zones come from the compiled-in database), so
//! the state machine judges a firing at apply time and every replica agrees.

use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use serde::{Deserialize, Serialize};

use crate::go_duration::parse_go_duration;
use crate::limits::{DESCRIPTION_BYTES_MAX, FORMULA_VARS_MAX, NAME_BYTES_MAX, ORDER_BYTES_MAX, ORDER_INTERVAL_MS_MIN};
use crate::model::Timestamp;
use crate::outcome::Refusal;

/// How often a `condition` order may fire while its condition holds, when it names no interval.
pub const CONDITION_INTERVAL_MS_DEFAULT: u64 = 60_000;

/// A parsed, checked order.
#[derive(Clone, Debug, PartialEq)]
pub struct Order {
    /// Its name (from the file name, or `--name`).
    pub name: String,
    /// What it does.
    pub description: String,
    /// The formula a firing cooks, stored in the same namespace.
    pub formula: String,
    /// When it fires.
    pub trigger: Trigger,
    /// Where the cooked wisp is routed (none: it stays unrouted).
    pub target: Option<Target>,
    /// Values of the formula's `{{var}}` placeholders.
    pub vars: BTreeMap<String, String>,
    /// A disabled order fires only through `strand order run`.
    pub enabled: bool,
}

/// Where a firing routes its wisp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A pool (`pool = "..."`), as `sling --pool` does.
    Pool(String),
    /// An agent (`agent = "..."`), as `sling` does.
    Agent(String),
}

/// When an order fires.
#[derive(Clone, Debug, PartialEq)]
pub enum Trigger {
    /// `interval` after the last firing.
    Cooldown {
        /// Milliseconds.
        interval_ms: u64,
    },
    /// On each minute the schedule matches, in its time zone.
    Cron {
        /// The parsed schedule.
        schedule: Cron,
        /// Its text, as written.
        text: String,
        /// The time zone it is read in.
        timezone: chrono_tz::Tz,
    },
    /// When an event of this type is applied.
    Event {
        /// The event type (`bead.closed`, ...).
        on: String,
    },
    /// While a bead query counts at least `at_least`, at most once per interval.
    Condition {
        /// The query.
        when: Condition,
        /// Milliseconds between firings at least.
        interval_ms: u64,
    },
    /// Only when run by hand.
    Manual,
}

/// A `condition` trigger's bead query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// `ready`, `open`, `in_progress` or `blocked`.
    pub status: String,
    /// Only beads with this label.
    #[serde(default)]
    pub label: Option<String>,
    /// Only beads of this type.
    #[serde(default, rename = "type")]
    pub bead_type: Option<String>,
    /// Fires when at least this many beads match (default 1).
    #[serde(default = "one")]
    pub at_least: u64,
}

fn one() -> u64 {
    1
}

/// The statuses a condition may count.
pub const CONDITION_STATUSES: [&str; 4] = ["ready", "open", "in_progress", "blocked"];

/// What the state machine keeps about an order's firings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRuns {
    /// How many times it fired (triggers and manual runs alike).
    pub fired: u64,
    /// When it last fired.
    pub last_fired_at: Option<Timestamp>,
    /// The last window fired: the minute of a cron firing, the last event sequence number a
    /// firing of an event order took in, the time of a cooldown or condition firing.
    pub last_window: u64,
    /// The tracking bead of the last firing.
    pub last_run: Option<String>,
}

/// The `[order]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    order: Raw,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    description: String,
    formula: Option<String>,
    exec: Option<String>,
    gate: Option<String>,
    trigger: Option<String>,
    interval: Option<String>,
    schedule: Option<String>,
    timezone: Option<String>,
    check: Option<String>,
    on: Option<String>,
    when: Option<Condition>,
    pool: Option<String>,
    agent: Option<String>,
    timeout: Option<String>,
    enabled: Option<bool>,
    #[serde(default)]
    vars: BTreeMap<String, String>,
}

impl Order {
    /// Parses and checks an order named `name`; a refusal names the field at fault.
    pub fn parse(name: &str, source: &str) -> Result<Order, Refusal> {
        check_name(name)?;
        let bad = |field: &str, why: String| Refusal::Invalid(format!("order {name:?}: {field}: {why}"));
        if source.len() > ORDER_BYTES_MAX {
            return Err(bad("source", format!("{} bytes is over the limit of {ORDER_BYTES_MAX}", source.len())));
        }
        let file: File = toml::from_str(source)
            .map_err(|error| Refusal::Invalid(format!("order {name:?}: {}", error.message().trim_end())))?;
        let raw = file.order;
        if raw.exec.is_some() {
            return Err(bad(
                "exec",
                "Strand's controller never runs shell commands; give a formula to cook, or run the command from cron or Gas City's controller".into(),
            ));
        }
        if raw.check.is_some() {
            return Err(bad(
                "check",
                "Strand's controller never runs shell commands; use gate = \"condition\" with an [order.when] bead query (status, label, type, at_least)".into(),
            ));
        }
        if raw.description.len() > DESCRIPTION_BYTES_MAX {
            return Err(bad("description", format!("over {DESCRIPTION_BYTES_MAX} bytes")));
        }
        let formula = raw
            .formula
            .filter(|formula| !formula.trim().is_empty())
            .ok_or_else(|| bad("formula", "required: the name of a formula stored with `strand formula put`".into()))?;
        if let Some(timeout) = &raw.timeout {
            parse_go_duration(timeout).map_err(|why| bad("timeout", why))?;
        }
        let target = match (raw.pool, raw.agent) {
            (Some(_), Some(_)) => return Err(bad("pool", "give pool or agent, not both".into())),
            (Some(pool), None) => Some(Target::Pool(check_target("pool", &pool).map_err(|why| bad("pool", why))?)),
            (None, Some(agent)) => Some(Target::Agent(check_target("agent", &agent).map_err(|why| bad("agent", why))?)),
            (None, None) => None,
        };
        if raw.vars.len() > FORMULA_VARS_MAX {
            return Err(bad("vars", format!("more than {FORMULA_VARS_MAX} variables")));
        }
        let gate = match (raw.gate, raw.trigger) {
            (Some(_), Some(_)) => {
                return Err(bad("trigger", "give gate or trigger, not both (they are one key)".into()));
            }
            (Some(gate), None) | (None, Some(gate)) => gate,
            (None, None) => {
                return Err(bad("gate", "required: cooldown, cron, event, condition or manual".into()));
            }
        };
        let interval = |default: Option<u64>| -> Result<u64, Refusal> {
            let interval = match (&raw.interval, default) {
                (Some(text), _) => parse_go_duration(text).map_err(|why| bad("interval", why))?.as_millis(),
                (None, Some(default)) => u128::from(default),
                (None, None) => return Err(bad("interval", format!("required by gate = {gate:?} (e.g. \"15m\")"))),
            };
            if interval < u128::from(ORDER_INTERVAL_MS_MIN) {
                return Err(bad("interval", format!("at least {} s", ORDER_INTERVAL_MS_MIN / 1000)));
            }
            u64::try_from(interval).map_err(|_| bad("interval", "too long".into()))
        };
        let unused = |field: &str, value: bool| -> Result<(), Refusal> {
            if value { Err(bad(field, format!("has no meaning for gate = {gate:?}"))) } else { Ok(()) }
        };
        let trigger = match gate.as_str() {
            "cooldown" => {
                unused("schedule", raw.schedule.is_some())?;
                unused("on", raw.on.is_some())?;
                unused("when", raw.when.is_some())?;
                Trigger::Cooldown { interval_ms: interval(None)? }
            }
            "cron" => {
                unused("interval", raw.interval.is_some())?;
                unused("on", raw.on.is_some())?;
                unused("when", raw.when.is_some())?;
                let text = raw
                    .schedule
                    .ok_or_else(|| bad("schedule", "required by gate = \"cron\" (e.g. \"0 9 * * 1-5\")".into()))?;
                let schedule = Cron::parse(&text).map_err(|why| bad("schedule", why))?;
                let timezone = match &raw.timezone {
                    None => chrono_tz::UTC,
                    Some(zone) => chrono_tz::Tz::from_str(zone).map_err(|_| {
                        bad(
                            "timezone",
                            format!("{zone:?} is not an IANA time zone name (e.g. \"Europe/Berlin\", \"UTC\")"),
                        )
                    })?,
                };
                Trigger::Cron { schedule, text, timezone }
            }
            "event" => {
                unused("interval", raw.interval.is_some())?;
                unused("schedule", raw.schedule.is_some())?;
                unused("when", raw.when.is_some())?;
                let on = raw.on.filter(|on| !on.trim().is_empty()).ok_or_else(|| {
                    bad("on", "required by gate = \"event\": an event type such as \"bead.closed\"".into())
                })?;
                if on.len() > NAME_BYTES_MAX || on.contains(char::is_whitespace) {
                    return Err(bad("on", format!("{on:?} is not an event type")));
                }
                Trigger::Event { on }
            }
            "condition" => {
                unused("schedule", raw.schedule.is_some())?;
                unused("on", raw.on.is_some())?;
                let when = raw.when.ok_or_else(|| {
                    bad("when", "required by gate = \"condition\": [order.when] with status, and optionally label, type, at_least".into())
                })?;
                if !CONDITION_STATUSES.contains(&when.status.as_str()) {
                    return Err(bad(
                        "when.status",
                        format!("{:?}: use one of {}", when.status, CONDITION_STATUSES.join(", ")),
                    ));
                }
                if when.at_least == 0 {
                    return Err(bad("when.at_least", "must be at least 1".into()));
                }
                Trigger::Condition { when, interval_ms: interval(Some(CONDITION_INTERVAL_MS_DEFAULT))? }
            }
            "manual" => {
                unused("interval", raw.interval.is_some())?;
                unused("schedule", raw.schedule.is_some())?;
                unused("on", raw.on.is_some())?;
                unused("when", raw.when.is_some())?;
                Trigger::Manual
            }
            other => {
                return Err(bad(
                    "gate",
                    format!("unknown trigger {other:?}; use cooldown, cron, event, condition or manual"),
                ));
            }
        };
        if raw.timezone.is_some() && !matches!(trigger, Trigger::Cron { .. }) {
            return Err(bad("timezone", "has meaning only for gate = \"cron\"".into()));
        }
        Ok(Order {
            name: name.to_string(),
            description: raw.description,
            formula,
            trigger,
            target,
            vars: raw.vars,
            enabled: raw.enabled.unwrap_or(true),
        })
    }

    /// The trigger in a few words: `cooldown 15m0s`, `cron "0 9 * * 1-5" (Europe/Berlin)`, ...
    pub fn trigger_text(&self) -> String {
        let duration = |ms: u64| crate::go_duration::format_go_duration(std::time::Duration::from_millis(ms));
        match &self.trigger {
            Trigger::Cooldown { interval_ms } => format!("cooldown {}", duration(*interval_ms)),
            Trigger::Cron { text, timezone, .. } => format!("cron {text:?} ({timezone})"),
            Trigger::Event { on } => format!("event {on}"),
            Trigger::Condition { when, interval_ms } => {
                let mut text = format!("condition {} >= {}", when.status, when.at_least);
                if let Some(label) = &when.label {
                    text.push_str(&format!(" label={label}"));
                }
                if let Some(bead_type) = &when.bead_type {
                    text.push_str(&format!(" type={bead_type}"));
                }
                format!("{text}, every {} at most", duration(*interval_ms))
            }
            Trigger::Manual => "manual".into(),
        }
    }

    /// The window a firing at `now` takes, when the trigger's time allows one: `None` when it is
    /// not due by time. Event and condition orders also need the namespace's judgement (the
    /// state machine adds it); a manual order is never due.
    pub fn time_window(&self, runs: &OrderRuns, now: Timestamp) -> Option<u64> {
        let now_ms = u64::try_from(now.0).unwrap_or(0);
        let cooled = |interval_ms: u64| match runs.last_fired_at {
            None => true,
            Some(last) => now.0.saturating_sub(last.0) >= i64::try_from(interval_ms).unwrap_or(i64::MAX),
        };
        match &self.trigger {
            Trigger::Cooldown { interval_ms } | Trigger::Condition { interval_ms, .. } => {
                cooled(*interval_ms).then_some(now_ms)
            }
            Trigger::Cron { schedule, timezone, .. } => {
                let minute = now_ms / 60_000;
                (minute > runs.last_window && schedule.matches_minute(minute, timezone)).then_some(minute)
            }
            Trigger::Event { .. } => Some(runs.last_window),
            Trigger::Manual => None,
        }
    }

    /// When the trigger is next due by time, as far as time alone says (milliseconds).
    pub fn next_due_ms(&self, runs: &OrderRuns, now: Timestamp) -> Option<i64> {
        match &self.trigger {
            Trigger::Cooldown { interval_ms } | Trigger::Condition { interval_ms, .. } => {
                Some(match runs.last_fired_at {
                    None => now.0,
                    Some(last) => last.0.saturating_add(i64::try_from(*interval_ms).unwrap_or(i64::MAX)).max(now.0),
                })
            }
            Trigger::Cron { schedule, timezone, .. } => {
                let from = (u64::try_from(now.0).unwrap_or(0) / 60_000).max(runs.last_window + 1);
                schedule.next_minute(from, timezone).map(|minute| (minute * 60_000) as i64)
            }
            Trigger::Event { .. } | Trigger::Manual => None,
        }
    }
}

fn check_name(name: &str) -> Result<(), Refusal> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if name.is_empty() || name.len() > NAME_BYTES_MAX || !name.chars().all(fine) || name.starts_with('.') {
        return Err(Refusal::Invalid(format!(
            "order name {name:?} is not valid: use letters, digits, '-', '_', '.' and ':' (at most {NAME_BYTES_MAX} bytes)"
        )));
    }
    Ok(())
}

fn check_target(field: &str, name: &str) -> Result<String, String> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX || name.contains(char::is_whitespace) {
        return Err(format!("{name:?} is not a {field} name; give a name without spaces"));
    }
    Ok(name.to_string())
}

/// A five-field cron schedule, as sets of the values each field allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Day-of-month was not `*`.
    days_restricted: bool,
    /// Day-of-week was not `*`.
    weekdays_restricted: bool,
}

const MONTH_NAMES: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    /// Parses `minute hour day-of-month month day-of-week`, or a macro such as `@daily`.
    pub fn parse(text: &str) -> Result<Cron, String> {
        let expanded = match text.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(format!("{other:?} is not a macro; use @hourly, @daily, @weekly, @monthly or @yearly"));
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "{text:?} has {} fields; a schedule has five: minute hour day-of-month month day-of-week",
                fields.len()
            ));
        }
        let minutes = field(fields[0], "minute", 0, 59, &[])?;
        let hours = field(fields[1], "hour", 0, 23, &[])?;
        let days = field(fields[2], "day-of-month", 1, 31, &[])?;
        let months = field(fields[3], "month", 1, 12, &MONTH_NAMES)?;
        let mut weekdays = field(fields[4], "day-of-week", 0, 7, &WEEKDAY_NAMES)?;
        // 7 is Sunday too.
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        Ok(Cron {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: (weekdays & 0x7f) as u8,
            days_restricted: fields[2] != "*",
            weekdays_restricted: fields[4] != "*",
        })
    }

    fn day_matches(&self, time: &DateTime<chrono_tz::Tz>) -> bool {
        let day = self.days & (1 << time.day()) != 0;
        let weekday = self.weekdays & (1 << time.weekday().num_days_from_sunday()) != 0;
        let day_ok = match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => day || weekday,
            _ => day && weekday,
        };
        day_ok && self.months & (1 << time.month()) != 0
    }

    /// Whether the schedule matches the minute `minute` (minutes since the Unix epoch), read in
    /// `timezone`.
    pub fn matches_minute(&self, minute: u64, timezone: &chrono_tz::Tz) -> bool {
        let Some(time) = local(minute, timezone) else { return false };
        self.day_matches(&time) && self.hours & (1 << time.hour()) != 0 && self.minutes & (1 << time.minute()) != 0
    }

    /// The first minute at or after `from` that matches, within about four years.
    pub fn next_minute(&self, from: u64, timezone: &chrono_tz::Tz) -> Option<u64> {
        let mut minute = from;
        let end = from + 4 * 366 * 24 * 60;
        while minute < end {
            let time = local(minute, timezone)?;
            if !self.day_matches(&time) {
                // The rest of this local day cannot match.
                minute += u64::from((24 * 60 - (time.hour() * 60 + time.minute())).max(1));
                continue;
            }
            if self.hours & (1 << time.hour()) == 0 {
                minute += u64::from((60 - time.minute()).max(1));
                continue;
            }
            if self.minutes & (1 << time.minute()) != 0 {
                return Some(minute);
            }
            minute += 1;
        }
        None
    }
}

fn local(minute: u64, timezone: &chrono_tz::Tz) -> Option<DateTime<chrono_tz::Tz>> {
    let seconds = i64::try_from(minute.checked_mul(60)?).ok()?;
    Some(Utc.timestamp_opt(seconds, 0).single()?.with_timezone(timezone))
}

/// One cron field as a bit set: `*`, `N`, `A-B`, any of those with `/STEP`, lists of them, and
/// names (`jan`, `mon`) where `names` gives them (index 0 is `low`).
fn field(text: &str, what: &str, low: u64, high: u64, names: &[&str]) -> Result<u64, String> {
    let bad = |why: String| format!("{what} field {text:?}: {why}");
    let value = |part: &str| -> Result<u64, String> {
        if let Some(index) = names.iter().position(|name| name.eq_ignore_ascii_case(part)) {
            return Ok(low + index as u64);
        }
        let number: u64 = part.parse().map_err(|_| bad(format!("{part:?} is not a number")))?;
        if number < low || number > high {
            return Err(bad(format!("{number} is outside {low}-{high}")));
        }
        Ok(number)
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u64 = step.parse().map_err(|_| bad(format!("step {step:?} is not a number")))?;
                if step == 0 {
                    return Err(bad("a step of 0".into()));
                }
                (range, step)
            }
            None => (part, 1),
        };
        let (start, end) = match range {
            "*" => (low, high),
            range => match range.split_once('-') {
                Some((start, end)) => (value(start)?, value(end)?),
                None if step > 1 => (value(range)?, high),
                None => {
                    let single = value(range)?;
                    (single, single)
                }
            },
        };
        if start > end {
            return Err(bad(format!("the range {start}-{end} runs backwards")));
        }
        for number in (start..=end).step_by(step as usize) {
            bits |= 1 << number;
        }
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute_of(text: &str) -> u64 {
        (DateTime::parse_from_rfc3339(text).expect("a time").timestamp() / 60) as u64
    }

    #[test]
    fn gas_city_orders_parse() {
        let order = Order::parse(
            "digest-generate",
            "[order]\ndescription = \"Generate daily code digest\"\nformula = \"mol-digest-generate\"\ngate = \"cooldown\"\ninterval = \"24h\"\npool = \"dog\"\n",
        )
        .expect("parses");
        assert_eq!(order.trigger, Trigger::Cooldown { interval_ms: 86_400_000 });
        assert_eq!(order.target, Some(Target::Pool("dog".into())));
        assert!(order.enabled);
        assert_eq!(order.trigger_text(), "cooldown 24h0m0s");
    }

    #[test]
    fn bad_orders_name_the_field() {
        for (source, field) in [
            ("[order]\nformula = \"f\"\ngate = \"hourly\"\n", "gate: unknown trigger"),
            ("[order]\nformula = \"f\"\ngate = \"cron\"\nschedule = \"61 * * * *\"\n", "schedule: minute field"),
            ("[order]\nformula = \"f\"\ngate = \"cron\"\nschedule = \"* * *\"\n", "schedule:"),
            (
                "[order]\nformula = \"f\"\ngate = \"cron\"\nschedule = \"0 9 * * *\"\ntimezone = \"Mars/Olympus\"\n",
                "timezone:",
            ),
            ("[order]\nformula = \"f\"\ngate = \"cooldown\"\n", "interval: required"),
            ("[order]\nformula = \"f\"\ngate = \"cooldown\"\ninterval = \"5 minutes\"\n", "interval:"),
            ("[order]\nformula = \"f\"\ngate = \"cooldown\"\ninterval = \"10ms\"\n", "interval: at least"),
            ("[order]\ngate = \"manual\"\n", "formula: required"),
            ("[order]\nexec = \"rm -rf /\"\ngate = \"manual\"\n", "exec:"),
            ("[order]\nformula = \"f\"\ngate = \"condition\"\ncheck = \"true\"\n", "check:"),
            ("[order]\nformula = \"f\"\ngate = \"event\"\n", "on: required"),
            ("[order]\nformula = \"f\"\ngate = \"condition\"\n[order.when]\nstatus = \"done\"\n", "when.status"),
            ("[order]\nformula = \"f\"\ngate = \"manual\"\npool = \"a\"\nagent = \"b\"\n", "pool:"),
            ("[order]\nformula = \"f\"\ngate = \"manual\"\npool = \"two words\"\n", "pool:"),
            ("[order]\nformula = \"f\"\ngate = \"manual\"\ncolour = \"red\"\n", "unknown field `colour`"),
            ("[order]\nformula = \"f\"\ngate = \"manual\"\ninterval = \"5m\"\n", "interval: has no meaning"),
        ] {
            match Order::parse("o", source) {
                Err(Refusal::Invalid(message)) => assert!(message.contains(field), "{source}: {message}"),
                other => panic!("{source}: {other:?}"),
            }
        }
        assert!(Order::parse("bad name", "[order]\nformula = \"f\"\ngate = \"manual\"\n").is_err());
    }

    #[test]
    fn cron_fields_read_as_cron_does() {
        let weekdays_at_nine = Cron::parse("0 9 * * mon-fri").expect("parses");
        let utc = chrono_tz::UTC;
        // 2026-11-23 is a Monday.
        assert!(weekdays_at_nine.matches_minute(minute_of("2026-11-23T09:00:00Z"), &utc));
        assert!(!weekdays_at_nine.matches_minute(minute_of("2026-11-23T09:01:00Z"), &utc));
        assert!(!weekdays_at_nine.matches_minute(minute_of("2026-11-22T09:00:00Z"), &utc), "a Sunday");
        let quarter = Cron::parse("*/15 * * * *").expect("parses");
        assert!(quarter.matches_minute(minute_of("2026-11-23T10:45:00Z"), &utc));
        assert!(!quarter.matches_minute(minute_of("2026-11-23T10:46:00Z"), &utc));
        // Day-of-month and day-of-week both restricted: either matches.
        let either = Cron::parse("0 0 1 * sun").expect("parses");
        assert!(either.matches_minute(minute_of("2026-11-22T00:00:00Z"), &utc), "a Sunday");
        assert!(either.matches_minute(minute_of("2026-12-01T00:00:00Z"), &utc), "the first");
        assert!(!either.matches_minute(minute_of("2026-11-24T00:00:00Z"), &utc));
        assert_eq!(Cron::parse("@daily"), Cron::parse("0 0 * * *"));
        assert_eq!(Cron::parse("0 0 * * 7"), Cron::parse("0 0 * * 0"));
        // In a time zone: 09:00 in Berlin is 08:00 UTC in November.
        let berlin: chrono_tz::Tz = "Europe/Berlin".parse().expect("a zone");
        assert!(weekdays_at_nine.matches_minute(minute_of("2026-11-23T08:00:00Z"), &berlin));
        assert!(!weekdays_at_nine.matches_minute(minute_of("2026-11-23T09:00:00Z"), &berlin));
        assert_eq!(
            weekdays_at_nine.next_minute(minute_of("2026-11-21T12:00:00Z"), &berlin),
            Some(minute_of("2026-11-23T08:00:00Z"))
        );
        for bad in [
            "",
            "* * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 8",
            "*/0 * * * *",
            "5-1 * * * *",
            "@often",
        ] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn windows_come_once() {
        let cooldown =
            Order::parse("c", "[order]\nformula = \"f\"\ngate = \"cooldown\"\ninterval = \"1m\"\n").expect("parses");
        let mut runs = OrderRuns::default();
        assert_eq!(cooldown.time_window(&runs, Timestamp(1_000)), Some(1_000), "never fired: due at once");
        runs.last_fired_at = Some(Timestamp(1_000));
        assert_eq!(cooldown.time_window(&runs, Timestamp(60_999)), None);
        assert_eq!(cooldown.time_window(&runs, Timestamp(61_000)), Some(61_000));
        let cron =
            Order::parse("k", "[order]\nformula = \"f\"\ngate = \"cron\"\nschedule = \"* * * * *\"\n").expect("parses");
        let mut runs = OrderRuns::default();
        let minute = cron.time_window(&runs, Timestamp(120_500)).expect("every minute matches");
        assert_eq!(minute, 2);
        runs.last_window = minute;
        assert_eq!(cron.time_window(&runs, Timestamp(179_000)), None, "once per minute");
        assert_eq!(cron.time_window(&runs, Timestamp(180_000)), Some(3));
    }
}
