//! The controller: duties the Raft leader runs. It runs only while this node leads, and stops as
//! soon as it learns that it no longer does. Its duties, each with a `[controller]` setting:
//! - the lease sweep (`lease_sweep_interval_ms`, also the tick every duty is looked at on);
//! - wisp GC (`wisp_gc_interval`, `wisp_ttl`): closed wisps older than the TTL are removed, at
//!   most [`WISP_BATCHES_PER_RUN_MAX`] batches of `PURGE_BEADS_MAX` per namespace and run;
//! - the convoy check (`convoy_check_interval`): open, not owned convoys whose children are all
//!   closed are closed (behind the auto-close every child's close already does);
//! - orders (`order_check_interval`): each enabled order whose trigger the state finds due is
//!   fired ([`api::order`]);
//! - consistency checkpoints (`consistency_check_interval`): every replica takes a digest of its
//!   state as it applies one, and the member watch compares them (`versions.rs`).
//!
//! Every action is an ordinary replicated command ([`Command::Controller`]) carrying the term
//! the leader decided it in, and is conditional on the state it judged, so applying it twice is
//! harmless. On taking office the controller first commits `Begin` for its term: from then on
//! the state machine refuses any action of a lower term, so a deposed leader cannot act late.
//! A duty proposes only when a read of the state shows it has work, so an idle cluster's log
//! does not grow.
//!
//! The lease sweep judges expiry on this node's monotonic clock, never the wall clock: a lease
//! is due `ttl` after the sweep first saw its current grant or renewal. A lease the controller
//! finds when it takes office gets the election timeout on top, as etcd's lessor extends every
//! lease on promotion: a holder that renewed through the old leader is not expired for the
//! leader change. A jump of the wall clock changes nothing. Orders, wisp TTLs and cron
//! schedules are judged by the state machine against the leader-stamped time of the proposal,
//! which never goes back (the state's clock keeps the latest).
//!
//! Invariant: an action is proposed only on this node, never forwarded: a controller that lost
//! leadership between judging and proposing finds its proposal refused by Raft, or by the term
//! fence once the next leader began.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use api::command::{Command, ControllerAction, JudgedLease, Proposal};
use api::limits::{EXPIRIES_PER_COMMAND_MAX, PURGE_BEADS_MAX};
use api::model::{Actor, BeadId, Namespace};
use api::outcome::{Outcome, Refusal};
use api::proto as pb;
use api::state::DutiesDue;
use openraft::async_runtime::WatchReceiver;
use raft_store::Disk;
use tokio::time::Instant;

use crate::core::NodeCore;

/// The actor controller actions are recorded under.
pub const CONTROLLER_ACTOR: &str = "strand-controller";
/// Expiries proposed in one sweep at most, in commands of `EXPIRIES_PER_COMMAND_MAX` per
/// namespace; the rest wait for the next sweep, so a mass expiry never floods the log ahead of
/// client writes.
pub const EXPIRIES_PER_SWEEP_MAX: usize = 10_000;
/// Wisp GC batches (each at most `PURGE_BEADS_MAX` wisps) one run proposes per namespace.
pub const WISP_BATCHES_PER_RUN_MAX: usize = 10;

/// Runs the controller whenever this node leads, until the node stops. `stale` plants a bug
/// (simulator only, [`crate::PlantedBug::StaleController`]): once begun, the controller never
/// notices a deposition and keeps acting under its first term.
pub async fn run<D: Disk>(core: Arc<NodeCore<D>>, stale: bool) {
    tokio::select! {
        () = core.stopped() => {}
        () = serve(&core, stale) => {}
    }
}

async fn serve<D: Disk>(core: &Arc<NodeCore<D>>, stale: bool) {
    let mut metrics = core.raft.metrics();
    loop {
        let term = {
            let current = metrics.borrow_watched();
            (current.running_state.is_ok() && current.current_leader == Some(core.id)).then_some(current.current_term)
        };
        if let Some(term) = term {
            if stale {
                return lead(core, term).await;
            }
            tokio::select! {
                () = lead(core, term) => {}
                () = deposed(core, term) => {
                    tracing::info!(term, "controller stopped: this node no longer leads");
                }
            }
            core.duties.lock().expect("the duties lock is never poisoned").clear();
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// Resolves once this node is no longer leader of `term`.
async fn deposed<D: Disk>(core: &NodeCore<D>, term: u64) {
    let mut metrics = core.raft.metrics();
    loop {
        {
            let current = metrics.borrow_watched();
            let leads = current.running_state.is_ok() && current.current_leader == Some(core.id);
            if !leads || current.current_term != term {
                return;
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// Proposes a controller action on this node, stamped as the leader stamps every proposal.
pub(crate) async fn propose<D: Disk>(
    core: &NodeCore<D>,
    namespace: Namespace,
    term: u64,
    action: ControllerAction,
) -> Result<api::outcome::Answer, String> {
    let proposal = Proposal {
        request_id: None,
        timestamp: core.clock.now(),
        default_prefix: core.config.id_prefix.clone(),
        namespace,
        actor: Actor(CONTROLLER_ACTOR.into()),
        event_retention: core.config.event_retention,
        credential: None,
        command: Command::Controller(api::command::Controller { term, action }),
    };
    match core.raft.client_write(Arc::new(proposal)).await {
        Ok(response) => Ok(response.data),
        Err(error) => Err(error.to_string()),
    }
}

/// A lease as the sweep tracks it: which grant or renewal it saw, and when that is due.
struct Tracked {
    lease_id: u64,
    renewed_at: u64,
    due: Instant,
}

/// Leads the controller for `term` until cancelled.
async fn lead<D: Disk>(core: &NodeCore<D>, term: u64) {
    let sweep_every = Duration::from_millis(core.config.controller.lease_sweep_interval_ms);
    // Begin first, again until it commits while this node still leads (cancelled otherwise).
    loop {
        match propose(core, Namespace::default_namespace(), term, ControllerAction::Begin).await {
            Ok(Ok(_)) => break,
            Ok(Err(Refusal::StaleControllerTerm { current, .. })) => {
                tracing::warn!(term, current, "a controller of a later term has acted; this one stays idle");
                return std::future::pending().await;
            }
            Ok(Err(refusal)) => tracing::warn!(%refusal, "the controller could not begin"),
            Err(error) => tracing::debug!(%error, "the controller could not begin yet"),
        }
        tokio::time::sleep(sweep_every).await;
    }
    tracing::info!(term, "controller running on this node");
    let settings = &core.config.controller;
    let mut duties = Duties::new(&[
        (LEASE_SWEEP, Some(sweep_every)),
        (WISP_GC, settings.wisp_gc_interval()),
        (CONVOY_CHECK, settings.convoy_check_interval()),
        (ORDERS, settings.order_check_interval()),
        (CONSISTENCY_CHECK, settings.consistency_check_interval()),
    ]);
    // A checkpoint compares the replicas' states, none of which changed yet: the first is due one
    // interval after the controller began.
    duties.started(CONSISTENCY_CHECK, Instant::now());
    // Listed from the start, so `cluster status` never shows a running controller without duties.
    duties.publish(core, None);
    let wisp_ttl_ms = settings.wisp_ttl().map_or(0, |ttl| ttl.as_millis() as i64);
    let mut sweep = LeaseSweep::new(Duration::from_millis(core.config.raft.election_timeout_ms_max));
    loop {
        let expired = sweep.run(core, term).await;
        duties.done(core, LEASE_SWEEP, format!("expired {expired} leases"));
        let now = Instant::now();
        let (wisps_due, convoys_due, orders_due) =
            (duties.due(WISP_GC, now), duties.due(CONVOY_CHECK, now), duties.due(ORDERS, now));
        if wisps_due || convoys_due || orders_due {
            let due =
                DutiesDue { orders: orders_due, wisp_ttl_ms: wisps_due.then_some(wisp_ttl_ms), convoys: convoys_due };
            let work = core.state_machine.read(|state| state.controller_work(core.clock.now(), due));
            if wisps_due {
                let namespaces = work.iter().filter(|(_, work)| work.wisps).map(|(namespace, _)| namespace);
                let collected = collect_wisps(core, term, namespaces.cloned().collect(), wisp_ttl_ms).await;
                duties.done(core, WISP_GC, format!("collected {collected} wisps"));
            }
            if convoys_due {
                let namespaces = work.iter().filter(|(_, work)| work.convoys).map(|(namespace, _)| namespace);
                let closed = check_convoys(core, term, namespaces.cloned().collect()).await;
                duties.done(core, CONVOY_CHECK, format!("closed {closed} convoys"));
            }
            if orders_due {
                let due = work.into_iter().flat_map(|(namespace, work)| {
                    work.due_orders.into_iter().map(move |(name, seen_fired)| (namespace.clone(), name, seen_fired))
                });
                let (fired, skipped) = fire_orders(core, term, due.collect()).await;
                duties.done(core, ORDERS, format!("fired {fired} orders, skipped {skipped}"));
            }
        }
        if duties.due(CONSISTENCY_CHECK, Instant::now()) {
            let result = match propose(core, Namespace::default_namespace(), term, ControllerAction::Checkpoint).await {
                Ok(Ok(_)) => "proposed a checkpoint".to_string(),
                Ok(Err(refusal)) => format!("refused: {refusal}"),
                Err(error) => format!("not proposed: {error}"),
            };
            duties.done(core, CONSISTENCY_CHECK, result);
        }
        tokio::time::sleep(sweep_every).await;
    }
}

/// Duty names, as metrics and `cluster status` show them.
const LEASE_SWEEP: &str = "lease_sweep";
const WISP_GC: &str = "wisp_gc";
const CONVOY_CHECK: &str = "convoy_check";
const ORDERS: &str = "orders";
const CONSISTENCY_CHECK: &str = "consistency_check";

/// When each duty last ran in this term, and what it did; published for `cluster status`.
struct Duties {
    /// Name, interval (`None`: off), and when it last ran on the monotonic clock.
    duties: Vec<(&'static str, Option<Duration>, Option<Instant>)>,
}

impl Duties {
    fn new(duties: &[(&'static str, Option<Duration>)]) -> Duties {
        Duties { duties: duties.iter().map(|(name, interval)| (*name, *interval, None)).collect() }
    }

    /// Counts `duty` as run at `at`, without publishing it: its first run is one interval later.
    fn started(&mut self, duty: &str, at: Instant) {
        for (name, _, last) in &mut self.duties {
            if *name == duty {
                *last = Some(at);
            }
        }
    }

    /// Whether `duty` is on and its interval has passed since it last ran.
    fn due(&self, duty: &str, now: Instant) -> bool {
        self.duties.iter().any(|(name, interval, last)| {
            *name == duty && interval.is_some_and(|interval| last.is_none_or(|last| now >= last + interval))
        })
    }

    /// Records a run of `duty` and publishes every duty's status.
    fn done<D: Disk>(&mut self, core: &NodeCore<D>, duty: &'static str, result: String) {
        core.metrics.observe_duty_run(duty);
        for (name, _, last) in &mut self.duties {
            if *name == duty {
                *last = Some(Instant::now());
            }
        }
        self.publish(core, Some((duty, result)));
    }

    /// Publishes every duty's status for `cluster status`, with `ran`'s run and result stamped
    /// now; a duty that has not run yet is listed without a last run.
    fn publish<D: Disk>(&self, core: &NodeCore<D>, ran: Option<(&'static str, String)>) {
        let wall_now = core.clock.now();
        let mut published = core.duties.lock().expect("the duties lock is never poisoned");
        let previous: Vec<pb::DutyStatus> = std::mem::take(&mut *published);
        for (name, interval, _) in &self.duties {
            let mut status =
                previous.iter().find(|status| status.name == *name).cloned().unwrap_or_else(|| pb::DutyStatus {
                    name: name.to_string(),
                    last_run_ms: None,
                    interval_ms: interval.map_or(0, |interval| interval.as_millis() as u64),
                    last_result: String::new(),
                });
            if let Some((duty, result)) = &ran
                && name == duty
            {
                status.last_run_ms = Some(wall_now.0);
                status.last_result = result.clone();
            }
            published.push(status);
        }
    }
}

/// Removes closed wisps older than the TTL in `namespaces`, in bounded batches; answers how many.
async fn collect_wisps<D: Disk>(core: &NodeCore<D>, term: u64, namespaces: Vec<Namespace>, ttl_ms: i64) -> u64 {
    let mut collected = 0;
    for namespace in namespaces {
        for _ in 0..WISP_BATCHES_PER_RUN_MAX {
            let action = ControllerAction::CollectWisps { older_than_ms: ttl_ms };
            match propose(core, namespace.clone(), term, action).await {
                Ok(Ok(Outcome::Purged { purged_count })) => {
                    collected += purged_count;
                    core.metrics.observe_wisps_collected(purged_count);
                    if purged_count < PURGE_BEADS_MAX as u64 {
                        break;
                    }
                }
                Ok(Ok(_)) => break,
                Ok(Err(refusal)) => {
                    tracing::warn!(%refusal, %namespace, "wisp GC was refused");
                    break;
                }
                Err(error) => {
                    tracing::debug!(%error, "wisp GC was not committed; the next run tries again");
                    break;
                }
            }
        }
    }
    collected
}

/// Closes finished convoys in `namespaces`; answers how many.
async fn check_convoys<D: Disk>(core: &NodeCore<D>, term: u64, namespaces: Vec<Namespace>) -> u64 {
    let mut closed = 0;
    for namespace in namespaces {
        match propose(core, namespace.clone(), term, ControllerAction::CheckConvoys).await {
            Ok(Ok(Outcome::Beads(beads))) => {
                closed += beads.len() as u64;
                core.metrics.observe_convoys_closed(beads.len() as u64);
            }
            Ok(Ok(_)) => {}
            Ok(Err(refusal)) => tracing::warn!(%refusal, %namespace, "the convoy check was refused"),
            Err(error) => tracing::debug!(%error, "the convoy check was not committed; the next run tries again"),
        }
    }
    closed
}

/// Fires the orders judged due; answers how many fired and how many were refused.
async fn fire_orders<D: Disk>(core: &NodeCore<D>, term: u64, due: Vec<(Namespace, String, u64)>) -> (u64, u64) {
    let (mut fired, mut skipped) = (0, 0);
    for (namespace, name, seen_fired) in due {
        let action = ControllerAction::FireOrder { name: name.clone(), seen_fired };
        match propose(core, namespace.clone(), term, action).await {
            Ok(Ok(_)) => {
                fired += 1;
                core.metrics.observe_order(true);
                tracing::info!(%namespace, order = %name, "order fired");
            }
            Ok(Err(refusal)) => {
                skipped += 1;
                core.metrics.observe_order(false);
                tracing::warn!(%refusal, %namespace, order = %name, "an order firing was refused");
            }
            Err(error) => {
                tracing::debug!(%error, order = %name, "an order firing was not committed; the next run judges again")
            }
        }
    }
    (fired, skipped)
}

/// The lease sweep's memory: which grant or renewal of each lease it saw, and when that is due.
struct LeaseSweep {
    tracked: HashMap<(Namespace, BeadId), Tracked>,
    /// Added to the ttl of every lease found on taking office.
    grace: Duration,
    first: bool,
}

impl LeaseSweep {
    fn new(grace: Duration) -> LeaseSweep {
        LeaseSweep { tracked: HashMap::new(), grace, first: true }
    }

    /// One sweep: judges every lease and proposes the expiries due, a batch per command;
    /// answers how many expired.
    async fn run<D: Disk>(&mut self, core: &NodeCore<D>, term: u64) -> u64 {
        let now = Instant::now();
        let marks = core.state_machine.read(|state| state.lease_marks());
        let mut seen = HashMap::with_capacity(marks.len());
        let mut due: BTreeMap<Namespace, Vec<JudgedLease>> = BTreeMap::new();
        let mut due_count = 0;
        for (namespace, judged, ttl_ms) in marks {
            let key = (namespace, judged.id.clone());
            let entry = match self.tracked.remove(&key) {
                Some(entry) if entry.lease_id == judged.lease_id && entry.renewed_at == judged.renewed_at => entry,
                // A grant or renewal not seen before is due its ttl from now; on taking office,
                // with the election timeout on top.
                _ => {
                    let extra = if self.first { self.grace } else { Duration::ZERO };
                    let due = now + Duration::from_millis(ttl_ms) + extra;
                    Tracked { lease_id: judged.lease_id, renewed_at: judged.renewed_at, due }
                }
            };
            if entry.due <= now && due_count < EXPIRIES_PER_SWEEP_MAX {
                due.entry(key.0.clone()).or_default().push(judged);
                due_count += 1;
            }
            seen.insert(key, entry);
        }
        self.tracked = seen;
        self.first = false;
        let batches = due.into_iter().flat_map(|(namespace, leases)| {
            let batches: Vec<Vec<JudgedLease>> =
                leases.chunks(EXPIRIES_PER_COMMAND_MAX).map(<[JudgedLease]>::to_vec).collect();
            batches.into_iter().map(move |leases| (namespace.clone(), leases))
        });
        let proposals = batches
            .map(|(namespace, leases)| propose(core, namespace, term, ControllerAction::ExpireLeases { leases }));
        let mut expired = 0;
        for result in futures::future::join_all(proposals).await {
            match result {
                Ok(Ok(Outcome::Beads(beads))) => {
                    expired += beads.len() as u64;
                    beads.iter().for_each(|_| core.metrics.observe_lease_expired());
                }
                Ok(Ok(_)) => {}
                Ok(Err(refusal)) => tracing::warn!(%refusal, "a batch of lease expiries was refused"),
                Err(error) => tracing::debug!(%error, "lease expiries were not committed; the next sweep judges again"),
            }
        }
        expired
    }
}
