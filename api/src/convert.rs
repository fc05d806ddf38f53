//! The one place protobuf types and model types meet.
//!
//! Servers turn a request into a [`WriteRequest`] or [`ReadRequest`] with [`IntoWrite`] /
//! [`IntoRead`] and an answer into a response with [`FromAnswer`]; clients go the other way with
//! [`write_to_proto`] and the `From` impls. Refusals travel as a gRPC status whose details carry
//! the refusal as JSON, so a client gets back exactly the [`Refusal`] the state machine produced.

use std::collections::BTreeMap;

use tonic::{Code, Status as GrpcStatus};

use crate::command::*;
use crate::model::*;
use crate::outcome::{Answer, Outcome, Refusal};
use crate::proto as pb;

/// A mutating request as the node sees it: where, which retry identity, what.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteRequest {
    /// The namespace.
    pub namespace: Namespace,
    /// The client's request identity; `None` when the client sent none (client_id 0).
    pub request_id: Option<RequestId>,
    /// The command.
    pub command: Command,
}

/// How a read is served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Consistency {
    /// Through the leader's read index (the default).
    #[default]
    Linearizable,
    /// From the local replica, possibly stale.
    Serializable,
}

/// A read as the node sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadRequest {
    /// The namespace.
    pub namespace: Namespace,
    /// How to serve it.
    pub consistency: Consistency,
    /// What to read.
    pub query: Query,
}

fn namespace_of(name: &str) -> Namespace {
    if name.is_empty() { Namespace::default_namespace() } else { Namespace(name.to_string()) }
}

fn header_of(header: Option<pb::WriteHeader>) -> (Namespace, Option<RequestId>) {
    let header = header.unwrap_or_default();
    let request_id = (header.client_id != 0).then_some(RequestId {
        client_id: header.client_id,
        request_seq: header.request_seq,
        lowest_unacked: header.lowest_unacked,
    });
    (namespace_of(&header.namespace), request_id)
}

fn read_header_of(header: Option<pb::ReadHeader>) -> (Namespace, Consistency) {
    let header = header.unwrap_or_default();
    let consistency = match pb::Consistency::try_from(header.consistency) {
        Ok(pb::Consistency::Serializable) => Consistency::Serializable,
        _ => Consistency::Linearizable,
    };
    (namespace_of(&header.namespace), consistency)
}

fn invalid(message: String) -> Refusal {
    Refusal::Invalid(message)
}

/// Parses a status name, refusing anything outside the seven with the list of valid ones.
pub fn parse_status(text: &str) -> Result<Status, Refusal> {
    Status::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Status::ALL.iter().map(|status| status.as_str()).collect();
        invalid(format!("invalid status {text:?}; use one of: {}", names.join(", ")))
    })
}

fn parse_priority(priority: Option<u32>) -> Result<Option<u8>, Refusal> {
    priority
        .map(|value| u8::try_from(value).map_err(|_| invalid(format!("priority {value} is out of range; use 0 to 4"))))
        .transpose()
}

/// Splits `key=value` at the first `=`.
pub fn parse_key_value(pair: &str) -> Result<(String, String), Refusal> {
    pair.split_once('=')
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .ok_or_else(|| invalid(format!("{pair:?} is not key=value")))
}

fn optional_id(text: &str) -> Option<BeadId> {
    (!text.is_empty()).then(|| BeadId(text.to_string()))
}

fn metadata_changes(
    changes: std::collections::HashMap<String, pb::MetadataChange>,
) -> BTreeMap<String, Option<String>> {
    changes.into_iter().map(|(key, change)| (key, (!change.remove).then_some(change.value))).collect()
}

fn ready_filter(filter: Option<pb::ReadyFilter>) -> Result<ReadyFilter, Refusal> {
    let filter = filter.unwrap_or_default();
    Ok(ReadyFilter {
        assignee: filter.assignee,
        unassigned: filter.unassigned,
        labels_all: filter.labels_all,
        labels_any: filter.labels_any,
        exclude_labels: filter.exclude_labels,
        metadata_equals: filter.metadata_equals.iter().map(|pair| parse_key_value(pair)).collect::<Result<_, _>>()?,
        metadata_has_keys: filter.metadata_has_keys,
        parent: optional_id(&filter.parent),
        types: filter.types,
        exclude_types: filter.exclude_types,
        include_ephemeral: filter.include_ephemeral,
        limit: filter.limit.unwrap_or(crate::limits::READY_LIMIT_DEFAULT),
    })
}

fn ready_filter_to_proto(filter: &ReadyFilter) -> pb::ReadyFilter {
    pb::ReadyFilter {
        assignee: filter.assignee.clone(),
        unassigned: filter.unassigned,
        labels_all: filter.labels_all.clone(),
        labels_any: filter.labels_any.clone(),
        exclude_labels: filter.exclude_labels.clone(),
        metadata_equals: filter.metadata_equals.iter().map(|(key, value)| format!("{key}={value}")).collect(),
        metadata_has_keys: filter.metadata_has_keys.clone(),
        parent: filter.parent.as_ref().map(|parent| parent.0.clone()).unwrap_or_default(),
        types: filter.types.clone(),
        exclude_types: filter.exclude_types.clone(),
        include_ephemeral: filter.include_ephemeral,
        limit: Some(filter.limit),
    }
}

/// A protobuf write request that becomes a [`WriteRequest`].
pub trait IntoWrite {
    /// Converts, refusing malformed fields.
    fn into_write(self) -> Result<WriteRequest, Refusal>;
}

/// A protobuf read request that becomes a [`ReadRequest`]; `now` is the node's clock.
pub trait IntoRead {
    /// Converts, refusing malformed fields.
    fn into_read(self, now: Timestamp) -> Result<ReadRequest, Refusal>;
}

macro_rules! write_request {
    ($request:ty, |$value:ident| $command:expr) => {
        impl IntoWrite for $request {
            fn into_write(self) -> Result<WriteRequest, Refusal> {
                let (namespace, request_id) = header_of(self.header.clone());
                let $value = self;
                let command: Result<Command, Refusal> = $command;
                Ok(WriteRequest { namespace, request_id, command: command? })
            }
        }
    };
}

write_request!(pb::CreateRequest, |request| {
    let requested_status = if request.status.is_empty() { None } else { Some(parse_status(&request.status)?) };
    Ok(Command::Create(CreateBead {
        title: request.title,
        description: request.description,
        bead_type: request.r#type,
        priority: parse_priority(request.priority)?,
        assignee: request.assignee,
        from: request.from,
        parent_id: optional_id(&request.parent_id),
        reference: request.r#ref,
        needs: request.needs,
        labels: request.labels.into_iter().collect(),
        metadata: request.metadata.into_iter().collect(),
        ephemeral: request.ephemeral,
        defer_until: request.defer_until_ms.map(Timestamp),
        requested_status,
    }))
});

write_request!(pb::UpdateRequest, |request| {
    Ok(Command::Update(UpdateBead {
        id: BeadId(request.id),
        title: request.title,
        description: request.description,
        status: request.status.as_deref().map(parse_status).transpose()?,
        bead_type: request.r#type,
        priority: parse_priority(request.priority)?,
        assignee: request.assignee,
        parent_id: request.parent_id.map(BeadId),
        add_labels: request.add_labels.into_iter().collect(),
        remove_labels: request.remove_labels.into_iter().collect(),
        metadata: metadata_changes(request.metadata),
        claim_for: request.claim_for.map(Actor),
    }))
});

write_request!(pb::SetMetadataRequest, |request| {
    Ok(Command::SetMetadata { id: BeadId(request.id), entries: metadata_changes(request.entries) })
});

write_request!(pb::ClaimRequest, |request| {
    Ok(Command::Claim { id: BeadId(request.id), actor: Actor(request.actor) })
});

write_request!(pb::ClaimNextRequest, |request| {
    Ok(Command::ClaimNext { actor: Actor(request.actor), filter: ready_filter(request.filter)? })
});

write_request!(pb::CloseRequest, |request| {
    Ok(Command::Close { ids: request.ids.into_iter().map(BeadId).collect(), reason: request.reason })
});

write_request!(pb::ReopenRequest, |request| Ok(Command::Reopen { id: BeadId(request.id) }));

write_request!(pb::DeleteRequest, |request| Ok(Command::Delete { id: BeadId(request.id) }));

write_request!(pb::DepAddRequest, |request| {
    let dep_type = if request.r#type.is_empty() { DepType::blocks() } else { DepType(request.r#type) };
    Ok(Command::DepAdd { issue_id: BeadId(request.issue_id), depends_on_id: BeadId(request.depends_on_id), dep_type })
});

write_request!(pb::DepRemoveRequest, |request| {
    Ok(Command::DepRemove { issue_id: BeadId(request.issue_id), depends_on_id: BeadId(request.depends_on_id) })
});

macro_rules! read_request {
    ($request:ty, |$value:ident, $now:ident| $query:expr) => {
        impl IntoRead for $request {
            fn into_read(self, $now: Timestamp) -> Result<ReadRequest, Refusal> {
                let (namespace, consistency) = read_header_of(self.header.clone());
                let $value = self;
                let query: Result<Query, Refusal> = $query;
                Ok(ReadRequest { namespace, consistency, query: query? })
            }
        }
    };
}

read_request!(pb::GetRequest, |request, _now| {
    if request.ids.len() > crate::limits::IDS_PER_REQUEST_MAX {
        return Err(invalid(format!("get names more than {} ids", crate::limits::IDS_PER_REQUEST_MAX)));
    }
    Ok(Query::Get { ids: request.ids.into_iter().map(BeadId).collect() })
});

read_request!(pb::ListRequest, |request, _now| {
    let sort = match request.sort.as_str() {
        "" | "created_desc" => ListSort::CreatedDesc,
        "created_asc" => ListSort::CreatedAsc,
        other => return Err(invalid(format!("unknown sort {other:?}; use created_asc or created_desc"))),
    };
    Ok(Query::List(ListFilter {
        status: request.status.as_deref().map(parse_status).transpose()?,
        assignee: request.assignee,
        labels_all: request.labels_all,
        bead_type: request.r#type,
        parent: request.parent.map(BeadId),
        metadata_equals: request.metadata_equals.iter().map(|pair| parse_key_value(pair)).collect::<Result<_, _>>()?,
        all: request.all,
        limit: request.limit,
        sort,
    }))
});

read_request!(pb::ReadyRequest, |request, now| Ok(Query::Ready { filter: ready_filter(request.filter)?, now }));

read_request!(pb::ChildrenRequest, |request, _now| {
    Ok(Query::Children { parent: BeadId(request.parent), include_closed: request.include_closed })
});

read_request!(pb::ListByLabelRequest, |request, _now| {
    Ok(Query::ListByLabel { label: request.label, limit: request.limit })
});

read_request!(pb::DepListRequest, |request, _now| {
    let direction = match request.direction.as_str() {
        "" | "down" => DepDirection::Down,
        "up" => DepDirection::Up,
        other => return Err(invalid(format!("unknown direction {other:?}; use down or up"))),
    };
    Ok(Query::DepList { id: BeadId(request.id), direction })
});

/// Builds the protobuf request of a command, for clients.
pub fn write_to_proto(header: pb::WriteHeader, command: &Command) -> WriteProto {
    let header = Some(header);
    match command.clone() {
        Command::Create(create) => WriteProto::Create(pb::CreateRequest {
            header,
            title: create.title,
            description: create.description,
            r#type: create.bead_type,
            priority: create.priority.map(u32::from),
            assignee: create.assignee,
            from: create.from,
            parent_id: create.parent_id.map(|id| id.0).unwrap_or_default(),
            r#ref: create.reference,
            needs: create.needs,
            labels: create.labels.into_iter().collect(),
            metadata: create.metadata.into_iter().collect(),
            ephemeral: create.ephemeral,
            defer_until_ms: create.defer_until.map(|time| time.0),
            status: create.requested_status.map(|status| status.as_str().to_string()).unwrap_or_default(),
        }),
        Command::Update(update) => WriteProto::Update(pb::UpdateRequest {
            header,
            id: update.id.0,
            title: update.title,
            description: update.description,
            status: update.status.map(|status| status.as_str().to_string()),
            r#type: update.bead_type,
            priority: update.priority.map(u32::from),
            assignee: update.assignee,
            parent_id: update.parent_id.map(|id| id.0),
            add_labels: update.add_labels.into_iter().collect(),
            remove_labels: update.remove_labels.into_iter().collect(),
            metadata: metadata_to_proto(update.metadata),
            claim_for: update.claim_for.map(|actor| actor.0),
        }),
        Command::SetMetadata { id, entries } => {
            WriteProto::SetMetadata(pb::SetMetadataRequest { header, id: id.0, entries: metadata_to_proto(entries) })
        }
        Command::Claim { id, actor } => WriteProto::Claim(pb::ClaimRequest { header, id: id.0, actor: actor.0 }),
        Command::ClaimNext { actor, filter } => WriteProto::ClaimNext(pb::ClaimNextRequest {
            header,
            actor: actor.0,
            filter: Some(ready_filter_to_proto(&filter)),
        }),
        Command::Close { ids, reason } => {
            WriteProto::Close(pb::CloseRequest { header, ids: ids.into_iter().map(|id| id.0).collect(), reason })
        }
        Command::Reopen { id } => WriteProto::Reopen(pb::ReopenRequest { header, id: id.0 }),
        Command::Delete { id } => WriteProto::Delete(pb::DeleteRequest { header, id: id.0 }),
        Command::DepAdd { issue_id, depends_on_id, dep_type } => WriteProto::DepAdd(pb::DepAddRequest {
            header,
            issue_id: issue_id.0,
            depends_on_id: depends_on_id.0,
            r#type: dep_type.0,
        }),
        Command::DepRemove { issue_id, depends_on_id } => {
            WriteProto::DepRemove(pb::DepRemoveRequest { header, issue_id: issue_id.0, depends_on_id: depends_on_id.0 })
        }
    }
}

fn metadata_to_proto(
    entries: BTreeMap<String, Option<String>>,
) -> std::collections::HashMap<String, pb::MetadataChange> {
    entries
        .into_iter()
        .map(|(key, value)| {
            let change = pb::MetadataChange { remove: value.is_none(), value: value.unwrap_or_default() };
            (key, change)
        })
        .collect()
}

/// The protobuf request of one command, tagged by RPC.
#[allow(missing_docs)]
#[derive(Clone)]
pub enum WriteProto {
    Create(pb::CreateRequest),
    Update(pb::UpdateRequest),
    SetMetadata(pb::SetMetadataRequest),
    Claim(pb::ClaimRequest),
    ClaimNext(pb::ClaimNextRequest),
    Close(pb::CloseRequest),
    Reopen(pb::ReopenRequest),
    Delete(pb::DeleteRequest),
    DepAdd(pb::DepAddRequest),
    DepRemove(pb::DepRemoveRequest),
}

impl WriteProto {
    /// The encoded size of the request, in bytes.
    pub fn encoded_len(&self) -> usize {
        use prost::Message;
        match self {
            WriteProto::Create(request) => request.encoded_len(),
            WriteProto::Update(request) => request.encoded_len(),
            WriteProto::SetMetadata(request) => request.encoded_len(),
            WriteProto::Claim(request) => request.encoded_len(),
            WriteProto::ClaimNext(request) => request.encoded_len(),
            WriteProto::Close(request) => request.encoded_len(),
            WriteProto::Reopen(request) => request.encoded_len(),
            WriteProto::Delete(request) => request.encoded_len(),
            WriteProto::DepAdd(request) => request.encoded_len(),
            WriteProto::DepRemove(request) => request.encoded_len(),
        }
    }
}

/// Builds the protobuf request of a query, for clients.
pub fn read_to_proto(header: pb::ReadHeader, query: &Query) -> ReadProto {
    let header = Some(header);
    match query.clone() {
        Query::Get { ids } => ReadProto::Get(pb::GetRequest { header, ids: ids.into_iter().map(|id| id.0).collect() }),
        Query::List(filter) => ReadProto::List(pb::ListRequest {
            header,
            status: filter.status.map(|status| status.as_str().to_string()),
            assignee: filter.assignee,
            labels_all: filter.labels_all,
            r#type: filter.bead_type,
            parent: filter.parent.map(|id| id.0),
            metadata_equals: filter.metadata_equals.iter().map(|(key, value)| format!("{key}={value}")).collect(),
            all: filter.all,
            limit: filter.limit,
            sort: match filter.sort {
                ListSort::CreatedAsc => "created_asc".into(),
                ListSort::CreatedDesc => "created_desc".into(),
            },
        }),
        Query::Ready { filter, .. } => {
            ReadProto::Ready(pb::ReadyRequest { header, filter: Some(ready_filter_to_proto(&filter)) })
        }
        Query::Children { parent, include_closed } => {
            ReadProto::Children(pb::ChildrenRequest { header, parent: parent.0, include_closed })
        }
        Query::ListByLabel { label, limit } => ReadProto::ListByLabel(pb::ListByLabelRequest { header, label, limit }),
        Query::DepList { id, direction } => ReadProto::DepList(pb::DepListRequest {
            header,
            id: id.0,
            direction: match direction {
                DepDirection::Down => "down".into(),
                DepDirection::Up => "up".into(),
            },
        }),
    }
}

/// The protobuf request of one query, tagged by RPC.
#[allow(missing_docs)]
pub enum ReadProto {
    Get(pb::GetRequest),
    List(pb::ListRequest),
    Ready(pb::ReadyRequest),
    Children(pb::ChildrenRequest),
    ListByLabel(pb::ListByLabelRequest),
    DepList(pb::DepListRequest),
}

impl From<&Bead> for pb::Bead {
    fn from(bead: &Bead) -> pb::Bead {
        pb::Bead {
            id: bead.id.0.clone(),
            title: bead.title.clone(),
            description: bead.description.clone(),
            status: bead.status.as_str().to_string(),
            r#type: bead.bead_type.clone(),
            priority: bead.priority.map(u32::from),
            assignee: bead.assignee.clone(),
            from: bead.from.clone(),
            parent_id: bead.parent_id.as_ref().map(|id| id.0.clone()).unwrap_or_default(),
            r#ref: bead.reference.clone(),
            needs: bead.needs().into_iter().map(|id| id.0).collect(),
            labels: bead.labels.iter().cloned().collect(),
            metadata: bead.metadata.clone().into_iter().collect(),
            ephemeral: bead.ephemeral,
            created_at_ms: bead.created_at.0,
            updated_at_ms: bead.updated_at.0,
            started_at_ms: bead.started_at.map(|time| time.0),
            closed_at_ms: bead.closed_at.map(|time| time.0),
            close_reason: bead.close_reason.clone(),
            defer_until_ms: bead.defer_until.map(|time| time.0),
            dependencies: bead.dependencies().iter().map(pb::Dependency::from).collect(),
        }
    }
}

impl From<&Dependency> for pb::Dependency {
    fn from(dependency: &Dependency) -> pb::Dependency {
        pb::Dependency {
            issue_id: dependency.issue_id.0.clone(),
            depends_on_id: dependency.depends_on_id.0.clone(),
            r#type: dependency.dep_type.0.clone(),
        }
    }
}

impl From<pb::Dependency> for Dependency {
    fn from(dependency: pb::Dependency) -> Dependency {
        Dependency {
            issue_id: BeadId(dependency.issue_id),
            depends_on_id: BeadId(dependency.depends_on_id),
            dep_type: DepType(dependency.r#type),
        }
    }
}

/// Converts a bead received from a server back into the model.
pub fn bead_from_proto(bead: pb::Bead) -> Result<Bead, Refusal> {
    let seq = bead.id.rsplit_once('-').and_then(|(_, n)| n.parse().ok()).unwrap_or(0);
    Ok(Bead {
        seq,
        status: parse_status(&bead.status)?,
        priority: parse_priority(bead.priority)?,
        parent_id: optional_id(&bead.parent_id),
        depends_on: bead
            .dependencies
            .into_iter()
            .map(|dependency| (BeadId(dependency.depends_on_id), DepType(dependency.r#type)))
            .collect(),
        id: BeadId(bead.id),
        title: bead.title,
        description: bead.description,
        bead_type: bead.r#type,
        assignee: bead.assignee,
        from: bead.from,
        reference: bead.r#ref,
        labels: bead.labels.into_iter().collect(),
        metadata: bead.metadata.into_iter().collect(),
        ephemeral: bead.ephemeral,
        created_at: Timestamp(bead.created_at_ms),
        updated_at: Timestamp(bead.updated_at_ms),
        started_at: bead.started_at_ms.map(Timestamp),
        closed_at: bead.closed_at_ms.map(Timestamp),
        close_reason: bead.close_reason,
        defer_until: bead.defer_until_ms.map(Timestamp),
    })
}

/// A protobuf response built from a state-machine answer.
pub trait FromAnswer: Sized {
    /// Converts; a refusal becomes a gRPC status.
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus>;
}

fn unexpected(outcome: &Outcome) -> GrpcStatus {
    GrpcStatus::internal(format!("the state machine answered with an unexpected shape: {outcome:?}"))
}

impl FromAnswer for pb::BeadResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Bead(bead) => Ok(pb::BeadResponse { bead: Some(pb::Bead::from(bead.as_ref())) }),
            other => Err(unexpected(&other)),
        }
    }
}

impl FromAnswer for pb::BeadsResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Beads(beads) => Ok(pb::BeadsResponse { beads: beads.iter().map(pb::Bead::from).collect() }),
            Outcome::Bead(bead) => Ok(pb::BeadsResponse { beads: vec![pb::Bead::from(bead.as_ref())] }),
            other => Err(unexpected(&other)),
        }
    }
}

impl FromAnswer for pb::Empty {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        answer.map_err(refusal_to_status)?;
        Ok(pb::Empty {})
    }
}

impl FromAnswer for pb::DependenciesResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Dependencies(rows) => {
                Ok(pb::DependenciesResponse { dependencies: rows.iter().map(pb::Dependency::from).collect() })
            }
            other => Err(unexpected(&other)),
        }
    }
}

/// The gRPC status of a refusal: a code by kind, the one-line message, the refusal as JSON details.
pub fn refusal_to_status(refusal: Refusal) -> GrpcStatus {
    let code = match &refusal {
        Refusal::NotFound(_) => Code::NotFound,
        Refusal::AlreadyClaimed { .. } | Refusal::NotClaimable { .. } | Refusal::InvalidTransition { .. } => {
            Code::FailedPrecondition
        }
        Refusal::Invalid(_) | Refusal::TooLarge { .. } | Refusal::UnfilteredList | Refusal::TooManyResults { .. } => {
            Code::InvalidArgument
        }
        Refusal::SessionExpired { .. } | Refusal::RequestTooOld { .. } => Code::Aborted,
    };
    let details = serde_json::to_vec(&refusal).unwrap_or_default();
    GrpcStatus::with_details(code, refusal.to_string(), details.into())
}

/// The refusal a status carries, if it carries one (statuses from transport failures do not).
pub fn refusal_from_status(status: &GrpcStatus) -> Option<Refusal> {
    serde_json::from_slice(status.details()).ok()
}

/// Converts a server response into the model outcome, for clients.
pub fn outcome_from_beads(response: pb::BeadsResponse) -> Answer {
    let beads = response.beads.into_iter().map(bead_from_proto).collect::<Result<_, _>>()?;
    Ok(Outcome::Beads(beads))
}

/// Converts a one-bead server response into the model outcome, for clients.
pub fn outcome_from_bead(response: pb::BeadResponse) -> Answer {
    let bead = response.bead.ok_or_else(|| invalid("the server sent a response with no bead".into()))?;
    Ok(Outcome::Bead(Box::new(bead_from_proto(bead)?)))
}
