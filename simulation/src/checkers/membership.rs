//! Membership: what the operator changed ([`crate::operator`]) is what the cluster ended with,
//! and a removed member never acts as one again.
//!
//! Properties:
//! - the final membership (as the healed-phase reader found it) holds no member whose removal was
//!   acknowledged, holds the spare once its addition was acknowledged, and holds every first
//!   member the operator did not try to remove; it holds no node the run never had;
//! - a removed first member knows it was removed by the end (the healed reader asked it,
//!   [`crate::healed::REMOVED_TOLD_MS_MAX`] after convergence): told by the leader that removed
//!   it, or by the first member it sent a message (a vote, an append) once that leader failed;
//! - a member is never leader after its removal was acknowledged: a removed node never again
//!   counts toward a quorum (it cannot lead without one), and so never serves a read index. (At
//!   most one leader per term across configurations is `raft_safety`'s election safety, which
//!   counts every node, the spare and removed ones included; no acknowledged write lost across a
//!   change is `durability`'s.)

use std::collections::BTreeSet;

use super::Violation;
use crate::cluster::Observation;
use crate::operator::OperatorLog;

/// Checks the final membership `members` of a run whose first members were `first`, whose spare
/// was `spare`, against what the operator did (`log`) and what the nodes observed.
pub fn check(
    log: &OperatorLog,
    first: &[u64],
    spare: u64,
    members: &[u64],
    removed_serving: &[(u64, String)],
    observations: &[Observation],
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut violation = |detail: String| violations.push(Violation { checker: "membership", detail });
    let members: BTreeSet<u64> = members.iter().copied().collect();
    if members.is_empty() {
        // The reader found none: the nodes did not converge, which the convergence checker says.
        return violations;
    }
    for (id, answer) in removed_serving {
        violation(format!(
            "node {id} is not in the final membership {members:?}, yet it still serves as a member ({answer}): it was never told of its removal"
        ));
    }
    for (id, at) in &log.removed {
        if members.contains(id) {
            violation(format!(
                "node {id}'s removal was acknowledged at {:.3}s, but the final membership {members:?} holds it",
                at.as_secs_f64()
            ));
        }
        if let Some(led) = observations.iter().find(|seen| seen.node == *id && seen.leader && seen.at > *at) {
            violation(format!(
                "node {id} led term {} at {:.3}s, after its removal was acknowledged at {:.3}s",
                led.term,
                led.at.as_secs_f64(),
                at.as_secs_f64()
            ));
        }
    }
    if log.spare_started && !members.contains(&spare) {
        violation(format!("node {spare} was added, but the final membership {members:?} lacks it"));
    }
    let tried: BTreeSet<u64> = log
        .steps
        .iter()
        .filter_map(|(_, asked, _)| asked.strip_prefix("Remove(")?.split(')').next()?.parse().ok())
        .collect();
    for id in first {
        if !tried.contains(id) && !members.contains(id) {
            violation(format!("node {id} was never removed, but the final membership {members:?} lacks it"));
        }
    }
    for id in &members {
        if !first.contains(id) && *id != spare {
            violation(format!("the final membership {members:?} holds node {id}, which the run never had"));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;

    fn led(node: u64, term: u64, at_ms: u64) -> Observation {
        Observation {
            at: Duration::from_millis(at_ms),
            node,
            term,
            leader: true,
            last_log_index: 0,
            applied: None,
            fatal: None,
        }
    }

    fn log(removed: &[(u64, u64)], spare_started: bool) -> OperatorLog {
        OperatorLog {
            steps: removed
                .iter()
                .map(|(id, at)| (Duration::from_millis(*at), format!("Remove({id}) asked of n1"), "ok".into()))
                .collect(),
            removed: removed.iter().map(|(id, at)| (*id, Duration::from_millis(*at))).collect::<BTreeMap<_, _>>(),
            spare_started,
        }
    }

    #[test]
    fn a_clean_run_passes() {
        let observations = [led(2, 1, 100), led(4, 2, 3_000)];
        assert!(check(&log(&[(2, 2_000)], true), &[1, 2, 3], 4, &[1, 3, 4], &[], &observations).is_empty());
    }

    #[test]
    fn a_removed_member_that_leads_again_is_caught() {
        let observations = [led(2, 1, 100), led(2, 5, 2_500)];
        let found = check(&log(&[(2, 2_000)], true), &[1, 2, 3], 4, &[1, 3, 4], &[], &observations);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].detail.contains("node 2 led term 5 at 2.500s, after its removal"), "{found:?}");
    }

    #[test]
    fn a_membership_that_disagrees_with_the_operator_is_caught() {
        // A removed member still listed, an added spare missing, a first member dropped silently.
        let found = check(&log(&[(2, 2_000)], true), &[1, 2, 3], 4, &[2, 3], &[], &[]);
        let details: Vec<&str> = found.iter().map(|violation| violation.detail.as_str()).collect();
        assert_eq!(found.len(), 3, "{details:?}");
        assert!(details[0].contains("node 2's removal was acknowledged"));
        assert!(details[1].contains("node 4 was added"));
        assert!(details[2].contains("node 1 was never removed"));
        let stranger = check(&log(&[], false), &[1, 2, 3], 4, &[1, 2, 3, 9], &[], &[]);
        assert!(stranger[0].detail.contains("holds node 9, which the run never had"), "{stranger:?}");
    }

    #[test]
    fn a_removed_member_that_still_serves_is_caught() {
        let serving = [(2, "it answered its status, leader 2".to_string())];
        let found = check(&log(&[(2, 2_000)], true), &[1, 2, 3], 4, &[1, 3, 4], &serving, &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].detail.contains("node 2 is not in the final membership"), "{found:?}");
        assert!(found[0].detail.contains("never told of its removal"), "{found:?}");
    }
}
