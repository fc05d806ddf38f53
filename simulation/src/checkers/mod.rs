//! The checkers: each module checks one property of a finished run and cites it.
//!
//! They read the observed [`History`], the nodes' Raft [`Observation`]s, what the healed-phase
//! reader found ([`Healed`]) and, for log matching, the nodes' disks. A checker returns the
//! violations it found, each saying what broke and on what evidence.
//!
//! To add a checker: write a module here with a `check` function returning `Vec<Violation>`,
//! cite its property in the module header, call it from [`check_all`], and give it a test with a
//! hand-built history it must reject.

pub mod convergence;
pub mod durability;
pub mod exactly_once;
pub mod linearizability;
pub mod liveness;
pub mod metadata;
pub mod raft_safety;

use api::model::Bead;
use api::outcome::Outcome;

use crate::cluster::{Observation, SimNode};
use crate::healed::Healed;
use crate::history::{History, Op, OpResult};

/// One broken property.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Which checker found it.
    pub checker: &'static str,
    /// What broke, with the evidence.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.checker, self.detail)
    }
}

/// Everything the checkers look at.
pub struct Evidence<'a> {
    /// The agents' operations.
    pub history: &'a History,
    /// The nodes' Raft metrics over time.
    pub observations: &'a [Observation],
    /// What the healed-phase reader found.
    pub healed: &'a Healed,
    /// The nodes, with their disks (log matching reads memory disks).
    pub nodes: &'a [SimNode],
    /// Whether the disks are memory disks.
    pub memory_disks: bool,
}

/// The beads of the final read, when it succeeded.
pub fn final_beads(history: &History) -> Option<&[Bead]> {
    history.entries.iter().rev().find_map(|entry| match (&entry.op, &entry.result, entry.final_read) {
        (Op::List { .. }, OpResult::Ok(Outcome::Beads(beads)), true) => Some(beads.as_slice()),
        _ => None,
    })
}

/// Runs every checker.
pub fn check_all(evidence: &Evidence<'_>) -> Vec<Violation> {
    let mut violations = Vec::new();
    violations.extend(liveness::check(evidence.healed));
    violations.extend(convergence::check(evidence.healed));
    violations.extend(raft_safety::check(evidence.observations));
    if evidence.memory_disks {
        violations.extend(raft_safety::check_log_matching(evidence.nodes));
    }
    match final_beads(evidence.history) {
        Some(beads) => {
            violations.extend(durability::check(evidence.history, beads));
            violations.extend(metadata::check(evidence.history, beads));
            violations.extend(exactly_once::check(evidence.history, beads));
        }
        None => violations.push(Violation {
            checker: "durability",
            detail: "the healed cluster never answered the final read of every bead".into(),
        }),
    }
    violations.extend(linearizability::check(evidence.history));
    violations
}
