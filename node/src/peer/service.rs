//! The gRPC services a node serves: the bead store (`strand.v1.Beads`) and its orchestration
//! layer (`Namespaces`, `Formulas`, `Molecules`, `Work`, `Mail`, `Convoys`, `Events`),
//! `strand.v1.Cluster` (status) and `strand.v1.Raft` (traffic between nodes). Protobuf requests
//! are converted by `api::convert` and answered by [`NodeCore`] through the shared [`write`] and
//! [`read`] paths; this module only wires them together.
//!
//! Invariant: the Raft service serves a call only after checking its sender: the cluster id and
//! member id it carries (see `network.rs`) must be this node's cluster and one of its members,
//! and a vote, append or snapshot must be in the name of that same member. A refusal is logged
//! and answered `PERMISSION_DENIED`. A vote request's `leadership_transfer` flag (which lets it
//! past the leader lease) is honoured only from the node the current leader announced as its
//! transfer target. A forwarded proposal larger than a client request is refused. A snapshot is
//! refused, and its file deleted at once, when it outgrows `snapshot_receive_bytes_max` or
//! `snapshot_receive_timeout_ms` while it arrives, or fails its checksums; nothing is replaced
//! before it has been read through whole.
//!
//! Invariant: a watch stream sends each event once, in sequence order, and holds at most
//! [`WATCH_BUFFER_EVENTS_MAX`] events its client has not taken yet; a node serves at most
//! [`WATCH_STREAMS_MAX`] watch streams at once.

use std::sync::Arc;
use std::time::Duration;

use api::command::Query;
use api::convert::{FromAnswer, IntoRead, IntoWrite, refusal_to_status};
use api::model::Namespace;
use api::outcome::{Answer, Outcome};
use api::proto::beads_server::Beads;
use api::proto::cluster_server::Cluster;
use api::proto::convoys_server::Convoys;
use api::proto::events_server::Events;
use api::proto::formulas_server::Formulas;
use api::proto::mail_server::Mail;
use api::proto::molecules_server::Molecules;
use api::proto::namespaces_server::Namespaces;
use api::proto::raft_server::Raft as RaftService;
use api::proto::work_server::Work;
use api::proto::{self as pb, RaftPayload, SnapshotChunk};
use futures::StreamExt;
use openraft::Snapshot;
use openraft::async_runtime::WatchReceiver;
use raft_store::types::{Runtime, SnapshotMeta, TypeConfig, Vote};
use raft_store::{Disk, NodeId, SnapshotFile};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::core::{Attempt, ForwardedWrite, NodeCore};
use crate::network::{
    CLUSTER_ID_HEADER, MEMBER_ID_HEADER, PEER_MESSAGE_OVERHEAD_BYTES, PROPOSE_BYTES_MAX, decode, encode,
};

/// Events one watch stream may have queued for its client before it waits for the client.
pub const WATCH_BUFFER_EVENTS_MAX: usize = 1024;
/// Watch streams one node serves at once; one more is refused with `RESOURCE_EXHAUSTED`.
pub const WATCH_STREAMS_MAX: usize = 4096;
/// How long a watch waits for an applied entry before it reads the log again anyway (a fallback:
/// it normally wakes on the applied index).
pub const WATCH_POLL_MS: u64 = 1000;

/// Serves a write of any service: converts it, applies it through Raft, converts the answer.
pub async fn write<D: Disk, Req: IntoWrite, Resp: FromAnswer>(
    core: &NodeCore<D>,
    request: Request<Req>,
) -> Result<Response<Resp>, Status> {
    let write = request.into_inner().into_write().map_err(refusal_to_status)?;
    let answer = core.write(write).await?;
    Resp::from_answer(answer).map(Response::new)
}

/// Serves a read of any service with the consistency it asks for.
pub async fn read<D: Disk, Req: IntoRead, Resp: FromAnswer>(
    core: &NodeCore<D>,
    request: Request<Req>,
) -> Result<Response<Resp>, Status> {
    let now = core.clock.now();
    let read = request.into_inner().into_read(now).map_err(refusal_to_status)?;
    let answer = core.read(read).await?;
    Resp::from_answer(answer).map(Response::new)
}

/// Declares a service that answers from the node's core.
macro_rules! core_service {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name<D: Disk> {
            core: Arc<NodeCore<D>>,
        }

        impl<D: Disk> $name<D> {
            /// Serves this node's replica.
            pub fn new(core: Arc<NodeCore<D>>) -> Self {
                $name { core }
            }
        }
    };
}

core_service!(
    /// The `strand.v1.Beads` service.
    BeadsService
);
core_service!(
    /// The `strand.v1.Namespaces` service.
    NamespacesService
);
core_service!(
    /// The `strand.v1.Formulas` service.
    FormulasService
);
core_service!(
    /// The `strand.v1.Molecules` service.
    MoleculesService
);
core_service!(
    /// The `strand.v1.Work` service: sling, hook, purge.
    WorkService
);
core_service!(
    /// The `strand.v1.Mail` service.
    MailService
);
core_service!(
    /// The `strand.v1.Convoys` service.
    ConvoysService
);
core_service!(
    /// The `strand.v1.Events` service: event log pages and watch streams.
    EventsService
);

#[tonic::async_trait]
impl<D: Disk> Beads for BeadsService<D> {
    async fn create(&self, request: Request<pb::CreateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn get(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
    async fn update(&self, request: Request<pb::UpdateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn set_metadata(
        &self,
        request: Request<pb::SetMetadataRequest>,
    ) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn claim(&self, request: Request<pb::ClaimRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn claim_next(&self, request: Request<pb::ClaimNextRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.core, request).await
    }
    async fn close(&self, request: Request<pb::CloseRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.core, request).await
    }
    async fn reopen(&self, request: Request<pb::ReopenRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn delete(&self, request: Request<pb::DeleteRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.core, request).await
    }
    async fn list(&self, request: Request<pb::ListRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
    async fn ready(&self, request: Request<pb::ReadyRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
    async fn children(&self, request: Request<pb::ChildrenRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
    async fn list_by_label(
        &self,
        request: Request<pb::ListByLabelRequest>,
    ) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
    async fn dep_add(&self, request: Request<pb::DepAddRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.core, request).await
    }
    async fn dep_remove(&self, request: Request<pb::DepRemoveRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.core, request).await
    }
    async fn dep_list(
        &self,
        request: Request<pb::DepListRequest>,
    ) -> Result<Response<pb::DependenciesResponse>, Status> {
        read(&self.core, request).await
    }
    async fn txn(&self, request: Request<pb::TxnRequest>) -> Result<Response<pb::TxnResponse>, Status> {
        write(&self.core, request).await
    }
    async fn import(&self, request: Request<pb::ImportRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.core, request).await
    }
    async fn import_undo(&self, request: Request<pb::ImportUndoRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.core, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Namespaces for NamespacesService<D> {
    async fn create(
        &self,
        request: Request<pb::NamespaceCreateRequest>,
    ) -> Result<Response<pb::NamespacesResponse>, Status> {
        write(&self.core, request).await
    }
    async fn delete(
        &self,
        request: Request<pb::NamespaceDeleteRequest>,
    ) -> Result<Response<pb::NamespacesResponse>, Status> {
        write(&self.core, request).await
    }
    async fn list(
        &self,
        request: Request<pb::NamespaceListRequest>,
    ) -> Result<Response<pb::NamespacesResponse>, Status> {
        read(&self.core, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Formulas for FormulasService<D> {
    async fn put(&self, request: Request<pb::FormulaPutRequest>) -> Result<Response<pb::FormulasResponse>, Status> {
        write(&self.core, request).await
    }
    async fn delete(&self, request: Request<pb::FormulaDeleteRequest>) -> Result<Response<pb::Empty>, Status> {
        write(&self.core, request).await
    }
    async fn get(&self, request: Request<pb::FormulaGetRequest>) -> Result<Response<pb::FormulasResponse>, Status> {
        read(&self.core, request).await
    }
    async fn list(&self, request: Request<pb::FormulaListRequest>) -> Result<Response<pb::FormulasResponse>, Status> {
        read(&self.core, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Molecules for MoleculesService<D> {
    async fn cook(&self, request: Request<pb::CookRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.core, request).await
    }
    async fn status(&self, request: Request<pb::MolStatusRequest>) -> Result<Response<pb::ProgressResponse>, Status> {
        read(&self.core, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Work for WorkService<D> {
    async fn sling(&self, request: Request<pb::SlingRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.core, request).await
    }
    async fn hook(&self, request: Request<pb::HookRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
    async fn hook_claim(&self, request: Request<pb::HookClaimRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.core, request).await
    }
    async fn purge_preview(
        &self,
        request: Request<pb::PurgePreviewRequest>,
    ) -> Result<Response<pb::PurgeResponse>, Status> {
        read(&self.core, request).await
    }
    async fn purge(&self, request: Request<pb::PurgeRequest>) -> Result<Response<pb::PurgeResponse>, Status> {
        write(&self.core, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Mail for MailService<D> {
    async fn send(&self, request: Request<pb::MailSendRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn mark(&self, request: Request<pb::MailMarkRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn archive(&self, request: Request<pb::MailArchiveRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn inbox(&self, request: Request<pb::InboxRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
    async fn thread(&self, request: Request<pb::ThreadRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Convoys for ConvoysService<D> {
    async fn create(&self, request: Request<pb::ConvoyCreateRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn add(&self, request: Request<pb::ConvoyAddRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn land(&self, request: Request<pb::ConvoyLandRequest>) -> Result<Response<pb::BeadResponse>, Status> {
        write(&self.core, request).await
    }
    async fn check(&self, request: Request<pb::ConvoyCheckRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        write(&self.core, request).await
    }
    async fn status(
        &self,
        request: Request<pb::ConvoyStatusRequest>,
    ) -> Result<Response<pb::ProgressResponse>, Status> {
        read(&self.core, request).await
    }
    async fn stranded(&self, request: Request<pb::StrandedRequest>) -> Result<Response<pb::BeadsResponse>, Status> {
        read(&self.core, request).await
    }
}

#[tonic::async_trait]
impl<D: Disk> Events for EventsService<D> {
    async fn list(&self, request: Request<pb::EventsRequest>) -> Result<Response<pb::EventsResponse>, Status> {
        read(&self.core, request).await
    }

    type WatchStream = ReceiverStream<Result<pb::Event, Status>>;

    /// Waits for the read barrier once (through the read path, which serves the first batch),
    /// then streams from this node's replica as it applies entries.
    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let permit = self.core.watch_streams.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "this node already serves {WATCH_STREAMS_MAX} watch streams; close some, or watch through another node"
            ))
        })?;
        let now = self.core.clock.now();
        let read = request.into_inner().into_read(now).map_err(refusal_to_status)?;
        let Query::Events { after, types, limit } = read.query.clone() else {
            unreachable!("a watch request converts to an events query")
        };
        // Subscribed before the first read, so that a batch applied after this line wakes the feed
        // even if the read already saw it (the feed then reads once more, for nothing).
        let changes = self.core.state_machine.namespace_changes(&read.namespace);
        let first = self.core.read(read.clone()).await?.map_err(refusal_to_status)?;
        let (sender, receiver) = mpsc::channel(WATCH_BUFFER_EVENTS_MAX);
        let feed =
            EventFeed { core: self.core.clone(), namespace: read.namespace, types, limit, cursor: after, changes };
        tokio::spawn(async move {
            feed.run(first, sender).await;
            drop(permit);
        });
        Ok(Response::new(ReceiverStream::new(receiver)))
    }
}

/// Where a watch stream's events go.
type EventSender = mpsc::Sender<Result<pb::Event, Status>>;

/// The producer of one watch stream: where it is in the namespace's event log, and how it learns
/// that the namespace changed.
struct EventFeed<D: Disk> {
    core: Arc<NodeCore<D>>,
    namespace: Namespace,
    types: Vec<String>,
    /// Events per read.
    limit: u32,
    /// Every event up to this sequence number was sent, or filtered out by `types`.
    cursor: u64,
    /// Changes after each applied batch that touched the namespace's event log; marked seen
    /// just before each read of the log.
    changes: tokio::sync::watch::Receiver<()>,
}

impl<D: Disk> EventFeed<D> {
    /// Feeds the stream until its client goes away, the node shuts down, or the log refuses the
    /// cursor (compacted); dropping the sender then ends the stream.
    async fn run(mut self, first: Outcome, sender: EventSender) {
        let core = self.core.clone();
        tokio::select! {
            () = core.stopped() => tracing::debug!(namespace = %self.namespace, "watch ended: the node is shutting down"),
            () = sender.closed() => {}
            () = self.follow(first, &sender) => {}
        }
    }

    async fn follow(&mut self, first: Outcome, sender: &EventSender) {
        let mut answer: Answer = Ok(first);
        loop {
            let (events, last_seq) = match answer {
                Ok(Outcome::Events { events, last_seq }) => (events, last_seq),
                Ok(other) => {
                    let _ = sender.send(Err(Status::internal(format!("events read answered {other:?}")))).await;
                    return;
                }
                Err(refusal) => {
                    let _ = sender.send(Err(refusal_to_status(refusal))).await;
                    return;
                }
            };
            let full = events.len() >= self.limit as usize;
            for event in &events {
                assert!(event.seq > self.cursor, "the event log answered seq {} at cursor {}", event.seq, self.cursor);
                if sender.send(Ok(pb::Event::from(event))).await.is_err() {
                    return;
                }
                self.cursor = event.seq;
            }
            if !full {
                // Every event up to `last_seq` was sent or filtered out: skip past the filtered.
                self.cursor = self.cursor.max(last_seq);
                self.wait_for_apply().await;
            }
            self.changes.borrow_and_update();
            let query = Query::Events { after: self.cursor, types: self.types.clone(), limit: self.limit };
            answer = self.core.read_local(&self.namespace, &query);
        }
    }

    /// Returns once the namespace changed after the latest read, or after [`WATCH_POLL_MS`].
    async fn wait_for_apply(&mut self) {
        let poll = tokio::time::sleep(Duration::from_millis(WATCH_POLL_MS));
        tokio::select! {
            () = poll => {}
            changed = self.changes.changed() => {
                if changed.is_err() {
                    // The state machine is gone; the shutdown signal ends the feed.
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

/// The `strand.v1.Cluster` service.
pub struct ClusterService<D: Disk> {
    core: Arc<NodeCore<D>>,
}

impl<D: Disk> ClusterService<D> {
    /// Serves cluster status from this node.
    pub fn new(core: Arc<NodeCore<D>>) -> Self {
        ClusterService { core }
    }
}

/// This node's own status.
pub fn own_status<D: Disk>(core: &NodeCore<D>, include_digest: bool) -> pb::NodeStatus {
    let metrics = core.raft.metrics().borrow_watched().clone();
    let (digest, bead_count) =
        core.state_machine.read(|state| (include_digest.then(|| state.digest()), state.bead_count() as u64));
    let fatal_error = match &metrics.running_state {
        Ok(()) => String::new(),
        Err(fatal) => fatal.to_string(),
    };
    pb::NodeStatus {
        id: core.id,
        address: core.config.advertised(),
        state: format!("{:?}", metrics.state).to_lowercase(),
        term: metrics.current_term,
        last_log_index: metrics.last_log_index.unwrap_or(0),
        applied_index: metrics.last_applied.map_or(0, |log_id| log_id.index),
        snapshot_index: metrics.snapshot.map_or(0, |log_id| log_id.index),
        purged_index: metrics.purged.map_or(0, |log_id| log_id.index),
        leader_id: metrics.current_leader.unwrap_or(0),
        digest,
        fatal_error,
        bead_count,
        error: String::new(),
    }
}

#[tonic::async_trait]
impl<D: Disk> Cluster for ClusterService<D> {
    async fn status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        let include_digest = request.into_inner().include_digest;
        let metrics = self.core.raft.metrics().borrow_watched().clone();
        let membership = metrics.membership_config.membership().clone();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let mut nodes = Vec::new();
        for (node_id, node) in membership.nodes() {
            if *node_id == self.core.id {
                nodes.push(own_status(&self.core, include_digest));
                continue;
            }
            nodes.push(self.peer_status(*node_id, &node.addr, include_digest).await);
        }
        if nodes.is_empty() {
            nodes.push(own_status(&self.core, include_digest));
        }
        Ok(Response::new(pb::StatusResponse {
            leader_id: metrics.current_leader.unwrap_or(0),
            term: metrics.current_term,
            voters,
            nodes,
        }))
    }
}

impl<D: Disk> ClusterService<D> {
    async fn peer_status(&self, node_id: u64, address: &str, include_digest: bool) -> pb::NodeStatus {
        let unreachable = |error: String| pb::NodeStatus {
            id: node_id,
            address: address.to_string(),
            state: "unreachable".into(),
            error,
            ..Default::default()
        };
        let mut client = match self.core.peers.client(address) {
            Ok(client) => client,
            Err(error) => return unreachable(error),
        };
        let timeout = Duration::from_millis(self.core.config.raft.rpc_timeout_ms);
        match tokio::time::timeout(timeout, client.get_node_status(pb::StatusRequest { include_digest })).await {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => unreachable(status.message().to_string()),
            Err(_) => unreachable(format!("no answer within {timeout:?}")),
        }
    }
}

/// The `strand.v1.Raft` service: traffic from other nodes.
pub struct RaftPeerService<D: Disk> {
    core: Arc<NodeCore<D>>,
    /// The leadership transfer the current leader announced: its target, and until when that
    /// target's vote requests may pass the leader lease.
    transfer: std::sync::Mutex<Option<(NodeId, tokio::time::Instant)>>,
}

/// Refuses a Raft message, logging why.
fn refuse(message: String) -> Status {
    tracing::warn!(%message, "refused a Raft message");
    Status::permission_denied(message)
}

impl<D: Disk> RaftPeerService<D> {
    /// Serves Raft traffic into this node.
    pub fn new(core: Arc<NodeCore<D>>) -> Self {
        RaftPeerService { core, transfer: std::sync::Mutex::new(None) }
    }

    /// The member that sent `request`, once its cluster id is this node's and it is a member.
    fn sender<T>(&self, request: &Request<T>) -> Result<NodeId, Status> {
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
        if cluster_id != self.core.cluster_id {
            return Err(refuse(format!(
                "a Raft message from cluster {cluster_id:016x}, and this node belongs to cluster {:016x}: the sender was first started with another --cluster-name or other --peers ids",
                self.core.cluster_id
            )));
        }
        let member_id = header(MEMBER_ID_HEADER)?;
        if !self.is_member(member_id) {
            return Err(refuse(format!("a Raft message from node {member_id}, which is not a member of this cluster")));
        }
        Ok(member_id)
    }

    fn is_member(&self, member_id: NodeId) -> bool {
        let config = &self.core.config;
        if member_id == config.id || config.peers.contains_key(&member_id) {
            return true;
        }
        let metrics = self.core.raft.metrics();
        let metrics = metrics.borrow_watched();
        metrics.membership_config.membership().get_node(&member_id).is_some()
    }

    /// Refuses a message whose vote (a candidate's, or a leader's) is not the sender's own.
    fn check_vote(sender: NodeId, vote: &Vote, what: &str) -> Result<(), Status> {
        let named = vote.leader_id().voted_for;
        if named != sender {
            return Err(refuse(format!("node {sender} sent {what} in the name of node {named}")));
        }
        Ok(())
    }

    /// A vote or pre-vote request (`what`) as openraft may see it: from a member, small, in the
    /// sender's own name, while this node votes, with its transfer flag gated.
    fn admit_vote(
        &self,
        request: &Request<RaftPayload>,
        what: &str,
    ) -> Result<openraft::raft::VoteRequest<TypeConfig>, Status> {
        let sender = self.sender(request)?;
        small(request, what)?;
        self.refuse_while_rejoining()?;
        let mut rpc: openraft::raft::VoteRequest<TypeConfig> = decode(request.get_ref()).map_err(malformed)?;
        Self::check_vote(sender, &rpc.vote, what)?;
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
    /// announced a transfer to its sender, and recently.
    fn gate_transfer(&self, sender: NodeId, request: &mut openraft::raft::VoteRequest<TypeConfig>) {
        if !request.leadership_transfer {
            return;
        }
        let announced = *self.transfer.lock().expect("transfer lock");
        let allowed = announced.is_some_and(|(target, until)| target == sender && tokio::time::Instant::now() <= until);
        if !allowed {
            tracing::warn!(
                node = sender,
                "a vote request claims a leadership transfer no leader announced; treating it as an ordinary vote"
            );
            request.leadership_transfer = false;
        }
    }

    fn incoming_snapshot_path(&self) -> std::path::PathBuf {
        let unique = self.core.clock.now().0;
        self.core
            .config
            .data_dir
            .join("snapshots")
            .join(format!("{INCOMING_SNAPSHOT_PREFIX}{unique}-{}.snapshot", next_incoming_number()))
    }

    /// Receives a snapshot into a file under the size and time caps; on any failure the file is
    /// deleted before this returns.
    async fn receive_snapshot(
        &self,
        sender: NodeId,
        mut chunks: Streaming<SnapshotChunk>,
    ) -> Result<(Vote, SnapshotMeta, std::path::PathBuf), Status> {
        let settings = &self.core.config.raft;
        let timeout = Duration::from_millis(settings.snapshot_receive_timeout_ms);
        let deadline = tokio::time::Instant::now() + timeout;
        let first = tokio::time::timeout_at(deadline, chunks.message())
            .await
            .map_err(|_| Status::deadline_exceeded(format!("no snapshot header arrived within {timeout:?}")))??
            .ok_or_else(|| Status::invalid_argument("empty snapshot stream"))?;
        let (vote, meta): (Vote, SnapshotMeta) = postcard::from_bytes(&first.meta)
            .map_err(|error| Status::invalid_argument(format!("malformed snapshot header: {error}")))?;
        Self::check_vote(sender, &vote, "a snapshot")?;
        if !vote.is_committed() {
            return Err(refuse(format!("node {sender} sent a snapshot under a vote it has not won")));
        }
        let path = self.incoming_snapshot_path();
        let writing = Self::write_chunks(&path, chunks, settings.snapshot_receive_bytes_max);
        let received = tokio::time::timeout_at(deadline, writing).await;
        let received = received.unwrap_or_else(|_| {
            Err(Status::deadline_exceeded(format!(
                "the snapshot did not arrive within snapshot_receive_timeout_ms ({timeout:?}); raise it on this node for a large state"
            )))
        });
        if received.is_err() {
            let _ = tokio::fs::remove_file(&path).await;
        }
        received.map(|()| (vote, meta, path))
    }

    async fn write_chunks(
        path: &std::path::Path,
        mut chunks: Streaming<SnapshotChunk>,
        bytes_max: u64,
    ) -> Result<(), Status> {
        let mut file = tokio::fs::File::create(path).await.map_err(|error| Status::internal(error.to_string()))?;
        let mut received = 0u64;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            received += chunk.data.len() as u64;
            if received > bytes_max {
                return Err(Status::resource_exhausted(format!(
                    "the snapshot is over snapshot_receive_bytes_max ({bytes_max} bytes); raise it on this node if the state is really that large"
                )));
            }
            file.write_all(&chunk.data).await.map_err(|error| Status::internal(error.to_string()))?;
        }
        file.sync_all().await.map_err(|error| Status::internal(error.to_string()))
    }

    /// Reads a received snapshot through (framing, count, checksums) on the blocking pool, and
    /// checks it against the metadata it was sent with; deletes it when it fails.
    async fn verify_snapshot(path: std::path::PathBuf, meta: &SnapshotMeta) -> Result<(), Status> {
        let checked = path.clone();
        let verified = tokio::task::spawn_blocking(move || raft_store::snapshot::verify(&checked))
            .await
            .map_err(|error| Status::internal(format!("snapshot verification did not finish: {error}")))?;
        let problem = match verified {
            Ok(file_meta) if &file_meta == meta => None,
            Ok(_) => Some("its file does not match the metadata it was sent with".to_string()),
            Err(error) => Some(error.to_string()),
        };
        if let Some(problem) = problem {
            let _ = std::fs::remove_file(&path);
            return Err(Status::data_loss(format!("received snapshot is damaged ({problem}); the sender will retry")));
        }
        Ok(())
    }
}

/// The name every incoming snapshot file starts with; such files left by a crash are removed at
/// start (`node::run`).
pub const INCOMING_SNAPSHOT_PREFIX: &str = "incoming-";

/// Numbers incoming snapshot files so two transfers in the same millisecond never share a file.
fn next_incoming_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
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
        Ok(request) if RaftPeerService::<D>::check_vote(sender, &request.vote, "an append").is_ok() => {
            core.observe_append(&request);
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
impl<D: Disk> RaftService for RaftPeerService<D> {
    type StreamAppendStream = AppendAnswers;

    async fn append_entries(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let sender = self.sender(&request)?;
        let rpc: openraft::raft::AppendEntriesRequest<TypeConfig> = decode(request.get_ref()).map_err(malformed)?;
        Self::check_vote(sender, &rpc.vote, "an append")?;
        self.core.observe_append(&rpc);
        answer(self.core.raft.append_entries(rpc).await)
    }

    /// A replication session: requests are handed to openraft as they arrive, and its answers
    /// go back in order. A malformed request ends the requests, so the leader sees the session
    /// close with that request unanswered and starts another; so does this node stopping.
    async fn stream_append(&self, request: Request<Streaming<RaftPayload>>) -> Result<Response<AppendAnswers>, Status> {
        let sender = self.sender(&request)?;
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
        let sender = self.sender(&request)?;
        let (vote, meta, path) = self.receive_snapshot(sender, request.into_inner()).await?;
        Self::verify_snapshot(path.clone(), &meta).await?;
        let file = SnapshotFile::open(&path).map_err(|error| Status::internal(error.to_string()))?;
        let snapshot = Snapshot { meta, snapshot: file };
        answer(self.core.raft.install_full_snapshot(vote, snapshot).await)
    }

    async fn transfer_leader(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let sender = self.sender(&request)?;
        small(&request, "a leadership transfer")?;
        let rpc: openraft::raft::TransferLeaderRequest<TypeConfig> = decode(request.get_ref()).map_err(malformed)?;
        Self::check_vote(sender, rpc.from_leader(), "a leadership transfer")?;
        let window = Duration::from_millis(self.core.config.raft.election_timeout_ms_max * 2);
        *self.transfer.lock().expect("transfer lock") = Some((*rpc.to_node_id(), tokio::time::Instant::now() + window));
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
        let forwarded: ForwardedWrite = decode(request.get_ref()).map_err(malformed)?;
        let result = match self.core.propose_local(&forwarded).await {
            Attempt::Done(answer) => Ok(answer),
            Attempt::Retry(reason) => Err(reason),
        };
        answer(result)
    }

    async fn read_index(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        self.sender(&request)?;
        small(&request, "a read-index request")?;
        answer(self.core.read_index().await)
    }

    async fn get_node_status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::NodeStatus>, Status> {
        self.sender(&request)?;
        Ok(Response::new(own_status(&self.core, request.into_inner().include_digest)))
    }
}
