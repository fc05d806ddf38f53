//! Membership changes (`strand member add|promote|remove`, `strand node --join`), made by the
//! leader through openraft's joint consensus; asked of any node, a follower forwards them.
//!
//! Every change is checked against the membership the leader holds, then proposed with
//! openraft's precondition that the membership is still that one, so two changes that race are
//! never both made: the second is refused and nothing changes. A member always enters as a
//! learner, which the quorum never waits for; it becomes a voter by `member promote`, or by the
//! member watch's auto-promotion once it has stayed caught up for the stabilization time
//! ([`promotion_due`]).
//!
//! Refused, each with what to do, and nothing changes: an id of 0 or an address that is not
//! `host:port`; adding an id or a peer address in use; promoting or removing an unknown id;
//! promoting a learner that is unreachable, rejoining or more than [`PROMOTE_LAG_ENTRIES_MAX`]
//! entries behind; removing the last voter; any change while another is in progress (a joint
//! configuration, or a membership entry not yet applied).
//!
//! Removing the leader itself first hands the leadership to another voter
//! (`transfer::move_here`) and answers `Unavailable`, so that the asking node forwards the
//! removal again, to the new leader. Once a removal committed, the leader tells the removed
//! member ([`notify_removed`]), which stops serving (see `node::removed`), and closes its
//! channels to it.
//!
//! A leader that lost its office between the two steps of a voter change leaves the cluster in a
//! joint configuration, which openraft does not complete by itself, and in which every later
//! change would be refused as in progress: the member watch of the next leader completes it
//! ([`complete_joint`]), and tells a node it leaves out that it was removed.
//!
//! Invariant: a change is proposed only on the leader, only after every check passed, and only
//! while the membership is the one the checks read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::proto as pb;
use openraft::ChangeMembers;
use openraft::async_runtime::WatchReceiver;
use openraft::raft::Precondition;
use raft_store::types::Member;
use raft_store::{Disk, NodeId};

use crate::core::NodeCore;
use crate::peer::network::{Peers, encode};
use crate::peer::{ChangeRefused, Changed, MemberChange, Removed, listed};

/// Most entries a learner may lack to be promoted: a voter far behind would hold up commits
/// until it caught up.
pub const PROMOTE_LAG_ENTRIES_MAX: u64 = 1_000;
/// How long the leader keeps telling a removed member that it was removed, while it does not
/// answer.
pub const NOTIFY_REMOVED_FOR: Duration = Duration::from_secs(60);

/// Checks that `address` is `host:port`.
fn check_address(address: &str, what: &str) -> Result<(), ChangeRefused> {
    if api::validate::is_host_port(address) {
        Ok(())
    } else {
        Err(ChangeRefused::Invalid(format!("{what} {address:?} is not host:port (for example 10.0.0.4:7500)")))
    }
}

/// Whether `id` can be promoted now, from the member watch's last look (`progress`) and
/// openraft's matched index for it (`matched`), while the leader's log ends at `last`.
pub fn check_promotable(
    id: NodeId,
    progress: Option<&pb::MemberProgress>,
    matched: Option<u64>,
    last: u64,
) -> Result<(), ChangeRefused> {
    if let Some(member) = progress {
        if !member.reachable {
            return Err(ChangeRefused::NotReady(format!(
                "node {id} did not answer the leader's last status request; start it (`strand node --join`), or check the network, then promote it"
            )));
        }
        if member.rejoining {
            return Err(ChangeRefused::NotReady(format!(
                "node {id} is rejoining after losing its data; promote it once it has caught up"
            )));
        }
    }
    let Some(matched) = matched else {
        return Err(ChangeRefused::NotReady(format!(
            "the leader has not matched any of node {id}'s log yet (it is starting, or catching up); promote it once `strand member list` shows it caught up"
        )));
    };
    let lag = last.saturating_sub(matched);
    if lag > PROMOTE_LAG_ENTRIES_MAX {
        return Err(ChangeRefused::NotReady(format!(
            "node {id} is {lag} entries behind the leader, more than the {PROMOTE_LAG_ENTRIES_MAX} a promotion allows (a voter far behind would hold up every commit); wait until `strand member list` shows it caught up"
        )));
    }
    Ok(())
}

/// Makes `change` on this node, which must lead.
pub async fn change_here<D: Disk>(
    core: &NodeCore<D>,
    peers: &Peers,
    change: MemberChange,
) -> Result<Changed, ChangeRefused> {
    let metrics = core.raft.metrics().borrow_watched().clone();
    if metrics.current_leader != Some(core.id) {
        return Err(ChangeRefused::Unavailable(format!("node {} is no longer the leader; ask again", core.id)));
    }
    let stored = metrics.membership_config.clone();
    let membership = stored.membership();
    let index = stored.log_id().map_or(0, |log_id| log_id.index);
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    let applied = metrics.last_applied.map_or(0, |log_id| log_id.index);
    // A join that asks again after a lost answer changes nothing: answered whatever is under way.
    // Only while the member is a learner that never acknowledged an entry: a joining node asks
    // before its Raft starts, so one with a log, or a voter, is another start on a lost disk.
    if let MemberChange::Add { id, member, join: true } = &change
        && let Some(existing) = membership.get_node(id)
    {
        if existing.addr == member.addr
            && !voters.contains(id)
            && super::transfer::matched_index(&metrics, *id).is_none()
        {
            return Ok(Changed::of(membership, index, core.id));
        }
        return Err(ChangeRefused::Exists(format!(
            "node {id} is already a {} of this cluster ({existing}): a member whose data directory was lost comes back under its id with --rejoin instead of --join, so that it does not vote before it has caught up; a new node takes an id no member has",
            if voters.contains(id) { "voter" } else { "learner" }
        )));
    }
    if membership.get_joint_config().len() > 1 || index > applied {
        return Err(ChangeRefused::NotReady(format!(
            "another membership change is in progress (the membership at index {index} has not been applied yet); try again in a moment"
        )));
    }
    let members = || listed(membership.nodes().map(|(id, _)| *id));
    let unknown = |id: NodeId| {
        ChangeRefused::Unknown(format!(
            "node {id} is not a member of this cluster (members: {}); name one of them",
            members()
        ))
    };
    let last = metrics.last_log_index.unwrap_or(0);
    let (changes, what): (ChangeMembers<NodeId, Member>, String) = match &change {
        MemberChange::Add { id, member, join: _ } => {
            if *id == 0 {
                return Err(ChangeRefused::Invalid("node id 0 is reserved; give 1 or higher".into()));
            }
            check_address(&member.addr, "the peer address")?;
            if !member.client_addr.is_empty() {
                check_address(&member.client_addr, "the client address")?;
            }
            if let Some(existing) = membership.get_node(id) {
                return Err(ChangeRefused::Exists(format!(
                    "node {id} is already a member ({} at {existing}); give the new node an id no member has, or remove node {id} first",
                    if voters.contains(id) { "voter" } else { "learner" }
                )));
            }
            if let Some((other, _)) = membership.nodes().find(|(_, existing)| existing.addr == member.addr) {
                return Err(ChangeRefused::Exists(format!(
                    "peer address {} is already node {other}'s; give the new node an address of its own, or remove node {other} first",
                    member.addr
                )));
            }
            let what = format!("adding node {id} ({member}) as a learner");
            (ChangeMembers::AddNodes(BTreeMap::from([(*id, member.clone())])), what)
        }
        MemberChange::Promote(id) => {
            if membership.get_node(id).is_none() {
                return Err(unknown(*id));
            }
            if voters.contains(id) {
                return Err(ChangeRefused::Exists(format!("node {id} is a voter already")));
            }
            let progress = core.members.lock().expect("the members lock is never poisoned").clone();
            let matched = super::transfer::matched_index(&metrics, *id);
            check_promotable(*id, progress.iter().find(|member| member.id == *id), matched, last)?;
            (ChangeMembers::AddVoterIds(BTreeSet::from([*id])), format!("promoting node {id} to a voter"))
        }
        MemberChange::Remove(id) => {
            if membership.get_node(id).is_none() {
                return Err(unknown(*id));
            }
            if voters.contains(id) {
                if voters.len() == 1 {
                    return Err(ChangeRefused::NotReady(format!(
                        "node {id} is the last voter; a cluster needs one. Add and promote another member first"
                    )));
                }
                if *id == core.id {
                    return hand_over_before_removal(core, &voters).await;
                }
                (ChangeMembers::RemoveVoters(BTreeSet::from([*id])), format!("removing voter {id}"))
            } else {
                (ChangeMembers::RemoveNodes(BTreeSet::from([*id])), format!("removing learner {id}"))
            }
        }
    };
    tracing::info!(node = core.id, index, "{what}");
    let precondition = Precondition::LastMembershipLogId { last_membership_log_id: *stored.log_id() };
    let written = core.raft.change_membership_if(changes, false, [precondition]).await;
    let response = written.map_err(|error| {
        tracing::warn!(node = core.id, %error, "{what} failed");
        match error {
            openraft::errors::RaftError::APIError(openraft::errors::ClientWriteError::ForwardToLeader(_)) => {
                ChangeRefused::Unavailable(format!("node {} stopped leading while {what}; ask again", core.id))
            }
            openraft::errors::RaftError::APIError(error) => ChangeRefused::NotReady(format!(
                "{what} was refused: {error}; check `strand member list`, and try again"
            )),
            openraft::errors::RaftError::Fatal(fatal) => {
                ChangeRefused::Unavailable(format!("raft stopped on node {}: {fatal}", core.id))
            }
        }
    })?;
    let after = response.membership.unwrap_or_else(|| membership.clone());
    let changed = Changed::of(&after, response.log_id.index, core.id);
    tracing::info!(node = core.id, index = changed.index, voters = %listed(changed.voters.iter().copied()), "{what}: done");
    if let MemberChange::Remove(id) = change
        && let Some(member) = membership.get_node(&id)
    {
        peers.forget(id);
        notify_removed(core, peers, id, member.addr.clone(), changed.index);
    }
    Ok(changed)
}

/// Completes a joint configuration left by a leader that lost its office between the two steps
/// of a change (openraft leaves the cluster in it): once it is applied, this leader, which must
/// lead, proposes the joint configuration's newer voter set alone, then tells each node that the
/// completed membership no longer holds that it was removed, as the leader that began the change
/// would have. Answers whether it did.
pub async fn complete_joint<D: Disk>(core: &NodeCore<D>, peers: &Peers) -> bool {
    let metrics = core.raft.metrics().borrow_watched().clone();
    let stored = metrics.membership_config.clone();
    let configs = stored.membership().get_joint_config();
    let index = stored.log_id().map_or(0, |log_id| log_id.index);
    let applied = metrics.last_applied.map_or(0, |log_id| log_id.index);
    if metrics.current_leader != Some(core.id) || configs.len() < 2 || index > applied {
        return false;
    }
    let Some(newest) = configs.last().cloned() else { return false };
    tracing::warn!(
        node = core.id,
        index,
        voters = %listed(newest.iter().copied()),
        "the membership is left in a joint configuration (a leader lost its office mid-change): completing it"
    );
    let precondition = Precondition::LastMembershipLogId { last_membership_log_id: *stored.log_id() };
    match core.raft.change_membership_if(ChangeMembers::ReplaceAllVoters(newest), false, [precondition]).await {
        Ok(response) => {
            let after = response.membership.unwrap_or_else(|| stored.membership().clone());
            for (id, member) in stored.membership().nodes() {
                if after.get_node(id).is_none() {
                    peers.forget(*id);
                    notify_removed(core, peers, *id, member.addr.clone(), response.log_id.index);
                }
            }
            true
        }
        Err(error) => {
            tracing::warn!(node = core.id, %error, "could not complete the joint configuration; trying again");
            false
        }
    }
}

/// This leader is to be removed: hands the leadership to the most caught-up other voter first,
/// and answers `Unavailable`, so that the removal is asked again of the new leader.
async fn hand_over_before_removal<D: Disk>(
    core: &NodeCore<D>,
    voters: &BTreeSet<NodeId>,
) -> Result<Changed, ChangeRefused> {
    let Some(to) = super::transfer::successor(core) else {
        return Err(ChangeRefused::NotReady(format!(
            "node {} leads and is to be removed, but no other voter ({}) is ready to take over; try again once one has caught up",
            core.id,
            listed(voters.iter().copied().filter(|id| *id != core.id))
        )));
    };
    let wait = Duration::from_millis(core.config.raft.election_timeout_ms_max * 3);
    match super::transfer::move_here(core, to, wait).await {
        Ok(moved) => Err(ChangeRefused::Unavailable(format!(
            "node {} handed the leadership to node {} before its removal; ask again",
            core.id, moved.to
        ))),
        Err(refused) => Err(ChangeRefused::Unavailable(format!(
            "node {} could not hand the leadership over before its removal ({refused}); try again",
            core.id
        ))),
    }
}

/// Tells member `id` at `address` that the membership at `index` no longer holds it, in the
/// background, until it answers or [`NOTIFY_REMOVED_FOR`] has passed.
pub fn notify_removed<D: Disk>(core: &NodeCore<D>, peers: &Peers, id: NodeId, address: String, index: u64) {
    let notice = Removed { index, by: core.id };
    let timeout = Duration::from_millis(core.config.raft.rpc_timeout_ms);
    let client = peers.client(id, &address);
    tokio::spawn(async move {
        let Ok(mut client) = client else { return };
        let until = tokio::time::Instant::now() + NOTIFY_REMOVED_FOR;
        while tokio::time::Instant::now() < until {
            if let Ok(Ok(_)) = tokio::time::timeout(timeout, client.removed(encode(&notice))).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        tracing::warn!(
            node = id,
            "node {id} did not answer the notice of its removal; it learns of it when it next asks a member"
        );
    });
}

/// The learners the member watch should promote now: those marked for auto-promotion that have
/// been promotable (see [`check_promotable`]) since at least `stabilization` ago, as `since`
/// records (a learner's entry is set when it first is promotable, and cleared when it is not).
pub fn promotion_due(
    learners: &[(NodeId, bool)],
    promotable: impl Fn(NodeId) -> bool,
    since: &mut BTreeMap<NodeId, tokio::time::Instant>,
    now: tokio::time::Instant,
    stabilization: Duration,
) -> Vec<NodeId> {
    since.retain(|id, _| learners.iter().any(|(learner, auto)| learner == id && *auto));
    let mut due = Vec::new();
    for (id, auto) in learners {
        if !auto {
            continue;
        }
        if !promotable(*id) {
            since.remove(id);
            continue;
        }
        let first = *since.entry(*id).or_insert(now);
        if now.saturating_duration_since(first) >= stabilization {
            due.push(*id);
        }
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learner_is_promoted_only_after_staying_promotable_for_the_stabilization_time() {
        let start = tokio::time::Instant::now();
        let stabilization = Duration::from_secs(10);
        let mut since = BTreeMap::new();
        let learners = [(4, true), (5, false)];
        assert!(promotion_due(&learners, |_| true, &mut since, start, stabilization).is_empty(), "just caught up");
        let later = start + Duration::from_secs(6);
        assert!(promotion_due(&learners, |_| true, &mut since, later, stabilization).is_empty());
        // Falling behind starts the time again.
        assert!(promotion_due(&learners, |_| false, &mut since, later, stabilization).is_empty());
        let again = later + Duration::from_secs(1);
        assert!(promotion_due(&learners, |_| true, &mut since, again, stabilization).is_empty());
        assert!(
            promotion_due(&learners, |_| true, &mut since, again + Duration::from_secs(9), stabilization).is_empty()
        );
        assert_eq!(promotion_due(&learners, |_| true, &mut since, again + stabilization, stabilization), vec![4]);
        assert!(!since.contains_key(&5), "a learner held by --learner is never promoted");
    }

    #[test]
    fn a_promotion_needs_a_reachable_caught_up_learner() {
        let progress = |reachable, rejoining| pb::MemberProgress { id: 4, reachable, rejoining, ..Default::default() };
        assert!(check_promotable(4, Some(&progress(true, false)), Some(990), 1_000).is_ok());
        assert!(check_promotable(4, None, Some(1_000), 1_000).is_ok());
        for (progress, matched) in [
            (Some(progress(false, false)), Some(1_000)),
            (Some(progress(true, true)), Some(1_000)),
            (None, None),
            (None, Some(10)),
        ] {
            let refused = check_promotable(4, progress.as_ref(), matched, 5_000).expect_err("refused");
            assert!(matches!(refused, ChangeRefused::NotReady(_)), "{refused}");
        }
        assert!(check_address("10.0.0.4:7500", "x").is_ok());
        for bad in ["10.0.0.4", ":7500", "h:0", "h:x", ""] {
            assert!(check_address(bad, "x").is_err(), "{bad}");
        }
    }
}
