//! Measures `ready --limit 1` (and a label-filtered `list`) on the state machine with 100 beads
//! and with 1 000 000 beads, to show that both are index look-ups whose cost does not grow with
//! the store. A measurement, not a test:
//!
//! ```sh
//! cargo run -p api --example ready_scale            # 1 000 000 beads
//! cargo run -p api --example ready_scale -- 200000  # another size
//! ```

use std::time::Instant;

use api::command::{Command, CreateBead, ListFilter, Proposal, Query, ReadyFilter};
use api::commands::list::List;
use api::commands::ready::Ready;
use api::model::{Actor, Namespace, Timestamp};
use api::state::State;

fn build(beads: u64) -> State {
    let mut state = State::new();
    for n in 0..beads {
        let labels = if n % 1000 == 0 { ["rare".to_string()].into() } else { Default::default() };
        let proposal = Proposal {
            request_id: None,
            timestamp: Timestamp(n as i64),
            default_prefix: "st".into(),
            actor: Actor::default(),
            event_retention: api::limits::EVENT_RETENTION_DEFAULT,
            credential: None,
            namespace: Namespace::default_namespace(),
            command: Command::Create(CreateBead {
                title: format!("bead {n}"),
                priority: Some((n % 5) as u8),
                labels,
                ..Default::default()
            }),
        };
        state.apply(n, &proposal).expect("create");
        if n % 10_000 == 0 {
            state.take_changes();
        }
    }
    state.take_changes();
    state
}

fn median_micros(state: &State, query: &Query, runs: usize) -> f64 {
    let namespace = Namespace::default_namespace();
    let mut samples: Vec<f64> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            state.query(&namespace, query).expect("query");
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[runs / 2]
}

fn main() {
    let large: u64 = std::env::args().nth(1).and_then(|text| text.parse().ok()).unwrap_or(1_000_000);
    let ready = Query::from(Ready { filter: ReadyFilter { limit: 1, ..Default::default() }, now: Timestamp(i64::MAX) });
    let by_label = Query::from(List(ListFilter { labels_all: vec!["rare".into()], limit: 10, ..Default::default() }));
    for beads in [100, large] {
        let started = Instant::now();
        let state = build(beads);
        let built = started.elapsed();
        println!(
            "{beads:>8} beads (built in {built:.1?}): ready --limit 1 median {:.1} µs, list --label rare --limit 10 median {:.1} µs",
            median_micros(&state, &ready, 2001),
            median_micros(&state, &by_label, 2001),
        );
    }
}
