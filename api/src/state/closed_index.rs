//! The listing indexes of closed beads, on disk: the entries that place a closed bead in `list`,
//! `children` and `list_by_label` (every bead, by type, by assignee, by label, by parent), as keys
//! of their own disk space, so that a closed bead kept on disk leaves no index entry in memory.
//! A listing's keys sort in creation order ([`CreatedKey`]), so a walk of one reads a range.
//!
//! The storage layer writes what [`crate::state::State::closed_index_writes`] names with the
//! records of the same batch, and builds the whole space from the records when it finds it
//! missing ([`entries`]). What memory keeps of cold beads is a count per listing
//! ([`ColdCounts`]), for choosing the smallest listing and counting statuses.
//!
//! Invariant: the space holds exactly the entries of every closed bead as written (a bead's
//! entries are put when its record is written closed, and deleted when it is written otherwise or
//! deleted, with its namespace's range when the namespace is deleted).
//! Invariant: an entry counts for a read only while its bead is cold: a closed bead held in
//! memory is listed by the memory indexes, so no bead is listed twice.
//!
//! Encoding (pinned: a change bumps the storage format): the namespace as a big-endian `u32`
//! length and its bytes; the listing's kind (0 every bead, 1 type, 2 assignee, 3 label, 4 parent)
//! and, but for kind 0, its value as a length and bytes; then the creation time as a big-endian
//! `i64` with its sign bit flipped, the sequence number as a big-endian `u64`, and the id's bytes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{Bead, BeadId, Namespace};
use crate::state::index::CreatedKey;

/// A listing index: which of a namespace's beads it lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Listing<'a> {
    /// Every bead.
    All,
    /// The beads of a type.
    Type(&'a str),
    /// The beads of an assignee (the empty string: unassigned).
    Assignee(&'a str),
    /// The beads with a label.
    Label(&'a str),
    /// The children of a parent.
    Parent(&'a BeadId),
}

impl<'a> Listing<'a> {
    fn kind(self) -> u8 {
        match self {
            Listing::All => 0,
            Listing::Type(_) => 1,
            Listing::Assignee(_) => 2,
            Listing::Label(_) => 3,
            Listing::Parent(_) => 4,
        }
    }

    fn value(self) -> Option<&'a str> {
        match self {
            Listing::All => None,
            Listing::Type(value) | Listing::Assignee(value) | Listing::Label(value) => Some(value),
            Listing::Parent(parent) => Some(&parent.0),
        }
    }

    /// The listings a bead is in.
    pub fn of(bead: &'a Bead) -> impl Iterator<Item = Listing<'a>> + 'a {
        let fixed = [Listing::All, Listing::Type(&bead.bead_type), Listing::Assignee(&bead.assignee)];
        let labels = bead.labels.iter().map(|label| Listing::Label(label));
        fixed.into_iter().chain(labels).chain(bead.parent_id.as_ref().map(Listing::Parent))
    }
}

fn push_part(bytes: &mut Vec<u8>, part: &str) {
    bytes.extend_from_slice(&(part.len() as u32).to_be_bytes());
    bytes.extend_from_slice(part.as_bytes());
}

/// The first bytes of every key of `namespace`.
fn namespace_prefix(namespace: &Namespace) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 + namespace.0.len());
    push_part(&mut bytes, &namespace.0);
    bytes
}

/// The first bytes of every key of one listing of `namespace`.
pub fn listing_prefix(namespace: &Namespace, listing: Listing<'_>) -> Vec<u8> {
    let mut bytes = namespace_prefix(namespace);
    bytes.push(listing.kind());
    if let Some(value) = listing.value() {
        push_part(&mut bytes, value);
    }
    bytes
}

/// The key of `key`'s entry in the listing whose prefix is `prefix`.
pub(crate) fn entry_key(prefix: &[u8], key: &CreatedKey) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(prefix.len() + 16 + key.id.0.len());
    bytes.extend_from_slice(prefix);
    bytes.extend_from_slice(&((key.created_at as u64) ^ (1 << 63)).to_be_bytes());
    bytes.extend_from_slice(&key.seq.to_be_bytes());
    bytes.extend_from_slice(key.id.0.as_bytes());
    bytes
}

/// The creation key of an entry of the listing whose prefix is `prefix_len` bytes long, or
/// `None` when the bytes are no such entry.
pub(crate) fn decode_entry(prefix_len: usize, bytes: &[u8]) -> Option<CreatedKey> {
    let rest = bytes.get(prefix_len..)?;
    let (created_at, rest) = rest.split_first_chunk::<8>()?;
    let (seq, id) = rest.split_first_chunk::<8>()?;
    Some(CreatedKey {
        created_at: (u64::from_be_bytes(*created_at) ^ (1 << 63)) as i64,
        seq: u64::from_be_bytes(*seq),
        id: Arc::new(BeadId(String::from_utf8(id.to_vec()).ok()?)),
    })
}

/// The smallest key after every key that starts with `prefix` (`None`: there is none, the prefix
/// being all `0xff`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The smallest key greater than `key`.
pub fn key_after(key: &[u8]) -> Vec<u8> {
    let mut after = key.to_vec();
    after.push(0);
    after
}

/// The keys of every entry of `bead`, closed, in `namespace`.
pub fn entries(namespace: &Namespace, bead: &Bead) -> Vec<Vec<u8>> {
    let key = CreatedKey::of(bead);
    Listing::of(bead).map(|listing| entry_key(&listing_prefix(namespace, listing), &key)).collect()
}

/// The range of every key of `namespace`: `[from, to)`.
pub fn namespace_range(namespace: &Namespace) -> (Vec<u8>, Vec<u8>) {
    let prefix = namespace_prefix(namespace);
    let end = prefix_end(&prefix).expect("a namespace prefix starts with its length, never all 0xff");
    (prefix, end)
}

/// One change to the space of closed beads' entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexWrite {
    /// Adds an entry.
    Put(Vec<u8>),
    /// Removes an entry.
    Delete(Vec<u8>),
    /// Removes every entry in `[from, to)`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// How many cold beads each listing of a namespace holds on disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColdCounts {
    counts: HashMap<(u8, Box<str>), u64>,
}

impl ColdCounts {
    fn slot(listing: Listing<'_>) -> (u8, Box<str>) {
        (listing.kind(), listing.value().unwrap_or("").into())
    }

    /// How many cold beads `listing` holds.
    pub fn get(&self, listing: Listing<'_>) -> u64 {
        self.counts.get(&Self::slot(listing)).copied().unwrap_or(0)
    }

    /// Counts a bead that went cold.
    pub fn add(&mut self, bead: &Bead) {
        for listing in Listing::of(bead) {
            *self.counts.entry(Self::slot(listing)).or_default() += 1;
        }
    }

    /// Uncounts a cold bead read back into memory.
    pub fn remove(&mut self, bead: &Bead) {
        for listing in Listing::of(bead) {
            let slot = Self::slot(listing);
            if let Some(count) = self.counts.get_mut(&slot) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(&slot);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(created_at: i64, seq: u64, id: &str) -> CreatedKey {
        CreatedKey { created_at, seq, id: Arc::new(BeadId(id.into())) }
    }

    #[test]
    fn entries_sort_as_their_creation_keys_and_decode_back() {
        let namespace = Namespace("ns".into());
        let prefix = listing_prefix(&namespace, Listing::Label("a"));
        let keys = [key(-5, 9, "x-1"), key(0, 1, "x-2"), key(0, 2, "x-10"), key(7, 3, "x-3"), key(i64::MAX, 0, "")];
        let encoded: Vec<Vec<u8>> = keys.iter().map(|key| entry_key(&prefix, key)).collect();
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(sorted, encoded, "keys sort in creation order");
        let decoded: Vec<CreatedKey> = encoded.iter().map(|bytes| decode_entry(prefix.len(), bytes).unwrap()).collect();
        assert_eq!(decoded, keys);
        let end = prefix_end(&prefix).unwrap();
        assert!(encoded.iter().all(|bytes| bytes.as_slice() >= prefix.as_slice() && bytes < &end));
        let other = listing_prefix(&namespace, Listing::Label("ab"));
        assert!(!other.starts_with(&prefix), "labels a and ab do not mix");
        let (from, to) = namespace_range(&namespace);
        assert!(encoded.iter().all(|bytes| bytes >= &from && bytes < &to));
        assert!(listing_prefix(&Namespace("ns2".into()), Listing::All) >= to);
    }
}
