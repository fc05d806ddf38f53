//! The simulated cluster: N Strand nodes as turmoil hosts, each running `node::run` unchanged
//! with the simulator's listener, connector, disk, clock and seed.
//!
//! The disk is held here, outside the host, so it outlives a crash: with [`DiskKind::Memory`]
//! a crash keeps what was synced and a seeded prefix of what was not; with [`DiskKind::Rocks`]
//! the host reopens a real RocksDB directory on restart (a process crash: everything written
//! reached the OS). Snapshot files and checkpoints are real files in a per-node temporary
//! directory; the node writes them synced and renames them into place, so a crash keeps them
//! whole.
//!
//! Each node reports its Raft metrics to [`Observations`], every controller action it applies
//! to [`ControllerApplies`] and every versioned entry (a canary, a switch of the apply version) to
//! [`VersionedApplies`], through `node::run`'s probes; the Raft safety, controller-term and
//! upgrade checkers read them. Under the upgrade fault a node that is not yet upgraded starts with
//! the older build's apply range ([`ClusterSetup::older_build`]).
//!
//! A node whose `node::run` returns an error (it found its storage damaged, say) is recorded in
//! [`FailedStarts`] and its host stops; it stays down for the rest of the run.
//! Invariant: a node whose start failed is never started again (asserted at every start).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::model::Timestamp;
use node::clock::Clock;
use node::config::{NodeConfig, RaftSettings};
use node::{MetricsObserver, NodeParams, PlantedBug, Probes};
use openraft::ServerState;
use raft_store::disk::DiskView;
use raft_store::{Disk, Durability, FlushMode, MemoryDisk, Op, RocksDisk, Space};
use turmoil::Sim;

use crate::net;

/// The simulated wall clock starts here (2026-01-01T00:00:00Z), so timestamps look real.
pub const EPOCH_MS: i64 = 1_767_225_600_000;

/// Which storage the nodes run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DiskKind {
    /// `raft_store::MemoryDisk`: loses unsynced writes on a crash.
    Memory,
    /// RocksDB on temporary directories: a crash is a process crash.
    Rocks,
}

/// A deliberately planted bug, to show that the checkers catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mutation {
    /// Log appends and votes are acknowledged without being synced: a crash can lose
    /// acknowledged entries.
    NoFsync,
    /// Skips the log checksum: storage damage ([`crate::nemesis::Fault::Corrupt`]) is resealed,
    /// its checksums recomputed over the damaged bytes, as a store without checksums would hold
    /// it. The node's start-up verification no longer sees it; the checkers must.
    NoChecksum,
    /// The controller never notices that it was deposed and keeps acting under the term it
    /// began in, and the state machine's term fence is off ([`node::PlantedBug::StaleController`]).
    StaleController,
    /// A membership change that bypasses joint consensus: node 1, each time it restarts, makes
    /// itself the only voter of the membership (`--force-new-cluster`) while the other members
    /// are alive, so a configuration whose majority is node 1 alone commits beside the old one.
    ForcedMembership,
    /// A write whose answer the response-drop fault point lost is answered as refused, though it
    /// took effect ([`node::PlantedBug::LostAnswerRefused`]); runs under the `code` fault.
    LostAnswerRefused,
}

impl Mutation {
    /// How the nemesis damages storage under this mutation (or none).
    pub fn sealing(mutation: Option<Mutation>) -> crate::damage::Sealing {
        match mutation {
            Some(Mutation::NoChecksum) => crate::damage::Sealing::Resealed,
            Some(
                Mutation::NoFsync
                | Mutation::StaleController
                | Mutation::ForcedMembership
                | Mutation::LostAnswerRefused,
            )
            | None => crate::damage::Sealing::Visible,
        }
    }
}

/// The host name of node `id`.
pub fn host_name(id: u64) -> String {
    format!("n{id}")
}

/// The client address agents reach node `id` at.
pub fn address(id: u64) -> String {
    format!("{}:{}", host_name(id), net::NODE_PORT)
}

/// The peer address of node `id`.
pub fn peer_address(id: u64) -> String {
    format!("{}:{}", host_name(id), net::PEER_PORT)
}

/// One node's clock: simulated time plus an offset the nemesis can jump forward.
pub struct SimClock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock for SimClock {
    fn now(&self) -> Timestamp {
        let elapsed = turmoil::sim_elapsed().unwrap_or_default();
        let elapsed_ms = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
        Timestamp(EPOCH_MS + elapsed_ms + self.offset_ms.load(Ordering::Relaxed))
    }
}

/// One Raft metrics reading of one node, reduced to what the checkers use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Simulated time of the reading.
    pub at: Duration,
    /// The node.
    pub node: u64,
    /// Its current term.
    pub term: u64,
    /// Whether it is leader.
    pub leader: bool,
    /// Index of the last entry in its log.
    pub last_log_index: u64,
    /// Its last applied entry: (index, term, the leader that proposed it).
    pub applied: Option<(u64, u64, String)>,
    /// Why its Raft core stopped, when it did (a panic, a failed assertion, a storage error).
    pub fatal: Option<String>,
}

/// Every node's readings, in the order they happened.
pub type Observations = Arc<Mutex<Vec<Observation>>>;

/// A controller action as one node applied it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerApply {
    /// The node that applied it.
    pub node: u64,
    /// Its log index.
    pub index: u64,
    /// The term the controller proposed it under.
    pub term: u64,
    /// Which action ([`api::command::ControllerAction::name`]).
    pub action: &'static str,
    /// Whether it took effect (`false`: refused, changing nothing).
    pub applied: bool,
}

/// Every controller action every node applied, in the order the nodes applied them.
pub type ControllerApplies = Arc<Mutex<Vec<ControllerApply>>>;

/// A start of a node that failed: `node::run` returned an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedStart {
    /// Simulated time of the failure.
    pub at: Duration,
    /// The error, with the node's data directory written as `<data-dir>` (its path is random).
    pub error: String,
}

/// The nodes whose start failed; each stays down for the rest of the run.
pub type FailedStarts = Arc<Mutex<BTreeMap<u64, FailedStart>>>;

/// An entry whose outcome depends on the apply version, as one node applied it: a canary create
/// (its title starts with [`api::version::CANARY_NEXT_PREFIX`]; the next apply version refuses it) or a
/// switch of the apply version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedApply {
    /// The node that applied it.
    pub node: u64,
    /// Its log index.
    pub index: u64,
    /// What it was.
    pub what: Versioned,
    /// How the node answered it.
    pub answered: Answered,
}

/// How a node answered a versioned entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answered {
    /// It took effect.
    Applied,
    /// Refused by the next apply version's canary rule ([`api::state::canary_next_refusal`]).
    RefusedByNextRule,
    /// Refused for another reason (an expired session, a switch whose condition failed), with it.
    Refused(String),
}

impl Answered {
    fn of(answer: &api::outcome::Answer) -> Answered {
        match answer {
            Ok(_) => Answered::Applied,
            Err(refusal) if *refusal == api::state::canary_next_refusal() => Answered::RefusedByNextRule,
            Err(refusal) => Answered::Refused(refusal.to_string()),
        }
    }
}

/// An entry whose outcome depends on the apply version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Versioned {
    /// A canary create, with its title.
    Canary(String),
    /// The leader's switch of the apply version.
    Switch {
        /// The version it switches from.
        from: u32,
        /// The version it switches to.
        to: u32,
    },
}

/// Every versioned entry every node applied, in the order the nodes applied them.
pub type VersionedApplies = Arc<Mutex<Vec<VersionedApply>>>;

/// A disk as a simulated node uses it. Its calls run inline (`BLOCKS` is false even on RocksDB),
/// so a crashed host leaves no snapshot job running on a blocking thread with the database open,
/// and the schedule stays a function of the seed. Without `fsync` it runs `Sync` writes as
/// buffered ones and makes `sync` do nothing: the NoFsync mutation.
struct SimDisk<D> {
    inner: Arc<D>,
    fsync: bool,
}

impl<D: Disk> Disk for SimDisk<D> {
    fn write(&self, ops: Vec<Op>, durability: Durability) -> std::io::Result<()> {
        let durability = if self.fsync { durability } else { Durability::Buffered };
        self.inner.write(ops, durability)
    }

    fn sync(&self) -> std::io::Result<()> {
        if self.fsync { self.inner.sync() } else { Ok(()) }
    }

    fn get(&self, space: Space, key: &[u8]) -> std::io::Result<Option<Vec<u8>>> {
        self.inner.get(space, key)
    }

    fn scan(
        &self,
        space: Space,
        from: &[u8],
        to: Option<&[u8]>,
        visit: raft_store::disk::Visit<'_>,
    ) -> std::io::Result<()> {
        self.inner.scan(space, from, to, visit)
    }

    fn keys(&self, space: Space, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> std::io::Result<Vec<Vec<u8>>> {
        self.inner.keys(space, from, to, reverse, limit)
    }

    fn view(&self) -> std::io::Result<Box<dyn DiskView + '_>> {
        self.inner.view()
    }

    fn checkpoint(&self, dir: &std::path::Path) -> std::io::Result<Box<dyn DiskView>> {
        self.inner.checkpoint(dir)
    }

    fn open_checkpoint(dir: &std::path::Path) -> std::io::Result<Box<dyn DiskView>> {
        D::open_checkpoint(dir)
    }

    fn read_mark(&self) -> std::io::Result<Option<u64>> {
        self.inner.read_mark()
    }

    /// Under the NoFsync mutation the mark is never made durable either, as with every other
    /// sync of that storage.
    fn write_mark(&self, mark: Option<u64>) -> std::io::Result<()> {
        if self.fsync { self.inner.write_mark(mark) } else { Ok(()) }
    }
}

/// What every node of a run shares.
#[derive(Clone)]
pub struct ClusterSetup {
    /// Node ids of the first members, 1..=N.
    pub ids: Vec<u64>,
    /// Ids of spare nodes, after N: each starts only once the operator added it, and joins the
    /// cluster with `--join` (see `crate::operator`).
    pub spares: Vec<u64>,
    /// The storage.
    pub disk_kind: DiskKind,
    /// The planted bug, if any.
    pub mutation: Option<Mutation>,
    /// The run's seed.
    pub seed: u64,
    /// Under [`crate::nemesis::Fault::Upgrade`]: the apply versions of the older build, which
    /// every first member runs until the nemesis upgrades it (the newer build applies the
    /// build's own, one version more).
    pub older_build: Option<api::version::ApplyRange>,
}

/// One simulated node and what outlives its crashes.
pub struct SimNode {
    /// Its id.
    pub id: u64,
    /// Its in-memory disk (also allocated, unused, for RocksDB runs).
    pub disk: Arc<MemoryDisk>,
    /// Its clock offset, in milliseconds.
    pub clock_offset_ms: Arc<AtomicI64>,
    /// Holds the data directory (snapshots; RocksDB) until the run ends.
    pub dir: tempfile::TempDir,
    /// Whether its next start is with `rejoin` (set once its storage was wiped).
    pub rejoin: Arc<AtomicBool>,
    /// Whether its host may start the node: from the beginning for a first member, once the
    /// operator added it for a spare.
    pub start: Arc<AtomicBool>,
    /// Whether it runs the newer build (see [`ClusterSetup::older_build`]); read at each start.
    pub upgraded: Arc<AtomicBool>,
}

impl SimNode {
    /// Loses everything a stopped node stored: its disk (the memory disk, or the RocksDB
    /// directory) and its snapshot files; its next start rejoins, as the README's recovery says.
    pub fn wipe(&self) -> std::io::Result<()> {
        self.disk.wipe();
        for entry in std::fs::read_dir(self.dir.path())? {
            let path = entry?.path();
            if path.is_dir() { std::fs::remove_dir_all(&path)? } else { std::fs::remove_file(&path)? }
        }
        self.rejoin.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the node is still rejoining: its memory disk holds the rejoin marker.
    pub fn rejoining(&self) -> bool {
        self.disk.get(Space::Meta, node::rejoin::META_REJOINING).ok().flatten().is_some()
    }
}

/// How often the controller takes a consistency checkpoint in runs with upgrades.
pub const CHECKPOINT_INTERVAL_UNDER_UPGRADE: &str = "1s";

/// Raft settings for the simulator: the defaults' heartbeat, election timeouts a little longer
/// than theirs (kept, so that every seed keeps its trace), and snapshots frequent enough
/// that runs exercise snapshot transfer and purging.
pub fn raft_settings() -> RaftSettings {
    RaftSettings {
        heartbeat_interval_ms: 100,
        election_timeout_ms_min: 400,
        election_timeout_ms_max: 800,
        snapshot_logs_since_last: 400,
        max_in_snapshot_log_to_keep: 1_000,
        purge_batch_size: 256,
        install_snapshot_timeout_ms: 10_000,
        max_payload_entries: 256,
        rpc_timeout_ms: 1_000,
        replicate_before_local_sync: false,
        snapshot_receive_bytes_max: 1024 * 1024 * 1024,
        snapshot_receive_timeout_ms: 20_000,
        promote_after_ms: 2_000,
    }
}

fn node_config(setup: &ClusterSetup, id: u64, data_dir: PathBuf) -> NodeConfig {
    NodeConfig {
        id,
        listen_client: format!("0.0.0.0:{}", net::NODE_PORT),
        advertise_client: Some(address(id)),
        listen_peer: format!("0.0.0.0:{}", net::PEER_PORT),
        advertise_peer: Some(peer_address(id)),
        data_dir,
        peers: if setup.spares.contains(&id) {
            BTreeMap::new()
        } else {
            setup.ids.iter().filter(|peer| **peer != id).map(|peer| (*peer, peer_address(*peer))).collect()
        },
        join: if setup.spares.contains(&id) {
            setup.ids.iter().map(|peer| peer_address(*peer)).collect()
        } else {
            Vec::new()
        },
        cluster_name: "sim".into(),
        id_prefix: "st".into(),
        event_retention: api::limits::EVENT_RETENTION_DEFAULT,
        // The real limits: simulated clients and peers send their handshake at once and ping
        // while idle, so only a connection whose bytes a partition swallowed is ever closed.
        connections: node::config::ConnectionLimits::default(),
        // Under upgrades the replicas compare digests every second, so that a replica applying
        // by other rules raises the divergence alarm within the run.
        controller: node::config::ControllerSettings {
            consistency_check_interval: if setup.older_build.is_some() {
                CHECKPOINT_INTERVAL_UNDER_UPGRADE.into()
            } else {
                node::config::ControllerSettings::default().consistency_check_interval
            },
            ..node::config::ControllerSettings::default()
        },
        tls: None,
        metrics_auth: false,
        raft: raft_settings(),
        rejoin: false,
        ..NodeConfig::default()
    }
}

fn observer(node: u64, observations: Observations) -> MetricsObserver {
    Arc::new(move |metrics: &openraft::RaftMetrics<raft_store::TypeConfig>| {
        let observation = Observation {
            at: turmoil::sim_elapsed().unwrap_or_default(),
            node,
            term: metrics.current_term,
            leader: metrics.state == ServerState::Leader,
            last_log_index: metrics.last_log_index.unwrap_or(0),
            applied: metrics
                .last_applied
                .as_ref()
                .map(|log_id| (log_id.index, log_id.leader_id.term, log_id.leader_id.to_string())),
            fatal: metrics.running_state.as_ref().err().map(ToString::to_string),
        };
        let mut observations = observations.lock().expect("observations lock");
        let same = |seen: &Observation| {
            (seen.term, seen.leader, seen.last_log_index, &seen.applied, &seen.fatal)
                == (
                    observation.term,
                    observation.leader,
                    observation.last_log_index,
                    &observation.applied,
                    &observation.fatal,
                )
        };
        if !observations.iter().rev().find(|seen| seen.node == node).is_some_and(same) {
            observations.push(observation);
        }
    })
}

/// Records each controller action and each versioned entry ([`VersionedApply`]) node `node`
/// applies.
fn apply_probe(node: u64, controller: ControllerApplies, versioned: VersionedApplies) -> raft_store::ApplyObserver {
    use api::command::{Command, Controller, ControllerAction};
    Arc::new(move |index, proposal: &api::command::Proposal, answer: &api::outcome::Answer| {
        let what = match &proposal.command {
            Command::Controller(Controller { term, action }) => {
                let applied = answer.is_ok();
                let apply = ControllerApply { node, index, term: *term, action: action.name(), applied };
                controller.lock().expect("controller applies lock").push(apply);
                match action {
                    ControllerAction::SwitchApplyVersion { from, to } => Versioned::Switch { from: *from, to: *to },
                    _ => return,
                }
            }
            Command::Create(create) if create.title.starts_with(api::version::CANARY_NEXT_PREFIX) => {
                Versioned::Canary(create.title.clone())
            }
            _ => return,
        };
        let answered = Answered::of(answer);
        versioned.lock().expect("versioned applies lock").push(VersionedApply { node, index, what, answered });
    })
}

/// What the nodes report to the rest of the run.
#[derive(Clone, Default)]
pub struct Reports {
    /// Their Raft metrics readings.
    pub observations: Observations,
    /// The controller actions they applied.
    pub controller_applies: ControllerApplies,
    /// The versioned entries they applied.
    pub versioned_applies: VersionedApplies,
    /// The nodes whose start failed.
    pub failed_starts: FailedStarts,
}

/// How one start of a node runs: what the host closure decides anew at each start.
struct Start {
    seed: u64,
    mutation: Option<Mutation>,
    apply_versions: Option<api::version::ApplyRange>,
}

async fn serve<D: Disk>(
    config: NodeConfig,
    disk: Arc<D>,
    clock: SimClock,
    start: Start,
    reports: Reports,
) -> turmoil::Result {
    let node_id = config.id;
    let data_dir = config.data_dir.display().to_string();
    let Start { seed, mutation, apply_versions } = start;
    let Reports { observations, controller_applies, versioned_applies, failed_starts } = reports;
    let params = NodeParams {
        config,
        client_incoming: net::incoming(net::NODE_PORT).await?,
        peer_incoming: net::incoming(net::PEER_PORT).await?,
        connector: Arc::new(net::TurmoilConnector),
        disk,
        // No flusher thread: the simulator's hosts must run on their one simulated thread.
        flush_mode: FlushMode::Inline,
        clock: Arc::new(clock),
        seed,
        shutdown: Box::pin(futures::future::pending()),
        probes: Probes {
            metrics: Some(observer(node_id, observations)),
            applies: Some(apply_probe(node_id, controller_applies, versioned_applies)),
            planted: match mutation {
                Some(Mutation::StaleController) => Some(PlantedBug::StaleController),
                Some(Mutation::LostAnswerRefused) => Some(PlantedBug::LostAnswerRefused),
                _ => None,
            },
            apply_versions,
        },
        tls: None,
    };
    if let Err(error) = node::run(params).await {
        let error = error.to_string().replace(&data_dir, "<data-dir>");
        tracing::warn!(node = node_id, %error, "the node failed to start; it stays down");
        let failed = FailedStart { at: turmoil::sim_elapsed().unwrap_or_default(), error };
        failed_starts.lock().expect("failed starts lock").insert(node_id, failed);
    }
    Ok(())
}

/// Registers node `simulated` as a turmoil host. turmoil calls the closure again on every
/// restart (`bounce`), so a restarted node starts from whatever its disk kept. A failed start
/// lands in `failed_starts`.
pub fn register(sim: &mut Sim<'_>, setup: &ClusterSetup, simulated: &SimNode, reports: &Reports) {
    let id = simulated.id;
    let config = node_config(setup, id, simulated.dir.path().to_path_buf());
    let (disk, offset, kind, mutation) =
        (simulated.disk.clone(), simulated.clock_offset_ms.clone(), setup.disk_kind, setup.mutation);
    let (rejoin, start, upgraded) = (simulated.rejoin.clone(), simulated.start.clone(), simulated.upgraded.clone());
    let older_build = setup.older_build;
    let seed = setup.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let reports = reports.clone();
    let started = Arc::new(AtomicBool::new(false));
    sim.host(host_name(id), move || {
        let (mut config, disk, reports, start) = (config.clone(), disk.clone(), reports.clone(), start.clone());
        config.rejoin = rejoin.load(Ordering::Relaxed);
        // The planted membership bug: node 1 forces itself alone on every restart.
        let restarted = started.swap(true, Ordering::Relaxed);
        config.force_new_cluster = mutation == Some(Mutation::ForcedMembership) && id == 1 && restarted;
        let clock = SimClock { offset_ms: offset.clone() };
        let failed = reports.failed_starts.lock().expect("failed starts lock").contains_key(&id);
        assert!(!failed, "node {id} failed to start before and must stay down");
        let upgraded = upgraded.clone();
        async move {
            while !start.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Read once started: a spare's flag may be set while it waits.
            let apply_versions = older_build.filter(|_| !upgraded.load(Ordering::Relaxed));
            let start = Start { seed, mutation, apply_versions };
            let fsync = mutation != Some(Mutation::NoFsync);
            match kind {
                DiskKind::Memory => {
                    serve(config, Arc::new(SimDisk { inner: disk, fsync }), clock, start, reports).await
                }
                DiskKind::Rocks => {
                    let rocks = Arc::new(RocksDisk::open(&config.data_dir.join("db"))?);
                    serve(config, Arc::new(SimDisk { inner: rocks, fsync }), clock, start, reports).await
                }
            }
        }
    });
}

/// Makes the nodes of a run, with fresh disks and directories: `count` first members, then
/// `spares` spare nodes, which wait to be started and run the newer build (under
/// [`crate::nemesis::Fault::Upgrade`]).
pub fn make_nodes(count: u64, spares: u64) -> std::io::Result<Vec<SimNode>> {
    (1..=count + spares)
        .map(|id| {
            Ok(SimNode {
                id,
                disk: Arc::new(MemoryDisk::new()),
                clock_offset_ms: Arc::new(AtomicI64::new(0)),
                dir: tempfile::Builder::new().prefix(&format!("strand-sim-n{id}-")).tempdir()?,
                rejoin: Arc::new(AtomicBool::new(false)),
                start: Arc::new(AtomicBool::new(id <= count)),
                upgraded: Arc::new(AtomicBool::new(id > count)),
            })
        })
        .collect()
}
