//! A node's standing in its cluster's membership, as far as it is not in Raft's own log: the
//! membership a joining node was given (`strand node --join`), which it trusts until its log
//! holds one, and the marker of a node that was removed.
//!
//! Who counts as a member: once this node's log holds a membership, that membership alone (the
//! static `--peers` only seed the first start). Before, the seed: the configured `--peers`, and
//! the membership a join answered. A message from a leader (an append, a snapshot) is also taken
//! from a node the membership does not hold yet, as long as this node never saw it leave a
//! membership: a member that is behind may not know of a node added after its last entry, and
//! must still take that node's appends once it leads.
//!
//! A removed node (told so by the leader that removed it) writes the marker, stops its Raft
//! core, answers every client request with the reason, and refuses to start again on that data
//! directory: the way back is a fresh directory and `--join`.
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
    /// The leader that removed it.
    pub by: NodeId,
}

impl RemovedRecord {
    /// Why the node does not serve, and what to do.
    pub fn message(&self) -> String {
        format!(
            "node {} was removed from cluster {:?} ({:016x}) at index {} (by leader {}); it no longer serves. Ask another member, or bring this host back with a fresh --data-dir, a new --id and --join",
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

/// A running node's standing.
pub struct Standing<D: Disk> {
    disk: Arc<D>,
    /// The members to trust before the log holds a membership (configured peers, this node, and
    /// those a join answered).
    seed: BTreeSet<NodeId>,
    /// The membership a join answered, if this node joined a running cluster (it never
    /// initialises one).
    joined: Option<crate::peer::Changed>,
    /// Members this node saw leave a membership since it started.
    former: Mutex<BTreeSet<NodeId>>,
    /// The members of the last membership this node saw.
    last: Mutex<BTreeSet<NodeId>>,
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
        Ok(Standing {
            disk,
            seed,
            joined: joined.map(|joined| joined.membership),
            former: Mutex::new(BTreeSet::new()),
            last: Mutex::new(BTreeSet::new()),
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

    /// Notes the membership this node holds now (its members' ids): those of the last one that
    /// are not in it left.
    pub fn note_membership(&self, members: BTreeSet<NodeId>) {
        let mut last = self.last.lock().expect("standing lock");
        if *last == members {
            return;
        }
        let mut former = self.former.lock().expect("standing lock");
        former.extend(last.difference(&members).copied());
        for id in &members {
            former.remove(id);
        }
        *last = members;
    }

    /// Whether this node saw `id` leave a membership since it started.
    pub fn saw_leave(&self, id: NodeId) -> bool {
        self.former.lock().expect("standing lock").contains(&id)
    }

    /// Why this node no longer serves, once it was removed.
    pub fn removed(&self) -> Option<String> {
        self.removed.lock().expect("standing lock").clone()
    }

    /// Records that this node was removed (`record`), durably; answers the reason it gives.
    pub fn record_removed(&self, record: &RemovedRecord) -> std::io::Result<String> {
        let message = record.message();
        let mut removed = self.removed.lock().expect("standing lock");
        if removed.is_none() {
            let op = Op::Put(Space::Meta, META_REMOVED.to_vec(), codec::encode(record)?);
            self.disk.write(vec![op], Durability::Sync)?;
            *removed = Some(message.clone());
        }
        Ok(message)
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
        standing.note_membership([1, 2, 3].into());
        standing.note_membership([1, 2, 3, 4].into());
        assert!(!standing.saw_leave(4) && !standing.saw_leave(3));
        standing.note_membership([1, 2, 4].into());
        assert!(standing.saw_leave(3));
        standing.note_membership([1, 2, 3, 4].into());
        assert!(!standing.saw_leave(3));

        let record = RemovedRecord { cluster_name: "c".into(), cluster_id: 7, node_id: 3, index: 40, by: 1 };
        let message = standing.record_removed(&record).expect("recorded");
        assert!(
            message.contains("node 3 was removed from cluster \"c\"") && message.contains("at index 40"),
            "{message}"
        );
        assert_eq!(Standing::open(disk.clone(), [1]).expect("open").removed(), Some(message));
        assert_eq!(removed(disk.as_ref()).expect("read"), Some(record));
    }
}
