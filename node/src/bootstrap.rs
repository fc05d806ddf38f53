//! Bootstrap of a static cluster: the lowest id of the configured members initialises the
//! cluster, once, on its first start; every other node, and every later start, waits for the
//! leader to replicate to it.
//!
//! An empty data directory does not prove a first start: a member whose disk was lost comes back
//! empty too, and a lowest id that initialised again would start a second cluster under the
//! first one's name. So the lowest id initialises only when
//! - its log is empty and it has no rejoin marker (a node started with `--rejoin` never
//!   initialises), and
//! - a majority of the other members answer that they are empty too: term 0 and an empty log. A
//!   cluster that exists holds its first membership on a majority of its members, at least half
//!   of the members once this node is left out (this node is at most one of them), so a majority
//!   of the others always includes a member that holds it.
//!   Until enough answer, it asks again; one that answers with a log stops it for good, with a
//!   warning when the node was not started with `--rejoin` (the unsafe case: it votes at once).
//!
//! A node that starts with a rejoin marker never initialises: it asks the other members the same
//! way for their last log ids, until enough answer to set the target its log must reach before it
//! votes again (see [`crate::rejoin`]). A rejoining node that learned, by the same judgement, that
//! the cluster has not formed drops its marker before it starts (see `crate::join`), and so may
//! initialise.
//!
//! A node that joined a running cluster (`--join`, see `crate::join`) never runs any of this.
//!
//! The lowest id draws the cluster's id as it initialises, and records it first; the others
//! learn it from its first vote (see `crate::identity`). Until then they ask and answer with no
//! cluster id, which a status request allows.
//!
//! Invariant: [`openraft::Raft::initialize`] is called only by the lowest configured id, on an
//! empty log, without a rejoin marker or a join, after the other members' answers showed no
//! cluster, and once its cluster id is recorded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::proto as pb;
use raft_store::types::Member;
use raft_store::{Disk, NodeId};

use crate::core::NodeCore;
use crate::peer::network::Peers;
use crate::rejoin::{self, answers_needed};

/// How long the lowest id waits between two rounds of asking the other members.
pub const ASK_AGAIN_AFTER: Duration = Duration::from_millis(500);

/// What the other members' answers say about initialising.
#[derive(Debug, PartialEq, Eq)]
pub enum Judgement {
    /// Enough members answered, all empty: initialise.
    Initialize,
    /// A member answered with a log: the cluster exists (its id, term and last log index).
    Exists(NodeId, u64, u64),
    /// Too few answered yet (how many more are needed).
    Wait(usize),
}

/// Judges the answers of the other members (`None`: no answer) of a cluster of `others + 1`.
pub fn judge(answers: &BTreeMap<NodeId, Option<(u64, u64)>>) -> Judgement {
    if let Some((id, (term, last))) =
        answers.iter().find_map(|(id, answer)| answer.filter(|(term, last)| *term > 0 || *last > 0).map(|a| (*id, a)))
    {
        return Judgement::Exists(id, term, last);
    }
    let empty = answers.values().filter(|answer| answer.is_some()).count();
    let needed = answers_needed(answers.len());
    if empty >= needed { Judgement::Initialize } else { Judgement::Wait(needed - empty) }
}

/// Initialises the cluster when this node is its lowest configured id and the members' answers
/// show no cluster yet, or finds a rejoining node's target (see the module header); returns at
/// once otherwise.
pub async fn run<D: Disk>(core: Arc<NodeCore<D>>, peers: Arc<Peers>) {
    tokio::select! {
        () = core.stopped() => {}
        () = async {
            if core.is_rejoining() {
                find_rejoin_target(&core, &peers).await;
            } else {
                bootstrap(&core, &peers).await;
            }
        } => {}
    }
}

/// The other configured members (and, for a node that joined, the voters its join answered),
/// each with its peer address.
fn others<D: Disk>(core: &NodeCore<D>) -> Vec<(NodeId, String)> {
    let mut members = core.config.members();
    members.extend(core.standing.as_ref().map(crate::standing::Standing::joined_voters).unwrap_or_default());
    members.into_iter().filter(|(id, _)| *id != core.id).collect()
}

/// The other voters of the freshest membership among `answers` (the one of the answer with the
/// greatest last log id), each with its peer address; `None` when no answer carries one.
fn answered_voters(id: NodeId, answers: &BTreeMap<NodeId, Option<pb::NodeStatus>>) -> Option<Vec<(NodeId, String)>> {
    let freshest = answers
        .values()
        .flatten()
        .filter(|status| !status.membership.is_empty() && !status.rejoining)
        .max_by_key(|status| (status.last_log_term, status.last_log_index))?;
    let voters = freshest.membership.iter().filter(|member| member.voter && member.id != id);
    Some(voters.map(|member| (member.id, member.peer_address.clone())).collect())
}

/// Asks each of `others` for its status, at once; `None` for one that did not answer in time.
async fn ask(
    peers: &Peers,
    others: &[(NodeId, String)],
    timeout: Duration,
) -> BTreeMap<NodeId, Option<pb::NodeStatus>> {
    let asked = others.iter().map(|(id, address)| async move {
        let mut client = peers.client(*id, address).ok()?;
        let status = tokio::time::timeout(timeout, client.get_node_status(pb::StatusRequest::default())).await;
        Some(status.ok()?.ok()?.into_inner())
    });
    others.iter().map(|(id, _)| *id).zip(futures::future::join_all(asked).await).collect()
}

/// Says that answers are awaited (`say`), the first time only (`told`), then waits before the
/// next round of asking.
async fn wait_for_answers(told: &mut bool, say: impl FnOnce()) {
    if !std::mem::replace(told, true) {
        say();
    }
    tokio::time::sleep(ASK_AGAIN_AFTER).await;
}

/// Asks the other members until enough answered to set this rejoining node's target, then sets
/// it (and clears the marker at once if the log already reaches it).
async fn find_rejoin_target<D: Disk>(core: &NodeCore<D>, peers: &Peers) {
    let Some(rejoin) = &core.rejoin else { return };
    tracing::info!(
        node = core.id,
        "rejoining: not initializing a cluster; asking the other members how far their logs reach"
    );
    let mut others = others(core);
    let timeout = Duration::from_millis(core.config.raft.rpc_timeout_ms);
    let mut told_wait = false;
    loop {
        let statuses = ask(peers, &others, timeout).await;
        // The configured members may be an older membership than the cluster's now: ask the
        // voters of the freshest membership an answer carries instead, until they are the ones
        // asked.
        if let Some(voters) = answered_voters(core.id, &statuses)
            && voters != others
        {
            tracing::info!(
                node = core.id,
                voters = ?voters.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
                "rejoining: the cluster's membership has changed since the configured one; asking its voters"
            );
            others = voters;
            tokio::time::sleep(ASK_AGAIN_AFTER / 5).await;
            continue;
        }
        let answers: BTreeMap<NodeId, Option<rejoin::Answer>> = statuses
            .into_iter()
            .map(|(id, status)| {
                let answer = status.map(|status| rejoin::Answer {
                    rejoining: status.rejoining,
                    term: status.term,
                    last_log: (status.last_log_term, status.last_log_index),
                });
                (id, answer)
            })
            .collect();
        match rejoin::judge_target(&answers) {
            Ok(target) => {
                tracing::info!(
                    node = core.id,
                    term = target.term,
                    last_log = ?target.last_log,
                    "rejoining: this node accepts leaders of this term or later, and votes again once its log reaches the other members' greatest last log id"
                );
                rejoin.set_target(target);
                if let Err(error) = rejoin.check_caught_up(core.last_log()) {
                    tracing::error!(%error, "could not clear the rejoin marker; this node still does not vote");
                }
                return;
            }
            Err(more) => {
                wait_for_answers(&mut told_wait, || {
                    tracing::warn!(
                        node = core.id,
                        "rejoining: this node does not vote until {more} more member(s) that kept their data answer with how far their logs reach; start them, or check the network between the members"
                    );
                })
                .await;
            }
        }
    }
}

async fn bootstrap<D: Disk>(core: &NodeCore<D>, peers: &Peers) {
    if core.standing.as_ref().is_some_and(crate::standing::Standing::joined) || !core.config.join.is_empty() {
        return;
    }
    let members = core.config.members();
    let lowest = *members.keys().next().expect("members include this node");
    if lowest != core.id || initialized(core).await {
        return;
    }
    let others = others(core);
    let timeout = Duration::from_millis(core.config.raft.rpc_timeout_ms);
    let mut told_wait = false;
    loop {
        let answers: BTreeMap<NodeId, Option<(u64, u64)>> = ask(peers, &others, timeout)
            .await
            .into_iter()
            .map(|(id, status)| {
                (id, status.map(|status| (status.term, status.last_log_index.max(status.applied_index))))
            })
            .collect();
        if initialized(core).await {
            return;
        }
        match judge(&answers) {
            Judgement::Initialize => break,
            Judgement::Exists(id, term, last) => {
                tracing::warn!(
                    node = core.id,
                    "this node started on an empty data directory, but the cluster already exists (node {id} is at term {term}, its log reaches {last}): not initializing; waiting for the leader to replicate to this node. It was started without --rejoin, which is unsafe: a node that lost its data votes at once, and may help elect a leader that lacks writes it had helped commit. Stop it, empty its --data-dir, and start it with --rejoin"
                );
                return;
            }
            Judgement::Wait(more) => {
                wait_for_answers(&mut told_wait, || {
                    tracing::info!(
                        node = core.id,
                        "waiting for {more} more member(s) to answer before initializing the cluster (each must show an empty log)"
                    );
                })
                .await;
            }
        }
    }
    // The cluster's id is drawn here, as it is made (see `crate::identity`); a node that
    // learned one since is part of a cluster that exists.
    if !core.cluster_id.is_bound()
        && let Err(error) = core.cluster_id.bind(core.cluster_id.drawn())
    {
        tracing::error!(%error, "cannot record the new cluster's id; not initializing");
        return;
    }
    let mut nodes: BTreeMap<u64, Member> =
        members.into_iter().map(|(node_id, address)| (node_id, Member::new(address))).collect();
    if let Some(own) = nodes.get_mut(&core.id) {
        own.client_addr = core.config.advertised_client();
    }
    tracing::info!(node = core.id, members = ?nodes.keys().collect::<Vec<_>>(), "initializing the cluster");
    match core.raft.initialize(nodes).await {
        Ok(()) | Err(openraft::errors::RaftError::APIError(openraft::errors::InitializeError::NotAllowed(_))) => {}
        Err(error) => tracing::error!(%error, "initializing the cluster failed"),
    }
}

async fn initialized<D: Disk>(core: &NodeCore<D>) -> bool {
    core.raft.is_initialized().await.unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_id_initialises_only_on_enough_empty_answers_and_never_over_a_log() {
        assert_eq!((answers_needed(0), answers_needed(1), answers_needed(2), answers_needed(4)), (0, 1, 2, 3));
        let answers = |list: &[(u64, Option<(u64, u64)>)]| list.iter().copied().collect::<BTreeMap<_, _>>();
        assert_eq!(judge(&answers(&[])), Judgement::Initialize, "a single-node cluster");
        assert_eq!(judge(&answers(&[(2, None), (3, None)])), Judgement::Wait(2));
        assert_eq!(judge(&answers(&[(2, Some((0, 0))), (3, None)])), Judgement::Wait(1));
        assert_eq!(judge(&answers(&[(2, Some((0, 0))), (3, Some((0, 0)))])), Judgement::Initialize);
        assert_eq!(judge(&answers(&[(2, Some((0, 0))), (3, Some((4, 120)))])), Judgement::Exists(3, 4, 120));
        // Four others: two empty answers are needed, and one with a log wins over any number.
        let five = answers(&[(2, Some((0, 0))), (3, Some((0, 0))), (4, None), (5, None)]);
        assert_eq!(judge(&five), Judgement::Wait(1));
        let five = answers(&[(2, Some((0, 0))), (3, Some((0, 0))), (4, None), (5, Some((1, 0)))]);
        assert_eq!(judge(&five), Judgement::Exists(5, 1, 0));
    }
}
