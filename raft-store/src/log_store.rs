//! The Raft log and vote on a [`Disk`], as openraft's `RaftLogStorage`.
//!
//! Invariant: the vote is synced before `save_vote` returns; appended entries are synced before
//! openraft's flush callback fires. With [`FlushMode::Grouped`] a flusher thread syncs once for
//! every append queued while the previous sync ran (group commit), which is where the throughput
//! under many concurrent claims comes from.
//! Invariant: the log has no holes: its keys run from `last_purged + 1` to the last entry.
//! [`LogStore::open`] checks that, and that every entry decodes, and refuses to start otherwise.
//! Invariant: the in-memory [`LogCache`] holds a contiguous run of the newest entries, each equal
//! to the entry on disk at its index; append, truncate and purge update it with the disk.

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
    last_log_id: Mutex<Option<LogId>>,
    flusher: Option<Flusher>,
    cache: Mutex<LogCache>,
}

/// The newest entries, contiguous by index, at most [`LOG_CACHE_ENTRIES_MAX`].
#[derive(Default)]
struct LogCache {
    entries: VecDeque<Entry>,
}

impl LogCache {
    fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|entry| entry.log_id.index)
    }

    fn end_index(&self) -> Option<u64> {
        self.entries.back().map(|entry| entry.log_id.index + 1)
    }

    /// Appends entries written to the disk; an append that does not follow the cached run
    /// (after a snapshot install, say) starts a new run.
    fn append(&mut self, entries: Vec<Entry>) {
        let Some(first) = entries.first() else { return };
        if self.end_index() != Some(first.log_id.index) {
            self.truncate_from(first.log_id.index);
            if self.end_index() != Some(first.log_id.index) {
                self.entries.clear();
            }
        }
        self.entries.extend(entries);
        while self.entries.len() > LOG_CACHE_ENTRIES_MAX {
            self.entries.pop_front();
        }
    }

    /// Forgets entries at `index` and above.
    fn truncate_from(&mut self, index: u64) {
        while self.entries.back().is_some_and(|entry| entry.log_id.index >= index) {
            self.entries.pop_back();
        }
    }

    /// Forgets entries at `index` and below.
    fn purge_through(&mut self, index: u64) {
        while self.entries.front().is_some_and(|entry| entry.log_id.index <= index) {
            self.entries.pop_front();
        }
    }

    /// The entries `start..end` when the cache holds all of them.
    fn get(&self, start: u64, end: Option<u64>) -> Option<Vec<Entry>> {
        let (first, cached_end) = (self.first_index()?, self.end_index()?);
        let end = end?;
        if start < first || end > cached_end {
            return None;
        }
        let from = (start - first) as usize;
        let to = (end - first) as usize;
        Some(self.entries.range(from..to).cloned().collect())
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

impl<D: Disk> LogStore<D> {
    /// Opens the log on `disk`, verifying it; an error means the data directory must not be served.
    pub fn open(disk: Arc<D>, flush_mode: FlushMode) -> io::Result<LogStore<D>> {
        let last_purged: Option<LogId> = read_meta(disk.as_ref(), META_PURGED)?;
        let last_log_id = verify_log(disk.as_ref(), last_purged)?;
        let flusher = match flush_mode {
            FlushMode::Inline => None,
            FlushMode::Grouped => Some(spawn_flusher(disk.clone())?),
        };
        let cache = Mutex::new(LogCache::default());
        Ok(LogStore { inner: Arc::new(Inner { disk, last_log_id: Mutex::new(last_log_id), flusher, cache }) })
    }

    fn disk(&self) -> &D {
        self.inner.disk.as_ref()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, LogCache> {
        self.inner.cache.lock().expect("log cache lock")
    }

    fn set_last(&self, log_id: Option<LogId>) {
        *self.inner.last_log_id.lock().expect("last log id lock") = log_id;
    }
}

/// Starts the group-commit thread: it waits for one append, takes every other queued one, syncs
/// once, and completes them all.
fn spawn_flusher<D: Disk>(disk: Arc<D>) -> io::Result<Flusher> {
    let (sender, receiver) = std::sync::mpsc::sync_channel::<IOFlushed<TypeConfig>>(FLUSH_QUEUE_MAX);
    let thread = std::thread::Builder::new().name("strand-log-flush".into()).spawn(move || {
        while let Ok(first) = receiver.recv() {
            let mut group = vec![first];
            group.extend(receiver.try_iter());
            let result = disk.sync();
            for callback in group {
                let outcome = match &result {
                    Ok(()) => Ok(()),
                    Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
                };
                callback.io_completed(outcome);
            }
        }
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

impl<D: Disk> RaftLogReader<TypeConfig> for LogStore<D> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let start = range_start(&range);
        let end = range_end(&range);
        if end.is_some_and(|end| end <= start) {
            return Ok(Vec::new());
        }
        if let Some(entries) = self.cache().get(start, end) {
            return Ok(entries);
        }
        let mut entries = Vec::new();
        let end_key = end.map(codec::log_key);
        self.disk().scan(Space::Log, &codec::log_key(start), end_key.as_deref(), &mut |key, value| {
            let index = codec::log_index(key)?;
            let entry: Entry = codec::decode(value, &format!("log entry {index}"))?;
            if let Some(previous) = entries.last().map(|entry: &Entry| entry.log_id.index)
                && index != previous + 1
            {
                return Err(invalid(format!("log entry {} is missing", previous + 1)));
            }
            entries.push(entry);
            Ok(true)
        })?;
        Ok(entries)
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
        let mut ops = Vec::with_capacity(entries.len());
        for entry in &entries {
            ops.push(Op::Put(Space::Log, codec::log_key(entry.log_id.index), codec::encode(entry)?));
        }
        if let Some(last) = entries.last().map(|entry| entry.log_id) {
            let mut cache = self.cache();
            self.disk().write(ops, Durability::Buffered)?;
            // The entries move into the cache: this runs on every append of every node.
            cache.append(entries);
            self.set_last(Some(last));
        }
        match &self.inner.flusher {
            Some(Flusher { sender: Some(sender), .. }) => sender
                .send(callback)
                .map_err(|_| io::Error::other("the log flusher thread has stopped; the node must restart"))?,
            _ => callback.io_completed(self.disk().sync()),
        }
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |log_id| log_id.index + 1);
        let op = Op::DeleteRange(Space::Log, codec::log_key(from), codec::log_key(u64::MAX));
        let mut cache = self.cache();
        self.disk().write(vec![op], Durability::Buffered)?;
        cache.truncate_from(from);
        drop(cache);
        let last_purged: Option<LogId> = read_meta(self.disk(), META_PURGED)?;
        let mut last = self.inner.last_log_id.lock().expect("last log id lock");
        if last.is_some_and(|last| last.index >= from) {
            *last = last_log_id.or(last_purged);
        }
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
