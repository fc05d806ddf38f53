//! [`MemoryDisk`]: the storage trait in memory, with RocksDB's durability model made explicit,
//! for the deterministic simulator.
//!
//! Every write is visible at once, but only a synced write is durable. [`MemoryDisk::crash`]
//! models a process crash: it keeps every synced batch and a prefix of the unsynced ones (the
//! caller chooses how many, from its seeded RNG) and drops the rest, as a write-ahead log that
//! was only partly flushed would. The simulator holds the disk outside the simulated host, so it
//! outlives the crash.
//!
//! [`MemoryDisk::corrupt`] models damage to synced data while the node is stopped (bit rot, a
//! misdirected write): the simulator rewrites the stored bytes of one value, chosen from
//! [`MemoryDisk::synced_keys`] with its seeded RNG, to see the node's start-up verification
//! refuse it.
//!
//! [`MemoryDisk::wipe`] models a lost disk: everything it held, the log mark included, is gone,
//! as for a node whose data directory was deleted or whose disk was replaced.
//!
//! A checkpoint ([`Disk::checkpoint`]) is a file, `contents`, in the checkpoint's directory: the
//! meta and state spaces (the log is not read from a checkpoint), framed, with a CRC-32 over the
//! whole file, which opening it verifies. It lives on the real filesystem, beside the node's
//! snapshot files, so the simulator's damage reaches it as it reaches them.
//!
//! Invariant: after a crash the contents are exactly the durable batches followed by the kept
//! prefix of the unsynced ones, applied in write order; batches are never torn. The only other
//! changes to durable contents are [`MemoryDisk::corrupt`] and [`MemoryDisk::wipe`], which apply
//! to a crashed disk alone (no unsynced writes, asserted) and change its durable and current
//! contents alike.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Mutex;

use crate::disk::{Disk, DiskView, Durability, Op, Space, Visit};

#[derive(Default)]
struct Inner {
    durable: Contents,
    current: Contents,
    unsynced: Vec<Vec<Op>>,
    /// The log mark: durable as soon as it is written, like the file it stands for.
    mark: Option<u64>,
}

/// An in-memory disk that loses unsynced writes on [`MemoryDisk::crash`].
#[derive(Default)]
pub struct MemoryDisk {
    inner: Mutex<Inner>,
}

fn apply(contents: &mut Contents, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(space, key, value) => {
                contents.entry(*space).or_default().insert(key.clone(), value.clone());
            }
            Op::Delete(space, key) => {
                contents.entry(*space).or_default().remove(key);
            }
            Op::DeleteRange(space, from, to) => {
                let map = contents.entry(*space).or_default();
                let doomed: Vec<Vec<u8>> = map.range(from.clone()..to.clone()).map(|(key, _)| key.clone()).collect();
                for key in doomed {
                    map.remove(&key);
                }
            }
        }
    }
}

fn scan_contents(
    contents: &Contents,
    space: Space,
    from: &[u8],
    to: Option<&[u8]>,
    visit: Visit<'_>,
) -> io::Result<()> {
    let Some(map) = contents.get(&space) else { return Ok(()) };
    for (key, value) in map.range(from.to_vec()..) {
        if to.is_some_and(|end| key.as_slice() >= end) {
            break;
        }
        if !visit(key, value)? {
            break;
        }
    }
    Ok(())
}

/// [`Disk::keys`] over `contents`.
fn range_keys(contents: &Contents, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> Vec<Vec<u8>> {
    let Some(map) = contents.get(&space).filter(|_| from < to) else { return Vec::new() };
    let range = map.range(from.to_vec()..to.to_vec()).map(|(key, _)| key.clone());
    if reverse { range.rev().take(limit).collect() } else { range.take(limit).collect() }
}

impl MemoryDisk {
    /// An empty disk.
    pub fn new() -> MemoryDisk {
        MemoryDisk::default()
    }

    /// Number of batches written since the last sync (what a crash may lose).
    pub fn unsynced_batches(&self) -> usize {
        self.inner.lock().expect("memory disk lock").unsynced.len()
    }

    /// Simulates a crash: keeps the synced state plus the first `keep` unsynced batches, drops
    /// the others, and makes what is left the durable state.
    pub fn crash(&self, keep: usize) {
        let mut inner = self.inner.lock().expect("memory disk lock");
        let unsynced = std::mem::take(&mut inner.unsynced);
        for batch in unsynced.iter().take(keep) {
            apply(&mut inner.durable, batch);
        }
        inner.current = inner.durable.clone();
    }

    /// The keys of `space` that hold a synced value, in key order: what [`MemoryDisk::corrupt`]
    /// may damage.
    pub fn synced_keys(&self, space: Space) -> Vec<Vec<u8>> {
        let inner = self.inner.lock().expect("memory disk lock");
        inner.durable.get(&space).map(|map| map.keys().cloned().collect()).unwrap_or_default()
    }

    /// Damages synced data of a stopped node: `damage` rewrites the stored bytes of `key` in
    /// `space`, in the durable and the current contents alike. Answers whether the key held a
    /// value. Only a crashed disk may be damaged ([`MemoryDisk::crash`] left no unsynced write,
    /// so its current contents are its durable ones).
    pub fn corrupt(&self, space: Space, key: &[u8], damage: impl FnOnce(&mut Vec<u8>)) -> bool {
        let mut inner = self.inner.lock().expect("memory disk lock");
        assert!(inner.unsynced.is_empty(), "only a crashed disk, with no unsynced writes, is damaged");
        let Some(value) = inner.durable.get_mut(&space).and_then(|map| map.get_mut(key)) else { return false };
        damage(value);
        let damaged = value.clone();
        inner.current.entry(space).or_default().insert(key.to_vec(), damaged);
        true
    }

    /// Loses everything a stopped node's disk held, its log mark included. Only a crashed disk
    /// (no unsynced writes) is wiped.
    pub fn wipe(&self) {
        let mut inner = self.inner.lock().expect("memory disk lock");
        assert!(inner.unsynced.is_empty(), "only a crashed disk, with no unsynced writes, is wiped");
        *inner = Inner::default();
    }
}

impl Disk for MemoryDisk {
    fn write(&self, ops: Vec<Op>, durability: Durability) -> io::Result<()> {
        let mut inner = self.inner.lock().expect("memory disk lock");
        apply(&mut inner.current, &ops);
        inner.unsynced.push(ops);
        if durability == Durability::Sync {
            drop(inner);
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut inner = self.inner.lock().expect("memory disk lock");
        let unsynced = std::mem::take(&mut inner.unsynced);
        for batch in &unsynced {
            apply(&mut inner.durable, batch);
        }
        Ok(())
    }

    fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        let inner = self.inner.lock().expect("memory disk lock");
        Ok(inner.current.get(&space).and_then(|map| map.get(key)).cloned())
    }

    fn read_mark(&self) -> io::Result<Option<u64>> {
        Ok(self.inner.lock().expect("memory disk lock").mark)
    }

    fn write_mark(&self, mark: Option<u64>) -> io::Result<()> {
        self.inner.lock().expect("memory disk lock").mark = mark;
        Ok(())
    }

    fn scan(&self, space: Space, from: &[u8], to: Option<&[u8]>, visit: Visit<'_>) -> io::Result<()> {
        // Visit a copy so the visitor may write to the disk without deadlocking.
        let copy: BTreeMap<Vec<u8>, Vec<u8>> = {
            let inner = self.inner.lock().expect("memory disk lock");
            inner.current.get(&space).cloned().unwrap_or_default()
        };
        scan_contents(&BTreeMap::from([(space, copy)]), space, from, to, visit)
    }

    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>> {
        let inner = self.inner.lock().expect("memory disk lock");
        Ok(range_keys(&inner.current, space, from, to, reverse, limit))
    }

    fn view(&self) -> io::Result<Box<dyn DiskView + '_>> {
        let contents = self.inner.lock().expect("memory disk lock").current.clone();
        Ok(Box::new(MemoryView { contents }))
    }

    fn checkpoint(&self, dir: &Path) -> io::Result<Box<dyn DiskView>> {
        let contents: Contents = {
            let inner = self.inner.lock().expect("memory disk lock");
            inner.current.iter().filter(|(space, _)| **space != Space::Log).map(|(s, m)| (*s, m.clone())).collect()
        };
        std::fs::create_dir(dir)?;
        write_checkpoint(dir, &contents)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(Box::new(MemoryView { contents }))
    }

    fn open_checkpoint(dir: &Path) -> io::Result<Box<dyn DiskView>> {
        Ok(Box::new(MemoryView { contents: read_checkpoint(dir)? }))
    }
}

/// The file of a checkpoint, in its directory.
pub const CHECKPOINT_FILE: &str = "contents";

/// What a checkpoint holds: each space's keys and values.
pub type Contents = BTreeMap<Space, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Writes (or rewrites) the file of the checkpoint in `dir`, and syncs it.
pub fn write_checkpoint(dir: &Path, contents: &Contents) -> io::Result<()> {
    let mut bytes = Vec::new();
    for (space, map) in contents {
        for (key, value) in map {
            bytes.push(space_tag(*space));
            for part in [key, value] {
                bytes.extend_from_slice(&(part.len() as u32).to_be_bytes());
                bytes.extend_from_slice(part);
            }
        }
    }
    bytes.extend_from_slice(&crate::codec::checksum(&bytes).to_be_bytes());
    let mut file = std::fs::File::create(dir.join(CHECKPOINT_FILE))?;
    file.write_all(&bytes)?;
    file.sync_all()
}

/// Reads the file of the checkpoint in `dir`, refusing one that fails its checksum.
pub fn read_checkpoint(dir: &Path) -> io::Result<Contents> {
    let path = dir.join(CHECKPOINT_FILE);
    let mut bytes = Vec::new();
    std::fs::File::open(&path)?.read_to_end(&mut bytes)?;
    let damaged = || io::Error::new(io::ErrorKind::InvalidData, format!("checkpoint {} is damaged", path.display()));
    let body_len = bytes.len().checked_sub(4).ok_or_else(damaged)?;
    let (body, sum) = bytes.split_at(body_len);
    if crate::codec::checksum(body).to_be_bytes() != sum {
        return Err(damaged());
    }
    parse_checkpoint(body).ok_or_else(damaged)
}

/// The spaces of a checkpoint file's body, or `None` when it is malformed.
fn parse_checkpoint(mut rest: &[u8]) -> Option<Contents> {
    fn take<'a>(rest: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
        let (head, tail) = rest.split_at_checked(len)?;
        *rest = tail;
        Some(head)
    }
    fn part(rest: &mut &[u8]) -> Option<Vec<u8>> {
        let len = u32::from_be_bytes(take(rest, 4)?.try_into().ok()?);
        take(rest, len as usize).map(<[u8]>::to_vec)
    }
    let mut contents = Contents::new();
    while !rest.is_empty() {
        let space = space_of_tag(take(&mut rest, 1)?[0])?;
        let (key, value) = (part(&mut rest)?, part(&mut rest)?);
        contents.entry(space).or_default().insert(key, value);
    }
    Some(contents)
}

fn space_tag(space: Space) -> u8 {
    match space {
        Space::Log => 0,
        Space::Meta => 1,
        Space::State => 2,
        Space::ClosedIndex => 3,
    }
}

fn space_of_tag(tag: u8) -> Option<Space> {
    Space::ALL.into_iter().find(|space| space_tag(*space) == tag)
}

struct MemoryView {
    contents: Contents,
}

impl DiskView for MemoryView {
    fn scan(&self, space: Space, from: &[u8], to: Option<&[u8]>, visit: Visit<'_>) -> io::Result<()> {
        scan_contents(&self.contents, space, from, to, visit)
    }

    fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        Ok(self.contents.get(&space).and_then(|map| map.get(key)).cloned())
    }

    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>> {
        Ok(range_keys(&self.contents, space, from, to, reverse, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str) -> Op {
        Op::Put(Space::State, key.as_bytes().to_vec(), value.as_bytes().to_vec())
    }

    fn read(disk: &MemoryDisk, key: &str) -> Option<String> {
        disk.get(Space::State, key.as_bytes()).unwrap().map(|value| String::from_utf8(value).unwrap())
    }

    #[test]
    fn synced_writes_survive_a_crash_and_unsynced_ones_do_not() {
        let disk = MemoryDisk::new();
        disk.write(vec![put("a", "1")], Durability::Sync).unwrap();
        disk.write(vec![put("b", "2")], Durability::Buffered).unwrap();
        assert_eq!(read(&disk, "b").as_deref(), Some("2"), "visible before the crash");
        disk.crash(0);
        assert_eq!(read(&disk, "a").as_deref(), Some("1"));
        assert_eq!(read(&disk, "b"), None);
    }

    #[test]
    fn a_crash_keeps_a_prefix_of_unsynced_batches_in_order() {
        let disk = MemoryDisk::new();
        for (n, value) in ["1", "2", "3"].iter().enumerate() {
            disk.write(vec![put("k", value), put(&format!("n{n}"), value)], Durability::Buffered).unwrap();
        }
        assert_eq!(disk.unsynced_batches(), 3);
        disk.crash(2);
        assert_eq!(read(&disk, "k").as_deref(), Some("2"));
        assert_eq!((read(&disk, "n1").as_deref(), read(&disk, "n2")), (Some("2"), None));
        assert_eq!(disk.unsynced_batches(), 0);
    }

    #[test]
    fn corrupt_damages_a_synced_value_for_good() {
        let disk = MemoryDisk::new();
        disk.write(vec![put("a", "1"), put("b", "2")], Durability::Sync).unwrap();
        disk.crash(0);
        assert_eq!(disk.synced_keys(Space::State), vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(disk.synced_keys(Space::Log).is_empty());
        assert!(disk.corrupt(Space::State, b"b", |value| value[0] ^= 0x01));
        assert!(!disk.corrupt(Space::State, b"c", |value| value.clear()));
        assert_eq!(read(&disk, "b").as_deref(), Some("3"), "the current contents are damaged");
        disk.crash(0);
        assert_eq!(read(&disk, "b").as_deref(), Some("3"), "and so are the durable ones");
        assert_eq!(read(&disk, "a").as_deref(), Some("1"));
    }

    #[test]
    fn wipe_loses_everything_and_the_mark() {
        let disk = MemoryDisk::new();
        disk.write(vec![put("a", "1")], Durability::Sync).unwrap();
        disk.write_mark(Some(7)).unwrap();
        disk.crash(0);
        disk.wipe();
        assert_eq!(read(&disk, "a"), None);
        assert!(disk.synced_keys(Space::State).is_empty());
        assert_eq!(disk.read_mark().unwrap(), None);
        disk.crash(0);
        assert_eq!(read(&disk, "a"), None, "nothing comes back after a later crash");
    }

    #[test]
    fn a_checkpoint_holds_its_instant_and_refuses_a_flipped_byte() {
        let dir = tempfile::tempdir().unwrap();
        let disk = MemoryDisk::new();
        disk.write(vec![put("a", "1")], Durability::Sync).unwrap();
        disk.write(vec![put("b", "2")], Durability::Buffered).unwrap();
        let checkpoint = dir.path().join("checkpoint");
        disk.checkpoint(&checkpoint).unwrap();
        disk.write(vec![put("c", "3")], Durability::Sync).unwrap();
        let view = MemoryDisk::open_checkpoint(&checkpoint).unwrap();
        let read = |key: &str| view.get(Space::State, key.as_bytes()).unwrap();
        assert_eq!((read("a"), read("b"), read("c")), (Some(b"1".to_vec()), Some(b"2".to_vec()), None));
        let file = checkpoint.join(CHECKPOINT_FILE);
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[3] ^= 0x01;
        std::fs::write(&file, &bytes).unwrap();
        let error = MemoryDisk::open_checkpoint(&checkpoint).err().expect("a flipped byte is refused");
        assert!(error.to_string().contains("is damaged"), "{error}");
    }

    #[test]
    fn sync_makes_buffered_writes_durable_and_ranges_delete() {
        let disk = MemoryDisk::new();
        disk.write(vec![put("a", "1"), put("b", "2"), put("c", "3")], Durability::Buffered).unwrap();
        disk.sync().unwrap();
        disk.write(vec![Op::DeleteRange(Space::State, b"a".to_vec(), b"c".to_vec())], Durability::Buffered).unwrap();
        assert_eq!((read(&disk, "a"), read(&disk, "c").as_deref()), (None, Some("3")));
        disk.crash(0);
        assert_eq!(read(&disk, "a").as_deref(), Some("1"), "the unsynced delete was lost");
    }
}
