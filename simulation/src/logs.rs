//! What each simulated node logs, kept per node while a run asks for it
//! ([`crate::run::RunConfig::node_logs`]), for a failing seed's artifacts.
//!
//! turmoil runs each host's software inside a span `node` naming the host (`n1`, `agent-0`...):
//! the [`layer`] files each event at info and above under the node whose host span it is in,
//! stamped with simulated time. Events of the agents' hosts and of the simulator itself are not
//! kept.
//!
//! Invariant: capturing only formats events; it draws from no generator and reads no clock but
//! the simulated one, so a run traces the same with its nodes' logs kept or not.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::DynFilterFn;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Lines kept per node; later ones are counted, not kept.
pub const LINES_PER_NODE_MAX: usize = 50_000;

#[derive(Default)]
struct Capture {
    lines: BTreeMap<u64, Vec<String>>,
    dropped: BTreeMap<u64, usize>,
}

thread_local! {
    /// The capture of the run this thread simulates, while one is on.
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// Starts keeping the nodes' logs of the run on this thread.
pub fn start() {
    CAPTURE.with(|capture| *capture.borrow_mut() = Some(Capture::default()));
}

/// Stops, and answers what each node logged.
pub fn finish() -> BTreeMap<u64, Vec<String>> {
    let Some(capture) = CAPTURE.with(|capture| capture.borrow_mut().take()) else { return BTreeMap::new() };
    let mut lines = capture.lines;
    for (node, dropped) in capture.dropped {
        lines.entry(node).or_default().push(format!("... and {dropped} more lines, not kept"));
    }
    lines
}

fn capturing() -> bool {
    CAPTURE.with(|capture| capture.borrow().is_some())
}

/// The span in which turmoil runs a host's software.
const HOST_SPAN: &str = "node";

/// The layer that keeps the nodes' events: while a capture is on, it sees the host spans (turmoil
/// enters one for each host at every step) and events at info and above; otherwise nothing, so
/// a run that keeps no logs pays for no span.
pub fn layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    // Dynamic: whether a capture is on changes between runs, so no callsite's answer is cached.
    let filter = DynFilterFn::new(|metadata, _| {
        let wanted =
            if metadata.is_span() { metadata.name() == HOST_SPAN } else { *metadata.level() <= tracing::Level::INFO };
        wanted && capturing()
    })
    .with_max_level_hint(LevelFilter::INFO);
    NodeLogs.with_filter(filter)
}

struct NodeLogs;

/// The node a host span names (`n3` is node 3), kept in the span's extensions.
struct HostNode(u64);

/// Reads a host span's `name` field.
#[derive(Default)]
struct HostName(Option<u64>);

impl Visit for HostName {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "name" {
            self.0 = format!("{value:?}").trim_matches('"').strip_prefix('n').and_then(|id| id.parse().ok());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "name" {
            self.0 = value.strip_prefix('n').and_then(|id| id.parse().ok());
        }
    }
}

/// Writes an event's message, then its other fields as `name=value`.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}

impl<S> Layer<S> for NodeLogs
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attributes: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut name = HostName::default();
        attributes.record(&mut name);
        if let (Some(node), Some(span)) = (name.0, ctx.span(id)) {
            span.extensions_mut().insert(HostNode(node));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(node) = ctx
            .event_scope(event)
            .and_then(|mut scope| scope.find_map(|span| span.extensions().get::<HostNode>().map(|host| host.0)))
        else {
            return;
        };
        CAPTURE.with(|capture| {
            let mut capture = capture.borrow_mut();
            let Some(capture) = capture.as_mut() else { return };
            let lines = capture.lines.entry(node).or_default();
            if lines.len() >= LINES_PER_NODE_MAX {
                *capture.dropped.entry(node).or_default() += 1;
                return;
            }
            let mut line = Line::default();
            event.record(&mut line);
            let metadata = event.metadata();
            lines.push(format!(
                "[{:>8.3}s] {:5} {}: {}{}",
                turmoil::sim_elapsed().unwrap_or_default().as_secs_f64(),
                metadata.level(),
                metadata.target(),
                line.message,
                line.fields
            ));
        });
    }
}
