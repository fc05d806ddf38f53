//! Exactly-once: a retried request is never applied twice.
//!
//! Property (Raft dissertation, Ongaro 2014, §6.3 "implementing linearizable semantics"):
//! the cluster applies each client request at most once, however often the client retries it,
//! across leader changes and crashes. Observed two ways on the final read:
//! - every create has a title unique in the run, so a create applied twice shows as two beads
//!   with one title;
//! - a claim applied twice claims a second bead nobody was told of: an actor may hold more
//!   beads than it was acknowledged only by the number of its claims whose outcome is unknown.

use std::collections::{BTreeMap, BTreeSet};

use api::model::{Bead, BeadId};
use api::outcome::Outcome;

use super::Violation;
use crate::history::{History, Op, OpResult};

/// Checks the final beads for doubly applied creates and claims.
pub fn check(history: &History, beads: &[Bead]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut titles: BTreeMap<&str, Vec<&BeadId>> = BTreeMap::new();
    for bead in beads {
        titles.entry(bead.title.as_str()).or_default().push(&bead.id);
    }
    for (title, ids) in titles.into_iter().filter(|(_, ids)| ids.len() > 1) {
        violations.push(Violation {
            checker: "exactly-once",
            detail: format!("create {title:?} was applied {} times: {ids:?}", ids.len()),
        });
    }
    let mut acknowledged: BTreeMap<&str, BTreeSet<&BeadId>> = BTreeMap::new();
    let mut unknown: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &history.entries {
        let (Op::Claim { actor, .. } | Op::ClaimNext { actor }) = &entry.op else { continue };
        match &entry.result {
            OpResult::Ok(Outcome::Bead(bead)) => {
                acknowledged.entry(actor.0.as_str()).or_default().insert(&bead.id);
            }
            OpResult::Ok(Outcome::Beads(claimed)) => {
                acknowledged.entry(actor.0.as_str()).or_default().extend(claimed.iter().map(|bead| &bead.id));
            }
            OpResult::Unknown(_) | OpResult::Pending => *unknown.entry(actor.0.as_str()).or_default() += 1,
            _ => {}
        }
    }
    let mut held: BTreeMap<&str, Vec<&BeadId>> = BTreeMap::new();
    for bead in beads.iter().filter(|bead| !bead.assignee.is_empty()) {
        held.entry(bead.assignee.as_str()).or_default().push(&bead.id);
    }
    for (actor, ids) in held {
        let acked = acknowledged.get(actor);
        let extra: Vec<&&BeadId> = ids.iter().filter(|id| !acked.is_some_and(|acked| acked.contains(**id))).collect();
        let allowed = unknown.get(actor).copied().unwrap_or(0);
        if extra.len() > allowed {
            violations.push(Violation {
                checker: "exactly-once",
                detail: format!(
                    "{actor} holds {} beads it was never told it claimed ({extra:?}) but had only {allowed} claims of unknown outcome",
                    extra.len()
                ),
            });
        }
    }
    violations
}
