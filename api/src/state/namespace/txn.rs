//! Transactions: conditions on revisions, then bead writes applied all together or not at all.
//!
//! Every write goes through the same per-command code as a single command does. While a
//! transaction applies, the namespace keeps a journal of each bead it touches as it was before;
//! when a write is refused, [`NamespaceState::roll_back`] puts those beads, the namespace's
//! counters and its queued events back, and recomputes the blocked state of whatever they touch.
//! Invariant: a refused transaction leaves the namespace's records exactly as they were.

use super::{Journal, NamespaceState};
use crate::command::{Command, Condition, Fence, Txn};
use crate::model::{BeadId, Timestamp};
use crate::outcome::{Outcome, Refusal};

/// The id a `$N` reference names: the bead write N created.
fn resolve(bead_id: &BeadId, created: &[Option<BeadId>], index: usize) -> Result<BeadId, Refusal> {
    let Some(position) = bead_id.0.strip_prefix('$') else { return Ok(bead_id.clone()) };
    let earlier = position.parse::<usize>().ok().filter(|earlier| *earlier < index);
    match earlier.and_then(|earlier| created[earlier].clone()) {
        Some(created_id) => Ok(created_id),
        None => Err(Refusal::Invalid(format!(
            "{} names no bead: ${{N}} refers to an earlier create of the transaction, counting writes from 0",
            bead_id.0
        ))),
    }
}

/// A `needs` entry (`ID` or `TYPE:ID`) with its id resolved.
fn resolve_need(need: &str, created: &[Option<BeadId>], index: usize) -> Result<String, Refusal> {
    match need.rsplit_once(':') {
        Some((dep_type, target)) if target.starts_with('$') => {
            Ok(format!("{dep_type}:{}", resolve(&BeadId::from(target), created, index)?))
        }
        _ => Ok(resolve(&BeadId::from(need), created, index)?.0),
    }
}

/// A metadata value that is exactly `$N` (a reference to the bead write N created, as Gas City's
/// graph plans point one node's metadata at another node) with the id resolved; any other value
/// as it is.
fn resolve_value(value: &mut String, created: &[Option<BeadId>], index: usize) -> Result<(), Refusal> {
    let is_reference = value.strip_prefix('$').is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    if is_reference {
        *value = resolve(&BeadId(value.clone()), created, index)?.0;
    }
    Ok(())
}

/// The write with every `$N` reference replaced by the id it names: in ids, parents, needs, edge
/// ends, and the values of a `set_metadata` that are exactly `$N` (elsewhere a metadata value is
/// kept as written).
fn resolved(write: &Command, created: &[Option<BeadId>], index: usize) -> Result<Command, Refusal> {
    let id = |bead_id: &BeadId| resolve(bead_id, created, index);
    let mut write = write.clone();
    match &mut write {
        Command::Create(create) => {
            if let Some(parent_id) = &mut create.parent_id {
                *parent_id = id(parent_id)?;
            }
            for need in &mut create.needs {
                *need = resolve_need(need, created, index)?;
            }
        }
        Command::Update(update) => {
            update.id = id(&update.id)?;
            if let Some(parent_id) = update.parent_id.as_mut().filter(|parent_id| !parent_id.0.is_empty()) {
                *parent_id = id(parent_id)?;
            }
        }
        Command::SetMetadata { id: bead_id, entries } => {
            *bead_id = id(bead_id)?;
            for value in entries.values_mut().flatten() {
                resolve_value(value, created, index)?;
            }
        }
        Command::Claim { id: bead_id, .. } | Command::Reopen { id: bead_id } | Command::Delete { id: bead_id } => {
            *bead_id = id(bead_id)?
        }
        Command::Close { ids, .. } => {
            for bead_id in ids {
                *bead_id = id(bead_id)?;
            }
        }
        Command::DepAdd { issue_id, depends_on_id, .. } | Command::DepRemove { issue_id, depends_on_id } => {
            *issue_id = id(issue_id)?;
            *depends_on_id = id(depends_on_id)?;
        }
        _ => {}
    }
    Ok(write)
}

impl NamespaceState {
    /// Checks the conditions, then applies every write or none.
    pub(in crate::state) fn txn(&mut self, txn: &Txn, now: Timestamp) -> Result<Outcome, Refusal> {
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
            let outcome = resolved(write, &created, index).and_then(|write| self.bead_write(&write, now));
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

    /// Applies one bead write (a [`Command::is_bead_write`] command).
    pub(in crate::state) fn bead_write(&mut self, write: &Command, now: Timestamp) -> Result<Outcome, Refusal> {
        match write {
            Command::Create(create) => self.create(create, now),
            Command::Update(update) => self.update(update, now),
            Command::SetMetadata { id, entries } => self.set_metadata(id, entries, now),
            Command::Claim { id, actor, lease_ms } => self.claim(id, actor, *lease_ms, now),
            Command::Close { ids, reason } => self.close(ids, reason, now),
            Command::Reopen { id } => self.reopen(id, now),
            Command::Delete { id } => self.delete(id, now),
            Command::DepAdd { issue_id, depends_on_id, dep_type } => {
                self.dep_add(issue_id, depends_on_id, dep_type, now)
            }
            Command::DepRemove { issue_id, depends_on_id } => self.dep_remove(issue_id, depends_on_id, now),
            other => Err(Refusal::Invalid(format!("{} is not a bead write", other.name()))),
        }
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
