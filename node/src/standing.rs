//! A node's standing in its cluster's membership, as far as it is not in Raft's own log: the
//! membership a joining node was given (`strand node --join`), which it trusts until its log
//! holds one, the members it saw leave its applied membership ([`Seen`]), and the marker of a
//! node that was removed.
//!
//! Who counts as a member: once this node's log holds a membership, that membership alone (the
//! static `--peers` only seed the first start). Before, the seed: the configured `--peers`, and
//! the membership a join answered. A message from a leader (an append, a snapshot) or a candidate
//! (a vote) is also taken from a node the membership does not hold yet, as long as this node
//! never saw it leave a membership: a member that is behind may not know of a node added after
//! its last entry, and must still vote for that node and take its appends once it leads.
//!
//! Leaving is judged on the *applied* membership only, which is committed and never goes back.
//! The membership openraft acts on is the log's last membership entry, committed or not, and a
//! leader of a later term may truncate that entry away: a member whose uncommitted entry added
//! node 4, truncated by leader 4 itself, did not see node 4 leave, and must keep taking its
//! appends (judging on that membership once left such a member refusing its leader for good).
//!
//! A removed node writes the marker, stops its Raft core, and stops: `crate::run` returns the
//! reason, so the process exits with it, as etcd's does (until its servers have stopped, it
//! answers every client request with the reason, marked final for that endpoint:
//! `api::client::ENDPOINT_FINAL_HEADER`). It refuses to start again on that data directory: the
//! way back is a fresh directory and `--join`. It is told by the leader that removed it (`Raft.Removed`), or, when that leader
//! failed before the notice got through, by any member that applied the removal, in the refusal
//! of the first message it sends that member (`peer::network::REMOVED_AT_HEADER`); the members
//! a node saw leave are kept on disk, so a member that restarted since the removal still tells
//! it. A notice is not taken when this node knows a membership at or after its index that holds
//! it.
//!
//! Invariant: the removed marker, once written, is never cleared; a directory that holds it
//! never serves again.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use raft_store::codec;
use raft_store::{Disk, Durability, NodeId, Op, Space};
use serde::{Deserialize, Serialize};

use crate::peer::Joined;

/// Meta key of the membership a join answered.
pub const META_JOINED: &[u8] = b"joined";
/// Meta key of the removed marker.
pub const META_REMOVED: &[u8] = b"removed";
/// Meta key of what the node saw of its applied membership ([`Seen`]).
pub const META_SEEN: &[u8] = b"seen";

/// What the removed marker records. Stored: fields are only added at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedRecord {
    /// The cluster's name.
    pub cluster_name: String,
    /// The cluster's id.
    pub cluster_id: u64,
    /// The removed node.
    pub node_id: NodeId,
    /// The log index of the membership that no longer holds it.
    pub index: u64,
    /// The member that told it: the leader that removed it, or a member that applied the
    /// removal and refused a message of it.
    pub by: NodeId,
}

impl RemovedRecord {
    /// Why the node does not serve, and what to do.
    pub fn message(&self) -> String {
        format!(
            "node {} was removed from cluster {:?} ({:016x}) at index {} (told by node {}); it no longer serves. Ask another member, or bring this host back with a fresh --data-dir, a new --id and --join",
            self.node_id, self.cluster_name, self.cluster_id, self.index, self.by
        )
    }
}

/// The removed marker of a data directory, if it holds one.
pub fn removed<D: Disk>(disk: &D) -> std::io::Result<Option<RemovedRecord>> {
    match disk.get(Space::Meta, META_REMOVED)? {
        Some(bytes) => Ok(Some(codec::decode(&bytes, "removed marker")?)),
        None => Ok(None),
    }
}

/// Records the membership a join answered, durably.
pub fn record_joined<D: Disk>(disk: &D, joined: &Joined) -> std::io::Result<()> {
    disk.write(vec![Op::Put(Space::Meta, META_JOINED.to_vec(), codec::encode(joined)?)], Durability::Sync)
}

/// The membership a join answered, if this directory was joined.
pub fn joined<D: Disk>(disk: &D) -> std::io::Result<Option<Joined>> {
    match disk.get(Space::Meta, META_JOINED)? {
        Some(bytes) => Ok(Some(codec::decode(&bytes, "joined membership")?)),
        None => Ok(None),
    }
}

/// What a node saw of its applied membership, kept on disk as it changes: a member that
/// restarts after a removal still tells the removed node, which may reach no other member.
/// Stored: fields are only added at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// The log index of the last applied membership noted.
    pub index: u64,
    /// Its members.
    pub members: BTreeSet<NodeId>,
    /// Members that left, each with the index of the first applied membership without it.
    pub former: std::collections::BTreeMap<NodeId, u64>,
}

/// A running node's standing.
pub struct Standing<D: Disk> {
    disk: Arc<D>,
    /// The members to trust before the log holds a membership (configured peers, this node, and
    /// those a join answered).
    seed: BTreeSet<NodeId>,
    /// The membership a join answered, if this node joined a running cluster (it never
    /// initialises one).
    joined: Option<crate::peer::Changed>,
    /// The applied membership this node last noted (its log index, its members) and the members
    /// it saw leave, each with the index of the first applied membership without it.
    seen: Mutex<Seen>,
    /// Why this node no longer serves, once it was removed.
    removed: Mutex<Option<String>>,
}

impl<D: Disk> Standing<D> {
    /// The standing of a node whose configured members are `configured`, read from `disk`.
    pub fn open(disk: Arc<D>, configured: impl IntoIterator<Item = NodeId>) -> std::io::Result<Standing<D>> {
        let mut seed: BTreeSet<NodeId> = configured.into_iter().collect();
        let joined = joined(disk.as_ref())?;
        if let Some(joined) = &joined {
            seed.extend(joined.membership.members.keys().copied());
        }
        let removed = removed(disk.as_ref())?.map(|record| record.message());
        let seen = match disk.get(Space::Meta, META_SEEN)? {
            Some(bytes) => codec::decode(&bytes, "membership seen")?,
            None => Seen::default(),
        };
        Ok(Standing {
            disk,
            seed,
            joined: joined.map(|joined| joined.membership),
            seen: Mutex::new(seen),
            removed: Mutex::new(removed),
        })
    }

    /// Whether this node joined a running cluster.
    pub fn joined(&self) -> bool {
        self.joined.is_some()
    }

    /// The voters of the membership a join answered, with their peer addresses (empty when this
    /// node did not join).
    pub fn joined_voters(&self) -> Vec<(NodeId, String)> {
        let Some(joined) = &self.joined else { return Vec::new() };
        joined.voters.iter().filter_map(|id| Some((*id, joined.members.get(id)?.addr.clone()))).collect()
    }

    /// The members to trust before the log holds a membership.
    pub fn seed(&self) -> &BTreeSet<NodeId> {
        &self.seed
    }

    /// Notes the membership this node has applied now (committed: never one that a later
    /// leader may truncate), at log index `index`, by its members' ids: those of the last one
    /// noted that are not in it left at `index`.
    pub fn note_applied_membership(&self, index: u64, members: BTreeSet<NodeId>) {
        let mut seen = self.seen.lock().expect("standing lock");
        if seen.members == members {
            seen.index = seen.index.max(index);
            return;
        }
        let left: Vec<NodeId> = seen.members.difference(&members).copied().collect();
        for id in left {
            seen.former.entry(id).or_insert(index);
        }
        seen.former.retain(|id, _| !members.contains(id));
        seen.members = members;
        seen.index = index;
        // Kept synced, so that a restart still knows who left. A crash before this write leaves
        // the older membership on disk, and the first one applied after the restart is judged
        // against it alike.
        let written = codec::encode(&*seen)
            .and_then(|bytes| self.disk.write(vec![Op::Put(Space::Meta, META_SEEN.to_vec(), bytes)], Durability::Sync));
        if let Err(error) = written {
            tracing::warn!(%error, "could not record the applied membership's former members; a restart forgets them");
        }
    }

    /// The log index of the first applied membership without `id`, when this node saw `id`
    /// leave one since it started.
    pub fn saw_leave(&self, id: NodeId) -> Option<u64> {
        self.seen.lock().expect("standing lock").former.get(&id).copied()
    }

    /// The log index of the applied membership this node last noted, and whether it holds `id`.
    pub fn applied_membership(&self, id: NodeId) -> (u64, bool) {
        let seen = self.seen.lock().expect("standing lock");
        (seen.index, seen.members.contains(&id))
    }

    /// Whether a notice that the membership at log index `index` no longer holds node `id` (this
    /// node) concerns it: not when it knows a membership at or after `index` that holds it (it
    /// was added again, or the notice is stale).
    pub fn notice_applies(&self, id: NodeId, index: u64) -> bool {
        let (applied, holds) = self.applied_membership(id);
        let joined_since = self.joined.as_ref().is_some_and(|joined| joined.index >= index);
        let knows_later = holds && applied >= index;
        !(knows_later || joined_since)
    }

    /// Why this node no longer serves, once it was removed.
    pub fn removed(&self) -> Option<String> {
        self.removed.lock().expect("standing lock").clone()
    }

    /// Records that this node was removed (`record`), durably, unless it already was; answers
    /// the reason it gives, and whether this call recorded it.
    pub fn record_removed(&self, record: &RemovedRecord) -> std::io::Result<(String, bool)> {
        let mut removed = self.removed.lock().expect("standing lock");
        if let Some(message) = removed.as_ref() {
            return Ok((message.clone(), false));
        }
        let message = record.message();
        let op = Op::Put(Space::Meta, META_REMOVED.to_vec(), codec::encode(record)?);
        self.disk.write(vec![op], Durability::Sync)?;
        *removed = Some(message.clone());
        Ok((message, true))
    }
}

#[cfg(test)]
mod tests {
    use raft_store::MemoryDisk;

    use super::*;

    #[test]
    fn a_member_seen_leaving_is_remembered_until_it_is_back_and_the_marker_stays() {
        let disk = Arc::new(MemoryDisk::new());
        let standing = Standing::open(disk.clone(), [1, 2, 3]).expect("open");
        assert!(!standing.joined());
        standing.note_applied_membership(1, [1, 2, 3].into());
        standing.note_applied_membership(10, [1, 2, 3, 4].into());
        assert_eq!((standing.saw_leave(4), standing.saw_leave(3)), (None, None));
        standing.note_applied_membership(20, [1, 2, 4].into());
        assert_eq!(standing.saw_leave(3), Some(20));
        assert_eq!(standing.applied_membership(3), (20, false));
        standing.note_applied_membership(30, [1, 2, 4, 5].into());
        assert_eq!(standing.saw_leave(3), Some(20), "the first membership without it is remembered");
        standing.note_applied_membership(40, [1, 2, 3, 4].into());
        assert_eq!(standing.saw_leave(3), None);
        assert_eq!(standing.saw_leave(5), Some(40));
        assert_eq!(standing.applied_membership(3), (40, true));

        // A notice of a membership this node knows is older than one that holds it is stale.
        assert!(!standing.notice_applies(3, 35) && !standing.notice_applies(3, 40));
        assert!(standing.notice_applies(3, 45));
        let record = RemovedRecord { cluster_name: "c".into(), cluster_id: 7, node_id: 3, index: 45, by: 1 };
        let (message, recorded) = standing.record_removed(&record).expect("recorded");
        assert!(recorded);
        assert_eq!(standing.record_removed(&record).expect("again"), (message.clone(), false));
        assert!(
            message.contains("node 3 was removed from cluster \"c\"") && message.contains("at index 45"),
            "{message}"
        );
        assert_eq!(Standing::open(disk.clone(), [1]).expect("open").removed(), Some(message));
        assert_eq!(removed(disk.as_ref()).expect("read"), Some(record));
    }

    #[test]
    fn a_member_seen_leaving_is_remembered_across_a_restart() {
        let disk = Arc::new(MemoryDisk::new());
        let standing = Standing::open(disk.clone(), [1, 2, 3]).expect("open");
        standing.note_applied_membership(1, [1, 2, 3].into());
        standing.note_applied_membership(20, [1, 2, 4].into());
        let reopened = Standing::open(disk.clone(), [1, 2, 3]).expect("open");
        assert_eq!(reopened.saw_leave(3), Some(20));
        reopened.note_applied_membership(20, [1, 2, 4].into());
        assert_eq!((reopened.saw_leave(3), reopened.applied_membership(4)), (Some(20), (20, true)));
        // A restart from before the removal was recorded judges the next one against the older.
        let disk = Arc::new(MemoryDisk::new());
        Standing::open(disk.clone(), [1, 2, 3]).expect("open").note_applied_membership(1, [1, 2, 3].into());
        let restarted = Standing::open(disk.clone(), [1, 2, 3]).expect("open");
        restarted.note_applied_membership(20, [1, 2, 4].into());
        assert_eq!(restarted.saw_leave(3), Some(20));
    }
}
