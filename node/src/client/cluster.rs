//! The `strand.v1.Cluster` service: the cluster's status as this node sees it, each member
//! asked for its own over the peer channels (an unreachable member is shown as such), and each
//! member's lag and note as the leader's member watch found them (`leader/members.rs`). With auth
//! on, any token this node's replica knows may ask. `MoveLeader` hands a leadership move to the
//! leader plane (`leader/transfer.rs`), and `AddMember`, `PromoteMember` and `RemoveMember` hand
//! membership changes to it (`leader/membership.rs`); `SnapshotSave` streams a backup file
//! (`raft_store::backup`) of a snapshot this node builds once it has applied everything committed
//! when the request arrived. With auth on, all of these need an admin token.

use std::sync::Arc;
use std::time::Duration;

use api::proto::cluster_server::Cluster;
use api::proto::{self as pb};
use openraft::async_runtime::WatchReceiver;
use raft_store::Disk;
use tonic::{Request, Response, Status};

use crate::core::NodeCore;
use crate::leader::Leader;
use crate::peer::network::Peers;
use crate::peer::{ChangeRefused, Changed, MemberChange, MoveRefused};

/// How long a leadership move waits for the target to lead when the request names no time.
pub const MOVE_LEADER_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// The longest wait a leadership move may ask for.
pub const MOVE_LEADER_TIMEOUT_MS_MAX: u64 = 120_000;

/// The `strand.v1.Cluster` service.
pub struct ClusterService<D: Disk> {
    core: Arc<NodeCore<D>>,
    /// Channels to the other members, which are asked for their own status.
    peers: Arc<Peers>,
    /// The leader plane, which moves the leadership.
    leader: Arc<Leader<D>>,
}

impl<D: Disk> ClusterService<D> {
    /// Serves cluster status and leadership moves from this node.
    pub fn new(core: Arc<NodeCore<D>>, peers: Arc<Peers>, leader: Arc<Leader<D>>) -> Self {
        ClusterService { core, peers, leader }
    }
}

/// The gRPC status of a move that did not happen.
fn move_refused(refused: &MoveRefused) -> Status {
    match refused {
        MoveRefused::Unknown(message) => Status::not_found(message.clone()),
        MoveRefused::NotReady(message) => Status::failed_precondition(message.clone()),
        MoveRefused::Unavailable(message) => Status::unavailable(message.clone()),
        MoveRefused::Timeout(message) => Status::deadline_exceeded(message.clone()),
    }
}

/// The gRPC status of a membership change that was not made.
fn change_refused(refused: ChangeRefused) -> Status {
    match refused {
        ChangeRefused::Unknown(message) => Status::not_found(message),
        ChangeRefused::Exists(message) => Status::already_exists(message),
        ChangeRefused::NotReady(message) => Status::failed_precondition(message),
        ChangeRefused::Denied(message) => Status::permission_denied(message),
        ChangeRefused::Unavailable(message) => Status::unavailable(message),
        ChangeRefused::Invalid(message) => Status::invalid_argument(message),
        ChangeRefused::NotFormed(message) => Status::failed_precondition(message),
    }
}

/// The membership a change answers, as the client sees it.
fn membership_response(changed: Changed) -> pb::MembershipResponse {
    let members = crate::core::membership_rows(&changed.members, |id| changed.voters.contains(&id));
    pb::MembershipResponse { index: changed.index, leader_id: changed.leader, members }
}

/// Refuses a token of another role than admin (auth off: no token, anything goes).
fn require_admin(token: Option<&api::auth::Token>, what: &str) -> Result<(), api::outcome::Refusal> {
    match token {
        Some(token) if token.role != api::auth::Role::Admin => Err(api::outcome::Refusal::PermissionDenied(format!(
            "token {} has the {} role; {what} needs an admin token",
            api::printable::printable(&token.name),
            token.role
        ))),
        _ => Ok(()),
    }
}

/// Bytes of a backup's snapshot per streamed chunk.
const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// How long `SnapshotSave` waits for the snapshot to be built.
const SNAPSHOT_BUILD_WAIT: Duration = Duration::from_secs(120);

/// The chunks of a backup file, as `SnapshotSave` streams them.
type BackupChunks = std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::SnapshotSaveChunk, Status>> + Send>>;

/// The length and CRC-32 of a file's bytes, read from its start.
fn length_and_crc(file: &mut std::fs::File) -> std::io::Result<(u64, u32)> {
    use std::io::{Read, Seek};
    file.seek(std::io::SeekFrom::Start(0))?;
    let (mut hasher, mut length, mut buffer) = (crc32fast::Hasher::new(), 0u64, vec![0u8; SNAPSHOT_CHUNK_BYTES]);
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            return Ok((length, hasher.finalize()));
        }
        hasher.update(&buffer[..read]);
        length += read as u64;
    }
}

/// Sends the header, then `file`'s bytes from its start, into `sender`, until the receiver goes.
fn send_backup(
    header: Vec<u8>,
    mut file: std::fs::File,
    sender: tokio::sync::mpsc::Sender<Result<pb::SnapshotSaveChunk, Status>>,
) {
    use std::io::{Read, Seek};
    if sender.blocking_send(Ok(pb::SnapshotSaveChunk { data: header })).is_err() {
        return;
    }
    if let Err(error) = file.seek(std::io::SeekFrom::Start(0)) {
        let _ = sender.blocking_send(Err(Status::internal(format!("cannot read the snapshot: {error}"))));
        return;
    }
    let mut buffer = vec![0u8; SNAPSHOT_CHUNK_BYTES];
    loop {
        let chunk = match file.read(&mut buffer) {
            Ok(0) => return,
            Ok(read) => Ok(pb::SnapshotSaveChunk { data: buffer[..read].to_vec() }),
            Err(error) => Err(Status::internal(format!("cannot read the snapshot: {error}"))),
        };
        let failed = chunk.is_err();
        if sender.blocking_send(chunk).is_err() || failed {
            return;
        }
    }
}

#[tonic::async_trait]
impl<D: Disk> Cluster for ClusterService<D> {
    async fn status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        self.serving()?;
        // Judged on this replica without a read index, so that status answers while no leader is
        // elected: any token the replica knows may ask.
        let credential = super::credential_of(request.metadata())?;
        self.core
            .state_machine
            .read(|state| state.authenticate(credential.as_ref()).map(|_| ()))
            .map_err(api::convert::refusal_to_status)?;
        let include_digest = request.into_inner().include_digest;
        let metrics = self.core.raft.metrics().borrow_watched().clone();
        let membership = metrics.membership_config.membership().clone();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let mut nodes = Vec::new();
        for (node_id, node) in membership.nodes() {
            if *node_id == self.core.id {
                nodes.push(self.core.own_status(include_digest));
                continue;
            }
            nodes.push(self.peer_status(*node_id, &node.addr, include_digest).await);
        }
        if nodes.is_empty() {
            nodes.push(self.core.own_status(include_digest));
        }
        let leader_id = metrics.current_leader.unwrap_or(0);
        let progress = nodes.iter().find(|node| node.id == leader_id).map(|leader| leader.members.clone());
        for member in progress.unwrap_or_default() {
            if let Some(node) = nodes.iter_mut().find(|node| node.id == member.id) {
                node.lag = member.lag;
                if node.state != "unreachable" {
                    node.note = member.note;
                }
            }
        }
        Ok(Response::new(pb::StatusResponse { leader_id, term: metrics.current_term, voters, nodes }))
    }

    type SnapshotSaveStream = BackupChunks;

    async fn snapshot_save(
        &self,
        request: Request<pb::SnapshotSaveRequest>,
    ) -> Result<Response<Self::SnapshotSaveStream>, Status> {
        self.serving()?;
        self.require_admin(request.metadata(), "saving a snapshot")?;
        self.leader.linearize().await.map_err(|error| Status::unavailable(error.0))?;
        let applied = self.core.raft.metrics().borrow_watched().last_applied.map_or(0, |log_id| log_id.index);
        let raft = &self.core.raft;
        let stopped = |error: openraft::errors::Fatal<raft_store::TypeConfig>| {
            Status::unavailable(format!("raft stopped on this node: {error}; ask another node"))
        };
        raft.trigger().snapshot().await.map_err(stopped)?;
        raft.wait(Some(SNAPSHOT_BUILD_WAIT))
            .metrics(|metrics| metrics.snapshot.is_some_and(|log_id| log_id.index >= applied), "the snapshot is built")
            .await
            .map_err(|_| {
                Status::unavailable(format!(
                    "this node did not build a snapshot through index {applied} within {SNAPSHOT_BUILD_WAIT:?}; try again, or ask another node"
                ))
            })?;
        let snapshot = raft
            .get_snapshot()
            .await
            .map_err(|error| Status::unavailable(error.to_string()))?
            .ok_or_else(|| Status::unavailable("this node holds no snapshot; try again"))?;
        let (last_log_index, last_log_term) =
            snapshot.meta.last_log_id.map_or((0, 0), |log_id| (log_id.index, log_id.leader_id.term));
        let data = snapshot.snapshot;
        let (file, (snapshot_bytes, snapshot_crc32)) = tokio::task::spawn_blocking(move || {
            let mut file = data.into_file()?;
            let summed = length_and_crc(&mut file);
            summed.map(|summed| (file, summed))
        })
        .await
        .map_err(|error| Status::internal(error.to_string()))?
        .map_err(|error| Status::internal(format!("cannot read the snapshot: {error}")))?;
        let header = raft_store::backup::BackupHeader {
            storage_format: raft_store::codec::STORAGE_FORMAT,
            cluster_id: self.core.cluster_id.get(),
            node_id: self.core.id,
            last_log_index,
            last_log_term,
            created_ms: self.core.clock.now().0,
            snapshot_bytes,
            snapshot_crc32,
        };
        tracing::info!(
            node = self.core.id,
            index = last_log_index,
            bytes = snapshot_bytes,
            "streaming a snapshot for a backup"
        );
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        let header = raft_store::backup::encode_header(&header);
        tokio::task::spawn_blocking(move || send_backup(header, file, sender));
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(receiver))))
    }

    async fn move_leader(
        &self,
        request: Request<pb::MoveLeaderRequest>,
    ) -> Result<Response<pb::MoveLeaderResponse>, Status> {
        self.serving()?;
        self.require_admin(request.metadata(), "moving the leader")?;
        let request = request.into_inner();
        let timeout_ms = match request.timeout_ms {
            0 => MOVE_LEADER_TIMEOUT_MS_DEFAULT,
            ms => ms.min(MOVE_LEADER_TIMEOUT_MS_MAX),
        };
        let moved = self
            .leader
            .move_leader(request.to, Duration::from_millis(timeout_ms))
            .await
            .map_err(|refused| move_refused(&refused))?;
        Ok(Response::new(pb::MoveLeaderResponse {
            previous_leader_id: moved.from,
            leader_id: moved.to,
            term: moved.term,
        }))
    }

    async fn add_member(
        &self,
        request: Request<pb::AddMemberRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let (metadata, _, add) = request.into_parts();
        let member = raft_store::types::Member {
            addr: add.peer_address,
            client_addr: add.client_address,
            auto_promote: !add.learner,
        };
        self.change(&metadata, "adding a member", MemberChange::Add { id: add.id, member, join: false }).await
    }

    async fn promote_member(
        &self,
        request: Request<pb::MemberRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let (metadata, _, member) = request.into_parts();
        self.change(&metadata, "promoting a member", MemberChange::Promote(member.id)).await
    }

    async fn remove_member(
        &self,
        request: Request<pb::MemberRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let (metadata, _, member) = request.into_parts();
        self.change(&metadata, "removing a member", MemberChange::Remove(member.id)).await
    }
}

impl<D: Disk> ClusterService<D> {
    /// Makes a membership change asked by a client (`what`, for messages), with an admin token.
    async fn change(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        what: &str,
        change: MemberChange,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        self.serving()?;
        self.require_admin(metadata, what)?;
        let changed = self.leader.change_membership(change).await.map_err(change_refused)?;
        Ok(Response::new(membership_response(changed)))
    }

    /// Refuses every request once this node was removed from the cluster, with the reason, so
    /// that clients move to another node.
    fn serving(&self) -> Result<(), Status> {
        super::refuse_if_removed(&self.core)
    }

    /// Refuses a request (`what`, for the message) whose token is not an admin's, judged on this
    /// replica (auth off: anything goes).
    fn require_admin(&self, metadata: &tonic::metadata::MetadataMap, what: &str) -> Result<(), Status> {
        let credential = super::credential_of(metadata)?;
        self.core
            .state_machine
            .read(|state| state.authenticate(credential.as_ref()).and_then(|token| require_admin(token, what)))
            .map_err(api::convert::refusal_to_status)
    }

    async fn peer_status(&self, node_id: u64, address: &str, include_digest: bool) -> pb::NodeStatus {
        let unreachable = |error: String| pb::NodeStatus {
            id: node_id,
            address: address.to_string(),
            state: "unreachable".into(),
            error,
            ..Default::default()
        };
        let mut client = match self.peers.client(node_id, address) {
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
