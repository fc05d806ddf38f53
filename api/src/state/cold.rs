//! Closed beads kept on disk instead of in memory: the source that reads one back from the
//! storage layer ([`BeadSource`]), and the byte-bounded cache of beads read lately
//! ([`BeadCache`]), and the walk of a listing's entries on disk ([`DiskListing`], chunk by chunk).
//! A state given a [`ColdStore`] (`State::attach_cold_store`) drops the body and the listing
//! entries of each closed bead once its record is written, keeping its id and the entries of the
//! indexes that are not listings; a read of it goes to the cache, then to the disk, and a listing
//! reads its entries from the disk's closed-bead index ([`super::closed_index`]). A state without one (the state tests, an
//! offline import) keeps every bead in memory, as before.
//!
//! Invariant: what a read answers never depends on where a bead is held: a bead is dropped from
//! memory only once its record on disk is its current value, and a cold bead is changed only by
//! being read back into memory first (`NamespaceState`'s `lift_bead`), which takes it out of the
//! cache.
//! Invariant: the cache holds at most `capacity` bytes of beads, by each bead's stored size plus
//! the size of its struct, and evicts the least recently read first.
//! Invariant: a bead the disk fails to read back stops whatever was reading it (a panic naming the
//! bead and the error): its store is damaged, and no answer is made up for it.
//! Invariant: a store's source is replaced ([`ColdStore::read_from`]) only by one that answers the
//! same records: a view of the disk pinned before the disk is overwritten (a snapshot install).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::closed_index::{self, Listing};
use super::index::CreatedKey;
use crate::model::{Bead, BeadId, Namespace};

/// Reads stored beads back for a state that keeps closed beads on disk.
pub trait BeadSource: Send + Sync {
    /// The stored bead `id` of `namespace`, with its record's size on disk in bytes (`None`: no
    /// such record), or what the disk failed with.
    fn read_bead(&self, namespace: &Namespace, id: &BeadId) -> Result<Option<(Bead, u64)>, String>;

    /// Up to `limit` keys of the closed beads' index entries ([`super::closed_index`]) in
    /// `[from, to)`: the first ones in key order, or the last ones, last first, when `reverse`.
    fn index_keys(&self, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> Result<Vec<Vec<u8>>, String>;
}

/// What the cache holds and did, for metrics and `cluster status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// The most bytes it holds.
    pub capacity_bytes: u64,
    /// The bytes it holds now.
    pub bytes: u64,
    /// The beads it holds now.
    pub entries: u64,
    /// Reads of a cold bead answered from the cache.
    pub hits: u64,
    /// Reads of a cold bead that went to the disk.
    pub misses: u64,
}

/// The byte-bounded cache of cold beads read lately, shared by every namespace of a state. Its
/// keys name a namespace by an incarnation number, so a namespace deleted and created again never
/// meets the beads of the one before.
pub struct BeadCache {
    capacity: u64,
    inner: Mutex<CacheInner>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct CacheInner {
    entries: HashMap<(u64, BeadId), Entry>,
    /// Recency: the tick of each entry's last read to its key, oldest first.
    recency: BTreeMap<u64, (u64, BeadId)>,
    tick: u64,
    bytes: u64,
}

struct Entry {
    bead: Arc<Bead>,
    bytes: u64,
    tick: u64,
}

impl BeadCache {
    /// An empty cache that holds up to `capacity` bytes (0: it holds nothing).
    pub fn new(capacity: u64) -> BeadCache {
        BeadCache {
            capacity,
            inner: Mutex::new(CacheInner::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// What it holds and did.
    pub fn stats(&self) -> CacheStats {
        let inner = self.inner.lock().expect("bead cache lock");
        CacheStats {
            capacity_bytes: self.capacity,
            bytes: inner.bytes,
            entries: inner.entries.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    fn get(&self, key: &(u64, BeadId)) -> Option<Arc<Bead>> {
        let mut inner = self.inner.lock().expect("bead cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        let Some(entry) = inner.entries.get_mut(key) else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let (bead, before) = (entry.bead.clone(), std::mem::replace(&mut entry.tick, tick));
        inner.recency.remove(&before);
        inner.recency.insert(tick, key.clone());
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(bead)
    }

    fn put(&self, key: (u64, BeadId), bead: Arc<Bead>, stored_bytes: u64) {
        let bytes = stored_bytes + std::mem::size_of::<Bead>() as u64;
        if bytes > self.capacity {
            return;
        }
        let mut inner = self.inner.lock().expect("bead cache lock");
        inner.remove(&key);
        while inner.bytes + bytes > self.capacity {
            let Some((_, oldest)) = inner.recency.pop_first() else { break };
            inner.remove(&oldest);
        }
        inner.tick += 1;
        let tick = inner.tick;
        inner.recency.insert(tick, key.clone());
        inner.bytes += bytes;
        inner.entries.insert(key, Entry { bead, bytes, tick });
    }

    fn forget(&self, key: &(u64, BeadId)) {
        self.inner.lock().expect("bead cache lock").remove(key);
    }
}

impl CacheInner {
    fn remove(&mut self, key: &(u64, BeadId)) {
        if let Some(entry) = self.entries.remove(key) {
            self.recency.remove(&entry.tick);
            self.bytes -= entry.bytes;
        }
    }
}

/// Where a state's cold beads are read from: the storage layer's source and the cache.
#[derive(Clone)]
pub struct ColdStore {
    /// Shared by every clone, so that [`ColdStore::read_from`] redirects every namespace at once.
    source: Arc<RwLock<Arc<dyn BeadSource>>>,
    cache: Arc<BeadCache>,
    incarnations: Arc<AtomicU64>,
}

impl std::fmt::Debug for ColdStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("ColdStore").field("cache", &self.cache.stats()).finish_non_exhaustive()
    }
}

impl ColdStore {
    /// Cold beads read through `source`, with a cache of `cache_bytes`.
    pub fn new(source: Arc<dyn BeadSource>, cache_bytes: u64) -> ColdStore {
        ColdStore {
            source: Arc::new(RwLock::new(source)),
            cache: Arc::new(BeadCache::new(cache_bytes)),
            incarnations: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Reads cold beads through `source` from now on, in every namespace. `source` must answer
    /// the records the one it replaces answers: the storage layer pins a view of the disk before
    /// it overwrites the disk under a state that still answers reads.
    pub fn read_from(&self, source: Arc<dyn BeadSource>) {
        *self.source.write().expect("cold source lock") = source;
    }

    /// What its cache holds and did.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// A handle for one namespace, under a number no other namespace of this store has had.
    pub(super) fn for_namespace(&self, namespace: &Namespace) -> NamespaceCold {
        let incarnation = self.incarnations.fetch_add(1, Ordering::Relaxed);
        NamespaceCold { store: self.clone(), namespace: namespace.clone(), incarnation }
    }
}

/// One namespace's access to its cold beads.
#[derive(Clone, Debug)]
pub(super) struct NamespaceCold {
    store: ColdStore,
    namespace: Namespace,
    incarnation: u64,
}

impl NamespaceCold {
    /// Reads the cold bead `id`: from the cache, else from the disk (then cached). Panics when the
    /// disk fails or lacks it: a cold bead's record is on disk by construction.
    pub(super) fn read(&self, id: &BeadId) -> Arc<Bead> {
        let key = (self.incarnation, id.clone());
        if let Some(bead) = self.store.cache.get(&key) {
            return bead;
        }
        let source = self.store.source.read().expect("cold source lock").clone();
        match source.read_bead(&self.namespace, id) {
            Ok(Some((bead, stored_bytes))) => {
                let bead = Arc::new(bead);
                self.store.cache.put(key, bead.clone(), stored_bytes);
                bead
            }
            Ok(None) => damaged(&format!(
                "bead {id} of namespace {} is kept on disk, and its record is missing",
                self.namespace
            )),
            Err(error) => {
                damaged(&format!("reading bead {id} of namespace {} back from disk failed ({error})", self.namespace))
            }
        }
    }

    /// Takes the bead `id` out of the cache (it is about to change).
    pub(super) fn forget(&self, id: &BeadId) {
        self.store.cache.forget(&(self.incarnation, id.clone()));
    }

    /// The entries of `listing` on disk, in creation order (newest first when `descending`),
    /// strictly after `after` in that order when given. Panics when the disk fails, as a read
    /// does.
    pub(super) fn listing(&self, listing: Listing<'_>, descending: bool, after: Option<&CreatedKey>) -> DiskListing {
        let prefix = closed_index::listing_prefix(&self.namespace, listing);
        let end = closed_index::prefix_end(&prefix).expect("a listing prefix starts with a length, never all 0xff");
        let after = after.map(|key| closed_index::entry_key(&prefix, key));
        let (from, to) = match (descending, after) {
            (false, Some(after)) => (closed_index::key_after(&after), end),
            (true, Some(after)) => (prefix.clone(), after),
            (_, None) => (prefix.clone(), end),
        };
        DiskListing {
            cold: self.clone(),
            prefix_len: prefix.len(),
            from,
            to,
            descending,
            chunk: LISTING_FIRST_CHUNK,
            read: Vec::new().into_iter(),
            exhausted: false,
        }
    }
}

/// Keys a listing reads from disk at first; each further read takes four times as many, up to
/// [`LISTING_CHUNK_MAX`], so that `--limit 1` reads a few and a long walk few times.
const LISTING_FIRST_CHUNK: usize = 16;
/// The most keys a listing reads from disk at once.
const LISTING_CHUNK_MAX: usize = 4096;

/// The entries of one listing on disk, read in chunks ([`NamespaceCold::listing`]).
pub(super) struct DiskListing {
    cold: NamespaceCold,
    prefix_len: usize,
    /// What is left to read: `[from, to)`.
    from: Vec<u8>,
    to: Vec<u8>,
    descending: bool,
    chunk: usize,
    read: std::vec::IntoIter<Vec<u8>>,
    exhausted: bool,
}

impl Iterator for DiskListing {
    type Item = CreatedKey;

    fn next(&mut self) -> Option<CreatedKey> {
        loop {
            if let Some(bytes) = self.read.next() {
                let key = closed_index::decode_entry(self.prefix_len, &bytes);
                return Some(key.unwrap_or_else(|| {
                    damaged(&format!(
                        "an index entry of namespace {} on disk does not decode ({} bytes)",
                        self.cold.namespace,
                        bytes.len()
                    ))
                }));
            }
            if self.exhausted {
                return None;
            }
            let source = self.cold.store.source.read().expect("cold source lock").clone();
            let keys = source.index_keys(&self.from, &self.to, self.descending, self.chunk).unwrap_or_else(|error| {
                damaged(&format!(
                    "reading index entries of namespace {} from disk failed ({error})",
                    self.cold.namespace
                ))
            });
            self.exhausted = keys.len() < self.chunk;
            if let Some(last) = keys.last() {
                if self.descending {
                    self.to = last.clone();
                } else {
                    self.from = closed_index::key_after(last);
                }
            }
            self.chunk = (self.chunk * 4).min(LISTING_CHUNK_MAX);
            self.read = keys.into_iter();
        }
    }
}

/// Stops the reader of a cold bead the disk cannot give back.
fn damaged(what: &str) -> ! {
    panic!(
        "{what}: this node's store is damaged; stop the node, move its data directory away and start it again \
         empty with --rejoin while the other members serve (README, \"A lost disk\")"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bead(n: u64) -> Arc<Bead> {
        let create = crate::input::CreateBead { title: "t".into(), ..Default::default() };
        Arc::new(create.into_bead(BeadId(format!("st-{n}"))))
    }

    struct FailingDisk;

    impl BeadSource for FailingDisk {
        fn read_bead(&self, _namespace: &Namespace, _id: &BeadId) -> Result<Option<(Bead, u64)>, String> {
            Err("checksum mismatch".into())
        }

        fn index_keys(&self, _: &[u8], _: &[u8], _: bool, _: usize) -> Result<Vec<Vec<u8>>, String> {
            Err("checksum mismatch".into())
        }
    }

    #[test]
    #[should_panic(expected = "reading bead st-1 of namespace default back from disk failed (checksum mismatch): \
                               this node's store is damaged; stop the node, move its data directory away")]
    fn a_cold_bead_the_disk_cannot_give_back_stops_its_reader() {
        let store = ColdStore::new(Arc::new(FailingDisk), 4096);
        store.for_namespace(&Namespace::default_namespace()).read(&BeadId("st-1".into()));
    }

    #[test]
    fn the_cache_keeps_its_byte_bound_and_evicts_the_least_recently_read() {
        let size = std::mem::size_of::<Bead>() as u64 + 100;
        let cache = BeadCache::new(3 * size);
        for n in 1..=3 {
            cache.put((0, BeadId(format!("st-{n}"))), bead(n), 100);
        }
        assert!(cache.get(&(0, BeadId("st-1".into()))).is_some());
        cache.put((0, BeadId("st-4".into())), bead(4), 100);
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes), (3, 3 * size), "{stats:?}");
        assert!(cache.get(&(0, BeadId("st-2".into()))).is_none(), "st-2 was the least recently read");
        assert!(cache.get(&(0, BeadId("st-1".into()))).is_some());
        assert!(cache.get(&(1, BeadId("st-1".into()))).is_none(), "another incarnation's key");
        cache.forget(&(0, BeadId("st-1".into())));
        assert!(cache.get(&(0, BeadId("st-1".into()))).is_none());
        cache.put((0, BeadId("st-9".into())), bead(9), 4 * size);
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes, stats.hits, stats.misses), (2, 2 * size, 2, 3), "{stats:?}");
    }
}
