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
//! Invariant: a [`PinnedView`] answers the contents of the instant it was pinned, whatever is
//! written afterwards, until it is dropped.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;

/// A key space of the disk (a RocksDB column family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    /// Raft log entries, keyed by big-endian index.
    Log,
    /// The vote, committed and purged log ids, applied state, node identity.
    Meta,
    /// The state machine's records (beads, namespaces, sessions).
    State,
    /// The index entries of closed beads ([`api::state::closed_index`]): derived from the state
    /// space, written in the same batches, never sent to another node.
    ClosedIndex,
}

impl Space {
    /// Every space.
    pub const ALL: [Space; 4] = [Space::Log, Space::Meta, Space::State, Space::ClosedIndex];

    /// The column family name.
    pub fn name(self) -> &'static str {
        match self {
            Space::Log => "log",
            Space::Meta => "meta",
            Space::State => "state",
            Space::ClosedIndex => "closed_index",
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
    /// Up to `limit` keys of `space` in `[from, to)`: the first ones in key order, or, when
    /// `reverse`, the last ones, last first.
    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>>;
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
    /// Up to `limit` keys of `space` in `[from, to)`, of the latest written values: the first
    /// ones in key order, or, when `reverse`, the last ones, last first.
    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>>;
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

/// A read sent to a [`PinnedView`]'s thread, with where to answer it.
enum PinnedRead {
    /// One key: [`DiskView::get`].
    Get(Space, Vec<u8>, mpsc::SyncSender<io::Result<Option<Vec<u8>>>>),
    /// Keys of a range: [`DiskView::keys`] (`from`, `to`, `reverse`, `limit`).
    Keys(Space, Vec<u8>, Vec<u8>, bool, usize, mpsc::SyncSender<io::Result<Vec<Vec<u8>>>>),
}

/// A view of a disk ([`Disk::view`]) taken at one instant and held by a thread of its own, which
/// answers reads of single keys and of a range's keys, so that the view outlives its taker's
/// borrow of the disk (a RocksDB snapshot borrows its database). The thread ends once the view is
/// dropped.
pub struct PinnedView {
    reads: mpsc::Sender<PinnedRead>,
}

impl PinnedView {
    /// Views `disk` now: when this returns, the view holds the disk's contents of this instant,
    /// whatever is written afterwards.
    pub fn pin<D: Disk>(disk: Arc<D>) -> io::Result<PinnedView> {
        let (reads, incoming) = mpsc::channel::<PinnedRead>();
        on_a_view(disk, "strand-pinned-view", move |view| {
            for read in incoming {
                match read {
                    PinnedRead::Get(space, key, answer) => {
                        let _ = answer.send(view.get(space, &key));
                    }
                    PinnedRead::Keys(space, from, to, reverse, limit, answer) => {
                        let _ = answer.send(view.keys(space, &from, &to, reverse, limit));
                    }
                }
            }
        })?;
        Ok(PinnedView { reads })
    }

    /// Sends a read to the view's thread and waits for its answer.
    fn ask<T>(&self, read: impl FnOnce(mpsc::SyncSender<io::Result<T>>) -> PinnedRead) -> io::Result<T> {
        let gone = || io::Error::other("the pinned view's thread is gone");
        let (answer, answered) = mpsc::sync_channel(1);
        self.reads.send(read(answer)).map_err(|_| gone())?;
        answered.recv().map_err(|_| gone())?
    }

    /// Reads one key as the disk held it when the view was pinned.
    pub fn get(&self, space: Space, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.ask(|answer| PinnedRead::Get(space, key.to_vec(), answer))
    }

    /// [`DiskView::keys`], as the disk held them when the view was pinned.
    pub fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> io::Result<Vec<Vec<u8>>> {
        self.ask(|answer| PinnedRead::Keys(space, from.to_vec(), to.to_vec(), reverse, limit, answer))
    }
}

/// Runs `job` on a view of `disk` taken now, on a thread of its own named `name`: when this
/// returns, the view is taken (or this answers why it could not be), and `job` goes on beside the
/// caller, holding it.
pub fn on_a_view<D: Disk>(
    disk: Arc<D>,
    name: &str,
    job: impl FnOnce(&dyn DiskView) + Send + 'static,
) -> io::Result<()> {
    let (viewed, view_taken) = mpsc::sync_channel::<io::Result<()>>(1);
    let run = move || {
        let view = match disk.view() {
            Ok(view) => view,
            Err(error) => {
                let _ = viewed.send(Err(error));
                return;
            }
        };
        let _ = viewed.send(Ok(()));
        job(view.as_ref());
    };
    std::thread::Builder::new().name(name.into()).spawn(run)?;
    view_taken
        .recv()
        .unwrap_or_else(|_| Err(io::Error::other(format!("the thread {name} ended before it viewed the disk"))))
}
