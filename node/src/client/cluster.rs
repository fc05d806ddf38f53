//! The `strand.v1.Cluster` service: the cluster's status as this node sees it, each member
//! asked for its own over the peer channels (an unreachable member is shown as such), and each
//! member's lag and note as the leader's member watch found them (`leader/members.rs`). With auth
//! on, any token this node's replica knows may ask.

use std::sync::Arc;
use std::time::Duration;

use api::proto::cluster_server::Cluster;
use api::proto::{self as pb};
use openraft::async_runtime::WatchReceiver;
use raft_store::Disk;
use tonic::{Request, Response, Status};

use crate::core::NodeCore;
use crate::peer::network::Peers;

/// The `strand.v1.Cluster` service.
pub struct ClusterService<D: Disk> {
    core: Arc<NodeCore<D>>,
    /// Channels to the other members, which are asked for their own status.
    peers: Arc<Peers>,
}

impl<D: Disk> ClusterService<D> {
    /// Serves cluster status from this node.
    pub fn new(core: Arc<NodeCore<D>>, peers: Arc<Peers>) -> Self {
        ClusterService { core, peers }
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
