//! Reading the cluster's answers, for every command: the beads an answer carries, the one bead a
//! command expected, and the failure of an answer of a kind the command never gets.

use api::model::Bead;
use api::outcome::Outcome;

use crate::Failure;

/// The beads of an answer, in its order (empty for answers that carry none).
pub fn beads_of(answer: Outcome) -> Vec<Bead> {
    match answer {
        Outcome::Beads(beads) => beads,
        Outcome::Bead(bead) => vec![*bead],
        _ => Vec::new(),
    }
}

/// The first bead of an answer; an answer with none is refused, naming `what` was expected.
pub fn one_bead(answer: Outcome, what: &str) -> Result<Bead, Failure> {
    beads_of(answer).into_iter().next().ok_or_else(|| {
        Failure::Refused(format!("the cluster answered with no {what}; check the id with `strand show`"))
    })
}

/// An answer of a kind the command never gets: the cluster and the CLI disagree.
pub fn unexpected(answer: &Outcome) -> Failure {
    Failure::Refused(format!("unexpected answer from the cluster ({answer:?}); is this strand as new as the cluster?"))
}
