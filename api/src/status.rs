//! What a cluster's status (`Cluster.Status`) and a namespace's queues (`Namespaces.Queues`) say
//! beyond their fields, judged one way for every reader of them: `strand cluster status`,
//! `strand top` and the web console.

use crate::outcome::{OrderInfo, QueueDetail};
use crate::printable::printable;
use crate::proto::StatusResponse;

/// Ready work waiting longer than this needs attention.
pub const READY_WAIT_ATTENTION_MS: i64 = 10 * 60 * 1000;

/// The node whose controller runs: the leader, once its replica applied the `Begin` of its term.
pub fn controller(status: &StatusResponse) -> Option<u64> {
    let leader = status.nodes.iter().find(|node| node.id == status.leader_id && node.state == "leader")?;
    (leader.controller_term == leader.term && leader.term > 0).then_some(leader.id)
}

/// The state's apply version as the leader (or else any node that answered) holds it, and
/// whether it is pinned.
pub fn apply_version(status: &StatusResponse) -> Option<(u32, bool)> {
    let leader = status.nodes.iter().find(|node| node.id == status.leader_id && node.apply_version > 0);
    let node = leader.or_else(|| status.nodes.iter().find(|node| node.apply_version > 0))?;
    Some((node.apply_version, node.apply_pinned))
}

/// What needs an operator's attention, one line each; empty when all is well: no leader, a
/// member unreachable, a stopped Raft core, a divergence alarm, a member not catching up.
pub fn attention(status: &StatusResponse) -> Vec<String> {
    let mut found = Vec::new();
    if status.leader_id == 0 {
        found.push("no leader: writes wait until one is elected".to_string());
    }
    for node in &status.nodes {
        if node.state == "unreachable" {
            found.push(format!("node {} is unreachable: {}", node.id, node.error));
        }
        if !node.fatal_error.is_empty() {
            found.push(format!("node {}'s Raft core stopped: {} (restart it)", node.id, node.fatal_error));
        }
        if !node.divergence.is_empty() {
            found.push(format!("node {} reports divergence: {}", node.id, node.divergence));
        }
        if !node.note.is_empty() {
            found.push(format!("node {}: {}", node.id, node.note));
        }
    }
    found
}

/// What in a namespace's queues and orders needs attention, one line each; empty when all is
/// well: dead-lettered beads, leases about to lapse, ready work waiting longer than
/// [`READY_WAIT_ATTENTION_MS`], an order whose stored source no longer parses.
pub fn queue_attention(namespace: &str, queues: &QueueDetail, orders: &[OrderInfo]) -> Vec<String> {
    let namespace = printable(namespace);
    let mut found = Vec::new();
    if queues.dead_lettered > 0 {
        found.push(format!(
            "{namespace}: {} dead-lettered (blocked after repeated lease expiries)",
            queues.dead_lettered
        ));
    }
    if queues.expiring > 0 {
        let window = queues.window_ms / 1000;
        found.push(format!("{namespace}: {} of {} leases lapse within {window}s", queues.expiring, queues.leased));
    }
    if let Some((id, created_at)) = &queues.oldest_ready {
        let waited = queues.now.0 - created_at.0;
        if waited > READY_WAIT_ATTENTION_MS {
            found.push(format!("{namespace}: ready work has waited {}m (oldest {id})", waited / 60_000));
        }
    }
    for order in orders.iter().filter(|order| !order.error.is_empty()) {
        found.push(format!("{namespace}: order {} cannot fire: {}", printable(&order.name), order.error));
    }
    found
}
