//! Convergence: after the healed phase, every live node reaches the same applied index and the
//! same state digest.
//!
//! Property (Raft's log matching and state machine safety, seen from outside): replicas that
//! applied the same log prefix hold the same state. The healed-phase reader polls every live
//! node's own status until they agree or the bound passes. A live node is every node but those
//! whose start failed; one that started on damaged storage is live, and must agree like the rest
//! (a silently changed record shows here as a different digest). So the checker also requires
//! that the agreement the reader found covers exactly the live nodes.

use super::Violation;
use crate::healed::Healed;

/// Checks what the healed-phase reader saw against the nodes that were live at the end.
pub fn check(healed: &Healed, live_nodes: &[u64]) -> Vec<Violation> {
    match &healed.convergence {
        Ok(agreed) => {
            let compared: Vec<u64> = agreed.iter().map(|(id, _, _)| *id).collect();
            if compared == live_nodes {
                return Vec::new();
            }
            vec![Violation {
                checker: "convergence",
                detail: format!(
                    "the nodes agreed, but the reader compared {compared:?} and the live nodes are {live_nodes:?}"
                ),
            }]
        }
        Err(detail) => vec![Violation { checker: "convergence", detail: detail.clone() }],
    }
}
