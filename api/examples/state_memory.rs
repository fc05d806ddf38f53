//! Measures what the state machine holds in memory per bead, without RocksDB: the resident set of
//! this process after N beads are created (and, with `--claim`, claimed) through `State::apply`,
//! and how much of that a copy of the state's records takes (the bead bodies, as stored), so that
//! the rest is the maps and indexes kept beside them. A measurement, not a test:
//!
//! ```sh
//! cargo run --release -p api --example state_memory -- 1000000
//! cargo run --release -p api --example state_memory -- 1000000 --claim
//! cargo run --release -p api --example state_memory -- 1000000 --close
//! ```
//!
//! With `--close`, each bead is closed once created, and the state keeps closed beads on disk as
//! a node does (a cold store is attached; nothing reads a bead back), so what it measures is what
//! a closed bead costs in memory: its id and its index entries.
//!
//! Events are kept up to the default retention (100 000), so their share per bead falls as N grows.

use api::command::{Command, CreateBead, Proposal};
use api::commands::claim::Claim;
use api::commands::close::Close;
use api::model::Bead;
use api::model::{Actor, BeadId, Namespace, Timestamp};
use api::state::{BeadSource, ColdStore, State};

/// The disk of `--close`: the records are written nowhere, and nothing reads a closed bead back.
struct NoDisk;

impl BeadSource for NoDisk {
    fn read_bead(&self, _namespace: &Namespace, id: &BeadId) -> Result<Option<(Bead, u64)>, String> {
        Err(format!("state_memory keeps no records, and bead {id} was read back"))
    }

    fn index_keys(&self, _: &[u8], _: &[u8], _: bool, _: usize) -> Result<Vec<Vec<u8>>, String> {
        Err("state_memory keeps no records, and index entries were read back".into())
    }
}

/// The resident set of this process, in bytes (Linux: `/proc/self/statm`).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 =
        statm.split_whitespace().nth(1).and_then(|field| field.parse().ok()).expect("statm's resident field");
    pages * 4096
}

fn proposal(n: u64, command: Command) -> Proposal {
    Proposal {
        request_id: None,
        timestamp: Timestamp(n as i64),
        default_prefix: "st".into(),
        actor: Actor("agent-1".into()),
        event_retention: api::limits::EVENT_RETENTION_DEFAULT,
        credential: None,
        namespace: Namespace::default_namespace(),
        command,
    }
}

fn main() {
    let beads: u64 = std::env::args().nth(1).and_then(|text| text.parse().ok()).unwrap_or(1_000_000);
    let claim = std::env::args().any(|argument| argument == "--claim");
    let close = std::env::args().any(|argument| argument == "--close");
    let before = resident_bytes();
    let mut state = State::new();
    if close {
        state.attach_cold_store(ColdStore::new(std::sync::Arc::new(NoDisk), 0));
    }
    let mut index = 0;
    for n in 0..beads {
        index += 1;
        let create = CreateBead { title: format!("bead {n}"), priority: Some((n % 5) as u8), ..Default::default() };
        state.apply(index, &proposal(n, Command::Create(create))).expect("create");
        if claim {
            index += 1;
            let claim = Claim { id: BeadId(format!("st-{}", n + 1)), actor: Actor("agent-1".into()), lease_ms: None };
            state.apply(index, &proposal(n, Command::from(claim))).expect("claim");
        }
        if close {
            index += 1;
            let close = Close { ids: vec![BeadId(format!("st-{}", n + 1))], reason: None };
            state.apply(index, &proposal(n, Command::from(close))).expect("close");
        }
        if n % 10_000 == 0 {
            let keys = state.take_changed_keys();
            state.records_written(&keys);
        }
    }
    let keys = state.take_changed_keys();
    state.records_written(&keys);
    let with_state = resident_bytes();
    if close {
        let per_bead = with_state.saturating_sub(before) as f64 / beads as f64;
        println!("{beads} beads, each closed and kept on disk: the state holds {per_bead:.0} B per bead in memory");
        return;
    }
    let records = state.records();
    let with_records = resident_bytes();
    let per_bead = |bytes: u64| bytes as f64 / beads as f64;
    let whole = with_state.saturating_sub(before);
    let bodies = with_records.saturating_sub(with_state);
    println!(
        "{beads} beads{}: the state holds {:.0} B per bead; a copy of its {} records takes {:.0} B per bead, so the maps and indexes beside them take about {:.0} B per bead",
        if claim { ", each claimed" } else { "" },
        per_bead(whole),
        records.len(),
        per_bead(bodies),
        per_bead(whole.saturating_sub(bodies)),
    );
}
