//! The `strand.v1.Cluster` service: the cluster's status as this node sees it, each member
//! asked for its own over the peer channels (an unreachable member is shown as such), and each
//! member's lag and note as the leader's member watch found them (`leader/members.rs`). With auth
//! on, any token this node's replica knows may ask. `MoveLeader` hands a leadership move to the
//! leader plane (`leader/transfer.rs`); with auth on it needs an admin token.

use std::sync::Arc;
use std::time::Duration;

use api::proto::cluster_server::Cluster;
use api::proto::{self as pb};
use openraft::async_runtime::WatchReceiver;
use raft_store::Disk;
use tonic::{Request, Response, Status};

use crate::core::NodeCore;
use crate::leader::Leader;
use crate::peer::MoveRefused;
use crate::peer::network::Peers;

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

#[tonic::async_trait]
impl<D: Disk> Cluster for ClusterService<D> {
    async fn status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
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

    async fn move_leader(
        &self,
        request: Request<pb::MoveLeaderRequest>,
    ) -> Result<Response<pb::MoveLeaderResponse>, Status> {
        let credential = super::credential_of(request.metadata())?;
        self.core
            .state_machine
            .read(|state| {
                state.authenticate(credential.as_ref()).and_then(|token| require_admin(token, "moving the leader"))
            })
            .map_err(api::convert::refusal_to_status)?;
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
