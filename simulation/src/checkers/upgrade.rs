//! Rolling upgrades: the replicated apply version, never the node's build, decides how an entry
//! applies.
//!
//! Property (ARCHITECTURE.md, "The apply version"; CockroachDB's rule that below-Raft changes
//! switch through the replicated state): every replica applies an entry by the rules of the
//! apply version its state holds at that entry. So, in a run whose nodes start on the older build
//! and are upgraded one by one ([`crate::nemesis::Fault::Upgrade`]):
//! - every node that applied a versioned entry (a canary create, a switch of the version) gave it
//!   the same outcome;
//! - the version switched at most once, upward, at the index the final state names (`since`);
//! - a canary before that index applied, and one at or after it was refused (the newer build's
//!   canary rule); with no switch, every canary applied;
//! - no leader raised the divergence alarm (the replicas took a checkpoint every second);
//! - that the cluster switches once every member runs the newer build is asked by the healed
//!   reader, which waits for it as part of convergence.
//!
//! The clients' side (an acknowledged canary is there once after healing, a refused one is not)
//! is judged with the orchestration commands' titles, under this checker's name.
//!
//! Evidence: the versioned entries each node applied ([`VersionedApply`]), and each live node's
//! apply version, the index that set it and the divergences it reported once the nodes agreed.
//! An index no node reported (every node received it inside a snapshot) is not judged.

use std::collections::BTreeMap;

use super::Violation;
use crate::cluster::{Versioned, VersionedApply};
use crate::healed::Healed;

/// The name this checker's violations carry.
pub const CHECKER: &str = "upgrade";

/// What the checker saw, for the band's own assertions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The index at which the apply version last switched, and to which version.
    pub switched: Option<(u64, u32)>,
    /// Canaries applied, one per log index.
    pub canaries_applied: usize,
    /// Canaries refused, one per log index.
    pub canaries_refused: usize,
}

fn outcome(applied: bool) -> &'static str {
    if applied { "applied" } else { "refused" }
}

/// Checks the versioned entries against the apply version the final state holds.
pub fn check(applies: &[VersionedApply], healed: &Healed) -> (Vec<Violation>, Summary) {
    let violation = |detail: String| Violation { checker: CHECKER, detail };
    let same = |a: &VersionedApply, b: &VersionedApply| (&a.what, a.applied) == (&b.what, b.applied);
    let (by_index, differ) = super::by_index(applies, |apply| apply.index, same);
    let mut violations: Vec<Violation> = differ
        .into_iter()
        .map(|(seen, apply)| {
            violation(format!(
                "index {} was applied differently: on node {} as {:?} ({}), on node {} as {:?} ({})",
                apply.index,
                seen.node,
                seen.what,
                outcome(seen.applied),
                apply.node,
                apply.what,
                outcome(apply.applied)
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
    let switches: Vec<(u64, u32, u32)> = by_index
        .iter()
        .filter(|(_, apply)| apply.applied)
        .filter_map(|(index, apply)| match apply.what {
            Versioned::Switch { from, to } => Some((*index, from, to)),
            Versioned::Canary(_) => None,
        })
        .collect();
    // (version, since) as the final state says, or, when the nodes never agreed (the convergence
    // checker says so), as the last switch the nodes applied says.
    let switched = match finals.keys().next() {
        Some(last) => Some(*last).filter(|(version, since)| *version > 1 && *since > 0),
        None => switches.last().map(|(index, _, to)| (*to, *index)),
    };
    for (index, from, to) in &switches {
        if to <= from {
            violations
                .push(violation(format!("the switch at index {index} took the apply version down, {from} to {to}")));
        }
        if switched != Some((*to, *index)) {
            violations.push(violation(format!(
                "the switch to version {to} took effect at index {index}, but the final state says {}",
                switched.map_or("version 1, never switched".into(), |(version, since)| format!(
                    "version {version}, set at index {since}"
                ))
            )));
        }
    }
    let mut summary = Summary { switched: switched.map(|(version, since)| (since, version)), ..Summary::default() };
    for (index, apply) in &by_index {
        let Versioned::Canary(title) = &apply.what else { continue };
        if apply.applied {
            summary.canaries_applied += 1;
        } else {
            summary.canaries_refused += 1;
        }
        let version = match switched {
            Some((version, since)) if *index >= since => version,
            _ => 1,
        };
        if apply.applied != (version < 2) {
            violations.push(violation(format!(
                "canary {title:?} at index {index} was {} (node {}), but the state's apply version there was {version} (final state: {})",
                outcome(apply.applied),
                apply.node,
                switched.map_or("never switched".into(), |(version, since)| format!(
                    "version {version} since index {since}"
                ))
            )));
        }
    }
    for (node, divergence) in &healed.divergences {
        violations.push(violation(format!("node {node} raised the divergence alarm: {divergence}")));
    }
    (violations, summary)
}
