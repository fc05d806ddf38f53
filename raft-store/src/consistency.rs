//! Consistency checkpoints: the digest every replica takes of its state at a checkpoint's log
//! index (`ControllerAction::Checkpoint`, `cluster check`), which the leader compares across the
//! members to find a replica whose state differs.
//!
//! Two digests, by the state's apply version (`api::version`):
//! - before [`api::version::DISK_DIGEST_VERSION`], [`stable_digest`] reads the state in memory,
//!   in its own order, on the apply path: writes wait for it, for a time that grows with the state;
//! - from that version on, [`disk_digest`] reads the records as stored, in the disk's key order,
//!   from a view of the disk taken right after the checkpoint's entry was persisted. On a disk
//!   that does real I/O it runs on a thread of its own, so apply goes on meanwhile; the
//!   simulator's disk digests inline, so a run stays a function of its seed.
//!
//! Both are SHA-256 (first 8 bytes) over each record's key and value bytes, each preceded by its
//! length, so every build of one storage format computes them alike.
//!
//! Invariant: a checkpoint's digest belongs to the state at its index, whichever digest took it:
//! the view is taken before apply writes anything past that index.
//! Invariant: the list of checkpoints is in index order and holds [`CHECKPOINTS_KEPT`] at most;
//! a checkpoint still being digested is listed apart ([`Checkpoints::digesting`]), never with a
//! digest it does not have yet; at most [`DIGESTS_UNDER_WAY_MAX`] are being digested at once.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::sync::{Arc, Condvar, Mutex};

use api::state::State;
use sha2::Digest as _;

use crate::codec;
use crate::disk::{Disk, DiskView, Space, Visit, on_a_view};

/// How many consistency checkpoints a replica keeps.
pub const CHECKPOINTS_KEPT: usize = 8;

/// How many digests of the disk may be under way at once (one reading, the next waiting with its
/// view). Apply waits before it starts one more, so checkpoints proposed faster than a replica
/// digests them slow apply down rather than pile up threads and pinned views of the disk.
pub const DIGESTS_UNDER_WAY_MAX: usize = 2;

/// Which digest a checkpoint takes: the rule of the state's apply version at its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestRule {
    /// [`stable_digest`] of the state in memory, on the apply path (apply versions before
    /// [`api::version::DISK_DIGEST_VERSION`]).
    InMemory,
    /// [`disk_digest`] of a view of the disk, beside apply.
    OfTheDisk,
}

impl DigestRule {
    /// The rule of a state at apply version `version`.
    pub fn at(version: u32) -> DigestRule {
        if version >= api::version::DISK_DIGEST_VERSION { DigestRule::OfTheDisk } else { DigestRule::InMemory }
    }
}

/// The checkpoints a replica took lately, and those it is still digesting.
#[derive(Default)]
pub struct Checkpoints {
    taken: Mutex<VecDeque<(u64, u64)>>,
    digesting: Mutex<BTreeSet<u64>>,
    /// Signalled whenever a checkpoint leaves `digesting`.
    digested: Condvar,
    /// Held by a digest of the disk while it reads, so that two run one after the other.
    one_at_a_time: Mutex<()>,
}

impl Checkpoints {
    /// (log index, digest) of the checkpoints taken lately, oldest first.
    pub fn taken(&self) -> Vec<(u64, u64)> {
        self.taken.lock().expect("checkpoints lock").iter().copied().collect()
    }

    /// The indexes of checkpoints whose digest is still being taken.
    pub fn digesting(&self) -> Vec<u64> {
        self.digesting.lock().expect("checkpoints lock").iter().copied().collect()
    }

    /// Records the digest of the checkpoint at `index`, in index order, dropping the oldest
    /// beyond [`CHECKPOINTS_KEPT`].
    pub fn record(&self, index: u64, digest: u64) {
        let mut taken = self.taken.lock().expect("checkpoints lock");
        let at = taken.partition_point(|(taken, _)| *taken < index);
        taken.insert(at, (index, digest));
        while taken.len() > CHECKPOINTS_KEPT {
            taken.pop_front();
        }
        drop(taken);
        self.done_digesting(index);
    }

    /// Takes `index` off the checkpoints being digested, and wakes an apply waiting for room.
    fn done_digesting(&self, index: u64) {
        self.digesting.lock().expect("checkpoints lock").remove(&index);
        self.digested.notify_all();
    }

    /// Digests the disk for the checkpoint at `index`, whose entry the disk holds and nothing
    /// past it: inline on a disk that does no real I/O, else on a thread of its own, which takes
    /// its view of the disk before this returns.
    pub fn digest_the_disk<D: Disk>(self: &Arc<Self>, disk: &Arc<D>, index: u64) -> io::Result<()> {
        if !D::BLOCKS {
            // Nothing writes meanwhile: the disk is its own view.
            let digest = digest_of(|visit| disk.scan(Space::State, &[], None, visit))?;
            self.record(index, digest);
            return Ok(());
        }
        {
            let mut digesting = self.digesting.lock().expect("checkpoints lock");
            while digesting.len() >= DIGESTS_UNDER_WAY_MAX {
                digesting = self.digested.wait(digesting).expect("checkpoints lock");
            }
            digesting.insert(index);
        }
        let checkpoints = self.clone();
        let digest = move |view: &dyn DiskView| {
            let _one_at_a_time = checkpoints.one_at_a_time.lock().expect("digest lock");
            let started = std::time::Instant::now();
            match disk_digest(view) {
                Ok(digest) => {
                    checkpoints.record(index, digest);
                    tracing::info!(
                        index,
                        digest = format!("{digest:016x}"),
                        took_ms = started.elapsed().as_millis() as u64,
                        "took a consistency checkpoint"
                    );
                }
                Err(error) => {
                    checkpoints.done_digesting(index);
                    tracing::error!(
                        index,
                        %error,
                        "the digest of a consistency checkpoint failed, so `cluster check` lists none for this \
                         replica at that index: check this node's disk; the next checkpoint digests it again"
                    );
                }
            }
        };
        let answer = on_a_view(disk.clone(), "strand-digest", digest);
        if answer.is_err() {
            self.done_digesting(index);
        }
        answer
    }
}

/// Adds one record's key and value, each preceded by its length, to a digest.
fn add_record(hasher: &mut sha2::Sha256, key: &[u8], value: &[u8]) {
    hasher.update((key.len() as u64).to_le_bytes());
    hasher.update(key);
    hasher.update((value.len() as u64).to_le_bytes());
    hasher.update(value);
}

fn first_8_bytes(hasher: sha2::Sha256) -> u64 {
    let digest = hasher.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 digest has 32 bytes"))
}

/// The digest of apply versions before [`api::version::DISK_DIGEST_VERSION`]: each record of the
/// state in memory, its key and value encoded without a checksum, in the order
/// [`State::visit_records`] gives them.
pub fn stable_digest(state: &State) -> io::Result<u64> {
    let mut hasher = sha2::Sha256::new();
    let mut failed = None;
    // Borrowed records encode exactly as owned ones, so the state is read, never copied.
    state.visit_records(&mut |key, record| {
        if failed.is_some() {
            return;
        }
        match (codec::encode_plain(&key), codec::encode_plain(&record)) {
            (Ok(key), Ok(value)) => add_record(&mut hasher, &key, &value),
            (Err(error), _) | (_, Err(error)) => failed = Some(error),
        }
    });
    if let Some(error) = failed {
        return Err(error);
    }
    Ok(first_8_bytes(hasher))
}

/// The digest from [`api::version::DISK_DIGEST_VERSION`] on: each record of the state space as
/// stored (its value with its checksum, so a record damaged on the disk changes the digest), in
/// the disk's key order.
pub fn disk_digest(view: &dyn DiskView) -> io::Result<u64> {
    digest_of(|visit| view.scan(Space::State, &[], None, visit))
}

/// [`disk_digest`] of what `scan` visits.
fn digest_of(scan: impl FnOnce(Visit<'_>) -> io::Result<()>) -> io::Result<u64> {
    let mut hasher = sha2::Sha256::new();
    scan(&mut |key, value| {
        add_record(&mut hasher, key, value);
        Ok(true)
    })?;
    Ok(first_8_bytes(hasher))
}
