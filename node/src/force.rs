//! `strand node --force-new-cluster`: recovery from a lost quorum. A cluster that lost a
//! majority of its voters for good can commit nothing; this starts a one-voter cluster from one
//! survivor's data, keeping every entry in its log, committed or not. More members are then
//! added with `member add` / `--join`.
//!
//! openraft has no API for this, so it is a rewrite of the stored membership, made before Raft
//! starts: a new vote of the next term for this node, and one membership entry of that term
//! after the last entry of the log, naming this node as the only voter (and member). openraft
//! takes the last membership entry of the log as the membership in effect, whether committed or
//! not, so the node stands alone at once, elects itself, and commits its whole log, the new
//! entry included, with its first entry as leader.
//!
//! Why this is as safe as it can be: the entries committed before the loss are on a majority, so
//! a survivor that holds them all keeps them all; choose the survivor with the greatest last log
//! id (`strand cluster status` while it runs, or its log). Entries it holds that were never
//! committed become committed: the old cluster never acknowledged them, so no client saw them
//! lost, but a client that saw its request time out may find it done. The new entry's term is
//! above every term the survivor saw, so no entry of the old members' logs can be taken for it;
//! the old members are no longer in the membership, so their messages are refused (see
//! `crate::standing`) should one come back, and their data directories must not be started
//! again. The cluster keeps its id and name.
//!
//! Invariant: only with the flag given explicitly, only on a directory that holds a log or a
//! snapshot, and only before Raft starts.

use std::collections::{BTreeMap, BTreeSet};

use openraft::entry::RaftEntry;
use raft_store::types::{Entry, LogId, Member, Vote};
use raft_store::{Disk, LogStore};

use crate::config::NodeConfig;

/// Rewrites the stored membership of `log` so that this node is the only voter (see the module
/// header). Answers the index of the new membership entry.
pub async fn force_new_cluster<D: Disk>(log: &mut LogStore<D>, config: &NodeConfig) -> Result<u64, String> {
    use openraft::storage::RaftLogStorage;
    let dir = config.data_dir.display();
    let io = |what: &'static str| move |error: std::io::Error| format!("--force-new-cluster: cannot {what}: {error}");
    let last = log.last_log_id().map_err(io("read the log"))?.ok_or_else(|| {
        format!(
            "refusing --force-new-cluster: {dir} holds no state (no log entry, no snapshot); run it on the data directory of a member that survived"
        )
    })?;
    let vote = log.vote().map_err(io("read the vote"))?;
    let term = vote.map_or(0, |vote| vote.leader_id().term).max(last.leader_id.term) + 1;
    let member =
        Member { addr: config.advertised_peer(), client_addr: config.advertised_client(), auto_promote: false };
    let membership =
        openraft::Membership::new(vec![BTreeSet::from([config.id])], BTreeMap::from([(config.id, member)]))
            .map_err(|error| format!("--force-new-cluster: {error}"))?;
    let index = last.index + 1;
    // The vote first: the entry's term must never be above the stored vote's.
    log.save_vote(&Vote::new(term, config.id)).await.map_err(io("write the vote"))?;
    let entry = Entry::new_membership(LogId::new_term_index(term, index), membership);
    log.append_offline(entry).map_err(io("write the membership"))?;
    tracing::warn!(
        node = config.id,
        index,
        term,
        last_log = %last,
        "--force-new-cluster: this node is now the only voter of cluster {:?}; every entry of its log is kept and will be committed. Add members with `strand member add` and `strand node --join`; never start the old members' data directories again",
        config.cluster_name
    );
    Ok(index)
}
