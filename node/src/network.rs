//! Outbound traffic between nodes: openraft's network over gRPC, through a [`Connector`].
//!
//! The connector is the simulation seam for outbound connections: real nodes use
//! [`TcpConnector`], the simulator a connector over turmoil's network. Channels are made once per
//! peer address and reused by every RPC to that peer. Every RPC has a timeout.
//! Payloads are postcard-encoded openraft messages (the `strand.v1.Raft` service).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::proto::raft_client::RaftClient;
use api::proto::{RaftPayload, SnapshotChunk};
use futures::StreamExt;
use openraft::BasicNode;
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest, TransferLeaderResponse,
    VoteRequest, VoteResponse,
};
use openraft::type_config::alias::SnapshotOf;
use raft_store::types::{TypeConfig, Vote};
use raft_store::{NodeId, SnapshotFile};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncReadExt;
use tonic::transport::{Channel, Endpoint};

/// Bytes per streamed snapshot chunk.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1024 * 1024;
/// Largest gRPC message between nodes, in bytes.
pub const PEER_MESSAGE_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Opens gRPC channels to other nodes.
pub trait Connector: Send + Sync + 'static {
    /// A lazily connecting channel to `address` (`host:port`).
    fn channel(&self, address: &str) -> Result<Channel, String>;
}

/// Connects over real TCP.
#[derive(Clone, Debug)]
pub struct TcpConnector {
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
}

impl Connector for TcpConnector {
    fn channel(&self, address: &str) -> Result<Channel, String> {
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|error| format!("peer address {address:?} is not host:port: {error}"))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5));
        Ok(endpoint.connect_lazy())
    }
}

/// Channels to peers, made once per address and reused.
pub struct Peers {
    connector: Arc<dyn Connector>,
    channels: Mutex<HashMap<String, Channel>>,
}

impl Peers {
    /// No channels yet.
    pub fn new(connector: Arc<dyn Connector>) -> Peers {
        Peers { connector, channels: Mutex::new(HashMap::new()) }
    }

    /// The Raft-service client for `address`.
    pub fn client(&self, address: &str) -> Result<RaftClient<Channel>, String> {
        let mut channels = self.channels.lock().expect("peer channels lock");
        let channel = match channels.get(address) {
            Some(channel) => channel.clone(),
            None => {
                let channel = self.connector.channel(address)?;
                channels.insert(address.to_string(), channel.clone());
                channel
            }
        };
        Ok(RaftClient::new(channel)
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
        PeerClient { target, client: self.peers.client(&node.addr), address: node.addr.clone() }
    }
}

/// The connection to one peer.
pub struct PeerClient {
    target: NodeId,
    address: String,
    client: Result<RaftClient<Channel>, String>,
}

type RemoteResult<T> = Result<T, String>;

impl PeerClient {
    fn client(&self) -> Result<RaftClient<Channel>, RPCError<TypeConfig>> {
        self.client.clone().map_err(|error| RPCError::Unreachable(Unreachable::from_string(error)))
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
        F: FnOnce(RaftClient<Channel>, RaftPayload) -> Fut,
        Fut: Future<Output = Result<tonic::Response<RaftPayload>, tonic::Status>>,
    {
        let client = self.client()?;
        let target = self.target;
        let address = &self.address;
        let response = match tokio::time::timeout(timeout, rpc(client, encode(request))).await {
            Err(_) => {
                let message = format!("node {target} at {address} did not answer within {timeout:?}");
                return Err(RPCError::Unreachable(Unreachable::from_string(message)));
            }
            Ok(Err(status)) => {
                let message = format!("node {target} at {address}: {}", status.message());
                return Err(RPCError::Unreachable(Unreachable::from_string(message)));
            }
            Ok(Ok(response)) => response.into_inner(),
        };
        let result: RemoteResult<Resp> =
            decode(&response).map_err(|error| RPCError::Network(NetworkError::from_string(error)))?;
        result.map_err(|error| RPCError::Unreachable(Unreachable::from_string(format!("node {target}: {error}"))))
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
