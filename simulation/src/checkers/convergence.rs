//! Convergence: after the healed phase, every node reaches the same applied index and the same
//! state digest.
//!
//! Property (Raft's log matching and state machine safety, seen from outside): replicas that
//! applied the same log prefix hold the same state. The healed-phase reader polls every node's
//! own status until they agree or the bound passes.

use super::Violation;
use crate::healed::Healed;

/// Checks what the healed-phase reader saw.
pub fn check(healed: &Healed) -> Vec<Violation> {
    match &healed.convergence {
        Ok(_) => Vec::new(),
        Err(detail) => vec![Violation { checker: "convergence", detail: detail.clone() }],
    }
}
