//! The openraft type configuration of Strand: what a log entry carries (an
//! [`api::command::Proposal`], shared behind an `Arc` so that the log cache, the state machine
//! and every follower's replication read one copy instead of cloning it), what applying it
//! answers (an [`api::outcome::Answer`]), and how nodes are named (`u64` ids) and reached (a
//! [`Member`]: its peer and client addresses, and whether the leader promotes it once caught up).

use openraft::type_config::alias::{EntryOf, LogIdOf, SnapshotMetaOf, StoredMembershipOf, VoteOf};

openraft::declare_raft_types!(
    /// Strand's Raft types.
    pub TypeConfig:
        D = std::sync::Arc<api::command::Proposal>,
        R = api::outcome::Answer,
        NodeId = u64,
        Node = Member,
        Term = u64,
        // Standard Raft: one leader per term. openraft's default (`leader_id_adv`) lets several
        // candidates lead the same term, ordered by node id; that is safe in openraft's model but
        // breaks the textbook election-safety property that the simulator checks, and gains
        // nothing measurable with three or five nodes.
        LeaderId = openraft::impls::leader_id_std::LeaderId<u64, u64>,
        Entry = openraft::Entry<<Self::LeaderId as openraft::vote::RaftLeaderId>::Committed, Self::Payload>,
        Vote = openraft::impls::Vote<Self::LeaderId>,
        AsyncRuntime = Runtime,
);

pub use crate::runtime::Runtime;

/// What the membership records of a member, beside its id. Its encoding is stored (in log
/// entries and snapshots) and sent between nodes: fields are only added at the end, with a bump
/// of [`crate::codec::STORAGE_FORMAT`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Member {
    /// Where the other members reach its peer listener (`host:port`).
    pub addr: String,
    /// Where clients reach it (`host:port`); empty when it was not given (members of a static
    /// cluster's first start other than the one that initialised it).
    pub client_addr: String,
    /// While a learner: the leader promotes it to a voter once it has stayed caught up for the
    /// stabilization time (`member add` without `--learner`, `--join` without
    /// `--no-auto-promote`). No meaning for a voter.
    pub auto_promote: bool,
}

impl Member {
    /// A member reached at peer address `addr`, with no client address known, not promoted
    /// automatically.
    pub fn new(addr: impl Into<String>) -> Member {
        Member { addr: addr.into(), ..Member::default() }
    }
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "peer {}", self.addr)?;
        if !self.client_addr.is_empty() {
            write!(f, ", client {}", self.client_addr)?;
        }
        Ok(())
    }
}

/// A Raft log entry.
pub type Entry = EntryOf<TypeConfig>;
/// A Raft log id (term and index).
pub type LogId = LogIdOf<TypeConfig>;
/// A Raft vote.
pub type Vote = VoteOf<TypeConfig>;
/// Membership as stored with the log id that set it.
pub type StoredMembership = StoredMembershipOf<TypeConfig>;
/// Snapshot metadata.
pub type SnapshotMeta = SnapshotMetaOf<TypeConfig>;
/// A node's id.
pub type NodeId = u64;
