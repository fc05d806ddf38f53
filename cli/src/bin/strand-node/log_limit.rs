//! A node's log, rate-limited: a warning or error that repeats (the same call site with the same
//! fields, so per member and per cause) is written at once the first time, then at most once per
//! [`REPEAT_WINDOW`], with the count of those left out since. A node that cannot reach a member,
//! or that hears from another cluster, would otherwise write several lines a second for as long
//! as it lasts. Lines below warning pass untouched, and so does the first of every kind.
//!
//! Invariant: no warning or error kind goes unseen: the first occurrence is written at once, and
//! a repeat is dropped only while one like it was written within the window.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// How long a written warning silences the ones like it.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(10);

/// Most kinds of line remembered at once.
const KINDS_MAX: usize = 10_000;

/// openraft lines that every healthy start writes and that call for nothing.
const BENIGN: &[&str] = &["A message will be ignored because Leader vote changed"];

thread_local! {
    /// How many lines like the one being written were left out before it (set by the limiter as
    /// it lets the line through, read by the formatter that writes it on the same thread).
    static LEFT_OUT: Cell<u64> = const { Cell::new(0) };
}

/// What the limiter remembers of one kind of line.
struct Seen {
    written_at: Instant,
    left_out: u64,
}

/// The layer that drops repeats (see the module header).
#[derive(Default)]
pub struct Limiter {
    seen: Mutex<HashMap<u64, Seen>>,
}

impl Limiter {
    /// Whether a line of kind `key` is written at `now`, and how many like it were left out
    /// since the last one written.
    fn admit(&self, key: u64, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().expect("the log limiter lock is never poisoned");
        match seen.get_mut(&key) {
            Some(entry) if now.duration_since(entry.written_at) < REPEAT_WINDOW => {
                entry.left_out += 1;
                None
            }
            Some(entry) => {
                let left_out = std::mem::take(&mut entry.left_out);
                entry.written_at = now;
                Some(left_out)
            }
            None => {
                if seen.len() >= KINDS_MAX {
                    seen.retain(|_, entry| now.duration_since(entry.written_at) < REPEAT_WINDOW);
                    if seen.len() >= KINDS_MAX {
                        // A storm of distinct kinds: forget them all rather than grow (their
                        // repeats are then written once more, never dropped unseen).
                        seen.clear();
                    }
                }
                seen.insert(key, Seen { written_at: now, left_out: 0 });
                Some(0)
            }
        }
    }
}

/// Hashes an event's fields, and notes its message.
#[derive(Default)]
struct Kind {
    hasher: std::collections::hash_map::DefaultHasher,
    message: String,
}

impl Visit for Kind {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        field.name().hash(&mut self.hasher);
        text.hash(&mut self.hasher);
        if field.name() == "message" {
            self.message = text;
        }
    }
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for Limiter {
    fn event_enabled(&self, event: &Event<'_>, _cx: Context<'_, S>) -> bool {
        let metadata = event.metadata();
        LEFT_OUT.with(|left_out| left_out.set(0));
        if *metadata.level() > Level::WARN {
            return true;
        }
        let mut kind = Kind::default();
        event.record(&mut kind);
        if metadata.target().starts_with("openraft") && BENIGN.iter().any(|line| kind.message.contains(line)) {
            return false;
        }
        metadata.callsite().hash(&mut kind.hasher);
        match self.admit(kind.hasher.finish(), Instant::now()) {
            Some(left_out) => {
                LEFT_OUT.with(|cell| cell.set(left_out));
                true
            }
            None => false,
        }
    }
}

/// Writes a line as `inner` does, followed by how many lines like it were left out before it.
pub struct Annotated<E>(pub E);

impl<S, N, E> FormatEvent<S, N> for Annotated<E>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    E: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let left_out = LEFT_OUT.with(Cell::take);
        if left_out == 0 {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let line = line.trim_end_matches('\n');
        writeln!(writer, "{line} ({left_out} more like it in the last {} s)", REPEAT_WINDOW.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_left_out_within_the_window_and_counted_after_it() {
        let limiter = Limiter::default();
        let start = Instant::now();
        assert_eq!(limiter.admit(1, start), Some(0), "the first is written at once");
        assert_eq!(limiter.admit(2, start), Some(0), "another kind too");
        for step in 1..=5 {
            assert_eq!(limiter.admit(1, start + Duration::from_secs(step)), None);
        }
        assert_eq!(limiter.admit(1, start + REPEAT_WINDOW), Some(5), "then one line with the count");
        assert_eq!(limiter.admit(1, start + REPEAT_WINDOW + Duration::from_secs(1)), None);
    }
}
