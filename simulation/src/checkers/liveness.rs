//! Liveness: once every fault is removed, the cluster elects a leader and serves a write within
//! a bounded simulated time ([`crate::healed::WRITE_AFTER_HEAL_MS_MAX`]).
//!
//! Property (Raft §5.2 and §9.3: with a stable network and a majority up, a leader is elected
//! within a few election timeouts, and it then commits client requests).

use super::Violation;
use crate::healed::Healed;

/// Checks that the first write after healing was served in time.
pub fn check(healed: &Healed) -> Vec<Violation> {
    match &healed.write_after_heal {
        Ok(_) => Vec::new(),
        Err(detail) => vec![Violation { checker: "liveness", detail: detail.clone() }],
    }
}
