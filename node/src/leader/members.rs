//! The member watch: while this node leads, it asks every other member for its own status once
//! every [`MEMBER_CHECK_INTERVAL`] and judges how far behind each one is.
//!
//! A member's lag counts from the lower of two indexes: the leader's matching index for it
//! (openraft's replication progress) and the member's own last log index, as it answered. Either
//! alone can mislead: a member that lost its log still has the old matching index on the leader
//! until a conflict moves it, and a member with a diverged log may hold entries the leader does
//! not. A member is *not catching up* once it has not reached, for [`NOT_CATCHING_UP_AFTER`],
//! the leader's last log index as it was when the member was first seen behind it; a member that
//! keeps up under load reaches each such mark within moments.
//!
//! What it finds goes to the metrics (`strand_member_lag_entries`, `strand_member_reachable`),
//! to `cluster status` (the leader's own status carries it, [`NodeCore::members`]), and, for a
//! member not catching up, to a warning in the log at most once every [`WARN_INTERVAL`].
//!
//! Auto-promotion (Consul autopilot's server stabilization): a learner whose membership entry
//! asks for it is promoted to a voter once it has stayed promotable (reachable, not rejoining,
//! within `membership::PROMOTE_LAG_ENTRIES_MAX` entries) for `raft.promote_after_ms`, judged on
//! each look; falling behind starts its time again.
//!
//! Invariant: only the leader publishes member progress; a node that stops leading clears it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::proto as pb;
use openraft::async_runtime::WatchReceiver;
use raft_store::{Disk, NodeId};
use tokio::time::Instant;

use crate::core::NodeCore;
use crate::peer::network::Peers;

/// How often the leader asks each member for its status.
pub const MEMBER_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How long a member may stay behind one mark of the leader's log before it is reported as not
/// catching up.
pub const NOT_CATCHING_UP_AFTER: Duration = Duration::from_secs(10);
/// The shortest time between two warnings about one member.
pub const WARN_INTERVAL: Duration = Duration::from_secs(60);

/// What the watch keeps of one member between checks.
#[derive(Clone, Debug, Default)]
pub struct Tracked {
    /// When the member was first seen behind, and the leader's last log index then: the mark it
    /// must reach.
    mark: Option<(Instant, u64)>,
    /// When the member was last warned about.
    warned_at: Option<Instant>,
}

impl Tracked {
    /// Judges a member whose log reaches `point` while the leader's ends at `leader_last`, at
    /// `now`: answers how long it has been behind its mark (`None`: it is not behind).
    pub fn judge(&mut self, now: Instant, leader_last: u64, point: u64) -> Option<Duration> {
        if point >= leader_last {
            self.mark = None;
            return None;
        }
        match self.mark {
            Some((since, mark)) if point < mark => Some(now.saturating_duration_since(since)),
            _ => {
                self.mark = Some((now, leader_last));
                Some(Duration::ZERO)
            }
        }
    }

    /// Whether to warn about the member now (at most once every [`WARN_INTERVAL`]).
    fn warn_now(&mut self, now: Instant) -> bool {
        if self.warned_at.is_some_and(|at| now.saturating_duration_since(at) < WARN_INTERVAL) {
            return false;
        }
        self.warned_at = Some(now);
        true
    }
}

/// Runs the member watch until the node stops.
pub async fn run<D: Disk>(core: Arc<NodeCore<D>>, peers: Arc<Peers>) {
    tokio::select! {
        () = core.stopped() => {}
        () = watch(&core, &peers) => {}
    }
}

async fn watch<D: Disk>(core: &NodeCore<D>, peers: &Peers) {
    let mut tracked: BTreeMap<NodeId, Tracked> = BTreeMap::new();
    let mut promotable_since = BTreeMap::new();
    loop {
        tokio::time::sleep(MEMBER_CHECK_INTERVAL).await;
        let metrics = core.raft.metrics().borrow_watched().clone();
        let leads = metrics.running_state.is_ok() && metrics.current_leader == Some(core.id);
        let members: Vec<(NodeId, String)> = if leads {
            let membership = metrics.membership_config.membership();
            membership.nodes().filter(|(id, _)| **id != core.id).map(|(id, node)| (*id, node.addr.clone())).collect()
        } else {
            Vec::new()
        };
        for gone in
            tracked.keys().copied().filter(|id| !members.iter().any(|(member, _)| member == id)).collect::<Vec<_>>()
        {
            tracked.remove(&gone);
            peers.metrics().clear_member(gone);
        }
        if !leads {
            core.members.lock().expect("the members lock is never poisoned").clear();
            *core.divergence.lock().expect("the divergence lock is never poisoned") = None;
            continue;
        }
        let leader_last = metrics.last_log_index.unwrap_or(0);
        let matching: BTreeMap<NodeId, u64> = metrics
            .replication
            .as_ref()
            .map(|replication| {
                replication.iter().map(|(id, log_id)| (*id, log_id.as_ref().map_or(0, |log_id| log_id.index))).collect()
            })
            .unwrap_or_default();
        let timeout = Duration::from_millis(core.config.raft.rpc_timeout_ms);
        let answers =
            futures::future::join_all(members.iter().map(|(id, address)| ask(peers, *id, address, timeout))).await;
        let now = Instant::now();
        let mut progress = Vec::new();
        for ((id, _), answer) in members.iter().zip(&answers) {
            let match_index = matching.get(id).copied().unwrap_or(0);
            let (last_log_index, rejoining, reachable) = match &answer {
                Ok(status) => (Some(status.last_log_index), status.rejoining, true),
                Err(_) => (None, false, false),
            };
            let point = last_log_index.map_or(match_index, |own| own.min(match_index));
            let lag = leader_last.saturating_sub(point);
            let entry = tracked.entry(*id).or_default();
            let behind_for = entry.judge(now, leader_last, point);
            let mut note = String::new();
            if let Some(behind_for) = behind_for.filter(|behind_for| *behind_for >= NOT_CATCHING_UP_AFTER) {
                let own =
                    last_log_index.map_or("it did not answer".to_string(), |own| format!("its log ends at {own}"));
                let rejoin = if rejoining { "; rejoining after data loss" } else { "" };
                note = format!(
                    "not catching up: {lag} entries behind the leader for {} s ({own}; matched through {match_index}{rejoin})",
                    behind_for.as_secs()
                );
                if entry.warn_now(now) {
                    tracing::warn!(node = id, lag, "node {id} is {note}; see `strand cluster status`");
                }
            }
            if let Err(error) = &answer {
                note = if note.is_empty() {
                    format!("unreachable: {error}")
                } else {
                    format!("{note}; unreachable: {error}")
                };
            }
            peers.metrics().set_member(*id, lag, reachable);
            let (apply_min, apply_max, build) = match &answer {
                Ok(status) => (status.apply_min, status.apply_max, status.build.clone()),
                Err(_) => (0, 0, String::new()),
            };
            progress.push(pb::MemberProgress {
                apply_min,
                apply_max,
                build,
                id: *id,
                match_index,
                last_log_index: last_log_index.unwrap_or(0),
                lag,
                reachable,
                note,
                rejoining,
            });
        }
        let answered: Vec<(NodeId, &pb::NodeStatus)> =
            members.iter().zip(&answers).filter_map(|((id, _), answer)| Some((*id, answer.as_ref().ok()?))).collect();
        super::versions::compare(core, &answered);
        super::versions::switch(core, &progress, metrics.current_term).await;
        super::membership::complete_joint(core, peers).await;
        let membership = metrics.membership_config.membership();
        let learners: Vec<(NodeId, bool)> =
            membership.learner_ids().map(|id| (id, membership.get_node(&id).is_some_and(|m| m.auto_promote))).collect();
        let matched = |id: NodeId| super::transfer::matched_index(&metrics, id);
        let promotable = |id: NodeId| {
            let member = progress.iter().find(|member| member.id == id);
            super::membership::check_promotable(id, member, matched(id), leader_last).is_ok()
        };
        let stabilization = Duration::from_millis(core.config.raft.promote_after_ms);
        let due = super::membership::promotion_due(&learners, promotable, &mut promotable_since, now, stabilization);
        *core.members.lock().expect("the members lock is never poisoned") = progress;
        for id in due {
            tracing::info!(node = id, "node {id} stayed caught up for {stabilization:?}: promoting it to a voter");
            match super::membership::change_here(core, peers, crate::peer::MemberChange::Promote(id)).await {
                Ok(changed) => {
                    promotable_since.remove(&id);
                    tracing::info!(node = id, index = changed.index, "node {id} is a voter");
                }
                Err(refused) => tracing::warn!(node = id, %refused, "could not promote node {id}; trying again later"),
            }
        }
    }
}

/// Member `id`'s own status, asked within `timeout`.
async fn ask(peers: &Peers, id: NodeId, address: &str, timeout: Duration) -> Result<pb::NodeStatus, String> {
    let mut client = peers.client(id, address)?;
    let asked = client.get_node_status(pb::StatusRequest { include_digest: false });
    match tokio::time::timeout(timeout, asked).await {
        Ok(Ok(status)) => Ok(status.into_inner()),
        Ok(Err(status)) => Err(status.message().to_string()),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_behind_until_it_reaches_the_mark_it_was_first_seen_behind() {
        let start = Instant::now();
        let mut tracked = Tracked::default();
        assert_eq!(tracked.judge(start, 100, 100), None, "caught up");
        assert_eq!(tracked.judge(start, 120, 100), Some(Duration::ZERO), "behind: the mark is 120");
        let later = start + Duration::from_secs(4);
        assert_eq!(tracked.judge(later, 150, 119), Some(Duration::from_secs(4)), "still short of 120");
        // Reaching the mark under load starts a new mark, however far the leader moved on.
        assert_eq!(tracked.judge(later, 160, 121), Some(Duration::ZERO));
        let stuck = later + NOT_CATCHING_UP_AFTER;
        assert_eq!(tracked.judge(stuck, 400, 121), Some(NOT_CATCHING_UP_AFTER));
        assert!(tracked.warn_now(stuck));
        assert!(!tracked.warn_now(stuck + Duration::from_secs(1)), "one warning an interval");
        assert!(tracked.warn_now(stuck + WARN_INTERVAL));
    }
}
