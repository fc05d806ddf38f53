//! Convergence: after the healed phase, every live node reaches the same applied index and the
//! same state digest.
//!
//! Property (Raft's log matching and state machine safety, seen from outside): replicas that
//! applied the same log prefix hold the same state. The healed-phase reader polls every live
//! node's own status until they agree or the bound passes. A live node is every node but those
//! whose start failed; one that started on damaged storage is live, and must agree like the rest
//! (a silently changed record shows here as a different digest), and so is one whose storage was
//! wiped and which rejoined empty: a live, connected node still behind at the end fails the run,
//! named with how far its log got. So the checker also requires that the agreement the reader
//! found covers exactly the live nodes, and that none of them was still rejoining then (caught up
//! in state, a rejoined node must vote again: its log reached the leader's).

use super::Violation;
use crate::healed::Healed;

/// Checks what the healed-phase reader saw against the nodes that were live at the end.
pub fn check(healed: &Healed, live_nodes: &[u64]) -> Vec<Violation> {
    match &healed.convergence {
        Ok(agreed) => {
            let compared: Vec<u64> = agreed.iter().map(|(id, _, _)| *id).collect();
            if compared == live_nodes {
                return healed
                    .rejoining_at_end
                    .iter()
                    .map(|id| Violation {
                        checker: "convergence",
                        detail: format!(
                            "node {id} holds the same state as the others but still says it is rejoining: its log never reached the leader's, so it never voted again"
                        ),
                    })
                    .collect();
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
