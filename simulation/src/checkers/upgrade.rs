//! Rolling upgrades: the replicated apply version, never the node's build, decides how an entry
//! applies.
//!
//! Property (ARCHITECTURE.md, "The apply version"; CockroachDB's rule that below-Raft changes
//! switch through the replicated state): every replica applies an entry by the rules of the
//! apply version its state holds at that entry. So, in a run whose nodes start on the older build
//! and are upgraded one by one ([`crate::nemesis::Fault::Upgrade`]):
//! - every node that applied a versioned entry (a canary create, a switch of the version) gave it
//!   the same outcome;
//! - the version only rose, and its last switch is at the index the final state names (`since`);
//!   a fresh cluster of the older build switches once to that build's newest version, and once
//!   more to the newer build's when every member runs it;
//! - a canary at an index whose version is below the newer build's applied, and one at or after
//!   the switch to it was refused (the newer build's canary rule);
//! - the leader at convergence raised no divergence alarm (the replicas take a checkpoint every
//!   second);
//! - that the cluster switches once every member runs the newer build is asked by the healed
//!   reader, which waits for it as part of convergence.
//!
//! The clients' side (an acknowledged canary is there once after healing, a refused one is not)
//! is judged with the orchestration commands' titles, under this checker's name.
//!
//! Evidence: the versioned entries each node applied ([`VersionedApply`]), each live node's apply
//! version, the index that set it and the divergence it reported once the nodes agreed, and every
//! bead read back after healing. A canary is judged at its first execution: the lowest index at
//! which the nodes applied it or refused it by the rule. A later index of the same request is a
//! retry answered from the session's dedup table, and a refusal for another reason (an expired
//! session) is no execution. A canary no node reported (every node received it inside a
//! snapshot) is still judged by its bead: one created at or after the switch must not exist.
//!
//! The divergence alarm is held by the leader that raised it, until it stops leading, so only the
//! alarm of the leader at convergence is seen here; the convergence checker compares every live
//! node's digest.

use std::collections::BTreeMap;

use super::Violation;
use crate::cluster::{Answered, Versioned, VersionedApply};
use crate::healed::Healed;

/// The name this checker's violations carry.
pub const CHECKER: &str = "upgrade";

/// What the checker saw, for the band's own assertions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The index at which the apply version switched to the newer build's version (that of the
    /// canary rule, [`api::version::NEXT_APPLY_VERSION`]), and that version.
    pub switched: Option<(u64, u32)>,
    /// Canaries applied, one per request.
    pub canaries_applied: usize,
    /// Canaries refused by the rule, one per request.
    pub canaries_refused: usize,
}

/// Checks the versioned entries against the apply version the final state holds.
pub fn check(applies: &[VersionedApply], healed: &Healed) -> (Vec<Violation>, Summary) {
    let violation = |detail: String| Violation { checker: CHECKER, detail };
    let same = |a: &VersionedApply, b: &VersionedApply| (&a.what, &a.answered) == (&b.what, &b.answered);
    let (by_index, differ) = super::by_index(applies, |apply| apply.index, same);
    let mut violations: Vec<Violation> = differ
        .into_iter()
        .map(|(seen, apply)| {
            violation(format!(
                "index {} was applied differently: on node {} as {:?} ({:?}), on node {} as {:?} ({:?})",
                apply.index, seen.node, seen.what, seen.answered, apply.node, apply.what, apply.answered
            ))
        })
        .collect();
    // The final state names the version and the index that set it; every live node must agree.
    let mut finals: BTreeMap<(u32, u64), Vec<u64>> = BTreeMap::new();
    for (node, version, since) in &healed.apply_versions {
        finals.entry((*version, *since)).or_default().push(*node);
    }
    if finals.len() > 1 {
        violations.push(violation(format!(
            "the nodes ended on different apply versions, as (version, set at index): nodes {finals:?}"
        )));
    }
    let switches: Vec<(u64, u32)> = by_index
        .iter()
        .filter_map(|(index, apply)| match (&apply.what, &apply.answered) {
            (Versioned::Switch { to, .. }, Answered::Applied) => Some((*index, *to)),
            _ => None,
        })
        .collect();
    // (version, since) as the final state says, or, when the nodes never agreed (the convergence
    // checker says so), as the last switch the nodes applied says.
    let last = match finals.keys().next() {
        Some(last) => Some(*last).filter(|(_, since)| *since > 0),
        None => switches.last().map(|(index, to)| (*to, *index)),
    };
    let described = |last: Option<(u32, u64)>| {
        last.map_or("version 1, never switched".into(), |(version, since)| {
            format!("version {version} since index {since}")
        })
    };
    // The version rises at each switch (one to the older build's newest, once its members
    // answer, then one to the newer build's); the last one the nodes applied is the final state's.
    for pair in switches.windows(2) {
        if pair[1].1 <= pair[0].1 {
            violations.push(violation(format!(
                "the apply version went from {} (index {}) to {} (index {}): a switch only raises it",
                pair[0].1, pair[0].0, pair[1].1, pair[1].0
            )));
        }
    }
    if let Some((index, to)) = switches.last()
        && last != Some((*to, *index))
    {
        violations.push(violation(format!(
            "the switch to version {to} took effect at index {index}, but the final state says {}",
            described(last)
        )));
    }
    if let Some((version, since)) = last
        && let Some(apply) = by_index.get(&since).filter(|apply| !matches!(apply.what, Versioned::Switch { .. }))
    {
        violations.push(violation(format!(
            "the final state says version {version} was set at index {since}, but the nodes applied {:?} there",
            apply.what
        )));
    }
    let version_at = |index: u64| {
        let last_before = switches.iter().take_while(|(since, _)| *since <= index).last();
        last_before.map_or(api::version::FIRST_APPLY_VERSION, |(_, to)| *to)
    };
    // The switch to the version of the canary rule (the newer build's).
    let canary_rule = switches.iter().find(|(_, to)| *to >= api::version::NEXT_APPLY_VERSION).copied();
    // Each canary at its first execution, in log order.
    let mut first: BTreeMap<&str, (u64, &VersionedApply)> = BTreeMap::new();
    for (index, apply) in &by_index {
        if let Versioned::Canary(title) = &apply.what
            && !matches!(apply.answered, Answered::Refused(_))
        {
            first.entry(title.as_str()).or_insert((*index, apply));
        }
    }
    let mut summary = Summary { switched: canary_rule, ..Summary::default() };
    for (title, (index, apply)) in first {
        let applied = apply.answered == Answered::Applied;
        if applied {
            summary.canaries_applied += 1;
        } else {
            summary.canaries_refused += 1;
        }
        let version = version_at(index);
        if applied != (version < api::version::NEXT_APPLY_VERSION) {
            violations.push(violation(format!(
                "canary {title:?} at index {index} was {} (node {}), but the state's apply version there was {version} (final state: {})",
                if applied { "applied" } else { "refused by the next version's rule" },
                apply.node,
                described(last)
            )));
        }
    }
    if let (Ok(beads), Some((since, version))) = (&healed.all_beads, canary_rule) {
        for bead in beads.iter().filter(|bead| bead.title.starts_with(api::version::CANARY_NEXT_PREFIX)) {
            if bead.revision >= since {
                violations.push(violation(format!(
                    "canary {:?} was created at index {}, after version {version} was set at index {since}",
                    bead.title, bead.revision
                )));
            }
        }
    }
    for (node, divergence) in &healed.divergences {
        violations.push(violation(format!("node {node} raised the divergence alarm: {divergence}")));
    }
    (violations, summary)
}
