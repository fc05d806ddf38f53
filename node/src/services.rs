//! The gRPC services a node serves: `strand.v1.Beads` (the bead store), `strand.v1.Cluster`
//! (status) and `strand.v1.Raft` (traffic between nodes). Protobuf requests are converted by
//! `api::convert` and answered by [`NodeCore`]; this module only wires them together.

use std::sync::Arc;
use std::time::Duration;

use api::convert::{FromAnswer, IntoRead, IntoWrite, refusal_to_status};
use api::proto::beads_server::Beads;
use api::proto::cluster_server::Cluster;
use api::proto::raft_server::Raft as RaftService;
use api::proto::{self as pb, RaftPayload, SnapshotChunk};
use futures::StreamExt;
use openraft::Snapshot;
use openraft::async_runtime::WatchReceiver;
use raft_store::types::{SnapshotMeta, Vote};
use raft_store::{Disk, SnapshotFile};
use tokio::io::AsyncWriteExt;
use tonic::{Request, Response, Status, Streaming};

use crate::core::{Attempt, ForwardedWrite, NodeCore};
use crate::network::{decode, encode};

/// The `strand.v1.Beads` service.
pub struct BeadsService<D: Disk> {
    core: Arc<NodeCore<D>>,
}

impl<D: Disk> BeadsService<D> {
    /// Serves the bead store of this node.
    pub fn new(core: Arc<NodeCore<D>>) -> Self {
        BeadsService { core }
    }

    async fn write<Req: IntoWrite, Resp: FromAnswer>(&self, request: Request<Req>) -> Result<Response<Resp>, Status> {
        let write = request.into_inner().into_write().map_err(refusal_to_status)?;
        let answer = self.core.write(write).await?;
        Resp::from_answer(answer).map(Response::new)
    }

    async fn read<Req: IntoRead, Resp: FromAnswer>(&self, request: Request<Req>) -> Result<Response<Resp>, Status> {
        let now = self.core.clock.now();
        let read = request.into_inner().into_read(now).map_err(refusal_to_status)?;
        let answer = self.core.read(read).await?;
        Resp::from_answer(answer).map(Response::new)
    }
}

#[tonic::async_trait]
impl<D: Disk> Beads for BeadsService<D> {
    async fn create(&self, request: Request<pb::CreateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        self.write(request).await
    }
    async fn get(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        self.read(request).await
    }
    async fn update(&self, request: Request<pb::UpdateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        self.write(request).await
    }
    async fn set_metadata(
        &self,
        request: Request<pb::SetMetadataRequest>,
    ) -> Result<Response<pb::BeadResponse>, Status> {
        self.write(request).await
    }
    async fn claim(&self, request: Request<pb::ClaimRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        self.write(request).await
    }
    async fn claim_next(&self, request: Request<pb::ClaimNextRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        self.write(request).await
    }
    async fn close(&self, request: Request<pb::CloseRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        self.write(request).await
    }
    async fn reopen(&self, request: Request<pb::ReopenRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        self.write(request).await
    }
    async fn delete(&self, request: Request<pb::DeleteRequest>) -> Result<Response<pb::Empty>, Status> {
        self.write(request).await
    }
    async fn list(&self, request: Request<pb::ListRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        self.read(request).await
    }
    async fn ready(&self, request: Request<pb::ReadyRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        self.read(request).await
    }
    async fn children(&self, request: Request<pb::ChildrenRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        self.read(request).await
    }
    async fn list_by_label(
        &self,
        request: Request<pb::ListByLabelRequest>,
    ) -> Result<Response<pb::BeadsResponse>, Status> {
        self.read(request).await
    }
    async fn dep_add(&self, request: Request<pb::DepAddRequest>) -> Result<Response<pb::Empty>, Status> {
        self.write(request).await
    }
    async fn dep_remove(&self, request: Request<pb::DepRemoveRequest>) -> Result<Response<pb::Empty>, Status> {
        self.write(request).await
    }
    async fn dep_list(
        &self,
        request: Request<pb::DepListRequest>,
    ) -> Result<Response<pb::DependenciesResponse>, Status> {
        self.read(request).await
    }
}

/// The `strand.v1.Cluster` service.
pub struct ClusterService<D: Disk> {
    core: Arc<NodeCore<D>>,
}

impl<D: Disk> ClusterService<D> {
    /// Serves cluster status from this node.
    pub fn new(core: Arc<NodeCore<D>>) -> Self {
        ClusterService { core }
    }
}

/// This node's own status.
pub fn own_status<D: Disk>(core: &NodeCore<D>, include_digest: bool) -> pb::NodeStatus {
    let metrics = core.raft.metrics().borrow_watched().clone();
    let (digest, bead_count) =
        core.state_machine.read(|state| (include_digest.then(|| state.digest()), state.bead_count() as u64));
    let fatal_error = match &metrics.running_state {
        Ok(()) => String::new(),
        Err(fatal) => fatal.to_string(),
    };
    pb::NodeStatus {
        id: core.id,
        address: core.config.advertised(),
        state: format!("{:?}", metrics.state).to_lowercase(),
        term: metrics.current_term,
        last_log_index: metrics.last_log_index.unwrap_or(0),
        applied_index: metrics.last_applied.map_or(0, |log_id| log_id.index),
        snapshot_index: metrics.snapshot.map_or(0, |log_id| log_id.index),
        purged_index: metrics.purged.map_or(0, |log_id| log_id.index),
        leader_id: metrics.current_leader.unwrap_or(0),
        digest,
        fatal_error,
        bead_count,
        error: String::new(),
    }
}

#[tonic::async_trait]
impl<D: Disk> Cluster for ClusterService<D> {
    async fn status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        let include_digest = request.into_inner().include_digest;
        let metrics = self.core.raft.metrics().borrow_watched().clone();
        let membership = metrics.membership_config.membership().clone();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let mut nodes = Vec::new();
        for (node_id, node) in membership.nodes() {
            if *node_id == self.core.id {
                nodes.push(own_status(&self.core, include_digest));
                continue;
            }
            nodes.push(self.peer_status(*node_id, &node.addr, include_digest).await);
        }
        if nodes.is_empty() {
            nodes.push(own_status(&self.core, include_digest));
        }
        Ok(Response::new(pb::StatusResponse {
            leader_id: metrics.current_leader.unwrap_or(0),
            term: metrics.current_term,
            voters,
            nodes,
        }))
    }
}

impl<D: Disk> ClusterService<D> {
    async fn peer_status(&self, node_id: u64, address: &str, include_digest: bool) -> pb::NodeStatus {
        let unreachable = |error: String| pb::NodeStatus {
            id: node_id,
            address: address.to_string(),
            state: "unreachable".into(),
            error,
            ..Default::default()
        };
        let mut client = match self.core.peers.client(address) {
            Ok(client) => client,
            Err(error) => return unreachable(error),
        };
        let timeout = Duration::from_millis(self.core.config.raft.rpc_timeout_ms);
        match tokio::time::timeout(timeout, client.get_node_status(pb::StatusRequest { include_digest })).await {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => unreachable(status.message().to_string()),
            Err(_) => unreachable(format!("no answer within {timeout:?}")),
        }
    }
}

/// The `strand.v1.Raft` service: traffic from other nodes.
pub struct RaftPeerService<D: Disk> {
    core: Arc<NodeCore<D>>,
}

impl<D: Disk> RaftPeerService<D> {
    /// Serves Raft traffic into this node.
    pub fn new(core: Arc<NodeCore<D>>) -> Self {
        RaftPeerService { core }
    }

    fn incoming_snapshot_path(&self) -> std::path::PathBuf {
        let unique = self.core.clock.now().0;
        self.core
            .config
            .data_dir
            .join("snapshots")
            .join(format!("incoming-{unique}-{}.snapshot", next_incoming_number()))
    }

    async fn receive_snapshot(
        &self,
        mut chunks: Streaming<SnapshotChunk>,
    ) -> Result<(Vote, SnapshotMeta, std::path::PathBuf), Status> {
        let first = chunks.message().await?.ok_or_else(|| Status::invalid_argument("empty snapshot stream"))?;
        let (vote, meta): (Vote, SnapshotMeta) = postcard::from_bytes(&first.meta)
            .map_err(|error| Status::invalid_argument(format!("malformed snapshot header: {error}")))?;
        let path = self.incoming_snapshot_path();
        let received = Self::write_chunks(&path, chunks).await;
        if received.is_err() {
            let _ = tokio::fs::remove_file(&path).await;
        }
        received.map(|()| (vote, meta, path))
    }

    async fn write_chunks(path: &std::path::Path, mut chunks: Streaming<SnapshotChunk>) -> Result<(), Status> {
        let mut file = tokio::fs::File::create(path).await.map_err(|error| Status::internal(error.to_string()))?;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            file.write_all(&chunk.data).await.map_err(|error| Status::internal(error.to_string()))?;
        }
        file.sync_all().await.map_err(|error| Status::internal(error.to_string()))
    }
}

/// Numbers incoming snapshot files so two transfers in the same millisecond never share a file.
fn next_incoming_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn malformed(error: String) -> Status {
    Status::invalid_argument(error)
}

fn answer<T: serde::Serialize, E: std::fmt::Display>(result: Result<T, E>) -> Result<Response<RaftPayload>, Status> {
    Ok(Response::new(encode(&result.map_err(|error| error.to_string()))))
}

#[tonic::async_trait]
impl<D: Disk> RaftService for RaftPeerService<D> {
    async fn append_entries(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc = decode(request.get_ref()).map_err(malformed)?;
        answer(self.core.raft.append_entries(rpc).await)
    }

    async fn vote(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc = decode(request.get_ref()).map_err(malformed)?;
        answer(self.core.raft.vote(rpc).await)
    }

    async fn pre_vote(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc = decode(request.get_ref()).map_err(malformed)?;
        answer(self.core.raft.pre_vote(rpc).await)
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<RaftPayload>, Status> {
        let (vote, meta, path) = self.receive_snapshot(request.into_inner()).await?;
        let problem = match raft_store::snapshot::verify(&path) {
            Ok(file_meta) if file_meta == meta => None,
            Ok(_) => Some("its file does not match the metadata it was sent with".to_string()),
            Err(error) => Some(error.to_string()),
        };
        if let Some(problem) = problem {
            let _ = std::fs::remove_file(&path);
            return Err(Status::data_loss(format!("received snapshot is damaged ({problem}); the sender will retry")));
        }
        let file = SnapshotFile::open(&path).map_err(|error| Status::internal(error.to_string()))?;
        let snapshot = Snapshot { meta, snapshot: file };
        answer(self.core.raft.install_full_snapshot(vote, snapshot).await)
    }

    async fn transfer_leader(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc = decode(request.get_ref()).map_err(malformed)?;
        answer(self.core.raft.handle_transfer_leader(rpc).await)
    }

    async fn propose(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let forwarded: ForwardedWrite = decode(request.get_ref()).map_err(malformed)?;
        let result = match self.core.propose_local(&forwarded).await {
            Attempt::Done(answer) => Ok(answer),
            Attempt::Retry(reason) => Err(reason),
        };
        answer(result)
    }

    async fn read_index(&self, _request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        answer(self.core.read_index().await)
    }

    async fn get_node_status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::NodeStatus>, Status> {
        Ok(Response::new(own_status(&self.core, request.into_inner().include_digest)))
    }
}
