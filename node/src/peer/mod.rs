//! The peer plane: Raft traffic between the nodes of one cluster. `network.rs` sends it
//! (openraft's network over gRPC, snapshots included), `service.rs` receives it (the
//! `strand.v1.Raft` service, which checks every sender), `snapshot.rs` receives snapshots.
//!
//! Followers forward writes, read-index requests and leadership moves to the leader through this
//! plane; what they forward is handed to a [`LeaderPlane`], which this plane knows only as that
//! trait, so the leader plane builds on this one and never the reverse.

pub mod network;
mod service;
mod snapshot;

use api::outcome::Answer;
use openraft::raft::linearizable_read::ReadLogId;
use raft_store::NodeId;
use raft_store::types::{LogId, TypeConfig};
use serde::{Deserialize, Serialize};

pub use service::RaftPeerService;
pub use snapshot::INCOMING_SNAPSHOT_PREFIX;

/// The leader's answer to a read-index request: its id, the index to wait for, and what it had
/// applied.
pub type ReadIndex = (NodeId, ReadLogId<TypeConfig>, Option<LogId>);

/// A move of the leadership as a follower forwards it to the leader. Its encoding is sent
/// between nodes: fields are only added at the end.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct MoveLeader {
    /// The voter that is to lead.
    pub to: NodeId,
    /// How long to wait for it to lead.
    pub timeout_ms: u64,
}

/// The leadership moved (or already was where it was asked to be).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// The leader before the move.
    pub from: NodeId,
    /// The leader now.
    pub to: NodeId,
    /// The new leader's term.
    pub term: u64,
}

/// Why the leadership did not move. Its encoding is sent between nodes: variants are only added
/// at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MoveRefused {
    /// No member has that id.
    #[error("{0}")]
    Unknown(String),
    /// The target cannot lead now (a learner, unreachable, rejoining, too far behind).
    #[error("{0}")]
    NotReady(String),
    /// The leader could not be reached, or no leader is known: worth asking again.
    #[error("{0}")]
    Unavailable(String),
    /// The transfer began, but the target did not lead in time.
    #[error("{0}")]
    Timeout(String),
}

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

    /// Moves the leadership as a follower forwarded it (`strand cluster move-leader`).
    async fn move_leader(&self, request: MoveLeader) -> Result<Moved, MoveRefused>;
}
