//! The checkers: each module checks one property of a finished run and cites it.
//!
//! Two runs feed them: the simulator's ([`crate::run`]) and the container run's
//! ([`crate::containers`]), whose history is recorded by the same agents against a real cluster.
//! Both call [`check_all`]; evidence a run cannot gather is empty (a real cluster reports no
//! controller or versioned applies and offers no disks to read back), and the checkers that read
//! it find nothing there to judge.
//!
//! They read the observed [`History`], the nodes' Raft [`Observation`]s, applied controller
//! actions ([`ControllerApply`]) and versioned entries ([`VersionedApply`]), what the healed-phase
//! reader found ([`Healed`]), the nodes whose start failed and the damage the nemesis did, and,
//! for log matching, the nodes' disks. A checker returns the violations it found, each saying
//! what broke and on what evidence.
//!
//! To add a checker: write a module here with a `check` function returning `Vec<Violation>`,
//! cite its property in the module header, call it from [`check_all`], and give it a test with a
//! hand-built history it must reject.

pub mod controller_terms;
pub mod convergence;
pub mod durability;
pub mod exactly_once;
pub mod integrity;
pub mod leases;
pub mod linearizability;
pub mod liveness;
pub mod membership;
pub mod metadata;
pub mod orchestration;
pub mod orders;
pub mod raft_safety;
pub mod upgrade;

use std::collections::BTreeMap;

use api::model::Bead;
use api::outcome::Outcome;

use crate::cluster::{ControllerApply, FailedStart, Observation, SimNode, VersionedApply};
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
    /// Every controller action the nodes applied.
    pub controller_applies: &'a [ControllerApply],
    /// Every versioned entry (a canary, a switch of the apply version) the nodes applied.
    pub versioned_applies: &'a [VersionedApply],
    /// What the healed-phase reader found.
    pub healed: &'a Healed,
    /// Every node of the run (the spare included), by id.
    pub node_ids: &'a [u64],
    /// The simulated nodes' memory disks, for log matching; `None` when the run's disks cannot
    /// be read back (RocksDB disks, a real cluster's containers).
    pub disks: Option<&'a [SimNode]>,
    /// The nodes whose start failed; they stayed down.
    pub failed_starts: &'a BTreeMap<u64, FailedStart>,
    /// What the nemesis damaged on each node's storage, by node.
    pub damaged: &'a BTreeMap<u64, Vec<String>>,
    /// Under the membership fault: what the operator did, the first members and the spare.
    pub operator: Option<(&'a crate::operator::OperatorLog, &'a [u64], u64)>,
}

impl Evidence<'_> {
    /// The nodes that were up at the end: all but those whose start failed; under the membership
    /// fault, only the members the healed-phase reader found.
    pub fn live_nodes(&self) -> Vec<u64> {
        let member = |id: &u64| self.operator.is_none() || self.healed.members.contains(id);
        self.node_ids.iter().copied().filter(|id| !self.failed_starts.contains_key(id) && member(id)).collect()
    }
}

/// Reports of applied entries by log index: the first report of each index, and each later
/// report of an index that differs from that first one by `same` (the state machine is
/// deterministic, so every node must apply an index alike).
pub fn by_index<T>(
    reports: &[T],
    index: impl Fn(&T) -> u64,
    same: impl Fn(&T, &T) -> bool,
) -> (BTreeMap<u64, &T>, Vec<(&T, &T)>) {
    let (mut first, mut differ) = (BTreeMap::new(), Vec::new());
    for report in reports {
        match first.get(&index(report)) {
            None => {
                first.insert(index(report), report);
            }
            Some(seen) if !same(seen, report) => differ.push((*seen, report)),
            Some(_) => {}
        }
    }
    (first, differ)
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
    violations.extend(convergence::check(evidence.healed, &evidence.live_nodes()));
    let removed: Vec<u64> = match evidence.operator {
        Some(_) => evidence.node_ids.iter().copied().filter(|id| !evidence.healed.members.contains(id)).collect(),
        None => Vec::new(),
    };
    violations.extend(integrity::check(evidence.failed_starts, evidence.damaged, &removed));
    violations.extend(raft_safety::check(evidence.observations, &removed));
    if let Some((log, first, spare)) = evidence.operator {
        violations.extend(membership::check(
            log,
            first,
            spare,
            &evidence.healed.members,
            &evidence.healed.removed_serving,
            evidence.observations,
        ));
    }
    violations.extend(controller_terms::check(evidence.controller_applies).0);
    violations.extend(upgrade::check(evidence.versioned_applies, evidence.healed).0);
    if let Some(disks) = evidence.disks {
        // A node whose start failed holds damaged storage by design; the others' logs must match.
        let live: Vec<&SimNode> = disks.iter().filter(|node| !evidence.failed_starts.contains_key(&node.id)).collect();
        violations.extend(raft_safety::check_log_matching(&live));
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
    violations.extend(orders::check(&evidence.healed.orders));
    violations.extend(orchestration::check(evidence.history, &evidence.healed.all_beads));
    violations.extend(leases::check(evidence.history, crate::workload::LEASE_MS, &evidence.healed.leases_after_bound));
    violations
}
