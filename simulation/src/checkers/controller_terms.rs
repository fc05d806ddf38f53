//! The controller's term fence, from what the nodes applied.
//!
//! Property: no controller action proposed under a term is applied after an action of a higher
//! term. Every controller action carries the term its leader began in; the state machine must
//! refuse one whose term is below the highest term of an action already applied, so a deposed
//! leader can never act late (the fencing of Kleppmann's lock argument, with the Raft term as
//! the token).
//!
//! Evidence: every controller action each node applied, with its log index and whether it took
//! effect ([`ControllerApply`]). Walked in log order, the terms of the actions that took effect
//! must never go down. The nodes must also agree on each index: the same action, the same term
//! and the same outcome (the state machine is deterministic). An index no node reported (every
//! node received it inside a snapshot) is not judged.

use super::Violation;
use crate::cluster::ControllerApply;

/// What the checker found, for the bands' own assertions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Actions that took effect, one per log index.
    pub applied: usize,
    /// Actions refused (by the term fence or their own condition), one per log index.
    pub refused: usize,
    /// Distinct terms with an action that took effect.
    pub terms: usize,
}

/// Checks the term fence; answers the violations and what it saw.
pub fn check(applies: &[ControllerApply]) -> (Vec<Violation>, Summary) {
    let key = |apply: &ControllerApply| (apply.term, apply.action, apply.applied);
    let (by_index, differ) = super::by_index(applies, |apply| apply.index, |a, b| key(a) == key(b));
    let mut violations: Vec<Violation> = differ
        .into_iter()
        .map(|(seen, apply)| Violation {
            checker: "controller terms",
            detail: format!(
                "index {} was applied differently: on node {} as {} of term {} ({}), on node {} as {} of term {} ({})",
                apply.index,
                seen.node,
                seen.action,
                seen.term,
                outcome(seen.applied),
                apply.node,
                apply.action,
                apply.term,
                outcome(apply.applied)
            ),
        })
        .collect();
    let mut summary = Summary::default();
    let mut terms = std::collections::BTreeSet::new();
    let mut highest: Option<&ControllerApply> = None;
    for apply in by_index.values() {
        if !apply.applied {
            summary.refused += 1;
            continue;
        }
        summary.applied += 1;
        terms.insert(apply.term);
        match highest {
            Some(higher) if higher.term > apply.term => violations.push(Violation {
                checker: "controller terms",
                detail: format!(
                    "{} of term {} took effect at index {} (node {}), after {} of the higher term {} took effect at index {} (node {}): a deposed controller acted late",
                    apply.action, apply.term, apply.index, apply.node, higher.action, higher.term, higher.index, higher.node
                ),
            }),
            Some(higher) if higher.term == apply.term => {}
            _ => highest = Some(apply),
        }
    }
    summary.terms = terms.len();
    (violations, summary)
}

fn outcome(applied: bool) -> &'static str {
    if applied { "took effect" } else { "refused" }
}
