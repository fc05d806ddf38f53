//! The one place protobuf types and model types meet.
//!
//! Servers turn a request into a [`WriteRequest`] or [`ReadRequest`] with [`IntoWrite`] /
//! [`IntoRead`] and an answer into a response with [`FromAnswer`]; clients go the other way with
//! [`write_to_proto`] / [`read_to_proto`] and [`IntoAnswer`]. Refusals travel as a gRPC status
//! whose details carry the refusal in the standard rich error model (`google.rpc.Status` with an
//! `ErrorInfo` whose metadata holds it as JSON), so a client gets back exactly the [`Refusal`] the state
//! machine produced.

use std::collections::BTreeMap;

use tonic::{Code, Status as GrpcStatus};

use crate::command::*;
use crate::model::*;
use crate::outcome::{Answer, FormulaInfo, NamespaceInfo, OrderInfo, Outcome, Progress, Refusal};
use crate::proto as pb;
use crate::registry::ClientRpc;

/// A mutating request as the node sees it: where, which retry identity, who, what.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteRequest {
    /// The namespace.
    pub namespace: Namespace,
    /// The client's request identity; `None` when the client sent none (client_id 0).
    pub request_id: Option<RequestId>,
    /// Who acts, recorded in the events of the write (empty when the client named no one).
    pub actor: Actor,
    /// The id prefix the namespace gets if this write creates it; `None`: the cluster default;
    /// [`crate::command::PREFIX_NAMESPACE_MUST_EXIST`]: the write may not create it.
    pub prefix: Option<String>,
    /// The command.
    pub command: Command,
    /// The SHA-256 of the token the request came with (set by the node from its metadata).
    pub credential: Option<crate::auth::TokenHash>,
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
    /// Refuse the read when the namespace does not exist, instead of answering it as empty.
    pub namespace_must_exist: bool,
    /// What to read.
    pub query: Query,
    /// The SHA-256 of the token the request came with (set by the node from its metadata).
    pub credential: Option<crate::auth::TokenHash>,
}

pub(crate) fn namespace_of(name: &str) -> Namespace {
    if name.is_empty() { Namespace::default_namespace() } else { Namespace(name.to_string()) }
}

/// The write request of a header and a command; an empty prefix means the cluster default, and
/// `namespace_must_exist` that the write may not create its namespace.
pub(crate) fn write_request_of(header: Option<pb::WriteHeader>, command: Command) -> WriteRequest {
    let header = header.unwrap_or_default();
    let request_id = (header.client_id != 0).then_some(RequestId {
        client_id: header.client_id,
        request_seq: header.request_seq,
        lowest_unacked: header.lowest_unacked,
    });
    WriteRequest {
        namespace: namespace_of(&header.namespace),
        request_id,
        actor: Actor(header.actor),
        prefix: match header.namespace_must_exist {
            true => Some(crate::command::PREFIX_NAMESPACE_MUST_EXIST.to_string()),
            false => non_empty(header.prefix),
        },
        command,
        credential: None,
    }
}

/// The read request of a header and a query.
pub(crate) fn read_request_of(header: Option<pb::ReadHeader>, query: Query) -> ReadRequest {
    let header = header.unwrap_or_default();
    let consistency = match pb::Consistency::try_from(header.consistency) {
        Ok(pb::Consistency::Serializable) => Consistency::Serializable,
        _ => Consistency::Linearizable,
    };
    ReadRequest {
        namespace: namespace_of(&header.namespace),
        consistency,
        namespace_must_exist: header.namespace_must_exist,
        query,
        credential: None,
    }
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

pub(crate) fn parse_priority(priority: Option<u32>) -> Result<Option<u8>, Refusal> {
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

pub(crate) fn optional_id(text: &str) -> Option<BeadId> {
    (!text.is_empty()).then(|| BeadId(text.to_string()))
}

/// Proto3 strings cannot be absent: an empty one means "unset".
pub(crate) fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

pub(crate) fn ids_of(ids: Vec<String>) -> Vec<BeadId> {
    ids.into_iter().map(BeadId).collect()
}

pub(crate) fn ids_to_proto(ids: Vec<BeadId>) -> Vec<String> {
    ids.into_iter().map(|id| id.0).collect()
}

pub(crate) fn formula_of(formula: Option<pb::FormulaRef>) -> Option<FormulaSource> {
    match formula?.source? {
        pb::formula_ref::Source::Name(name) => Some(FormulaSource::Named(name)),
        pb::formula_ref::Source::Toml(toml) => Some(FormulaSource::Inline(toml)),
    }
}

pub(crate) fn formula_to_proto(formula: FormulaSource) -> pb::FormulaRef {
    let source = match formula {
        FormulaSource::Named(name) => pb::formula_ref::Source::Name(name),
        FormulaSource::Inline(toml) => pb::formula_ref::Source::Toml(toml),
    };
    pb::FormulaRef { source: Some(source) }
}

pub(crate) fn metadata_changes(
    changes: std::collections::HashMap<String, pb::MetadataChange>,
) -> BTreeMap<String, Option<String>> {
    changes.into_iter().map(|(key, change)| (key, (!change.remove).then_some(change.value))).collect()
}

/// Metadata changes as protobuf carries them: a value, or a removal.
pub(crate) fn metadata_to_proto(
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

pub(crate) fn ready_filter(filter: Option<pb::ReadyFilter>) -> Result<ReadyFilter, Refusal> {
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

pub(crate) fn ready_filter_to_proto(filter: &ReadyFilter) -> pb::ReadyFilter {
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

/// What a unary client RPC asks of the leader plane.
#[derive(Clone, Debug)]
pub enum Call {
    /// A command, applied through the log.
    Write(WriteRequest),
    /// A query, answered with the request's consistency.
    Read(ReadRequest),
}

/// A protobuf request of any unary client RPC, which becomes a [`Call`]; `now` is the node's
/// clock. Every request of the RPC table (`crate::registry`) has one, so the node serves each RPC
/// through one generic handler.
pub trait IntoCall {
    /// Converts, refusing malformed fields.
    fn into_call(self, now: Timestamp) -> Result<Call, Refusal>;
}

/// Implements [`IntoWrite`] and [`IntoCall`] for a write request, from the command it carries.
macro_rules! write_request {
    ($request:ty, |$value:ident| $command:expr) => {
        impl $crate::convert::IntoWrite for $request {
            fn into_write(self) -> Result<$crate::convert::WriteRequest, $crate::outcome::Refusal> {
                let header = self.header.clone();
                let $value = self;
                let command: Result<$crate::command::Command, $crate::outcome::Refusal> = $command;
                Ok($crate::convert::write_request_of(header, command?))
            }
        }

        impl $crate::convert::IntoCall for $request {
            fn into_call(
                self,
                _now: $crate::model::Timestamp,
            ) -> Result<$crate::convert::Call, $crate::outcome::Refusal> {
                $crate::convert::IntoWrite::into_write(self).map($crate::convert::Call::Write)
            }
        }
    };
}
pub(crate) use write_request;

/// Implements [`IntoRead`] and [`IntoCall`] for a read request, from the query it carries.
macro_rules! read_request {
    ($request:ty, |$value:ident, $now:ident| $query:expr) => {
        impl $crate::convert::IntoRead for $request {
            fn into_read(
                self,
                $now: $crate::model::Timestamp,
            ) -> Result<$crate::convert::ReadRequest, $crate::outcome::Refusal> {
                let header = self.header.clone();
                let $value = self;
                let query: Result<$crate::command::Query, $crate::outcome::Refusal> = $query;
                Ok($crate::convert::read_request_of(header, query?))
            }
        }

        impl $crate::convert::IntoCall for $request {
            fn into_call(
                self,
                now: $crate::model::Timestamp,
            ) -> Result<$crate::convert::Call, $crate::outcome::Refusal> {
                $crate::convert::IntoRead::into_read(self, now).map($crate::convert::Call::Read)
            }
        }
    };
}
pub(crate) use read_request;

/// The protobuf request of a write (`crate::commands`), written in its file; `None` for a write
/// no client sends.
pub trait ToWriteRequest {
    /// The request, with `header`.
    fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc>;
}

/// The protobuf request of a registered query (`crate::commands`), written in its file.
pub trait ToReadRequest {
    /// The request, with `header`.
    fn to_request(&self, header: pb::ReadHeader) -> ClientRpc;
}

read_request!(pb::NamespaceListRequest, |_request, _now| Ok(Query::Namespaces));

/// Builds the protobuf request of a command, for clients; `None` for a controller action, which
/// only a leader proposes and no client can send.
pub fn write_to_proto(header: pb::WriteHeader, command: &Command) -> Option<ClientRpc> {
    command.to_request(header)
}

/// Builds the protobuf request of a query, for clients.
pub fn read_to_proto(header: pb::ReadHeader, query: &Query) -> ClientRpc {
    let (registered_header, header) = (header.clone(), Some(header));
    match query.clone() {
        Query::Registered(query) => query.to_request(registered_header),
        Query::Namespaces => ClientRpc::NamespaceList(pb::NamespaceListRequest { header }),
        Query::Tokens => ClientRpc::TokenList(pb::TokenListRequest { header }),
        Query::WhoAmI => ClientRpc::WhoAmI(pb::WhoAmIRequest { header }),
    }
}

impl From<&Bead> for pb::Bead {
    fn from(bead: &Bead) -> pb::Bead {
        pb::Bead {
            id: bead.id.0.clone(),
            title: bead.title.clone(),
            description: bead.description.clone(),
            notes: bead.notes.clone(),
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
            no_history: bead.no_history,
            created_at_ms: bead.created_at.0,
            updated_at_ms: bead.updated_at.0,
            started_at_ms: bead.started_at.map(|time| time.0),
            closed_at_ms: bead.closed_at.map(|time| time.0),
            close_reason: bead.close_reason.clone(),
            defer_until_ms: bead.defer_until.map(|time| time.0),
            dependencies: bead.dependencies().iter().map(pb::Dependency::from).collect(),
            revision: bead.revision,
            seq: bead.seq,
            lease: bead.lease.as_ref().map(|lease| pb::Lease {
                id: lease.id,
                holder: lease.holder.clone(),
                ttl_ms: lease.ttl_ms,
                renewed_at: lease.renewed_at,
                expires_at_ms: lease.expires_at.0,
            }),
            delivery_count: bead.delivery_count,
            dependent_count: bead.counts.dependents,
            comment_count: bead.counts.comments,
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

impl From<&Event> for pb::Event {
    fn from(event: &Event) -> pb::Event {
        pb::Event {
            seq: event.seq,
            r#type: event.event_type.clone(),
            ts_ms: event.timestamp.0,
            actor: event.actor.clone(),
            subject: event.subject.clone(),
            message: event.message.clone(),
        }
    }
}

/// Converts an event received from a server back into the model.
pub fn event_from_proto(event: pb::Event) -> Event {
    Event {
        seq: event.seq,
        event_type: event.r#type,
        timestamp: Timestamp(event.ts_ms),
        actor: event.actor,
        subject: event.subject,
        message: event.message,
    }
}

impl From<&OrderInfo> for pb::OrderInfo {
    fn from(info: &OrderInfo) -> pb::OrderInfo {
        pb::OrderInfo {
            name: info.name.clone(),
            description: info.description.clone(),
            formula: info.formula.clone(),
            trigger: info.trigger.clone(),
            target: info.target.clone(),
            enabled: info.enabled,
            fired: info.fired,
            last_fired_at_ms: info.last_fired_at.map(|time| time.0),
            last_window: info.last_window,
            last_run: info.last_run.clone(),
            next_due_ms: info.next_due_ms,
            error: info.error.clone(),
            source: info.source.clone(),
        }
    }
}

impl From<pb::OrderInfo> for OrderInfo {
    fn from(info: pb::OrderInfo) -> OrderInfo {
        OrderInfo {
            name: info.name,
            description: info.description,
            formula: info.formula,
            trigger: info.trigger,
            target: info.target,
            enabled: info.enabled,
            fired: info.fired,
            last_fired_at: info.last_fired_at_ms.map(Timestamp),
            last_window: info.last_window,
            last_run: info.last_run,
            next_due_ms: info.next_due_ms,
            error: info.error,
            source: info.source,
        }
    }
}

impl From<&FormulaInfo> for pb::FormulaInfo {
    fn from(info: &FormulaInfo) -> pb::FormulaInfo {
        pb::FormulaInfo {
            name: info.name.clone(),
            description: info.description.clone(),
            steps: info.steps,
            source: info.source.clone(),
        }
    }
}

impl From<pb::FormulaInfo> for FormulaInfo {
    fn from(info: pb::FormulaInfo) -> FormulaInfo {
        FormulaInfo { name: info.name, description: info.description, steps: info.steps, source: info.source }
    }
}

impl From<&NamespaceInfo> for pb::NamespaceInfo {
    fn from(info: &NamespaceInfo) -> pb::NamespaceInfo {
        pb::NamespaceInfo {
            name: info.name.clone(),
            prefix: info.prefix.clone(),
            beads: info.beads,
            last_event_seq: info.last_event_seq,
            default_lease_ms: info.default_lease_ms,
            max_deliveries: info.max_deliveries,
        }
    }
}

impl From<pb::NamespaceInfo> for NamespaceInfo {
    fn from(info: pb::NamespaceInfo) -> NamespaceInfo {
        NamespaceInfo {
            name: info.name,
            prefix: info.prefix,
            beads: info.beads,
            last_event_seq: info.last_event_seq,
            default_lease_ms: info.default_lease_ms,
            max_deliveries: info.max_deliveries,
        }
    }
}

/// Converts a bead received from a server back into the model.
pub fn bead_from_proto(bead: pb::Bead) -> Result<Bead, Refusal> {
    // A server older than `seq` on the wire sends 0: the id's number is the sequence then.
    let seq =
        if bead.seq != 0 { bead.seq } else { bead.id.rsplit_once('-').and_then(|(_, n)| n.parse().ok()).unwrap_or(0) };
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
        notes: bead.notes,
        bead_type: bead.r#type,
        assignee: bead.assignee,
        from: bead.from,
        reference: bead.r#ref,
        labels: bead.labels.into_iter().collect(),
        metadata: bead.metadata.into_iter().collect(),
        ephemeral: bead.ephemeral,
        no_history: bead.no_history,
        created_at: Timestamp(bead.created_at_ms),
        updated_at: Timestamp(bead.updated_at_ms),
        revision: bead.revision,
        started_at: bead.started_at_ms.map(Timestamp),
        closed_at: bead.closed_at_ms.map(Timestamp),
        close_reason: bead.close_reason,
        defer_until: bead.defer_until_ms.map(Timestamp),
        lease: bead.lease.map(|lease| Lease {
            id: lease.id,
            holder: lease.holder,
            ttl_ms: lease.ttl_ms,
            renewed_at: lease.renewed_at,
            expires_at: Timestamp(lease.expires_at_ms),
        }),
        delivery_count: bead.delivery_count,
        counts: BeadCounts { dependents: bead.dependent_count, comments: bead.comment_count },
    })
}

/// A protobuf response built from a state-machine answer.
pub trait FromAnswer: Sized {
    /// Converts; a refusal becomes a gRPC status.
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus>;
}

pub(crate) fn unexpected(outcome: &Outcome) -> GrpcStatus {
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

/// The beads one outcome holds (none for an outcome without beads).
fn beads_response(outcome: &Outcome) -> pb::BeadsResponse {
    let beads = match outcome {
        Outcome::Bead(bead) => vec![pb::Bead::from(bead.as_ref())],
        Outcome::Beads(beads) => beads.iter().map(pb::Bead::from).collect(),
        _ => Vec::new(),
    };
    pb::BeadsResponse { beads }
}

impl FromAnswer for pb::TxnResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Txn(outcomes) => Ok(pb::TxnResponse { results: outcomes.iter().map(beads_response).collect() }),
            other => Err(unexpected(&other)),
        }
    }
}

impl IntoAnswer for pb::TxnResponse {
    fn into_answer(self) -> Answer {
        let outcomes = self.results.into_iter().map(outcome_from_beads).collect::<Result<_, _>>()?;
        Ok(Outcome::Txn(outcomes))
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

impl FromAnswer for pb::ProgressResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Progress(progress) => Ok(pb::ProgressResponse {
                root: Some(pb::Bead::from(&progress.root)),
                children: progress.children.iter().map(pb::Bead::from).collect(),
                current: progress.current.as_ref().map(|id| id.0.clone()).unwrap_or_default(),
            }),
            other => Err(unexpected(&other)),
        }
    }
}

impl FromAnswer for pb::PurgeResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Purged { purged_count } => Ok(pb::PurgeResponse { purged_count }),
            other => Err(unexpected(&other)),
        }
    }
}

impl FromAnswer for pb::FormulasResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Formulas(infos) => {
                Ok(pb::FormulasResponse { formulas: infos.iter().map(pb::FormulaInfo::from).collect() })
            }
            other => Err(unexpected(&other)),
        }
    }
}

impl FromAnswer for pb::OrdersResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Orders(infos) => {
                Ok(pb::OrdersResponse { orders: infos.iter().map(pb::OrderInfo::from).collect() })
            }
            other => Err(unexpected(&other)),
        }
    }
}

impl FromAnswer for pb::NamespacesResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Namespaces(infos) => {
                Ok(pb::NamespacesResponse { namespaces: infos.iter().map(pb::NamespaceInfo::from).collect() })
            }
            other => Err(unexpected(&other)),
        }
    }
}

impl FromAnswer for pb::EventsResponse {
    fn from_answer(answer: Answer) -> Result<Self, GrpcStatus> {
        match answer.map_err(refusal_to_status)? {
            Outcome::Events { events, last_seq } => {
                Ok(pb::EventsResponse { events: events.iter().map(pb::Event::from).collect(), last_seq })
            }
            other => Err(unexpected(&other)),
        }
    }
}

/// The gRPC code of a refusal, by kind (a refused write of a transaction: that write's code).
fn refusal_code(refusal: &Refusal) -> Code {
    match refusal {
        Refusal::NotFound(_) | Refusal::NamespaceNotFound { .. } => Code::NotFound,
        Refusal::AlreadyClaimed { .. }
        | Refusal::NotClaimable { .. }
        | Refusal::InvalidTransition { .. }
        | Refusal::RevisionMismatch { .. }
        | Refusal::LeaseLost { .. }
        | Refusal::NotLeaseHolder { .. }
        | Refusal::NotHolder { .. }
        | Refusal::StaleControllerTerm { .. } => Code::FailedPrecondition,
        Refusal::Invalid(_) | Refusal::TooLarge { .. } | Refusal::UnfilteredList | Refusal::TooManyResults { .. } => {
            Code::InvalidArgument
        }
        Refusal::SessionExpired { .. } | Refusal::RequestTooOld { .. } => Code::Aborted,
        Refusal::Compacted { .. } => Code::OutOfRange,
        Refusal::Unauthenticated(_) => Code::Unauthenticated,
        Refusal::PermissionDenied(_) => Code::PermissionDenied,
        Refusal::TxnWriteRefused { refusal, .. } => refusal_code(refusal),
    }
}

/// The `domain` of the `google.rpc.ErrorInfo` a refusal's status carries.
pub const ERROR_DOMAIN: &str = "strand.v1";
/// The `ErrorInfo` metadata key that holds the whole refusal as JSON, which the client reads back.
pub const REFUSAL_METADATA_KEY: &str = "refusal_json";

/// `AlreadyClaimed` as an `ErrorInfo` reason: `ALREADY_CLAIMED`.
fn reason_of(variant: &str) -> String {
    let mut reason = String::with_capacity(variant.len() + 4);
    for (index, character) in variant.chars().enumerate() {
        if character.is_ascii_uppercase() && index > 0 {
            reason.push('_');
        }
        reason.push(character.to_ascii_uppercase());
    }
    reason
}

/// The gRPC status of a refusal: a code by kind, the one-line message, and the standard rich
/// error model in its details (`google.rpc.Status` with one `google.rpc.ErrorInfo`: the reason is
/// the refusal's kind, `ALREADY_CLAIMED`; the domain `strand.v1`; the metadata its fields, each as
/// text, and the whole refusal as JSON under [`REFUSAL_METADATA_KEY`]), which grpcurl and every
/// gRPC library decode.
pub fn refusal_to_status(refusal: Refusal) -> GrpcStatus {
    use tonic_types::{ErrorDetails, StatusExt};
    let json = serde_json::to_value(&refusal).unwrap_or_default();
    let text = |value: &serde_json::Value| match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut metadata = std::collections::HashMap::new();
    let reason = match &json {
        serde_json::Value::String(variant) => reason_of(variant),
        serde_json::Value::Object(map) if map.len() == 1 => {
            let (variant, fields) = map.iter().next().expect("one entry");
            match fields {
                serde_json::Value::Object(fields) => {
                    metadata.extend(fields.iter().map(|(key, value)| (key.clone(), text(value))));
                }
                other => {
                    metadata.insert("detail".to_string(), text(other));
                }
            }
            reason_of(variant)
        }
        _ => "REFUSED".to_string(),
    };
    metadata.insert(REFUSAL_METADATA_KEY.to_string(), json.to_string());
    let details = ErrorDetails::with_error_info(reason, ERROR_DOMAIN, metadata);
    GrpcStatus::with_error_details(refusal_code(&refusal), refusal.to_string(), details)
}

/// The refusal a status carries, if it carries one (statuses from transport failures do not): from
/// its `ErrorInfo`, or from the JSON details a node of an older build sends.
pub fn refusal_from_status(status: &GrpcStatus) -> Option<Refusal> {
    use tonic_types::StatusExt;
    if let Some(info) = status.get_details_error_info()
        && info.domain == ERROR_DOMAIN
    {
        return serde_json::from_str(info.metadata.get(REFUSAL_METADATA_KEY)?).ok();
    }
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

/// A protobuf response turned back into the state machine's answer, for clients.
pub trait IntoAnswer {
    /// Converts, refusing a malformed response.
    fn into_answer(self) -> Answer;
}

impl IntoAnswer for pb::BeadResponse {
    fn into_answer(self) -> Answer {
        outcome_from_bead(self)
    }
}

impl IntoAnswer for pb::BeadsResponse {
    fn into_answer(self) -> Answer {
        outcome_from_beads(self)
    }
}

impl IntoAnswer for pb::Empty {
    fn into_answer(self) -> Answer {
        Ok(Outcome::Done)
    }
}

impl IntoAnswer for pb::DependenciesResponse {
    fn into_answer(self) -> Answer {
        Ok(Outcome::Dependencies(self.dependencies.into_iter().map(Into::into).collect()))
    }
}

impl IntoAnswer for pb::ProgressResponse {
    fn into_answer(self) -> Answer {
        let root = self.root.ok_or_else(|| invalid("the server sent a progress with no root".into()))?;
        Ok(Outcome::Progress(Box::new(Progress {
            root: bead_from_proto(root)?,
            children: self.children.into_iter().map(bead_from_proto).collect::<Result<_, _>>()?,
            current: optional_id(&self.current),
        })))
    }
}

impl IntoAnswer for pb::PurgeResponse {
    fn into_answer(self) -> Answer {
        Ok(Outcome::Purged { purged_count: self.purged_count })
    }
}

impl IntoAnswer for pb::FormulasResponse {
    fn into_answer(self) -> Answer {
        Ok(Outcome::Formulas(self.formulas.into_iter().map(Into::into).collect()))
    }
}

impl IntoAnswer for pb::OrdersResponse {
    fn into_answer(self) -> Answer {
        Ok(Outcome::Orders(self.orders.into_iter().map(Into::into).collect()))
    }
}

impl IntoAnswer for pb::NamespacesResponse {
    fn into_answer(self) -> Answer {
        Ok(Outcome::Namespaces(self.namespaces.into_iter().map(Into::into).collect()))
    }
}

impl IntoAnswer for pb::EventsResponse {
    fn into_answer(self) -> Answer {
        Ok(Outcome::Events { events: self.events.into_iter().map(event_from_proto).collect(), last_seq: self.last_seq })
    }
}

// After the macros, which it uses.
pub(crate) mod auth;
