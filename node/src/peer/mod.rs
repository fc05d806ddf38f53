//! The peer plane: Raft traffic between the nodes of one cluster. `network.rs` sends it
//! (openraft's network over gRPC, snapshots included), `service.rs` receives it (the
//! `strand.v1.Raft` service, which checks every sender), `snapshot.rs` receives snapshots.
//!
//! Followers forward writes and read-index requests to the leader through this plane; what they
//! forward is handed to a [`LeaderPlane`], which this plane knows only as that trait, so the
//! leader plane builds on this one and never the reverse.

pub mod network;
mod service;
mod snapshot;

use api::outcome::Answer;
use openraft::raft::linearizable_read::ReadLogId;
use raft_store::NodeId;
use raft_store::types::{LogId, TypeConfig};

pub use service::RaftPeerService;
pub use snapshot::INCOMING_SNAPSHOT_PREFIX;

/// The leader's answer to a read-index request: its id, the index to wait for, and what it had
/// applied.
pub type ReadIndex = (NodeId, ReadLogId<TypeConfig>, Option<LogId>);

/// What the peer plane hands to the leader plane.
#[tonic::async_trait]
pub trait LeaderPlane: Send + Sync + 'static {
    /// What a follower forwards in a `Propose` call.
    type Request: serde::de::DeserializeOwned + Send;

    /// Serves a forwarded request on this node, which the sender believes is leader. An error
    /// says why it could not be served here, and the sender tries again.
    async fn propose(&self, request: Self::Request) -> Result<Answer, String>;

    /// Confirms leadership with a quorum and answers the index a linearizable read waits for.
    async fn read_index(&self) -> Result<ReadIndex, String>;
}
