//! The storage trait under the Raft log and the state machine: a small, ordered key-value disk
//! with atomic batches and an explicit sync.
//!
//! Two implementations: [`crate::rocks::RocksDisk`] for real nodes, and the simulator's in-memory
//! disk, which keeps unsynced writes volatile so that a simulated crash can drop them.
//!
//! Invariant: a batch is applied whole or not at all; after [`Disk::sync`] returns, every batch
//! written before it survives a crash; batches become durable in the order they were written.
//! Invariant: the log mark ([`Disk::write_mark`]) is durable when the call returns, and is stored
//! apart from the batches, so losing batches does not lose the mark.
//! Invariant: a checkpoint ([`Disk::checkpoint`]) holds the contents of one instant, whole and
//! durable, and outlives later writes to the disk; what it costs does not grow with the contents
//! on RocksDB (hard links to the table files).

use std::io;
use std::path::Path;

/// A key space of the disk (a RocksDB column family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    /// Raft log entries, keyed by big-endian index.
    Log,
    /// The vote, committed and purged log ids, applied state, node identity.
    Meta,
    /// The state machine's records (beads, namespaces, sessions).
    State,
}

impl Space {
    /// Every space.
    pub const ALL: [Space; 3] = [Space::Log, Space::Meta, Space::State];

    /// The column family name.
    pub fn name(self) -> &'static str {
        match self {
            Space::Log => "log",
            Space::Meta => "meta",
            Space::State => "state",
        }
    }
}

/// One change inside a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Set a key.
    Put(Space, Vec<u8>, Vec<u8>),
    /// Remove a key.
    Delete(Space, Vec<u8>),
    /// Remove every key in `[from, to)`.
    DeleteRange(Space, Vec<u8>, Vec<u8>),
}

/// Whether a write must be durable before it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Synced before returning.
    Sync,
    /// Durable after the next [`Disk::sync`] (or a later synced write).
    Buffered,
}

/// A visitor over a key range: return `false` to stop.
pub type Visit<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> io::Result<bool>;

/// A consistent, read-only view of the disk at one instant.
pub trait DiskView: Send {
    /// Visits the keys of `space` in `[from, to)` (to the end when `to` is `None`), in key order.
    fn scan(&self, space: Space, from: &[u8], to: Option<&[u8]>, visit: Visit<'_>) -> io::Result<()>;
    /// Reads one key.
    fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>>;
}

/// The storage trait.
pub trait Disk: Send + Sync + 'static {
    /// Whether calls wait on real I/O. If so, building and installing a snapshot (a pass over the
    /// whole state) run on tokio's blocking pool rather than holding an async worker thread. The
    /// in-memory disk and the simulator's wrapper say no, so a simulated run's schedule stays a
    /// function of its seed.
    const BLOCKS: bool = false;
    /// Applies a batch atomically.
    fn write(&self, ops: Vec<Op>, durability: Durability) -> io::Result<()>;
    /// Makes every write so far durable.
    fn sync(&self) -> io::Result<()>;
    /// Reads one key (latest written value, synced or not).
    fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>>;
    /// Visits a key range of the latest written values, in key order.
    fn scan(&self, space: Space, from: &[u8], to: Option<&[u8]>, visit: Visit<'_>) -> io::Result<()>;
    /// A consistent point-in-time view (for building snapshots while writes go on).
    fn view(&self) -> io::Result<Box<dyn DiskView + '_>>;
    /// Writes a checkpoint of the current contents (synced or not, as [`Disk::view`] sees them)
    /// into the directory `dir`, which must not exist yet, durably, and answers a view of it.
    fn checkpoint(&self, dir: &Path) -> io::Result<Box<dyn DiskView>>;
    /// Opens a checkpoint that [`Disk::checkpoint`] wrote, read-only.
    fn open_checkpoint(dir: &Path) -> io::Result<Box<dyn DiskView>>
    where
        Self: Sized;
    /// The log mark: the highest log index this disk is known to hold synced (see
    /// [`crate::log_store`]). It is kept apart from the batches (on RocksDB, a small file beside
    /// the database), so that a store that lost part of its synced log is caught at start.
    /// `None` before it is first written.
    fn read_mark(&self) -> io::Result<Option<u64>>;
    /// Replaces the log mark durably before returning.
    fn write_mark(&self, mark: Option<u64>) -> io::Result<()>;
}
