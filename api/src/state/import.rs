//! [`Command::Import`](crate::command::Command::Import): beads from another store (`bd export`),
//! with their ids, statuses and timestamps, added all together or not at all.
//!
//! Everything is checked before anything changes: no imported id may exist already (an import
//! adds, never overwrites), and a parent must be in the import or in the namespace. Each bead
//! gets the next sequence number in the order given, and the namespace's counter moves past any
//! imported `<prefix>-<n>`, so an id the namespace assigns later never meets an imported one.
//! Edges may point at beads later in the import or at ids that are not beads, as anywhere else.
//! A bead without a creation time (0) is stamped with the command's time: `create --id` is an
//! import of one bead.

use std::collections::BTreeSet;

use super::namespace::NamespaceState;
use crate::model::{Bead, BeadId, DEFAULT_TYPE, Status, Timestamp};
use crate::outcome::{Outcome, Refusal};

/// The number an id ends in (`st-12` → 12), if it ends in one.
fn id_number(bead_id: &BeadId) -> Option<u64> {
    bead_id.0.rsplit_once('-').and_then(|(_, number)| number.parse().ok())
}

impl NamespaceState {
    /// Imports beads (see the module header).
    pub(super) fn import(&mut self, beads: &[Bead], now: Timestamp) -> Result<Outcome, Refusal> {
        let incoming: BTreeSet<&BeadId> = beads.iter().map(|bead| &bead.id).collect();
        for bead in beads {
            if self.beads.contains_key(&bead.id) {
                return Err(Refusal::Invalid(format!(
                    "bead {} already exists in this namespace; an import only adds beads, so import into an empty namespace or leave that bead out",
                    bead.id
                )));
            }
            if let Some(parent) = bead.parent_id.as_ref().filter(|parent| !incoming.contains(parent)) {
                self.bead(parent).map_err(|_| {
                    Refusal::Invalid(format!(
                        "bead {} names parent {parent}, which is neither in the import nor in this namespace",
                        bead.id
                    ))
                })?;
            }
        }
        if let Some(highest) = beads.iter().filter_map(|bead| id_number(&bead.id)).max()
            && highest >= self.meta.next_seq
        {
            self.meta.next_seq = highest.saturating_add(1);
            self.meta_dirty = true;
        }
        for bead in beads {
            let mut bead = bead.clone();
            bead.seq = self.meta.next_seq;
            self.meta.next_seq += 1;
            self.meta_dirty = true;
            bead.revision = self.revision;
            if bead.created_at == Timestamp(0) {
                bead.created_at = now;
            }
            if bead.bead_type.is_empty() {
                bead.bead_type = DEFAULT_TYPE.to_string();
            }
            if bead.updated_at < bead.created_at {
                bead.updated_at = bead.created_at;
            }
            match bead.status {
                Status::Closed if bead.closed_at.is_none() => bead.closed_at = Some(bead.updated_at),
                Status::Closed => {}
                _ => {
                    bead.closed_at = None;
                    bead.close_reason = None;
                }
            }
            self.insert(bead);
        }
        let imported = beads.iter().map(|bead| self.beads[&bead.id].clone()).collect();
        Ok(Outcome::Beads(imported))
    }
}
