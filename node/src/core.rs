//! The node's request paths: writes go through Raft (forwarded to the leader when this node is
//! not it), reads are linearized through the leader's read index unless asked otherwise.
//!
//! Invariant: only the leader stamps a proposal (time, default prefix, event retention), so the
//! state machine never reads a clock or the node's configuration.
//! Invariant: a write is retried here only with a request id, so a retry after an unknown outcome
//! is answered from the dedup table instead of applied twice. Requests that arrive without one
//! get an id from the node's own numbering.

use std::sync::Arc;
use std::time::Duration;

use api::command::{Proposal, RequestId};
use api::convert::{Consistency, ReadRequest, WriteRequest};
use api::outcome::Answer;
use api::request_ids::RequestIds;
use openraft::ReadPolicy;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ClientWriteError, RaftError};
use openraft::raft::linearizable_read::{Linearizer, ReadLogId};
use raft_store::types::{LogId, TypeConfig};
use raft_store::{Disk, NodeId, StateMachineStore};
use serde::{Deserialize, Serialize};
use tonic::Status;

use crate::clock::Clock;
use crate::config::NodeConfig;
use crate::metrics::{Metrics, RaftView, RequestOutcome};
use crate::network::{PeerRpc, Peers, decode, encode};

/// The Raft handle of a node.
pub type StrandRaft<D> = openraft::Raft<TypeConfig, StateMachineStore<D>>;

/// How long a write or a linearizable read may wait for a leader before failing.
pub const LEADER_WAIT_MS_MAX: u64 = 10_000;
/// Longest pause between attempts while no leader is known.
const RETRY_PAUSE_MS_MAX: u64 = 200;

/// A write forwarded from a follower to the leader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ForwardedWrite {
    /// The namespace.
    pub namespace: api::model::Namespace,
    /// The request's identity (always set on forwarded writes).
    pub request_id: RequestId,
    /// Who acts, recorded in the events of the write.
    pub actor: api::model::Actor,
    /// The id prefix the namespace gets if this write creates it; `None`: the leader's default.
    pub prefix: Option<String>,
    /// The command.
    pub command: api::command::Command,
}

/// The leader's answer to a read-index request.
pub type ReadIndex = (NodeId, ReadLogId<TypeConfig>, Option<LogId>);

/// Everything the services share.
pub struct NodeCore<D: Disk> {
    /// This node's id.
    pub id: NodeId,
    /// The Raft handle.
    pub raft: StrandRaft<D>,
    /// The state machine (for local reads).
    pub state_machine: StateMachineStore<D>,
    /// Channels to peers.
    pub peers: Arc<Peers>,
    /// The clock stamped into proposals.
    pub clock: Arc<dyn Clock>,
    /// The node's configuration.
    pub config: NodeConfig,
    /// The id of this node's cluster, which every Raft message must carry.
    pub cluster_id: u64,
    request_ids: RequestIds,
    /// Becomes `true` when the node begins to shut down; long-lived streams (watch) end then, so
    /// the server's graceful shutdown does not wait on them forever.
    stopping: tokio::sync::watch::Sender<bool>,
    /// One permit per open watch stream, [`crate::services::WATCH_STREAMS_MAX`] in all.
    pub watch_streams: Arc<tokio::sync::Semaphore>,
    /// The node's Prometheus metrics.
    pub metrics: Metrics,
    /// The rejoin state of a node that came back after losing its data (`None` in unit tests).
    pub rejoin: Option<crate::rejoin::Rejoin<D>>,
}

/// How a request's answer is counted.
fn outcome_of(result: &Result<Answer, Status>) -> RequestOutcome {
    match result {
        Ok(Ok(_)) => RequestOutcome::Ok,
        Ok(Err(_)) => RequestOutcome::Refused,
        Err(_) => RequestOutcome::Failed,
    }
}

impl<D: Disk> NodeCore<D> {
    /// Bundles a running node's parts; `client_id` numbers requests that arrive without an id.
    pub fn new(
        raft: StrandRaft<D>,
        state_machine: StateMachineStore<D>,
        peers: Arc<Peers>,
        clock: Arc<dyn Clock>,
        config: NodeConfig,
        cluster_id: u64,
        client_id: u64,
    ) -> NodeCore<D> {
        let (stopping, _) = tokio::sync::watch::channel(false);
        NodeCore {
            id: config.id,
            raft,
            state_machine,
            peers,
            clock,
            config,
            cluster_id,
            request_ids: RequestIds::new(client_id),
            stopping,
            watch_streams: Arc::new(tokio::sync::Semaphore::new(crate::services::WATCH_STREAMS_MAX)),
            metrics: Metrics::new(),
            rejoin: None,
        }
    }

    /// Raft's state and the store's size now, for the metrics page.
    pub fn raft_view(&self) -> RaftView {
        let watched = self.raft.metrics();
        let mut view = raft_view_of(self.id, &watched.borrow_watched());
        view.beads = self.state_machine.read(|state| state.bead_count()) as u64;
        view.watch_streams = (crate::services::WATCH_STREAMS_MAX - self.watch_streams.available_permits()) as u64;
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

    /// Whether this node must not vote yet (it is rejoining after losing its data).
    pub fn is_rejoining(&self) -> bool {
        self.rejoin.as_ref().is_some_and(crate::rejoin::Rejoin::is_rejoining)
    }

    /// Notes an append from the leader, for a rejoining node's catch-up target.
    pub fn observe_append(&self, request: &openraft::raft::AppendEntriesRequest<TypeConfig>) {
        if let Some(rejoin) = &self.rejoin {
            let log_end = request.prev_log_id.map_or(0, |log_id| log_id.index) + request.entries.len() as u64;
            rejoin.observe_append(request.vote.leader_id().term, log_end);
        }
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

    /// The Raft-service client of the leader, through the reused peer channel.
    fn leader_client(&self, leader: NodeId) -> Result<PeerRpc, String> {
        let metrics = self.raft.metrics();
        let address =
            metrics.borrow_watched().membership_config.membership().get_node(&leader).map(|node| node.addr.clone());
        let address = address.ok_or_else(|| format!("leader {leader} has no known address"))?;
        self.peers.client(&address)
    }

    fn rpc_timeout(&self) -> Duration {
        Duration::from_millis(self.config.raft.rpc_timeout_ms)
    }

    /// Applies a write through Raft and answers it, waiting up to [`LEADER_WAIT_MS_MAX`] for a leader.
    pub async fn write(&self, request: WriteRequest) -> Result<Answer, Status> {
        let started = std::time::Instant::now();
        let result = self.write_counted(request).await;
        self.metrics.observe_write(outcome_of(&result), started.elapsed().as_secs_f64());
        result
    }

    async fn write_counted(&self, request: WriteRequest) -> Result<Answer, Status> {
        let own_id = request.request_id.is_none().then(|| self.request_ids.begin());
        let request_id = request.request_id.or(own_id).expect("a request id is set");
        let forwarded = ForwardedWrite {
            namespace: request.namespace,
            request_id,
            actor: request.actor,
            prefix: request.prefix,
            command: request.command,
        };
        let result = self.retry_until_deadline(|| self.write_attempt(&forwarded)).await;
        if let Some(own_id) = own_id {
            self.request_ids.finish(&own_id);
            if let Ok(Err(api::outcome::Refusal::SessionExpired { .. })) = &result {
                // The node's own session was evicted: number later requests under a new id.
                self.request_ids.renew(&own_id, own_id.client_id.wrapping_add(0x9e37_79b9_7f4a_7c16) | 1);
            }
        }
        result
    }

    async fn retry_until_deadline<F, Fut, T>(&self, mut attempt: F) -> Result<T, Status>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Attempt<T>, Status>>,
    {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(LEADER_WAIT_MS_MAX);
        let mut pause = Duration::from_millis(10);
        loop {
            let reason = match attempt().await? {
                Attempt::Done(value) => return Ok(value),
                Attempt::Retry(reason) => reason,
            };
            if tokio::time::Instant::now() + pause > deadline {
                return Err(Status::unavailable(format!(
                    "no leader could serve the request within {LEADER_WAIT_MS_MAX} ms ({reason}); check `strand cluster status` and that a majority of nodes is up"
                )));
            }
            tracing::debug!(%reason, "retrying");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(RETRY_PAUSE_MS_MAX));
        }
    }

    async fn write_attempt(&self, forwarded: &ForwardedWrite) -> Result<Attempt<Answer>, Status> {
        match self.leader() {
            None => Ok(Attempt::Retry("no leader is elected".into())),
            Some(leader) if leader == self.id => Ok(self.propose_local(forwarded).await),
            Some(leader) => Ok(self.forward(leader, forwarded).await),
        }
    }

    /// Proposes on this node, which believes it is leader; stamps the time, the default prefix
    /// (the client's, else the configured one) and the event retention.
    pub async fn propose_local(&self, forwarded: &ForwardedWrite) -> Attempt<Answer> {
        let proposal = Proposal {
            request_id: Some(forwarded.request_id),
            timestamp: self.clock.now(),
            default_prefix: forwarded.prefix.clone().unwrap_or_else(|| self.config.id_prefix.clone()),
            namespace: forwarded.namespace.clone(),
            actor: forwarded.actor.clone(),
            event_retention: self.config.event_retention,
            command: forwarded.command.clone(),
        };
        let commit_wait = Duration::from_millis(LEADER_WAIT_MS_MAX);
        let Ok(written) = tokio::time::timeout(commit_wait, self.raft.client_write(Arc::new(proposal))).await else {
            // The entry may still commit later; a retry with the same request id is answered
            // from the dedup table, so the outcome is unknown, never doubled.
            return Attempt::Retry(format!("the write was not committed within {commit_wait:?} (is a majority up?)"));
        };
        match written {
            Ok(response) => Attempt::Done(response.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Attempt::Retry(format!("this node is no longer leader (leader hint {:?})", forward.leader_id))
            }
            Err(RaftError::APIError(ClientWriteError::LogEntryDiscarded(_))) => {
                Attempt::Retry("the entry was discarded by a leader change".into())
            }
            Err(RaftError::APIError(other)) => Attempt::Retry(other.to_string()),
            Err(RaftError::Fatal(fatal)) => Attempt::Retry(format!("raft stopped: {fatal}")),
        }
    }

    async fn forward(&self, leader: NodeId, forwarded: &ForwardedWrite) -> Attempt<Answer> {
        self.metrics.observe_forward();
        let mut client = match self.leader_client(leader) {
            Ok(client) => client,
            Err(error) => return Attempt::Retry(error),
        };
        let timeout = self.rpc_timeout() * 4;
        match tokio::time::timeout(timeout, client.propose(encode(forwarded))).await {
            Err(_) => Attempt::Retry(format!("leader {leader} did not answer within {timeout:?}")),
            Ok(Err(status)) => Attempt::Retry(format!("leader {leader}: {}", status.message())),
            Ok(Ok(response)) => match decode::<Result<Answer, String>>(&response.into_inner()) {
                Ok(Ok(answer)) => Attempt::Done(answer),
                Ok(Err(reason)) => Attempt::Retry(format!("leader {leader}: {reason}")),
                Err(error) => Attempt::Retry(error),
            },
        }
    }

    /// Answers a read with the requested consistency.
    pub async fn read(&self, request: ReadRequest) -> Result<Answer, Status> {
        let result = self.read_counted(request).await;
        self.metrics.observe_read(outcome_of(&result));
        result
    }

    async fn read_counted(&self, request: ReadRequest) -> Result<Answer, Status> {
        if request.consistency == Consistency::Linearizable {
            self.retry_until_deadline(|| self.linearize_attempt()).await?;
        }
        Ok(self.read_local(&request.namespace, &request.query))
    }

    /// Answers a query from this node's replica as it is now, with no consistency check.
    pub fn read_local(&self, namespace: &api::model::Namespace, query: &api::command::Query) -> Answer {
        self.state_machine.read(|state| state.query(namespace, query))
    }

    /// The leader side of a linearizable read: confirm leadership with a quorum, answer the
    /// index every read must wait for.
    pub async fn read_index(&self) -> Result<ReadIndex, String> {
        let linearizer =
            self.raft.get_read_linearizer(ReadPolicy::ReadIndex).await.map_err(|error| error.to_string())?;
        Ok((*linearizer.node_id(), *linearizer.read_log_id(), linearizer.applied().cloned()))
    }

    async fn linearize_attempt(&self) -> Result<Attempt<()>, Status> {
        let Some(leader) = self.leader() else {
            return Ok(Attempt::Retry("no leader is elected".into()));
        };
        let read_index = if leader == self.id {
            match self.read_index().await {
                Ok(read_index) => read_index,
                Err(reason) => return Ok(Attempt::Retry(reason)),
            }
        } else {
            match self.remote_read_index(leader).await {
                Ok(read_index) => read_index,
                Err(reason) => return Ok(Attempt::Retry(reason)),
            }
        };
        let (leader_id, read_log_id, applied) = read_index;
        let linearizer = Linearizer::new(leader_id, read_log_id, applied);
        match linearizer.try_await_ready(&self.raft, Some(Duration::from_millis(LEADER_WAIT_MS_MAX))).await {
            Ok(Ok(_)) => Ok(Attempt::Done(())),
            Ok(Err(_)) => Ok(Attempt::Retry("this node did not catch up to the read index in time".into())),
            Err(fatal) => Err(Status::unavailable(format!("raft stopped on this node: {fatal}; use another endpoint"))),
        }
    }

    async fn remote_read_index(&self, leader: NodeId) -> Result<ReadIndex, String> {
        let mut client = self.leader_client(leader)?;
        let response = tokio::time::timeout(self.rpc_timeout(), client.read_index(encode(&())))
            .await
            .map_err(|_| format!("leader {leader} did not answer the read index in time"))?
            .map_err(|status| status.message().to_string())?;
        decode::<Result<ReadIndex, String>>(&response.into_inner())?
    }
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

/// One attempt's result inside [`NodeCore::retry_until_deadline`].
pub enum Attempt<T> {
    /// Finished with this value.
    Done(T),
    /// Try again; why.
    Retry(String),
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
