//! What a cluster's status (`Cluster.Status`) says beyond its fields, judged one way for every
//! reader of it: `strand cluster status`, `strand top` and the web console.

use crate::proto::StatusResponse;

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
