//! Rejoining after data loss: a node whose data directory was lost or damaged, and moved away,
//! comes back empty (`strand node --rejoin`). Until it has caught up it must not vote: with an
//! empty log it would grant its vote to any candidate, even one that lacks entries the lost
//! directory had helped commit, and a leader elected that way would drop them.
//!
//! So a node started with `rejoin` on an empty data directory records a marker on disk; while the
//! marker is set the node refuses votes and pre-votes. It notes how far the current leader's log
//! reached when that leader first replicated to it (the end of the first append of each leader
//! term: every committed entry is in the leader's log, so it is at or below that point), and once
//! its own log reaches that index it clears the marker and votes again.
//!
//! Invariant: the marker is synced before the node serves anything, and cleared only after the
//! node's log reached the current leader's log end as that leader first reported it.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use raft_store::{Disk, Durability, Op, Space};

/// Meta key set while a rejoining node has not caught up.
pub const META_REJOINING: &[u8] = b"rejoining";

/// Where a rejoining node must catch up to: the first log end reported by the current leader term.
#[derive(Clone, Copy, Debug, Default)]
struct Target {
    leader_term: u64,
    log_end: u64,
}

/// A node's rejoin state.
pub struct Rejoin<D: Disk> {
    disk: Arc<D>,
    rejoining: AtomicBool,
    target: Mutex<Option<Target>>,
}

impl<D: Disk> Rejoin<D> {
    /// Reads the marker; `start_rejoining` (an empty directory started with `rejoin`) sets it.
    pub fn open(disk: Arc<D>, start_rejoining: bool) -> std::io::Result<Rejoin<D>> {
        if start_rejoining {
            disk.write(vec![Op::Put(Space::Meta, META_REJOINING.to_vec(), vec![1])], Durability::Sync)?;
        }
        let rejoining = disk.get(Space::Meta, META_REJOINING)?.is_some();
        if rejoining {
            tracing::warn!("rejoining after data loss: this node does not vote until it has caught up with the leader");
        }
        Ok(Rejoin { disk, rejoining: AtomicBool::new(rejoining), target: Mutex::new(None) })
    }

    /// Whether the node still must not vote.
    pub fn is_rejoining(&self) -> bool {
        self.rejoining.load(Ordering::Acquire)
    }

    /// Notes an append from the leader of `leader_term` whose entries end at `log_end`: the first
    /// one of each leader term sets the target.
    pub fn observe_append(&self, leader_term: u64, log_end: u64) {
        if !self.is_rejoining() {
            return;
        }
        let mut target = self.target.lock().expect("rejoin target lock");
        if target.is_none_or(|target| target.leader_term != leader_term) {
            *target = Some(Target { leader_term, log_end });
        }
    }

    /// Clears the marker once this node's log reaches the target; answers whether it did now.
    pub fn check_caught_up(&self, last_log_index: Option<u64>) -> std::io::Result<bool> {
        if !self.is_rejoining() {
            return Ok(false);
        }
        let Some(target) = *self.target.lock().expect("rejoin target lock") else { return Ok(false) };
        if last_log_index.is_none_or(|last| last < target.log_end) {
            return Ok(false);
        }
        self.disk.write(vec![Op::Delete(Space::Meta, META_REJOINING.to_vec())], Durability::Sync)?;
        self.rejoining.store(false, Ordering::Release);
        tracing::info!(log_end = target.log_end, "caught up after rejoining; this node votes again");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use raft_store::MemoryDisk;

    use super::*;

    #[test]
    fn a_rejoining_node_votes_again_only_once_its_log_reaches_the_leaders_first_reported_end() {
        let disk = Arc::new(MemoryDisk::new());
        let rejoin = Rejoin::open(disk.clone(), true).unwrap();
        assert!(rejoin.is_rejoining());
        assert!(!rejoin.check_caught_up(Some(1_000)).unwrap(), "no leader seen yet");
        rejoin.observe_append(3, 500);
        rejoin.observe_append(3, 900); // The same leader's later appends do not move the target.
        assert!(!rejoin.check_caught_up(Some(499)).unwrap());
        assert!(Rejoin::open(disk.clone(), false).unwrap().is_rejoining(), "the marker survives a restart");
        rejoin.observe_append(4, 700); // A new leader term sets a new target.
        assert!(!rejoin.check_caught_up(Some(600)).unwrap());
        assert!(rejoin.check_caught_up(Some(700)).unwrap());
        assert!(!rejoin.is_rejoining());
        assert!(!Rejoin::open(disk, false).unwrap().is_rejoining(), "the cleared marker stays cleared");
    }
}
