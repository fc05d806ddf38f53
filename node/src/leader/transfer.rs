//! Moving the leadership to another voter (`strand cluster move-leader`): asked of any node, done
//! by the leader. A follower forwards the request to the leader over the peer channel; the
//! leader checks the target, notes the transfer itself and has openraft transfer the leadership
//! (which announces it to the other members), so that every voter, the old leader included,
//! grants the target's vote at once instead of waiting out its leader lease; it answers once the target leads, or with a timeout naming the leader it found.
//!
//! Refused, each with what to do, and nothing changes: an unknown id, a learner, a member the
//! leader's member watch found unreachable, rejoining after data loss or not catching up, or
//! more than [`MOVE_LAG_ENTRIES_MAX`] entries behind openraft's matched index for it. Moving to
//! the leader itself answers at once.
//!
//! A leader that is shutting down (SIGTERM, Ctrl-C) first hands the leadership the same way to
//! its most caught-up voter that is reachable and not rejoining ([`drain`]), so that clients see
//! a handover instead of waiting out an election.
//!
//! Invariant: the leader is asked to transfer only after every check passed, and only on the
//! node that leads.

use std::time::Duration;

use api::proto as pb;
use openraft::async_runtime::WatchReceiver;
use raft_store::{Disk, NodeId};

use crate::core::NodeCore;
use crate::peer::network::Peers;
use crate::peer::{MoveRefused, Moved, listed};

/// Most entries a target may lack when the move is asked: openraft's transfer has the target
/// catch up to the leader's log before it stands, so a target far behind would keep the cluster
/// without a leader that long.
pub const MOVE_LAG_ENTRIES_MAX: u64 = 1_000;

/// The index openraft's replication to `id` has matched, while this node leads.
pub(crate) fn matched_index(metrics: &openraft::RaftMetrics<raft_store::TypeConfig>, id: NodeId) -> Option<u64> {
    metrics
        .replication
        .as_ref()
        .and_then(|replication| replication.get(&id).cloned().flatten())
        .map(|log_id| log_id.index)
}

/// Checks that `to` may lead, from the membership and the member watch's last look
/// (`progress`), on the leader `core`: `Ok(true)` when it already leads.
fn check_target<D: Disk>(core: &NodeCore<D>, to: NodeId, progress: &[pb::MemberProgress]) -> Result<bool, MoveRefused> {
    let metrics = core.raft.metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let voters: Vec<NodeId> = membership.voter_ids().collect();
    if membership.get_node(&to).is_none() {
        return Err(MoveRefused::Unknown(format!(
            "node {to} is not a member of this cluster (members: {}); name one of them",
            listed(membership.nodes().map(|(id, _)| *id))
        )));
    }
    if !voters.contains(&to) {
        return Err(MoveRefused::NotReady(format!(
            "node {to} is a learner, and only a voter can lead; promote it first, or name a voter ({})",
            listed(voters.iter().copied())
        )));
    }
    if to == core.id {
        return Ok(true);
    }
    let last = metrics.last_log_index.unwrap_or(0);
    let member = progress.iter().find(|member| member.id == to);
    if let Some(member) = member {
        if !member.reachable {
            return Err(MoveRefused::NotReady(format!(
                "node {to} did not answer the leader's last status request; start it, or check the network, then try again"
            )));
        }
        if member.rejoining {
            return Err(MoveRefused::NotReady(format!(
                "node {to} is rejoining after losing its data and does not vote until it has caught up; try again once `strand cluster status` no longer notes it"
            )));
        }
    }
    // The member watch looks once a second; openraft's own matched index is fresher.
    let lag = last.saturating_sub(matched_index(&metrics, to).unwrap_or(0));
    let note = member.map(|member| member.note.as_str()).unwrap_or_default();
    if lag > MOVE_LAG_ENTRIES_MAX || !note.is_empty() {
        let note = if note.is_empty() { String::new() } else { format!(" ({note})") };
        return Err(MoveRefused::NotReady(format!(
            "node {to} is {lag} entries behind the leader{note}, more than the {MOVE_LAG_ENTRIES_MAX} a move allows; try again once it has caught up"
        )));
    }
    Ok(false)
}

/// Moves the leadership to `to` on this node, which must lead; waits up to `timeout` for `to` to
/// lead.
pub async fn move_here<D: Disk>(core: &NodeCore<D>, to: NodeId, timeout: Duration) -> Result<Moved, MoveRefused> {
    let (leader, term) = {
        let metrics = core.raft.metrics();
        let metrics = metrics.borrow_watched();
        (metrics.current_leader, metrics.current_term)
    };
    if leader != Some(core.id) {
        return Err(MoveRefused::Unavailable(format!(
            "node {} is no longer the leader (it knows {}); ask again",
            core.id,
            leader.map_or("no leader".to_string(), |leader| format!("node {leader} leads"))
        )));
    }
    let progress = core.members.lock().expect("the members lock is never poisoned").clone();
    if check_target(core, to, &progress)? {
        return Ok(Moved { from: core.id, to, term });
    }
    tracing::info!(from = core.id, to, term, "moving the leadership");
    // The target needs this node's vote too: openraft announces the transfer to the others only.
    core.announce_transfer(to);
    core.raft
        .trigger()
        .transfer_leader(to)
        .await
        .map_err(|fatal| MoveRefused::Unavailable(format!("raft stopped on node {}: {fatal}", core.id)))?;
    let waited = core
        .raft
        .wait(Some(timeout))
        .metrics(|metrics| metrics.current_leader == Some(to) && metrics.current_term > term, "the target leads")
        .await;
    match waited {
        Ok(metrics) => Ok(Moved { from: core.id, to, term: metrics.current_term }),
        Err(_) => {
            let now = core.raft.metrics().borrow_watched().current_leader;
            Err(MoveRefused::Timeout(format!(
                "node {to} did not lead within {timeout:?} ({}); check `strand cluster status`, and try again",
                now.map_or("no leader is known now".to_string(), |leader| format!("node {leader} leads now"))
            )))
        }
    }
}

/// On shutdown: when this node leads, moves the leadership to the other voter with the highest
/// matched index that a move could go to (not unreachable, rejoining, not catching up or far
/// behind), waiting up to three election timeouts; returns at once otherwise. It only logs what happened: shutdown goes on either way.
/// The other voter with the highest matched index that a move could go to now (not
/// unreachable, rejoining, not catching up or far behind), on the leader `core`.
pub fn successor<D: Disk>(core: &NodeCore<D>) -> Option<NodeId> {
    let metrics = core.raft.metrics().borrow_watched().clone();
    let voters: Vec<NodeId> = metrics.membership_config.membership().voter_ids().collect();
    let progress = core.members.lock().expect("the members lock is never poisoned").clone();
    let matched = |id: NodeId| matched_index(&metrics, id);
    // One a move could go to now (see `check_target`), that replication has matched.
    let ready = voters.iter().copied().filter(|id| {
        *id != core.id && matched(*id).is_some() && matches!(check_target(core, *id, &progress), Ok(false))
    });
    ready.max_by_key(|id| (matched(*id), std::cmp::Reverse(*id)))
}

/// On shutdown: when this node leads, moves the leadership to its [`successor`], waiting up to
/// three election timeouts; returns at once otherwise, and as soon as the successor shows that it
/// is stopping too (every node told to stop at once): it is asked first, and watched while the
/// move runs. It only logs what happened: shutdown goes on either way.
pub async fn drain<D: Disk>(core: &NodeCore<D>, peers: &Peers) {
    if core.leader() != Some(core.id) {
        return;
    }
    let Some(to) = successor(core) else {
        tracing::warn!(
            node = core.id,
            "shutting down as leader with no other voter ready to take over; the others elect a leader after their election timeout"
        );
        return;
    };
    let stopping_too = || {
        tracing::warn!(
            node = core.id,
            to,
            "shutting down as leader without a handover: node {to}, the voter ready to take over, is stopping too (or no longer answers)"
        );
    };
    if !keeps_running(core, peers, to).await {
        return stopping_too();
    }
    tracing::info!(node = core.id, to, "shutting down: handing the leadership to node {to} first");
    let wait = Duration::from_millis(core.config.raft.election_timeout_ms_max * 3);
    let watched = async {
        while keeps_running(core, peers, to).await {
            tokio::time::sleep(SUCCESSOR_WATCH_EVERY).await;
        }
    };
    tokio::select! {
        moved = move_here(core, to, wait) => match moved {
            Ok(moved) => tracing::info!(node = core.id, to, term = moved.term, "node {to} leads; shutting down"),
            Err(refused) => {
                tracing::warn!(node = core.id, to, %refused, "could not hand the leadership over; shutting down anyway")
            }
        },
        () = watched => stopping_too(),
    }
}

/// How often a stopping leader asks its successor whether it still runs.
const SUCCESSOR_WATCH_EVERY: Duration = Duration::from_millis(100);

/// Whether member `id` answers its status, within a fraction of the RPC timeout, and is not
/// stopping itself.
async fn keeps_running<D: Disk>(core: &NodeCore<D>, peers: &Peers, id: NodeId) -> bool {
    let address = {
        let metrics = core.raft.metrics().borrow_watched().clone();
        metrics.membership_config.membership().get_node(&id).map(|member| member.addr.clone())
    };
    let Some(address) = address else { return false };
    let Ok(mut client) = peers.client(id, &address) else { return false };
    let timeout = Duration::from_millis(core.config.raft.rpc_timeout_ms / 2);
    match tokio::time::timeout(timeout, client.get_node_status(pb::StatusRequest::default())).await {
        Ok(Ok(status)) => !status.into_inner().stopping,
        _ => false,
    }
}
