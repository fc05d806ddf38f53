//! The node's Prometheus metrics, served as OpenMetrics text at `GET /metrics` on the node's
//! gRPC address (HTTP/1.1 and HTTP/2 both answer there).
//!
//! Counters and the latency histogram are updated on the request paths, the connection gauges and
//! counters by the connection limiter ([`crate::connections`]); Raft's state (term,
//! role, log and applied indexes) and the store's size are read when the page is scraped, so a
//! scrape always shows the node as it is then.
//!
//! Invariant: every metric name starts with `strand_`, and a metric's labels take only a few
//! fixed values (the outcome of a request, a listener), or a member id, which the membership
//! bounds; never a bead id, a namespace or an actor, so the page stays small.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::config::Listener;

/// Reads one gauge's value off a [`RaftView`].
type ReadGauge = fn(&RaftView) -> i64;

/// A metric's labels: names and values, all fixed strings.
type Labels = Vec<(&'static str, &'static str)>;

/// What a request ended with, as the `outcome` label says it. A variant's discriminant is its
/// index in [`RequestOutcome::ALL`] and its column in [`Metrics::requests`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestOutcome {
    /// Answered with a result.
    Ok,
    /// Refused by the state machine (not found, lost claim, invalid transition, bad input).
    Refused,
    /// Failed: no leader, no quorum, or an internal error.
    Failed,
}

impl RequestOutcome {
    const ALL: [RequestOutcome; 3] = [RequestOutcome::Ok, RequestOutcome::Refused, RequestOutcome::Failed];

    fn label(self) -> &'static str {
        match self {
            RequestOutcome::Ok => "ok",
            RequestOutcome::Refused => "refused",
            RequestOutcome::Failed => "failed",
        }
    }
}

/// The request kinds, as the `kind` label says them; a kind's index is its row in
/// [`Metrics::requests`].
const KINDS: [&str; 2] = ["write", "read"];
/// Row of writes in [`Metrics::requests`].
const WRITE: usize = 0;
/// Row of reads in [`Metrics::requests`].
const READ: usize = 1;

/// Raft's view of the node at scrape time.
#[derive(Clone, Copy, Debug, Default)]
pub struct RaftView {
    /// The current term.
    pub term: u64,
    /// Whether this node is the leader.
    pub is_leader: bool,
    /// The leader's id, 0 when none is known.
    pub leader: u64,
    /// The last log index, 0 when the log is empty.
    pub last_log_index: u64,
    /// The last applied index.
    pub applied_index: u64,
    /// The index the last snapshot covers.
    pub snapshot_index: u64,
    /// Whether Raft stopped with a fatal error.
    pub fatal: bool,
    /// Beads stored, across namespaces.
    pub beads: u64,
    /// Open watch streams.
    pub watch_streams: u64,
    /// Leased claims held, across namespaces.
    pub leases: u64,
    /// The highest term of a controller action applied.
    pub controller_term: u64,
    /// Orders stored, across namespaces.
    pub orders: u64,
    /// The apply version of this replica's state.
    pub apply_version: u64,
    /// Whether this node, leading, found a member's state diverged from its own.
    pub divergence: bool,
    /// Beads held in memory (the others are closed and kept on disk).
    pub beads_held: u64,
    /// What the cache of closed beads read back from disk holds and did.
    pub bead_cache: api::state::CacheStats,
}

/// Why the connection limiter closed a connection, as the `reason` label says it. A variant's
/// discriminant is its index in [`CloseReason::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Closed on arrival: every slot held an established connection.
    Refused,
    /// A pending connection closed to make room for a newer one.
    Evicted,
    /// Sent no handshake within the handshake timeout.
    Handshake,
    /// No traffic for the idle timeout.
    Idle,
}

impl CloseReason {
    const ALL: [CloseReason; 4] =
        [CloseReason::Refused, CloseReason::Evicted, CloseReason::Handshake, CloseReason::Idle];

    fn label(self) -> &'static str {
        match self {
            CloseReason::Refused => "refused",
            CloseReason::Evicted => "evicted",
            CloseReason::Handshake => "handshake_timeout",
            CloseReason::Idle => "idle_timeout",
        }
    }
}

/// One listener's inbound-connection metrics, shared with its connection limiter (clones update
/// the same series, labelled with the listener).
#[derive(Clone, Debug)]
pub struct ConnectionMetrics {
    /// Inbound connections open now, pending ones included.
    pub open: Gauge,
    /// Inbound connections that have not sent their handshake yet.
    pub pending: Gauge,
    /// Connections the limiter closed, by [`CloseReason`] (index in [`CloseReason::ALL`]).
    closed: [Counter; 4],
}

impl ConnectionMetrics {
    /// Counts a connection the limiter closed.
    pub fn observe_close(&self, reason: CloseReason) {
        self.closed[reason as usize].inc();
    }

    /// How many connections the limiter closed for `reason` so far.
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.closed[reason as usize].get()
    }

    /// Unregistered metrics, for a limiter whose numbers nobody scrapes (tests).
    pub fn unregistered() -> ConnectionMetrics {
        ConnectionMetrics {
            open: Gauge::default(),
            pending: Gauge::default(),
            closed: CloseReason::ALL.map(|_| Counter::default()),
        }
    }

    /// Registers the connection metrics, labelled by listener; answers each listener's (index
    /// in [`Listener::ALL`]).
    fn register(registry: &mut Registry) -> [ConnectionMetrics; 2] {
        let open = Family::<Labels, Gauge>::default();
        registry.register("connections_open", "Inbound connections open now, pending ones included", open.clone());
        let pending = Family::<Labels, Gauge>::default();
        registry.register(
            "connections_pending",
            "Inbound connections that have not sent their handshake yet",
            pending.clone(),
        );
        let closed = Family::<Labels, Counter>::default();
        registry.register(
            "connections_closed",
            "Inbound connections the node closed because of its connection limits, by listener and reason",
            closed.clone(),
        );
        Listener::ALL.map(|listener| {
            let label = ("listener", listener.label());
            ConnectionMetrics {
                open: open.get_or_create(&vec![label]).clone(),
                pending: pending.get_or_create(&vec![label]).clone(),
                closed: CloseReason::ALL
                    .map(|reason| closed.get_or_create(&vec![label, ("reason", reason.label())]).clone()),
            }
        })
    }
}

/// What this node, while it leads, counts and reports of each member's replication, labelled
/// `member` (the membership bounds the ids). Shared by the peer plane, which opens replication
/// sessions, and the leader plane's member watch, which reads each member's progress; clones
/// update the same series.
#[derive(Clone, Debug, Default)]
pub struct ReplicationMetrics {
    sessions: Family<MemberLabels, Counter>,
    errors: Family<MemberLabels, Counter>,
    lag: Family<MemberLabels, Gauge>,
    reachable: Family<MemberLabels, Gauge>,
}

/// A metric's labels when one of them is a member id (not a fixed string).
type MemberLabels = Vec<(&'static str, String)>;

/// The label set of member `member`, with one more fixed label if given (a session's `kind`, an
/// error's `reason`).
fn member_labels(member: u64, more: Option<(&'static str, &'static str)>) -> MemberLabels {
    let mut labels = vec![("member", member.to_string())];
    labels.extend(more.map(|(name, value)| (name, value.to_string())));
    labels
}

/// Why a replication session went wrong, as the `reason` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicationError {
    /// The member was unreachable, refused, or did not answer in time.
    Failed,
    /// It ended at the very conflict the last session ended at: no progress.
    NoProgress,
}

impl ReplicationError {
    fn label(self) -> &'static str {
        match self {
            ReplicationError::Failed => "failed",
            ReplicationError::NoProgress => "no_progress",
        }
    }
}

impl ReplicationMetrics {
    fn register(registry: &mut Registry) -> ReplicationMetrics {
        let metrics = ReplicationMetrics::default();
        registry.register(
            "replication_sessions",
            "Replication sessions this node opened to each member while it led, by kind: append (a stream of log entries; heartbeats are not counted) or snapshot",
            metrics.sessions.clone(),
        );
        registry.register(
            "replication_errors",
            "Replication sessions to each member that went wrong, by reason: failed (unreachable, refused, timed out) or no_progress (it ended at the very conflict the last one ended at)",
            metrics.errors.clone(),
        );
        registry.register(
            "member_lag_entries",
            "On the leader: how many entries each member lacks, from the leader's last log index to the lower of the member's own last log index and the leader's matching index for it",
            metrics.lag.clone(),
        );
        registry.register(
            "member_reachable",
            "On the leader: 1 when each member answered the leader's last status request, else 0",
            metrics.reachable.clone(),
        );
        metrics
    }

    /// Counts a replication session to `member` of `kind` (`append` or `snapshot`).
    pub fn observe_session(&self, member: u64, kind: &'static str) {
        self.sessions.get_or_create(&member_labels(member, Some(("kind", kind)))).inc();
    }

    /// Counts a replication session to `member` that went wrong.
    pub fn observe_error(&self, member: u64, reason: ReplicationError) {
        self.errors.get_or_create(&member_labels(member, Some(("reason", reason.label())))).inc();
    }

    /// Sets what the leader's member watch found of `member`.
    pub fn set_member(&self, member: u64, lag: u64, reachable: bool) {
        self.lag.get_or_create(&member_labels(member, None)).set(i64::try_from(lag).unwrap_or(i64::MAX));
        self.reachable.get_or_create(&member_labels(member, None)).set(i64::from(reachable));
    }

    /// Drops the member gauges: this node no longer leads, or `member` is no longer a member.
    pub fn clear_member(&self, member: u64) {
        self.lag.remove(&member_labels(member, None));
        self.reachable.remove(&member_labels(member, None));
    }

    /// How many replication sessions of `kind` this node opened to `member`.
    pub fn sessions(&self, member: u64, kind: &'static str) -> u64 {
        self.sessions.get_or_create(&member_labels(member, Some(("kind", kind)))).get()
    }
}

/// The node's metrics.
pub struct Metrics {
    registry: Registry,
    /// Request counters by kind (index in [`KINDS`]) and outcome (index in
    /// [`RequestOutcome::ALL`]), made once so that counting a request allocates nothing.
    requests: [[Counter; 3]; 2],
    write_seconds: Histogram,
    forwarded: Counter,
    leases_expired: Counter,
    controller: ControllerMetrics,
    gauges: [(ReadGauge, Gauge); GAUGES.len()],
    connections: [ConnectionMetrics; 2],
    replication: ReplicationMetrics,
    /// Reads of closed beads answered by the cache, and those that went to disk.
    bead_cache_hits: Counter,
    bead_cache_misses: Counter,
    /// The cache's hits and misses at the last render: the counters move by the difference.
    bead_cache_seen: std::sync::Mutex<(u64, u64)>,
}

/// The controller's counters, beside `leases_expired`.
struct ControllerMetrics {
    /// Runs by `duty`.
    duty_runs: Family<Labels, Counter>,
    /// Order firings by `outcome`.
    orders: Family<Labels, Counter>,
    wisps_collected: Counter,
    convoys_closed: Counter,
}

/// Scrape-time gauges: name, help (prometheus-client ends it with a period), and how each is
/// read off a [`RaftView`].
const GAUGES: [(&str, &str, ReadGauge); 18] = [
    ("raft_term", "The node's current Raft term", |view| view.term as i64),
    ("raft_is_leader", "1 when this node is the Raft leader, else 0", |view| i64::from(view.is_leader)),
    ("raft_leader_id", "The id of the leader this node knows of; 0 when none", |view| view.leader as i64),
    ("raft_last_log_index", "The index of the last entry in this node's log", |view| view.last_log_index as i64),
    ("raft_applied_index", "The index of the last entry applied to the state machine", |view| {
        view.applied_index as i64
    }),
    ("raft_snapshot_index", "The last index the node's current snapshot covers", |view| view.snapshot_index as i64),
    ("raft_fatal", "1 when Raft stopped with a fatal error (see `strand cluster status`); restart the node", |view| {
        i64::from(view.fatal)
    }),
    ("beads", "Beads stored on this replica, across namespaces", |view| view.beads as i64),
    ("beads_held", "Beads held in memory on this replica; the others are closed and read back from disk", |view| {
        view.beads_held as i64
    }),
    ("bead_cache_bytes", "Bytes of closed beads read back from disk held in the cache", |view| {
        view.bead_cache.bytes as i64
    }),
    (
        "bead_cache_capacity_bytes",
        "The most bytes the cache of closed beads holds (`[storage] bead_cache_bytes`)",
        |view| view.bead_cache.capacity_bytes as i64,
    ),
    ("bead_cache_entries", "Closed beads held in the cache", |view| view.bead_cache.entries as i64),
    ("watch_streams", "Open watch streams served by this node", |view| view.watch_streams as i64),
    ("leases", "Leased claims held on this replica, across namespaces", |view| view.leases as i64),
    ("orders", "Orders stored on this replica, across namespaces", |view| view.orders as i64),
    ("controller_term", "The term of the latest controller to act (the leader's, once its controller began)", |view| {
        view.controller_term as i64
    }),
    ("apply_version", "The apply version of this replica's state: the version of the rules entries apply by", |view| {
        view.apply_version as i64
    }),
    (
        "divergence",
        "1 when this node, leading, found a member whose state digest differs from its own at one applied index (see `strand cluster status`)",
        |view| i64::from(view.divergence),
    ),
];

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("strand");
        let requests = Family::<Labels, Counter>::default();
        registry.register("requests", "Client requests answered by this node, by kind and outcome", requests.clone());
        // 0.25 ms to about 4 s.
        let write_seconds = Histogram::new(exponential_buckets(0.000_25, 2.0, 15));
        registry.register(
            "write_duration_seconds",
            "Time from a write's arrival to its answer, forwarding and commit included",
            write_seconds.clone(),
        );
        let forwarded = Counter::default();
        registry.register(
            "forwarded_writes",
            "Attempts to forward a write to the leader; a write retried after a leader change counts once per attempt",
            forwarded.clone(),
        );
        let leases_expired = Counter::default();
        registry.register(
            "controller_leases_expired",
            "Leases this node's controller expired while it led (their beads went back to open, or were dead-lettered)",
            leases_expired.clone(),
        );
        let duty_runs = Family::<Labels, Counter>::default();
        registry.register(
            "controller_duty_runs",
            "Runs of each controller duty on this node while it led (lease_sweep, wisp_gc, convoy_check, orders)",
            duty_runs.clone(),
        );
        let orders = Family::<Labels, Counter>::default();
        registry.register(
            "controller_orders",
            "Order firings this node's controller proposed, by outcome: fired, or skipped (refused: fired elsewhere, no longer due, its formula gone)",
            orders.clone(),
        );
        let wisps_collected = Counter::default();
        registry.register(
            "controller_wisps_collected",
            "Closed wisps this node's controller collected (wisp GC)",
            wisps_collected.clone(),
        );
        let convoys_closed = Counter::default();
        registry.register(
            "controller_convoys_closed",
            "Convoys this node's controller closed because every child was closed",
            convoys_closed.clone(),
        );
        let controller = ControllerMetrics { duty_runs, orders, wisps_collected, convoys_closed };
        let gauges = GAUGES.map(|(name, help, read)| {
            let gauge = Gauge::default();
            registry.register(name, help, gauge.clone());
            (read, gauge)
        });
        let requests = KINDS.map(|kind| {
            RequestOutcome::ALL
                .map(|outcome| requests.get_or_create(&vec![("kind", kind), ("outcome", outcome.label())]).clone())
        });
        let connections = ConnectionMetrics::register(&mut registry);
        let replication = ReplicationMetrics::register(&mut registry);
        let bead_cache_hits = Counter::default();
        registry.register(
            "bead_cache_hits",
            "Reads of closed beads kept on disk that the cache answered",
            bead_cache_hits.clone(),
        );
        let bead_cache_misses = Counter::default();
        registry.register(
            "bead_cache_misses",
            "Reads of closed beads kept on disk that went to the disk",
            bead_cache_misses.clone(),
        );
        Metrics {
            registry,
            requests,
            write_seconds,
            forwarded,
            leases_expired,
            controller,
            gauges,
            connections,
            replication,
            bead_cache_hits,
            bead_cache_misses,
            bead_cache_seen: std::sync::Mutex::new((0, 0)),
        }
    }

    /// The per-member replication metrics, for the peer plane and the member watch.
    pub fn replication(&self) -> ReplicationMetrics {
        self.replication.clone()
    }

    /// The inbound-connection metrics of `listener`, for its connection limiter.
    pub fn connections(&self, listener: Listener) -> ConnectionMetrics {
        self.connections[listener as usize].clone()
    }

    /// Counts a write and records how long it took.
    pub fn observe_write(&self, outcome: RequestOutcome, seconds: f64) {
        self.requests[WRITE][outcome as usize].inc();
        self.write_seconds.observe(seconds);
    }

    /// Counts a read.
    pub fn observe_read(&self, outcome: RequestOutcome) {
        self.requests[READ][outcome as usize].inc();
    }

    /// Counts a lease the controller expired.
    pub fn observe_lease_expired(&self) {
        self.leases_expired.inc();
    }

    /// Counts one run of a controller duty.
    pub fn observe_duty_run(&self, duty: &'static str) {
        self.controller.duty_runs.get_or_create(&vec![("duty", duty)]).inc();
    }

    /// Counts an order firing the controller proposed: fired, or skipped.
    pub fn observe_order(&self, fired: bool) {
        let outcome = if fired { "fired" } else { "skipped" };
        self.controller.orders.get_or_create(&vec![("outcome", outcome)]).inc();
    }

    /// Counts wisps the controller collected.
    pub fn observe_wisps_collected(&self, count: u64) {
        self.controller.wisps_collected.inc_by(count);
    }

    /// Counts convoys the controller closed.
    pub fn observe_convoys_closed(&self, count: u64) {
        self.controller.convoys_closed.inc_by(count);
    }

    /// Counts one attempt to forward a write to the leader.
    pub fn observe_forward(&self) {
        self.forwarded.inc();
    }

    /// The metrics page in OpenMetrics text, with the gauges set from `view`.
    pub fn render(&self, view: &RaftView) -> String {
        for (read, gauge) in &self.gauges {
            gauge.set(read(view));
        }
        {
            // A snapshot install replaces the cache, whose counts start again from 0.
            let mut seen = self.bead_cache_seen.lock().expect("metrics lock");
            let (hits, misses) = (view.bead_cache.hits, view.bead_cache.misses);
            self.bead_cache_hits.inc_by(hits.checked_sub(seen.0).unwrap_or(hits));
            self.bead_cache_misses.inc_by(misses.checked_sub(seen.1).unwrap_or(misses));
            *seen = (hits, misses);
        }
        let mut page = String::new();
        encode(&mut page, &self.registry).expect("writing to a String cannot fail");
        page
    }
}

/// The content type of [`Metrics::render`]'s page.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_has_counters_histogram_and_scrape_time_gauges() {
        let metrics = Metrics::new();
        metrics.observe_write(RequestOutcome::Ok, 0.002);
        metrics.observe_write(RequestOutcome::Refused, 0.001);
        metrics.observe_read(RequestOutcome::Ok);
        metrics.observe_forward();
        metrics.connections(Listener::Client).open.set(5);
        metrics.connections(Listener::Client).observe_close(CloseReason::Handshake);
        metrics.connections(Listener::Peer).open.set(2);
        let bead_cache = api::state::CacheStats { capacity_bytes: 1000, bytes: 600, entries: 2, hits: 5, misses: 2 };
        let view = RaftView {
            term: 7,
            is_leader: true,
            leader: 2,
            applied_index: 41,
            beads: 3,
            beads_held: 1,
            bead_cache,
            ..RaftView::default()
        };
        let page = metrics.render(&view);
        for line in [
            "strand_requests_total{kind=\"write\",outcome=\"ok\"} 1",
            "strand_requests_total{kind=\"write\",outcome=\"refused\"} 1",
            "strand_requests_total{kind=\"read\",outcome=\"ok\"} 1",
            "strand_write_duration_seconds_count 2",
            "strand_forwarded_writes_total 1",
            "strand_raft_term 7",
            "strand_raft_is_leader 1",
            "strand_raft_leader_id 2",
            "strand_raft_applied_index 41",
            "strand_raft_fatal 0",
            "strand_beads 3",
            "strand_beads_held 1",
            "strand_bead_cache_bytes 600",
            "strand_bead_cache_capacity_bytes 1000",
            "strand_bead_cache_entries 2",
            "strand_bead_cache_hits_total 5",
            "strand_bead_cache_misses_total 2",
            "strand_connections_open{listener=\"client\"} 5",
            "strand_connections_open{listener=\"peer\"} 2",
            "strand_connections_closed_total{listener=\"client\",reason=\"handshake_timeout\"} 1",
            "strand_connections_closed_total{listener=\"client\",reason=\"refused\"} 0",
            "strand_connections_closed_total{listener=\"peer\",reason=\"handshake_timeout\"} 0",
            "# EOF",
        ] {
            assert!(page.lines().any(|candidate| candidate == line), "missing {line:?} in\n{page}");
        }
        // Scrape-time gauges follow the view they are rendered with.
        let page = metrics.render(&RaftView { term: 8, bead_cache, ..RaftView::default() });
        assert!(page.lines().any(|line| line == "strand_raft_term 8"), "{page}");
        assert!(page.lines().any(|line| line == "strand_raft_is_leader 0"), "{page}");
        // The cache's counts move its counters by their difference; a cache replaced by a
        // snapshot install counts again from 0, and the counters still only rise.
        let bead_cache = api::state::CacheStats { hits: 9, misses: 2, ..bead_cache };
        let page = metrics.render(&RaftView { bead_cache, ..RaftView::default() });
        assert!(page.lines().any(|line| line == "strand_bead_cache_hits_total 9"), "{page}");
        let bead_cache = api::state::CacheStats { hits: 1, misses: 0, ..bead_cache };
        let page = metrics.render(&RaftView { bead_cache, ..RaftView::default() });
        assert!(page.lines().any(|line| line == "strand_bead_cache_hits_total 10"), "{page}");
        assert!(page.lines().any(|line| line == "strand_bead_cache_misses_total 2"), "{page}");
    }
}
