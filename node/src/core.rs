//! What every plane of a node shares: the Raft handle, the state machine, the clock, the
//! configuration, the metrics, the watch-stream limit, the rejoin state, the shutdown signal, and
//! the node's own status. This module knows no plane: the leader,
//! peer and client planes (`leader/`, `peer/`, `client/`) build on it, never the reverse.
//!
//! Invariant: a local read answers from this node's replica as it is now; consistency (the read
//! index) is the leader plane's business.

use std::sync::Arc;

use api::outcome::Answer;
use api::proto as pb;
use openraft::async_runtime::WatchReceiver;
use raft_store::types::TypeConfig;
use raft_store::{Disk, NodeId, StateMachineStore};

use crate::clock::Clock;
use crate::config::NodeConfig;
use crate::metrics::{Metrics, RaftView};

/// The Raft handle of a node.
pub type StrandRaft<D> = openraft::Raft<TypeConfig, StateMachineStore<D>>;

/// Watch streams one node serves at once; one more is refused with `RESOURCE_EXHAUSTED`.
pub const WATCH_STREAMS_MAX: usize = 4096;

/// Everything the planes share.
pub struct NodeCore<D: Disk> {
    /// This node's id.
    pub id: NodeId,
    /// The Raft handle.
    pub raft: StrandRaft<D>,
    /// The state machine (for local reads).
    pub state_machine: StateMachineStore<D>,
    /// The clock stamped into proposals.
    pub clock: Arc<dyn Clock>,
    /// The node's configuration.
    pub config: NodeConfig,
    /// The id of this node's cluster, which every Raft message must carry (unbound until the
    /// node learns it; see `crate::identity`).
    pub cluster_id: Arc<crate::identity::ClusterId>,
    /// Becomes `true` when the node begins to shut down; long-lived streams (watch) end then, so
    /// the server's graceful shutdown does not wait on them forever.
    stopping: tokio::sync::watch::Sender<bool>,
    /// One permit per open watch stream, [`WATCH_STREAMS_MAX`] in all.
    pub watch_streams: Arc<tokio::sync::Semaphore>,
    /// The node's Prometheus metrics.
    pub metrics: Metrics,
    /// The rejoin state of a node that came back after losing its data (`None` in unit tests).
    pub rejoin: Option<crate::rejoin::Rejoin<D>>,
    /// Its standing in the membership: the seed members, and whether it was removed (`None` in
    /// unit tests: the configured members count, and it is never removed).
    pub standing: Option<crate::standing::Standing<D>>,
    /// The controller's duties while it runs on this node (empty otherwise), for `cluster status`.
    pub duties: std::sync::Mutex<Vec<pb::DutyStatus>>,
    /// What the member watch found of each other member while this node leads (empty otherwise),
    /// for `cluster status`.
    pub members: std::sync::Mutex<Vec<pb::MemberProgress>>,
    /// The leadership transfer last announced to this node by its leader, or begun by this node
    /// as leader: the target, and until when that target's vote requests may pass the leader
    /// lease.
    transfer: std::sync::Mutex<Option<(NodeId, tokio::time::Instant)>>,
    /// Why this node stopped on its own: an entry or snapshot its build cannot apply.
    halted: std::sync::Mutex<Option<String>>,
    /// While this node leads: the divergence its consistency checks found, if any (see
    /// `leader::members`).
    pub divergence: std::sync::Mutex<Option<String>>,
    /// The bug planted in this node, if any (simulator only; see [`crate::PlantedBug`]).
    pub planted: Option<crate::PlantedBug>,
}

impl<D: Disk> NodeCore<D> {
    /// Bundles a running node's parts.
    pub fn new(
        raft: StrandRaft<D>,
        state_machine: StateMachineStore<D>,
        clock: Arc<dyn Clock>,
        config: NodeConfig,
        cluster_id: Arc<crate::identity::ClusterId>,
        metrics: Metrics,
    ) -> NodeCore<D> {
        let (stopping, _) = tokio::sync::watch::channel(false);
        NodeCore {
            id: config.id,
            raft,
            state_machine,
            clock,
            config,
            cluster_id,
            stopping,
            watch_streams: Arc::new(tokio::sync::Semaphore::new(WATCH_STREAMS_MAX)),
            metrics,
            rejoin: None,
            standing: None,
            duties: std::sync::Mutex::new(Vec::new()),
            members: std::sync::Mutex::new(Vec::new()),
            transfer: std::sync::Mutex::new(None),
            halted: std::sync::Mutex::new(None),
            divergence: std::sync::Mutex::new(None),
            planted: None,
        }
    }

    /// Raft's state and the store's size now, for the metrics page.
    pub fn raft_view(&self) -> RaftView {
        let watched = self.raft.metrics();
        let mut view = raft_view_of(self.id, &watched.borrow_watched());
        (view.beads, view.leases, view.controller_term, view.orders) = self.state_machine.read(|state| {
            let counts = (state.bead_count(), state.lease_count(), state.order_count());
            (counts.0 as u64, counts.1 as u64, state.controller_term(), counts.2 as u64)
        });
        view.watch_streams = (WATCH_STREAMS_MAX - self.watch_streams.available_permits()) as u64;
        view.apply_version = u64::from(self.state_machine.read(|state| state.apply_version().version));
        (view.beads_held, view.bead_cache) = self
            .state_machine
            .read(|state| (state.held_bead_count() as u64, state.cold_cache_stats().unwrap_or_default()));
        view.divergence = self.divergence.lock().expect("the divergence lock is never poisoned").is_some();
        view
    }

    /// The metrics page, with Raft's state as it is now.
    pub fn metrics_page(&self) -> String {
        self.metrics.render(&self.raft_view())
    }

    /// Waits for `shutdown`, then tells every long-lived stream to end; pass it to the gRPC
    /// server as its shutdown signal.
    pub async fn stop_streams_on(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        shutdown.await;
        self.stopping.send_replace(true);
    }

    /// Stops the node because of `why` (an entry or snapshot its build cannot apply): it serves
    /// nothing more, and `run` ends with the reason.
    pub fn halt(&self, why: String) {
        *self.halted.lock().expect("the halted lock is never poisoned") = Some(why);
        self.stopping.send_replace(true);
    }

    /// Why this node stopped on its own, if it did ([`NodeCore::halt`]).
    pub fn halted(&self) -> Option<String> {
        self.halted.lock().expect("the halted lock is never poisoned").clone()
    }

    /// Notes a leadership transfer to `to`: announced by the leader, or begun by this node as
    /// leader (whose own vote the target needs too). It stands for two election timeouts.
    pub fn announce_transfer(&self, to: NodeId) {
        let window = std::time::Duration::from_millis(self.config.raft.election_timeout_ms_max * 2);
        *self.transfer.lock().expect("transfer lock") = Some((to, tokio::time::Instant::now() + window));
    }

    /// Whether a transfer to `candidate` was noted ([`NodeCore::announce_transfer`]) and still
    /// stands.
    pub fn transfer_announced_to(&self, candidate: NodeId) -> bool {
        let announced = *self.transfer.lock().expect("transfer lock");
        announced.is_some_and(|(target, until)| target == candidate && tokio::time::Instant::now() <= until)
    }

    /// Whether `id` is a member: of the membership this node's log holds, or, while it holds
    /// none, of the seed (see `crate::standing`).
    pub fn is_member(&self, id: NodeId) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        let membership = metrics.membership_config.membership();
        if membership.nodes().next().is_some() {
            return membership.get_node(&id).is_some();
        }
        match &self.standing {
            Some(standing) => standing.seed().contains(&id),
            None => id == self.id || self.config.peers.contains_key(&id),
        }
    }

    /// Whether this node takes a leader's or a candidate's message (an append, a snapshot, a vote)
    /// from `id`: a member, or a node it never saw leave a membership (one added after this
    /// node's last entry).
    pub fn may_lead(&self, id: NodeId) -> bool {
        self.is_member(id) || self.standing.as_ref().is_some_and(|standing| standing.saw_leave(id).is_none())
    }

    /// This node learns, from member `by`, that the membership at log index `index` no longer
    /// holds it: unless it knows a membership at or after `index` that holds it, it records so
    /// durably, stops its Raft core, and from then on answers every request with the reason (see
    /// `crate::standing`). Answers the reason, or `None` when the notice does not concern it.
    pub fn learn_removed(&self, index: u64, by: NodeId) -> std::io::Result<Option<String>> {
        let Some(standing) = &self.standing else { return Ok(None) };
        if standing.removed().is_none() && !standing.notice_applies(self.id, index) {
            tracing::warn!(
                node = self.id,
                index,
                by,
                "a removal notice for a membership older than one that holds this node; ignored"
            );
            return Ok(None);
        }
        let record = crate::standing::RemovedRecord {
            cluster_name: self.config.cluster_name.clone(),
            cluster_id: self.cluster_id.get(),
            node_id: self.id,
            index,
            by,
        };
        let (message, recorded) = standing.record_removed(&record)?;
        if recorded {
            tracing::error!(node = self.id, "{message}");
            let raft = self.raft.clone();
            tokio::spawn(async move {
                let _ = raft.shutdown().await;
            });
            // The node stops: its servers end, and `run` returns the reason.
            self.stopping.send_replace(true);
        }
        Ok(Some(message))
    }

    /// Why this node no longer serves, once it was removed from the cluster.
    pub fn removed(&self) -> Option<String> {
        self.standing.as_ref().and_then(crate::standing::Standing::removed)
    }

    /// Whether this node must not vote yet (it is rejoining after losing its data).
    pub fn is_rejoining(&self) -> bool {
        self.rejoin.as_ref().is_some_and(crate::rejoin::Rejoin::is_rejoining)
    }

    /// Whether this node may accept an append or a snapshot from a leader of `term` (a rejoining
    /// node refuses one until it knows the cluster's term, and a deposed one after; see
    /// `crate::rejoin`).
    pub fn admit_leader(&self, term: u64) -> Result<(), String> {
        self.rejoin.as_ref().map_or(Ok(()), |rejoin| rejoin.admit_leader(term))
    }

    /// The id of the last entry in this node's log, as (term, index); (0, 0) when empty.
    pub fn last_log(&self) -> (u64, u64) {
        self.raft
            .data_metrics()
            .borrow_watched()
            .last_log
            .map_or((0, 0), |log_id| (log_id.leader_id.term, log_id.index))
    }

    /// Resolves when the node begins to shut down.
    pub async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        // An error means the sender is gone, which only happens when the node is dropped.
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }

    /// The leader this node knows of.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow_watched().current_leader
    }

    /// Answers a query made with `credential` from this node's replica as it is now, with no
    /// consistency check: judged by the token (when auth is on) and answered in one look at the
    /// state. With `must_exist`, a namespace that does not exist is refused, not read as empty.
    pub fn read_as(
        &self,
        credential: Option<&api::auth::TokenHash>,
        namespace: &api::model::Namespace,
        must_exist: bool,
        query: &api::command::Query,
    ) -> Answer {
        self.state_machine.read(|state| state.query_as(credential, namespace, must_exist, query))
    }

    /// This node's own status, as `strand cluster status` shows each member.
    pub fn own_status(&self, include_digest: bool) -> pb::NodeStatus {
        let metrics = self.raft.metrics().borrow_watched().clone();
        let (digest, bead_count, controller_term, lease_count, versions) = self.state_machine.read(|state| {
            let digest = include_digest.then(|| state.digest());
            let counts = (state.bead_count() as u64, state.lease_count() as u64);
            (digest, counts.0, state.controller_term(), counts.1, state.apply_version())
        });
        let range = self.state_machine.apply_versions();
        let fatal_error = match &metrics.running_state {
            Ok(()) => String::new(),
            Err(fatal) => fatal.to_string(),
        };
        pb::NodeStatus {
            id: self.id,
            address: self.config.advertised_peer(),
            client_address: self.config.advertised_client(),
            state: format!("{:?}", metrics.state).to_lowercase(),
            term: metrics.current_term,
            last_log_index: metrics.last_log_index.unwrap_or(0),
            last_log_term: self.last_log().0,
            applied_index: metrics.last_applied.map_or(0, |log_id| log_id.index),
            snapshot_index: metrics.snapshot.map_or(0, |log_id| log_id.index),
            purged_index: metrics.purged.map_or(0, |log_id| log_id.index),
            leader_id: metrics.current_leader.unwrap_or(0),
            digest,
            fatal_error,
            bead_count,
            error: String::new(),
            controller_term,
            lease_count,
            duties: self.duties.lock().expect("the duties lock is never poisoned").clone(),
            rejoining: self.is_rejoining(),
            lag: 0,
            note: String::new(),
            members: self.members.lock().expect("the members lock is never poisoned").clone(),
            membership: membership_of(metrics.membership_config.membership()),
            cluster_id: self.cluster_id.get(),
            stopping: *self.stopping.borrow(),
            apply_min: range.min,
            apply_max: range.max,
            build: api::version::build_name(),
            apply_version: versions.version,
            apply_pinned: versions.pinned,
            apply_since: versions.since,
            checkpoints: self
                .state_machine
                .checkpoints()
                .into_iter()
                .map(|(index, digest)| pb::Checkpoint { index, digest })
                .collect(),
            digesting: self.state_machine.digesting(),
            divergence: self
                .divergence
                .lock()
                .expect("the divergence lock is never poisoned")
                .clone()
                .unwrap_or_default(),
        }
    }
}

/// A membership as `NodeStatus` carries it.
pub fn membership_of(
    membership: &openraft::Membership<NodeId, raft_store::types::Member>,
) -> Vec<pb::MembershipMember> {
    let voters: Vec<NodeId> = membership.voter_ids().collect();
    membership_rows(membership.nodes(), |id| voters.contains(&id))
}

/// Members as `NodeStatus` and the membership answers carry them, `voter` telling which vote.
pub fn membership_rows<'m>(
    members: impl IntoIterator<Item = (&'m NodeId, &'m raft_store::types::Member)>,
    voter: impl Fn(NodeId) -> bool,
) -> Vec<pb::MembershipMember> {
    members
        .into_iter()
        .map(|(id, member)| pb::MembershipMember {
            id: *id,
            peer_address: member.addr.clone(),
            client_address: member.client_addr.clone(),
            voter: voter(*id),
            auto_promote: member.auto_promote,
        })
        .collect()
}

/// The Raft part of the metrics page, from Raft's metrics. A node whose Raft core stopped on a
/// fatal error is no leader and knows none, whatever its last metrics said: it serves no write
/// and sends no heartbeat, so a dashboard must not count it as the cluster's leader.
fn raft_view_of(id: NodeId, metrics: &openraft::RaftMetrics<TypeConfig>) -> RaftView {
    let fatal = metrics.running_state.is_err();
    let leader = if fatal { None } else { metrics.current_leader };
    RaftView {
        term: metrics.current_term,
        is_leader: leader == Some(id),
        leader: leader.unwrap_or(0),
        last_log_index: metrics.last_log_index.unwrap_or(0),
        applied_index: metrics.last_applied.map_or(0, |log_id| log_id.index),
        snapshot_index: metrics.snapshot.map_or(0, |log_id| log_id.index),
        fatal,
        ..RaftView::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fatal_node_exports_no_leader() {
        let mut metrics = openraft::RaftMetrics::<TypeConfig>::new_initial(3);
        metrics.current_term = 4;
        metrics.current_leader = Some(3);
        let view = raft_view_of(3, &metrics);
        assert!(view.is_leader && view.leader == 3 && !view.fatal, "{view:?}");

        metrics.running_state = Err(openraft::errors::Fatal::Panicked);
        let view = raft_view_of(3, &metrics);
        assert!(!view.is_leader, "{view:?}");
        assert_eq!(view.leader, 0, "{view:?}");
        assert!(view.fatal, "{view:?}");
        assert_eq!(view.term, 4, "the term is still shown: {view:?}");

        // A fatal follower no longer names the leader it last knew either.
        metrics.current_leader = Some(1);
        let page = crate::metrics::Metrics::new().render(&raft_view_of(3, &metrics));
        for line in ["strand_raft_is_leader 0", "strand_raft_leader_id 0", "strand_raft_fatal 1"] {
            assert!(page.lines().any(|candidate| candidate == line), "missing {line:?} in\n{page}");
        }
    }
}
