//! Outbound traffic between nodes: openraft's network over gRPC, through a [`Connector`].
//!
//! The connector is the simulation seam for outbound connections: real nodes use
//! [`TcpConnector`] (with TLS when configured: the peer's certificate must name the member
//! dialled, `strand-node-<id>`), the simulator a connector over turmoil's network. Channels are
//! made once per member and peer address and reused by every RPC to that peer. Every RPC has a
//! timeout.
//! Payloads are postcard-encoded openraft messages (the `strand.v1.Raft` service).
//!
//! Every call carries the sender's [`PeerIdentity`] (cluster id and member id) as gRPC metadata,
//! which the receiving node checks before it reads the message (see `peer/service.rs`). Every
//! answer is heeded for a removal notice ([`Heeded`]): a member that saw this node leave the
//! membership says so in its refusal, and the node stops as the leader's own notice would have
//! made it.
//!
//! Replication runs as one bidirectional gRPC stream per openraft replication session
//! ([`AppendSession`]): the leader sends each AppendEntries request as openraft makes it, up to
//! [`APPEND_PIPELINE_MAX`] unanswered, and the follower answers each in order on the same stream.
//! Invariant: every sent request is answered by its deadline, or the session ends with an error;
//! dropping the session drops openraft's request stream at once (it holds openraft's replication
//! state, which the next session needs). A request's deadline scales with its bytes
//! ([`append_timeout`]) and counts from when the follower can start on it (its predecessors are
//! answered in order), so a follower catching up on large entries is not cut off mid-request.
//!
//! While this node leads, [`Peers`] keeps a note of each member's replication ([`Replication`]):
//! the highest index it answered as matching, and the conflict the last append session ended
//! at. A member that answers a conflict at or below an index it had matched has lost part of its
//! log (its data was wiped, or restored from an older copy): that is logged as a warning naming
//! the member and whether it was started with `--rejoin` (asked of the member itself), and
//! openraft, which `config.rs` lets accept a log going back, replicates to it from the start. An
//! append session that opens at the very conflict the last one ended at, again, waits first
//! ([`repeat_delay`]: from [`REPEAT_DELAY_MIN`], doubling to [`REPEAT_DELAY_MAX`]), so a member
//! that cannot catch up costs the leader at most about one session a second; openraft itself
//! backs off after a failed session. Sessions and failures are counted per member
//! ([`crate::metrics::ReplicationMetrics`]).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use api::proto::raft_client::RaftClient;
use api::proto::{RaftPayload, SnapshotChunk};
use futures::StreamExt;
use openraft::base::{BoxFuture, BoxStream};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::SnapshotOf;
use raft_store::SnapshotFile;
use raft_store::types::Member;
/// The types of the messages this network carries, for tools and tests that speak to a node's
/// Raft service directly.
pub use raft_store::types::{NodeId, SnapshotMeta, TypeConfig, Vote};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::identity::ClusterId;
use crate::metrics::{ReplicationError, ReplicationMetrics};

/// Bytes per streamed snapshot chunk.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1024 * 1024;
/// Room for a message's framing and metadata beside its payload (a proposal's stamp, a request's
/// vote and log ids), in bytes.
pub const PEER_MESSAGE_OVERHEAD_BYTES: usize = 64 * 1024;
/// Largest forwarded proposal (`Raft.Propose`): what a client may send, plus the stamp.
pub const PROPOSE_BYTES_MAX: usize = api::limits::REQUEST_BYTES_MAX + PEER_MESSAGE_OVERHEAD_BYTES;
/// Largest gRPC message between nodes, in bytes: an AppendEntries request of one batch (at most
/// [`raft_store::log_store::APPEND_BATCH_BYTES_MAX`], or one entry of one proposal).
/// Every other message (a vote, a snapshot chunk, a forwarded proposal) is smaller.
pub const PEER_MESSAGE_BYTES_MAX: usize =
    raft_store::log_store::APPEND_BATCH_BYTES_MAX + PROPOSE_BYTES_MAX + PEER_MESSAGE_OVERHEAD_BYTES;
const _: () = assert!(SNAPSHOT_CHUNK_BYTES + PEER_MESSAGE_OVERHEAD_BYTES <= PEER_MESSAGE_BYTES_MAX);
/// Most AppendEntries requests of one replication session sent and not yet answered.
pub const APPEND_PIPELINE_MAX: usize = 64;
/// The slowest transfer an append is allowed, in bytes per second: a request's deadline grows by
/// its size over this rate, on top of the RPC timeout.
pub const REPLICATION_BYTES_PER_SECOND_MIN: u64 = 2 * 1024 * 1024;
/// The metadata key of the sender's cluster id, on every `strand.v1.Raft` call. Builds from before
/// apply versions sent it as [`LEGACY_CLUSTER_ID_HEADER`], and refuse a message without that key,
/// so a build of each kind refuses every message of the other.
pub const CLUSTER_ID_HEADER: &str = "strand-cluster";
/// The metadata key of the sender's member id, on every `strand.v1.Raft` call.
pub const MEMBER_ID_HEADER: &str = "strand-member";
/// The metadata key of the apply versions the sender applies (`MIN-MAX`), on every call.
pub const APPLY_VERSIONS_HEADER: &str = "strand-apply-versions";
/// The metadata key of the sender's build ([`api::version::build_name`]), on every call.
pub const BUILD_HEADER: &str = "strand-build";
/// The cluster-id key of builds from before apply versions: a message carrying it comes from one.
pub const LEGACY_CLUSTER_ID_HEADER: &str = "strand-cluster-id";
/// The wait before an append session that repeats the conflict the last one ended at.
pub const REPEAT_DELAY_MIN: Duration = Duration::from_millis(50);
/// The longest wait before an append session that repeats a conflict.
pub const REPEAT_DELAY_MAX: Duration = Duration::from_secs(1);

/// The wait before an append session after `repeats` sessions in a row ended at the conflict it
/// opens at: none for the first, then [`REPEAT_DELAY_MIN`], doubling up to [`REPEAT_DELAY_MAX`].
pub fn repeat_delay(repeats: u32) -> Duration {
    match repeats {
        0 => Duration::ZERO,
        repeats => REPEAT_DELAY_MIN.saturating_mul(1 << (repeats - 1).min(16)).min(REPEAT_DELAY_MAX),
    }
}

/// What this node, leading, has seen of its replication to one member in one leader term.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replication {
    /// The leader term these notes belong to; another term starts them afresh.
    term: u64,
    /// The highest index the member answered as matching this leader's log.
    matched: Option<u64>,
    /// The index an append session (one that carried entries) last ended at a conflict at.
    conflict: Option<u64>,
    /// How many sessions in a row ended at that same conflict, after the first.
    repeats: u32,
}

/// A member's log went back: it answered a conflict at `conflict`, at or below `matched`, an
/// index it had answered as matching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reversion {
    /// The index of the conflict.
    pub conflict: u64,
    /// The highest index it had matched.
    pub matched: u64,
}

impl Replication {
    /// A session of the leader of `term` opens at `prev` (the index its first request follows),
    /// carrying entries or not (a heartbeat); answers how long to wait before sending it.
    pub fn open(&mut self, term: u64, carries_entries: bool, prev: Option<u64>) -> Duration {
        if term != self.term {
            *self = Replication { term, ..Replication::default() };
        }
        if carries_entries && prev.is_some() && prev == self.conflict {
            repeat_delay(self.repeats)
        } else {
            Duration::ZERO
        }
    }

    /// Notes one answer of a session that carried entries or not; answers a reversion when the
    /// member's log went back, and whether the answer shows no progress (the same conflict again).
    pub fn answer(
        &mut self,
        carries_entries: bool,
        answer: &StreamAppendResult<TypeConfig>,
    ) -> (Option<Reversion>, bool) {
        match answer {
            Ok(matching) => {
                if let Some(index) = matching.map(|log_id| log_id.index) {
                    self.matched = self.matched.max(Some(index));
                }
                if carries_entries {
                    (self.conflict, self.repeats) = (None, 0);
                }
                (None, false)
            }
            Err(openraft::raft::StreamAppendError::Conflict(log_id)) => {
                let reversion = match self.matched {
                    Some(matched) if log_id.index <= matched => {
                        self.matched = None;
                        Some(Reversion { conflict: log_id.index, matched })
                    }
                    _ => None,
                };
                let mut repeated = false;
                if carries_entries {
                    if self.conflict == Some(log_id.index) {
                        self.repeats = self.repeats.saturating_add(1);
                        repeated = true;
                    } else {
                        (self.conflict, self.repeats) = (Some(log_id.index), 0);
                    }
                }
                (reversion, repeated)
            }
            Err(openraft::raft::StreamAppendError::HigherVote(_)) => (None, false),
        }
    }
}

/// Who sends a node's Raft messages: its cluster's id as it is when a call is made (unbound until
/// the node learns it; see `crate::identity`) and its own member id.
#[derive(Clone, Debug)]
pub struct PeerIdentity {
    /// The cluster id.
    pub cluster_id: Arc<ClusterId>,
    /// The sending node's id.
    pub member_id: NodeId,
    /// The apply versions the sending node applies.
    pub apply_versions: api::version::ApplyRange,
}

impl PeerIdentity {
    /// The identity of member `member_id` of the cluster `cluster_id`, which applies its build's
    /// apply versions.
    pub fn new(cluster_id: Arc<ClusterId>, member_id: NodeId) -> PeerIdentity {
        PeerIdentity { cluster_id, member_id, apply_versions: api::version::build_apply_versions() }
    }

    /// The identity with the apply versions this node applies (when narrower than its build's).
    pub fn applying(self, apply_versions: api::version::ApplyRange) -> PeerIdentity {
        PeerIdentity { apply_versions, ..self }
    }

    /// An identity whose cluster id never changes (a tool's or a test's).
    pub fn fixed(cluster_id: u64, member_id: NodeId) -> PeerIdentity {
        PeerIdentity::new(Arc::new(ClusterId::fixed(cluster_id)), member_id)
    }
}

impl tonic::service::Interceptor for PeerIdentity {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let metadata = request.metadata_mut();
        metadata.insert(CLUSTER_ID_HEADER, self.cluster_id.get().into());
        metadata.insert(MEMBER_ID_HEADER, self.member_id.into());
        if let Ok(range) = self.apply_versions.to_string().parse() {
            metadata.insert(APPLY_VERSIONS_HEADER, range);
        }
        if let Ok(build) = api::version::build_name().parse() {
            metadata.insert(BUILD_HEADER, build);
        }
        Ok(request)
    }
}

/// A `strand.v1.Raft` client whose every call carries this node's [`PeerIdentity`], and whose
/// answers are heeded for a removal notice ([`Heeded`]).
pub type PeerRpc = RaftClient<InterceptedService<Heeded, PeerIdentity>>;

/// A `strand.v1.Raft` client over `channel` whose calls carry `identity`, and whose answers are
/// heeded by no one (a tool's or a test's client).
pub fn peer_rpc(channel: Channel, identity: PeerIdentity) -> PeerRpc {
    RaftClient::with_interceptor(Heeded { channel, member: 0, hook: Arc::new(OnceLock::new()) }, identity)
}

/// The metadata key with which a member refuses a message from a node it saw leave the
/// membership: the log index of the first applied membership that no longer held it.
pub const REMOVED_AT_HEADER: &str = "strand-removed-at";

/// What a node does on a removal notice: the membership at log index `.0` no longer holds this
/// node, says member `.1`.
pub type RemovalHook = Arc<dyn Fn(u64, NodeId) + Send + Sync>;

/// A channel to one member that hands a removal notice in any of its answers (a refusal carrying
/// [`REMOVED_AT_HEADER`]) to the node's [`RemovalHook`], once one is set. So a removed node that
/// was never told (the leader that removed it failed first) learns of it at the first message it
/// sends a member that applied the removal: a vote, an append, a forwarded write.
#[derive(Clone)]
pub struct Heeded {
    channel: Channel,
    /// The member the channel goes to.
    member: NodeId,
    hook: Arc<OnceLock<RemovalHook>>,
}

impl tonic::codegen::Service<tonic::codegen::http::Request<tonic::body::Body>> for Heeded {
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = tonic::transport::Error;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, context: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.channel.poll_ready(context)
    }

    fn call(&mut self, request: tonic::codegen::http::Request<tonic::body::Body>) -> Self::Future {
        let call = self.channel.call(request);
        let (member, hook) = (self.member, self.hook.clone());
        Box::pin(async move {
            let response = call.await?;
            // A refusal answered at once (gRPC's trailers-only answer) carries its metadata in
            // the headers.
            let notice = response.headers().get(REMOVED_AT_HEADER).and_then(|value| value.to_str().ok()?.parse().ok());
            // A build from before apply versions refuses a message without its cluster-id key.
            let refusal = response.headers().get("grpc-message").and_then(|value| value.to_str().ok());
            if refusal.is_some_and(|message| message.contains(LEGACY_CLUSTER_ID_HEADER)) {
                tracing::warn!(
                    node = member,
                    "node {member} runs a build from before apply versions, which refuses this build's messages (and this build refuses its): upgrade node {member} to a build that applies apply versions (see `strand cluster version`)"
                );
            }
            if let (Some(index), Some(hook)) = (notice, hook.get()) {
                hook(index, member);
            }
            Ok(response)
        })
    }
}

/// How long an append of `bytes` may take to be answered once the follower can start on it: the
/// RPC timeout, plus the bytes at [`REPLICATION_BYTES_PER_SECOND_MIN`].
pub fn append_timeout(base: Duration, bytes: usize) -> Duration {
    base + Duration::from_millis(bytes as u64 * 1000 / REPLICATION_BYTES_PER_SECOND_MIN)
}

/// Opens gRPC channels to other nodes.
pub trait Connector: Send + Sync + 'static {
    /// A lazily connecting channel to member `member` at `address` (`host:port`).
    fn channel(&self, member: NodeId, address: &str) -> Result<Channel, String>;

    /// A lazily connecting channel to a member at `address` whose id is not known yet (a joining
    /// node's first call): with TLS, the certificate must name the host of `address` instead.
    fn channel_to_address(&self, address: &str) -> Result<Channel, String> {
        self.channel(0, address)
    }
}

/// Connects over real TCP, and with TLS when given: the peer's certificate must then name the
/// member dialled (`strand-node-<id>`), and this node shows its own.
#[derive(Clone)]
pub struct TcpConnector {
    /// How long opening a connection (TLS handshake included) may take.
    pub connect_timeout: Duration,
    /// The node's TLS; `None`: plain TCP.
    pub tls: Option<Arc<crate::tls::NodeTls>>,
}

impl TcpConnector {
    /// A channel to `address`; with TLS, the certificate must name `name` (`None`: the host).
    fn channel_named(&self, name: Option<String>, address: &str) -> Result<Channel, String> {
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|error| format!("peer address {address:?} is not host:port: {error}"))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5));
        Ok(match &self.tls {
            None => endpoint.connect_lazy(),
            Some(tls) => {
                let tls = tls.clone();
                api::tls::channel(endpoint, move || tls.dial_config().into(), name, self.connect_timeout)
            }
        })
    }
}

impl Connector for TcpConnector {
    fn channel(&self, member: NodeId, address: &str) -> Result<Channel, String> {
        self.channel_named(Some(api::tls::node_name(member)), address)
    }

    fn channel_to_address(&self, address: &str) -> Result<Channel, String> {
        self.channel_named(None, address)
    }
}

/// Channels to peers, made once per member and address and reused. The address is always the
/// caller's: the membership's once the log holds one, the configured seed before.
pub struct Peers {
    connector: Arc<dyn Connector>,
    identity: PeerIdentity,
    /// The base timeout of a replication request (see [`append_timeout`]).
    append_timeout: Duration,
    channels: Mutex<HashMap<(NodeId, String), Channel>>,
    /// What this node, leading, has seen of its replication to each member.
    replication: Mutex<HashMap<NodeId, Replication>>,
    metrics: ReplicationMetrics,
    /// What a removal notice in a member's answer is handed to, once the node set it.
    removal: Arc<OnceLock<RemovalHook>>,
}

impl Peers {
    /// No channels yet; every call will carry `identity`, and an append may take `append_timeout`
    /// plus its transfer time.
    pub fn new(
        connector: Arc<dyn Connector>,
        identity: PeerIdentity,
        append_timeout: Duration,
        metrics: ReplicationMetrics,
    ) -> Peers {
        Peers {
            connector,
            identity,
            append_timeout,
            channels: Mutex::new(HashMap::new()),
            replication: Mutex::new(HashMap::new()),
            metrics,
            removal: Arc::new(OnceLock::new()),
        }
    }

    /// Sets what a removal notice in a member's answer is handed to (once; later calls do
    /// nothing).
    pub fn on_removal(&self, hook: RemovalHook) {
        let _ = self.removal.set(hook);
    }

    /// The replication metrics this node keeps of each member.
    pub fn metrics(&self) -> &ReplicationMetrics {
        &self.metrics
    }

    /// Opens a replication session to `member` (see [`Replication::open`]): answers how long to
    /// wait before sending it, and counts it when it carries entries.
    fn open_session(&self, member: NodeId, term: u64, carries_entries: bool, prev: Option<u64>) -> Duration {
        if carries_entries {
            self.metrics.observe_session(member, "append");
        }
        let mut replication = self.replication.lock().expect("replication lock");
        replication.entry(member).or_default().open(term, carries_entries, prev)
    }

    /// Notes an answer of a session to `member` (see [`Replication::answer`]); a failed session
    /// and one that repeated its conflict count as errors.
    fn note_answer(&self, member: NodeId, carries_entries: bool, answer: &AppendAnswer) -> Option<Reversion> {
        let answer = match answer {
            Ok(answer) => answer,
            Err(_) => {
                self.metrics.observe_error(member, ReplicationError::Failed);
                return None;
            }
        };
        let mut replication = self.replication.lock().expect("replication lock");
        let (reversion, repeated) = replication.entry(member).or_default().answer(carries_entries, answer);
        if repeated {
            self.metrics.observe_error(member, ReplicationError::NoProgress);
        }
        reversion
    }

    /// Closes the channels to `member` (removed from the membership) and forgets its replication.
    pub fn forget(&self, member: NodeId) {
        self.channels.lock().expect("peer channels lock").retain(|(id, _), _| *id != member);
        self.replication.lock().expect("replication lock").remove(&member);
    }

    /// The connector this node opens channels with.
    pub fn connector(&self) -> &Arc<dyn Connector> {
        &self.connector
    }

    /// The Raft-service client of member `member` at `address`.
    pub fn client(&self, member: NodeId, address: &str) -> Result<PeerRpc, String> {
        let mut channels = self.channels.lock().expect("peer channels lock");
        let key = (member, address.to_string());
        let channel = match channels.get(&key) {
            Some(channel) => channel.clone(),
            None => {
                let channel = self.connector.channel(member, address)?;
                channels.insert(key, channel.clone());
                channel
            }
        };
        let heeded = Heeded { channel, member, hook: self.removal.clone() };
        Ok(RaftClient::with_interceptor(heeded, self.identity.clone())
            .max_decoding_message_size(PEER_MESSAGE_BYTES_MAX)
            .max_encoding_message_size(PEER_MESSAGE_BYTES_MAX))
    }
}

/// Encodes a message for the `strand.v1.Raft` service.
pub fn encode<T: Serialize>(value: &T) -> RaftPayload {
    RaftPayload { data: postcard::to_stdvec(value).expect("openraft messages encode") }
}

/// Decodes a message of the `strand.v1.Raft` service.
pub fn decode<T: DeserializeOwned>(payload: &RaftPayload) -> Result<T, String> {
    postcard::from_bytes(&payload.data).map_err(|error| format!("malformed peer message: {error}"))
}

/// openraft's network factory.
#[derive(Clone)]
pub struct Network {
    peers: Arc<Peers>,
}

impl Network {
    /// A factory over these peer channels.
    pub fn new(peers: Arc<Peers>) -> Network {
        Network { peers }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Member) -> PeerClient {
        PeerClient {
            target,
            client: self.peers.client(target, &node.addr),
            address: node.addr.clone(),
            append_timeout: self.peers.append_timeout,
            peers: self.peers.clone(),
        }
    }
}

/// The connection to one peer.
pub struct PeerClient {
    target: NodeId,
    address: String,
    client: Result<PeerRpc, String>,
    append_timeout: Duration,
    peers: Arc<Peers>,
}

/// Logs that member `target`'s log went back, saying whether it was started with `--rejoin`, as
/// it answers itself (asked in the background, within `timeout`).
fn warn_reversion(client: Option<PeerRpc>, target: NodeId, reversion: Reversion, timeout: Duration) {
    tokio::spawn(async move {
        let rejoining = match client {
            Some(mut client) => {
                let asked = client.get_node_status(api::proto::StatusRequest { include_digest: false });
                match tokio::time::timeout(timeout, asked).await {
                    Ok(Ok(status)) => Some(status.into_inner().rejoining),
                    _ => None,
                }
            }
            None => None,
        };
        let Reversion { conflict, matched } = reversion;
        let went_back = format!(
            "node {target}'s log went back: it answered a conflict at index {conflict}, at or below index {matched} it had matched (its data was lost, or restored from an older copy); replicating to it from the start"
        );
        match rejoining {
            Some(true) => tracing::warn!(node = target, "{went_back} (--rejoin: yes; it votes again once caught up)"),
            Some(false) => tracing::warn!(
                node = target,
                "{went_back} (--rejoin: no). This is unsafe: a node that lost its data votes at once, and may help elect a leader that lacks writes it had helped commit. Stop it, empty its --data-dir, and start it with --rejoin"
            ),
            None => tracing::warn!(node = target, "{went_back} (--rejoin: unknown; it did not say)"),
        }
    });
}

type RemoteResult<T> = Result<T, String>;

/// One answer of a replication session, as openraft takes it.
type AppendAnswer = Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>;

fn unreachable(message: String) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::from_string(message))
}

/// Node `target` at `address` is unreachable: `detail` says how.
fn peer_unreachable(target: NodeId, address: &str, detail: impl std::fmt::Display) -> RPCError<TypeConfig> {
    unreachable(format!("node {target} at {address}: {detail}"))
}

/// Awaits one gRPC call to node `target` for at most `timeout`; `what` names what it failed to
/// do in time.
async fn within<T>(
    target: NodeId,
    address: &str,
    timeout: Duration,
    what: &str,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, RPCError<TypeConfig>> {
    match tokio::time::timeout(timeout, call).await {
        Err(_) => Err(peer_unreachable(target, address, format_args!("did not {what} within {timeout:?}"))),
        Ok(Err(status)) => Err(peer_unreachable(target, address, status.message())),
        Ok(Ok(response)) => Ok(response.into_inner()),
    }
}

/// One replication session to a peer over a bidirectional gRPC stream.
///
/// [`AppendSession::next_answer`] drives both directions: it takes openraft's next request and
/// sends it while fewer than [`APPEND_PIPELINE_MAX`] are unanswered, and yields the follower's
/// answers in order. Each request must be answered within `timeout` of being sent.
struct AppendSession<S> {
    /// openraft's requests; `None` once they ended.
    requests: Option<S>,
    /// The outgoing half of the gRPC stream; dropped (ending the stream) with `requests`. It
    /// holds at most [`APPEND_PIPELINE_MAX`] requests, since no more are ever unanswered.
    outgoing: Option<tokio::sync::mpsc::Sender<RaftPayload>>,
    answers: tonic::Streaming<RaftPayload>,
    /// When each unanswered request must be answered by, oldest first (never decreasing).
    unanswered: VecDeque<Instant>,
    /// The base timeout of one request, before its bytes are counted.
    timeout: Duration,
    target: NodeId,
    address: String,
}

/// The next item of `requests`, or never once they ended.
async fn next_request<S>(requests: &mut Option<S>) -> Option<AppendEntriesRequest<TypeConfig>>
where
    S: futures::Stream<Item = AppendEntriesRequest<TypeConfig>> + Unpin,
{
    match requests {
        Some(requests) => requests.next().await,
        None => std::future::pending().await,
    }
}

impl<S> AppendSession<S>
where
    S: futures::Stream<Item = AppendEntriesRequest<TypeConfig>> + Unpin,
{
    /// The next answer; `None` when the session ended cleanly (every request answered).
    async fn next_answer(&mut self) -> Option<AppendAnswer> {
        loop {
            let may_send = self.requests.is_some() && self.unanswered.len() < APPEND_PIPELINE_MAX;
            let deadline = self.unanswered.front().copied();
            tokio::select! {
                biased;
                answer = self.answers.message() => {
                    return match answer {
                        Ok(Some(payload)) => Some(self.take_answer(&payload)),
                        Ok(None) if self.unanswered.is_empty() => None,
                        Ok(None) => {
                            let unanswered = self.unanswered.len();
                            Some(Err(self.failure(format!("closed the replication stream with {unanswered} requests unanswered"))))
                        }
                        Err(status) => Some(Err(self.failure(status.message()))),
                    };
                }
                () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    return Some(Err(self.failure(format!("did not answer an append by its deadline (base {:?})", self.timeout))));
                }
                request = next_request(&mut self.requests), if may_send => match request {
                    Some(request) => {
                        let payload = encode(&request);
                        let deadline = next_deadline(self.unanswered.back().copied(), self.timeout, payload.data.len());
                        let sent = self.outgoing.as_ref().is_some_and(|outgoing| outgoing.try_send(payload).is_ok());
                        if !sent {
                            return Some(Err(self.failure("closed the replication stream")));
                        }
                        self.unanswered.push_back(deadline);
                    }
                    None => {
                        self.requests = None;
                        self.outgoing = None;
                    }
                },
            }
        }
    }

    /// The session's failure: `detail`, naming the peer.
    fn failure(&self, detail: impl std::fmt::Display) -> RPCError<TypeConfig> {
        peer_unreachable(self.target, &self.address, detail)
    }

    fn take_answer(&mut self, payload: &RaftPayload) -> AppendAnswer {
        let target = self.target;
        if self.unanswered.pop_front().is_none() {
            let message = format!("node {target} answered an append it was not sent");
            return Err(RPCError::Network(NetworkError::from_string(message)));
        }
        let result: RemoteResult<StreamAppendResult<TypeConfig>> =
            decode(payload).map_err(|error| RPCError::Network(NetworkError::from_string(error)))?;
        result.map_err(|error| unreachable(format!("node {target}: {error}")))
    }
}

/// The deadline of a request of `bytes` sent now behind one due at `previous`: the follower answers
/// in order, so it can start on this one only once the previous one is done.
fn next_deadline(previous: Option<Instant>, base: Duration, bytes: usize) -> Instant {
    let starts = previous.map_or_else(Instant::now, |previous| previous.max(Instant::now()));
    starts + append_timeout(base, bytes)
}

impl PeerClient {
    fn client(&self) -> Result<PeerRpc, RPCError<TypeConfig>> {
        self.client.clone().map_err(unreachable)
    }

    /// Calls one unary RPC with a timeout and decodes the remote result.
    async fn call<Req, Resp, F, Fut>(
        &self,
        request: &Req,
        timeout: Duration,
        rpc: F,
    ) -> Result<Resp, RPCError<TypeConfig>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        F: FnOnce(PeerRpc, RaftPayload) -> Fut,
        Fut: Future<Output = Result<tonic::Response<RaftPayload>, tonic::Status>>,
    {
        let client = self.client()?;
        let response = within(self.target, &self.address, timeout, "answer", rpc(client, encode(request))).await?;
        let result: RemoteResult<Resp> =
            decode(&response).map_err(|error| RPCError::Network(NetworkError::from_string(error)))?;
        let target = self.target;
        result.map_err(|error| unreachable(format!("node {target}: {error}")))
    }

    /// The chunks of a snapshot: its metadata, then its file (`file`, open at its start).
    fn snapshot_chunks(
        vote: Vote,
        meta: &SnapshotMeta,
        file: std::fs::File,
    ) -> Result<impl futures::Stream<Item = SnapshotChunk> + Send + 'static, std::io::Error> {
        let meta = postcard::to_stdvec(&(vote, meta.clone())).map_err(std::io::Error::other)?;
        let file = tokio::fs::File::from_std(file);
        let first = SnapshotChunk { meta, data: Vec::new() };
        let rest = futures::stream::unfold(Some(file), |file| async move {
            let mut file = file?;
            let mut buffer = vec![0u8; SNAPSHOT_CHUNK_BYTES];
            match file.read(&mut buffer).await {
                Ok(0) | Err(_) => None,
                Ok(read) => {
                    buffer.truncate(read);
                    Some((SnapshotChunk { meta: Vec::new(), data: buffer }, Some(file)))
                }
            }
        });
        Ok(futures::stream::once(async { first }).chain(rest))
    }
}

impl RaftNetworkV2<TypeConfig> for PeerClient {
    type SnapshotData = SnapshotFile;

    fn stream_append<'s, S>(
        &'s mut self,
        requests: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, AppendAnswer>, RPCError<TypeConfig>>>
    where
        S: futures::Stream<Item = AppendEntriesRequest<TypeConfig>> + Send + Unpin + 'static,
    {
        Box::pin(async move {
            let mut client = self.client()?;
            // openraft's TTL for an append is the heartbeat interval; a large request needs longer.
            let timeout = option.hard_ttl().max(self.append_timeout);
            let (target, address) = (self.target, self.address.clone());
            // The stream opens with openraft's first request in hand: openraft waits out its
            // backoff after a failure inside the request stream, so opening the stream (and
            // connecting) before it would retry an unreachable peer at once, again and again.
            let mut requests = requests;
            let Some(first) = requests.next().await else {
                return Ok(Box::pin(futures::stream::empty()) as BoxStream<'s, AppendAnswer>);
            };
            // A session that opens at the conflict the last one ended at, again, waits first.
            let carries = !first.entries.is_empty();
            let prev = first.prev_log_id.map(|log_id| log_id.index);
            let delay = self.peers.open_session(target, first.vote.leader_id().term, carries, prev);
            if !delay.is_zero() {
                tracing::debug!(node = target, ?delay, "replication repeats its last conflict; waiting first");
                tokio::time::sleep(delay).await;
            }
            let (outgoing, receiver) = tokio::sync::mpsc::channel(APPEND_PIPELINE_MAX);
            let first = encode(&first);
            let deadline = next_deadline(None, timeout, first.data.len());
            outgoing.try_send(first).expect("an empty channel whose receiver is held here");
            let call = client.stream_append(tokio_stream::wrappers::ReceiverStream::new(receiver));
            let opening = deadline.saturating_duration_since(Instant::now());
            let answers = match within(target, &address, opening, "open a replication stream", call).await {
                Ok(answers) => answers,
                Err(error) => {
                    self.peers.metrics().observe_error(target, ReplicationError::Failed);
                    return Err(error);
                }
            };
            let session = AppendSession {
                requests: Some(requests),
                outgoing: Some(outgoing),
                answers,
                unanswered: VecDeque::from([deadline]),
                timeout,
                target,
                address,
            };
            let (peers, status_client, status_timeout) =
                (self.peers.clone(), self.client.clone().ok(), self.append_timeout);
            let answers = futures::stream::unfold(Some(session), move |session| {
                let (peers, status_client) = (peers.clone(), status_client.clone());
                async move {
                    let mut session = session?;
                    let answer = session.next_answer().await?;
                    if let Some(reversion) = peers.note_answer(target, carries, &answer) {
                        warn_reversion(status_client, target, reversion, status_timeout);
                    }
                    // The follower ends its stream at the first refusal (conflict, higher vote) and
                    // openraft ends the session at it; so does this stream.
                    let session = matches!(answer, Ok(Ok(_))).then_some(session);
                    Some((answer, session))
                }
            });
            Ok(Box::pin(answers) as BoxStream<'s, AppendAnswer>)
        })
    }

    /// One AppendEntries RPC; openraft replicates through [`Self::stream_append`] instead.
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(&rpc, option.hard_ttl(), |mut client, payload| async move { client.append_entries(payload).await })
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(&rpc, option.hard_ttl(), |mut client, payload| async move { client.vote(payload).await }).await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(&rpc, option.hard_ttl(), |mut client, payload| async move { client.pre_vote(payload).await }).await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: SnapshotOf<TypeConfig, SnapshotFile>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        self.peers.metrics().observe_session(self.target, "snapshot");
        let result = self.send_snapshot(vote, snapshot, cancel, option).await;
        if matches!(&result, Err(error) if !matches!(error, StreamingError::Closed(_))) {
            self.peers.metrics().observe_error(self.target, ReplicationError::Failed);
        }
        result
    }

    async fn transfer_leader(
        &mut self,
        request: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(
            &request,
            option.hard_ttl(),
            |mut client, payload| async move { client.transfer_leader(payload).await },
        )
        .await
    }
}

impl PeerClient {
    /// Streams `snapshot` to the peer under `vote`, until `cancel` resolves.
    async fn send_snapshot(
        &mut self,
        vote: Vote,
        snapshot: SnapshotOf<TypeConfig, SnapshotFile>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let mut client = self.client()?;
        let mut cancel = std::pin::pin!(cancel);
        // A checkpoint is written out as a snapshot file first (see raft_store::snapshot).
        let file = tokio::select! {
            closed = &mut cancel => return Err(StreamingError::Closed(closed)),
            file = snapshot.snapshot.readable() => file,
        };
        let chunks = file
            .and_then(|file| Self::snapshot_chunks(vote, &snapshot.meta, file))
            .map_err(|error| StreamingError::Network(NetworkError::new(&error)))?;
        let target = self.target;
        let send = tokio::time::timeout(option.hard_ttl(), client.install_snapshot(chunks));
        let response = tokio::select! {
            closed = &mut cancel => return Err(StreamingError::Closed(closed)),
            response = send => response,
        };
        let payload = match response {
            Err(_) => {
                let message = format!("sending a snapshot to node {target} took over {:?}", option.hard_ttl());
                return Err(StreamingError::Unreachable(Unreachable::from_string(message)));
            }
            Ok(Err(status)) => {
                let message = format!("node {target} refused the snapshot: {}", status.message());
                return Err(StreamingError::Unreachable(Unreachable::from_string(message)));
            }
            Ok(Ok(response)) => response.into_inner(),
        };
        let result: RemoteResult<SnapshotResponse<TypeConfig>> =
            decode(&payload).map_err(|error| StreamingError::Network(NetworkError::from_string(error)))?;
        result.map_err(|error| StreamingError::Unreachable(Unreachable::from_string(error)))
    }
}
