//! A run over simulated time, for people: every operation of every client as a bar from its call
//! to its answer, coloured by outcome; the nemesis' faults and the operator's steps as marks; the
//! leader and its term as a band. [`Timeline::html`] renders it as one self-contained HTML page
//! (an inline SVG, no script), in the spirit of Jepsen's reports.
//!
//! Invariant: a timeline is built from what the run recorded (its history, its nodes'
//! observations, the nemesis' and operator's events), never from a second run.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cluster::Observation;
use crate::history::{Entry, OpResult};

/// What came of an operation, for its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied.
    Ok,
    /// Refused, with no effect.
    Refused,
    /// Unknown: the client gave up or the cluster could not tell.
    Unknown,
}

/// One operation of one client.
#[derive(Clone, Debug)]
pub struct TimedOp {
    /// The client's row.
    pub client: usize,
    /// When it was called.
    pub start: Duration,
    /// When it was answered, if it was.
    pub end: Option<Duration>,
    /// What it asked and what came back, shortened.
    pub label: String,
    /// Its outcome.
    pub outcome: Outcome,
}

/// A run over simulated time.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// The clients' names, by row.
    pub clients: Vec<String>,
    /// Every operation.
    pub ops: Vec<TimedOp>,
    /// The nemesis' faults and repairs, and the operator's steps.
    pub events: Vec<(Duration, String)>,
    /// Each change of leader: when it was seen, the node and its term.
    pub leaders: Vec<(Duration, u64, u64)>,
    /// When the faults were removed.
    pub healed_at: Duration,
    /// The simulated time the run covered.
    pub end: Duration,
}

/// Violations the page lists; `violations.txt` holds them all.
const VIOLATIONS_SHOWN: usize = 20;
/// Longest label kept for an operation.
const LABEL_CHARS_MAX: usize = 160;

fn shorten(text: String) -> String {
    if text.chars().count() <= LABEL_CHARS_MAX {
        return text;
    }
    let mut short: String = text.chars().take(LABEL_CHARS_MAX).collect();
    short.push('…');
    short
}

impl Timeline {
    /// Builds it from the run's records; `clients` names the history's agents by index.
    pub fn build(
        clients: Vec<String>,
        entries: &[Entry],
        observations: &[Observation],
        events: Vec<(Duration, String)>,
        healed_at: Duration,
        end: Duration,
    ) -> Timeline {
        let ops = entries
            .iter()
            .map(|entry| {
                let (outcome, answer) = match &entry.result {
                    OpResult::Ok(_) => (Outcome::Ok, "ok".to_string()),
                    OpResult::Refused(refusal) => (Outcome::Refused, format!("refused: {refusal:?}")),
                    OpResult::Unknown(why) => (Outcome::Unknown, format!("unknown: {why}")),
                    OpResult::Pending => (Outcome::Unknown, "pending".to_string()),
                };
                TimedOp {
                    client: entry.agent,
                    start: entry.invoked_at,
                    end: entry.completed_at,
                    label: shorten(format!("{:?} -> {answer}", entry.op)),
                    outcome,
                }
            })
            .collect();
        let mut leaders: Vec<(Duration, u64, u64)> = Vec::new();
        let mut sorted: Vec<&Observation> = observations.iter().filter(|seen| seen.leader).collect();
        sorted.sort_by_key(|seen| (seen.at, seen.term, seen.node));
        for seen in sorted {
            if leaders.last().is_none_or(|(_, node, term)| (*node, *term) != (seen.node, seen.term)) {
                leaders.push((seen.at, seen.node, seen.term));
            }
        }
        Timeline { clients, ops, events, leaders, healed_at, end }
    }

    /// The page.
    pub fn html(&self, title: &str, violations: &[String], replay: &str) -> String {
        const LEFT: f64 = 170.0;
        const WIDTH: f64 = 1400.0;
        const ROW: f64 = 16.0;
        let span_ms = self.end.as_millis().max(1) as f64;
        let x = |at: Duration| LEFT + at.as_millis() as f64 / span_ms * WIDTH;
        let rows = self.clients.len().max(1);
        let (leader_y, events_y, clients_y) = (30.0, 30.0 + 2.0 * ROW, 30.0 + 4.0 * ROW);
        let height = clients_y + rows as f64 * ROW + 40.0;
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="monospace" font-size="11">"#,
            LEFT + WIDTH + 20.0
        );
        // The time axis, every second (every ten past a minute).
        let step = if span_ms > 60_000.0 { 10_000 } else { 1_000 };
        for at in (0..=self.end.as_millis() as u64).step_by(step) {
            let at_x = x(Duration::from_millis(at));
            let _ = write!(
                svg,
                r##"<line x1="{at_x:.1}" y1="20" x2="{at_x:.1}" y2="{:.1}" stroke="#eee"/><text x="{at_x:.1}" y="14" text-anchor="middle">{}s</text>"##,
                height - 30.0,
                at / 1000
            );
        }
        let healed_x = x(self.healed_at);
        let _ = write!(
            svg,
            r##"<rect x="{LEFT}" y="20" width="{:.1}" height="{:.1}" fill="#fff4e5"><title>fault phase</title></rect>"##,
            healed_x - LEFT,
            height - 50.0
        );
        for (label, y) in [("leader (term)", leader_y), ("faults, operator", events_y)] {
            let _ = write!(svg, r#"<text x="4" y="{:.1}">{label}</text>"#, y + 11.0);
        }
        for (index, (at, node, term)) in self.leaders.iter().enumerate() {
            let until = self.leaders.get(index + 1).map_or(self.end, |next| next.0);
            let hue = (node * 67) % 360;
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{leader_y}" width="{:.1}" height="{}" fill="hsl({hue},60%,70%)"><title>n{node} leads term {term} from {:.3}s</title></rect><text x="{:.1}" y="{:.1}">n{node} ({term})</text>"#,
                x(*at),
                (x(until) - x(*at)).max(1.0),
                ROW - 2.0,
                at.as_secs_f64(),
                x(*at) + 2.0,
                leader_y + 11.0
            );
        }
        for (at, what) in &self.events {
            let colour = if what.starts_with("operator") { "#36c" } else { "#c33" };
            let _ = write!(
                svg,
                r#"<line x1="{0:.1}" y1="{events_y}" x2="{0:.1}" y2="{1:.1}" stroke="{colour}" stroke-opacity="0.35"/><rect x="{2:.1}" y="{events_y}" width="4" height="{3}" fill="{colour}"><title>{4:.3}s {5}</title></rect>"#,
                x(*at),
                height - 30.0,
                x(*at) - 2.0,
                ROW - 2.0,
                at.as_secs_f64(),
                escape(what)
            );
        }
        for (row, name) in self.clients.iter().enumerate() {
            let _ =
                write!(svg, r#"<text x="4" y="{:.1}">{}</text>"#, clients_y + row as f64 * ROW + 11.0, escape(name));
        }
        for op in &self.ops {
            let colour = match op.outcome {
                Outcome::Ok => "#2a2",
                Outcome::Refused => "#e90",
                Outcome::Unknown => "#d22",
            };
            let end = op.end.unwrap_or(op.start + Duration::from_millis(crate::workload::CALL_DEADLINE_MS));
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{}" fill="{colour}" fill-opacity="0.7"><title>{:.3}s {}</title></rect>"#,
                x(op.start),
                clients_y + op.client as f64 * ROW + 2.0,
                (x(end) - x(op.start)).max(1.0),
                ROW - 4.0,
                op.start.as_secs_f64(),
                escape(&op.label)
            );
        }
        svg.push_str("</svg>");
        let mut found = String::new();
        for violation in violations.iter().take(VIOLATIONS_SHOWN) {
            let _ = write!(found, "<li>{}</li>", escape(violation));
        }
        if violations.len() > VIOLATIONS_SHOWN {
            let _ = write!(
                found,
                "<li>… and {} more (violations.txt holds them all)</li>",
                violations.len() - VIOLATIONS_SHOWN
            );
        }
        let counts = |wanted: Outcome| self.ops.iter().filter(|op| op.outcome == wanted).count();
        format!(
            r##"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:1em}} code{{background:#f4f4f4;padding:2px 4px}} .key span{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}}</style>
</head><body>
<h1>{title}</h1>
<p>Replay: <code>{replay}</code></p>
<h2>Timeline</h2>
<p class="key">{ops} operations:<span style="background:#2a2"></span>ok {ok}<span style="background:#e90"></span>refused {refused}<span style="background:#d22"></span>unknown {unknown}<span style="background:#c33"></span>fault<span style="background:#36c"></span>operator<span style="background:#fff4e5"></span>fault phase. Hover a mark for its detail.</p>
{svg}
<h2>Violations</h2><ul>{found}</ul>
</body></html>
"##,
            title = escape(title),
            replay = escape(replay),
            ops = self.ops.len(),
            ok = counts(Outcome::Ok),
            refused = counts(Outcome::Refused),
            unknown = counts(Outcome::Unknown),
        )
    }
}

/// Escapes text for HTML and XML.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => escaped.push('?'),
            c => escaped.push(c),
        }
    }
    escaped
}
