//! The bead state machine on a [`Disk`], as openraft's `RaftStateMachine`.
//!
//! The state lives in memory ([`api::state::State`], indexes included) and on disk (its records
//! in the state space). Applying a batch of entries changes memory, then writes every changed
//! record together with `last_applied` (and the membership, when the batch changed it) in **one**
//! atomic disk batch, and only then answers the clients. Closed beads then leave memory: the
//! state reads them back from the state space ([`BEAD_CACHE_BYTES_DEFAULT`] of them cached).
//!
//! Building a snapshot is taking a checkpoint of the disk (`snapshots/checkpoint-<index>/`: the
//! disk's checkpoint under `db/`, the snapshot's metadata in `meta`), whose cost does not grow
//! with the state; it is written out as a snapshot file only when a follower needs it or a backup
//! is saved ([`SnapshotFile::readable`]). A snapshot received from the leader is kept as the file
//! `snapshots/current.snapshot` until a newer checkpoint replaces it. Installing a snapshot passes
//! over the whole state, so on a disk that does real I/O it runs on tokio's blocking pool, as
//! building does. The state it replaces answers reads meanwhile, reading its cold beads from a
//! view of the disk pinned before the overwrite, and an install that fails once it began to
//! overwrite the disk poisons the state lock: the old state no longer belongs to the disk.
//!
//! Invariant: the state space and `last_applied` on disk always belong together.
//! Invariant: while a snapshot is being installed the `installing` marker is set, and a node that
//! opens with the marker set finishes the install from the snapshot file before serving (a damaged
//! file then stops the node: its state space is incomplete).
//! Invariant: a node never keeps a snapshot that fails verification: at open, a damaged current
//! snapshot file or checkpoint is deleted, and Raft builds a new one when it needs one.
//! Invariant: the current snapshot is the newest of `current.snapshot` and the checkpoints; a
//! checkpoint is published (renamed into place) only whole, with its `meta`, and every older one
//! is then deleted.
//!
//! [`ApplyProbes`] let the simulator watch every applied entry and its answer, and plant one bug
//! on purpose to show its checkers catch it; a real node runs with none.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use api::command::ControllerAction;
use api::command::{Command, Proposal};
use api::model::Namespace;
use api::model::{Bead, BeadId};
use api::outcome::{Answer, Outcome};
use api::state::closed_index::{self, IndexWrite};
use api::state::{ApplyVersionRecord, BeadSource, ColdStore, Record, RecordKey, State, StateLoader};
use api::version::build_apply_versions;
use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::type_config::alias::SnapshotOf;
use openraft::{EntryPayload, OptionalSend};

use crate::codec::{self, META_APPLIED, META_CLOSED_INDEX, META_INSTALLING, META_MEMBERSHIP};
use crate::consistency::{Checkpoints, DigestRule, stable_digest};
use crate::disk::{Disk, Durability, Op, PinnedView, Space};
use crate::snapshot::{CHECKPOINT_DISK, SENDING_PREFIX, SnapshotFile, SnapshotReader};
use crate::types::{LogId, SnapshotMeta, StoredMembership, TypeConfig};

/// Records written per disk batch while installing a snapshot.
pub const INSTALL_BATCH_RECORDS: usize = 4096;
/// File name of the current snapshot in the snapshot directory.
const CURRENT_SNAPSHOT: &str = "current.snapshot";
/// Directory names of checkpoints in the snapshot directory start with this, then the index.
const CHECKPOINT_PREFIX: &str = "checkpoint-";
/// The directory a checkpoint is built in, before it is renamed into place.
const CHECKPOINT_BUILDING: &str = "checkpoint.building";
/// The file of a checkpoint's snapshot metadata, in its directory.
const CHECKPOINT_META: &str = "meta";
/// The file this node's own checkpoint is written out to when Raft installs it (see `install`).
const RESTORING_CHECKPOINT: &str = "restoring-checkpoint.snapshot";

/// What the state machine has applied.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// The last applied log id.
    pub log_id: Option<LogId>,
    /// The last applied membership.
    pub membership: StoredMembership,
}

/// Sees each applied normal entry: its log index, its proposal and its answer.
pub type ApplyObserver = Arc<dyn Fn(u64, &Proposal, &Answer) + Send + Sync>;

/// What the simulator attaches to a state machine; a real node leaves both unset.
#[derive(Clone, Default)]
pub struct ApplyProbes {
    /// Called after each normal entry is applied, in log order.
    pub observer: Option<ApplyObserver>,
    /// A planted bug: a controller action of a stale term is applied as if it were of the
    /// current controller term, so the state machine's term fence never refuses it.
    pub unfenced_controller: bool,
    /// The apply versions this node applies, when narrower than its build's (the simulator's
    /// nodes of an older build); `None`: [`build_apply_versions`].
    pub apply_versions: Option<api::version::ApplyRange>,
}

struct Inner<D: Disk> {
    disk: Arc<D>,
    probes: ApplyProbes,
    /// The bytes of cold beads the state caches.
    bead_cache_bytes: u64,
    /// The state's apply version, kept beside the state so that it is read without the state lock
    /// (which apply holds while it changes the state).
    apply_version: std::sync::atomic::AtomicU32,
    state: RwLock<State>,
    applied: Mutex<Applied>,
    snapshot_dir: PathBuf,
    build_lock: Mutex<()>,
    /// The consistency checkpoints this replica took lately, and those it is digesting.
    checkpoints: Arc<Checkpoints>,
    /// Per namespace with a subscriber: bumped after each persisted batch that changed the
    /// namespace's settings or event log (which every new event does).
    namespace_notices: Mutex<BTreeMap<Namespace, tokio::sync::watch::Sender<()>>>,
}

/// The state machine store. Clones share one state; the node keeps a clone for reads.
pub struct StateMachineStore<D: Disk> {
    inner: Arc<Inner<D>>,
}

impl<D: Disk> Clone for StateMachineStore<D> {
    fn clone(&self) -> Self {
        StateMachineStore { inner: self.inner.clone() }
    }
}

/// Reads the applied log id and membership through `get` (the disk, or a consistent view of it).
fn read_applied(get: impl Fn(Space, &[u8]) -> io::Result<Option<Vec<u8>>>) -> io::Result<Applied> {
    let log_id = match get(Space::Meta, META_APPLIED)? {
        Some(bytes) => codec::decode(&bytes, "applied log id")?,
        None => None,
    };
    let membership = match get(Space::Meta, META_MEMBERSHIP)? {
        Some(bytes) => codec::decode(&bytes, "membership")?,
        None => StoredMembership::default(),
    };
    Ok(Applied { log_id, membership })
}

/// The bytes of cold beads a state machine caches when its opener names no other size.
pub const BEAD_CACHE_BYTES_DEFAULT: u64 = 256 << 20;

/// Reads beads back from the state space, for a state that keeps closed beads on disk.
struct DiskBeads<D: Disk> {
    disk: Arc<D>,
}

impl<D: Disk> BeadSource for DiskBeads<D> {
    fn read_bead(&self, namespace: &Namespace, id: &BeadId) -> Result<Option<(Bead, u64)>, String> {
        read_stored_bead(|key| self.disk.get(Space::State, key), namespace, id)
    }

    fn index_keys(&self, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> Result<Vec<Vec<u8>>, String> {
        self.disk.keys(Space::ClosedIndex, from, to, reverse, limit).map_err(|error| error.to_string())
    }
}

/// Reads beads back from a view of the state space pinned before a snapshot install overwrites
/// it, for the state the install replaces, which answers reads until the new one is in.
struct PinnedBeads(PinnedView);

impl BeadSource for PinnedBeads {
    fn read_bead(&self, namespace: &Namespace, id: &BeadId) -> Result<Option<(Bead, u64)>, String> {
        read_stored_bead(|key| self.0.get(Space::State, key), namespace, id)
    }

    fn index_keys(&self, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> Result<Vec<Vec<u8>>, String> {
        self.0.keys(Space::ClosedIndex, from, to, reverse, limit).map_err(|error| error.to_string())
    }
}

/// The stored bead `id` of `namespace`, read through `get` (a key of the state space), with its
/// record's size.
fn read_stored_bead(
    get: impl FnOnce(&[u8]) -> io::Result<Option<Vec<u8>>>,
    namespace: &Namespace,
    id: &BeadId,
) -> Result<Option<(Bead, u64)>, String> {
    let key = RecordKey::Bead(namespace.clone(), id.clone());
    let key_bytes = codec::encode_plain(&key).map_err(|error| error.to_string())?;
    let Some(bytes) = get(&key_bytes).map_err(|error| error.to_string())? else {
        return Ok(None);
    };
    match codec::decode(&bytes, &format!("state record {key:?}")).map_err(|error| error.to_string())? {
        Record::Bead(bead) => Ok(Some((*bead, bytes.len() as u64))),
        _ => Err(format!("state record {key:?} holds another kind of record")),
    }
}

/// Loads the state from the state space of `disk`, one record at a time: closed beads are kept
/// on disk, read back through a cache of `cache_bytes`. When the closed beads' index space is not
/// marked built (a directory of an earlier format, a snapshot just installed), it is built on the
/// way, from the records read, and marked built before the state serves.
fn load_state<D: Disk>(disk: &Arc<D>, cache_bytes: u64) -> io::Result<State> {
    let cold = ColdStore::new(Arc::new(DiskBeads { disk: disk.clone() }), cache_bytes);
    let mut loader = StateLoader::new(Some(cold));
    let invalid = |error: api::state::LoadError| io::Error::new(io::ErrorKind::InvalidData, error.to_string());
    let build_index = disk.get(Space::Meta, META_CLOSED_INDEX)?.is_none();
    let mut index_batch = Vec::new();
    if build_index {
        tracing::info!("building the index of closed beads from the state space");
        disk.write(vec![Op::DeleteRange(Space::ClosedIndex, Vec::new(), vec![0xff; 64])], Durability::Buffered)?;
    }
    disk.scan(Space::State, &[], None, &mut |key, value| {
        let key: RecordKey = codec::decode_plain(key, "state record key")?;
        let record: Record = codec::decode(value, &format!("state record {key:?}"))?;
        if build_index
            && let (RecordKey::Bead(namespace, _), Record::Bead(bead)) = (&key, &record)
            && bead.status == api::model::Status::Closed
        {
            let entries = closed_index::entries(namespace, bead);
            index_batch.extend(entries.into_iter().map(|entry| Op::Put(Space::ClosedIndex, entry, Vec::new())));
            if index_batch.len() >= INSTALL_BATCH_RECORDS {
                disk.write(std::mem::take(&mut index_batch), Durability::Buffered)?;
            }
        }
        loader.add(key, record).map_err(invalid)?;
        Ok(true)
    })?;
    if build_index {
        index_batch.push(Op::Put(Space::Meta, META_CLOSED_INDEX.to_vec(), vec![1]));
        disk.write(index_batch, Durability::Sync)?;
    }
    loader.finish().map_err(invalid)
}

impl<D: Disk> StateMachineStore<D> {
    /// Opens the state machine on `disk`, finishing an interrupted snapshot install first.
    pub fn open(disk: Arc<D>, snapshot_dir: &Path) -> io::Result<StateMachineStore<D>> {
        StateMachineStore::open_probed(disk, snapshot_dir, ApplyProbes::default())
    }

    /// [`StateMachineStore::open`], with the simulator's probes attached.
    pub fn open_probed(disk: Arc<D>, snapshot_dir: &Path, probes: ApplyProbes) -> io::Result<StateMachineStore<D>> {
        StateMachineStore::open_with(disk, snapshot_dir, probes, BEAD_CACHE_BYTES_DEFAULT)
    }

    /// [`StateMachineStore::open_probed`], caching up to `bead_cache_bytes` of the closed beads
    /// it keeps on disk.
    pub fn open_with(
        disk: Arc<D>,
        snapshot_dir: &Path,
        probes: ApplyProbes,
        bead_cache_bytes: u64,
    ) -> io::Result<StateMachineStore<D>> {
        std::fs::create_dir_all(snapshot_dir)?;
        if disk.get(Space::Meta, META_INSTALLING)?.is_some() {
            let current = snapshot_dir.join(CURRENT_SNAPSHOT);
            tracing::warn!(path = %current.display(), "finishing an interrupted snapshot install");
            let reader = SnapshotReader::new(std::fs::File::open(&current)?)?;
            write_snapshot_records(disk.as_ref(), reader)?;
        }
        drop_damaged_snapshot(&snapshot_dir.join(CURRENT_SNAPSHOT))?;
        drop_unfinished_and_damaged_checkpoints::<D>(snapshot_dir)?;
        let state = load_state(&disk, bead_cache_bytes)?;
        let applied = read_applied(|space, key| disk.get(space, key))?;
        let inner = Inner {
            disk,
            probes,
            bead_cache_bytes,
            apply_version: std::sync::atomic::AtomicU32::new(state.apply_version().version),
            state: RwLock::new(state),
            applied: Mutex::new(applied),
            snapshot_dir: snapshot_dir.to_path_buf(),
            build_lock: Mutex::new(()),
            checkpoints: Arc::new(Checkpoints::default()),
            namespace_notices: Mutex::new(BTreeMap::new()),
        };
        Ok(StateMachineStore { inner: Arc::new(inner) })
    }

    /// Runs `read` on the current state (a serializable read).
    pub fn read<T>(&self, read: impl FnOnce(&State) -> T) -> T {
        read(&self.inner.state.read().expect("state lock"))
    }

    /// A receiver that sees a change after every applied batch that changed `namespace`'s event
    /// log or settings (and after a snapshot install), so a watcher of one namespace is not woken
    /// by writes to others. Subscribe before reading, then mark the receiver seen before each read.
    pub fn namespace_changes(&self, namespace: &Namespace) -> tokio::sync::watch::Receiver<()> {
        let mut notices = self.inner.namespace_notices.lock().expect("notices lock");
        notices.retain(|_, sender| sender.receiver_count() > 0);
        notices.entry(namespace.clone()).or_insert_with(|| tokio::sync::watch::channel(()).0).subscribe()
    }

    /// Tells the subscribers of the `touched` namespaces that they changed.
    fn notify<'a>(&self, touched: impl Iterator<Item = &'a Namespace>) {
        let notices = self.inner.namespace_notices.lock().expect("notices lock");
        touched.filter_map(|namespace| notices.get(namespace)).for_each(|sender| sender.send_replace(()));
    }

    /// Tells every subscriber that its namespace may have changed (a snapshot replaced the state).
    fn notify_all(&self) {
        let notices = self.inner.namespace_notices.lock().expect("notices lock");
        notices.values().for_each(|sender| sender.send_replace(()));
    }

    /// The apply version of the state now, read without waiting for the state lock (which apply
    /// and the swap of an installed state hold), as every peer message reads it.
    pub fn apply_version_now(&self) -> u32 {
        self.inner.apply_version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The apply versions this node applies: its build's, or narrower (see [`ApplyProbes`]).
    pub fn apply_versions(&self) -> api::version::ApplyRange {
        self.inner.probes.apply_versions.unwrap_or_else(build_apply_versions)
    }

    /// The consistency checkpoints this replica took lately, (log index, digest), oldest first.
    pub fn checkpoints(&self) -> Vec<(u64, u64)> {
        self.inner.checkpoints.taken()
    }

    /// The indexes of the consistency checkpoints whose digest this replica is still taking.
    pub fn digesting(&self) -> Vec<u64> {
        self.inner.checkpoints.digesting()
    }

    /// Applies one proposal and shows it, with its answer, to the observer; for a consistency
    /// checkpoint, also the digest rule of the state's apply version there. An entry that would
    /// take the state to an apply version this build cannot apply is not applied: the error stops
    /// Raft (see [`api::version`]).
    fn apply_normal(&self, index: u64, proposal: &Proposal) -> io::Result<(Answer, Option<DigestRule>)> {
        let mut state = self.inner.state.write().expect("state lock");
        if let Some(to) = state.version_after(proposal)
            && !self.apply_versions().contains(to)
        {
            return Err(cannot_apply(format!(
                "log entry {index} switches the apply version from {} to {to}, and this build applies versions {}",
                state.apply_version().version,
                self.apply_versions()
            )));
        }
        let answer = match &proposal.command {
            Command::Controller(api::command::Controller { term, action }) if self.inner.probes.unfenced_controller => {
                let term = (*term).max(state.controller_term());
                let laundered = Proposal {
                    command: Command::Controller(api::command::Controller { term, action: action.clone() }),
                    ..proposal.clone()
                };
                state.apply(index, &laundered)
            }
            _ => state.apply(index, proposal),
        };
        self.inner.apply_version.store(state.apply_version().version, std::sync::atomic::Ordering::Release);
        let checkpoint = matches!(
            &proposal.command,
            Command::Controller(api::command::Controller { action: ControllerAction::Checkpoint, .. })
                | Command::ConsistencyCheck(_)
        ) && answer.is_ok();
        let rule = checkpoint.then(|| DigestRule::at(state.apply_version().version));
        drop(state);
        if let Some(observer) = &self.inner.probes.observer {
            observer(index, proposal, &answer);
        }
        Ok((answer, rule))
    }

    /// Takes the consistency checkpoint at `applied`'s index by `rule`. Digesting the disk first
    /// persists the batch so far (so the disk holds the state at the checkpoint and nothing past
    /// it), then views the disk and digests the view beside apply.
    fn take_checkpoint(&self, rule: DigestRule, applied: &Applied, membership_changed: &mut bool) -> io::Result<()> {
        let index = applied.log_id.map_or(0, |log_id| log_id.index);
        match rule {
            DigestRule::InMemory => {
                // Under the read lock, so reads go on while the digest is taken; apply is this
                // store's only writer besides a snapshot install, which openraft never runs
                // beside it, so the state is still the state at `index`.
                let digest = stable_digest(&self.inner.state.read().expect("state lock"))?;
                self.inner.checkpoints.record(index, digest);
            }
            DigestRule::OfTheDisk => {
                self.persist(applied, *membership_changed)?;
                *membership_changed = false;
                self.inner.checkpoints.digest_the_disk(&self.inner.disk, index)?;
            }
        }
        Ok(())
    }

    /// What has been applied.
    pub fn applied(&self) -> Applied {
        self.inner.applied.lock().expect("applied lock").clone()
    }

    /// Writes the records the applied batch changed, `last_applied` and, when `membership_changed`,
    /// the membership, in one disk batch. Records are encoded in place under the read lock.
    fn persist(&self, applied: &Applied, membership_changed: bool) -> io::Result<()> {
        let keys = self.inner.state.write().expect("state lock").take_changed_keys();
        let mut ops = Vec::with_capacity(keys.len() + 2);
        {
            let state = self.inner.state.read().expect("state lock");
            for (key, record) in state.changed_records(&keys) {
                let key_bytes = codec::encode_plain(key)?;
                match record {
                    Some(record) => ops.push(Op::Put(Space::State, key_bytes, codec::encode(&record)?)),
                    None => ops.push(Op::Delete(Space::State, key_bytes)),
                }
            }
            ops.extend(state.closed_index_writes(&keys).map(|write| match write {
                IndexWrite::Put(key) => Op::Put(Space::ClosedIndex, key, Vec::new()),
                IndexWrite::Delete(key) => Op::Delete(Space::ClosedIndex, key),
                IndexWrite::DeleteRange(from, to) => Op::DeleteRange(Space::ClosedIndex, from, to),
            }));
        }
        ops.push(Op::Put(Space::Meta, META_APPLIED.to_vec(), codec::encode(&applied.log_id)?));
        if membership_changed {
            ops.push(Op::Put(Space::Meta, META_MEMBERSHIP.to_vec(), codec::encode(&applied.membership)?));
        }
        self.inner.disk.write(ops, Durability::Buffered)?;
        self.inner.state.write().expect("state lock").records_written(&keys);
        self.notify(keys.namespaces());
        Ok(())
    }

    fn current_snapshot_path(&self) -> PathBuf {
        self.inner.snapshot_dir.join(CURRENT_SNAPSHOT)
    }

    /// Builds a snapshot: a checkpoint of the disk (apply continues meanwhile), with the applied
    /// log id and membership read from the checkpoint itself, so they belong to its state.
    fn build(&self) -> io::Result<SnapshotOf<TypeConfig, SnapshotFile>> {
        let _building = self.inner.build_lock.lock().expect("build lock");
        let started = std::time::Instant::now();
        let dir = &self.inner.snapshot_dir;
        let building = dir.join(CHECKPOINT_BUILDING);
        remove_dir_if_present(&building)?;
        std::fs::create_dir(&building)?;
        let view = self.inner.disk.checkpoint(&building.join(CHECKPOINT_DISK))?;
        let applied = read_applied(|space, key| view.get(space, key))?;
        drop(view);
        let meta = SnapshotMeta { last_log_id: applied.log_id, last_membership: applied.membership };
        if let Some(current) = self.current_snapshot()?
            && current.meta.last_log_id >= meta.last_log_id
        {
            // A snapshot installed meanwhile, or one built at the same index, stands.
            std::fs::remove_dir_all(&building)?;
            return Ok(current);
        }
        write_synced(&building.join(CHECKPOINT_META), &codec::encode(&meta)?)?;
        sync_directory(&building)?;
        let published = dir.join(checkpoint_name(&meta));
        std::fs::rename(&building, &published)?;
        sync_directory(dir)?;
        self.drop_snapshots_before(&published)?;
        tracing::info!(
            index = meta.last_log_id.map_or(0, |log_id| log_id.index),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "built a snapshot: a checkpoint of the disk"
        );
        Ok(Snapshot { meta: meta.clone(), snapshot: self.checkpoint_data(&published, meta) })
    }

    fn checkpoint_data(&self, dir: &Path, meta: SnapshotMeta) -> SnapshotFile {
        checkpoint_data::<D>(dir, meta)
    }

    /// Deletes every snapshot but `kept`: the snapshot file and the other checkpoints.
    fn drop_snapshots_before(&self, kept: &Path) -> io::Result<()> {
        for (_, path) in checkpoints(&self.inner.snapshot_dir)? {
            if path != kept {
                std::fs::remove_dir_all(&path)?;
            }
        }
        let current = self.current_snapshot_path();
        if current != kept {
            remove_file_if_present(&current)?;
        }
        sync_directory(&self.inner.snapshot_dir)
    }

    /// The current snapshot: the newest of the snapshot file and the checkpoints.
    fn current_snapshot(&self) -> io::Result<Option<SnapshotOf<TypeConfig, SnapshotFile>>> {
        let checkpoint = newest_checkpoint::<D>(&self.inner.snapshot_dir)?;
        let path = self.current_snapshot_path();
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(checkpoint),
            Err(error) => return Err(error),
        };
        let meta = SnapshotReader::new(file.try_clone()?)?.meta;
        if checkpoint.as_ref().is_some_and(|checkpoint| checkpoint.meta.last_log_id >= meta.last_log_id) {
            return Ok(checkpoint);
        }
        // The clone shares the file position: rewind so the snapshot is read from its start.
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
        Ok(Some(Snapshot { meta, snapshot: SnapshotFile::from_open(path, file) }))
    }

    fn install(&self, meta: &SnapshotMeta, snapshot: SnapshotFile) -> io::Result<()> {
        let _building = self.inner.build_lock.lock().expect("build lock");
        // A checkpoint of this node's own (openraft restores one that is ahead of the applied
        // state after a crash lost unsynced writes) is written out first, as a received file.
        let snapshot = if snapshot.is_checkpoint() {
            let path = self.inner.snapshot_dir.join(RESTORING_CHECKPOINT);
            let mut file = snapshot.into_file()?;
            std::io::copy(&mut file, &mut std::fs::File::create(&path)?)?;
            SnapshotFile::open(&path)?
        } else {
            snapshot
        };
        // Judged before the snapshot takes the current one's place, so a refused snapshot
        // replaces nothing, not even the file.
        let version = snapshot_apply_version(SnapshotReader::new(std::fs::File::open(&snapshot.path)?)?)?;
        if !self.apply_versions().contains(version) {
            remove_file_if_present(&self.inner.snapshot_dir.join(RESTORING_CHECKPOINT))?;
            let index = meta.last_log_id.map_or(0, |log_id| log_id.index);
            return Err(cannot_apply(format!(
                "the snapshot through log entry {index} holds a state at apply version {version}, and this build applies versions {}",
                self.apply_versions()
            )));
        }
        let current = self.current_snapshot_path();
        if snapshot.path != current {
            // Never rewrite the current snapshot in place: a crash mid-copy would lose it.
            let installing = self.inner.snapshot_dir.join("installing.snapshot");
            std::fs::copy(&snapshot.path, &installing)?;
            std::fs::File::open(&installing)?.sync_all()?;
            std::fs::rename(&installing, &current)?;
            sync_directory(&self.inner.snapshot_dir)?;
            if snapshot.path.starts_with(&self.inner.snapshot_dir) {
                let _ = std::fs::remove_file(&snapshot.path);
            }
        }
        let reader = SnapshotReader::new(std::fs::File::open(&current)?)?;
        if reader.meta.last_log_id != meta.last_log_id {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "snapshot file does not match its metadata"));
        }
        // Apply and install run one at a time, so nothing else writes the disk meanwhile. The old
        // state answers reads until the new one replaces it: on a disk where other threads read
        // beside the install, its cold beads are read from a view of the disk pinned before the
        // overwrite (elsewhere nothing runs beside the install).
        let disk = &self.inner.disk;
        if D::BLOCKS {
            let old_cold = self.inner.state.read().expect("state lock").cold_store().cloned();
            if let Some(old_cold) = old_cold {
                old_cold.read_from(Arc::new(PinnedBeads(PinnedView::pin(disk.clone())?)));
            }
        }
        let installed =
            write_snapshot_records(disk.as_ref(), reader).and_then(|()| load_state(disk, self.inner.bead_cache_bytes));
        let mut state = self.inner.state.write().expect("state lock");
        let installed = installed.unwrap_or_else(|error| {
            // The disk holds part of the snapshot, so the old state no longer belongs to it: this
            // panics under the lock, poisoning it, and every later use of the state stops rather
            // than answer from a state this node's disk no longer holds.
            panic!(
                "installing the snapshot through log entry {} failed after it began to replace the state on disk \
                 ({error}): this node stops serving its state; restart it, and it finishes the install from \
                 the snapshot file at start or refuses to start naming the damage",
                meta.last_log_id.map_or(0, |log_id| log_id.index)
            )
        });
        let replaced = std::mem::replace(&mut *state, installed);
        self.inner.apply_version.store(state.apply_version().version, std::sync::atomic::Ordering::Release);
        drop(state);
        drop(replaced); // Freeing a large state takes a while: not under the lock.
        self.drop_snapshots_before(&current)?;
        *self.inner.applied.lock().expect("applied lock") =
            Applied { log_id: meta.last_log_id, membership: meta.last_membership.clone() };
        self.notify_all();
        Ok(())
    }
}

/// The words that begin the error of an entry or snapshot this build cannot apply: the node
/// stops on it (`node` looks for them).
pub const CANNOT_APPLY: &str = "cannot apply";

fn cannot_apply(detail: String) -> io::Error {
    io::Error::other(format!(
        "{CANNOT_APPLY}: {detail}; this node stops rather than apply it by other rules. Run a build whose apply versions include it (see `strand cluster version`)"
    ))
}

/// The apply version of the state a snapshot holds (its `ApplyVersion` record, or version 1).
fn snapshot_apply_version(mut reader: SnapshotReader) -> io::Result<u32> {
    let wanted = codec::encode_plain(&RecordKey::ApplyVersion)?;
    while let Some((key, value)) = reader.next_record()? {
        if key == wanted {
            let record: Record = codec::decode(&value, "the snapshot's apply version")?;
            if let Record::ApplyVersion(versions) = record {
                return Ok(versions.version);
            }
        }
    }
    Ok(ApplyVersionRecord::default().version)
}

/// Deletes the current snapshot when it fails verification, so that it is never sent to a
/// follower (which would refuse it, again and again); Raft builds a new one when it needs one.
fn drop_damaged_snapshot(current: &Path) -> io::Result<()> {
    if !current.exists() {
        return Ok(());
    }
    if let Err(error) = crate::snapshot::verify(current) {
        tracing::warn!(path = %current.display(), %error, "deleting a damaged snapshot; a new one is built when needed");
        std::fs::remove_file(current)?;
    }
    Ok(())
}

/// The directory name of the checkpoint of the snapshot `meta`: its index, zero-padded so that the
/// names sort as the indexes do.
fn checkpoint_name(meta: &SnapshotMeta) -> String {
    format!("{CHECKPOINT_PREFIX}{:020}", meta.last_log_id.map_or(0, |log_id| log_id.index))
}

fn checkpoint_data<D: Disk>(dir: &Path, meta: SnapshotMeta) -> SnapshotFile {
    SnapshotFile::checkpoint(dir, meta, D::open_checkpoint, D::BLOCKS)
}

/// The newest checkpoint published in the snapshot directory `dir`, on a disk of kind `D`.
/// A checkpoint that vanishes while it is read was replaced by a newer one (a build deletes the
/// older only after publishing the newer), so the listing is read again.
pub fn newest_checkpoint<D: Disk>(dir: &Path) -> io::Result<Option<SnapshotOf<TypeConfig, SnapshotFile>>> {
    let mut attempts = 0;
    loop {
        let Some((_, path)) = checkpoints(dir)?.pop() else { return Ok(None) };
        let bytes = match std::fs::read(path.join(CHECKPOINT_META)) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound && attempts < 8 => {
                attempts += 1;
                continue;
            }
            Err(error) => return Err(error),
        };
        let meta: SnapshotMeta = codec::decode(&bytes, "a checkpoint's snapshot metadata")?;
        return Ok(Some(Snapshot { meta: meta.clone(), snapshot: checkpoint_data::<D>(&path, meta) }));
    }
}

/// The published checkpoints in `dir`, oldest first: (index, directory).
fn checkpoints(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if let Some(index) = name.to_str().and_then(|name| name.strip_prefix(CHECKPOINT_PREFIX)?.parse().ok()) {
            found.push((index, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// At open: deletes a checkpoint whose build a crash cut short, the files checkpoints were being
/// written out to, and every published checkpoint that fails verification (its metadata, and
/// every state record read through, each record value's checksum included).
fn drop_unfinished_and_damaged_checkpoints<D: Disk>(dir: &Path) -> io::Result<()> {
    remove_dir_if_present(&dir.join(CHECKPOINT_BUILDING))?;
    remove_file_if_present(&dir.join(RESTORING_CHECKPOINT))?;
    // Where a build of storage format 11 wrote its snapshot file before renaming it into place.
    remove_file_if_present(&dir.join("building.snapshot"))?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_str().is_some_and(|name| name.starts_with(SENDING_PREFIX)) {
            remove_file_if_present(&entry.path())?;
        }
    }
    for (_, path) in checkpoints(dir)? {
        if let Err(error) = verify_checkpoint::<D>(&path) {
            tracing::warn!(path = %path.display(), %error, "deleting a damaged checkpoint; a new one is built when needed");
            std::fs::remove_dir_all(&path)?;
        }
    }
    Ok(())
}

fn verify_checkpoint<D: Disk>(path: &Path) -> io::Result<()> {
    let meta: SnapshotMeta = codec::decode(&std::fs::read(path.join(CHECKPOINT_META))?, "checkpoint metadata")?;
    let view = D::open_checkpoint(&path.join(CHECKPOINT_DISK))?;
    let applied = read_applied(|space, key| view.get(space, key))?;
    if applied.log_id != meta.last_log_id {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "the checkpoint's state does not match its metadata"));
    }
    let mut position = 0u64;
    view.scan(Space::State, &[], None, &mut |_, value| {
        position += 1;
        codec::unseal(value, &format!("checkpoint record {position}")).map(|_| true)
    })
}

fn remove_dir_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

fn remove_file_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// Writes `bytes` to a new file at `path` and syncs it.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Replaces the state space with a snapshot's records, under the `installing` marker.
fn write_snapshot_records<D: Disk + ?Sized>(disk: &D, mut reader: SnapshotReader) -> io::Result<()> {
    let marker = Op::Put(Space::Meta, META_INSTALLING.to_vec(), vec![1]);
    let clear = Op::DeleteRange(Space::State, Vec::new(), vec![0xff; 64]);
    // The closed beads' index goes with the state it was built from; the load after the install
    // builds it again from the new records.
    let unbuilt = Op::Delete(Space::Meta, META_CLOSED_INDEX.to_vec());
    let clear_index = Op::DeleteRange(Space::ClosedIndex, Vec::new(), vec![0xff; 64]);
    disk.write(vec![marker, clear, unbuilt, clear_index], Durability::Sync)?;
    let mut batch = Vec::with_capacity(INSTALL_BATCH_RECORDS);
    while let Some((key, value)) = reader.next_record()? {
        batch.push(Op::Put(Space::State, key, value));
        if batch.len() >= INSTALL_BATCH_RECORDS {
            disk.write(std::mem::take(&mut batch), Durability::Buffered)?;
        }
    }
    batch.push(Op::Put(Space::Meta, META_APPLIED.to_vec(), codec::encode(&reader.meta.last_log_id)?));
    batch.push(Op::Put(Space::Meta, META_MEMBERSHIP.to_vec(), codec::encode(&reader.meta.last_membership)?));
    batch.push(Op::Delete(Space::Meta, META_INSTALLING.to_vec()));
    disk.write(batch, Durability::Sync)
}

/// Runs a long blocking disk job: on tokio's blocking pool when the disk does real I/O
/// ([`Disk::BLOCKS`]), inline otherwise.
async fn off_worker<D: Disk, T: Send + 'static>(job: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    if !D::BLOCKS {
        return job();
    }
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|error| io::Error::other(format!("the snapshot task did not finish: {error}")))?
}

fn sync_directory(path: &Path) -> io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

impl<D: Disk> RaftSnapshotBuilder<TypeConfig> for StateMachineStore<D> {
    type SnapshotData = SnapshotFile;

    async fn build_snapshot(&mut self) -> Result<SnapshotOf<TypeConfig, SnapshotFile>, io::Error> {
        crate::faults::delay(crate::faults::FaultPoint::SnapshotBuildDelay).await;
        let store = self.clone();
        off_worker::<D, _>(move || store.build()).await
    }
}

impl<D: Disk> RaftStateMachine<TypeConfig> for StateMachineStore<D> {
    type SnapshotData = SnapshotFile;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let applied = self.applied();
        Ok((applied.log_id, applied.membership))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + OptionalSend,
    {
        crate::faults::delay(crate::faults::FaultPoint::ApplyDelay).await;
        let mut applied = self.applied();
        let mut responders = Vec::new();
        let mut membership_changed = false;
        let mut refused = None;
        while let Some((entry, responder)) = entries.try_next().await? {
            let mut checkpoint = None;
            let answer: Answer = match &entry.payload {
                EntryPayload::Blank => Ok(Outcome::Done),
                EntryPayload::Normal(proposal) => match self.apply_normal(entry.log_id.index, proposal) {
                    Ok((answer, rule)) => {
                        checkpoint = rule;
                        answer
                    }
                    Err(error) => {
                        // The entries before it are applied and persisted as usual; this one and
                        // the rest of the batch are not, and the error stops Raft.
                        refused = Some(error);
                        break;
                    }
                },
                EntryPayload::Membership(membership) => {
                    applied.membership = StoredMembership::new(Some(entry.log_id), membership.clone());
                    membership_changed = true;
                    Ok(Outcome::Done)
                }
            };
            applied.log_id = Some(entry.log_id);
            if let Some(rule) = checkpoint {
                self.take_checkpoint(rule, &applied, &mut membership_changed)?;
            }
            if let Some(responder) = responder {
                responders.push((responder, answer));
            }
        }
        self.persist(&applied, membership_changed)?;
        *self.inner.applied.lock().expect("applied lock") = applied;
        for (responder, answer) in responders {
            responder.send(answer);
        }
        refused.map_or(Ok(()), Err)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: SnapshotFile) -> Result<(), io::Error> {
        let (store, meta) = (self.clone(), meta.clone());
        off_worker::<D, _>(move || store.install(&meta, snapshot)).await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<SnapshotOf<TypeConfig, SnapshotFile>>, io::Error> {
        self.current_snapshot()
    }
}
