//! The Raft log and vote on a [`Disk`], as openraft's `RaftLogStorage`.
//!
//! Invariant: the vote is synced before `save_vote` returns; appended entries are synced before
//! openraft's flush callback fires. With [`FlushMode::Grouped`] a flusher thread syncs once for
//! every append queued while the previous sync ran (group commit), which is where the throughput
//! under many concurrent claims comes from.
//! Invariant: the log has no holes: its keys run from `last_purged + 1` to the last entry.
//! [`LogStore::open`] checks that, and that every entry, the vote and the commit index pass their
//! checksums and decode, and refuses to start otherwise.
//! Invariant: the in-memory [`LogCache`] holds a contiguous run of the newest entries, each equal
//! to the entry on disk at its index; append, truncate and purge update it with the disk. It holds
//! at most [`LOG_CACHE_ENTRIES_MAX`] entries and, past its newest entry, [`LOG_CACHE_BYTES_MAX`].
//! Invariant: replication reads ([`RaftLogReader::limited_get_log_entries`]) answer at most
//! [`APPEND_BATCH_BYTES_MAX`] of encoded entries, or one entry when that one alone is larger, so
//! one AppendEntries request is bounded in bytes as well as in entries.
//!
//! The log mark. Every entry carries a checksum (see [`crate::codec`]), and RocksDB refuses a
//! damaged write-ahead log; but a log whose synced tail is simply gone (a lost or truncated file)
//! looks whole. So the store keeps, apart from the log ([`Disk::write_mark`]), the index through
//! which it has synced its log, and [`LogStore::open`] refuses a log that ends before it: a node
//! never comes up with a shorter log than it acknowledged. The mark moves up after a group sync
//! once it is [`MARK_STEP_ENTRIES`] behind (so it costs one small synced write per that many
//! entries), and again when the store closes; it moves down, before the entries go, when Raft
//! truncates uncommitted entries.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use openraft::OptionalSend;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};

use crate::codec::{self, META_COMMITTED, META_PURGED, META_VOTE};
use crate::disk::{Disk, Durability, Op, Space};
use crate::types::{Entry, LogId, TypeConfig, Vote};

/// Most appends waiting for one group sync.
pub const FLUSH_QUEUE_MAX: usize = 4096;
/// Newest log entries kept in memory, so that replicating them to followers does not read them
/// back from the disk and decode them again.
pub const LOG_CACHE_ENTRIES_MAX: usize = 8192;
/// Most encoded bytes of entries the cache keeps (beyond its newest entry, which it always keeps).
pub const LOG_CACHE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Most encoded bytes of entries in one AppendEntries request (a single larger entry still goes
/// alone): a follower that is far behind catches up in requests of about this size.
pub const APPEND_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// How far the synced log may run ahead of the log mark before the mark is written again.
pub const MARK_STEP_ENTRIES: u64 = 256;

/// How appends are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushMode {
    /// A flusher thread syncs once per group of appends (real nodes).
    Grouped,
    /// Each append syncs before it returns (the simulator, for determinism).
    Inline,
}

struct Inner<D: Disk> {
    disk: Arc<D>,
    last_log_id: Arc<Mutex<Option<LogId>>>,
    /// The log mark as last written; held across a sync and the mark write that follows it, so a
    /// truncation never interleaves with them.
    mark: Arc<Mutex<Option<u64>>>,
    flusher: Option<Flusher>,
    cache: Mutex<LogCache>,
}

/// An entry with the size of its encoding.
struct Cached {
    entry: Entry,
    bytes: usize,
}

/// The newest entries, contiguous by index, at most [`LOG_CACHE_ENTRIES_MAX`] and
/// [`LOG_CACHE_BYTES_MAX`].
#[derive(Default)]
struct LogCache {
    entries: VecDeque<Cached>,
    bytes: usize,
}

impl LogCache {
    fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|cached| cached.entry.log_id.index)
    }

    fn end_index(&self) -> Option<u64> {
        self.entries.back().map(|cached| cached.entry.log_id.index + 1)
    }

    /// Appends entries written to the disk, each with its encoded size; an append that does not
    /// follow the cached run (after a snapshot install, say) starts a new run.
    fn append(&mut self, entries: impl IntoIterator<Item = (Entry, usize)>) {
        let mut entries = entries.into_iter().peekable();
        let Some((first, _)) = entries.peek() else { return };
        let first = first.log_id.index;
        if self.end_index() != Some(first) {
            self.truncate_from(first);
            if self.end_index() != Some(first) {
                self.entries.clear();
                self.bytes = 0;
            }
        }
        for (entry, bytes) in entries {
            self.bytes += bytes;
            self.entries.push_back(Cached { entry, bytes });
        }
        while self.entries.len() > LOG_CACHE_ENTRIES_MAX || (self.bytes > LOG_CACHE_BYTES_MAX && self.entries.len() > 1)
        {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        if let Some(cached) = self.entries.pop_front() {
            self.bytes -= cached.bytes;
        }
    }

    /// Forgets entries at `index` and above.
    fn truncate_from(&mut self, index: u64) {
        while self.entries.back().is_some_and(|cached| cached.entry.log_id.index >= index) {
            if let Some(cached) = self.entries.pop_back() {
                self.bytes -= cached.bytes;
            }
        }
    }

    /// Forgets entries at `index` and below.
    fn purge_through(&mut self, index: u64) {
        while self.entries.front().is_some_and(|cached| cached.entry.log_id.index <= index) {
            self.pop_front();
        }
    }

    /// The entries from `start` when the cache holds them through `end` (exclusive), stopping
    /// early once `bytes_max` bytes are taken (after at least one entry).
    fn get(&self, start: u64, end: Option<u64>, bytes_max: usize) -> Option<Vec<Entry>> {
        let (first, cached_end) = (self.first_index()?, self.end_index()?);
        let end = end?;
        if start < first || end > cached_end {
            return None;
        }
        let from = (start - first) as usize;
        let to = (end - first) as usize;
        let mut taken = 0;
        let mut entries = Vec::new();
        for cached in self.entries.range(from..to) {
            if !entries.is_empty() && taken + cached.bytes > bytes_max {
                break;
            }
            taken += cached.bytes;
            entries.push(cached.entry.clone());
        }
        Some(entries)
    }
}

/// The group-commit thread and its queue. Dropping it closes the queue and waits for the thread,
/// so the disk is released when the log store is.
struct Flusher {
    sender: Option<std::sync::mpsc::SyncSender<IOFlushed<TypeConfig>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The Raft log store. Clones share the same log.
pub struct LogStore<D: Disk> {
    inner: Arc<Inner<D>>,
}

impl<D: Disk> Clone for LogStore<D> {
    fn clone(&self) -> Self {
        LogStore { inner: self.inner.clone() }
    }
}

fn read_meta<D: Disk, T: serde::de::DeserializeOwned>(disk: &D, key: &[u8]) -> io::Result<Option<T>> {
    match disk.get(Space::Meta, key)? {
        Some(bytes) => codec::decode(&bytes, &String::from_utf8_lossy(key)).map(Some),
        None => Ok(None),
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Reads every entry, checking contiguity from `last_purged + 1`; answers the last log id.
fn verify_log<D: Disk>(disk: &D, last_purged: Option<LogId>) -> io::Result<Option<LogId>> {
    let mut expected = last_purged.map_or(0, |log_id| log_id.index + 1);
    let mut first = true;
    let mut last = last_purged;
    disk.scan(Space::Log, &[], None, &mut |key, value| {
        let index = codec::log_index(key)?;
        let entry: Entry = codec::decode(value, &format!("log entry {index}"))?;
        if first && last_purged.is_none() {
            expected = index;
        }
        first = false;
        if index != expected {
            return Err(invalid(format!("log entry {expected} is missing (next present is {index})")));
        }
        if entry.log_id.index != index {
            return Err(invalid(format!("log entry under key {index} claims index {}", entry.log_id.index)));
        }
        last = Some(entry.log_id);
        expected += 1;
        Ok(true)
    })?;
    Ok(last)
}

/// Refuses a log that ends before the mark: entries this node synced (and so may have
/// acknowledged) are gone.
fn check_mark(mark: Option<u64>, last_log_id: Option<LogId>) -> io::Result<()> {
    let Some(mark) = mark else { return Ok(()) };
    let last = last_log_id.map(|log_id| log_id.index);
    if last.is_none_or(|last| last < mark) {
        let ends = last.map_or_else(|| "is empty".to_string(), |last| format!("ends at index {last}"));
        return Err(invalid(format!(
            "the Raft log went back: it {ends}, but this node had synced entries through index {mark} (the log mark); \
             part of its write-ahead log is missing or was cut"
        )));
    }
    Ok(())
}

/// Moves the mark up to `synced` once it is [`MARK_STEP_ENTRIES`] behind, or whenever `always`.
fn advance_mark<D: Disk>(disk: &D, mark: &mut Option<u64>, synced: Option<u64>, always: bool) -> io::Result<()> {
    let Some(synced) = synced else { return Ok(()) };
    let behind = mark.map_or(u64::MAX, |mark| synced.saturating_sub(mark));
    if behind > 0 && (always || behind >= MARK_STEP_ENTRIES) {
        disk.write_mark(Some(synced))?;
        *mark = Some(synced);
    }
    Ok(())
}

impl<D: Disk> LogStore<D> {
    /// Opens the log on `disk`, verifying it; an error means the data directory must not be served.
    pub fn open(disk: Arc<D>, flush_mode: FlushMode) -> io::Result<LogStore<D>> {
        let last_purged: Option<LogId> = read_meta(disk.as_ref(), META_PURGED)?;
        // Read once here so that a damaged vote or commit index stops the node at open, with the
        // other damage, rather than inside Raft's start.
        read_meta::<D, Vote>(disk.as_ref(), META_VOTE)?;
        read_meta::<D, Option<LogId>>(disk.as_ref(), META_COMMITTED)?;
        let last_log_id = verify_log(disk.as_ref(), last_purged)?;
        let mark = disk.read_mark()?;
        check_mark(mark, last_log_id.or(last_purged))?;
        let last_log_id = Arc::new(Mutex::new(last_log_id));
        let mark = Arc::new(Mutex::new(mark));
        let flusher = match flush_mode {
            FlushMode::Inline => None,
            FlushMode::Grouped => Some(spawn_flusher(disk.clone(), last_log_id.clone(), mark.clone())?),
        };
        let cache = Mutex::new(LogCache::default());
        Ok(LogStore { inner: Arc::new(Inner { disk, last_log_id, mark, flusher, cache }) })
    }

    fn disk(&self) -> &D {
        self.inner.disk.as_ref()
    }

    /// The id of the last entry (or of the last purged one, when the log holds none).
    pub fn last_log_id(&self) -> io::Result<Option<LogId>> {
        let last_purged: Option<LogId> = read_meta(self.disk(), META_PURGED)?;
        Ok(self.inner.last_log_id.lock().expect("last log id lock").or(last_purged))
    }

    /// The vote stored, if any.
    pub fn vote(&self) -> io::Result<Option<Vote>> {
        read_meta(self.disk(), META_VOTE)
    }

    /// Appends `entry` after the last entry and syncs it and the mark, outside Raft: only for a
    /// node that is not running Raft (`node::force`, which writes the membership of a forced new
    /// cluster). Refuses an entry that does not follow the last one.
    pub fn append_offline(&self, entry: Entry) -> io::Result<()> {
        let expected = self.last_log_id()?.map_or(0, |log_id| log_id.index + 1);
        if entry.log_id.index != expected {
            return Err(io::Error::other(format!(
                "an entry at index {} does not follow the log, which ends before {expected}",
                entry.log_id.index
            )));
        }
        let bytes = codec::encode(&entry)?;
        let (log_id, size) = (entry.log_id, bytes.len());
        self.disk().write(vec![Op::Put(Space::Log, codec::log_key(log_id.index), bytes)], Durability::Sync)?;
        self.cache().append([(entry, size)]);
        self.set_last(Some(log_id));
        let mut result = Ok(());
        sync_and_mark(self.disk(), &self.inner.last_log_id, &self.inner.mark, true, |synced| {
            result = synced.as_ref().map(|_| ()).map_err(|error| io::Error::new(error.kind(), error.to_string()));
        });
        result
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, LogCache> {
        self.inner.cache.lock().expect("log cache lock")
    }

    fn set_last(&self, log_id: Option<LogId>) {
        *self.inner.last_log_id.lock().expect("last log id lock") = log_id;
    }
}

/// Syncs the disk, hands the sync's result to `synced` (which completes the waiting appends), then
/// moves the mark up to what the sync covered (every entry written before it): at once when
/// `always`, else once it is [`MARK_STEP_ENTRIES`] behind. All of it runs under the mark's lock,
/// so a truncation never falls between the sync and the mark; the appends do not wait for the mark.
fn sync_and_mark<D: Disk>(
    disk: &D,
    last_log_id: &Mutex<Option<LogId>>,
    mark: &Mutex<Option<u64>>,
    always: bool,
    synced: impl FnOnce(&io::Result<()>),
) {
    let mut mark = mark.lock().expect("log mark lock");
    let written = last_log_id.lock().expect("last log id lock").map(|log_id| log_id.index);
    let result = disk.sync();
    synced(&result);
    if result.is_ok()
        && let Err(error) = advance_mark(disk, &mut mark, written, always)
    {
        // The entries are synced; only the check for a log that goes back is behind.
        tracing::error!(%error, "could not write the log mark");
    }
}

/// A copy of a sync's result for each waiting append.
fn outcome(result: &io::Result<()>) -> io::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
    }
}

/// Starts the group-commit thread: it waits for one append, takes every other queued one, syncs
/// once, and completes them all. When the queue closes it writes the mark one last time.
fn spawn_flusher<D: Disk>(
    disk: Arc<D>,
    last_log_id: Arc<Mutex<Option<LogId>>>,
    mark: Arc<Mutex<Option<u64>>>,
) -> io::Result<Flusher> {
    let (sender, receiver) = std::sync::mpsc::sync_channel::<IOFlushed<TypeConfig>>(FLUSH_QUEUE_MAX);
    let thread = std::thread::Builder::new().name("strand-log-flush".into()).spawn(move || {
        while let Ok(first) = receiver.recv() {
            let mut group = vec![first];
            group.extend(receiver.try_iter());
            sync_and_mark(disk.as_ref(), &last_log_id, &mark, false, |result| {
                group.into_iter().for_each(|callback| callback.io_completed(outcome(result)));
            });
        }
        sync_and_mark(disk.as_ref(), &last_log_id, &mark, true, |_| {});
    })?;
    Ok(Flusher { sender: Some(sender), thread: Some(thread) })
}

fn range_start(range: &impl RangeBounds<u64>) -> u64 {
    match range.start_bound() {
        Bound::Included(start) => *start,
        Bound::Excluded(start) => start + 1,
        Bound::Unbounded => 0,
    }
}

fn range_end(range: &impl RangeBounds<u64>) -> Option<u64> {
    match range.end_bound() {
        Bound::Included(end) => end.checked_add(1),
        Bound::Excluded(end) => Some(*end),
        Bound::Unbounded => None,
    }
}

impl<D: Disk> LogStore<D> {
    /// The entries `start..end`, from the cache when it holds them all, else from the disk,
    /// stopping once `bytes_max` encoded bytes are taken (after at least one entry).
    fn read_entries(&self, start: u64, end: Option<u64>, bytes_max: usize) -> io::Result<Vec<Entry>> {
        if end.is_some_and(|end| end <= start) {
            return Ok(Vec::new());
        }
        if let Some(entries) = self.cache().get(start, end, bytes_max) {
            return Ok(entries);
        }
        let mut entries = Vec::new();
        let mut taken = 0;
        let end_key = end.map(codec::log_key);
        self.disk().scan(Space::Log, &codec::log_key(start), end_key.as_deref(), &mut |key, value| {
            if !entries.is_empty() && taken + value.len() > bytes_max {
                return Ok(false);
            }
            let index = codec::log_index(key)?;
            let entry: Entry = codec::decode(value, &format!("log entry {index}"))?;
            if let Some(previous) = entries.last().map(|entry: &Entry| entry.log_id.index)
                && index != previous + 1
            {
                return Err(invalid(format!("log entry {} is missing", previous + 1)));
            }
            taken += value.len();
            entries.push(entry);
            Ok(true)
        })?;
        Ok(entries)
    }
}

impl<D: Disk> RaftLogReader<TypeConfig> for LogStore<D> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        self.read_entries(range_start(&range), range_end(&range), usize::MAX)
    }

    /// Replication's read: at most [`APPEND_BATCH_BYTES_MAX`] of encoded entries, or one entry.
    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> Result<Vec<Entry>, io::Error> {
        self.read_entries(start, Some(end), APPEND_BATCH_BYTES_MAX)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        read_meta(self.disk(), META_VOTE)
    }
}

impl<D: Disk> RaftLogStorage<TypeConfig> for LogStore<D> {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let last_purged_log_id: Option<LogId> = read_meta(self.disk(), META_PURGED)?;
        let last = *self.inner.last_log_id.lock().expect("last log id lock");
        Ok(LogState { last_purged_log_id, last_log_id: last.or(last_purged_log_id) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let op = Op::Put(Space::Meta, META_VOTE.to_vec(), codec::encode(vote)?);
        self.disk().write(vec![op], Durability::Sync)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        let op = Op::Put(Space::Meta, META_COMMITTED.to_vec(), codec::encode(&committed)?);
        self.disk().write(vec![op], Durability::Buffered)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(read_meta::<D, Option<LogId>>(self.disk(), META_COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        crate::faults::delay(crate::faults::FaultPoint::LogFlushDelay).await;
        let mut ops = Vec::with_capacity(entries.len());
        let mut sizes = Vec::with_capacity(entries.len());
        for entry in &entries {
            let bytes = codec::encode(entry)?;
            sizes.push(bytes.len());
            ops.push(Op::Put(Space::Log, codec::log_key(entry.log_id.index), bytes));
        }
        if let Some(last) = entries.last().map(|entry| entry.log_id) {
            if crate::faults::fire(crate::faults::FaultPoint::DiskWriteFail).is_some() {
                return Err(io::Error::other(crate::faults::INJECTED_FAILURE));
            }
            let mut cache = self.cache();
            self.disk().write(ops, Durability::Buffered)?;
            // The entries move into the cache: this runs on every append of every node.
            cache.append(entries.into_iter().zip(sizes));
            self.set_last(Some(last));
        }
        match &self.inner.flusher {
            Some(Flusher { sender: Some(sender), .. }) => sender
                .send(callback)
                .map_err(|_| io::Error::other("the log flusher thread has stopped; the node must restart"))?,
            _ => sync_and_mark(self.disk(), &self.inner.last_log_id, &self.inner.mark, false, |result| {
                callback.io_completed(outcome(result));
            }),
        }
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |log_id| log_id.index + 1);
        let op = Op::DeleteRange(Space::Log, codec::log_key(from), codec::log_key(u64::MAX));
        // The mark comes down first: a crash after the truncation must not find a mark past the log.
        let mut mark = self.inner.mark.lock().expect("log mark lock");
        if mark.is_some_and(|mark| mark >= from) {
            let lowered = from.checked_sub(1);
            self.disk().write_mark(lowered)?;
            *mark = lowered;
        }
        let mut cache = self.cache();
        self.disk().write(vec![op], Durability::Buffered)?;
        cache.truncate_from(from);
        drop(cache);
        let last_purged: Option<LogId> = read_meta(self.disk(), META_PURGED)?;
        let mut last = self.inner.last_log_id.lock().expect("last log id lock");
        if last.is_some_and(|last| last.index >= from) {
            *last = last_log_id.or(last_purged);
        }
        drop(mark);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let ops = vec![
            Op::Put(Space::Meta, META_PURGED.to_vec(), codec::encode(&log_id)?),
            Op::DeleteRange(Space::Log, codec::log_key(0), codec::log_key(log_id.index + 1)),
        ];
        let mut cache = self.cache();
        self.disk().write(ops, Durability::Buffered)?;
        cache.purge_through(log_id.index);
        drop(cache);
        let mut last = self.inner.last_log_id.lock().expect("last log id lock");
        if last.is_none_or(|last| last.index < log_id.index) {
            *last = Some(log_id);
        }
        Ok(())
    }
}
