//! The peer plane: Raft traffic between the nodes of one cluster. `network.rs` sends it
//! (openraft's network over gRPC, snapshots included), `service.rs` receives it (the
//! `strand.v1.Raft` service, which checks every sender), `snapshot.rs` receives snapshots.
//!
//! Followers forward writes, read-index requests, leadership moves and membership changes to the
//! leader through this plane, and a node that is not yet a member asks to join through it; what they forward is handed to a [`LeaderPlane`], which this plane knows only as that
//! trait, so the leader plane builds on this one and never the reverse.

pub mod network;
mod service;
mod snapshot;

use api::outcome::Answer;
use openraft::raft::linearizable_read::ReadLogId;
use raft_store::NodeId;
use raft_store::types::{LogId, Member, TypeConfig};
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

/// A change of the membership (`strand member add|promote|remove`, or a join), as a follower
/// forwards it to the leader. Its encoding is sent between nodes: variants and fields are only
/// added at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberChange {
    /// Add `id` as a learner reached as `member` says (its `auto_promote`: promoted once caught
    /// up). With `join`, an id already recorded with the same peer address is not refused: a
    /// joining node asks again after an answer it did not receive.
    Add {
        /// The new member's id.
        id: NodeId,
        /// Its addresses and whether it is promoted automatically.
        member: Member,
        /// Whether the node itself asks (`--join`) rather than an operator (`member add`).
        join: bool,
    },
    /// Make learner `id` a voter.
    Promote(NodeId),
    /// Remove member `id`, voter or learner.
    Remove(NodeId),
}

/// The membership once a change committed. Its encoding is sent between nodes: fields are only
/// added at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changed {
    /// The log index of the membership entry that holds the change.
    pub index: u64,
    /// Every member, voter or learner.
    pub members: std::collections::BTreeMap<NodeId, Member>,
    /// The voters.
    pub voters: std::collections::BTreeSet<NodeId>,
    /// The leader that made the change.
    pub leader: NodeId,
}

/// A list of ids for a message: "1, 2, 3".
pub fn listed(ids: impl IntoIterator<Item = NodeId>) -> String {
    ids.into_iter().map(|id| id.to_string()).collect::<Vec<_>>().join(", ")
}

impl Changed {
    /// The membership `membership`, held by the entry at log index `index`, made by `leader`.
    pub fn of(membership: &openraft::Membership<NodeId, Member>, index: u64, leader: NodeId) -> Changed {
        Changed {
            index,
            members: membership.nodes().map(|(id, member)| (*id, member.clone())).collect(),
            voters: membership.voter_ids().collect(),
            leader,
        }
    }
}

/// Why the membership did not change. Its encoding is sent between nodes: variants are only
/// added at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ChangeRefused {
    /// No member has that id.
    #[error("{0}")]
    Unknown(String),
    /// The id or the address is in use already.
    #[error("{0}")]
    Exists(String),
    /// The change cannot be made now (another is in progress, the learner is far behind, the
    /// last voter); nothing changed.
    #[error("{0}")]
    NotReady(String),
    /// The request is not allowed (another cluster's name, a certificate of another node, no
    /// admin token).
    #[error("{0}")]
    Denied(String),
    /// The leader could not be reached, or no leader is known: worth asking again.
    #[error("{0}")]
    Unavailable(String),
    /// The request is malformed (an id of 0, an address that is not `host:port`).
    #[error("{0}")]
    Invalid(String),
    /// Asked which cluster a node belongs to (`--rejoin`), a member that holds no membership and
    /// shows no cluster (term 0, an empty log, not rejoining itself): the cluster has not formed
    /// on it. A rejoining node that hears this from enough members starts as the initial member
    /// it was (see `crate::join`).
    #[error("{0}")]
    NotFormed(String),
}

/// What a node that is not yet a member sends a member's peer listener to join (`strand node
/// --join`). Its encoding is sent between nodes: fields are only added at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    /// The cluster name the joining node was started with; it must be the cluster's.
    pub cluster_name: String,
    /// The id it asks to join under.
    pub id: NodeId,
    /// Its addresses and whether it is to be promoted automatically.
    pub member: Member,
}

/// A member's answer to a join: the cluster's id and its membership, which the joining node
/// records before it serves anything. Its encoding is sent between nodes: fields are only added
/// at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    /// The cluster id (see `crate::identity`).
    pub cluster_id: u64,
    /// The membership that holds the joining node.
    pub membership: Changed,
}

/// A leader tells a member it removed that it was removed. Its encoding is sent between nodes:
/// fields are only added at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// The log index of the membership entry that no longer holds the member.
    pub index: u64,
    /// The leader that removed it.
    pub by: NodeId,
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

    /// Changes the membership as a follower forwarded it, or a joining node asked.
    async fn change_membership(&self, change: MemberChange) -> Result<Changed, ChangeRefused>;
}
