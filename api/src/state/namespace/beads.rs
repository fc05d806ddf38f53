//! The map of a namespace's beads: those held in memory, and, when the state keeps closed beads
//! on disk (a [`crate::state::cold::ColdStore`] attached), the ids of the cold ones, whose bodies
//! are read back on demand.
//!
//! Invariant: an id is held in memory or cold, never both; a cold bead is closed, and its record
//! on disk is its current value (it was written before it was dropped: [`BeadMap::evict`]).
//! Invariant: without a cold store, no bead is ever cold.
//! Invariant: a cold id is the very `Arc` the bead's remaining index keys hold (a closed wisp's
//! entry), so a cold bead's id is in memory once.

use std::collections::{HashMap, HashSet};
use std::ops::Deref;
use std::sync::Arc;

use crate::model::{Bead, BeadId, Status};
use crate::state::closed_index::Listing;
use crate::state::cold::{DiskListing, NamespaceCold};
use crate::state::index::CreatedKey;

/// A bead as the map answers it: borrowed from memory, or read back from disk (shared with the
/// cache). Reads as a `&Bead`.
pub enum BeadRef<'a> {
    /// Held in memory.
    Held(&'a Bead),
    /// Read back from disk.
    Read(Arc<Bead>),
}

impl Deref for BeadRef<'_> {
    type Target = Bead;

    fn deref(&self) -> &Bead {
        match self {
            BeadRef::Held(bead) => bead,
            BeadRef::Read(bead) => bead,
        }
    }
}

impl BeadRef<'_> {
    /// The bead, owned.
    pub fn into_owned(self) -> Bead {
        match self {
            BeadRef::Held(bead) => bead.clone(),
            BeadRef::Read(bead) => Arc::unwrap_or_clone(bead),
        }
    }
}

/// A namespace's beads, in memory or cold.
#[derive(Clone, Debug, Default)]
pub(super) struct BeadMap {
    held: HashMap<BeadId, Bead>,
    cold: HashSet<Arc<BeadId>>,
    store: Option<NamespaceCold>,
}

impl BeadMap {
    /// Keeps closed beads on disk from now on, read back through `store` (the caller sends the
    /// closed beads held now cold, [`BeadMap::evict`]).
    pub(super) fn attach(&mut self, store: NamespaceCold) {
        self.store = Some(store);
    }

    /// Whether closed beads are kept on disk.
    pub(super) fn keeps_cold(&self) -> bool {
        self.store.is_some()
    }

    /// The closed beads held in memory.
    pub(super) fn held_closed(&self) -> Vec<BeadId> {
        self.held.values().filter(|bead| bead.status == Status::Closed).map(|bead| bead.id.clone()).collect()
    }

    /// Whether the bead `id` is cold.
    pub(super) fn is_cold(&self, id: &BeadId) -> bool {
        self.cold.contains(id)
    }

    /// The cold beads' entries of `listing` on disk (none without a cold store): see
    /// [`NamespaceCold::listing`]. Entries of beads that are not cold are left to the caller.
    pub(super) fn cold_listing(
        &self,
        listing: Listing<'_>,
        descending: bool,
        after: Option<&CreatedKey>,
    ) -> Option<DiskListing> {
        self.store.as_ref().map(|store| store.listing(listing, descending, after))
    }

    /// The bead `id`, if there is one.
    pub(super) fn get(&self, id: &BeadId) -> Option<BeadRef<'_>> {
        if let Some(bead) = self.held.get(id) {
            return Some(BeadRef::Held(bead));
        }
        self.cold.contains(id).then(|| BeadRef::Read(self.read_cold(id)))
    }

    /// The bead `id` if it is held in memory.
    pub(super) fn held(&self, id: &BeadId) -> Option<&Bead> {
        self.held.get(id)
    }

    /// The bead `id`, which the caller knows exists (an id taken from an index).
    pub(super) fn at(&self, id: &BeadId) -> BeadRef<'_> {
        self.get(id).unwrap_or_else(|| panic!("bead {id} is indexed, so it is in the map"))
    }

    /// The status of the bead `id`, without reading a cold one back (a cold bead is closed).
    pub(super) fn status(&self, id: &BeadId) -> Option<Status> {
        match self.held.get(id) {
            Some(bead) => Some(bead.status),
            None => self.cold.contains(id).then_some(Status::Closed),
        }
    }

    /// Whether there is a bead `id`.
    pub(super) fn contains_key(&self, id: &BeadId) -> bool {
        self.held.contains_key(id) || self.cold.contains(id)
    }

    /// How many beads there are.
    pub(super) fn len(&self) -> usize {
        self.held.len() + self.cold.len()
    }

    /// Whether there is none.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many are held in memory.
    pub(super) fn held_len(&self) -> usize {
        self.held.len()
    }

    /// Every id, held or cold, in no order.
    pub(super) fn ids(&self) -> impl Iterator<Item = &BeadId> {
        self.held.keys().chain(self.cold.iter().map(|id| &**id))
    }

    /// Puts a bead into memory (replacing nothing: its id must be free).
    pub(super) fn insert(&mut self, bead: Bead) {
        debug_assert!(!self.cold.contains(&bead.id), "bead {} is cold and put in memory", bead.id);
        self.held.insert(bead.id.clone(), bead);
    }

    /// Adds a cold bead, kept on disk alone: `shared_id` is the id its index keys share.
    pub(super) fn insert_cold(&mut self, shared_id: Arc<BeadId>) {
        debug_assert!(self.store.is_some(), "a bead goes cold only with a cold store");
        self.cold.insert(shared_id);
    }

    /// Takes a bead out (reading a cold one back), to change or delete it, with whether it was
    /// cold.
    pub(super) fn remove(&mut self, id: &BeadId) -> Option<(Bead, bool)> {
        if let Some(bead) = self.held.remove(id) {
            return Some((bead, false));
        }
        if !self.cold.contains(id) {
            return None;
        }
        let bead = Arc::unwrap_or_clone(self.read_cold(id));
        self.cold.remove(id);
        if let Some(store) = &self.store {
            store.forget(id);
        }
        Some((bead, true))
    }

    /// Drops the body of the closed bead `id` from memory, keeping only `shared_id` (the id its
    /// index keys share): its record on disk is current (the caller just wrote it, or read it).
    pub(super) fn evict(&mut self, id: &BeadId, shared_id: Arc<BeadId>) {
        debug_assert!(self.store.is_some(), "a bead goes cold only with a cold store");
        if self.held.remove(id).is_some() {
            self.cold.insert(shared_id);
        }
    }

    fn read_cold(&self, id: &BeadId) -> Arc<Bead> {
        self.store.as_ref().expect("a cold bead implies a cold store").read(id)
    }
}
