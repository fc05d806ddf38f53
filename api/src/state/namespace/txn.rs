//! Transactions: conditions on revisions, then bead writes applied all together or not at all.
//!
//! Every write goes through the same per-command code as a single command does. While a
//! transaction applies, the namespace keeps a journal of each bead it touches as it was before;
//! when a write is refused, [`NamespaceState::roll_back`] puts those beads, the namespace's
//! counters and its queued events back, and recomputes the blocked state of whatever they touch.
//! Invariant: a refused transaction leaves the namespace's records exactly as they were.

use super::{Journal, NamespaceState};
use crate::command::{Command, Condition, Fence, Txn};
use crate::commands::txn::References;
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Outcome, Refusal};

impl NamespaceState {
    /// Checks the conditions, then applies every write or none.
    pub(crate) fn txn(&mut self, txn: &Txn, now: Timestamp) -> Result<Outcome, Refusal> {
        for Condition { id, revision } in &txn.conditions {
            let current = self.bead(id)?.revision;
            if current != *revision {
                return Err(Refusal::RevisionMismatch { id: id.clone(), expected: *revision, current });
            }
        }
        for Fence { id, lease_id } in &txn.fences {
            let bead = self.bead(id)?;
            if bead.lease.as_ref().is_none_or(|lease| lease.id != *lease_id) {
                return Err(Refusal::lease_lost(bead, *lease_id));
            }
        }
        self.begin_journal();
        let mut created: Vec<Option<BeadId>> = Vec::with_capacity(txn.writes.len());
        let mut outcomes = Vec::with_capacity(txn.writes.len());
        for (index, write) in txn.writes.iter().enumerate() {
            let references = References::new(&created, index);
            let outcome = match write.as_bead_write() {
                Some(bead_write) => bead_write.apply_resolved(&references, self, now),
                None => Err(Refusal::Invalid(format!("{} is not a bead write", write.name()))),
            };
            match outcome {
                Ok(outcome) => {
                    let created_id = match (&outcome, write) {
                        (Outcome::Bead(bead), Command::Create(_)) => Some(bead.id.clone()),
                        _ => None,
                    };
                    created.push(created_id);
                    outcomes.push(outcome);
                }
                Err(refusal) => {
                    self.roll_back();
                    if txn.writes.len() == 1 {
                        return Err(refusal);
                    }
                    return Err(Refusal::TxnWriteRefused { index, refusal: Box::new(refusal) });
                }
            }
        }
        self.journal = None;
        Ok(Outcome::Txn(outcomes))
    }

    /// Starts keeping what the command being applied changes, so [`Self::roll_back`] can undo it.
    pub(in crate::state) fn begin_journal(&mut self) {
        assert!(self.journal.is_none(), "transactions do not nest");
        self.journal = Some(Journal {
            meta: self.meta.clone(),
            beads: Default::default(),
            loose: Default::default(),
            pending_events: self.pending_events.len(),
        });
    }

    /// Undoes what the current transaction changed.
    pub(in crate::state) fn roll_back(&mut self) {
        let journal = self.journal.take().expect("a transaction is applying");
        self.meta = journal.meta;
        self.meta_dirty = true;
        self.pending_events.truncate(journal.pending_events);
        for (source, edges) in journal.loose {
            match edges {
                Some(edges) => self.loose_edges.insert(source.clone(), edges),
                None => self.loose_edges.remove(&source),
            };
            self.dirty_loose.insert(source);
        }
        let mut refresh = Vec::with_capacity(journal.beads.len());
        for (bead_id, before) in journal.beads {
            self.take_bead(&bead_id);
            if let Some(bead) = before {
                self.put_bead(bead);
            }
            refresh.push(bead_id);
        }
        // Whatever reads a restored bead's status or blocked state: its dependents and children.
        let mut start = refresh.clone();
        for bead_id in &refresh {
            start.extend(self.dependents_of(bead_id));
            start.extend(self.children_of(bead_id));
        }
        self.refresh_blocked(start);
    }
}
