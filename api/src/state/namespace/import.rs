//! [`Command::Import`](crate::command::Command::Import): beads from another store (`bd export`),
//! with their ids, statuses and timestamps, added all together or not at all; and
//! [`Command::ImportUndo`](crate::command::Command::ImportUndo), which takes them out again.
//!
//! An import checks before it changes anything that no imported id exists already (an import
//! adds, never overwrites) and that a parent is in the import or in the namespace. It then adds
//! the beads under a journal and refuses, undoing them, if they close a dependency or parent
//! cycle, with each other or with the namespace's beads. Each bead gets the next sequence
//! number, in the order given; an id the namespace assigns later skips any imported one
//! ([`NamespaceState::next_id`]). Edges may point at beads later in the import or at ids that
//! are not beads, as anywhere else. A bead without a creation time (0) is stamped with the
//! command's time: `create --id` is an import of one bead ([`is_create_with_id`]), and its
//! refusals speak of the create: an id that exists names `--id` and `strand update`, an unknown
//! parent is not found, as for a create without `--id`.
//!
//! An undo removes beads an import wrote, each only while still at the revision the import gave
//! it, and leaves the namespace as the import found it: edges other beads have to them stay (to
//! an id that is not a bead, as before), and edges the beads took over from loose edges become
//! loose again. A bead that another bead became a child of since is not undone.

use std::collections::{BTreeMap, BTreeSet};

use super::{GRAPH_WALK_MAX, NamespaceState};
use crate::input::{ImportedBead, is_create_with_id};
use crate::model::{Bead, BeadId, DEFAULT_TYPE, DepType, Status, Timestamp, event_type};
use crate::outcome::{Outcome, Refusal};

impl NamespaceState {
    /// Imports beads (see the module header).
    pub(crate) fn import(&mut self, beads: &[Bead], now: Timestamp) -> Result<Outcome, Refusal> {
        let incoming: BTreeSet<&BeadId> = beads.iter().map(|bead| &bead.id).collect();
        let create = is_create_with_id(beads);
        for bead in beads {
            if self.beads.contains_key(&bead.id) {
                let id = &bead.id;
                return Err(Refusal::Invalid(if create {
                    format!("bead {id} already exists; give another --id, or update it with strand update {id}")
                } else {
                    format!(
                        "bead {id} already exists in this namespace; an import only adds beads, so import into an empty namespace or leave that bead out"
                    )
                }));
            }
            if let Some(parent) = bead.parent_id.as_ref().filter(|parent| !incoming.contains(parent)) {
                self.bead(parent).map_err(|not_found| {
                    if create {
                        not_found
                    } else {
                        Refusal::Invalid(format!(
                            "bead {} names parent {parent}, which is neither in the import nor in this namespace",
                            bead.id
                        ))
                    }
                })?;
            }
        }
        self.begin_journal();
        for bead in beads {
            let mut bead = bead.clone();
            bead.seq = self.meta.next_seq;
            self.meta.next_seq += 1;
            self.meta_dirty = true;
            bead.revision = self.revision;
            // An import brings no lease: a lease is granted by a claim in this cluster only.
            bead.lease = None;
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
        if let Some((from, to)) = self.cycle_through(&incoming) {
            self.roll_back();
            let closed = format!("{from} depends on (or is a child of) {to}, which leads back to {from}");
            return Err(Refusal::Invalid(match beads {
                [created] if create => {
                    format!("creating {} would close a cycle: {closed}; leave that dependency out", created.id)
                }
                _ => format!("the import would close a cycle: {closed}; remove one of those edges from the file"),
            }));
        }
        self.journal = None;
        let imported = beads.iter().map(|bead| self.beads.at(&bead.id).clone()).collect();
        Ok(Outcome::Beads(imported))
    }

    /// An edge (dependency or parent) of one of `start` that closes a cycle, if one does: a
    /// depth-first walk over what the beads point at, linear in what it reaches (at most
    /// [`GRAPH_WALK_MAX`] beads, the bound every graph walk of a namespace has).
    fn cycle_through(&self, start: &BTreeSet<&BeadId>) -> Option<(BeadId, BeadId)> {
        let targets = |bead_id: &BeadId| -> Vec<BeadId> {
            self.beads.get(bead_id).map_or_else(Vec::new, |bead| {
                bead.depends_on
                    .keys()
                    .chain(bead.parent_id.iter())
                    .filter(|target| self.beads.contains_key(target))
                    .cloned()
                    .collect()
            })
        };
        let mut done: BTreeSet<BeadId> = BTreeSet::new();
        for root in start {
            if done.contains(*root) {
                continue;
            }
            // The path from `root`, each bead with the targets it has left to visit.
            let mut path: Vec<(BeadId, Vec<BeadId>)> = vec![((*root).clone(), targets(root))];
            let mut on_path: BTreeSet<BeadId> = BTreeSet::from([(*root).clone()]);
            while let Some((current, pending)) = path.last_mut() {
                let Some(next) = pending.pop() else {
                    on_path.remove(current);
                    done.insert(current.clone());
                    path.pop();
                    continue;
                };
                if on_path.contains(&next) {
                    return Some((current.clone(), next));
                }
                if done.contains(&next) || done.len() >= GRAPH_WALK_MAX {
                    continue;
                }
                let next_targets = targets(&next);
                on_path.insert(next.clone());
                path.push((next, next_targets));
            }
        }
        None
    }

    /// Takes beads an import wrote out again (see the module header).
    pub(crate) fn import_undo(&mut self, beads: &[ImportedBead]) -> Result<Outcome, Refusal> {
        let undone: BTreeSet<&BeadId> = beads.iter().map(|bead| &bead.id).collect();
        for imported in beads {
            let current = self.bead(&imported.id)?.revision;
            if current != imported.revision {
                return Err(Refusal::RevisionMismatch {
                    id: imported.id.clone(),
                    expected: imported.revision,
                    current,
                });
            }
            if let Some(child) = self.children_of(&imported.id).into_iter().find(|child| !undone.contains(child)) {
                return Err(Refusal::Invalid(format!(
                    "bead {child} became a child of {} after the import; move or delete it first",
                    imported.id
                )));
            }
        }
        let mut refresh = Vec::new();
        for imported in beads {
            let bead = self.take_bead(&imported.id).expect("checked above");
            self.emit(event_type::BEAD_DELETED, &imported.id, bead.title.clone());
            let sent: BTreeSet<&BeadId> = imported.edges.iter().collect();
            let taken: BTreeMap<BeadId, DepType> =
                bead.depends_on.into_iter().filter(|(target, _)| !sent.contains(target)).collect();
            if !taken.is_empty() {
                self.modify_loose(&imported.id, |edges| edges.extend(taken));
            }
            refresh.extend(self.dependents_of(&imported.id));
        }
        refresh.retain(|bead_id| self.beads.contains_key(bead_id));
        self.refresh_blocked(refresh);
        Ok(Outcome::Done)
    }
}
