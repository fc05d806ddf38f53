//! Durability: every acknowledged write is present after the cluster heals.
//!
//! Property (Raft, Ongaro & Ousterhout 2014, §5.4 "state machine safety", seen from the
//! client): once the cluster acknowledged a write, it is in the state every later read sees,
//! whatever crashed, lost unsynced writes or was partitioned in between. Checked on the final
//! read after healing: every acknowledged create exists, every acknowledged claim still names its
//! claimer, every acknowledged close left the bead closed, and every acknowledged large create
//! still holds each of its values byte for byte (compared through the history's digests, see
//! [`crate::history::compact_value`]). (Metadata keys set later have their own checker.)

use std::collections::BTreeMap;

use api::model::{Bead, BeadId, Status};
use api::outcome::Outcome;

use super::Violation;
use crate::history::{History, Op, OpResult, compact_value};
use crate::workload::large_metadata;

fn claimed(outcome: &Outcome) -> Option<&Bead> {
    match outcome {
        Outcome::Bead(bead) => Some(bead),
        Outcome::Beads(beads) => beads.first(),
        _ => None,
    }
}

/// Checks the final beads against every acknowledged write.
pub fn check(history: &History, beads: &[Bead]) -> Vec<Violation> {
    let by_title: BTreeMap<&str, &Bead> = beads.iter().map(|bead| (bead.title.as_str(), bead)).collect();
    let by_id: BTreeMap<&BeadId, &Bead> = beads.iter().map(|bead| (&bead.id, bead)).collect();
    let mut violations = Vec::new();
    let mut lost = |detail: String| violations.push(Violation { checker: "durability", detail });
    for entry in &history.entries {
        let OpResult::Ok(outcome) = &entry.result else { continue };
        match &entry.op {
            Op::Create { title } | Op::CreateLarge { title } if !by_title.contains_key(title.as_str()) => {
                lost(format!("acknowledged create {title:?} (invoked at {}) is missing after healing", entry.invoked));
            }
            Op::CreateLarge { title } => {
                let bead = by_title[title.as_str()];
                for (key, value) in large_metadata(title) {
                    let found = bead.metadata.get(&key);
                    if found != Some(&compact_value(&value)) {
                        lost(format!(
                            "acknowledged large create {title:?} (invoked at {}) reads {key}={found:?} after healing",
                            entry.invoked
                        ));
                    }
                }
            }
            Op::Claim { actor, .. } | Op::ClaimNext { actor } => {
                let Some(bead) = claimed(outcome) else { continue };
                match by_id.get(&bead.id) {
                    Some(now) if now.assignee == actor.0 => {}
                    Some(now) => lost(format!(
                        "acknowledged claim of {} by {actor} (invoked at {}) is gone: the healed bead is held by {:?}",
                        bead.id, entry.invoked, now.assignee
                    )),
                    None => lost(format!("bead {} claimed by {actor} is missing after healing", bead.id)),
                }
            }
            Op::Close { id } => match by_id.get(id) {
                Some(now) if now.status == Status::Closed => {}
                other => lost(format!(
                    "acknowledged close of {id} (invoked at {}) is gone: the healed bead is {:?}",
                    entry.invoked,
                    other.map(|bead| bead.status)
                )),
            },
            _ => {}
        }
    }
    violations
}
