//! The journal that makes a transaction all or nothing (the transaction itself, its conditions
//! and its writes, is applied by `crate::commands::txn`).
//!
//! While a transaction applies, the namespace keeps a journal of each bead it touches as it was
//! before ([`NamespaceState::begin_journal`]); when a write is refused,
//! [`NamespaceState::roll_back`] puts those beads, the namespace's counters and its queued events
//! back, and recomputes the blocked state of whatever they touch; when every write applied,
//! [`NamespaceState::end_journal`] keeps them.
//! Invariant: a rolled-back transaction leaves the namespace's records exactly as they were.

use super::{Journal, NamespaceState};

impl NamespaceState {
    /// Starts keeping what the command being applied changes, so [`Self::roll_back`] can undo it.
    pub(crate) fn begin_journal(&mut self) {
        assert!(self.journal.is_none(), "transactions do not nest");
        self.journal = Some(Journal {
            meta: self.meta.clone(),
            beads: Default::default(),
            loose: Default::default(),
            pending_events: self.pending_events.len(),
        });
    }

    /// Keeps what the current transaction changed: it applied whole.
    pub(crate) fn end_journal(&mut self) {
        self.journal = None;
    }

    /// Undoes what the current transaction changed.
    pub(crate) fn roll_back(&mut self) {
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
