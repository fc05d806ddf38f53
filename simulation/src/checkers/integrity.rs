//! Storage integrity: a node refuses to start only on damaged storage, and the rest of the run
//! goes on without it.
//!
//! Property (the node's start-up verification, `node::NodeError::Corrupt`, seen from outside): a
//! node whose storage is intact always starts; a node whose synced log, state or meta values were
//! damaged either refuses to start (then it stays down, and the cluster must stay live, converge
//! and lose nothing acknowledged without it: the other checkers) or starts with state that agrees
//! with the other nodes (the convergence and log matching checkers compare it). What the nemesis
//! damaged and which starts failed both reach this checker, so a start that failed on storage the
//! nemesis never touched (a verification that refuses good data, or a crash that loses synced
//! data) is reported here. A node removed from the membership refuses to start by design (its
//! data directory never serves again): a failed start of a node in `removed` that says so is not
//! a violation.

use std::collections::BTreeMap;

use super::Violation;
use crate::cluster::FailedStart;

/// Checks every failed start against what was damaged, and which nodes were removed.
pub fn check(
    failed_starts: &BTreeMap<u64, FailedStart>,
    damaged: &BTreeMap<u64, Vec<String>>,
    removed: &[u64],
) -> Vec<Violation> {
    failed_starts
        .iter()
        .filter(|(id, _)| !damaged.contains_key(id))
        .filter(|(id, failed)| !(removed.contains(id) && failed.error.contains(&format!("node {id} was removed from"))))
        .map(|(id, failed)| Violation {
            checker: "integrity",
            detail: format!(
                "node {id} failed to start at {:?} though its storage was never damaged: {}",
                failed.at, failed.error
            ),
        })
        .collect()
}
