//! Storage tests: openraft's conformance suite on the RocksDB disk, restart from disk, and the
//! refusal to open a damaged log.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::sync::Arc;

use api::command::{Command, CreateBead, Proposal, Query};
use api::commands::close::Close;
use api::commands::get::Get;
use api::model::{Actor, BeadId, Namespace, Status, Timestamp};
use api::outcome::Outcome;
use openraft::storage::{RaftLogReader, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::{ErrorSubject, ErrorVerb, StorageError};
use raft_store::disk::{Disk, Durability, Op, Space};
use raft_store::types::{Entry, TypeConfig};
use raft_store::{ApplyProbes, FlushMode, LogStore, MemoryDisk, RocksDisk, StateMachineStore};

struct RocksBuilder;

type Stores = (tempfile::TempDir, LogStore<RocksDisk>, StateMachineStore<RocksDisk>);

fn open(dir: &std::path::Path) -> std::io::Result<(LogStore<RocksDisk>, StateMachineStore<RocksDisk>)> {
    let disk = Arc::new(RocksDisk::open(&dir.join("db"))?);
    let log_store = LogStore::open(disk.clone(), FlushMode::Grouped)?;
    let state_machine = StateMachineStore::open(disk, &dir.join("snapshots"))?;
    Ok((log_store, state_machine))
}

impl StoreBuilder<TypeConfig, LogStore<RocksDisk>, StateMachineStore<RocksDisk>, tempfile::TempDir> for RocksBuilder {
    async fn build(&self) -> Result<Stores, StorageError<TypeConfig>> {
        let dir = tempfile::tempdir()
            .map_err(|error| StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Write, error))?;
        let (log_store, state_machine) = open(dir.path())
            .map_err(|error| StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Read, error))?;
        Ok((dir, log_store, state_machine))
    }
}

struct MemoryBuilder;

type MemoryStores = (tempfile::TempDir, LogStore<MemoryDisk>, StateMachineStore<MemoryDisk>);

impl StoreBuilder<TypeConfig, LogStore<MemoryDisk>, StateMachineStore<MemoryDisk>, tempfile::TempDir>
    for MemoryBuilder
{
    async fn build(&self) -> Result<MemoryStores, StorageError<TypeConfig>> {
        let io_error = |error| StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Write, error);
        let dir = tempfile::tempdir().map_err(io_error)?;
        let disk = Arc::new(MemoryDisk::new());
        let log_store = LogStore::open(disk.clone(), FlushMode::Inline).map_err(io_error)?;
        let state_machine = StateMachineStore::open(disk, &dir.path().join("snapshots")).map_err(io_error)?;
        Ok((dir, log_store, state_machine))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_conformance_suite_on_the_memory_disk() {
    raft_store::Runtime::scope(7, async { Suite::test_all(MemoryBuilder).await.expect("conformance suite") }).await;
}

#[tokio::test]
async fn a_crash_loses_unsynced_apply_but_keeps_state_and_applied_index_together() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Arc::new(MemoryDisk::new());
    let mut log_store = LogStore::open(disk.clone(), FlushMode::Inline).unwrap();
    let mut state_machine = StateMachineStore::open(disk.clone(), dir.path()).unwrap();
    log_store.blocking_append(entries(4)).await.unwrap();
    let first: Vec<_> = entries(2).into_iter().map(|entry| Ok((entry, None))).collect();
    state_machine.apply(futures::stream::iter(first)).await.unwrap();
    disk.sync().unwrap();
    let rest: Vec<_> = entries(4).into_iter().skip(2).map(|entry| Ok((entry, None))).collect();
    state_machine.apply(futures::stream::iter(rest)).await.unwrap();
    assert_eq!(state_machine.read(|state| state.bead_count()), 4);
    disk.crash(0);
    let mut reopened = StateMachineStore::open(disk.clone(), dir.path()).unwrap();
    let (applied, _) = reopened.applied_state().await.unwrap();
    assert_eq!(applied.map(|log_id| log_id.index), Some(2), "the unsynced apply was lost whole");
    assert_eq!(reopened.read(|state| state.bead_count()), 2, "state and applied index belong together");
    let mut log = LogStore::open(disk, FlushMode::Inline).unwrap();
    assert_eq!(log.try_get_log_entries(1..=4).await.unwrap().len(), 4, "synced log entries survive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_conformance_suite() {
    raft_store::Runtime::scope(7, async { Suite::test_all(RocksBuilder).await.expect("conformance suite") }).await;
}

fn proposal(title: &str, index: i64) -> Proposal {
    Proposal {
        request_id: None,
        timestamp: Timestamp(index),
        default_prefix: "st".into(),
        actor: Actor::default(),
        event_retention: api::limits::EVENT_RETENTION_DEFAULT,
        credential: None,
        namespace: Namespace::default_namespace(),
        command: Command::Create(CreateBead { title: title.into(), ..Default::default() }),
    }
}

fn entries(count: u64) -> Vec<Entry> {
    (1..=count)
        .map(|index| Entry {
            log_id: openraft::LogId::new(1u64.into(), index),
            payload: openraft::EntryPayload::Normal(std::sync::Arc::new(proposal(
                &format!("bead {index}"),
                index as i64,
            ))),
        })
        .collect()
}

async fn append(log_store: &mut LogStore<RocksDisk>, entries: Vec<Entry>) {
    log_store.blocking_append(entries).await.expect("append, synced");
}

#[tokio::test]
async fn restart_from_disk_keeps_log_and_applied_state() {
    let dir = tempfile::tempdir().unwrap();
    let digest = {
        let (mut log_store, mut state_machine) = open(dir.path()).unwrap();
        append(&mut log_store, entries(5)).await;
        let applied: Vec<_> = entries(5).into_iter().map(|entry| Ok((entry, None))).collect();
        state_machine.apply(futures::stream::iter(applied)).await.unwrap();
        state_machine.read(|state| state.digest())
    };
    let (mut log_store, mut state_machine) = open(dir.path()).unwrap();
    assert_eq!(log_store.try_get_log_entries(1..=5).await.unwrap().len(), 5);
    let (applied, _) = state_machine.applied_state().await.unwrap();
    assert_eq!(applied.map(|log_id| log_id.index), Some(5));
    assert_eq!(state_machine.read(|state| state.digest()), digest);
    assert_eq!(state_machine.read(|state| state.bead_count()), 5);
}

/// Four entries that create st-1 to st-4, then one that closes st-1 to st-3 ("done").
fn four_beads_three_closed() -> (Vec<Entry>, Vec<BeadId>) {
    let closed: Vec<BeadId> = (1..=3).map(|n| BeadId(format!("st-{n}"))).collect();
    let close = Close { ids: closed.clone(), reason: Some("done".into()) };
    let mut log = entries(4);
    log.push(Entry {
        log_id: openraft::LogId::new(1u64.into(), 5),
        payload: openraft::EntryPayload::Normal(Arc::new(Proposal {
            command: Command::Close(close),
            ..proposal("", 5)
        })),
    });
    (log, closed)
}

fn read_beads<D: Disk>(state_machine: &StateMachineStore<D>, ids: &[BeadId]) -> Result<Outcome, api::outcome::Refusal> {
    let query = Query::from(Get { ids: ids.to_vec() });
    state_machine.read(|state| state.query(&Namespace::default_namespace(), &query))
}

/// `list --status closed`, newest first: a walk of the closed beads' index on disk.
fn list_closed<D: Disk>(state_machine: &StateMachineStore<D>) -> Result<Outcome, api::outcome::Refusal> {
    let filter = api::input::ListFilter { statuses: vec![Status::Closed], ..Default::default() };
    let query = Query::from(api::commands::list::List(filter));
    state_machine.read(|state| state.query(&Namespace::default_namespace(), &query))
}

/// The ids a listing answered.
fn ids_of(answer: &Result<Outcome, api::outcome::Refusal>) -> Vec<BeadId> {
    let Ok(Outcome::Beads(beads)) = answer else { panic!("{answer:?}") };
    beads.iter().map(|bead| bead.id.clone()).collect()
}

/// Closed beads leave memory once their records are written, read back from RocksDB as they
/// were (then from the cache), listed from their index entries on disk, and load on disk only at
/// a restart; a directory whose closed-bead index is unbuilt (format 11) has it built at open.
#[tokio::test]
async fn closed_beads_are_kept_on_disk_read_back_and_loaded_cold() {
    let dir = tempfile::tempdir().unwrap();
    let (log, closed) = four_beads_three_closed();
    let get = |state_machine: &StateMachineStore<RocksDisk>| read_beads(state_machine, &closed);
    let counts = |state_machine: &StateMachineStore<RocksDisk>| {
        state_machine.read(|state| (state.bead_count(), state.held_bead_count()))
    };
    let cache = |state_machine: &StateMachineStore<RocksDisk>| {
        state_machine.read(|state| state.cold_cache_stats()).map(|stats| (stats.hits, stats.misses, stats.entries))
    };
    let (answer, digest) = {
        let (mut log_store, mut state_machine) = open(dir.path()).unwrap();
        append(&mut log_store, log.clone()).await;
        state_machine.apply(futures::stream::iter(log.into_iter().map(|entry| Ok((entry, None))))).await.unwrap();
        assert_eq!(counts(&state_machine), (4, 1), "the three closed beads left memory");
        let answer = get(&state_machine);
        let Ok(Outcome::Beads(beads)) = &answer else { panic!("{answer:?}") };
        let read: Vec<_> = beads.iter().map(|bead| (bead.id.clone(), bead.status, bead.close_reason.clone())).collect();
        let expected: Vec<_> = closed.iter().map(|id| (id.clone(), Status::Closed, Some("done".to_string()))).collect();
        assert_eq!(read, expected);
        assert_eq!(cache(&state_machine), Some((0, 3, 3)), "read from the disk, then cached");
        assert_eq!(get(&state_machine), answer);
        assert_eq!(cache(&state_machine), Some((3, 3, 3)), "read again from the cache");
        (answer, state_machine.read(|state| state.digest()))
    };
    let newest_first: Vec<BeadId> = closed.iter().rev().cloned().collect();
    {
        let (_, state_machine) = open(dir.path()).unwrap();
        assert_eq!(counts(&state_machine), (4, 1), "a restart loads closed beads on disk only");
        assert_eq!(get(&state_machine), answer);
        assert_eq!(state_machine.read(|state| state.digest()), digest);
        assert_eq!(ids_of(&list_closed(&state_machine)), newest_first, "listed from their entries on disk");
    }
    // As a format-11 directory: no closed-bead index, and no marker that it was built.
    let rocks = RocksDisk::open(&dir.path().join("db")).unwrap();
    let entries = rocks.keys(Space::ClosedIndex, &[], &[0xff; 8], false, 100).unwrap();
    assert_eq!(entries.len(), 3 * 3, "each closed bead is listed among every bead, by its type and by its assignee");
    rocks
        .write(
            vec![
                Op::Delete(Space::Meta, raft_store::codec::META_CLOSED_INDEX.to_vec()),
                Op::DeleteRange(Space::ClosedIndex, Vec::new(), vec![0xff; 8]),
            ],
            Durability::Sync,
        )
        .unwrap();
    drop(rocks);
    let (_, state_machine) = open(dir.path()).unwrap();
    assert_eq!(ids_of(&list_closed(&state_machine)), newest_first, "the index is built again at open");
    drop(state_machine);
    let rocks = RocksDisk::open(&dir.path().join("db")).unwrap();
    assert_eq!(rocks.keys(Space::ClosedIndex, &[], &[0xff; 8], false, 100).unwrap(), entries);
    assert!(rocks.get(Space::Meta, raft_store::codec::META_CLOSED_INDEX).unwrap().is_some(), "marked built");
}

/// RocksDB, with the install's overwrite of the state space held open until the test lets it go.
struct PausedInstallDisk {
    rocks: RocksDisk,
    /// Told once the overwrite is written; then the write waits for the go.
    overwritten: std::sync::Mutex<Option<(std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>)>>,
}

impl Disk for PausedInstallDisk {
    const BLOCKS: bool = true;
    fn write(&self, ops: Vec<Op>, durability: Durability) -> std::io::Result<()> {
        let overwrite = ops.iter().any(|op| matches!(op, Op::DeleteRange(Space::State, ..)));
        self.rocks.write(ops, durability)?;
        if overwrite && let Some((overwritten, go)) = self.overwritten.lock().unwrap().take() {
            overwritten.send(()).unwrap();
            go.recv().unwrap();
        }
        Ok(())
    }
    fn sync(&self) -> std::io::Result<()> {
        self.rocks.sync()
    }
    fn get(&self, space: Space, key: &[u8]) -> std::io::Result<Option<Vec<u8>>> {
        self.rocks.get(space, key)
    }
    fn scan(
        &self,
        space: Space,
        from: &[u8],
        to: Option<&[u8]>,
        visit: raft_store::disk::Visit<'_>,
    ) -> std::io::Result<()> {
        self.rocks.scan(space, from, to, visit)
    }
    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> std::io::Result<Vec<Vec<u8>>> {
        self.rocks.keys(space, from, to, reverse, limit)
    }

    fn view(&self) -> std::io::Result<Box<dyn raft_store::disk::DiskView + '_>> {
        self.rocks.view()
    }
    fn checkpoint(&self, dir: &std::path::Path) -> std::io::Result<Box<dyn raft_store::disk::DiskView>> {
        self.rocks.checkpoint(dir)
    }
    fn open_checkpoint(dir: &std::path::Path) -> std::io::Result<Box<dyn raft_store::disk::DiskView>> {
        RocksDisk::open_checkpoint(dir)
    }
    fn read_mark(&self) -> std::io::Result<Option<u64>> {
        self.rocks.read_mark()
    }
    fn write_mark(&self, mark: Option<u64>) -> std::io::Result<()> {
        self.rocks.write_mark(mark)
    }
}

/// A state being replaced by a snapshot install answers reads until the new one is in, its
/// closed beads included, though the install has already removed their records from the disk:
/// they are read from a view of the disk pinned before the overwrite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_being_replaced_by_an_install_answers_reads_of_its_closed_beads() {
    use openraft::storage::RaftSnapshotBuilder;
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (log, closed) = four_beads_three_closed();
    let (overwritten, overwrite_seen) = std::sync::mpsc::channel();
    let (go, gone) = std::sync::mpsc::channel();
    let rocks = RocksDisk::open(&dirs.0.path().join("db")).unwrap();
    let disk = Arc::new(PausedInstallDisk { rocks, overwritten: std::sync::Mutex::new(Some((overwritten, gone))) });
    let snapshots = dirs.0.path().join("snapshots");
    // No cache, so every read of a closed bead goes to the disk (or the view pinned of it).
    let mut replaced = StateMachineStore::open_with(disk, &snapshots, ApplyProbes::default(), 0).unwrap();
    replaced.apply(futures::stream::iter(log.into_iter().map(|entry| Ok((entry, None))))).await.unwrap();
    let before = read_beads(&replaced, &closed);
    assert!(matches!(&before, Ok(Outcome::Beads(beads)) if beads.len() == 3), "{before:?}");
    let listed_before = list_closed(&replaced);
    assert_eq!(ids_of(&listed_before).len(), 3);
    let cache = |state_machine: &StateMachineStore<PausedInstallDisk>| {
        state_machine.read(|state| state.cold_cache_stats()).map(|stats| stats.misses)
    };
    let misses_before = cache(&replaced);

    let (_, mut leader) = open(dirs.1.path()).unwrap();
    leader.apply(futures::stream::iter(entries(6).into_iter().map(|entry| Ok((entry, None))))).await.unwrap();
    let snapshot = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let leader_digest = leader.read(|state| state.digest());

    let mut installer = replaced.clone();
    let install =
        tokio::spawn(async move { installer.install_snapshot(&snapshot.meta, snapshot.snapshot).await.unwrap() });
    let wait = std::time::Duration::from_secs(60);
    tokio::task::block_in_place(|| overwrite_seen.recv_timeout(wait)).expect("the install overwrites the state space");
    let reader = replaced.clone();
    let ids = closed.clone();
    let (answered, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let read = (read_beads(&reader, &ids), list_closed(&reader), reader.read(|state| state.bead_count()));
        answered.send(Box::new(read)).is_ok()
    });
    let during = tokio::task::block_in_place(|| answer.recv_timeout(wait))
        .expect("a read of the old state waited for the install to finish");
    assert_eq!(*during, (before, listed_before, 4), "the old state answers and lists as before the install");
    assert_eq!(cache(&replaced), misses_before.map(|misses| misses + 6), "read from the pinned view, not a cache");

    go.send(()).unwrap();
    install.await.unwrap();
    assert_eq!(replaced.read(|state| (state.digest(), state.bead_count())), (leader_digest, 6));
}

#[tokio::test]
async fn a_missing_log_entry_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log_store, _) = open(dir.path()).unwrap();
        append(&mut log_store, entries(5)).await;
    }
    {
        let disk = RocksDisk::open(&dir.path().join("db")).unwrap();
        disk.write(vec![Op::Delete(Space::Log, raft_store::codec::log_key(3))], Durability::Sync).unwrap();
    }
    let error = open(dir.path()).err().expect("open refuses a log with a hole");
    assert!(error.to_string().contains("log entry 3 is missing"), "{error}");
}

#[tokio::test]
async fn a_corrupt_log_entry_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log_store, _) = open(dir.path()).unwrap();
        append(&mut log_store, entries(3)).await;
    }
    {
        let disk = RocksDisk::open(&dir.path().join("db")).unwrap();
        let garbage = Op::Put(Space::Log, raft_store::codec::log_key(2), vec![0xff, 0xfe, 0x01]);
        disk.write(vec![garbage], Durability::Sync).unwrap();
    }
    let error = open(dir.path()).err().expect("open refuses a corrupt entry");
    assert!(error.to_string().contains("log entry 2 is corrupt"), "{error}");
}

#[tokio::test]
async fn membership_written_once_survives_later_batches_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let voters = vec![std::collections::BTreeSet::from([1u64])];
    let nodes = std::collections::BTreeMap::from([(1u64, raft_store::types::Member::new("127.0.0.1:1"))]);
    let membership = openraft::Membership::new(voters, nodes).unwrap();
    let expected = {
        let (_, mut state_machine) = open(dir.path()).unwrap();
        let change = Entry {
            log_id: openraft::LogId::new(1u64.into(), 1),
            payload: openraft::EntryPayload::Membership(membership),
        };
        state_machine.apply(futures::stream::iter(vec![Ok((change, None))])).await.unwrap();
        // Later batches carry no membership change, so they leave its record alone.
        let later: Vec<_> = entries(4).into_iter().skip(1).map(|entry| Ok((entry, None))).collect();
        state_machine.apply(futures::stream::iter(later)).await.unwrap();
        state_machine.applied_state().await.unwrap()
    };
    let (_, mut state_machine) = open(dir.path()).unwrap();
    let (applied, stored) = state_machine.applied_state().await.unwrap();
    assert_eq!(applied.map(|log_id| log_id.index), Some(4));
    assert_eq!(stored, expected.1, "the membership applied at index 1 is read back after a restart");
    assert_eq!(stored.log_id().map(|log_id| log_id.index), Some(1));
}

/// Changed records are encoded through `RecordRef` (borrowed) and snapshots and reloads through
/// `Record` (owned): the two must give the same bytes for every kind of record.
/// A state that holds every kind of record, and beads whose ids sort differently as strings than
/// as numbers (`st-10` before `st-2`).
fn every_kind_of_record() -> api::state::State {
    use api::command::RequestId;
    use api::state::State;
    let formula = "formula = \"release\"\n[[steps]]\nid = \"build\"\ntitle = \"Build\"\n";
    let mut state = State::new();
    let mut create = proposal("first", 10);
    create.request_id = Some(RequestId { client_id: 7, request_seq: 1, lowest_unacked: 1 });
    state.apply(1, &create).unwrap();
    // Before auth is enabled, so that they need no credential.
    for (number, title) in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"].iter().enumerate() {
        let create = proposal(title, 18 + number as i64);
        state.apply(2 + number as u64, &create).unwrap();
    }
    let mut formula_put = proposal("unused", 11);
    formula_put.command = Command::FormulaPut(api::command::FormulaPut { source: formula.into() });
    state.apply(13, &formula_put).unwrap();
    let mut loose_edge = proposal("unused", 12);
    loose_edge.command = Command::DepAdd(api::command::DepAdd {
        issue_id: "a".into(),
        depends_on_id: "b".into(),
        dep_type: api::model::DepType::blocks(),
    });
    state.apply(14, &loose_edge).unwrap();
    let mut order_put = proposal("unused", 13);
    order_put.command = Command::OrderPut(api::command::OrderPut {
        name: "nightly".into(),
        source: "[order]\nformula = \"release\"\ngate = \"cooldown\"\ninterval = \"1h\"\n".into(),
    });
    state.apply(15, &order_put).unwrap();
    let mut order_run = proposal("unused", 14);
    order_run.command = Command::OrderRun(api::command::OrderRun { name: "nightly".into() });
    state.apply(16, &order_run).unwrap();
    let mut pin = proposal("unused", 15);
    pin.command = Command::ApplyVersion(api::commands::apply_version::ApplyVersionChange::Pin);
    state.apply(17, &pin).unwrap();
    let mut enable = proposal("unused", 16);
    enable.command = Command::Auth(api::auth::AuthCommand::Enable(api::auth::TokenSpec {
        name: "root".into(),
        hash: api::auth::TokenHash::of("a fixed token, so that the digest is too"),
        role: api::auth::Role::Admin,
        namespaces: Default::default(),
        actor: None,
    }));
    state.apply(18, &enable).unwrap();
    state
}

#[test]
fn borrowed_records_encode_exactly_like_owned_ones() {
    use api::state::RecordKey;
    let state = every_kind_of_record();
    let mut kinds = std::collections::BTreeSet::new();
    for (key, record) in state.records() {
        let borrowed = state.record(&key).expect("every listed record can be borrowed");
        assert_eq!(
            raft_store::codec::encode(&borrowed).unwrap(),
            raft_store::codec::encode(&record).unwrap(),
            "{key:?}"
        );
        assert_eq!(borrowed.to_record(), record);
        kinds.insert(match key {
            RecordKey::Clock => "clock",
            RecordKey::ControllerTerm => "controller term",
            RecordKey::Namespace(_) => "namespace",
            RecordKey::Bead(..) => "bead",
            RecordKey::Session(_) => "session",
            RecordKey::Event(..) => "event",
            RecordKey::Formula(..) => "formula",
            RecordKey::LooseEdges(..) => "loose edges",
            RecordKey::Order(..) => "order",
            RecordKey::AuthEnabled => "auth enabled",
            RecordKey::Token(_) => "token",
            RecordKey::ApplyVersion => "apply version",
        });
    }
    assert_eq!(kinds.len(), 12, "every kind of record was compared: {kinds:?}");
}

/// The digests keep their values across builds: members of one cluster running different builds
/// compare them at every checkpoint, so a change of value is a false divergence alarm. The value
/// pinned here was computed by the build that copied every record to take it.
#[test]
fn the_digests_keep_their_values_and_list_beads_by_id() {
    let state = every_kind_of_record();
    assert_eq!(raft_store::consistency::stable_digest(&state).unwrap(), GOLDEN_STABLE_DIGEST);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut bead_ids = Vec::new();
    for (key, record) in state.records() {
        use std::hash::Hash as _;
        key.hash(&mut hasher);
        serde_json::to_vec(&record).unwrap().hash(&mut hasher);
        if let api::state::RecordKey::Bead(_, id) = key {
            bead_ids.push(id.0);
        }
    }
    assert_eq!(state.digest(), std::hash::Hasher::finish(&hasher), "the status digest reads the records as listed");
    let mut sorted = bead_ids.clone();
    sorted.sort();
    assert_eq!(bead_ids, sorted, "beads are listed by id, as strings compare");
    assert_eq!(bead_ids.len(), 15, "{bead_ids:?}");
}

const GOLDEN_STABLE_DIGEST: u64 = 10_648_910_670_303_397_828;

/// On a current-thread runtime an inline build would finish before any other task ran; on the
/// blocking pool, the async thread keeps running other tasks while the snapshot is written.
#[tokio::test(flavor = "current_thread")]
async fn a_snapshot_on_rocksdb_is_built_off_the_async_thread() {
    use openraft::storage::RaftSnapshotBuilder;
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let (_, mut state_machine) = open(dir.path()).unwrap();
    let applied: Vec<_> = entries(50).into_iter().map(|entry| Ok((entry, None))).collect();
    state_machine.apply(futures::stream::iter(applied)).await.unwrap();
    let polls = Arc::new(AtomicU64::new(0));
    let counter = polls.clone();
    let other_task = tokio::spawn(async move {
        loop {
            counter.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    });
    let mut builder = state_machine.get_snapshot_builder().await;
    let snapshot = builder.build_snapshot().await.unwrap();
    let polls_during_build = polls.load(Ordering::Relaxed);
    other_task.abort();
    assert_eq!(snapshot.meta.last_log_id.map(|log_id| log_id.index), Some(50));
    assert!(polls_during_build > 0, "another task ran while the snapshot was built");
}

fn empty_snapshot_meta() -> raft_store::types::SnapshotMeta {
    raft_store::types::SnapshotMeta { last_log_id: None, last_membership: Default::default() }
}

/// A session holding many large answers can be one record of tens of MiB: what the writer
/// accepts, the reader must read back, or a follower could never install the leader's snapshot.
#[test]
fn a_snapshot_record_larger_than_64_mib_reads_back() {
    use raft_store::snapshot::{SnapshotReader, SnapshotWriter};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.snapshot");
    let value = vec![7u8; 65 << 20];
    let mut writer = SnapshotWriter::create(&path, &empty_snapshot_meta()).unwrap();
    writer.record(b"session", &value).unwrap();
    writer.finish().unwrap();
    let mut reader = SnapshotReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let (key, read) = reader.next_record().unwrap().unwrap();
    assert_eq!((key.as_slice(), read.len()), (&b"session"[..], value.len()));
    assert!(read == value);
    assert!(reader.next_record().unwrap().is_none());
}

#[test]
fn a_snapshot_with_a_damaged_record_length_is_refused_as_cut_short() {
    use raft_store::snapshot::{SnapshotReader, SnapshotWriter};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.snapshot");
    let mut writer = SnapshotWriter::create(&path, &empty_snapshot_meta()).unwrap();
    writer.record(b"key", b"value").unwrap();
    writer.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // The first record's key length follows the magic line and the metadata frame.
    let header = b"STRAND-SNAPSHOT-2\n".len();
    let meta_length = u32::from_be_bytes(bytes[header..header + 4].try_into().unwrap()) as usize;
    let key_length_at = header + 4 + meta_length;
    assert_eq!(&bytes[key_length_at..key_length_at + 4], &3u32.to_be_bytes());
    bytes[key_length_at..key_length_at + 4].copy_from_slice(&0xfff0_0000u32.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let mut reader = SnapshotReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let error = reader.next_record().expect_err("a damaged length is refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("cut short"), "{error}");
}

#[tokio::test]
async fn a_namespace_subscriber_is_woken_by_its_own_namespace_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut state_machine) = open(dir.path()).unwrap();
    let city = Namespace("city".into());
    let mut changes = state_machine.namespace_changes(&city);
    let in_namespace = |index: u64, namespace: &Namespace| {
        let mut proposal = proposal(&format!("bead {index}"), index as i64);
        proposal.namespace = namespace.clone();
        let entry = Entry {
            log_id: openraft::LogId::new(1u64.into(), index),
            payload: openraft::EntryPayload::Normal(Arc::new(proposal)),
        };
        futures::stream::iter(vec![Ok((entry, None))])
    };
    state_machine.apply(in_namespace(1, &Namespace::default_namespace())).await.unwrap();
    assert!(!changes.has_changed().unwrap(), "a write to another namespace does not wake it");
    state_machine.apply(in_namespace(2, &city)).await.unwrap();
    assert!(changes.has_changed().unwrap(), "a write to its namespace wakes it");
    changes.borrow_and_update();
    state_machine.apply(in_namespace(3, &Namespace::default_namespace())).await.unwrap();
    assert!(!changes.has_changed().unwrap());
}

/// Entries whose proposals each carry a description of `bytes` bytes.
fn large_entries(count: u64, bytes: usize) -> Vec<Entry> {
    let mut entries = entries(count);
    for entry in &mut entries {
        if let openraft::EntryPayload::Normal(proposal) = &mut entry.payload {
            let mut large = (**proposal).clone();
            if let Command::Create(create) = &mut large.command {
                create.description = "d".repeat(bytes);
            }
            *proposal = std::sync::Arc::new(large);
        }
    }
    entries
}

#[tokio::test]
async fn replication_reads_are_capped_in_bytes_from_the_cache_and_from_the_disk() {
    use raft_store::log_store::APPEND_BATCH_BYTES_MAX;
    let dir = tempfile::tempdir().unwrap();
    let entry_bytes = 1024 * 1024;
    // Each encoded entry is a little over 1 MiB, so three fit in the cap and a fourth does not.
    let expected = APPEND_BATCH_BYTES_MAX / (entry_bytes + 1024);
    assert_eq!(expected, 3);
    {
        let (mut log_store, _) = open(dir.path()).unwrap();
        append(&mut log_store, large_entries(10, entry_bytes)).await;
        let limited = log_store.limited_get_log_entries(1, 11).await.unwrap();
        assert_eq!(limited.len(), expected, "from the cache");
        assert_eq!(log_store.try_get_log_entries(1..11).await.unwrap().len(), 10, "unlimited reads are whole");
    }
    let (mut log_store, _) = open(dir.path()).unwrap();
    let limited = log_store.limited_get_log_entries(1, 11).await.unwrap();
    assert_eq!(limited.len(), expected, "from the disk");
    assert_eq!(limited.first().map(|entry| entry.log_id.index), Some(1));
    // One entry over the cap still goes: a batch is never empty.
    let (mut log_store, _) = {
        let dir = tempfile::tempdir().unwrap();
        let stores = open(dir.path()).unwrap();
        std::mem::forget(dir);
        stores
    };
    append(&mut log_store, large_entries(2, APPEND_BATCH_BYTES_MAX + 1)).await;
    assert_eq!(log_store.limited_get_log_entries(1, 3).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_log_that_ends_before_its_mark_is_refused_at_open_and_a_truncation_lowers_the_mark() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log_store, _) = open(dir.path()).unwrap();
        append(&mut log_store, entries(300)).await;
        // A truncation of uncommitted entries lowers the mark first: the store reopens.
        openraft::storage::RaftLogStorage::truncate_after(&mut log_store, Some(openraft::LogId::new(1u64.into(), 280)))
            .await
            .unwrap();
    }
    let (log_store, _) = open(dir.path()).expect("a truncated log reopens");
    drop(log_store);
    {
        let disk = RocksDisk::open(&dir.path().join("db")).unwrap();
        assert_eq!(disk.read_mark().unwrap(), Some(280));
        // The synced tail disappears, as a lost or cut write-ahead log would leave it.
        let lost = Op::DeleteRange(Space::Log, raft_store::codec::log_key(200), raft_store::codec::log_key(u64::MAX));
        disk.write(vec![lost], Durability::Sync).unwrap();
    }
    let error = open(dir.path()).err().expect("open refuses a log that went back");
    assert!(error.to_string().contains("the Raft log went back: it ends at index 199"), "{error}");
    assert!(error.to_string().contains("through index 280"), "{error}");
}

#[tokio::test]
async fn a_state_record_that_fails_its_checksum_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_, mut state_machine) = open(dir.path()).unwrap();
        let applied: Vec<_> = entries(3).into_iter().map(|entry| Ok((entry, None))).collect();
        state_machine.apply(futures::stream::iter(applied)).await.unwrap();
    }
    {
        let disk = RocksDisk::open(&dir.path().join("db")).unwrap();
        let mut records = Vec::new();
        disk.scan(Space::State, &[], None, &mut |key, value| {
            records.push((key.to_vec(), value.to_vec()));
            Ok(true)
        })
        .unwrap();
        let (key, mut value) = records.pop().expect("state records");
        let middle = value.len() / 2;
        value[middle] ^= 0x10;
        disk.write(vec![Op::Put(Space::State, key, value)], Durability::Sync).unwrap();
    }
    let error = open(dir.path()).err().expect("open refuses a damaged record");
    assert!(error.to_string().contains("is corrupt: checksum mismatch"), "{error}");
}

#[tokio::test]
async fn a_snapshot_file_that_fails_its_checksum_is_refused_and_dropped_at_open() {
    use raft_store::snapshot::SnapshotWriter;
    let dir = tempfile::tempdir().unwrap();
    let snapshots = dir.path().join("snapshots");
    std::fs::create_dir_all(&snapshots).unwrap();
    let current = snapshots.join("current.snapshot");
    let mut writer = SnapshotWriter::create(&current, &empty_snapshot_meta()).unwrap();
    writer.record(b"key", &raft_store::codec::encode(&"a value".to_string()).unwrap()).unwrap();
    writer.finish().unwrap();
    raft_store::snapshot::verify(&current).expect("the whole file verifies");

    let mut bytes = std::fs::read(&current).unwrap();
    let at = bytes.windows(7).position(|window| window == b"a value").unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&current, &bytes).unwrap();
    let error = raft_store::snapshot::verify(&current).expect_err("a flipped byte is refused");
    assert!(error.to_string().contains("checksum"), "{error}");

    open(dir.path()).expect("a node opens without its damaged snapshot");
    assert!(!current.exists(), "the damaged snapshot was deleted at open");
}

#[tokio::test]
async fn a_damaged_vote_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log_store, _) = open(dir.path()).unwrap();
        let vote = openraft::impls::Vote::new(3, 1);
        openraft::storage::RaftLogStorage::save_vote(&mut log_store, &vote).await.unwrap();
    }
    {
        let disk = RocksDisk::open(&dir.path().join("db")).unwrap();
        let mut vote = disk.get(Space::Meta, raft_store::codec::META_VOTE).unwrap().expect("a saved vote");
        vote[0] ^= 0x01;
        disk.write(vec![Op::Put(Space::Meta, raft_store::codec::META_VOTE.to_vec(), vote)], Durability::Sync).unwrap();
    }
    let error = open(dir.path()).err().expect("open refuses a damaged vote");
    assert!(error.to_string().contains("vote is corrupt: checksum mismatch"), "{error}");
}

/// An entry that would switch the state to an apply version outside the node's range is not
/// applied: the batch fails with a message naming its index, which stops Raft. A snapshot of a
/// state at such a version is refused before anything is replaced. A checkpoint is digested.
#[tokio::test]
async fn an_entry_or_snapshot_beyond_the_apply_versions_stops_the_node_unapplied() {
    use api::command::{Controller, ControllerAction};
    use api::version::ApplyRange;
    use openraft::storage::RaftSnapshotBuilder;
    let at = |index: u64, command: Command| Entry {
        log_id: openraft::LogId::new(1u64.into(), index),
        payload: openraft::EntryPayload::Normal(Arc::new(Proposal { command, ..proposal("unused", index as i64) })),
    };
    let controller = |action| Command::Controller(Controller { term: 1, action });
    let narrow = raft_store::ApplyProbes { apply_versions: Some(ApplyRange { min: 1, max: 1 }), ..Default::default() };
    let dir = tempfile::tempdir().unwrap();
    let mut narrow_store = StateMachineStore::open_probed(Arc::new(MemoryDisk::new()), dir.path(), narrow).unwrap();
    let first = vec![at(1, controller(ControllerAction::Checkpoint)), at(2, proposal("a bead", 2).command)];
    narrow_store.apply(futures::stream::iter(first.into_iter().map(|entry| Ok((entry, None))))).await.unwrap();
    let checkpoints = narrow_store.checkpoints();
    assert_eq!(checkpoints.iter().map(|(index, _)| *index).collect::<Vec<_>>(), [1]);
    let switch = at(3, controller(ControllerAction::SwitchApplyVersion { from: 1, to: 2 }));
    let error = narrow_store.apply(futures::stream::iter([Ok((switch.clone(), None))])).await.unwrap_err();
    assert!(
        error.to_string().contains(
            "cannot apply: log entry 3 switches the apply version from 1 to 2, and this build applies versions 1-1"
        ),
        "{error}"
    );
    assert_eq!(narrow_store.read(|state| state.apply_version().version), 1, "never applied by other rules");

    // A node of a wider range applies the switch; its snapshot is refused by the narrow node.
    let wide = raft_store::ApplyProbes { apply_versions: Some(ApplyRange { min: 1, max: 2 }), ..Default::default() };
    let wide_dir = tempfile::tempdir().unwrap();
    let mut wide_store = StateMachineStore::open_probed(Arc::new(MemoryDisk::new()), wide_dir.path(), wide).unwrap();
    let all = vec![at(1, controller(ControllerAction::Checkpoint)), at(2, proposal("a bead", 2).command), switch];
    wide_store.apply(futures::stream::iter(all.into_iter().map(|entry| Ok((entry, None))))).await.unwrap();
    assert_eq!(wide_store.read(|state| state.apply_version().version), 2);
    assert_eq!(wide_store.checkpoints(), checkpoints, "the same state at the same index has the same digest");
    let snapshot = wide_store.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let error = narrow_store.install_snapshot(&snapshot.meta, snapshot.snapshot).await.unwrap_err();
    assert!(
        error.to_string().contains("cannot apply: the snapshot through log entry 3 holds a state at apply version 2"),
        "{error}"
    );
    assert_eq!(narrow_store.read(|state| state.bead_count()), 1, "nothing was replaced");
}

/// From apply version 2 on, a consistency checkpoint digests the state space as the disk holds it
/// at the checkpoint's index: on RocksDB on a thread beside apply, on the memory disk inline. The
/// entries applied after it in the same batch are not in it, the two disks agree, and a replica
/// that stopped at the checkpoint holds exactly the digested records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_of_version_2_digests_the_disk_at_its_index_beside_apply() {
    use api::command::{Controller, ControllerAction};
    use raft_store::consistency::{disk_digest, stable_digest};
    let at = |index: u64, command: Command| Entry {
        log_id: openraft::LogId::new(1u64.into(), index),
        payload: openraft::EntryPayload::Normal(Arc::new(Proposal { command, ..proposal("unused", index as i64) })),
    };
    let controller = |action| Command::Controller(Controller { term: 1, action });
    let version = api::version::DISK_DIGEST_VERSION;
    let mut all = vec![at(1, controller(ControllerAction::SwitchApplyVersion { from: 1, to: version }))];
    all.extend((2..=10).map(|index| at(index, proposal(&format!("before {index}"), index as i64).command)));
    all.push(at(11, controller(ControllerAction::Checkpoint)));
    all.extend((12..=20).map(|index| at(index, proposal(&format!("after {index}"), index as i64).command)));

    let (rocks_dir, stopped_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_, mut rocks) = open(rocks_dir.path()).unwrap();
    apply_entries(&mut rocks, all.clone()).await;
    let memory_dir = tempfile::tempdir().unwrap();
    let mut memory = StateMachineStore::open(Arc::new(MemoryDisk::new()), memory_dir.path()).unwrap();
    apply_entries(&mut memory, all.clone()).await;
    assert_eq!(memory.digesting(), Vec::<u64>::new(), "the memory disk digests inline");
    let on_memory = memory.checkpoints();
    assert_eq!(on_memory.iter().map(|(index, _)| *index).collect::<Vec<_>>(), [11]);

    let disk = Arc::new(RocksDisk::open(&stopped_dir.path().join("db")).unwrap());
    let mut stopped = StateMachineStore::open(disk.clone(), &stopped_dir.path().join("snapshots")).unwrap();
    apply_entries(&mut stopped, all[..11].to_vec()).await;
    let at_11 = disk_digest(disk.view().unwrap().as_ref()).unwrap();
    assert_eq!(on_memory, [(11, at_11)], "the memory disk's digest is the disk's at index 11");
    assert_ne!(at_11, stopped.read(|state| stable_digest(state).unwrap()), "version 2 digests another way");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for store in [&rocks, &stopped] {
        while store.checkpoints().is_empty() {
            assert!(std::time::Instant::now() < deadline, "no digest within 60 s");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(store.checkpoints(), [(11, at_11)], "RocksDB's digest, taken beside apply, is of index 11");
        assert_eq!(store.digesting(), Vec::<u64>::new());
    }
    assert_eq!(rocks.read(|state| state.bead_count()), 18, "the batch went on past the checkpoint");
}

fn snapshot_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

async fn apply_entries<D: Disk>(store: &mut StateMachineStore<D>, entries: impl IntoIterator<Item = Entry>) {
    let applied: Vec<_> = entries.into_iter().map(|entry| Ok((entry, None))).collect();
    store.apply(futures::stream::iter(applied)).await.unwrap();
}

/// A snapshot is a checkpoint of the disk: building one writes no snapshot file, and a newer one
/// replaces the older. Written out, it is the file a follower receives, and installing that gives
/// the follower the same state. A snapshot file (one received, or a format-11 directory's) stays
/// the current snapshot until a newer checkpoint replaces it.
#[tokio::test]
async fn a_snapshot_is_a_checkpoint_written_out_only_to_be_sent() {
    use openraft::storage::RaftSnapshotBuilder;
    use raft_store::consistency::stable_digest;
    let dir = tempfile::tempdir().unwrap();
    let (_, mut leader) = open(dir.path()).unwrap();
    let all = entries(60);
    apply_entries(&mut leader, all[..30].to_vec()).await;
    let built = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert!(built.snapshot.is_checkpoint());
    assert_eq!(snapshot_names(dir.path()), ["checkpoint-00000000000000000030"]);
    apply_entries(&mut leader, all[30..50].to_vec()).await;
    leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snapshot_names(dir.path()), ["checkpoint-00000000000000000050"], "the older checkpoint is gone");
    apply_entries(&mut leader, all[50..].to_vec()).await;

    let current = leader.get_current_snapshot().await.unwrap().expect("a current snapshot");
    assert_eq!(current.meta.last_log_id.map(|log_id| log_id.index), Some(50));
    let follower_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(follower_dir.path().join("snapshots")).unwrap();
    let received = follower_dir.path().join("snapshots/incoming-1.snapshot");
    std::io::copy(&mut current.snapshot.into_file().unwrap(), &mut std::fs::File::create(&received).unwrap()).unwrap();
    assert!(
        snapshot_names(dir.path()).iter().all(|name| !name.starts_with("sending-")),
        "the written-out file is unlinked"
    );
    assert_eq!(raft_store::snapshot::verify(&received).unwrap(), current.meta);
    let (_, mut follower) = open(follower_dir.path()).unwrap();
    follower.install_snapshot(&current.meta, raft_store::SnapshotFile::open(&received).unwrap()).await.unwrap();
    let digest_at_50 = |store: &StateMachineStore<RocksDisk>| store.read(|state| stable_digest(state).unwrap());
    let restarted_dir = tempfile::tempdir().unwrap();
    let (_, mut replay) = open(restarted_dir.path()).unwrap();
    apply_entries(&mut replay, all[..50].to_vec()).await;
    assert_eq!(digest_at_50(&follower), digest_at_50(&replay), "the follower holds the state at index 50");
    assert_eq!(snapshot_names(follower_dir.path()), ["current.snapshot"]);

    drop(follower);
    let (_, mut follower) = open(follower_dir.path()).unwrap();
    let current = follower.get_current_snapshot().await.unwrap().expect("the received snapshot");
    assert!(!current.snapshot.is_checkpoint(), "a snapshot file stays current after a restart");
    apply_entries(&mut follower, all[50..].to_vec()).await;
    follower.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snapshot_names(follower_dir.path()), ["checkpoint-00000000000000000060"], "replaced by a checkpoint");
    assert_eq!(digest_at_50(&follower), leader.read(|state| stable_digest(state).unwrap()));
}

/// A checkpoint that fails verification at open (a damaged table file, or metadata that no longer
/// matches) is deleted, as a damaged snapshot file is, and so is one whose build a crash cut short.
#[tokio::test]
async fn a_damaged_or_unfinished_checkpoint_is_dropped_at_open() {
    use openraft::storage::RaftSnapshotBuilder;
    let dir = tempfile::tempdir().unwrap();
    {
        let (_, mut store) = open(dir.path()).unwrap();
        apply_entries(&mut store, entries(20)).await;
        store.get_snapshot_builder().await.build_snapshot().await.unwrap();
    }
    let checkpoint = dir.path().join("snapshots/checkpoint-00000000000000000020");
    std::fs::create_dir_all(dir.path().join("snapshots/checkpoint.building/db")).unwrap();
    {
        let (_, mut store) = open(dir.path()).unwrap();
        assert_eq!(snapshot_names(dir.path()), ["checkpoint-00000000000000000020"], "the unfinished build is gone");
        let current = store.get_current_snapshot().await.unwrap().unwrap();
        assert!(current.snapshot.is_checkpoint());
    }
    let tables: Vec<_> = std::fs::read_dir(checkpoint.join("db"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "sst"))
        .collect();
    assert!(!tables.is_empty(), "the checkpoint holds table files");
    for table in &tables {
        // A hard link: damage a copy in its place, not the database's own file.
        let mut bytes = std::fs::read(table).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::remove_file(table).unwrap();
        std::fs::write(table, &bytes).unwrap();
    }
    let (_, mut store) = open(dir.path()).expect("a node opens without its damaged checkpoint");
    assert!(!checkpoint.exists(), "the damaged checkpoint was deleted at open");
    assert!(store.get_current_snapshot().await.unwrap().is_none());
}

/// A checkpoint taken while the disk holds writes in every space, some not yet synced, holds what
/// was written before it and nothing written after, as taken and as opened again.
#[test]
fn a_checkpoint_of_a_disk_with_unsynced_writes_opens_and_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let disk = RocksDisk::open(&dir.path().join("db")).unwrap();
    for batch in 0u32..50 {
        let ops = Space::ALL
            .iter()
            .map(|space| Op::Put(*space, batch.to_be_bytes().to_vec(), format!("value {batch}").into_bytes()))
            .collect();
        let durability = if batch % 10 == 0 { Durability::Sync } else { Durability::Buffered };
        disk.write(ops, durability).unwrap();
        if batch == 25 {
            disk.write(
                vec![Op::DeleteRange(Space::Log, Vec::new(), 10u32.to_be_bytes().to_vec())],
                Durability::Buffered,
            )
            .unwrap();
        }
    }
    drop(disk.checkpoint(&dir.path().join("first")).unwrap());
    disk.write(vec![Op::Put(Space::Log, b"after the first".to_vec(), Vec::new())], Durability::Buffered).unwrap();
    let taken = disk.checkpoint(&dir.path().join("checkpoint")).unwrap();
    disk.write(vec![Op::Put(Space::State, b"later".to_vec(), b"unseen".to_vec())], Durability::Sync).unwrap();
    let opened = RocksDisk::open_checkpoint(&dir.path().join("checkpoint")).unwrap();
    for view in [&taken, &opened] {
        assert_eq!(view.get(Space::State, &49u32.to_be_bytes()).unwrap(), Some(b"value 49".to_vec()));
        assert_eq!(view.get(Space::State, b"later").unwrap(), None, "a later write is not in the checkpoint");
        let mut count = 0;
        view.scan(Space::Log, &[], None, &mut |_, _| {
            count += 1;
            Ok(true)
        })
        .unwrap();
        assert_eq!(count, 41);
    }
}
