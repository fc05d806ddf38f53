//! The leader's part in apply versions (see `api::version`) and consistency checks, judged on
//! each look of the member watch (`members.rs`) from the members' own status answers.
//!
//! - **The switch.** The leader raises the state's apply version to the highest version every
//!   member applies (voters and learners, itself included), through a replicated controller
//!   action, so every replica switches rules at that entry. It never does while a member did not
//!   answer its last status request, or while the version is pinned.
//! - **`cluster version set N`** is refused before it is proposed when a member did not answer,
//!   or its build cannot apply `N` ([`check_set`]).
//! - **Divergence.** Every replica takes a digest of its state as it applies a checkpoint (a
//!   controller action the leader proposes every `[controller] consistency_check_interval`, or
//!   `cluster check`). Members whose digests differ at one index hold different states: the
//!   leader logs an error naming the members outside the majority (itself, when it is one of
//!   them) and the index, sets `strand_divergence`, and shows it in `cluster status` until it
//!   leads no more.
//!
//! Invariant: the leader proposes a switch only to a version every member reported applying in
//! the look it decides on.

use api::proto as pb;
use api::version::ApplyRange;
use raft_store::{Disk, NodeId};

use crate::core::NodeCore;

/// The version the leader would switch the state to: the highest every member applies, when
/// every member answered (`None` otherwise). `own` is the leader's own range.
pub fn target(own: ApplyRange, members: &[pb::MemberProgress]) -> Result<u32, String> {
    let mut target = own.max;
    for member in members {
        if !member.reachable || member.apply_max == 0 {
            return Err(format!("node {} did not answer the leader's last status request", member.id));
        }
        target = target.min(member.apply_max);
    }
    Ok(target)
}

/// Raises the apply version once every member applies a higher one (see the module's header).
pub async fn switch<D: Disk>(core: &NodeCore<D>, members: &[pb::MemberProgress], term: u64) {
    let Ok(to) = target(core.state_machine.apply_versions(), members) else { return };
    let current = core.state_machine.read(|state| state.apply_version());
    if current.pinned || to <= current.version {
        return;
    }
    let from = current.version;
    tracing::info!(from, to, "every member applies apply version {to}: switching the cluster to it");
    let action = api::command::ControllerAction::SwitchApplyVersion { from, to };
    match super::controller::propose(core, api::model::Namespace::default_namespace(), term, action).await {
        Ok(Ok(_)) => tracing::info!(from, to, "the cluster applies version {to} from now on"),
        Ok(Err(refusal)) => tracing::warn!(%refusal, "the switch to apply version {to} was refused"),
        Err(error) => tracing::debug!(%error, "the switch to apply version {to} could not be proposed yet"),
    }
}

/// Refuses `cluster version set to` unless every other member of `membership` answered the
/// leader's last status request (`members`) with a build that applies `to`.
pub fn check_set(
    to: u32,
    own: (NodeId, ApplyRange),
    membership: &[NodeId],
    members: &[pb::MemberProgress],
) -> Result<(), String> {
    let (leader, range) = own;
    if !range.contains(to) {
        return Err(format!("node {leader} (the leader) applies versions {range}, not {to}"));
    }
    if let Some(unseen) = membership.iter().find(|id| **id != leader && !members.iter().any(|member| member.id == **id))
    {
        return Err(format!("node {unseen} has not answered this leader yet; try again in a second"));
    }
    for member in members {
        if !member.reachable || member.apply_max == 0 {
            return Err(format!(
                "node {} did not answer the leader's last status request, so it is not known to apply version {to}; bring it back or remove it first",
                member.id
            ));
        }
        let range = ApplyRange { min: member.apply_min, max: member.apply_max };
        if !range.contains(to) {
            return Err(format!(
                "node {}'s build {} applies versions {range}, not {to}; upgrade or remove it first",
                member.id, member.build
            ));
        }
    }
    Ok(())
}

/// Compares the members' checkpoints (the leader's own and those in `answers`), oldest first, and
/// raises the divergence alarm at the first index whose digests differ, naming the members
/// outside the majority (the leader among them, when it is the one that differs).
pub fn compare<D: Disk>(core: &NodeCore<D>, answers: &[(NodeId, &pb::NodeStatus)]) {
    let Some(found) = divergence(core.id, &core.state_machine.checkpoints(), answers) else { return };
    let message = format!(
        "divergence: {found}: the replicas hold different states after applying the same log. Take a differing member's data directory out of service (move it away and start it with --rejoin) and report the bug"
    );
    let mut divergence = core.divergence.lock().expect("the divergence lock is never poisoned");
    if divergence.as_deref() != Some(message.as_str()) {
        tracing::error!(%message, "state divergence detected");
        *divergence = Some(message);
    }
}

/// The first divergence among the members' checkpoints, described (`None`: they agree).
fn divergence(leader: NodeId, own: &[(u64, u64)], answers: &[(NodeId, &pb::NodeStatus)]) -> Option<String> {
    for (index, digest) in own {
        let mut digests = vec![(leader, *digest)];
        for (id, status) in answers {
            if let Some(theirs) = status.checkpoints.iter().find(|checkpoint| checkpoint.index == *index) {
                digests.push((*id, theirs.digest));
            }
        }
        if digests.iter().all(|(_, theirs)| theirs == digest) {
            continue;
        }
        let held_by = |value: u64| digests.iter().filter(|(_, theirs)| *theirs == value).count();
        let majority = digests.iter().map(|(_, theirs)| *theirs).find(|value| held_by(*value) * 2 > digests.len());
        let found: Vec<String> = match majority {
            Some(majority) => digests
                .iter()
                .filter(|(_, theirs)| *theirs != majority)
                .map(|(id, theirs)| {
                    format!(
                        "node {id}'s state digest at applied index {index} is {theirs:016x}, and {} of the {} members that took it hold {majority:016x}",
                        held_by(majority),
                        digests.len()
                    )
                })
                .collect(),
            None => vec![format!(
                "the members' state digests at applied index {index} differ with no majority ({})",
                digests.iter().map(|(id, theirs)| format!("node {id}: {theirs:016x}")).collect::<Vec<_>>().join(", ")
            )],
        };
        return Some(found.join("; "));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: NodeId, min: u32, max: u32) -> pb::MemberProgress {
        pb::MemberProgress {
            id,
            reachable: true,
            apply_min: min,
            apply_max: max,
            build: "b".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_target_is_the_highest_version_every_member_applies_and_nothing_while_one_is_silent() {
        let own = ApplyRange { min: 1, max: 3 };
        assert_eq!(target(own, &[member(2, 1, 2), member(3, 1, 3)]), Ok(2));
        assert_eq!(target(own, &[]), Ok(3));
        let silent = pb::MemberProgress { reachable: false, ..member(3, 1, 3) };
        assert!(target(own, &[member(2, 1, 2), silent]).is_err());
        let unreported = member(3, 0, 0);
        assert!(target(own, &[unreported]).is_err());
    }

    #[test]
    fn a_divergence_names_the_members_outside_the_majority_the_leader_too() {
        let status = |digest: u64| pb::NodeStatus {
            checkpoints: vec![pb::Checkpoint { index: 5, digest: 1 }, pb::Checkpoint { index: 9, digest }],
            ..Default::default()
        };
        let (agreeing, odd) = (status(7), status(8));
        let own = [(5, 1), (9, 7)];
        assert_eq!(divergence(1, &own, &[(2, &agreeing), (3, &agreeing)]), None);
        let found = divergence(1, &own, &[(2, &agreeing), (3, &odd)]).unwrap();
        assert!(
            found.starts_with("node 3's state digest at applied index 9 is 0000000000000008, and 2 of the 3"),
            "{found}"
        );
        let found = divergence(1, &[(5, 1), (9, 8)], &[(2, &agreeing), (3, &agreeing)]).unwrap();
        assert!(found.starts_with("node 1's state digest at applied index 9"), "the leader differs: {found}");
        let found = divergence(1, &own, &[(2, &odd)]).unwrap();
        assert!(found.contains("differ with no majority"), "{found}");
    }

    #[test]
    fn set_is_refused_naming_a_member_that_cannot_apply_it() {
        let own = (1, ApplyRange { min: 1, max: 2 });
        assert_eq!(check_set(1, own, &[1, 2], &[member(2, 1, 2)]), Ok(()));
        let error = check_set(2, own, &[1, 2], &[member(2, 1, 1)]).unwrap_err();
        assert!(error.contains("node 2's build b applies versions 1-1, not 2"), "{error}");
        assert!(check_set(3, own, &[1], &[]).unwrap_err().contains("node 1 (the leader)"));
        let error = check_set(1, own, &[1, 2, 3], &[member(2, 1, 2)]).unwrap_err();
        assert!(error.contains("node 3 has not answered"), "{error}");
    }
}
