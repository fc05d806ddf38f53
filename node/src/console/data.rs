//! The console's JSON reads under `/ui/api/`: each is one or more reads through the leader plane,
//! judged by the request's bearer token as the gRPC API judges it ([`Reads`]). The first read of a
//! request is linearizable (a read index), so a page never shows a stale figure as current; the
//! rest read this node's replica, which has applied at least that index by then.
//!
//! Invariant: a read that fails answers an error status with `{"error": ...}`, never partial
//! figures; a refusal keeps its meaning (401 no or unknown token, 403 a token not allowed here,
//! 404 an unknown namespace or bead, 503 no leader).

use std::sync::atomic::{AtomicBool, Ordering};

use api::command::Query;
use api::commands::RegisteredAnswer;
use api::commands::dep_list::DepList;
use api::commands::events::Events;
use api::commands::get::{Get, Lookup};
use api::commands::list_by_label::ListByLabel;
use api::commands::namespace_queues::{NamespaceQueues, QueueDetail};
use api::commands::namespace_show::{NamespaceDetail, NamespaceShow};
use api::commands::order_list::OrderList;
use api::commands::ready::Ready;
use api::convert::{Consistency, ReadRequest, refusal_to_status};
use api::input::{DepDirection, ReadyFilter};
use api::model::{Bead, BeadId, Dependency, Event, Namespace, Timestamp};
use api::outcome::{OrderInfo, Outcome};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use raft_store::Disk;
use tonic::Code;

use super::{Console, error, json};

/// Most namespaces the home page reads.
pub const NAMESPACES_SHOWN_MAX: usize = 50;
/// How many of a namespace's latest events a bead page looks through for the bead's own.
pub const BEAD_EVENTS_SCAN_MAX: u32 = 10_000;
/// Most events an events page loads at first (the live feed adds the rest).
pub const EVENTS_PAGE_MAX: u64 = 200;
/// Most ready beads a namespace page lists (in ready order).
pub const READY_SHOWN_MAX: u32 = 20;
/// Most firings of an order its history shows.
pub const ORDER_HISTORY_MAX: usize = 10;

/// The HTTP status of a gRPC status code.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The request's token, as the gRPC API reads it from `authorization`.
pub fn credential(headers: &HeaderMap) -> Result<Option<api::auth::TokenHash>, Failed> {
    match headers.get(header::AUTHORIZATION) {
        None => Ok(None),
        Some(value) => api::auth::parse_bearer(value.as_bytes()).map(Some).map_err(refused),
    }
}

/// The reads of one console request, as its token: the first linearizable, the later ones from
/// this node's replica, which by then has applied at least the first one's read index, so they see
/// that state or a newer one without another round to a quorum.
pub struct Reads<'a, D: Disk> {
    console: &'a Console<D>,
    headers: &'a HeaderMap,
    /// Whether a read of this request went through a read index.
    linearized: AtomicBool,
}

impl<'a, D: Disk> Reads<'a, D> {
    /// The reads of a request with these headers.
    pub fn new(console: &'a Console<D>, headers: &'a HeaderMap) -> Reads<'a, D> {
        Reads { console, headers, linearized: AtomicBool::new(false) }
    }

    /// This node's clock: the time a read that depends on it (ready, due orders) is judged at,
    /// as the gRPC API stamps it.
    fn now(&self) -> Timestamp {
        self.console.leader.core().clock.now()
    }

    /// Reads `query` of `namespace` (which must exist, unless it is the namespaces' listing)
    /// through the leader plane, as the request's token.
    async fn read(&self, namespace: &str, query: Query) -> Result<Outcome, Failed> {
        let must_exist = !matches!(query, Query::Namespaces);
        let consistency =
            if self.linearized.load(Ordering::Relaxed) { Consistency::Serializable } else { Consistency::Linearizable };
        let request = ReadRequest {
            namespace: if namespace.is_empty() { Namespace::default_namespace() } else { Namespace(namespace.into()) },
            consistency,
            namespace_must_exist: must_exist,
            query,
            credential: credential(self.headers)?,
        };
        let outcome = match self.console.leader.read(request).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(refusal)) => return Err(refused(refusal)),
            Err(unavailable) => return Err(Failed(StatusCode::SERVICE_UNAVAILABLE, unavailable.0)),
        };
        self.linearized.store(true, Ordering::Relaxed);
        Ok(outcome)
    }

    async fn detail(&self, namespace: &str) -> Result<NamespaceDetail, Failed> {
        match self.read(namespace, NamespaceShow { now: self.now() }.into()).await? {
            Outcome::Registered(RegisteredAnswer::NamespaceDetail(detail)) => Ok(detail),
            other => Err(unexpected(&other)),
        }
    }

    async fn queues(&self, namespace: &str) -> Result<QueueDetail, Failed> {
        let read = NamespaceQueues { now: self.now(), window_ms: QueueDetail::WINDOW_MS_DEFAULT };
        match self.read(namespace, read.into()).await? {
            Outcome::Registered(RegisteredAnswer::QueueDetail(queues)) => Ok(queues),
            other => Err(unexpected(&other)),
        }
    }

    async fn order_list(&self, namespace: &str) -> Result<Vec<OrderInfo>, Failed> {
        match self.read(namespace, OrderList { now: self.now() }.into()).await? {
            Outcome::Orders(orders) => Ok(orders),
            other => Err(unexpected(&other)),
        }
    }

    async fn beads(&self, namespace: &str, query: Query) -> Result<Vec<Bead>, Failed> {
        match self.read(namespace, query).await? {
            Outcome::Beads(beads) => Ok(beads),
            other => Err(unexpected(&other)),
        }
    }

    async fn events_after(
        &self,
        namespace: &str,
        after: u64,
        types: Vec<String>,
        limit: u32,
    ) -> Result<(Vec<Event>, u64), Failed> {
        match self.read(namespace, Events { after, types, limit }.into()).await? {
            Outcome::Events { events, last_seq } => Ok((events, last_seq)),
            other => Err(unexpected(&other)),
        }
    }

    /// The sequence number of the namespace's newest event: an events read past the end, which
    /// answers no event.
    async fn last_event_seq(&self, namespace: &str) -> Result<u64, Failed> {
        Ok(self.events_after(namespace, u64::MAX, Vec::new(), 1).await?.1)
    }
}

/// Why a read failed: the HTTP status and what to tell the reader.
pub struct Failed(pub StatusCode, pub String);

/// A refusal, with the HTTP status of its gRPC status.
fn refused(refusal: api::outcome::Refusal) -> Failed {
    let status = refusal_to_status(refusal);
    Failed(http_status(status.code()), status.message().to_string())
}

fn unexpected(outcome: &Outcome) -> Failed {
    Failed(StatusCode::INTERNAL_SERVER_ERROR, format!("the node answered a console read with {outcome:?}"))
}

/// Answers with the figures, or with the read's error.
fn answered(result: Result<serde_json::Value, Failed>) -> Response {
    result.map_or_else(|Failed(status, message)| error(status, message), json)
}

/// A namespace's counts in their order (statuses, then `ready`, `leased`, `formulas`, `orders`),
/// as `{name, count}` objects.
fn counts_json(detail: &NamespaceDetail) -> serde_json::Value {
    detail.counts.iter().map(|(name, count)| serde_json::json!({ "name": name, "count": count })).collect()
}

/// `/ui/api/cluster`: the node's `Cluster.Status`, with what needs attention.
pub async fn cluster<D: Disk>(console: &Console<D>, headers: &HeaderMap) -> Response {
    use api::proto::cluster_server::Cluster;
    let request = super::grpc_request(headers, api::proto::StatusRequest { include_digest: false });
    let status = match console.cluster.status(request).await {
        Ok(answer) => answer.into_inner(),
        Err(status) => return error(http_status(status.code()), status.message().to_string()),
    };
    let now = console.leader.core().clock.now().0;
    let nodes: Vec<serde_json::Value> = status
        .nodes
        .iter()
        .map(|node| {
            let duties: Vec<serde_json::Value> = node
                .duties
                .iter()
                .map(|duty| {
                    serde_json::json!({
                        "name": duty.name, "interval_ms": duty.interval_ms,
                        "ago_ms": duty.last_run_ms.map(|ran| (now - ran).max(0)),
                    })
                })
                .collect();
            serde_json::json!({
                "id": node.id, "client_address": node.client_address, "peer_address": node.address,
                "state": node.state, "term": node.term, "last_log_index": node.last_log_index,
                "applied_index": node.applied_index, "lag": node.lag, "lease_count": node.lease_count,
                // Every service of a running node reports SERVING to gRPC health checks: a member
                // that answered its status serves; one that did not is unknown.
                "health": if node.state == "unreachable" { "UNKNOWN" } else { "SERVING" },
                "apply_version": node.apply_version, "build": node.build, "stopping": node.stopping,
                "error": node.error, "fatal_error": node.fatal_error, "divergence": node.divergence, "note": node.note,
                "duties": duties,
            })
        })
        .collect();
    json(serde_json::json!({
        "node_id": console.leader.core().id,
        "leader_id": status.leader_id, "term": status.term, "voters": status.voters,
        "apply_version": api::status::apply_version(&status).map(|(version, _)| version),
        "controller": api::status::controller(&status), "attention": api::status::attention(&status),
        "nodes": nodes,
    }))
}

/// `/ui/api/namespaces`: every namespace the token may read (at most [`NAMESPACES_SHOWN_MAX`]),
/// with its bead count, its queues' headline figures and what in them needs attention.
pub async fn namespaces<D: Disk>(reads: Reads<'_, D>) -> Response {
    answered(
        async {
            let listed = match reads.read("", Query::Namespaces).await? {
                Outcome::Namespaces(namespaces) => namespaces,
                other => return Err(unexpected(&other)),
            };
            let total = listed.len();
            let (mut shown, mut attention) = (Vec::new(), Vec::new());
            for info in listed.into_iter().take(NAMESPACES_SHOWN_MAX) {
                let queues = reads.queues(&info.name).await?;
                let orders = reads.order_list(&info.name).await?;
                let found = api::status::queue_attention(&info.name, &queues, &orders);
                shown.push(serde_json::json!({
                    "name": info.name, "beads": info.beads,
                    "ready": queues.ready, "leased": queues.leased, "expiring": queues.expiring,
                    "dead_lettered": queues.dead_lettered,
                    "oldest_ready_age_ms": queues.oldest_ready.as_ref().map(|(_, created)| (queues.now.0 - created.0).max(0)),
                    "attention": found,
                }));
                attention.extend(found);
            }
            Ok(serde_json::json!({ "namespaces": shown, "total": total, "attention": attention }))
        }
        .await,
    )
}

/// `/ui/api/ns/NS`: a namespace's settings, counts and queues.
pub async fn namespace<D: Disk>(reads: Reads<'_, D>, namespace: &str) -> Response {
    answered(
        async {
            let detail = reads.detail(namespace).await?;
            let queues = reads.queues(namespace).await?;
            let orders = reads.order_list(namespace).await?;
            let filter = ReadyFilter { limit: READY_SHOWN_MAX, ..Default::default() };
            let next = reads.beads(namespace, Ready { filter, now: reads.now() }.into()).await?;
            let next: Vec<serde_json::Value> = next
                .iter()
                .map(|bead| {
                    serde_json::json!({
                        "id": bead.id.0, "title": bead.title, "priority": bead.priority, "assignee": bead.assignee,
                        "pool": api::model::routed_pool(bead), "age_ms": (queues.now.0 - bead.created_at.0).max(0),
                    })
                })
                .collect();
            Ok(serde_json::json!({
                "namespace": detail.info, "counts": counts_json(&detail), "queues": queues.to_json(), "next": next,
                "attention": api::status::queue_attention(namespace, &queues, &orders),
            }))
        }
        .await,
    )
}

/// A dependency edge's other end, with its title and status when it exists.
fn edge_json(id: &BeadId, dep_type: &str, beads: &[Bead]) -> serde_json::Value {
    let bead = beads.iter().find(|bead| &bead.id == id);
    serde_json::json!({
        "id": id.0, "type": dep_type,
        "title": bead.map(|bead| bead.title.as_str()), "status": bead.map(|bead| bead.status.as_str()),
    })
}

/// `/ui/api/ns/NS/beads/ID`: the bead, its dependencies and dependents (with their titles), and
/// its events among the namespace's latest [`BEAD_EVENTS_SCAN_MAX`].
pub async fn bead<D: Disk>(reads: Reads<'_, D>, namespace: &str, id: &str) -> Response {
    answered(
        async {
            let id = BeadId(id.to_string());
            let bead = reads.beads(namespace, Get { ids: vec![id.clone()] }.into()).await?;
            let bead = bead.into_iter().next().ok_or_else(|| {
                Failed(StatusCode::NOT_FOUND, format!("bead {id} not found in namespace {namespace}"))
            })?;
            let mut edges: Vec<(Dependency, bool)> = Vec::new();
            for (direction, outgoing) in [(DepDirection::Down, true), (DepDirection::Up, false)] {
                match reads.read(namespace, DepList { id: id.clone(), direction }.into()).await? {
                    Outcome::Dependencies(found) => edges.extend(found.into_iter().map(|edge| (edge, outgoing))),
                    other => return Err(unexpected(&other)),
                }
            }
            let other_end = |(edge, outgoing): &(Dependency, bool)| {
                if *outgoing { edge.depends_on_id.clone() } else { edge.issue_id.clone() }
            };
            let mut ids: Vec<BeadId> = edges.iter().map(other_end).collect();
            ids.extend(bead.parent_id.clone());
            ids.truncate(api::limits::IDS_PER_REQUEST_MAX);
            let ends = reads.beads(namespace, Lookup { ids }.into()).await?;
            let (mut dependencies, mut dependents) = (Vec::new(), Vec::new());
            for edge in &edges {
                let end = edge_json(&other_end(edge), edge.0.dep_type.0.as_str(), &ends);
                if edge.1 { dependencies.push(end) } else { dependents.push(end) }
            }
            let last_seq = reads.last_event_seq(namespace).await?;
            let after = last_seq.saturating_sub(u64::from(BEAD_EVENTS_SCAN_MAX));
            let (events, _) = reads.events_after(namespace, after, Vec::new(), BEAD_EVENTS_SCAN_MAX).await?;
            let events: Vec<&Event> = events.iter().filter(|event| event.subject == id.0).collect();
            let parent = bead.parent_id.as_ref().map(|parent| edge_json(parent, "parent", &ends));
            let mut shown = serde_json::to_value(&bead).unwrap_or_default();
            shown["status"] = bead.status.as_str().into();
            Ok(serde_json::json!({
                "bead": shown, "parent": parent, "dependencies": dependencies, "dependents": dependents,
                "events": events, "events_scanned": last_seq - after, "last_seq": last_seq,
            }))
        }
        .await,
    )
}

/// `/ui/api/ns/NS/orders`: each order, with its latest firings (tracking beads), newest first.
pub async fn orders<D: Disk>(reads: Reads<'_, D>, namespace: &str) -> Response {
    answered(
        async {
            let orders = reads.order_list(namespace).await?;
            let mut shown = Vec::new();
            for order in &orders {
                let label = format!("{}{}", api::state::ORDER_RUN_LABEL_PREFIX, order.name);
                let mut runs = reads.beads(namespace, ListByLabel { label, limit: 0 }.into()).await?;
                runs.sort_by_key(|run| std::cmp::Reverse((run.created_at, run.seq)));
                let history: Vec<serde_json::Value> = runs
                    .iter()
                    .take(ORDER_HISTORY_MAX)
                    .map(|run| {
                        serde_json::json!({
                            "id": run.id.0, "status": run.status.as_str(), "created_at_ms": run.created_at.0,
                            "closed_at_ms": run.closed_at.map(|at| at.0),
                        })
                    })
                    .collect();
                let mut value = serde_json::to_value(order).unwrap_or_default();
                value["history"] = history.into();
                shown.push(value);
            }
            let last_seq = reads.last_event_seq(namespace).await?;
            Ok(serde_json::json!({ "orders": shown, "last_seq": last_seq }))
        }
        .await,
    )
}

/// `/ui/api/ns/NS/events?after=N&type=T`: events after N (default: the latest
/// [`EVENTS_PAGE_MAX`]), of type T when given.
pub async fn events<D: Disk>(
    reads: Reads<'_, D>,
    namespace: &str,
    after: Option<String>,
    event_type: Option<String>,
) -> Response {
    answered(
        async {
            let after = match after.as_deref() {
                None | Some("") => reads.last_event_seq(namespace).await?.saturating_sub(EVENTS_PAGE_MAX),
                Some(text) => text.parse().map_err(|_| {
                    Failed(
                        StatusCode::BAD_REQUEST,
                        format!("after={text:?} is not a sequence number; give after=0 or more"),
                    )
                })?,
            };
            let types = event_type.into_iter().filter(|name| !name.is_empty()).collect();
            let types = api::commands::events::known_types(types).map_err(refused)?;
            let (events, last_seq) = reads.events_after(namespace, after, types, EVENTS_PAGE_MAX as u32).await?;
            Ok(serde_json::json!({ "events": events, "last_seq": last_seq, "types": api::model::event_type::ALL }))
        }
        .await,
    )
}
