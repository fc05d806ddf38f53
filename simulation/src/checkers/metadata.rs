//! Metadata: concurrent `set_metadata` of different keys of one bead loses no key.
//!
//! Property (docs/beads.md §2, per-key metadata merge): a metadata write changes only the keys it
//! names, atomically, so writes of different keys never overwrite each other, however they
//! interleave. The workload gives every write a fresh key on a few hot beads; after healing,
//! every acknowledged key must hold its value.

use std::collections::BTreeMap;

use api::model::{Bead, BeadId};

use super::Violation;
use crate::history::{History, Op, OpResult};

/// Checks that every acknowledged metadata key survived.
pub fn check(history: &History, beads: &[Bead]) -> Vec<Violation> {
    let by_id: BTreeMap<&BeadId, &Bead> = beads.iter().map(|bead| (&bead.id, bead)).collect();
    let mut violations = Vec::new();
    for entry in &history.entries {
        let (Op::SetMetadata { id, key, value }, OpResult::Ok(_)) = (&entry.op, &entry.result) else { continue };
        let found = by_id.get(id).and_then(|bead| bead.metadata.get(key));
        if found != Some(value) {
            violations.push(Violation {
                checker: "metadata",
                detail: format!(
                    "acknowledged metadata {key}={value} on {id} (invoked at {}) reads {found:?} after healing",
                    entry.invoked
                ),
            });
        }
    }
    violations
}
