//! Rejoining after data loss: a node whose data directory was lost or damaged, and moved away,
//! comes back empty (`strand node --rejoin`). Until it has caught up it must not vote: with an
//! empty log it would grant its vote to any candidate, even one that lacks entries the lost
//! directory had helped commit, and a leader elected that way would drop them.
//!
//! So a node started with `rejoin` on an empty data directory records a marker on disk; while the
//! marker is set the node refuses votes and pre-votes. After each start with the marker set, it
//! asks the other members for their current term and last log id (`bootstrap::find_rejoin_target`)
//! and, once enough have answered ([`judge_target`]), takes the greatest of each as its target.
//! Until then it accepts no replication at all, and after, none from a leader of a term below the
//! target's term ([`Rejoin::admit_leader`]). It clears the marker, and votes again, once its own
//! last log id reaches the target's (term first, then index).
//!
//! Why that is enough: an entry committed before the data was lost is held by a majority of the
//! members. At most one of them is this node, so every set of `others / 2 + 1` other members
//! that did not lose their data themselves includes one that holds the entry, and its last log id
//! is at least the entry's. A log whose last id is at least every committed entry's holds them all
//! (Raft's log matching), and a candidate gets this node's vote only with a last log id at least
//! this node's, so such a candidate holds them too. A target taken from one append of the leader
//! would not do: an append may start at the leader's stale idea of this node's log and end far
//! below the leader's log end, and a stale leader of an older term may append too.
//!
//! The node lost its vote as well: it would accept the appends of a deposed leader of a term it
//! had already moved past, and its acknowledgements would let that leader commit entries that
//! conflict with ones a later leader committed. A term that a leader was elected in, or that
//! committed anything, is held by a majority, so the same answers include it; a leader of a term
//! below their greatest is deposed, and the node refuses it.
//!
//! Invariant: the marker is synced before the node serves anything, and cleared only after the
//! node's last log id reached the greatest last log id of a large enough set of other members
//! that were asked after this start; until those answers came, the node accepts no append or
//! snapshot, and after, none of a term below the greatest term they named.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use raft_store::{Disk, Durability, NodeId, Op, Space};

/// Meta key set while a rejoining node has not caught up.
pub const META_REJOINING: &[u8] = b"rejoining";

/// A log id as (term, index), ordered as Raft orders log ids; (0, 0) for an empty log.
pub type LastLog = (u64, u64);

/// What one other member answered: whether it is rejoining itself, its term and last log id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// It lost its data too, so its log proves nothing.
    pub rejoining: bool,
    /// Its current term.
    pub term: u64,
    /// Its last log id.
    pub last_log: LastLog,
}

/// What a rejoining node must reach before it votes, and the lowest leader term it accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// The greatest current term among the answers: a leader of a lower term is deposed.
    pub term: u64,
    /// The greatest last log id among the answers.
    pub last_log: LastLog,
}

/// How many of `others` other members must answer, none of them rejoining, before a rejoining
/// node knows its target: `others / 2 + 1`, which every majority of the whole cluster, less this
/// node, meets.
pub fn answers_needed(others: usize) -> usize {
    if others == 0 { 0 } else { others / 2 + 1 }
}

/// The target of a rejoining node, from the answers of the other members (`None`: no answer):
/// the greatest term and the greatest last log id among them once enough answered, else how many
/// more answers are needed.
pub fn judge_target(answers: &BTreeMap<NodeId, Option<Answer>>) -> Result<Target, usize> {
    let counted: Vec<&Answer> = answers.values().flatten().filter(|answer| !answer.rejoining).collect();
    let needed = answers_needed(answers.len());
    if counted.len() < needed {
        return Err(needed - counted.len());
    }
    Ok(Target {
        term: counted.iter().map(|answer| answer.term).max().unwrap_or(0),
        last_log: counted.iter().map(|answer| answer.last_log).max().unwrap_or((0, 0)),
    })
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
            tracing::warn!(
                "rejoining after data loss: this node does not vote until it has caught up with the cluster"
            );
        }
        Ok(Rejoin { disk, rejoining: AtomicBool::new(rejoining), target: Mutex::new(None) })
    }

    /// Whether the node still must not vote.
    pub fn is_rejoining(&self) -> bool {
        self.rejoining.load(Ordering::Acquire)
    }

    /// The target, once the other members' answers set it.
    pub fn target(&self) -> Option<Target> {
        *self.target.lock().expect("rejoin target lock")
    }

    /// Sets the target (see the module header).
    pub fn set_target(&self, target: Target) {
        *self.target.lock().expect("rejoin target lock") = Some(target);
    }

    /// Whether this node may accept an append or a snapshot from a leader of `term`: always once
    /// it caught up; while rejoining, only once the target is known and from its term or later.
    pub fn admit_leader(&self, term: u64) -> Result<(), String> {
        if !self.is_rejoining() {
            return Ok(());
        }
        match self.target() {
            None => Err("this node is rejoining after losing its data and accepts no replication until enough other members told it the cluster's term; it keeps asking them".into()),
            Some(target) if term < target.term => Err(format!(
                "this node is rejoining after losing its data and refuses a leader of term {term}: the other members are at term {}, so that leader is deposed",
                target.term
            )),
            Some(_) => Ok(()),
        }
    }

    /// Clears the marker of a node that lost its data before the cluster formed (see
    /// `crate::join`): it lost nothing of the cluster, and starts as the initial member it was.
    pub fn not_formed(&self) -> std::io::Result<()> {
        self.clear()
    }

    /// Deletes the marker (synced) and votes again.
    fn clear(&self) -> std::io::Result<()> {
        self.disk.write(vec![Op::Delete(Space::Meta, META_REJOINING.to_vec())], Durability::Sync)?;
        self.rejoining.store(false, Ordering::Release);
        Ok(())
    }

    /// Clears the marker once this node's last log id reaches the target; answers whether it did
    /// now.
    pub fn check_caught_up(&self, last_log: LastLog) -> std::io::Result<bool> {
        if !self.is_rejoining() {
            return Ok(false);
        }
        let Some(Target { last_log: target, .. }) = self.target() else { return Ok(false) };
        if last_log < target {
            return Ok(false);
        }
        self.clear()?;
        tracing::info!(term = target.0, index = target.1, "caught up after rejoining; this node votes again");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use raft_store::MemoryDisk;

    use super::*;

    #[test]
    fn a_rejoining_node_votes_again_only_once_its_last_log_id_reaches_the_target() {
        let disk = Arc::new(MemoryDisk::new());
        let rejoin = Rejoin::open(disk.clone(), true).unwrap();
        assert!(rejoin.is_rejoining());
        assert!(!rejoin.check_caught_up((9, 1_000)).unwrap(), "no target yet");
        assert!(rejoin.admit_leader(9).is_err(), "no replication before the other members answered");
        rejoin.set_target(Target { term: 4, last_log: (3, 500) });
        assert!(rejoin.admit_leader(3).unwrap_err().contains("refuses a leader of term 3"), "a deposed leader");
        assert!(rejoin.admit_leader(4).is_ok());
        assert!(!rejoin.check_caught_up((3, 499)).unwrap());
        assert!(!rejoin.check_caught_up((2, 900)).unwrap(), "a longer log of an older term is not enough");
        assert!(Rejoin::open(disk.clone(), false).unwrap().is_rejoining(), "the marker survives a restart");
        assert!(rejoin.check_caught_up((4, 20)).unwrap(), "a later term is past every entry of the target's");
        assert!(!rejoin.is_rejoining());
        assert!(rejoin.admit_leader(1).is_ok(), "once caught up, openraft's own vote decides");
        assert!(!Rejoin::open(disk, false).unwrap().is_rejoining(), "the cleared marker stays cleared");
    }

    #[test]
    fn the_target_is_the_greatest_last_log_id_of_enough_members_that_kept_their_data() {
        assert_eq!((answers_needed(0), answers_needed(2), answers_needed(4)), (0, 2, 3));
        let answer = |rejoining, term, index| Some(Answer { rejoining, term: term + 1, last_log: (term, index) });
        let target = |term, index| Ok(Target { term: term + 1, last_log: (term, index) });
        let answers = |list: Vec<(u64, Option<Answer>)>| list.into_iter().collect::<BTreeMap<_, _>>();
        assert_eq!(judge_target(&answers(vec![])), Ok(Target::default()), "a single-node cluster");
        // Three members: both others must answer (the entry may be on one of them only).
        assert_eq!(judge_target(&answers(vec![(1, answer(false, 5, 80)), (3, None)])), Err(1));
        assert_eq!(judge_target(&answers(vec![(1, answer(false, 5, 80)), (3, answer(true, 6, 2))])), Err(1));
        assert_eq!(judge_target(&answers(vec![(1, answer(false, 5, 80)), (3, answer(false, 6, 40))])), target(6, 40));
        // Five members: three of the four others.
        let five =
            answers(vec![(1, answer(false, 2, 9)), (2, None), (4, answer(false, 2, 12)), (5, answer(false, 1, 30))]);
        assert_eq!(judge_target(&five), Ok(Target { term: 3, last_log: (2, 12) }));
    }
}
