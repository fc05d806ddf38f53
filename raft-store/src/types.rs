//! The openraft type configuration of Strand: what a log entry carries (an
//! [`api::command::Proposal`], shared behind an `Arc` so that the log cache, the state machine
//! and every follower's replication read one copy instead of cloning it), what applying it
//! answers (an [`api::outcome::Answer`]), and how nodes are named (`u64` ids, `host:port` addresses).

use openraft::type_config::alias::{EntryOf, LogIdOf, SnapshotMetaOf, StoredMembershipOf, VoteOf};

openraft::declare_raft_types!(
    /// Strand's Raft types.
    pub TypeConfig:
        D = std::sync::Arc<api::command::Proposal>,
        R = api::outcome::Answer,
        NodeId = u64,
        Node = openraft::BasicNode,
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
