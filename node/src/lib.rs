//! Strand's `node` crate: one member of a Strand cluster. It wires openraft, the storage of
//! `raft-store` and the gRPC services of `api` together, in three planes over the shared
//! [`core::NodeCore`]: the [`leader`] plane (stamp, propose, forward to the leader, read index),
//! the [`peer`] plane (Raft traffic between nodes) and the [`client`] plane (the services
//! clients call). Imports go client → leader → peer → core; the peer plane hands forwarded
//! requests to the leader plane through the [`peer::LeaderPlane`] trait.
//!
//! [`run`] is the entry point `strand node` calls, and the simulation seam: it receives its two
//! listeners (streams of accepted connections), its outbound [`peer::network::Connector`], its
//! storage, its [`clock::Clock`], its RNG seed and its shutdown signal as parameters. It never
//! binds a port or reads argv or the environment, so the simulator runs this very code over a
//! simulated network. The client listener serves the client plane, health and `/metrics`; the
//! peer listener serves the peer plane's Raft service and health, and nothing else. Each
//! listener's connections pass through [`connections::limit`] before its gRPC server sees them,
//! so the node bounds its inbound connections whoever binds the ports.
//!
//! Invariant: the Raft service is never served on the client listener.
//!
//! Invariant: a data directory belongs to one node of one cluster; another is refused at start.
//! Invariant: a node accepts Raft messages only from members of its own cluster: the cluster id
//! (drawn when the cluster is made and learned from a member, see [`identity`], then kept in the
//! data directory) and the sender's member id travel with every message and are checked first.
//! Invariant: a log that fails verification (a missing or corrupt entry) stops the node before it
//! serves anything.

pub mod bootstrap;
pub mod client;
pub mod clock;
pub mod config;
pub mod connections;
pub mod console;
pub mod core;
pub mod force;
pub mod identity;
pub mod join;
pub mod leader;
pub mod metrics;
pub mod peer;
pub mod rejoin;
pub mod restore;
pub mod standing;
pub mod tls;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use api::proto::auth_server::AuthServer;
use api::proto::beads_server::BeadsServer;
use api::proto::checks_server::ChecksServer;
use api::proto::cluster_server::ClusterServer;
use api::proto::convoys_server::ConvoysServer;
use api::proto::events_server::EventsServer;
use api::proto::formulas_server::FormulasServer;
use api::proto::mail_server::MailServer;
use api::proto::molecules_server::MoleculesServer;
use api::proto::namespaces_server::NamespacesServer;
use api::proto::orders_server::OrdersServer;
use api::proto::raft_server::RaftServer;
use api::proto::versions_server::VersionsServer;
use api::proto::work_server::WorkServer;
use openraft::async_runtime::WatchReceiver;
use raft_store::codec::STORAGE_FORMAT;
use raft_store::{Disk, FlushMode, LogStore, Runtime, StateMachineStore};
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::transport::server::Connected;

use crate::client::{
    AuthService, BeadsService, ChecksService, ClusterService, ConvoysService, EventsService, FormulasService,
    MailService, MoleculesService, NamespacesService, OrdersService, VersionsService, WorkService,
};
use crate::clock::Clock;
use crate::config::{Listener, NodeConfig};
use crate::core::{NodeCore, StrandRaft};
pub use crate::identity::Identity;
use crate::identity::{ClusterId, UNBOUND};
use crate::leader::Leader;
use crate::peer::RaftPeerService;
use crate::peer::network::{Connector, Network, PEER_MESSAGE_BYTES_MAX, PeerIdentity, Peers};

/// Why a node could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The data directory belongs to another node or cluster.
    #[error(
        "data directory {dir} belongs to node {found_id} of cluster {found_cluster:?}, not node {id} of cluster {cluster:?}; start with the matching --id, or use a fresh --data-dir"
    )]
    ForeignDataDir {
        /// The directory.
        dir: String,
        /// This node's id.
        id: u64,
        /// This node's cluster.
        cluster: String,
        /// The id recorded in the directory.
        found_id: u64,
        /// The cluster recorded in the directory.
        found_cluster: String,
    },
    /// The data directory was written by a build with another storage format.
    #[error(
        "data directory {dir} was written in storage format {found}, and this build reads format {STORAGE_FORMAT} (and upgrades {} in place); {}",
        upgradable_formats(),
        if *found > STORAGE_FORMAT {
            "it was written by a newer build: run that build (or a newer one) on it"
        } else {
            "move the directory away and start with an empty --data-dir, so the node catches up from the cluster"
        }
    )]
    IncompatibleFormat {
        /// The directory.
        dir: String,
        /// The format recorded in it (1 when none is recorded).
        found: u32,
    },
    /// The stored log or state failed verification.
    #[error(
        "refusing to start: the data in {dir} is damaged ({detail}); this node must not serve from it. Either restore {dir} from a backup of this node, or, while the other nodes are up and form a majority, move {dir} away and start this node on an empty --data-dir with --rejoin, so that it catches up from the cluster before it votes"
    )]
    Corrupt {
        /// The directory.
        dir: String,
        /// What failed.
        detail: String,
    },
    /// This build cannot apply the cluster's state: at start, or at an entry or snapshot (see
    /// `api::version`).
    #[error("{0}")]
    ApplyVersion(String),
    /// Raft could not start or stopped with an error.
    #[error("raft failed: {0}")]
    Raft(String),
    /// The node was removed from its cluster (at start, or while it ran); its data directory
    /// never serves again.
    #[error("{0}")]
    Removed(String),
    /// The node could not join the cluster (`--join`).
    #[error("{0}")]
    Join(String),
    /// `--force-new-cluster` could not rewrite the membership.
    #[error("{0}")]
    Force(String),
    /// Serving gRPC failed.
    #[error("serving failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

/// The formats this build upgrades in place, in words: "format 10", or "formats 9 to 10".
fn upgradable_formats() -> String {
    let (oldest, newest) = (raft_store::upgrade::OLDEST_UPGRADABLE_FORMAT, STORAGE_FORMAT - 1);
    if oldest == newest { format!("format {oldest}") } else { format!("formats {oldest} to {newest}") }
}

/// Everything a node runs with. The caller owns every resource; [`run`] only uses them.
pub struct NodeParams<D: Disk, I> {
    /// The configuration.
    pub config: NodeConfig,
    /// Accepted connections of the client listener (a TCP listener's stream, or the
    /// simulator's): clients' services, health and metrics.
    pub client_incoming: I,
    /// Accepted connections of the peer listener: Raft traffic between members, and health.
    pub peer_incoming: I,
    /// Opens channels to peers.
    pub connector: Arc<dyn Connector>,
    /// The storage.
    pub disk: Arc<D>,
    /// How log appends are synced.
    pub flush_mode: FlushMode,
    /// The clock stamped into proposals.
    pub clock: Arc<dyn Clock>,
    /// Seeds openraft's random draws (election timeouts) and the node's own request numbering.
    pub seed: u64,
    /// Resolves when the node should stop.
    pub shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// What the simulator watches the node through, or plants in it; real nodes use the default.
    pub probes: Probes,
    /// TLS for both listeners (loaded from `config.tls` by the caller, which also gives it to
    /// the connector); `None`: plain TCP.
    pub tls: Option<Arc<tls::NodeTls>>,
}

/// The simulator's view into a node, and the bug it may plant on purpose to show that its
/// checkers catch it. A real node runs with `Probes::default()`: nothing watched, nothing planted.
#[derive(Clone, Default)]
pub struct Probes {
    /// Called with the node's Raft metrics at start and on every change; the Raft safety
    /// checkers watch terms, roles and applied ids through it.
    pub metrics: Option<MetricsObserver>,
    /// Called with every applied entry and its answer; the controller-term checker reads them.
    pub applies: Option<raft_store::ApplyObserver>,
    /// The planted bug, if any.
    pub planted: Option<PlantedBug>,
    /// Narrows the apply versions the node applies and reports below its build's (the simulator
    /// runs nodes of an older build this way); `None`: the build's own.
    pub apply_versions: Option<api::version::ApplyRange>,
}

/// A bug planted on purpose (simulator only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// The controller never notices that it was deposed: it keeps acting under the term it
    /// began in, also after another leader's controller acted. And the state machine's term
    /// fence is off, so such a late action is applied.
    StaleController,
    /// A write whose answer a fault point lost (`raft_store::faults::FaultPoint::ResponseDrop`)
    /// is answered as refused, though it took effect, instead of failing so that the client
    /// retries it: a client is told a write had no effect when it had.
    LostAnswerRefused,
}

/// A client-facing gRPC server with the request and response size limits.
macro_rules! limited {
    ($server:expr) => {
        $server
            .max_decoding_message_size(api::limits::REQUEST_BYTES_MAX)
            .max_encoding_message_size(api::limits::RESPONSE_BYTES_MAX)
    };
}

/// Receives a node's Raft metrics each time they change.
pub type MetricsObserver = Arc<dyn Fn(&openraft::RaftMetrics<raft_store::TypeConfig>) + Send + Sync>;

/// Opens the storage, starts Raft and serves until shutdown.
pub async fn run<D, I, IO, IE>(params: NodeParams<D, I>) -> Result<(), NodeError>
where
    D: Disk,
    I: futures::Stream<Item = Result<IO, IE>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    let NodeParams {
        config,
        client_incoming,
        peer_incoming,
        connector,
        disk,
        flush_mode,
        clock,
        seed,
        mut shutdown,
        probes,
        tls,
    } = params;
    if config.tls.is_some() != tls.is_some() {
        return Err(NodeError::Config(config::ConfigError::Invalid(
            "the [tls] settings and the loaded TLS certificates disagree; load them with node::tls::NodeTls::load"
                .into(),
        )));
    }
    config.validate()?;
    let dir = config.data_dir.display().to_string();
    let corrupt = |error: std::io::Error| NodeError::Corrupt { dir: dir.clone(), detail: error.to_string() };
    if let Some(record) = standing::removed(disk.as_ref()).map_err(corrupt)? {
        return Err(NodeError::Removed(format!("refusing to start: {}", record.message())));
    }
    let recorded = identity::recorded(disk.as_ref(), &config)?;
    let fresh = recorded.is_none();
    if config.force_new_cluster && fresh {
        return Err(NodeError::Force(format!(
            "refusing --force-new-cluster: {dir} holds no state; run it on the data directory of a member that survived"
        )));
    }
    // The rejoin marker goes first: a directory with an identity and no marker would vote at
    // its next start.
    let rejoin = rejoin::Rejoin::open(disk.clone(), config.rejoin && fresh).map_err(corrupt)?;
    let cluster_id = match recorded {
        Some(found) => {
            if config.rejoin {
                tracing::info!("--rejoin has no effect: the data directory already holds this node's data");
            } else if !config.join.is_empty() {
                tracing::info!("--join has no effect: the data directory already holds this node's data");
            }
            found.cluster_id
        }
        None if config.rejoin || !config.join.is_empty() => {
            // A joining node is added by a member; a rejoining one learns from a member which
            // cluster it belongs to and what its membership is now (see `crate::identity`).
            let purpose = if config.rejoin { join::Purpose::Rejoin } else { join::Purpose::Join };
            match join::join(connector.as_ref(), &config, purpose, &mut shutdown).await {
                Ok(Some(join::Answered::Joined(joined))) => {
                    standing::record_joined(disk.as_ref(), &joined).map_err(corrupt)?;
                    identity::record(disk.as_ref(), &config.cluster_name, config.id, joined.cluster_id)
                        .map_err(corrupt)?;
                    joined.cluster_id
                }
                Ok(Some(join::Answered::NotFormed)) => {
                    // Marker first: a crash between the two asks the members again.
                    rejoin.not_formed().map_err(corrupt)?;
                    identity::record(disk.as_ref(), &config.cluster_name, config.id, UNBOUND).map_err(corrupt)?;
                    UNBOUND
                }
                Ok(None) => return Ok(()),
                Err(message) => return Err(NodeError::Join(message)),
            }
        }
        None => {
            identity::record(disk.as_ref(), &config.cluster_name, config.id, UNBOUND).map_err(corrupt)?;
            UNBOUND
        }
    };
    let cluster_id = {
        let (disk, name, id) = (disk.clone(), config.cluster_name.clone(), config.id);
        let record = move |cluster_id| identity::record(disk.as_ref(), &name, id, cluster_id);
        Arc::new(ClusterId::new(cluster_id, identity::draw(seed), record))
    };
    let standing = standing::Standing::open(disk.clone(), config.members().into_keys()).map_err(corrupt)?;
    let stale_controller = probes.planted == Some(PlantedBug::StaleController);
    let apply_probes = raft_store::ApplyProbes {
        observer: probes.applies,
        unfenced_controller: stale_controller,
        apply_versions: probes.apply_versions,
    };
    let storage = Storage { disk, flush_mode, probes: apply_probes };
    let start = start_raft(config, cluster_id, connector, storage, clock, (rejoin, standing));
    let (mut core, peers) = Runtime::scope(seed, start).await?;
    core.planted = probes.planted;
    let core = Arc::new(core);
    // A removal notice in a member's answer (see `peer::network::Heeded`); weak, since the
    // channels that call it belong to the core's own Raft.
    let weak = Arc::downgrade(&core);
    peers.on_removal(Arc::new(move |index, by| {
        if let Some(core) = weak.upgrade()
            && let Err(error) = core.learn_removed(index, by)
        {
            tracing::error!(%error, "could not record this node's removal");
        }
    }));
    let client_id = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let leader = Arc::new(Leader::new(core.clone(), peers.clone(), client_id));
    let watcher = tokio::spawn(watch_metrics(core.clone(), probes.metrics));
    let controller = tokio::spawn(leader::controller::run(core.clone(), stale_controller));
    let member_watch = tokio::spawn(leader::members::run(core.clone(), peers.clone()));
    let bootstrap = tokio::spawn(bootstrap::run(core.clone(), peers.clone()));
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let services = [
        "strand.v1.Beads",
        "strand.v1.Namespaces",
        "strand.v1.Formulas",
        "strand.v1.Orders",
        "strand.v1.Molecules",
        "strand.v1.Work",
        "strand.v1.Mail",
        "strand.v1.Convoys",
        "strand.v1.Events",
        "strand.v1.Cluster",
        "strand.v1.Auth",
        "strand.v1.Versions",
        "strand.v1.Checks",
        "",
    ];
    for service in services {
        health_reporter.set_service_status(service, tonic_health::ServingStatus::Serving).await;
    }
    let handshake_timeout = std::time::Duration::from_millis(core.config.connections.handshake_timeout_ms);
    let client_incoming = tls::accept(
        connections::limit(client_incoming, &core.config.connections, core.metrics.connections(Listener::Client)),
        tls.clone().map(|tls| (tls, Listener::Client)),
        handshake_timeout,
    );
    let peer_incoming = tls::accept(
        connections::limit(
            peer_incoming,
            &connections::peer_limits(&core.config.connections),
            core.metrics.connections(Listener::Peer),
        ),
        tls.clone().map(|tls| (tls, Listener::Peer)),
        handshake_timeout,
    );
    let tls_watcher = tls.map(|tls| tokio::spawn(tls.watch()));
    tracing::info!(
        node = core.id,
        client = %core.config.advertised_client(),
        peer = %core.config.advertised_peer(),
        tls = core.config.tls.is_some(),
        connections_max = core.config.connections.connections_max,
        "serving"
    );
    // A leader hands its leadership over before the servers stop (see `leader/transfer.rs`).
    let drained = {
        let (core, peers) = (core.clone(), peers.clone());
        async move {
            shutdown.await;
            leader::transfer::drain(&core, &peers).await;
        }
    };
    tokio::spawn(core.clone().stop_streams_on(drained));
    // gRPC reflection (grpcurl) on the client listener: the public services and health, never
    // the internal Raft service. Open like health: it tells the schema, which is public.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(api::proto::client_descriptor_set())
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection().build_v1().expect("the built-in descriptor sets decode");
    let reflection_v1alpha = reflection().build_v1alpha().expect("the built-in descriptor sets decode");
    let client_server = tonic::transport::Server::builder()
        // HTTP/1.1 for the metrics page (Prometheus scrapes with it); gRPC stays on HTTP/2.
        .accept_http1(true)
        .add_routes(tonic::service::Routes::from(metrics_route(core.clone()).merge(console::route(Arc::new(
            console::Console::new(ClusterService::new(core.clone(), peers.clone(), leader.clone()), leader.clone()),
        )))))
        .add_service(health_service.clone())
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(limited!(BeadsServer::new(BeadsService::new(leader.clone()))))
        .add_service(limited!(NamespacesServer::new(NamespacesService::new(leader.clone()))))
        .add_service(limited!(FormulasServer::new(FormulasService::new(leader.clone()))))
        .add_service(limited!(OrdersServer::new(OrdersService::new(leader.clone()))))
        .add_service(limited!(MoleculesServer::new(MoleculesService::new(leader.clone()))))
        .add_service(limited!(WorkServer::new(WorkService::new(leader.clone()))))
        .add_service(limited!(MailServer::new(MailService::new(leader.clone()))))
        .add_service(limited!(ConvoysServer::new(ConvoysService::new(leader.clone()))))
        .add_service(limited!(EventsServer::new(EventsService::new(leader.clone()))))
        .add_service(limited!(AuthServer::new(AuthService::new(leader.clone()))))
        .add_service(limited!(VersionsServer::new(VersionsService::new(leader.clone()))))
        .add_service(limited!(ChecksServer::new(ChecksService::new(leader.clone()))))
        .add_service(ClusterServer::new(ClusterService::new(core.clone(), peers.clone(), leader.clone())))
        // Watch streams never end by themselves; they must end for the graceful shutdown to finish.
        .serve_with_incoming_shutdown(client_incoming, core.stopped());
    // The peer listener serves Raft (and health) only; the client listener never serves Raft.
    let peer_server = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(
            RaftServer::new(RaftPeerService::new(core.clone(), leader.clone()))
                .max_decoding_message_size(PEER_MESSAGE_BYTES_MAX)
                .max_encoding_message_size(PEER_MESSAGE_BYTES_MAX),
        )
        .serve_with_incoming_shutdown(peer_incoming, core.stopped());
    let (client_served, peer_served) = tokio::join!(client_server, peer_server);
    tracing::info!(node = core.id, "shutting down");
    watcher.abort();
    controller.abort();
    member_watch.abort();
    bootstrap.abort();
    if let Some(tls_watcher) = tls_watcher {
        tls_watcher.abort();
    }
    let stopped = core.raft.shutdown().await;
    client_served?;
    peer_served?;
    if let Some(why) = core.halted() {
        return Err(NodeError::ApplyVersion(why));
    }
    // A removed node stops as it learns so, and says why (see `crate::standing`).
    if let Some(message) = core.removed() {
        return Err(NodeError::Removed(format!("stopped: {message}")));
    }
    stopped.map_err(|error| NodeError::Raft(error.to_string()))
}

/// `GET /metrics`: the node's Prometheus metrics (see [`metrics`]). With `metrics_auth` and auth
/// enabled, only for a bearer token this node's replica knows (401 otherwise).
fn metrics_route<D: Disk>(core: Arc<NodeCore<D>>) -> axum::Router {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let page = move |headers: axum::http::HeaderMap| {
        let core = core.clone();
        async move {
            if core.config.metrics_auth {
                let credential = match headers.get(header::AUTHORIZATION) {
                    None => Ok(None),
                    Some(value) => api::auth::parse_bearer(value.as_bytes()).map(Some),
                };
                let judged = credential.and_then(|credential| {
                    core.state_machine.read(|state| state.authenticate(credential.as_ref()).map(|_| ()))
                });
                if let Err(refusal) = judged {
                    let challenge = [(header::WWW_AUTHENTICATE, "Bearer")];
                    return (StatusCode::UNAUTHORIZED, challenge, format!("{refusal}\n")).into_response();
                }
            }
            ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], core.metrics_page()).into_response()
        }
    };
    axum::Router::new().route("/metrics", axum::routing::get(page))
}

/// The node's storage and how its state machine is opened.
struct Storage<D: Disk> {
    disk: Arc<D>,
    flush_mode: FlushMode,
    probes: raft_store::ApplyProbes,
}

async fn start_raft<D: Disk>(
    config: NodeConfig,
    cluster_id: Arc<ClusterId>,
    connector: Arc<dyn Connector>,
    storage: Storage<D>,
    clock: Arc<dyn Clock>,
    (rejoin, standing): (rejoin::Rejoin<D>, standing::Standing<D>),
) -> Result<(NodeCore<D>, Arc<Peers>), NodeError> {
    let Storage { disk, flush_mode, probes } = storage;
    let dir = config.data_dir.display().to_string();
    let corrupt = |error: std::io::Error| NodeError::Corrupt { dir: dir.clone(), detail: error.to_string() };
    let mut log_store = LogStore::open(disk.clone(), flush_mode).map_err(corrupt)?;
    if config.force_new_cluster {
        force::force_new_cluster(&mut log_store, &config).await.map_err(NodeError::Force)?;
    }
    let snapshot_dir = config.data_dir.join("snapshots");
    remove_incoming_snapshots(&snapshot_dir);
    let state_machine =
        StateMachineStore::open_with(disk, &snapshot_dir, probes, config.storage.bead_cache_bytes).map_err(corrupt)?;
    let (versions, range) = (state_machine.read(|state| state.apply_version()), state_machine.apply_versions());
    if !range.contains(versions.version) {
        return Err(NodeError::ApplyVersion(format!(
            "refusing to start: the state in {dir} is at apply version {}, and this build ({}) applies versions {range}; run a build that applies version {}, or, to downgrade, lower the cluster's version first with `strand cluster version set {}` while this node runs its newer build",
            versions.version,
            api::version::build_name(),
            versions.version,
            range.max
        )));
    }
    let raft_config = Arc::new(config.raft.to_openraft(&config.cluster_name)?);
    let identity = PeerIdentity::new(cluster_id.clone(), config.id).applying(range);
    let append_timeout = std::time::Duration::from_millis(config.raft.rpc_timeout_ms);
    let metrics = metrics::Metrics::new();
    let peers = Arc::new(Peers::new(connector, identity, append_timeout, metrics.replication()));
    let network = Network::new(peers.clone());
    let raft: StrandRaft<D> = openraft::Raft::new(config.id, raft_config, network, log_store, state_machine.clone())
        .await
        .map_err(|fatal| NodeError::Raft(fatal.to_string()))?;
    let mut core = NodeCore::new(raft, state_machine, clock, config, cluster_id, metrics);
    core.rejoin = Some(rejoin);
    core.standing = Some(standing);
    Ok((core, peers))
}

/// Deletes snapshots that were still arriving when the node last stopped: an abandoned transfer
/// leaves nothing behind.
fn remove_incoming_snapshots(snapshot_dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(snapshot_dir) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(peer::INCOMING_SNAPSHOT_PREFIX) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(path = %entry.path().display(), "removed an incomplete incoming snapshot"),
                Err(error) => {
                    tracing::warn!(path = %entry.path().display(), %error, "could not remove an incomplete incoming snapshot")
                }
            }
        }
    }
}

/// Logs the moment Raft stops with a fatal error (a storage failure, a panic in the core), lets a
/// rejoining node vote again once it caught up, and hands every change of the metrics to the
/// observer, if there is one.
async fn watch_metrics<D: Disk>(core: Arc<NodeCore<D>>, observer: Option<MetricsObserver>) {
    let mut metrics = core.raft.metrics();
    loop {
        let fatal = {
            let current = metrics.borrow_watched();
            if let Some(observer) = &observer {
                observer(&current);
            }
            current.running_state.as_ref().err().map(ToString::to_string)
        };
        if let Some(fatal) = fatal {
            if fatal.contains(raft_store::state_machine::CANNOT_APPLY) {
                tracing::error!(%fatal, "stopping: this build cannot apply what the cluster sent");
                core.halt(format!("stopped: {fatal}"));
                return;
            }
            tracing::error!(%fatal, "raft core stopped; this node no longer serves writes or linearizable reads");
            return;
        }
        if let Some(standing) = &core.standing {
            // The applied membership, which is committed: the one in the metrics is the log's
            // last membership entry, which a later leader may truncate (see `crate::standing`).
            let applied = core.state_machine.applied().membership;
            let index = applied.log_id().map_or(0, |log_id| log_id.index);
            standing.note_applied_membership(index, applied.membership().nodes().map(|(id, _)| *id).collect());
        }
        if let Some(rejoin) = &core.rejoin
            && let Err(error) = rejoin.check_caught_up(core.last_log())
        {
            tracing::error!(%error, "could not clear the rejoin marker; this node still does not vote");
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}
