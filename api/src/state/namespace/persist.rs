//! A namespace's records: loading them, naming the ones a command changed, and reading them back
//! for the storage layer, a snapshot or a deletion. With these, [`super::NamespaceState`]'s fields
//! stay private to the `namespace` module.

use std::collections::{BTreeMap, BTreeSet};

use super::orders::StoredOrder;
use super::{NamespaceState, StoredFormula};
use crate::input::JudgedLease;
use crate::model::{BeadId, DepType, Namespace, Status};
use crate::outcome::Outcome;
use crate::state::closed_index::{self, IndexWrite};
use crate::state::cold::NamespaceCold;
use crate::state::{OrderRecord, RecordKey, RecordRef};

impl NamespaceState {
    /// Loads a stored formula's source.
    pub(in crate::state) fn load_formula(&mut self, name: String, source: String) {
        self.formulas.insert(name, StoredFormula::new(source));
    }

    /// Loads a stored order with its firings.
    pub(in crate::state) fn load_order(&mut self, name: String, record: OrderRecord) {
        let stored = StoredOrder::new(&name, record);
        self.orders.insert(name, stored);
    }

    /// Loads the dependency edges of an id that is no bead.
    pub(in crate::state) fn load_loose_edges(&mut self, source: BeadId, edges: BTreeMap<BeadId, DepType>) {
        self.loose_edges.insert(source, edges);
    }

    /// Keeps its closed beads on disk from now on, read back through `store`: those held now
    /// whose records are written go cold at once.
    pub(in crate::state) fn attach_cold(&mut self, store: NamespaceCold) {
        self.beads.attach(store);
        for bead_id in self.beads.held_closed() {
            if !self.dirty_beads.contains(&bead_id) {
                self.evict(&bead_id);
            }
        }
    }

    /// The storage layer wrote bead `bead_id`'s record: a closed bead's body leaves memory.
    pub(in crate::state) fn bead_written(&mut self, bead_id: &BeadId) {
        debug_assert!(!self.dirty_beads.contains(bead_id), "bead {bead_id} changed again before it was written");
        self.evict(bead_id);
    }

    /// Sends the bead `bead_id` cold if it is held, closed, and closed beads are kept on disk:
    /// its body and its listing entries leave memory (its record and entries on disk are current).
    fn evict(&mut self, bead_id: &BeadId) {
        if !self.beads.keeps_cold() {
            return;
        }
        let Some(bead) = self.beads.held(bead_id).filter(|bead| bead.status == Status::Closed) else { return };
        let shared_id = self.indexes.shared_id(bead);
        self.indexes.remove_listings(bead);
        self.cold_counts.add(bead);
        self.beads.evict(bead_id, shared_id);
    }

    /// The bead `bead_id` if it is held in memory (every changed bead is, until it is written).
    pub(in crate::state) fn held(&self, bead_id: &BeadId) -> Option<&crate::model::Bead> {
        self.beads.held(bead_id)
    }

    /// How many of its beads are held in memory (the others are cold).
    pub fn held_count(&self) -> usize {
        self.beads.held_len()
    }

    /// Forgets what changed: everything is as stored.
    pub(in crate::state) fn mark_clean(&mut self) {
        self.dirty_beads.clear();
        self.stale_closed.clear();
        self.dirty_events.clear();
        self.dirty_formulas.clear();
        self.dirty_orders.clear();
        self.dirty_loose.clear();
        self.meta_dirty = false;
    }

    /// Drops the events a refused command queued (it changed nothing, so there are none).
    pub(in crate::state) fn discard_pending_events(&mut self) {
        debug_assert!(self.pending_events.is_empty(), "a refused command queued events");
        self.pending_events.clear();
    }

    /// The log index of the command being applied: every bead it changes takes it as its revision.
    pub(in crate::state) fn set_revision(&mut self, revision: u64) {
        self.revision = revision;
    }

    /// Its indexes, for tests that compare them with a rebuild.
    #[cfg(test)]
    pub(in crate::state) fn indexes(&self) -> &crate::state::index::Indexes {
        &self.indexes
    }

    /// Its settings and event counter.
    pub fn meta(&self) -> &super::NamespaceMeta {
        &self.meta
    }

    /// Its id prefix, fixed at creation.
    pub fn prefix(&self) -> &str {
        &self.meta.prefix
    }

    /// Changes its lease settings (`None` leaves one as it is), answering its listing.
    pub(crate) fn configure(
        &mut self,
        name: &Namespace,
        default_lease_ms: Option<Option<u64>>,
        max_deliveries: Option<u32>,
    ) -> Outcome {
        if let Some(default_lease_ms) = default_lease_ms {
            self.meta.default_lease_ms = default_lease_ms;
        }
        if let Some(max_deliveries) = max_deliveries {
            self.meta.max_deliveries = max_deliveries;
        }
        self.meta_dirty = true;
        Outcome::Namespaces(vec![self.info(name)])
    }

    /// Every lease held, as the leader's lease sweep reads it: its bead, id, renewal and length.
    pub(in crate::state) fn lease_marks(&self) -> impl Iterator<Item = (JudgedLease, u64)> + '_ {
        self.indexes.leased.iter().filter_map(|bead_id| {
            // A leased bead is in progress, so held in memory.
            let lease = self.beads.held(bead_id)?.lease.as_ref()?;
            Some((JudgedLease { id: bead_id.clone(), lease_id: lease.id, renewed_at: lease.renewed_at }, lease.ttl_ms))
        })
    }

    /// The keys of every record it has on disk: those it holds now, and those removed earlier in
    /// this batch whose deletion has not been handed over yet (they are still dirty).
    pub(in crate::state) fn keys_on_disk(&self, namespace: &Namespace) -> Vec<RecordKey> {
        let bead_ids: BTreeSet<&BeadId> = self.beads.ids().chain(&self.dirty_beads).collect();
        let seqs: BTreeSet<u64> = self.events.keys().chain(&self.dirty_events).copied().collect();
        let names: BTreeSet<&String> = self.formulas.keys().chain(&self.dirty_formulas).collect();
        let sources: BTreeSet<&BeadId> = self.loose_edges.keys().chain(&self.dirty_loose).collect();
        let orders: BTreeSet<&String> = self.orders.keys().chain(&self.dirty_orders).collect();
        let mut keys = Vec::new();
        keys.extend(bead_ids.into_iter().map(|bead_id| RecordKey::Bead(namespace.clone(), bead_id.clone())));
        keys.extend(seqs.into_iter().map(|seq| RecordKey::Event(namespace.clone(), seq)));
        keys.extend(names.into_iter().map(|name| RecordKey::Formula(namespace.clone(), name.clone())));
        keys.extend(sources.into_iter().map(|source| RecordKey::LooseEdges(namespace.clone(), source.clone())));
        keys.extend(orders.into_iter().map(|name| RecordKey::Order(namespace.clone(), name.clone())));
        keys
    }

    /// Moves the keys of every record changed since the last call into `keys`, and the deletions
    /// of the index entries on disk of closed beads changed since into `index_writes`, and forgets
    /// them.
    pub(in crate::state) fn take_changed_keys(
        &mut self,
        namespace: &Namespace,
        keys: &mut Vec<RecordKey>,
        index_writes: &mut Vec<IndexWrite>,
    ) {
        for bead in std::mem::take(&mut self.stale_closed) {
            index_writes.extend(closed_index::entries(namespace, &bead).into_iter().map(IndexWrite::Delete));
        }
        if self.meta_dirty {
            keys.push(RecordKey::Namespace(namespace.clone()));
        }
        let beads = std::mem::take(&mut self.dirty_beads);
        keys.extend(beads.into_iter().map(|bead_id| RecordKey::Bead(namespace.clone(), bead_id)));
        let events = std::mem::take(&mut self.dirty_events);
        keys.extend(events.into_iter().map(|seq| RecordKey::Event(namespace.clone(), seq)));
        let formulas = std::mem::take(&mut self.dirty_formulas);
        keys.extend(formulas.into_iter().map(|name| RecordKey::Formula(namespace.clone(), name)));
        let sources = std::mem::take(&mut self.dirty_loose);
        keys.extend(sources.into_iter().map(|source| RecordKey::LooseEdges(namespace.clone(), source)));
        let orders = std::mem::take(&mut self.dirty_orders);
        keys.extend(orders.into_iter().map(|name| RecordKey::Order(namespace.clone(), name)));
    }

    /// The record of this namespace under `key`, borrowed, if it holds one (`None` for a key of
    /// another kind). A changed bead is always in memory (it goes cold only once written), so
    /// this never reads the disk for one.
    pub(in crate::state) fn record(&self, key: &RecordKey) -> Option<RecordRef<'_>> {
        match key {
            RecordKey::Namespace(_) => Some(RecordRef::Namespace(&self.meta)),
            RecordKey::Bead(_, bead_id) => self.beads.held(bead_id).map(RecordRef::Bead),
            RecordKey::Event(_, seq) => self.events.get(seq).map(RecordRef::Event),
            RecordKey::Formula(_, name) => self.formulas.get(name).map(|stored| RecordRef::Formula(&stored.source)),
            RecordKey::LooseEdges(_, source) => self.loose_edges.get(source).map(RecordRef::LooseEdges),
            RecordKey::Order(_, name) => self.orders.get(name).map(|stored| RecordRef::Order(&stored.record)),
            _ => None,
        }
    }

    /// Hands every record of this namespace to `visit`, borrowed: its settings, then beads by
    /// id, events, formulas, loose edges and orders, each kind in key order. Cold beads are read
    /// back from disk one at a time.
    pub(in crate::state) fn visit_records(
        &self,
        namespace: &Namespace,
        visit: &mut dyn FnMut(RecordKey, RecordRef<'_>),
    ) {
        visit(RecordKey::Namespace(namespace.clone()), RecordRef::Namespace(&self.meta));
        let mut bead_ids: Vec<&BeadId> = self.beads.ids().collect();
        sort_by_id(&mut bead_ids, |bead_id| bead_id.0.as_str());
        for bead_id in bead_ids {
            let bead = self.beads.at(bead_id);
            visit(RecordKey::Bead(namespace.clone(), bead_id.clone()), RecordRef::Bead(&bead));
        }
        for (seq, event) in &self.events {
            visit(RecordKey::Event(namespace.clone(), *seq), RecordRef::Event(event));
        }
        for (name, stored) in &self.formulas {
            visit(RecordKey::Formula(namespace.clone(), name.clone()), RecordRef::Formula(&stored.source));
        }
        for (source, edges) in &self.loose_edges {
            visit(RecordKey::LooseEdges(namespace.clone(), source.clone()), RecordRef::LooseEdges(edges));
        }
        for (name, stored) in &self.orders {
            visit(RecordKey::Order(namespace.clone(), name.clone()), RecordRef::Order(&stored.record));
        }
    }
}

/// Sorts `items` by `id`, as strings compare, without reading most ids: each item is keyed by its
/// id's first 16 bytes (zero-padded, big-endian), and only items whose keys tie compare whole ids.
/// On a million beads a plain sort spends most of its time in cache misses, two per comparison.
/// Equal keys fall through to the whole comparison, and differing keys order as the ids do: the
/// first byte where two padded prefixes differ is a real byte of both ids, or a pad (0) against a
/// real byte of the longer one, which is then greater, as it is in the ids' order.
pub(in crate::state) fn sort_by_id<T>(items: &mut Vec<T>, id: impl Fn(&T) -> &str) {
    fn prefix(id: &str) -> u128 {
        let mut bytes = [0u8; 16];
        let length = id.len().min(16);
        bytes[..length].copy_from_slice(&id.as_bytes()[..length]);
        u128::from_be_bytes(bytes)
    }
    let mut keyed: Vec<(u128, T)> = items.drain(..).map(|item| (prefix(id(&item)), item)).collect();
    keyed.sort_unstable_by(|(a_key, a), (b_key, b)| a_key.cmp(b_key).then_with(|| id(a).cmp(id(b))));
    items.extend(keyed.into_iter().map(|(_, item)| item));
}
