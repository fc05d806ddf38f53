//! Leased claims: one holder at a time, fencing, and expiry after healing.
//!
//! Properties (issue 15; Kleppmann's fencing-token argument; etcd's lessor):
//! - **One unexpired holder.** A lease granted or renewed to agent A by an operation invoked at
//!   simulated time `t` cannot expire before `t + ttl`: the leader judges it due `ttl` after it
//!   saw that grant or renewal, on a clock that runs with simulated time (a wall-clock jump
//!   changes nothing). So a grant of the bead to another agent that completed before `t + ttl`
//!   means two agents held unexpired leases at once.
//! - **No stale fenced write.** A close fenced by lease L that succeeded, although a later grant
//!   of the bead (a higher lease id) had completed before the close was invoked, applied a
//!   stale write.
//! - **Expiry after healing.** Once the agents have stopped, every lease nobody renews expires
//!   within its length, two sweeps and two election timeouts: the healed reader lists the
//!   leasable beads after that bound, and none may still be leased.

use std::collections::BTreeMap;
use std::time::Duration;

use api::model::{Bead, BeadId};

use super::Violation;
use crate::history::{History, Op, OpResult};

/// A grant or renewal of a lease: who, which lease, when it was invoked and completed.
struct Held<'a> {
    actor: &'a str,
    lease_id: u64,
    invoked_at: Duration,
    completed_at: Duration,
}

/// Checks the lease operations of `history` with leases of `lease_ms`, and the leasable beads
/// the healed reader found after the expiry bound (`Err`: it could not read them).
pub fn check(history: &History, lease_ms: u64, after_bound: &Result<Vec<Bead>, String>) -> Vec<Violation> {
    let violation = |detail: String| Violation { checker: "leases", detail };
    let mut violations = Vec::new();
    let ttl = Duration::from_millis(lease_ms);
    let mut held: BTreeMap<&BeadId, Vec<Held<'_>>> = BTreeMap::new();
    for entry in &history.entries {
        let (Op::LeaseClaimNext { actor, .. } | Op::LeaseRenew { actor, .. }) = &entry.op else { continue };
        let (Some((bead, lease_id)), Some(completed_at)) = (entry.result.leased_bead(), entry.completed_at) else {
            continue;
        };
        let grant = Held { actor: &actor.0, lease_id, invoked_at: entry.invoked_at, completed_at };
        held.entry(&bead.id).or_default().push(grant);
    }
    for (id, grants) in &held {
        for later in grants.iter() {
            let overlapping = grants.iter().find(|earlier| {
                earlier.actor != later.actor
                    && earlier.lease_id < later.lease_id
                    && later.completed_at < earlier.invoked_at + ttl
            });
            if let Some(earlier) = overlapping {
                violations.push(violation(format!(
                    "bead {id} was granted to {} (lease {}) at {:?}, while {}'s lease {} renewed at {:?} could not yet have expired (ttl {lease_ms} ms)",
                    later.actor, later.lease_id, later.completed_at, earlier.actor, earlier.lease_id, earlier.invoked_at
                )));
            }
        }
    }
    for entry in &history.entries {
        let Op::FencedClose { id, actor, lease_id } = &entry.op else { continue };
        if !matches!(entry.result, OpResult::Ok(_)) {
            continue;
        }
        let grants = held.get(id).map(Vec::as_slice).unwrap_or_default();
        let newer = grants.iter().find(|grant| grant.lease_id > *lease_id && grant.completed_at < entry.invoked_at);
        if let Some(newer) = newer {
            violations.push(violation(format!(
                "{actor}'s close of {id} fenced by lease {lease_id} was applied, though lease {} of {} was granted at {:?}, before the close was sent at {:?}",
                newer.lease_id, newer.actor, newer.completed_at, entry.invoked_at
            )));
        }
    }
    match after_bound {
        Ok(beads) => {
            for bead in beads.iter().filter(|bead| bead.lease.is_some()) {
                let lease = bead.lease.as_ref().expect("filtered on a lease");
                violations.push(violation(format!(
                    "bead {} still holds {}'s lease {} after the agents stopped and the expiry bound passed",
                    bead.id, lease.holder, lease.id
                )));
            }
        }
        Err(error) => violations.push(violation(format!("the leasable beads could not be read back: {error}"))),
    }
    violations
}
