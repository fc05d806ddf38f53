//! Raft safety, from the nodes' own metrics and disks rather than assumed.
//!
//! Properties (Ongaro & Ousterhout 2014, Figure 3):
//! - **Election safety**: at most one leader is elected in a given term. Checked on every
//!   metrics reading of every node.
//! - **State machine safety**: if a node applied an entry at an index, no node ever applies a
//!   different entry at that index. Checked on the applied log ids the nodes reported.
//! - **Leader completeness**: if an entry is committed in a term, it is in the log of the leader
//!   of every higher term. Checked as: when a node reports itself leader of term T, its log
//!   reaches at least the highest index any node had applied (applied entries are committed)
//!   from a term below T. (A node that restarts and restores its own older leadership is leader
//!   of a lower term, and owes nothing to entries of later terms.)
//! - **Log matching**: if two logs hold an entry with the same index and term, they are
//!   identical up to that index. Checked on the nodes' memory disks at the end of the run.
//!
//! And no node's Raft core stops: a panic, a failed openraft assertion (the workspace builds
//! openraft with its debug assertions on) or a storage error shows in the metrics as a fatal
//! running state, and fails the run. The one exception is a node removed from the membership,
//! which stops its core on purpose once told (the membership checker judges those).

use std::collections::BTreeMap;

use raft_store::codec;
use raft_store::types::Entry;
use raft_store::{Disk, Space};

use super::Violation;
use crate::cluster::{Observation, SimNode};

/// Checks election safety, state machine safety and leader completeness; a node of `removed`
/// may stop its Raft core, and so may a node whose disk write the simulator failed on purpose
/// (`raft_store::faults::INJECTED_FAILURE`: the nemesis restarts it).
pub fn check(observations: &[Observation], removed: &[u64]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut leaders: BTreeMap<u64, u64> = BTreeMap::new();
    let mut applied: BTreeMap<u64, (&str, u64)> = BTreeMap::new();
    // Term of the entry -> (highest applied index of that term, the node that applied it).
    let mut highest_applied: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut fatal_told = std::collections::BTreeSet::new();
    for observation in observations {
        if let Some(fatal) = &observation.fatal
            && !removed.contains(&observation.node)
            && !fatal.contains(raft_store::faults::INJECTED_FAILURE)
            && fatal_told.insert(observation.node)
        {
            violations.push(Violation {
                checker: "raft fatal",
                detail: format!("node {}'s Raft core stopped at {:?}: {fatal}", observation.node, observation.at),
            });
        }
        if observation.leader {
            match leaders.insert(observation.term, observation.node) {
                Some(other) if other != observation.node => violations.push(Violation {
                    checker: "raft election safety",
                    detail: format!(
                        "nodes {other} and {} were both leader in term {} (at {:?})",
                        observation.node, observation.term, observation.at
                    ),
                }),
                _ => {}
            }
            let owed = highest_applied.range(..observation.term).map(|(_, found)| *found).max();
            if let Some((index, node)) = owed
                && node != observation.node
                && observation.last_log_index < index
            {
                violations.push(Violation {
                    checker: "raft leader completeness",
                    detail: format!(
                        "node {} became leader of term {} at {:?} with its log ending at {}, but node {node} had already applied index {index}",
                        observation.node, observation.term, observation.at, observation.last_log_index
                    ),
                });
            }
        }
        if let Some((index, term, leader_id)) = &observation.applied {
            match applied.get(index) {
                Some((seen, node)) if seen != leader_id => violations.push(Violation {
                    checker: "raft state machine safety",
                    detail: format!(
                        "index {index} was applied as an entry of leader {seen} on node {node} and of leader {leader_id} on node {}",
                        observation.node
                    ),
                }),
                Some(_) => {}
                None => {
                    applied.insert(*index, (leader_id, observation.node));
                }
            }
            let highest = highest_applied.entry(*term).or_insert((*index, observation.node));
            if *index > highest.0 {
                *highest = (*index, observation.node);
            }
        }
    }
    violations
}

/// One node's log: index to (term text, encoded entry).
fn read_log(node: &SimNode) -> Result<BTreeMap<u64, (String, Vec<u8>)>, String> {
    let mut log = BTreeMap::new();
    node.disk
        .scan(Space::Log, &[], None, &mut |key, value| {
            let index = codec::log_index(key)?;
            let entry: Entry = codec::decode(value, "log entry")?;
            log.insert(index, (entry.log_id.leader_id.to_string(), value.to_vec()));
            Ok(true)
        })
        .map_err(|error| format!("reading the log of node {}: {error}", node.id))?;
    Ok(log)
}

/// Checks log matching between every pair of nodes.
pub fn check_log_matching(nodes: &[&SimNode]) -> Vec<Violation> {
    let mut logs = Vec::new();
    for node in nodes {
        match read_log(node) {
            Ok(log) => logs.push((node.id, log)),
            Err(detail) => return vec![Violation { checker: "raft log matching", detail }],
        }
    }
    let mut violations = Vec::new();
    for (position, (a, log_a)) in logs.iter().enumerate() {
        for (b, log_b) in &logs[position + 1..] {
            let matching = log_a
                .iter()
                .rev()
                .find(|(index, (term, _))| log_b.get(index).is_some_and(|(other, _)| other == term))
                .map(|(index, _)| *index);
            let Some(matching) = matching else { continue };
            for (index, (_, bytes)) in log_a.range(..=matching) {
                if log_b.get(index).is_some_and(|(_, other)| other != bytes) {
                    violations.push(Violation {
                        checker: "raft log matching",
                        detail: format!(
                            "nodes {a} and {b} agree on the term of index {matching} but hold different entries at index {index}"
                        ),
                    });
                    break;
                }
            }
        }
    }
    violations
}
