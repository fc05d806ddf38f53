//! The `strand.v1.Raft` service: Raft traffic into this node from the other members.
//!
//! Invariant: the service serves a call only after checking its sender: the cluster id and
//! member id it carries (see `network.rs`) must be this node's cluster and one of its members
//! (`NodeCore::is_member`; for a leader's message, an append or a snapshot, and for a candidate's
//! vote or pre-vote, also a node this node never saw leave the membership, `NodeCore::may_lead`,
//! see `crate::standing`: a member added after this node's last entry may lead, or stand, before
//! this node has heard of it, and a voter that lags a membership change must still vote), with TLS
//! on the certificate the connection showed must name that member (`strand-node-<id>`, see
//! `crate::tls`), and a vote, append or snapshot must be in the name of that same member. A
//! refusal is logged and answered `PERMISSION_DENIED`. A vote request's `leadership_transfer`
//! flag (which lets it past the leader lease) is honoured only from the node the current leader
//! announced as its transfer target (or this node, leading, began a transfer to; see
//! `NodeCore::announce_transfer`). A forwarded proposal larger than a client request is refused.
//! A snapshot is received as `snapshot.rs` says.
//!
//! The one exception is `Join`, the call of a node that is not a member yet (`crate::join`): it
//! carries no identity, and is judged on what it asks instead: the cluster name, with TLS a
//! certificate naming the id it asks to join under, and with auth on an admin token; the leader
//! then adds it as a learner. `Removed` is the leader telling this node it was removed. A message
//! from a node this node saw leave an applied membership is refused with the index of that
//! membership in `strand-removed-at` metadata, which tells the sender it was removed (see
//! `network::Heeded`).

use std::sync::Arc;

use api::proto::raft_server::Raft as RaftService;
use api::proto::{self as pb, RaftPayload, SnapshotChunk};
use futures::StreamExt;
use openraft::Snapshot;
use openraft::async_runtime::WatchReceiver;
use raft_store::types::{Runtime, TypeConfig, Vote};
use raft_store::{Disk, NodeId, SnapshotFile};
use tonic::{Request, Response, Status, Streaming};

use super::network::{
    APPLY_VERSIONS_HEADER, BUILD_HEADER, CLUSTER_ID_HEADER, LEGACY_CLUSTER_ID_HEADER, MEMBER_ID_HEADER,
    PEER_MESSAGE_OVERHEAD_BYTES, PROPOSE_BYTES_MAX, decode, encode,
};
use super::snapshot;
use super::{ChangeRefused, JoinRequest, Joined, LeaderPlane, MemberChange};
use crate::core::NodeCore;
use crate::identity::UNBOUND;

/// The `strand.v1.Raft` service: traffic from other nodes.
pub struct RaftPeerService<D: Disk, L: LeaderPlane> {
    core: Arc<NodeCore<D>>,
    /// Where forwarded proposals and read-index requests go.
    leader: Arc<L>,
}

/// What a message asks of this node, for the check of its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    /// What only a member may ask (a forwarded write, a read index, a leadership move, ...).
    Member,
    /// A leader's or a candidate's message: an append, a snapshot, a vote.
    Raft,
    /// A status request: also between a member and a node that has not learned the cluster's id.
    Status,
}

/// Judges the cluster id `theirs` a message carries, against this node's (`ours`; either may be
/// unbound, see `crate::identity`): `Ok(true)` when this node learns its cluster's id from it,
/// `Ok(false)` when it passes, and otherwise why it is refused (to follow "a Raft message from
/// node N").
fn judge_cluster(ours: u64, theirs: u64, sent: Sent) -> Result<bool, String> {
    match (ours, theirs) {
        _ if ours == theirs && ours != UNBOUND => Ok(false),
        (UNBOUND, _) | (_, UNBOUND) if sent == Sent::Status => Ok(false),
        (UNBOUND, _) if theirs != UNBOUND && sent == Sent::Raft => Ok(true),
        (UNBOUND, _) if theirs != UNBOUND => Err(format!(
            " of cluster {theirs:016x}: this node has not learned its cluster's id yet; it learns it from the first vote or append of a member"
        )),
        (_, UNBOUND) => Err(
            ", which has not learned its cluster's id yet: it learns it from the first vote or append of a member that knows it, and until then it may not stand or lead"
                .to_string(),
        ),
        _ => Err(format!(
            " of cluster {theirs:016x}, and this node belongs to cluster {ours:016x}: they are different clusters (each draws its id when it is made); point the sender at its own cluster's members"
        )),
    }
}

/// Refuses a Raft message, logging why.
fn refuse(message: String) -> Status {
    tracing::warn!(%message, "refused a Raft message");
    Status::permission_denied(message)
}

impl<D: Disk, L: LeaderPlane> RaftPeerService<D, L> {
    /// Serves Raft traffic into this node, handing what is for the leader to `leader`.
    pub fn new(core: Arc<NodeCore<D>>, leader: Arc<L>) -> Self {
        RaftPeerService { core, leader }
    }

    /// The member that sent `request`, once its cluster id is this node's and it is a member.
    fn sender<T>(&self, request: &Request<T>) -> Result<NodeId, Status> {
        self.sender_as(request, Sent::Member)
    }

    /// The node that sent a leader's message (an append, a snapshot) or a candidate's (a vote, a
    /// pre-vote): a member, or a node this node never saw leave a membership (see
    /// `crate::standing`). Raft servers take these without consulting their configuration: a
    /// voter that has not yet applied the membership adding a node must still vote for it. An
    /// unbound node learns its cluster's id from the first of them (see `crate::identity`).
    fn raft_sender<T>(&self, request: &Request<T>) -> Result<NodeId, Status> {
        self.sender_as(request, Sent::Raft)
    }

    fn sender_as<T>(&self, request: &Request<T>, sent: Sent) -> Result<NodeId, Status> {
        let claimed = request.metadata().get(MEMBER_ID_HEADER).or_else(|| request.metadata().get("strand-member-id"));
        let sender = claimed.and_then(|value| value.to_str().ok()).unwrap_or("?").to_string();
        // A member's messages are judged only for their apply versions' presence: whether a
        // replica can apply an entry or a snapshot is judged as it applies it, by its own state.
        self.judge_versions(request, &sender, false).map_err(refuse)?;
        let header = |key: &str| -> Result<u64, Status> {
            let value = request.metadata().get(key).ok_or_else(|| {
                refuse(format!("a Raft message without {key}: the sender is not a Strand node of this version"))
            })?;
            value.to_str().ok().and_then(|text| text.parse().ok()).ok_or_else(|| {
                refuse(format!(
                    "a Raft message with a malformed {key}: {:?}",
                    value.as_encoded_bytes().escape_ascii().to_string()
                ))
            })
        };
        let cluster_id = header(CLUSTER_ID_HEADER)?;
        let ours = self.core.cluster_id.get();
        let learn = match judge_cluster(ours, cluster_id, sent) {
            Ok(learn) => learn,
            Err(message) => {
                let sender = request.metadata().get(MEMBER_ID_HEADER).and_then(|value| value.to_str().ok());
                return Err(refuse(format!("a Raft message from node {}{message}", sender.unwrap_or("?"))));
            }
        };
        let member_id = header(MEMBER_ID_HEADER)?;
        let admitted = match sent {
            Sent::Raft | Sent::Status => self.core.may_lead(member_id),
            Sent::Member => self.core.is_member(member_id),
        };
        if !admitted {
            if let Some(index) = self.core.standing.as_ref().and_then(|standing| standing.saw_leave(member_id)) {
                // It left a membership this node applied: say so, so that it stops (see
                // `network::Heeded`) even if the leader that removed it never told it.
                let message = format!(
                    "a Raft message from node {member_id}, which the membership at index {index} no longer holds: it was removed"
                );
                tracing::warn!(%message, "refused a Raft message");
                let mut metadata = tonic::metadata::MetadataMap::new();
                metadata.insert(super::network::REMOVED_AT_HEADER, index.into());
                return Err(Status::with_metadata(tonic::Code::PermissionDenied, message, metadata));
            }
            return Err(refuse(format!("a Raft message from node {member_id}, which is not a member of this cluster")));
        }
        if self.core.config.tls.is_some() {
            // Mutual TLS: the certificate shown must name the member the message claims to be from.
            let named = request.extensions().get::<crate::tls::ConnectionInfo>().and_then(|info| info.node());
            if named != Some(member_id) {
                return Err(refuse(format!(
                    "a Raft message in the name of node {member_id} over a connection whose certificate names {}: a peer must show a certificate naming {} and no other node",
                    named.map_or("no single node".to_string(), |id| format!("node {id}")),
                    api::tls::node_name(member_id)
                )));
            }
        }
        if learn {
            match self.core.cluster_id.bind(cluster_id) {
                Ok(true) => {}
                Ok(false) => {
                    let ours = self.core.cluster_id.get();
                    return Err(refuse(format!(
                        "a Raft message from node {member_id} of cluster {cluster_id:016x}, and this node has just learned that it belongs to cluster {ours:016x}"
                    )));
                }
                Err(error) => {
                    return Err(Status::internal(format!("cannot record the cluster id {cluster_id:016x}: {error}")));
                }
            }
        }
        Ok(member_id)
    }

    /// Judges the apply versions a message's sender applies (see `api::version`): a build from
    /// before apply versions is refused, and with `strict` (a join or a rejoin's question) so is
    /// a build that cannot apply this node's state's apply version. Answers why, to follow
    /// "refused".
    fn judge_versions<T>(&self, request: &Request<T>, sender: &str, strict: bool) -> Result<(), String> {
        let metadata = request.metadata();
        let text = |key: &str| metadata.get(key).and_then(|value| value.to_str().ok());
        let own = self.core.state_machine.apply_versions();
        let Some(range) = text(APPLY_VERSIONS_HEADER) else {
            return Err(if metadata.contains_key(LEGACY_CLUSTER_ID_HEADER) {
                format!(
                    "a message from node {sender}, which runs a build from before apply versions: its rules differ from this build's, so its messages and votes are refused. Upgrade node {sender} to a build that applies versions {own}"
                )
            } else {
                format!("a message without {APPLY_VERSIONS_HEADER}: the sender is not a Strand node of this version")
            });
        };
        let Some(range) = api::version::ApplyRange::parse(range) else {
            return Err(format!("a message from node {sender} with a malformed {APPLY_VERSIONS_HEADER}: {range:?}"));
        };
        // Read without the state lock, so that a message never waits for apply.
        let version = self.core.state_machine.apply_version_now();
        if strict && !range.contains(version) {
            let build = text(BUILD_HEADER).unwrap_or("?");
            return Err(format!(
                "a message from node {sender}, whose build {build} applies versions {range}, and this cluster's state is at apply version {version}: run a build that applies version {version} on node {sender}"
            ));
        }
        Ok(())
    }

    /// Reads a join or identify request (`what`: "join" or "rejoin") and checks who asks: the
    /// cluster name, the apply versions it applies, and with TLS a certificate naming the id it
    /// asks under.
    fn admit_named(&self, request: &Request<RaftPayload>, what: &str) -> Result<JoinRequest, ChangeRefused> {
        let join: JoinRequest = decode(request.get_ref()).map_err(ChangeRefused::Invalid)?;
        self.judge_versions(request, &join.id.to_string(), true)
            .map_err(|why| ChangeRefused::Denied(format!("node {} may not {what}: refused {why}", join.id)))?;
        let config = &self.core.config;
        if join.cluster_name != config.cluster_name {
            return Err(ChangeRefused::Denied(format!(
                "node {} asked to {what} cluster {:?}, and this is cluster {:?}; start it with --cluster-name {:?}, or point it at its own cluster's members",
                join.id, join.cluster_name, config.cluster_name, config.cluster_name
            )));
        }
        if config.tls.is_some() {
            let named = request.extensions().get::<crate::tls::ConnectionInfo>().and_then(|info| info.node());
            if named != Some(join.id) {
                return Err(ChangeRefused::Denied(format!(
                    "node {} asked to {what} over a connection whose certificate names {}: it must show a certificate naming {} (`strand certs node --id {}`)",
                    join.id,
                    named.map_or("no single node".to_string(), |id| format!("node {id}")),
                    api::tls::node_name(join.id),
                    join.id
                )));
            }
        }
        Ok(join)
    }

    /// Judges a join request (see [`RaftService::join`]) before it goes to the leader plane.
    fn admit_join(&self, request: &Request<RaftPayload>) -> Result<JoinRequest, ChangeRefused> {
        let join = self.admit_named(request, "join")?;
        let credential = match request.metadata().get(api::auth::AUTHORIZATION_HEADER) {
            None => None,
            Some(value) => Some(
                api::auth::parse_bearer(value.as_bytes())
                    .map_err(|refusal| ChangeRefused::Denied(refusal.to_string()))?,
            ),
        };
        self.core
            .state_machine
            .read(|state| {
                let token = state.authenticate(credential.as_ref())?;
                match token {
                    Some(token) if token.role != api::auth::Role::Admin => {
                        Err(api::outcome::Refusal::PermissionDenied(format!(
                            "token {} has the {} role; joining the cluster needs an admin token (--token)",
                            api::printable::printable(&token.name),
                            token.role
                        )))
                    }
                    _ => Ok(()),
                }
            })
            .map_err(|refusal| ChangeRefused::Denied(format!("joining the cluster: {refusal}")))?;
        Ok(join)
    }

    /// A vote or pre-vote request (`what`) as openraft may see it: from a member (or a node this
    /// node never saw leave), small, in the sender's own name, while this node votes, with its
    /// transfer flag gated.
    fn admit_vote(
        &self,
        request: &Request<RaftPayload>,
        what: &str,
    ) -> Result<openraft::raft::VoteRequest<TypeConfig>, Status> {
        let sender = self.raft_sender(request)?;
        small(request, what)?;
        self.refuse_while_rejoining()?;
        let mut rpc: openraft::raft::VoteRequest<TypeConfig> = decode(request.get_ref()).map_err(malformed)?;
        check_vote(sender, &rpc.vote, what)?;
        self.gate_transfer(sender, &mut rpc);
        Ok(rpc)
    }

    /// A rejoining node does not vote until it caught up (see `crate::rejoin`).
    fn refuse_while_rejoining(&self) -> Result<(), Status> {
        if self.core.is_rejoining() {
            return Err(Status::unavailable(
                "this node is rejoining after losing its data and does not vote until it has caught up",
            ));
        }
        Ok(())
    }

    /// Lets a vote request's `leadership_transfer` flag stand only when the current leader
    /// announced a transfer to its sender, and recently (or this node, leading, began it).
    fn gate_transfer(&self, sender: NodeId, request: &mut openraft::raft::VoteRequest<TypeConfig>) {
        if !request.leadership_transfer {
            return;
        }
        if !self.core.transfer_announced_to(sender) {
            tracing::warn!(
                node = sender,
                "a vote request claims a leadership transfer no leader announced; treating it as an ordinary vote"
            );
            request.leadership_transfer = false;
        }
    }
}

/// Refuses a message whose vote (a candidate's, or a leader's) is not the sender's own.
fn check_vote(sender: NodeId, vote: &Vote, what: &str) -> Result<(), Status> {
    let named = vote.leader_id().voted_for;
    if named != sender {
        return Err(refuse(format!("node {sender} sent {what} in the name of node {named}")));
    }
    Ok(())
}

fn malformed(error: String) -> Status {
    Status::invalid_argument(error)
}

/// Refuses a message of a small kind (a vote, a leadership transfer, a read-index request) that is
/// larger than any such message can be.
fn small(request: &Request<RaftPayload>, what: &str) -> Result<(), Status> {
    let bytes = request.get_ref().data.len();
    if bytes > PEER_MESSAGE_OVERHEAD_BYTES {
        return Err(refuse(format!("{what} of {bytes} bytes; no such message is over {PEER_MESSAGE_OVERHEAD_BYTES}")));
    }
    Ok(())
}

fn answer<T: serde::Serialize, E: std::fmt::Display>(result: Result<T, E>) -> Result<Response<RaftPayload>, Status> {
    Ok(Response::new(encode(&result.map_err(|error| error.to_string()))))
}

/// The next request of a replication session from `sender`, or `None` to end the session: the
/// stream broke or ended, or a request does not decode or is not in the sender's name.
async fn next_append<D: Disk>(
    mut incoming: Streaming<RaftPayload>,
    sender: NodeId,
    core: Arc<NodeCore<D>>,
) -> Option<(openraft::raft::AppendEntriesRequest<TypeConfig>, Streaming<RaftPayload>)> {
    let payload = match incoming.message().await {
        Ok(payload) => payload?,
        Err(status) => {
            // The leader went away or the connection broke; the leader opens a new session.
            tracing::debug!(%status, "a replication stream from the leader broke");
            return None;
        }
    };
    match decode::<openraft::raft::AppendEntriesRequest<TypeConfig>>(&payload) {
        Ok(request) if check_vote(sender, &request.vote, "an append").is_ok() => {
            if let Err(refused) = core.admit_leader(request.vote.leader_id().term) {
                tracing::debug!(leader = sender, %refused, "ending a replication stream");
                return None;
            }
            Some((request, incoming))
        }
        Ok(_) => None,
        Err(error) => {
            tracing::warn!(%error, "ending a replication stream at a request that does not decode");
            None
        }
    }
}

/// The answers of one replication session, encoded.
type AppendAnswers = std::pin::Pin<Box<dyn futures::Stream<Item = Result<RaftPayload, Status>> + Send>>;

#[tonic::async_trait]
impl<D: Disk, L: LeaderPlane> RaftService for RaftPeerService<D, L> {
    type StreamAppendStream = AppendAnswers;

    async fn append_entries(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let sender = self.raft_sender(&request)?;
        let rpc: openraft::raft::AppendEntriesRequest<TypeConfig> = decode(request.get_ref()).map_err(malformed)?;
        check_vote(sender, &rpc.vote, "an append")?;
        self.core.admit_leader(rpc.vote.leader_id().term).map_err(Status::unavailable)?;
        answer(self.core.raft.append_entries(rpc).await)
    }

    /// A replication session: requests are handed to openraft as they arrive, and its answers
    /// go back in order. A malformed request ends the requests, so the leader sees the session
    /// close with that request unanswered and starts another; so does this node stopping.
    async fn stream_append(&self, request: Request<Streaming<RaftPayload>>) -> Result<Response<AppendAnswers>, Status> {
        let sender = self.raft_sender(&request)?;
        let core = self.core.clone();
        let requests =
            futures::stream::unfold(request.into_inner(), move |incoming| next_append(incoming, sender, core.clone()));
        // Sessions last as long as a leader leads; this one ends when the node stops, so the
        // server's graceful shutdown does not wait on it.
        let core = self.core.clone();
        let requests = requests.take_until(async move { core.stopped().await });
        // openraft spawns the session's forwarding task through its runtime, which takes that
        // task's random seed from the caller's scope; the task draws nothing random.
        let raft = &self.core.raft;
        let answers = Runtime::scope(self.core.id, async { raft.stream_append(requests) }).await;
        let answers = answers.map(|result| Ok(encode(&result.map_err(|fatal| fatal.to_string()))));
        Ok(Response::new(Box::pin(answers)))
    }

    async fn vote(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc = self.admit_vote(&request, "a vote request")?;
        answer(self.core.raft.vote(rpc).await)
    }

    async fn pre_vote(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let rpc = self.admit_vote(&request, "a pre-vote request")?;
        answer(self.core.raft.pre_vote(rpc).await)
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<RaftPayload>, Status> {
        let sender = self.raft_sender(&request)?;
        let deadline = snapshot::deadline(&self.core);
        let mut chunks = request.into_inner();
        let (vote, meta) = snapshot::header(&mut chunks, deadline).await?;
        check_vote(sender, &vote, "a snapshot")?;
        self.core.admit_leader(vote.leader_id().term).map_err(Status::unavailable)?;
        if !vote.is_committed() {
            return Err(refuse(format!("node {sender} sent a snapshot under a vote it has not won")));
        }
        let path = snapshot::receive(&self.core, chunks, deadline).await?;
        snapshot::verify(path.clone(), &meta).await?;
        let file = SnapshotFile::open(&path).map_err(|error| Status::internal(error.to_string()))?;
        let snapshot = Snapshot { meta, snapshot: file };
        answer(self.core.raft.install_full_snapshot(vote, snapshot).await)
    }

    async fn transfer_leader(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let sender = self.raft_sender(&request)?;
        small(&request, "a leadership transfer")?;
        let rpc: openraft::raft::TransferLeaderRequest<TypeConfig> = decode(request.get_ref()).map_err(malformed)?;
        check_vote(sender, rpc.from_leader(), "a leadership transfer")?;
        self.core.announce_transfer(*rpc.to_node_id());
        answer(self.core.raft.handle_transfer_leader(rpc).await)
    }

    async fn propose(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        self.sender(&request)?;
        let bytes = request.get_ref().data.len();
        if bytes > PROPOSE_BYTES_MAX {
            return Err(Status::invalid_argument(format!(
                "a forwarded proposal of {bytes} bytes is over the {PROPOSE_BYTES_MAX}-byte limit (a client request's limit and its stamp); it was not proposed"
            )));
        }
        let forwarded: L::Request = decode(request.get_ref()).map_err(malformed)?;
        answer(self.leader.propose(forwarded).await)
    }

    async fn read_index(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        self.sender(&request)?;
        small(&request, "a read-index request")?;
        answer(self.leader.read_index().await)
    }

    async fn move_leader(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        self.sender(&request)?;
        small(&request, "a leadership move")?;
        let forwarded: super::MoveLeader = decode(request.get_ref()).map_err(malformed)?;
        Ok(Response::new(encode(&self.leader.move_leader(forwarded).await)))
    }

    async fn get_node_status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::NodeStatus>, Status> {
        self.sender_as(&request, Sent::Status)?;
        Ok(Response::new(self.core.own_status(request.into_inner().include_digest)))
    }

    async fn change_membership(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        self.sender(&request)?;
        small(&request, "a membership change")?;
        let change: MemberChange = decode(request.get_ref()).map_err(malformed)?;
        Ok(Response::new(encode(&self.leader.change_membership(change).await)))
    }

    /// A node that is not a member asks to join: the only call served without a member's
    /// identity. Judged here (cluster name, the certificate naming the joining id, an admin token
    /// when auth is on), then added as a learner by the leader; the answer carries the cluster id
    /// and the membership that holds it.
    async fn join(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        small(&request, "a join request")?;
        let joined = match self.admit_join(&request) {
            Err(refused) => {
                tracing::warn!(%refused, "refused a join request");
                Err(refused)
            }
            Ok(join) => {
                let (id, peer) = (join.id, join.member.addr.clone());
                tracing::info!(node = id, peer = %peer, "node {id} asks to join");
                let change = MemberChange::Add { id, member: join.member, join: true };
                self.leader
                    .change_membership(change)
                    .await
                    .map(|membership| Joined { cluster_id: self.core.cluster_id.get(), membership })
            }
        };
        Ok(Response::new(encode(&joined)))
    }

    /// A node that lost its data asks which cluster it belongs to (`crate::join`, `--rejoin`):
    /// judged like a join (cluster name, certificate), it must be a member of the membership this
    /// node holds; the answer carries the cluster id and that membership. A node that holds no
    /// cluster at all (term 0, an empty log) answers [`ChangeRefused::NotFormed`], for the asking
    /// node to judge whether the cluster formed (see `crate::join`). Changes nothing.
    async fn identify(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        small(&request, "an identify request")?;
        let answer = self.admit_named(&request, "rejoin").and_then(|asked| {
            let metrics = self.core.raft.metrics().borrow_watched().clone();
            if metrics.membership_config.log_id().is_none()
                && metrics.current_term == 0
                && self.core.last_log() == (0, 0)
                && !self.core.is_rejoining()
            {
                return Err(ChangeRefused::NotFormed(format!(
                    "node {} holds no membership and no log: the cluster has not formed on it",
                    self.core.id
                )));
            }
            let cluster_id = self.core.cluster_id.get();
            if cluster_id == UNBOUND {
                return Err(ChangeRefused::Unavailable(format!(
                    "node {} has not learned its cluster's id yet; ask another member",
                    self.core.id
                )));
            }
            let stored = metrics.membership_config.clone();
            if stored.log_id().is_none() {
                return Err(ChangeRefused::Unavailable(format!(
                    "node {} holds no membership yet (it is at term {}): the cluster has not formed on it; if it never forms because its lowest id lost its data, stop every member, empty each --data-dir and start them all again (nothing was stored)",
                    self.core.id, metrics.current_term
                )));
            }
            let index = stored.log_id().map_or(0, |log_id| log_id.index);
            let membership = super::Changed::of(stored.membership(), index, metrics.current_leader.unwrap_or(0));
            if !membership.members.contains_key(&asked.id) {
                let members = super::listed(membership.members.keys().copied());
                return Err(ChangeRefused::Unknown(format!(
                    "node {} is not a member of cluster {:?} (members: {members}); a node whose data was lost rejoins under the id it had, and a new node joins with --join and without --rejoin",
                    asked.id, self.core.config.cluster_name
                )));
            }
            Ok(Joined { cluster_id, membership })
        });
        if let Err(refused) = &answer {
            tracing::warn!(%refused, "refused an identify request");
        }
        Ok(Response::new(encode(&answer)))
    }

    /// The leader says it removed this node: it records so and stops serving (see
    /// `crate::standing`).
    async fn removed(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let sender = self.sender(&request)?;
        small(&request, "a removal notice")?;
        let notice: super::Removed = decode(request.get_ref()).map_err(malformed)?;
        self.core.learn_removed(notice.index, sender).map_err(|error| Status::internal(error.to_string()))?;
        Ok(Response::new(encode(&())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_id_is_learned_only_from_a_leader_or_candidate_and_never_changes() {
        let (x, y) = (0x1234, 0x5678);
        for sent in [Sent::Member, Sent::Raft, Sent::Status] {
            assert_eq!(judge_cluster(x, x, sent), Ok(false), "{sent:?}: the same cluster");
            assert!(judge_cluster(x, y, sent).unwrap_err().contains("different clusters"), "{sent:?}");
        }
        assert_eq!(judge_cluster(UNBOUND, x, Sent::Raft), Ok(true), "an unbound node learns from a vote or append");
        assert!(judge_cluster(UNBOUND, x, Sent::Member).is_err(), "but not from a forwarded request");
        assert!(judge_cluster(x, UNBOUND, Sent::Raft).unwrap_err().contains("may not stand or lead"));
        assert!(judge_cluster(UNBOUND, UNBOUND, Sent::Raft).is_err(), "an unbound candidate wins no vote");
        for (ours, theirs) in [(UNBOUND, UNBOUND), (UNBOUND, x), (x, UNBOUND)] {
            assert_eq!(judge_cluster(ours, theirs, Sent::Status), Ok(false), "status is answered across binding");
        }
    }
}
