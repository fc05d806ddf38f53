//! Secondary indexes of one namespace, kept current on every change so that `ready`, `list`,
//! `children` and `list_by_label` are look-ups, never scans of the whole store.
//!
//! Invariant: a bead is in a ready index exactly when it is `open`, not blocked, and not of an
//! infrastructure type; wisps go to `ready_ephemeral`, every other such bead to `ready`.
//! Invariant: every bead held in memory is in `all`, `by_status`, `by_type`, `by_assignee`, and in
//! `by_label` for each of its labels, under the key built from its current fields.
//! Invariant: an open message (`type = message`) is in `mail` under its recipient, and in `unread`
//! too while it lacks the `read` label; an `in_progress` bead is in `working` under its assignee;
//! a closed wisp is in `closed_ephemeral`, ordered by `closed_at`; `open_children` counts, per
//! parent, the children in `children` that are not closed; a ready bead routed to a pool
//! (`pool:<name>` label or `gc.routed_to` metadata) is in its ready index's `by_pool`.
//! Invariant: `blocks_dependents` counts, per target id, the `blocks` edges of beads that point
//! at it; ids with none are absent. A read's counts ([`Indexes::counts`]) are thus one look-up
//! and the comment lines of the bead's own notes, which the read copies anyway.
//! Invariant: a closed bead kept on disk (cold) is in none of the listings (`all`, `by_status`,
//! `by_type`, `by_assignee`, `by_label`, `children`): its entries there are on disk
//! ([`super::closed_index`]); it is in every other index a closed bead is in.
//! The indexes are derived state: they are rebuilt from the beads at load, never persisted.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::model::{
    Bead, BeadCounts, BeadId, DepType, LABEL_READ, MESSAGE_TYPE, Status, comment_count, is_infrastructure_type,
    routed_pool,
};

/// Orders beads by creation (time, then sequence number, which orders ties by id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CreatedKey {
    /// Creation time, milliseconds.
    pub created_at: i64,
    /// Creation sequence number within the namespace.
    pub seq: u64,
    /// The bead. Shared: one bead's entries in the several indexes hold one copy of its id.
    pub id: Arc<BeadId>,
}

impl CreatedKey {
    /// The key of a bead.
    pub fn of(bead: &Bead) -> CreatedKey {
        CreatedKey { created_at: bead.created_at.0, seq: bead.seq, id: Arc::new(bead.id.clone()) }
    }
}

/// The order of docs/beads.md §4: priority ascending with unset last, then creation, then id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadyKey {
    /// Priority 0..=4, or 5 when unset.
    pub priority_rank: u8,
    /// Creation order.
    pub created: CreatedKey,
}

impl ReadyKey {
    /// Rank given to beads with no priority, after every real priority.
    pub const UNSET_PRIORITY_RANK: u8 = 5;

    /// The key of a bead.
    pub fn of(bead: &Bead) -> ReadyKey {
        ReadyKey { priority_rank: bead.priority.unwrap_or(Self::UNSET_PRIORITY_RANK), created: CreatedKey::of(bead) }
    }
}

/// Ready beads, whole and partitioned by assignee and by label.
#[derive(Clone, Debug, Default)]
pub struct ReadyIndex {
    /// Every ready bead.
    pub all: BTreeSet<ReadyKey>,
    /// Ready beads by assignee; the empty string holds the unassigned ones.
    pub by_assignee: HashMap<String, BTreeSet<ReadyKey>>,
    /// Ready beads by label.
    pub by_label: HashMap<String, BTreeSet<ReadyKey>>,
    /// Ready beads by the pool they are routed to.
    pub by_pool: HashMap<String, BTreeSet<ReadyKey>>,
}

impl ReadyIndex {
    fn insert(&mut self, bead: &Bead) {
        let key = ReadyKey::of(bead);
        for label in &bead.labels {
            self.by_label.entry(label.clone()).or_default().insert(key.clone());
        }
        if let Some(pool) = routed_pool(bead) {
            self.by_pool.entry(pool.to_string()).or_default().insert(key.clone());
        }
        self.by_assignee.entry(bead.assignee.clone()).or_default().insert(key.clone());
        self.all.insert(key);
    }

    fn remove(&mut self, bead: &Bead) {
        let key = ReadyKey::of(bead);
        for label in &bead.labels {
            remove_from(&mut self.by_label, label, &key);
        }
        if let Some(pool) = routed_pool(bead) {
            remove_from(&mut self.by_pool, pool, &key);
        }
        remove_from(&mut self.by_assignee, &bead.assignee, &key);
        self.all.remove(&key);
    }
}

fn remove_from<K, V>(map: &mut HashMap<String, BTreeSet<V>>, name: &K, key: &V)
where
    K: AsRef<str> + ?Sized,
    V: Ord,
{
    if let Some(set) = map.get_mut(name.as_ref()) {
        set.remove(key);
        if set.is_empty() {
            map.remove(name.as_ref());
        }
    }
}

/// Where a closed wisp sits in `closed_ephemeral`.
fn closed_key(bead: &Bead, key: &CreatedKey) -> (i64, CreatedKey) {
    (bead.closed_at.map_or(i64::MAX, |closed_at| closed_at.0), key.clone())
}

/// All secondary indexes of one namespace.
#[derive(Clone, Debug, Default)]
pub struct Indexes {
    /// Every bead, by creation.
    pub all: BTreeSet<CreatedKey>,
    /// Beads by status.
    pub by_status: HashMap<Status, BTreeSet<CreatedKey>>,
    /// Beads by type.
    pub by_type: HashMap<String, BTreeSet<CreatedKey>>,
    /// Beads by assignee (empty string: unassigned).
    pub by_assignee: HashMap<String, BTreeSet<CreatedKey>>,
    /// Beads by label.
    pub by_label: HashMap<String, BTreeSet<CreatedKey>>,
    /// Beads by parent id.
    pub children: HashMap<BeadId, BTreeSet<CreatedKey>>,
    /// How many children of each parent are not closed (parents with none are absent), so that
    /// closing a child tells at once whether it was the last open one.
    pub open_children: HashMap<BeadId, usize>,
    /// Reverse dependency edges: target to the beads that depend on it.
    pub dependents: HashMap<BeadId, BTreeSet<BeadId>>,
    /// How many `blocks` edges of beads point at each id (bd's `dependent_count`).
    pub blocks_dependents: HashMap<BeadId, u32>,
    /// Beads currently blocked (derived from statuses, dependencies and parents).
    pub blocked: BTreeSet<BeadId>,
    /// Ready beads that are not wisps.
    pub ready: ReadyIndex,
    /// Ready wisps.
    pub ready_ephemeral: ReadyIndex,
    /// Open messages by recipient.
    pub mail: HashMap<String, BTreeSet<CreatedKey>>,
    /// Open messages without the `read` label, by recipient.
    pub unread: HashMap<String, BTreeSet<CreatedKey>>,
    /// In-progress beads by assignee.
    pub working: HashMap<String, BTreeSet<CreatedKey>>,
    /// Closed wisps (what `purge` removes), oldest close first: `(closed_at, key)`, with a
    /// missing `closed_at` last (never old enough).
    pub closed_ephemeral: BTreeSet<(i64, CreatedKey)>,
    /// Beads with a lease (what the leader's lease sweep reads).
    pub leased: BTreeSet<BeadId>,
}

impl Indexes {
    /// Whether the bead belongs in a ready index, given its current blocked state.
    pub fn is_ready(&self, bead: &Bead) -> bool {
        bead.status == Status::Open && !self.blocked.contains(&bead.id) && !is_infrastructure_type(&bead.bead_type)
    }

    /// Adds a bead under its current fields, answering the id its keys share.
    pub fn insert(&mut self, bead: &Bead) -> Arc<BeadId> {
        let key = CreatedKey::of(bead);
        self.insert_listings(bead, &key);
        self.insert_unlisted_with(bead, &key);
        key.id
    }

    /// Adds a bead to every index but the listings (`all`, `by_status`, `by_type`,
    /// `by_assignee`, `by_label`, `children`), answering the id its keys share: a closed bead
    /// kept on disk, whose listing entries are on disk ([`super::closed_index`]).
    pub fn insert_unlisted(&mut self, bead: &Bead) -> Arc<BeadId> {
        let key = CreatedKey::of(bead);
        self.insert_unlisted_with(bead, &key);
        key.id
    }

    fn insert_listings(&mut self, bead: &Bead, key: &CreatedKey) {
        self.by_status.entry(bead.status).or_default().insert(key.clone());
        self.by_type.entry(bead.bead_type.clone()).or_default().insert(key.clone());
        self.by_assignee.entry(bead.assignee.clone()).or_default().insert(key.clone());
        for label in &bead.labels {
            self.by_label.entry(label.clone()).or_default().insert(key.clone());
        }
        if let Some(parent_id) = &bead.parent_id {
            self.children.entry(parent_id.clone()).or_default().insert(key.clone());
        }
        self.all.insert(key.clone());
    }

    fn insert_unlisted_with(&mut self, bead: &Bead, key: &CreatedKey) {
        if let Some(parent_id) = &bead.parent_id
            && bead.status != Status::Closed
        {
            *self.open_children.entry(parent_id.clone()).or_default() += 1;
        }
        for (target, dep_type) in &bead.depends_on {
            self.dependents.entry(target.clone()).or_default().insert(bead.id.clone());
            if dep_type.0 == DepType::BLOCKS {
                *self.blocks_dependents.entry(target.clone()).or_default() += 1;
            }
        }
        self.insert_work(bead, key);
        self.insert_ready(bead);
    }

    /// The id the index keys of `bead` (indexed under its current fields) share.
    pub fn shared_id(&self, bead: &Bead) -> Arc<BeadId> {
        let key = CreatedKey::of(bead);
        self.all.get(&key).map_or(key.id, |indexed| indexed.id.clone())
    }

    fn insert_work(&mut self, bead: &Bead, key: &CreatedKey) {
        if bead.bead_type == MESSAGE_TYPE && bead.status != Status::Closed {
            self.mail.entry(bead.assignee.clone()).or_default().insert(key.clone());
            if !bead.labels.contains(LABEL_READ) {
                self.unread.entry(bead.assignee.clone()).or_default().insert(key.clone());
            }
        }
        if bead.status == Status::InProgress {
            self.working.entry(bead.assignee.clone()).or_default().insert(key.clone());
        }
        if bead.ephemeral && bead.status == Status::Closed {
            self.closed_ephemeral.insert(closed_key(bead, key));
        }
        if bead.lease.is_some() {
            self.leased.insert(bead.id.clone());
        }
    }

    fn remove_work(&mut self, bead: &Bead, key: &CreatedKey) {
        remove_from(&mut self.mail, &bead.assignee, key);
        remove_from(&mut self.unread, &bead.assignee, key);
        remove_from(&mut self.working, &bead.assignee, key);
        if bead.ephemeral && bead.status == Status::Closed {
            self.closed_ephemeral.remove(&closed_key(bead, key));
        }
        self.leased.remove(&bead.id);
    }

    /// Removes a bead under its current fields (call before changing them).
    pub fn remove(&mut self, bead: &Bead) {
        let key = CreatedKey::of(bead);
        self.remove_ready(bead);
        self.remove_work(bead, &key);
        self.remove_listings(bead);
        if let Some(parent_id) = &bead.parent_id
            && bead.status != Status::Closed
            && let Some(open) = self.open_children.get_mut(parent_id)
        {
            *open -= 1;
            if *open == 0 {
                self.open_children.remove(parent_id);
            }
        }
        for (target, dep_type) in &bead.depends_on {
            if let Some(set) = self.dependents.get_mut(target) {
                set.remove(&bead.id);
                if set.is_empty() {
                    self.dependents.remove(target);
                }
            }
            if dep_type.0 == DepType::BLOCKS
                && let Some(count) = self.blocks_dependents.get_mut(target)
            {
                *count -= 1;
                if *count == 0 {
                    self.blocks_dependents.remove(target);
                }
            }
        }
    }

    /// Removes a bead from the listings alone (`all`, `by_status`, `by_type`, `by_assignee`,
    /// `by_label`, `children`): a closed bead going cold, whose entries are on disk.
    pub fn remove_listings(&mut self, bead: &Bead) {
        let key = CreatedKey::of(bead);
        if let Some(set) = self.by_status.get_mut(&bead.status) {
            set.remove(&key);
        }
        remove_from(&mut self.by_type, &bead.bead_type, &key);
        remove_from(&mut self.by_assignee, &bead.assignee, &key);
        for label in &bead.labels {
            remove_from(&mut self.by_label, label, &key);
        }
        if let Some(parent_id) = &bead.parent_id
            && let Some(set) = self.children.get_mut(parent_id)
        {
            set.remove(&key);
            if set.is_empty() {
                self.children.remove(parent_id);
            }
        }
        self.all.remove(&key);
    }

    /// What a read tells of a bead beyond its fields: its `blocks` dependents (from the index)
    /// and the comments of its notes.
    pub fn counts(&self, bead: &Bead) -> BeadCounts {
        BeadCounts {
            dependents: self.blocks_dependents.get(&bead.id).copied().unwrap_or(0),
            comments: comment_count(&bead.notes),
        }
    }

    /// Adds the bead to its ready index if it is ready.
    pub fn insert_ready(&mut self, bead: &Bead) {
        if self.is_ready(bead) {
            self.ready_index_mut(bead).insert(bead);
        }
    }

    /// Removes the bead from its ready index if it is there.
    pub fn remove_ready(&mut self, bead: &Bead) {
        if self.is_ready(bead) {
            self.ready_index_mut(bead).remove(bead);
        }
    }

    fn ready_index_mut(&mut self, bead: &Bead) -> &mut ReadyIndex {
        if bead.ephemeral { &mut self.ready_ephemeral } else { &mut self.ready }
    }

    /// Records a change of the bead's blocked state, moving it in or out of the ready index.
    pub fn set_blocked(&mut self, bead: &Bead, blocked: bool) {
        self.remove_ready(bead);
        if blocked {
            self.blocked.insert(bead.id.clone());
        } else {
            self.blocked.remove(&bead.id);
        }
        self.insert_ready(bead);
    }

    /// Forgets the blocked state of a deleted bead.
    pub fn forget(&mut self, bead_id: &BeadId) {
        self.blocked.remove(bead_id);
    }
}
