//! The leader plane: what must go through the Raft leader. A write is stamped and proposed here
//! when this node leads, and forwarded to the leader as a [`LeaderRequest`] when it does not; a
//! linearizable read waits for the leader's read index. The controller (`controller.rs`) and the
//! member watch (`members.rs`: how far behind each member is, and auto-promotion) run here while
//! this node leads; leadership moves (`transfer.rs`) and membership changes (`membership.rs`) are
//! made here.
//!
//! Invariant: only the leader stamps a proposal (time, default prefix, event retention), so the
//! state machine never reads a clock or the node's configuration.
//! Invariant: a write is retried here only with a request id, so a retry after an unknown outcome
//! is answered from the dedup table instead of applied twice. Requests that arrive without one
//! get an id from the node's own numbering.
//! Invariant: this plane speaks no gRPC status: its failure is [`Unavailable`], which the client
//! plane maps to its protocol.
//! Invariant: with auth enabled, a request is judged by its token against a replica that has
//! applied everything committed before the request arrived: a write when the state machine
//! applies it (this plane only refuses early what the replica refuses after the read index), a
//! read after its read index (a serializable read confirms a refusal after the read index too).
//! So a revoked token fails from the first request after the revocation was acknowledged.

pub mod controller;
pub mod members;
pub mod membership;
pub mod transfer;
pub mod versions;

use std::sync::Arc;
use std::time::Duration;

use api::command::{Proposal, RequestId};
use api::convert::{Consistency, ReadRequest, WriteRequest};
use api::outcome::{Answer, Refusal};
use api::request_ids::RequestIds;
use openraft::ReadPolicy;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ClientWriteError, RaftError};
use openraft::raft::linearizable_read::Linearizer;
use raft_store::{Disk, NodeId};
use serde::{Deserialize, Serialize};

use crate::core::NodeCore;
use crate::metrics::RequestOutcome;
use crate::peer::network::{PeerRpc, Peers, decode, encode};
use crate::peer::{ChangeRefused, Changed, LeaderPlane, MemberChange, MoveLeader, MoveRefused, Moved, ReadIndex};

/// How long a write or a linearizable read may wait for a leader before failing.
pub const LEADER_WAIT_MS_MAX: u64 = 10_000;
/// Longest pause between attempts while no leader is known.
const RETRY_PAUSE_MS_MAX: u64 = 200;

/// What a follower forwards to the leader: one type for every request the leader must serve.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum LeaderRequest {
    /// A write to the replicated state (bead and orchestration commands).
    Write(BeadWrite),
}

/// A write as the leader proposes it, before its stamp.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BeadWrite {
    /// The namespace.
    pub namespace: api::model::Namespace,
    /// The request's identity (always set once a write reaches this plane).
    pub request_id: RequestId,
    /// Who acts, recorded in the events of the write.
    pub actor: api::model::Actor,
    /// The id prefix the namespace gets if this write creates it; `None`: the leader's default.
    pub prefix: Option<String>,
    /// The command.
    pub command: api::command::Command,
    /// The SHA-256 of the client's token, judged by the state machine when it applies the write.
    pub credential: Option<api::auth::TokenHash>,
}

/// No leader could serve the request in time, or Raft stopped on this node; why, and what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// How a request's answer is counted.
fn outcome_of(result: &Result<Answer, Unavailable>) -> RequestOutcome {
    match result {
        Ok(Ok(_)) => RequestOutcome::Ok,
        Ok(Err(_)) => RequestOutcome::Refused,
        Err(_) => RequestOutcome::Failed,
    }
}

/// One attempt's result inside [`Leader::retry_until_deadline`].
pub enum Attempt<T> {
    /// Finished with this value.
    Done(T),
    /// Try again; why.
    Retry(String),
}

/// The leader plane of one node.
pub struct Leader<D: Disk> {
    core: Arc<NodeCore<D>>,
    /// Channels to the other nodes, for forwarding to the leader.
    peers: Arc<Peers>,
    request_ids: RequestIds,
}

impl<D: Disk> Leader<D> {
    /// The plane over a node's shared parts; `client_id` numbers requests that arrive without an id.
    pub fn new(core: Arc<NodeCore<D>>, peers: Arc<Peers>, client_id: u64) -> Leader<D> {
        Leader { core, peers, request_ids: RequestIds::new(client_id) }
    }

    /// The node's shared parts.
    pub fn core(&self) -> &Arc<NodeCore<D>> {
        &self.core
    }

    /// The Raft-service client of the leader, through the reused peer channel.
    fn leader_client(&self, leader: NodeId) -> Result<PeerRpc, String> {
        let metrics = self.core.raft.metrics();
        let address =
            metrics.borrow_watched().membership_config.membership().get_node(&leader).map(|node| node.addr.clone());
        let address = address.ok_or_else(|| format!("leader {leader} has no known address"))?;
        self.peers.client(leader, &address)
    }

    fn rpc_timeout(&self) -> Duration {
        Duration::from_millis(self.core.config.raft.rpc_timeout_ms)
    }

    /// Applies a write through Raft and answers it, waiting up to [`LEADER_WAIT_MS_MAX`] for a leader.
    pub async fn write(&self, request: WriteRequest) -> Result<Answer, Unavailable> {
        let started = std::time::Instant::now();
        let result = self.write_counted(request).await;
        self.core.metrics.observe_write(outcome_of(&result), started.elapsed().as_secs_f64());
        result
    }

    async fn write_counted(&self, mut request: WriteRequest) -> Result<Answer, Unavailable> {
        self.refuse_if_removed()?;
        if let Err(refusal) = self.admit(&mut request).await? {
            return Ok(Err(refusal));
        }
        let own_id = request.request_id.is_none().then(|| self.request_ids.begin());
        let request_id = request.request_id.or(own_id).expect("a request id is set");
        let write = LeaderRequest::Write(BeadWrite {
            namespace: request.namespace,
            request_id,
            actor: request.actor,
            prefix: request.prefix,
            command: request.command,
            credential: request.credential,
        });
        let result = self.retry_until_deadline(|| self.attempt(&write)).await;
        if let Some(own_id) = own_id {
            self.request_ids.finish(&own_id);
            if let Ok(Err(api::outcome::Refusal::SessionExpired { .. })) = &result {
                // The node's own session was evicted: number later requests under a new id.
                self.request_ids.renew(&own_id, own_id.client_id.wrapping_add(0x9e37_79b9_7f4a_7c16) | 1);
            }
        }
        result
    }

    /// Judges a write by its token before it is proposed, and gives a client that named no actor
    /// (nor claimant) its token's. A refusal on this replica, which may not have applied the token
    /// yet, is confirmed after the read index; the state machine judges the write again when it
    /// applies it, so this only spares the log requests that must fail.
    async fn admit(&self, request: &mut WriteRequest) -> Result<Result<(), Refusal>, Unavailable> {
        if self.judge_write(request).is_ok() {
            return Ok(Ok(()));
        }
        self.retry_until_deadline(|| self.linearize_attempt()).await?;
        Ok(self.judge_write(request))
    }

    fn judge_write(&self, request: &mut WriteRequest) -> Result<(), Refusal> {
        self.core.state_machine.read(|state| {
            if let Some(token) = state.authenticate(request.credential.as_ref())? {
                if request.actor.0.is_empty() {
                    request.actor = token.actor.clone();
                }
                api::commands::authorize::fill_claimants(&mut request.command, &token.actor);
            }
            // What the state machine refuses at apply anyway, refused before a Raft round.
            api::validate::validate_actor(&request.actor)?;
            api::command::validate_command(&request.command)?;
            let judged = state.authorize_write(
                request.credential.as_ref(),
                &request.namespace,
                &request.actor,
                &request.command,
            );
            judged.map(|_| ())
        })
    }

    async fn retry_until_deadline<F, Fut, T>(&self, mut attempt: F) -> Result<T, Unavailable>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Attempt<T>, Unavailable>>,
    {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(LEADER_WAIT_MS_MAX);
        let mut pause = Duration::from_millis(10);
        loop {
            let reason = match attempt().await? {
                Attempt::Done(value) => return Ok(value),
                Attempt::Retry(reason) => reason,
            };
            if tokio::time::Instant::now() + pause > deadline {
                return Err(Unavailable(format!(
                    "no leader could serve the request within {LEADER_WAIT_MS_MAX} ms ({reason}); check `strand cluster status` and that a majority of nodes is up"
                )));
            }
            tracing::debug!(%reason, "retrying");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(RETRY_PAUSE_MS_MAX));
        }
    }

    async fn attempt(&self, request: &LeaderRequest) -> Result<Attempt<Answer>, Unavailable> {
        match self.core.leader() {
            None => Ok(Attempt::Retry("no leader is elected".into())),
            Some(leader) if leader == self.core.id => Ok(self.serve(request).await),
            Some(leader) => Ok(self.forward(leader, request).await),
        }
    }

    /// Serves a request on this node, which believes it is leader.
    async fn serve(&self, request: &LeaderRequest) -> Attempt<Answer> {
        match request {
            LeaderRequest::Write(write) => self.propose_local(write).await,
        }
    }

    /// Proposes on this node, which believes it is leader; stamps the time, the default prefix
    /// (the client's, else the configured one) and the event retention.
    async fn propose_local(&self, write: &BeadWrite) -> Attempt<Answer> {
        let config = &self.core.config;
        if let api::command::Command::ApplyVersion(api::commands::apply_version::ApplyVersionChange::Set { to }) =
            &write.command
        {
            let own = (self.core.id, self.core.state_machine.apply_versions());
            let members = self.core.members.lock().expect("the members lock is never poisoned").clone();
            let metrics = self.core.raft.metrics().borrow_watched().clone();
            let membership: Vec<NodeId> = metrics.membership_config.membership().nodes().map(|(id, _)| *id).collect();
            if let Err(why) = versions::check_set(*to, own, &membership, &members) {
                return Attempt::Done(Err(Refusal::Invalid(format!("cannot set the apply version to {to}: {why}"))));
            }
        }
        let proposal = Proposal {
            request_id: Some(write.request_id),
            timestamp: self.core.clock.now(),
            default_prefix: write.prefix.clone().unwrap_or_else(|| config.id_prefix.clone()),
            namespace: write.namespace.clone(),
            actor: write.actor.clone(),
            event_retention: config.event_retention,
            credential: write.credential,
            command: write.command.clone(),
        };
        let commit_wait = Duration::from_millis(LEADER_WAIT_MS_MAX);
        let written = tokio::time::timeout(commit_wait, self.core.raft.client_write(Arc::new(proposal))).await;
        let Ok(written) = written else {
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

    async fn forward(&self, leader: NodeId, request: &LeaderRequest) -> Attempt<Answer> {
        self.core.metrics.observe_forward();
        let mut client = match self.leader_client(leader) {
            Ok(client) => client,
            Err(error) => return Attempt::Retry(error),
        };
        let timeout = self.rpc_timeout() * 4;
        match tokio::time::timeout(timeout, client.propose(encode(request))).await {
            Err(_) => Attempt::Retry(format!("leader {leader} did not answer within {timeout:?}")),
            Ok(Err(status)) => Attempt::Retry(format!("leader {leader}: {}", status.message())),
            Ok(Ok(response)) => match decode::<Result<Answer, String>>(&response.into_inner()) {
                Ok(Ok(answer)) => Attempt::Done(answer),
                Ok(Err(reason)) => Attempt::Retry(format!("leader {leader}: {reason}")),
                Err(error) => Attempt::Retry(error),
            },
        }
    }

    /// Moves the leadership to `to` (see `transfer.rs`): here when this node leads, else through
    /// the leader it knows.
    pub async fn move_leader(&self, to: NodeId, timeout: Duration) -> Result<Moved, MoveRefused> {
        let leader = self.core.leader();
        match leader {
            Some(leader) if leader == self.core.id => transfer::move_here(&self.core, to, timeout).await,
            Some(leader) => {
                let mut client = self.leader_client(leader).map_err(MoveRefused::Unavailable)?;
                let request = MoveLeader { to, timeout_ms: timeout.as_millis() as u64 };
                let wait = timeout + self.rpc_timeout() * 2;
                match tokio::time::timeout(wait, client.move_leader(encode(&request))).await {
                    Err(_) => Err(MoveRefused::Unavailable(format!(
                        "leader {leader} did not answer within {wait:?}; check `strand cluster status`"
                    ))),
                    Ok(Err(status)) => Err(MoveRefused::Unavailable(format!("leader {leader}: {}", status.message()))),
                    Ok(Ok(response)) => decode::<Result<Moved, MoveRefused>>(&response.into_inner())
                        .map_err(MoveRefused::Unavailable)?,
                }
            }
            None => Err(MoveRefused::Unavailable(
                "no leader is known (an election is under way, or a majority is down); try again in a moment".into(),
            )),
        }
    }

    /// A node removed from the cluster serves no request: it says why (see `crate::standing`).
    fn refuse_if_removed(&self) -> Result<(), Unavailable> {
        match self.core.removed() {
            Some(message) => Err(Unavailable(message)),
            None => Ok(()),
        }
    }

    /// Changes the membership (see `membership.rs`): here when this node leads, else through the
    /// leader it knows; asked again, up to [`LEADER_WAIT_MS_MAX`], while no leader can make it
    /// (an election, or a leader that handed its leadership over before its own removal).
    pub async fn change_membership(&self, change: MemberChange) -> Result<Changed, ChangeRefused> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(LEADER_WAIT_MS_MAX);
        let mut pause = Duration::from_millis(50);
        loop {
            let result = match self.core.leader() {
                Some(leader) if leader == self.core.id => {
                    membership::change_here(&self.core, &self.peers, change.clone()).await
                }
                Some(leader) => self.forward_change(leader, &change).await,
                None => Err(ChangeRefused::Unavailable(
                    "no leader is known (an election is under way, or a majority is down)".into(),
                )),
            };
            match result {
                Err(ChangeRefused::Unavailable(reason)) if tokio::time::Instant::now() + pause < deadline => {
                    tracing::debug!(%reason, "asking the membership change again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(ChangeRefused::Unavailable(reason)) => {
                    return Err(ChangeRefused::Unavailable(format!(
                        "no leader could make the change within {LEADER_WAIT_MS_MAX} ms ({reason}); check `strand cluster status` and that a majority of nodes is up"
                    )));
                }
                other => return other,
            }
        }
    }

    /// Forwards a membership change to `leader`.
    async fn forward_change(&self, leader: NodeId, change: &MemberChange) -> Result<Changed, ChangeRefused> {
        let mut client = self.leader_client(leader).map_err(ChangeRefused::Unavailable)?;
        let wait = Duration::from_millis(self.core.config.raft.election_timeout_ms_max * 3) + self.rpc_timeout() * 2;
        match tokio::time::timeout(wait, client.change_membership(encode(change))).await {
            Err(_) => Err(ChangeRefused::Unavailable(format!("leader {leader} did not answer within {wait:?}"))),
            Ok(Err(status)) => Err(ChangeRefused::Unavailable(format!("leader {leader}: {}", status.message()))),
            Ok(Ok(response)) => {
                decode::<Result<Changed, ChangeRefused>>(&response.into_inner()).map_err(ChangeRefused::Unavailable)?
            }
        }
    }

    /// Waits until this node has applied everything committed before the call (a read index
    /// confirmed by the leader), as a linearizable read does.
    pub async fn linearize(&self) -> Result<(), Unavailable> {
        self.refuse_if_removed()?;
        self.retry_until_deadline(|| self.linearize_attempt()).await
    }

    /// Answers a read with the requested consistency.
    pub async fn read(&self, request: ReadRequest) -> Result<Answer, Unavailable> {
        let result = self.read_counted(request).await;
        self.core.metrics.observe_read(outcome_of(&result));
        result
    }

    async fn read_counted(&self, request: ReadRequest) -> Result<Answer, Unavailable> {
        self.refuse_if_removed()?;
        let linearizable = request.consistency == Consistency::Linearizable;
        if linearizable {
            self.retry_until_deadline(|| self.linearize_attempt()).await?;
        }
        let answer = self.core.read_as(
            request.credential.as_ref(),
            &request.namespace,
            request.namespace_must_exist,
            &request.query,
        );
        if !linearizable && matches!(answer, Err(Refusal::Unauthenticated(_) | Refusal::PermissionDenied(_))) {
            // This replica may not have applied the token yet: judge again after the read index.
            self.retry_until_deadline(|| self.linearize_attempt()).await?;
            return Ok(self.core.read_as(
                request.credential.as_ref(),
                &request.namespace,
                request.namespace_must_exist,
                &request.query,
            ));
        }
        Ok(answer)
    }

    /// The leader side of a linearizable read: confirm leadership with a quorum, answer the
    /// index every read must wait for.
    async fn local_read_index(&self) -> Result<ReadIndex, String> {
        let linearizer =
            self.core.raft.get_read_linearizer(ReadPolicy::ReadIndex).await.map_err(|error| error.to_string())?;
        Ok((*linearizer.node_id(), *linearizer.read_log_id(), linearizer.applied().cloned()))
    }

    async fn linearize_attempt(&self) -> Result<Attempt<()>, Unavailable> {
        let Some(leader) = self.core.leader() else {
            return Ok(Attempt::Retry("no leader is elected".into()));
        };
        let read_index =
            if leader == self.core.id { self.local_read_index().await } else { self.remote_read_index(leader).await };
        let (leader_id, read_log_id, applied) = match read_index {
            Ok(read_index) => read_index,
            Err(reason) => return Ok(Attempt::Retry(reason)),
        };
        let linearizer = Linearizer::new(leader_id, read_log_id, applied);
        let wait = Some(Duration::from_millis(LEADER_WAIT_MS_MAX));
        match linearizer.try_await_ready(&self.core.raft, wait).await {
            Ok(Ok(_)) => Ok(Attempt::Done(())),
            Ok(Err(_)) => Ok(Attempt::Retry("this node did not catch up to the read index in time".into())),
            Err(fatal) => Err(Unavailable(format!("raft stopped on this node: {fatal}; use another endpoint"))),
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

/// What followers hand to this plane through the peer plane's `Propose` and `ReadIndex`.
#[tonic::async_trait]
impl<D: Disk> LeaderPlane for Leader<D> {
    type Request = LeaderRequest;

    async fn propose(&self, request: LeaderRequest) -> Result<Answer, String> {
        // Only the leader's own controller proposes controller actions (see `controller.rs`).
        if let LeaderRequest::Write(BeadWrite { command: api::command::Command::Controller(_), .. }) = &request {
            return Ok(Err(api::outcome::Refusal::Invalid(
                "a controller action is never forwarded: only the leader's own controller proposes one".into(),
            )));
        }
        match self.serve(&request).await {
            Attempt::Done(answer) => Ok(answer),
            Attempt::Retry(reason) => Err(reason),
        }
    }

    async fn read_index(&self) -> Result<ReadIndex, String> {
        self.local_read_index().await
    }

    async fn move_leader(&self, request: MoveLeader) -> Result<Moved, MoveRefused> {
        transfer::move_here(&self.core, request.to, Duration::from_millis(request.timeout_ms)).await
    }

    async fn change_membership(&self, change: MemberChange) -> Result<Changed, ChangeRefused> {
        Leader::change_membership(self, change).await
    }
}
