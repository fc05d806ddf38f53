//! One namespace's state: its beads with their indexes, its events, and the primitives every
//! change goes through; the commands and reads on it are in the child modules (`commands`,
//! `orchestration`, `orders`, `import`, `txn`, `query`), and `persist` loads and names its records.
//!
//! Every change to a bead goes through [`NamespaceState::modify`], `insert` or `remove` (an
//! import's undo and a transaction's roll-back too), all over the three primitives that touch the
//! map of beads (`put_bead`, `lift_bead`, `take_bead`): they take the bead out of the indexes,
//! change it, put it back, mark it dirty for persistence and refresh the blocked state of
//! whatever the change can affect. That single path is what keeps the index invariants of
//! [`super::index`] true.
//!
//! Invariant: a bead is blocked exactly when its status is `blocked`, or one of its blocking
//! dependencies (`blocks`, `conditional-blocks`, `waits-for`) points at a bead that is not closed,
//! or its parent (or a `parent-child` target) is blocked.
//! Invariant: neither dependency edges nor parent links form a cycle.
//! Invariant: every change of a bead queues its event here ([`NamespaceState::pending_events`]);
//! the state numbers and stores them at the end of the same command, so events and the change
//! they describe are persisted in one atomic batch.
//! Invariant: when a bead closes, its parent convoy (open, not `owned`) or molecule closes in the
//! same command once every one of its children is closed (docs/beads.md §7).

mod beads;
mod commands;
mod import;
mod orchestration;
pub(super) mod orders;
mod persist;
#[cfg(test)]
pub(in crate::state) use persist::sort_by_id;
mod query;
mod queues;
mod txn;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::closed_index::{ColdCounts, Listing};
use super::index::Indexes;
use crate::model::{
    Bead, BeadCounts, BeadId, CONVOY_TYPE, DepType, Event, LABEL_OWNED, MOLECULE_TYPE, Namespace, Status, Timestamp,
    event_type,
};
use crate::outcome::{NamespaceInfo, Outcome, Refusal};
use beads::BeadMap;
pub use beads::BeadRef;

/// How far up a parent chain or along dependency edges any walk goes before it stops.
pub const GRAPH_WALK_MAX: usize = 100_000;
/// Most ids that hold dependency edges without being beads, per namespace.
pub const LOOSE_EDGE_SOURCES_MAX: usize = 10_000;

/// The persisted settings and counters of a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceMeta {
    /// Prefix of new ids, fixed at first use.
    pub prefix: String,
    /// The sequence number the next bead gets.
    pub next_seq: u64,
    /// The sequence number the next event gets (events start at 1).
    pub next_event_seq: u64,
    /// Events up to this sequence number were compacted away (0: none).
    pub compacted_through: u64,
    /// The lease a claim that names none gets (`None`: such claims have no lease).
    pub default_lease_ms: Option<u64>,
    /// How many times a bead's leases may expire before it is dead-lettered.
    pub max_deliveries: u32,
}

impl NamespaceMeta {
    /// The settings of a new, empty namespace.
    pub fn new(prefix: &str) -> NamespaceMeta {
        NamespaceMeta {
            prefix: prefix.to_string(),
            next_seq: 1,
            next_event_seq: 1,
            compacted_through: 0,
            default_lease_ms: None,
            max_deliveries: crate::limits::MAX_DELIVERIES_DEFAULT,
        }
    }

    /// The newest event's sequence number (0 when there is none).
    pub fn last_event_seq(&self) -> u64 {
        self.next_event_seq - 1
    }
}

/// An event queued by a change, numbered when the command finishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingEvent {
    /// Its type.
    pub event_type: &'static str,
    /// The bead it is about.
    pub subject: BeadId,
    /// A short note.
    pub message: String,
}

/// A stored formula: its source (what is persisted) and the source parsed, so that cooking and
/// listing never parse it again. A source that no longer parses (a formula stored by a build
/// with a laxer parser) keeps its refusal, which a cook of it answers.
#[derive(Clone, Debug)]
pub struct StoredFormula {
    /// The TOML source.
    source: String,
    /// The source, parsed.
    parsed: Result<crate::formula::Formula, Refusal>,
}

impl StoredFormula {
    /// Parses a source.
    pub(super) fn new(source: String) -> StoredFormula {
        let parsed = crate::formula::Formula::parse(&source);
        StoredFormula { source, parsed }
    }
}

/// One namespace: its beads, their indexes, and what changed since the last persist.
#[derive(Clone, Debug)]
pub struct NamespaceState {
    meta: NamespaceMeta,
    beads: BeadMap,
    indexes: Indexes,
    /// While loading: the beads that can be blocked by their own status or dependencies, with
    /// whether their status is `blocked` and the targets of their edges that block until closed,
    /// which [`NamespaceState::refresh_all`] judges without reading a cold bead back.
    load_blocked: Vec<(BeadId, bool, Vec<BeadId>)>,
    dirty_beads: BTreeSet<BeadId>,
    meta_dirty: bool,
    /// Retained events by sequence number.
    events: BTreeMap<u64, Event>,
    /// Events added or compacted since the last persist.
    dirty_events: BTreeSet<u64>,
    /// Events of the command being applied, not yet numbered.
    pending_events: Vec<PendingEvent>,
    /// Stored formulas by name: the TOML source, parsed once when stored or loaded.
    formulas: BTreeMap<String, StoredFormula>,
    /// Formulas stored or removed since the last persist.
    dirty_formulas: BTreeSet<String>,
    /// Stored orders by name, parsed once when stored or loaded, with their firings.
    orders: BTreeMap<String, orders::StoredOrder>,
    /// Orders stored, fired or removed since the last persist.
    dirty_orders: BTreeSet<String>,
    /// Dependency edges whose source is not a bead (yet): source id to target and type. Gas City
    /// records edges between arbitrary ids; a bead created under such an id takes them over.
    loose_edges: BTreeMap<BeadId, BTreeMap<BeadId, DepType>>,
    /// Loose-edge sources changed since the last persist.
    dirty_loose: BTreeSet<BeadId>,
    /// The Raft index of the command being applied: what a bead it changes gets as its revision.
    revision: u64,
    /// While a transaction applies: how to undo it.
    journal: Option<Journal>,
    /// How many cold beads each listing holds on disk ([`crate::state::closed_index`]).
    cold_counts: ColdCounts,
    /// Closed beads as they were written, before their first change since the last persist: their
    /// index entries on disk are to be deleted.
    stale_closed: Vec<Bead>,
}

/// What a transaction changed, to undo it when a later write is refused: the namespace's
/// settings and each touched bead as it was before its first change (`None`: it did not exist).
#[derive(Clone, Debug)]
struct Journal {
    meta: NamespaceMeta,
    beads: BTreeMap<BeadId, Option<Bead>>,
    loose: BTreeMap<BeadId, Option<BTreeMap<BeadId, DepType>>>,
    pending_events: usize,
}

impl NamespaceState {
    /// An empty namespace.
    pub fn new(meta: NamespaceMeta) -> NamespaceState {
        NamespaceState {
            meta,
            beads: BeadMap::default(),
            indexes: Indexes::default(),
            load_blocked: Vec::new(),
            dirty_beads: BTreeSet::new(),
            meta_dirty: true,
            events: BTreeMap::new(),
            dirty_events: BTreeSet::new(),
            pending_events: Vec::new(),
            formulas: BTreeMap::new(),
            dirty_formulas: BTreeSet::new(),
            orders: BTreeMap::new(),
            dirty_orders: BTreeSet::new(),
            loose_edges: BTreeMap::new(),
            dirty_loose: BTreeSet::new(),
            revision: 0,
            journal: None,
            cold_counts: ColdCounts::default(),
            stale_closed: Vec::new(),
        }
    }

    /// Keeps a loose-edge source's edges from before their first change in the current
    /// transaction, if one is applying.
    fn journal_loose(&mut self, source: &BeadId) {
        if let Some(journal) = self.journal.as_mut()
            && !journal.loose.contains_key(source)
        {
            journal.loose.insert(source.clone(), self.loose_edges.get(source).cloned());
        }
    }

    /// Changes the loose edges of `source` through `change` (an empty set is removed).
    pub(super) fn modify_loose(&mut self, source: &BeadId, change: impl FnOnce(&mut BTreeMap<BeadId, DepType>)) {
        self.journal_loose(source);
        let mut edges = self.loose_edges.remove(source).unwrap_or_default();
        change(&mut edges);
        if !edges.is_empty() {
            self.loose_edges.insert(source.clone(), edges);
        }
        self.dirty_loose.insert(source.clone());
    }

    /// Loose-edge sources with an edge to `target` (a bounded scan: see [`LOOSE_EDGE_SOURCES_MAX`]).
    pub(super) fn loose_dependents_of(&self, target: &BeadId) -> Vec<BeadId> {
        let pointing = self.loose_edges.iter().filter(|(_, edges)| edges.contains_key(target));
        pointing.map(|(source, _)| source.clone()).collect()
    }

    /// Keeps a bead's value from before its first change in the current transaction, if one is
    /// applying.
    fn journal_bead(&mut self, bead_id: &BeadId) {
        if let Some(journal) = self.journal.as_mut()
            && !journal.beads.contains_key(bead_id)
        {
            journal.beads.insert(bead_id.clone(), self.beads.get(bead_id).map(BeadRef::into_owned));
        }
    }

    /// Queues an event of the command being applied.
    pub(crate) fn emit(&mut self, event_type: &'static str, subject: &BeadId, message: String) {
        self.pending_events.push(PendingEvent { event_type, subject: subject.clone(), message });
    }

    /// Numbers and stores the queued events, then compacts the oldest beyond `retention`.
    pub(super) fn flush_events(&mut self, now: Timestamp, actor: &str, retention: u64) {
        for pending in std::mem::take(&mut self.pending_events) {
            let seq = self.meta.next_event_seq;
            self.meta.next_event_seq += 1;
            let event = Event {
                seq,
                event_type: pending.event_type.to_string(),
                timestamp: now,
                actor: actor.to_string(),
                subject: pending.subject.0,
                message: pending.message,
            };
            self.events.insert(seq, event);
            self.dirty_events.insert(seq);
            self.meta_dirty = true;
        }
        let retention = retention.max(crate::limits::EVENT_RETENTION_MIN);
        while self.events.len() as u64 > retention {
            let (seq, _) = self.events.pop_first().expect("more events than the retention, so not empty");
            self.meta.compacted_through = seq;
            self.dirty_events.insert(seq);
            self.meta_dirty = true;
        }
    }

    /// Loads a persisted event.
    pub(super) fn load_event(&mut self, event: Event) {
        self.events.insert(event.seq, event);
    }

    /// The bead with this id, or a not-found refusal.
    pub fn bead(&self, bead_id: &BeadId) -> Result<BeadRef<'_>, Refusal> {
        self.beads.get(bead_id).ok_or_else(|| Refusal::NotFound(bead_id.clone()))
    }

    /// The namespace's settings and bead count, as a listing shows them, under `name`.
    pub fn info(&self, name: &Namespace) -> NamespaceInfo {
        NamespaceInfo {
            name: name.0.clone(),
            prefix: self.meta.prefix.clone(),
            beads: self.len() as u64,
            last_event_seq: self.meta.last_event_seq(),
            default_lease_ms: self.meta.default_lease_ms,
            max_deliveries: self.meta.max_deliveries,
        }
    }

    /// How many of its beads have `status`.
    pub fn count_with_status(&self, status: Status) -> usize {
        let held = self.indexes.by_status.get(&status).map_or(0, BTreeSet::len);
        let cold = if status == Status::Closed { self.cold_counts.get(Listing::All) as usize } else { 0 };
        held + cold
    }

    /// How many of its beads `ready` lists at `now`: open, unblocked, not deferred past `now`, not
    /// wisps and not of an infrastructure type. A walk of the ready index.
    pub fn ready_count(&self, now: Timestamp) -> usize {
        let deferred =
            |id: &BeadId| self.beads.get(id).is_some_and(|bead| bead.defer_until.is_some_and(|until| until > now));
        self.indexes.ready.all.iter().filter(|key| !deferred(&key.created.id)).count()
    }

    /// How many of its beads are held under a lease.
    pub fn lease_count(&self) -> usize {
        self.indexes.leased.len()
    }

    /// How many formulas it stores.
    pub fn formula_count(&self) -> usize {
        self.formulas.len()
    }

    /// How many orders it stores.
    pub fn order_count(&self) -> usize {
        self.orders.len()
    }

    /// Number of beads.
    pub fn len(&self) -> usize {
        self.beads.len()
    }

    /// Whether it holds no bead.
    pub fn is_empty(&self) -> bool {
        self.beads.is_empty()
    }

    /// The id the next bead created with this prefix override will get.
    pub(super) fn peek_next_id(&self, prefix: Option<&str>) -> BeadId {
        let prefix = prefix.unwrap_or(&self.meta.prefix);
        (self.meta.next_seq..)
            .map(|seq| BeadId(format!("{prefix}-{seq}")))
            .find(|bead_id| !self.beads.contains_key(bead_id))
            .expect("some sequence number is free")
    }

    /// Takes a new id, `<prefix>-<n>`; `prefix` overrides the namespace's (a child's parent prefix).
    pub(super) fn next_id(&mut self, prefix: Option<&str>) -> (BeadId, u64) {
        let prefix = prefix.unwrap_or(&self.meta.prefix).to_string();
        loop {
            let seq = self.meta.next_seq;
            self.meta.next_seq += 1;
            self.meta_dirty = true;
            let bead_id = BeadId(format!("{prefix}-{seq}"));
            // An imported bead may hold the id already; and an id an edge names (a dependency on an
            // id that is no bead yet, or a loose edge from it) is skipped too, so that a new bead
            // never silently inherits an edge it was not given. Judged on the state, so it holds
            // for edges stored before the rule as well.
            if !self.beads.contains_key(&bead_id) && !self.edge_names(&bead_id) {
                return (bead_id, seq);
            }
        }
    }

    /// Adds a new bead (its dependencies already checked) and indexes it.
    pub(super) fn insert(&mut self, mut bead: Bead) {
        if self.loose_edges.contains_key(&bead.id) {
            let mut taken = BTreeMap::new();
            self.modify_loose(&bead.id.clone(), |edges| taken = std::mem::take(edges));
            for (target, dep_type) in taken {
                bead.depends_on.entry(target).or_insert(dep_type);
            }
        }
        self.emit(event_type::BEAD_CREATED, &bead.id, bead.title.clone());
        if bead.bead_type == CONVOY_TYPE {
            self.emit(event_type::CONVOY_CREATED, &bead.id, bead.title.clone());
        }
        let bead_id = self.insert_unrefreshed(bead);
        // Edges may name an id before a bead holds it (an imported id, say): those now wait on it.
        let mut refresh = vec![bead_id.clone()];
        refresh.extend(self.dependents_of(&bead_id));
        self.refresh_blocked(refresh);
    }

    /// Adds a bead without computing its blocked state (loading adds every bead first, then
    /// refreshes them all, because an edge may point at a bead loaded later).
    pub(super) fn insert_unrefreshed(&mut self, mut bead: Bead) -> BeadId {
        // Counts are a read's, never held: an imported bead may arrive with some.
        bead.counts = BeadCounts::default();
        let bead_id = bead.id.clone();
        assert!(!self.beads.contains_key(&bead_id), "bead id {bead_id} assigned twice");
        self.journal_bead(&bead_id);
        self.put_bead(bead);
        bead_id
    }

    /// Puts a bead read back from its record into the map and the indexes, unmarked (its record
    /// is written already, and no command is being applied). [`NamespaceState::refresh_all`]
    /// computes the blocked states once every bead is in. A bead whose id is loaded already is
    /// refused (`Err`, its id) and changes nothing: records that hold one id twice are corrupt.
    pub(super) fn load_bead(&mut self, mut bead: Bead) -> Result<(), BeadId> {
        if self.beads.contains_key(&bead.id) {
            return Err(bead.id);
        }
        bead.counts = BeadCounts::default();
        let blocking: Vec<BeadId> = bead
            .depends_on
            .iter()
            .filter(|(_, dep_type)| dep_type.blocks_until_closed())
            .map(|(target, _)| target.clone())
            .collect();
        if bead.status == Status::Blocked || !blocking.is_empty() {
            self.load_blocked.push((bead.id.clone(), bead.status == Status::Blocked, blocking));
        }
        if self.beads.keeps_cold() && bead.status == Status::Closed {
            let shared_id = self.indexes.insert_unlisted(&bead);
            self.cold_counts.add(&bead);
            self.beads.insert_cold(shared_id);
        } else {
            self.indexes.insert(&bead);
            self.beads.insert(bead);
        }
        Ok(())
    }

    /// Puts a bead into the map and the indexes, and marks it to be written: with
    /// [`NamespaceState::lift_bead`] and [`NamespaceState::take_bead`], the only code that changes
    /// the map of beads (`insert`, `modify`, `remove`, an import's undo and a transaction's
    /// roll-back all go through them).
    fn put_bead(&mut self, bead: Bead) {
        let bead_id = bead.id.clone();
        self.indexes.insert(&bead);
        self.beads.insert(bead);
        self.dirty_beads.insert(bead_id);
    }

    /// Lifts a bead out of the map and the indexes to change it, keeping its blocked state: it is
    /// put back with [`NamespaceState::put_bead`].
    fn lift_bead(&mut self, bead_id: &BeadId) -> Option<Bead> {
        let (bead, cold) = self.beads.remove(bead_id)?;
        if cold {
            self.cold_counts.remove(&bead);
        }
        if bead.status == Status::Closed && !self.dirty_beads.contains(bead_id) {
            // As written: its index entries on disk go when it is written again.
            self.stale_closed.push(bead.clone());
        }
        self.indexes.remove(&bead);
        Some(bead)
    }

    /// Takes a bead out of the map and the indexes (forgetting what the indexes keep under its
    /// id), and marks it to be written (deleted, unless it is put back): see
    /// [`NamespaceState::put_bead`].
    fn take_bead(&mut self, bead_id: &BeadId) -> Option<Bead> {
        let bead = self.lift_bead(bead_id);
        self.indexes.forget(bead_id);
        self.dirty_beads.insert(bead_id.clone());
        bead
    }

    /// Computes the blocked state of every bead (after loading, none is blocked yet): the beads
    /// blocked by their own status or dependencies, then whatever inherits from them. Starting
    /// from none blocked, a bead's state only ever turns blocked, so the order the beads are
    /// visited in does not change the outcome (the least fixed point), and only the beads that
    /// can turn blocked are queued.
    pub(super) fn refresh_all(&mut self) {
        debug_assert!(self.indexes.blocked.is_empty(), "refresh_all runs on a state just loaded");
        // With none blocked yet, `compute_blocked` is true exactly when the status is `blocked` or
        // a target of an edge that blocks until closed exists and is not closed: judged on the
        // statuses alone, so no cold bead is read back here.
        let candidates = std::mem::take(&mut self.load_blocked);
        let blocked: Vec<BeadId> = candidates
            .into_iter()
            .filter(|(_, own_status, targets)| {
                *own_status
                    || targets
                        .iter()
                        .any(|target| self.beads.status(target).is_some_and(|status| status != Status::Closed))
            })
            .map(|(bead_id, _, _)| bead_id)
            .collect();
        self.refresh_blocked(blocked);
    }

    /// [`NamespaceState::modify`], answering the bead as the change left it: stamped with its new
    /// revision and update time (the closure sees it before they are set).
    pub(crate) fn modify_and_read(
        &mut self,
        bead_id: &BeadId,
        now: Timestamp,
        change: impl FnOnce(&mut Bead),
    ) -> Result<Bead, Refusal> {
        self.modify(bead_id, now, change)?;
        self.bead(bead_id).map(BeadRef::into_owned)
    }

    /// Changes one bead through `change`, keeping indexes, persistence and blocked states current.
    pub(super) fn modify<T>(
        &mut self,
        bead_id: &BeadId,
        now: Timestamp,
        change: impl FnOnce(&mut Bead) -> T,
    ) -> Result<T, Refusal> {
        self.journal_bead(bead_id);
        let mut bead = self.lift_bead(bead_id).ok_or_else(|| Refusal::NotFound(bead_id.clone()))?;
        let before = bead.clone();
        let result = change(&mut bead);
        assert_eq!(bead.id, before.id, "a change must not rename a bead");
        // A lease lives only while its holder has the bead in progress: closing, reopening,
        // reassigning or releasing the bead ends it.
        if bead.lease.as_ref().is_some_and(|lease| bead.status != Status::InProgress || bead.assignee != lease.holder) {
            bead.lease = None;
        }
        if bead != before {
            bead.updated_at = now;
            bead.revision = self.revision;
        }
        let affected = affected_by_change(&before, &bead);
        self.put_bead(bead);
        let mut refresh = vec![bead_id.clone()];
        let after = self.beads.at(bead_id);
        let closed_now = before.status != Status::Closed && after.status == Status::Closed;
        if (before.status == Status::Closed) != (after.status == Status::Closed) {
            refresh.extend(self.dependents_of(bead_id));
        }
        self.emit_change(&before);
        if affected {
            self.refresh_blocked(refresh);
        }
        if closed_now && let Some(parent_id) = before.parent_id.clone() {
            self.close_container_if_done(&parent_id, now)?;
        }
        Ok(result)
    }

    /// Queues the event that describes how a bead differs from `before` (none if it does not).
    fn emit_change(&mut self, before: &Bead) {
        let after = self.beads.at(&before.id);
        let (event_type, message) = if before.status != Status::Closed && after.status == Status::Closed {
            (event_type::BEAD_CLOSED, after.close_reason.clone().unwrap_or_else(|| after.title.clone()))
        } else if after.status == Status::InProgress
            && (before.status != Status::InProgress || before.assignee != after.assignee)
        {
            (event_type::BEAD_CLAIMED, after.assignee.clone())
        } else if *after != *before {
            (event_type::BEAD_UPDATED, after.title.clone())
        } else {
            return;
        };
        let is_convoy_close = event_type == event_type::BEAD_CLOSED && after.bead_type == CONVOY_TYPE;
        let bead_id = after.id.clone();
        self.emit(event_type, &bead_id, message.clone());
        if is_convoy_close {
            self.emit(event_type::CONVOY_CLOSED, &bead_id, message);
        }
    }

    /// Whether a container closes by itself when its children are all closed: an open convoy not
    /// labelled `owned`, or an open molecule root.
    fn auto_closes(bead: &Bead) -> bool {
        bead.status != Status::Closed
            && ((bead.bead_type == CONVOY_TYPE && !bead.labels.contains(LABEL_OWNED))
                || bead.bead_type == MOLECULE_TYPE)
    }

    /// Closes an auto-closing container once it has children and every one of them is closed.
    /// Returns whether it closed.
    pub(super) fn close_container_if_done(&mut self, container_id: &BeadId, now: Timestamp) -> Result<bool, Refusal> {
        if !self.container_done(container_id) {
            return Ok(false);
        }
        self.close_one(container_id, Some("every child closed".into()), now)?;
        Ok(true)
    }

    /// Whether a container that auto-closes has children, all of them closed. Two look-ups,
    /// whatever the number of children: this runs on every close of a child.
    pub(super) fn container_done(&self, container_id: &BeadId) -> bool {
        let Some(container) = self.beads.get(container_id) else { return false };
        let has_children = self.indexes.children.get(container_id).is_some_and(|children| !children.is_empty())
            || self.cold_counts.get(Listing::Parent(container_id)) > 0;
        Self::auto_closes(&container) && has_children && !self.indexes.open_children.contains_key(container_id)
    }

    /// Closes one bead with a reason (a closed bead stays as it is) and answers it. Every close
    /// goes through here, so the `closed_at` and reason rules live in one place.
    pub(super) fn close_one(
        &mut self,
        bead_id: &BeadId,
        reason: Option<String>,
        now: Timestamp,
    ) -> Result<Bead, Refusal> {
        self.modify_and_read(bead_id, now, |bead| {
            if bead.status != Status::Closed {
                bead.status = Status::Closed;
                bead.closed_at = Some(now);
                bead.close_reason = reason;
            }
        })
    }

    /// Removes a bead and every dependency edge that points at it.
    pub(super) fn remove(&mut self, bead_id: &BeadId, now: Timestamp) -> Result<(), Refusal> {
        let dependents = self.dependents_of(bead_id);
        for dependent in &dependents {
            self.modify(dependent, now, |bead| {
                bead.depends_on.remove(bead_id);
            })?;
        }
        self.journal_bead(bead_id);
        if !self.beads.contains_key(bead_id) {
            return Err(Refusal::NotFound(bead_id.clone()));
        }
        let bead = self.take_bead(bead_id).expect("checked above");
        self.emit(event_type::BEAD_DELETED, bead_id, bead.title.clone());
        for source in self.loose_dependents_of(bead_id) {
            self.modify_loose(&source, |edges| {
                edges.remove(bead_id);
            });
        }
        // Children of a deleted bead become roots rather than point at a missing parent.
        for child in self.children_of(bead_id) {
            self.modify(&child, now, |child_bead| child_bead.parent_id = None)?;
        }
        Ok(())
    }

    /// A query's answer with each of its beads' counts filled in from the indexes (bd's
    /// `dependent_count` and `comment_count`): one look-up and a pass over the bead's own notes,
    /// whatever the fan-in.
    pub(super) fn with_counts(&self, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Beads(mut beads) => {
                for bead in &mut beads {
                    bead.counts = self.indexes.counts(bead);
                }
                Outcome::Beads(beads)
            }
            other => other,
        }
    }

    /// Whether an edge names `id`: a bead's dependency on it, a loose edge from it, or a loose edge
    /// to it.
    fn edge_names(&self, id: &BeadId) -> bool {
        self.indexes.dependents.get(id).is_some_and(|sources| !sources.is_empty())
            || self.loose_edges.contains_key(id)
            || self.loose_edges.values().any(|edges| edges.contains_key(id))
    }

    /// Beads with an edge to this one.
    pub(super) fn dependents_of(&self, bead_id: &BeadId) -> Vec<BeadId> {
        self.indexes.dependents.get(bead_id).map(|set| set.iter().cloned().collect()).unwrap_or_default()
    }

    /// Direct children of this bead, in creation order (the index's order).
    pub(super) fn children_of(&self, bead_id: &BeadId) -> Vec<BeadId> {
        // Cold children are listed on disk (`closed_index`), merged in creation order.
        let source = query::Source { held: self.indexes.children.get(bead_id), cold: Some(Listing::Parent(bead_id)) };
        self.source_keys(source, crate::input::ListSort::CreatedAsc, None).map(|key| (*key.id).clone()).collect()
    }

    /// Whether a bead is blocked now, from its status, dependencies and parent.
    fn compute_blocked(&self, bead: &Bead) -> bool {
        if bead.status == Status::Blocked {
            return true;
        }
        let inherited = |target: &BeadId| self.indexes.blocked.contains(target);
        for (target, dep_type) in &bead.depends_on {
            let Some(target_status) = self.beads.status(target) else {
                continue;
            };
            if dep_type.blocks_until_closed() && target_status != Status::Closed {
                return true;
            }
            if dep_type.inherits_blocked() && inherited(target) {
                return true;
            }
        }
        bead.parent_id.as_ref().is_some_and(inherited)
    }

    /// Recomputes the blocked state of the given beads, and of whatever inherits it when it flips.
    /// Work is proportional to the beads whose state can change, never to the namespace.
    pub(super) fn refresh_blocked(&mut self, start: Vec<BeadId>) {
        // The graph is acyclic (dependency and parent cycles are refused), so this converges;
        // a bead waits in the queue at most once at a time.
        let mut queued: BTreeSet<BeadId> = start.iter().cloned().collect();
        let mut queue: VecDeque<BeadId> = start.into();
        while let Some(bead_id) = queue.pop_front() {
            queued.remove(&bead_id);
            let Some(bead) = self.beads.get(&bead_id) else {
                continue;
            };
            let blocked = self.compute_blocked(&bead);
            if blocked == self.indexes.blocked.contains(&bead_id) {
                continue;
            }
            self.indexes.set_blocked(&bead, blocked);
            let mut next = self.children_of(&bead_id);
            for dependent in self.dependents_of(&bead_id) {
                let inherits = self.beads.get(&dependent).is_some_and(|dependent_bead| {
                    dependent_bead.depends_on.get(&bead_id).is_some_and(DepType::inherits_blocked)
                });
                if inherits {
                    next.push(dependent);
                }
            }
            for next_id in next {
                if queued.insert(next_id.clone()) {
                    queue.push_back(next_id);
                }
            }
        }
    }

    /// Whether making `from` wait for `to` (through an edge or a parent link) would close a cycle.
    pub(super) fn would_cycle(&self, from: &BeadId, to: &BeadId) -> bool {
        if from == to {
            return true;
        }
        let mut stack = vec![to.clone()];
        let mut seen = BTreeSet::new();
        while let Some(current) = stack.pop() {
            if &current == from {
                return true;
            }
            if seen.len() >= GRAPH_WALK_MAX || !seen.insert(current.clone()) {
                continue;
            }
            if let Some(bead) = self.beads.get(&current) {
                stack.extend(bead.depends_on.keys().cloned());
                stack.extend(bead.parent_id.iter().cloned());
            }
        }
        false
    }

    /// Whether `bead_id` is `ancestor` or lies below it.
    pub(super) fn is_below(&self, bead_id: &BeadId, ancestor: &BeadId) -> bool {
        let mut current = Some(bead_id.clone());
        for _ in 0..GRAPH_WALK_MAX {
            match current {
                Some(ref id) if id == ancestor => return true,
                Some(ref id) => current = self.beads.get(id).and_then(|bead| bead.parent_id.clone()),
                None => return false,
            }
        }
        false
    }
}

/// Whether a change can alter the bead's own blocked state or that of its dependents.
fn affected_by_change(before: &Bead, after: &Bead) -> bool {
    before.status != after.status || before.parent_id != after.parent_id || before.depends_on != after.depends_on
}
