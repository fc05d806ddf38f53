//! The mutating commands on one namespace. Each checks everything it needs before it changes
//! anything, so a refused command leaves the namespace exactly as it was.

use std::collections::BTreeMap;

use super::{LOOSE_EDGE_SOURCES_MAX, NamespaceState};
use crate::input::{CreateBead, JudgedLease, ReadyFilter, UpdateBead};
use crate::limits::DEPENDENCIES_PER_BEAD_MAX;
use crate::model::{
    Actor, Bead, BeadId, DEFAULT_TYPE, DepType, LABEL_DEAD_LETTER, Lease, Status, Timestamp, event_type,
};
use crate::outcome::{Outcome, Refusal};
use crate::validate::invalid_transition;

impl NamespaceState {
    /// Creates a bead (store invariants 1-4).
    pub(crate) fn create(&mut self, create: &CreateBead, now: Timestamp) -> Result<Outcome, Refusal> {
        Ok(Outcome::Bead(Box::new(self.create_bead(create, now)?)))
    }

    /// Creates a bead and returns it.
    pub(in crate::state) fn create_bead(&mut self, create: &CreateBead, now: Timestamp) -> Result<Bead, Refusal> {
        let parent_prefix = match &create.parent_id {
            Some(parent_id) => Some(self.bead(parent_id)?.id.prefix().to_string()),
            None => None,
        };
        let (bead_id, seq) = self.next_id(parent_prefix.as_deref());
        // Its edges may name ids this namespace does not hold (another rig's,
        // `external:<rig>:<id>`): such an edge never blocks, as in bd.
        let mut bead = create.clone().into_bead(bead_id);
        bead.seq = seq;
        if bead.bead_type.is_empty() {
            bead.bead_type = DEFAULT_TYPE.to_string();
        }
        bead.created_at = now;
        bead.updated_at = now;
        bead.revision = self.revision;
        self.insert(bead.clone());
        Ok(bead)
    }

    /// Checks that a claim by `actor` may take the bead; `Ok(true)` when the actor already holds it.
    pub(in crate::state) fn check_claim(bead: &Bead, actor: &Actor) -> Result<bool, Refusal> {
        let held_by_actor = bead.assignee == actor.0;
        if bead.status == Status::InProgress && held_by_actor {
            return Ok(true);
        }
        let live = matches!(bead.status, Status::Open | Status::InProgress | Status::Hooked);
        if live && !bead.assignee.is_empty() && !held_by_actor {
            return Err(Refusal::AlreadyClaimed { id: bead.id.clone(), holder: bead.assignee.clone() });
        }
        if bead.status != Status::Open {
            return Err(Refusal::NotClaimable { id: bead.id.clone(), status: bead.status });
        }
        Ok(false)
    }

    /// Claims a bead for `actor`, with a lease of `lease_ms` when given. A holder that claims
    /// again keeps its claim; with a lease it renews the lease it holds, or takes a new one.
    pub(in crate::state) fn take_claim(
        &mut self,
        bead_id: &BeadId,
        actor: &Actor,
        lease_ms: Option<u64>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        let lease_ms = lease_ms.or(self.meta.default_lease_ms);
        let already_held = Self::check_claim(&*self.bead(bead_id)?, actor)?;
        if already_held && lease_ms.is_none() {
            return Ok(Outcome::Bead(Box::new(self.bead(bead_id)?.clone())));
        }
        let revision = self.revision;
        let bead = self.modify_and_read(bead_id, now, |bead| take(bead, actor, lease_ms, revision, now))?;
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Claims one bead (docs/beads.md §3).
    pub(crate) fn claim(
        &mut self,
        bead_id: &BeadId,
        actor: &Actor,
        lease_ms: Option<u64>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        self.take_claim(bead_id, actor, lease_ms, now)
    }

    /// The lease `actor` holds on a bead, checked against the lease id a request names.
    fn held_lease(&self, bead_id: &BeadId, actor: &Actor, lease_id: Option<u64>) -> Result<Lease, Refusal> {
        let bead = self.bead(bead_id)?;
        let Some(lease) = bead.lease.as_ref().filter(|lease| lease.holder == actor.0) else {
            let holder = bead.lease.as_ref().map(|lease| lease.holder.clone()).unwrap_or_default();
            return Err(Refusal::NotLeaseHolder { id: bead_id.clone(), holder });
        };
        if let Some(lease_id) = lease_id.filter(|lease_id| *lease_id != lease.id) {
            return Err(Refusal::lease_lost(&bead, lease_id));
        }
        Ok(lease.clone())
    }

    /// Renews `actor`'s lease on a bead for its length again.
    pub(crate) fn lease_renew(
        &mut self,
        bead_id: &BeadId,
        actor: &Actor,
        lease_id: Option<u64>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        let held = self.held_lease(bead_id, actor, lease_id)?;
        let revision = self.revision;
        let bead = self.modify_and_read(bead_id, now, |bead| {
            bead.lease = Some(lease(held.id, &held.holder, held.ttl_ms, revision, now));
        })?;
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Gives up `actor`'s leased claim: the bead goes back to `open`, unassigned.
    pub(crate) fn lease_release(
        &mut self,
        bead_id: &BeadId,
        actor: &Actor,
        lease_id: Option<u64>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        let held = self.held_lease(bead_id, actor, lease_id)?;
        let bead = self.modify_and_read(bead_id, now, |bead| {
            bead.status = Status::Open;
            bead.assignee.clear();
        })?;
        self.emit(event_type::LEASE_RELEASED, bead_id, held.holder);
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Expires a lease the leader judged past due, if it is still the bead's current one as last
    /// renewed at `renewed_at`: the bead goes back to `open`, unassigned, one delivery more; at
    /// `max_deliveries` it is `blocked` and labelled `dead-letter` instead. Otherwise (renewed,
    /// released, expired already, or the bead is gone) nothing changes, so applying it twice is
    /// harmless. Answers the expired bead, or nothing.
    pub(in crate::state) fn expire_lease(
        &mut self,
        bead_id: &BeadId,
        lease_id: u64,
        renewed_at: u64,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        // A leased bead is in progress, so held in memory.
        let current = self.beads.held(bead_id).and_then(|bead| bead.lease.as_ref());
        let Some(holder) = current
            .filter(|lease| lease.id == lease_id && lease.renewed_at == renewed_at)
            .map(|lease| lease.holder.clone())
        else {
            return Ok(Outcome::Beads(Vec::new()));
        };
        let max_deliveries = self.meta.max_deliveries;
        let bead = self.modify_and_read(bead_id, now, |bead| {
            bead.assignee.clear();
            bead.delivery_count = bead.delivery_count.saturating_add(1);
            if bead.delivery_count >= max_deliveries {
                bead.status = Status::Blocked;
                bead.labels.insert(LABEL_DEAD_LETTER.to_string());
            } else {
                bead.status = Status::Open;
            }
        })?;
        self.emit(event_type::LEASE_EXPIRED, bead_id, holder);
        if bead.status == Status::Blocked {
            let message = format!("{} deliveries", bead.delivery_count);
            self.emit(event_type::BEAD_DEAD_LETTERED, bead_id, message);
        }
        Ok(Outcome::Beads(vec![bead]))
    }

    /// Expires each lease still as judged, in one command; answers the beads it expired.
    pub(in crate::state) fn expire_leases(
        &mut self,
        leases: &[JudgedLease],
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        self.begin_journal();
        let mut expired = Vec::new();
        for lease in leases {
            match self.expire_lease(&lease.id, lease.lease_id, lease.renewed_at, now) {
                Ok(Outcome::Beads(beads)) => expired.extend(beads),
                Ok(_) => {}
                Err(refusal) => {
                    self.roll_back();
                    return Err(refusal);
                }
            }
        }
        self.journal = None;
        Ok(Outcome::Beads(expired))
    }

    /// Claims the first ready bead matching the filter; an empty list when none is ready.
    pub(crate) fn claim_next(
        &mut self,
        actor: &Actor,
        filter: &ReadyFilter,
        lease_ms: Option<u64>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        let filter = ReadyFilter { limit: 1, ..filter.clone() };
        let candidates = self.ready_ids(&filter, now, |bead| Self::check_claim(bead, actor).is_ok())?;
        match candidates.first() {
            Some(bead_id) => {
                let outcome = self.take_claim(bead_id, actor, lease_ms, now)?;
                let Outcome::Bead(bead) = outcome else { unreachable!("take_claim answers with a bead") };
                Ok(Outcome::Beads(vec![*bead]))
            }
            None => Ok(Outcome::Beads(Vec::new())),
        }
    }

    /// Updates a bead; unset fields stay unchanged (store invariants 8 and 9).
    pub(crate) fn update(&mut self, update: &UpdateBead, now: Timestamp) -> Result<Outcome, Refusal> {
        let current = self.bead(&update.id)?.clone();
        if let Some(actor) = &update.claim_for {
            Self::check_claim(&current, actor)?;
        }
        let status_after_claim = if update.claim_for.is_some() { Status::InProgress } else { current.status };
        if update.ephemeral.unwrap_or(current.ephemeral) && update.no_history.unwrap_or(current.no_history) {
            return Err(Refusal::Invalid(format!(
                "bead {} would be both ephemeral (a wisp) and no_history; a bead is one or the other",
                current.id
            )));
        }
        if let Some(next) = update.status
            && !status_after_claim.can_become(next)
        {
            return Err(invalid_transition(&current.id, status_after_claim, next));
        }
        if let Some(parent_id) = &update.parent_id
            && !parent_id.0.is_empty()
        {
            // Not `NotFound`: callers read that as "the bead being updated is missing".
            if !self.beads.contains_key(parent_id) {
                return Err(Refusal::Invalid(format!(
                    "parent {parent_id} does not exist; create it first or fix the id"
                )));
            }
            if self.would_cycle(&current.id, parent_id) {
                return Err(Refusal::Invalid(format!(
                    "making {parent_id} the parent of {} would form a cycle",
                    current.id
                )));
            }
        }
        let labels_after =
            current.labels.union(&update.add_labels).filter(|label| !update.remove_labels.contains(*label)).count();
        if labels_after > crate::limits::LABELS_MAX {
            return Err(Refusal::Invalid(format!(
                "bead {} would hold more than {} labels",
                current.id,
                crate::limits::LABELS_MAX
            )));
        }
        let notes_after = update.notes.as_ref().map_or(current.notes.len(), String::len)
            + update.append_notes.as_ref().map_or(0, |appended| appended.len() + 1);
        if notes_after > crate::limits::DESCRIPTION_BYTES_MAX {
            return Err(Refusal::TooLarge {
                what: format!("the notes of {}", current.id),
                size: notes_after,
                limit: crate::limits::DESCRIPTION_BYTES_MAX,
            });
        }
        let mut metadata_after = current.metadata.clone();
        merge_metadata_map(&mut metadata_after, &update.metadata);
        if metadata_after.len() > crate::limits::METADATA_KEYS_MAX {
            return Err(Refusal::Invalid(format!(
                "bead {} would hold more than {} metadata keys",
                current.id,
                crate::limits::METADATA_KEYS_MAX
            )));
        }
        if update.is_empty() {
            return Ok(Outcome::Bead(Box::new(current)));
        }
        let revision = self.revision;
        let lease_ms = update.lease_ms.or(self.meta.default_lease_ms);
        let bead = self.modify_and_read(&update.id, now, |bead| {
            if let Some(actor) = &update.claim_for {
                take(bead, actor, lease_ms, revision, now);
            }
            apply_fields(bead, update, now);
        })?;
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Sets (or removes) metadata keys of one bead atomically, each key on its own.
    pub(crate) fn set_metadata(
        &mut self,
        bead_id: &BeadId,
        entries: &BTreeMap<String, Option<String>>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        let bead = self.bead(bead_id)?;
        let added = entries.iter().filter(|(key, value)| value.is_some() && !bead.metadata.contains_key(*key)).count();
        if bead.metadata.len() + added > crate::limits::METADATA_KEYS_MAX {
            return Err(Refusal::Invalid(format!(
                "bead {bead_id} would hold more than {} metadata keys",
                crate::limits::METADATA_KEYS_MAX
            )));
        }
        let bead = self.modify_and_read(bead_id, now, |bead| {
            merge_metadata(bead, entries);
        })?;
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Closes beads; closing a closed bead succeeds and leaves it as it was (store invariant 6).
    pub(crate) fn close(
        &mut self,
        ids: &[BeadId],
        reason: &Option<String>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        for bead_id in ids {
            self.bead(bead_id)?;
        }
        let mut closed = Vec::with_capacity(ids.len());
        for bead_id in ids {
            closed.push(self.close_one(bead_id, reason.clone(), now)?);
        }
        Ok(Outcome::Beads(closed))
    }

    /// Moves a closed bead back to `open`.
    /// Reopens a bead, as bd does: any status goes back to `open` with no deferral (closed also
    /// drops its close time and reason); an open bead stays as it is.
    pub(crate) fn reopen(&mut self, bead_id: &BeadId, now: Timestamp) -> Result<Outcome, Refusal> {
        let bead = self.modify_and_read(bead_id, now, |bead| {
            if bead.status != Status::Open {
                bead.status = Status::Open;
                bead.defer_until = None;
                bead.closed_at = None;
                bead.close_reason = None;
            }
            // Reopening a dead-lettered bead gives it a fresh set of deliveries.
            if bead.labels.remove(LABEL_DEAD_LETTER) {
                bead.delivery_count = 0;
            }
        })?;
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Deletes a bead and the edges that touch it.
    pub(crate) fn delete(&mut self, bead_id: &BeadId, now: Timestamp) -> Result<Outcome, Refusal> {
        self.bead(bead_id)?;
        self.remove(bead_id, now)?;
        Ok(Outcome::Done)
    }

    /// Adds or retypes an edge; re-adding a pair updates its type.
    pub(crate) fn dep_add(
        &mut self,
        issue_id: &BeadId,
        depends_on_id: &BeadId,
        dep_type: &DepType,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        if issue_id == depends_on_id {
            return Err(Refusal::Invalid(format!("{issue_id} cannot depend on itself")));
        }
        let Some(bead) = self.beads.get(issue_id) else {
            return self.loose_dep_add(issue_id, depends_on_id, dep_type);
        };
        let is_new = !bead.depends_on.contains_key(depends_on_id);
        if is_new && bead.depends_on.len() >= DEPENDENCIES_PER_BEAD_MAX {
            return Err(Refusal::Invalid(format!(
                "bead {issue_id} already has {DEPENDENCIES_PER_BEAD_MAX} dependencies"
            )));
        }
        if is_new && self.would_cycle(issue_id, depends_on_id) {
            return Err(Refusal::Invalid(format!(
                "{issue_id} depending on {depends_on_id} would form a dependency cycle; remove an edge first"
            )));
        }
        self.modify(issue_id, now, |bead| {
            bead.depends_on.insert(depends_on_id.clone(), dep_type.clone());
        })?;
        Ok(Outcome::Done)
    }

    /// Removes an edge; a missing edge (or bead) is a no-op.
    pub(crate) fn dep_remove(
        &mut self,
        issue_id: &BeadId,
        depends_on_id: &BeadId,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        let has_edge = self.beads.get(issue_id).is_some_and(|bead| bead.depends_on.contains_key(depends_on_id));
        if has_edge {
            self.modify(issue_id, now, |bead| {
                bead.depends_on.remove(depends_on_id);
            })?;
        }
        let has_loose_edge = self.loose_edges.get(issue_id).is_some_and(|edges| edges.contains_key(depends_on_id));
        if has_loose_edge {
            self.modify_loose(issue_id, |edges| {
                edges.remove(depends_on_id);
            });
        }
        Ok(Outcome::Done)
    }

    /// Adds or retypes an edge whose source is not a bead (Gas City keeps edges between any ids).
    fn loose_dep_add(&mut self, source: &BeadId, target: &BeadId, dep_type: &DepType) -> Result<Outcome, Refusal> {
        let edges = self.loose_edges.get(source);
        if edges.is_none() && self.loose_edges.len() >= LOOSE_EDGE_SOURCES_MAX {
            return Err(Refusal::Invalid(format!(
                "{LOOSE_EDGE_SOURCES_MAX} ids that are not beads already hold edges; remove some, or add edges between beads"
            )));
        }
        let is_new = edges.is_none_or(|edges| !edges.contains_key(target));
        if is_new && edges.is_some_and(|edges| edges.len() >= DEPENDENCIES_PER_BEAD_MAX) {
            return Err(Refusal::Invalid(format!("{source} already has {DEPENDENCIES_PER_BEAD_MAX} dependencies")));
        }
        self.modify_loose(source, |edges| {
            edges.insert(target.clone(), dep_type.clone());
        });
        Ok(Outcome::Done)
    }
}

fn merge_metadata(bead: &mut Bead, entries: &BTreeMap<String, Option<String>>) {
    merge_metadata_map(&mut bead.metadata, entries);
}

fn merge_metadata_map(metadata: &mut BTreeMap<String, String>, entries: &BTreeMap<String, Option<String>>) {
    for (key, value) in entries {
        match value {
            Some(value) => metadata.insert(key.clone(), value.clone()),
            None => metadata.remove(key),
        };
    }
}

/// Applies an update's plain fields (claim already handled, transitions already checked).
fn apply_fields(bead: &mut Bead, update: &UpdateBead, now: Timestamp) {
    if let Some(title) = &update.title {
        bead.title = title.clone();
    }
    if let Some(description) = &update.description {
        bead.description = description.clone();
    }
    if let Some(notes) = &update.notes {
        bead.notes = notes.clone();
    }
    if let Some(appended) = &update.append_notes {
        if !bead.notes.is_empty() {
            bead.notes.push('\n');
        }
        bead.notes.push_str(appended);
    }
    if let Some(ephemeral) = update.ephemeral {
        bead.ephemeral = ephemeral;
    }
    if let Some(no_history) = update.no_history {
        bead.no_history = no_history;
    }
    if let Some(status) = update.status
        && status != bead.status
    {
        bead.status = status;
        bead.closed_at = (status == Status::Closed).then_some(now);
        if status != Status::Closed {
            bead.close_reason = None;
        }
    }
    if let Some(bead_type) = &update.bead_type {
        bead.bead_type = bead_type.clone();
    }
    if update.priority.is_some() {
        bead.priority = update.priority;
    }
    if let Some(assignee) = &update.assignee {
        bead.assignee = assignee.clone();
    }
    if let Some(parent_id) = &update.parent_id {
        bead.parent_id = (!parent_id.0.is_empty()).then(|| parent_id.clone());
    }
    bead.labels.extend(update.add_labels.iter().cloned());
    for label in &update.remove_labels {
        bead.labels.remove(label);
    }
    merge_metadata(bead, &update.metadata);
}

/// Puts `bead` in `actor`'s hands (unless it is already in progress with them), and with
/// `lease_ms` grants the claim a lease, or renews the lease the bead has, at log index `revision`.
fn take(bead: &mut Bead, actor: &Actor, lease_ms: Option<u64>, revision: u64, now: Timestamp) {
    if !(bead.status == Status::InProgress && bead.assignee == actor.0) {
        bead.status = Status::InProgress;
        bead.assignee = actor.0.clone();
        bead.started_at = Some(now);
    }
    if let Some(ttl_ms) = lease_ms {
        let id = bead.lease.as_ref().map_or(revision, |lease| lease.id);
        bead.lease = Some(lease(id, &actor.0, ttl_ms, revision, now));
    }
}

/// A lease granted or renewed at log index `revision` and time `now`.
fn lease(id: u64, holder: &str, ttl_ms: u64, revision: u64, now: Timestamp) -> Lease {
    let ttl = i64::try_from(ttl_ms).unwrap_or(i64::MAX);
    Lease {
        id,
        holder: holder.to_string(),
        ttl_ms,
        renewed_at: revision,
        expires_at: Timestamp(now.0.saturating_add(ttl)),
    }
}
