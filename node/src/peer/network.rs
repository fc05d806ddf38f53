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
//! which the receiving node checks before it reads the message (see `peer/service.rs`).
//!
//! Replication runs as one bidirectional gRPC stream per openraft replication session
//! ([`AppendSession`]): the leader sends each AppendEntries request as openraft makes it, up to
//! [`APPEND_PIPELINE_MAX`] unanswered, and the follower answers each in order on the same stream.
//! Invariant: every sent request is answered by its deadline, or the session ends with an error;
//! dropping the session drops openraft's request stream at once (it holds openraft's replication
//! state, which the next session needs). A request's deadline scales with its bytes
//! ([`append_timeout`]) and counts from when the follower can start on it (its predecessors are
//! answered in order), so a follower catching up on large entries is not cut off mid-request.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::proto::raft_client::RaftClient;
use api::proto::{RaftPayload, SnapshotChunk};
use futures::StreamExt;
use openraft::BasicNode;
use openraft::base::{BoxFuture, BoxStream};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::SnapshotOf;
use raft_store::SnapshotFile;
/// The types of the messages this network carries, for tools and tests that speak to a node's
/// Raft service directly.
pub use raft_store::types::{NodeId, SnapshotMeta, TypeConfig, Vote};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

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
/// The metadata key of the sender's cluster id, on every `strand.v1.Raft` call.
pub const CLUSTER_ID_HEADER: &str = "strand-cluster-id";
/// The metadata key of the sender's member id, on every `strand.v1.Raft` call.
pub const MEMBER_ID_HEADER: &str = "strand-member-id";

/// Who sends a node's Raft messages: its cluster's id and its own member id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerIdentity {
    /// The cluster id (see `node::cluster_id`).
    pub cluster_id: u64,
    /// The sending node's id.
    pub member_id: NodeId,
}

impl tonic::service::Interceptor for PeerIdentity {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let metadata = request.metadata_mut();
        metadata.insert(CLUSTER_ID_HEADER, self.cluster_id.into());
        metadata.insert(MEMBER_ID_HEADER, self.member_id.into());
        Ok(request)
    }
}

/// A `strand.v1.Raft` client whose every call carries this node's [`PeerIdentity`].
pub type PeerRpc = RaftClient<InterceptedService<Channel, PeerIdentity>>;

/// How long an append of `bytes` may take to be answered once the follower can start on it: the
/// RPC timeout, plus the bytes at [`REPLICATION_BYTES_PER_SECOND_MIN`].
pub fn append_timeout(base: Duration, bytes: usize) -> Duration {
    base + Duration::from_millis(bytes as u64 * 1000 / REPLICATION_BYTES_PER_SECOND_MIN)
}

/// Opens gRPC channels to other nodes.
pub trait Connector: Send + Sync + 'static {
    /// A lazily connecting channel to member `member` at `address` (`host:port`).
    fn channel(&self, member: NodeId, address: &str) -> Result<Channel, String>;
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

impl Connector for TcpConnector {
    fn channel(&self, member: NodeId, address: &str) -> Result<Channel, String> {
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
                let name = Some(api::tls::node_name(member));
                api::tls::channel(endpoint, move || tls.dial_config().into(), name, self.connect_timeout)
            }
        })
    }
}

/// Channels to peers, made once per address and reused.
pub struct Peers {
    connector: Arc<dyn Connector>,
    /// The peer addresses this node's configuration gives (`peers`, and its own); they win over
    /// the addresses the membership recorded, so a member's address can move (a cluster whose
    /// membership recorded addresses before the peer listener had its own port).
    configured: std::collections::BTreeMap<NodeId, String>,
    identity: PeerIdentity,
    /// The base timeout of a replication request (see [`append_timeout`]).
    append_timeout: Duration,
    channels: Mutex<HashMap<(NodeId, String), Channel>>,
}

impl Peers {
    /// No channels yet; every call will carry `identity`, and an append may take `append_timeout`
    /// plus its transfer time.
    pub fn new(
        connector: Arc<dyn Connector>,
        configured: std::collections::BTreeMap<NodeId, String>,
        identity: PeerIdentity,
        append_timeout: Duration,
    ) -> Peers {
        Peers { connector, configured, identity, append_timeout, channels: Mutex::new(HashMap::new()) }
    }

    /// The Raft-service client of member `member`, at its configured peer address, else at
    /// `address` (the membership's).
    pub fn client(&self, member: NodeId, address: &str) -> Result<PeerRpc, String> {
        let address = self.configured.get(&member).map_or(address, String::as_str);
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
        Ok(RaftClient::with_interceptor(channel, self.identity)
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

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            client: self.peers.client(target, &node.addr),
            address: node.addr.clone(),
            append_timeout: self.peers.append_timeout,
        }
    }
}

/// The connection to one peer.
pub struct PeerClient {
    target: NodeId,
    address: String,
    client: Result<PeerRpc, String>,
    append_timeout: Duration,
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

    fn snapshot_chunks(
        vote: Vote,
        snapshot: SnapshotOf<TypeConfig, SnapshotFile>,
    ) -> Result<impl futures::Stream<Item = SnapshotChunk> + Send + 'static, std::io::Error> {
        let meta = postcard::to_stdvec(&(vote, snapshot.meta.clone())).map_err(std::io::Error::other)?;
        let mut file = snapshot.snapshot.file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
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
            let (outgoing, receiver) = tokio::sync::mpsc::channel(APPEND_PIPELINE_MAX);
            let first = encode(&first);
            let deadline = next_deadline(None, timeout, first.data.len());
            outgoing.try_send(first).expect("an empty channel whose receiver is held here");
            let call = client.stream_append(tokio_stream::wrappers::ReceiverStream::new(receiver));
            let opening = deadline.saturating_duration_since(Instant::now());
            let answers = within(target, &address, opening, "open a replication stream", call).await?;
            let session = AppendSession {
                requests: Some(requests),
                outgoing: Some(outgoing),
                answers,
                unanswered: VecDeque::from([deadline]),
                timeout,
                target,
                address,
            };
            let answers = futures::stream::unfold(Some(session), |session| async move {
                let mut session = session?;
                let answer = session.next_answer().await?;
                // The follower ends its stream at the first refusal (conflict, higher vote) and
                // openraft ends the session at it; so does this stream.
                let session = matches!(answer, Ok(Ok(_))).then_some(session);
                Some((answer, session))
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
        let mut client = self.client()?;
        let chunks = Self::snapshot_chunks(vote, snapshot)
            .map_err(|error| StreamingError::Network(NetworkError::new(&error)))?;
        let target = self.target;
        let send = tokio::time::timeout(option.hard_ttl(), client.install_snapshot(chunks));
        let response = tokio::select! {
            closed = cancel => return Err(StreamingError::Closed(closed)),
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
