//! The controller: duties the Raft leader runs, today the lease sweep. It runs only while this
//! node leads, and stops as soon as it learns that it no longer does.
//!
//! Every action is an ordinary replicated command ([`Command::Controller`]) carrying the term
//! the leader decided it in, and is conditional on the state it judged, so applying it twice is
//! harmless. On taking office the controller first commits `Begin` for its term: from then on
//! the state machine refuses any action of a lower term, so a deposed leader cannot act late.
//!
//! The lease sweep judges expiry on this node's monotonic clock, never the wall clock: a lease
//! is due `ttl` after the sweep first saw its current grant or renewal. A lease the controller
//! finds when it takes office gets the election timeout on top, as etcd's lessor extends every
//! lease on promotion: a holder that renewed through the old leader is not expired for the
//! leader change. A jump of the wall clock changes nothing.
//!
//! Invariant: an expiry is proposed only on this node, never forwarded: a controller that lost
//! leadership between judging and proposing finds its proposal refused by Raft, or by the term
//! fence once the next leader began.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use api::command::{Command, ControllerAction, Proposal};
use api::model::{Actor, BeadId, Namespace};
use api::outcome::{Outcome, Refusal};
use openraft::async_runtime::WatchReceiver;
use raft_store::Disk;
use tokio::time::Instant;

use crate::core::NodeCore;

/// The actor controller actions are recorded under.
pub const CONTROLLER_ACTOR: &str = "strand-controller";
/// Expiries proposed in one sweep at most; the rest wait for the next sweep, so a mass expiry
/// never floods the log ahead of client writes.
pub const EXPIRIES_PER_SWEEP_MAX: usize = 1000;

/// Runs the controller whenever this node leads, until the node stops.
pub async fn run<D: Disk>(core: Arc<NodeCore<D>>) {
    tokio::select! {
        () = core.stopped() => {}
        () = serve(&core) => {}
    }
}

async fn serve<D: Disk>(core: &Arc<NodeCore<D>>) {
    let mut metrics = core.raft.metrics();
    loop {
        let term = {
            let current = metrics.borrow_watched();
            (current.running_state.is_ok() && current.current_leader == Some(core.id)).then_some(current.current_term)
        };
        if let Some(term) = term {
            tokio::select! {
                () = lead(core, term) => {}
                () = deposed(core, term) => {
                    tracing::info!(term, "controller stopped: this node no longer leads");
                }
            }
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
async fn propose<D: Disk>(
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
        command: Command::Controller { term, action },
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
    let grace = Duration::from_millis(core.config.raft.election_timeout_ms_max);
    let mut tracked: HashMap<(Namespace, BeadId), Tracked> = HashMap::new();
    let mut first = true;
    loop {
        let now = Instant::now();
        let leases = core.state_machine.read(|state| state.leases());
        let mut seen = HashMap::with_capacity(leases.len());
        let mut due = Vec::new();
        for (namespace, bead_id, lease) in leases {
            let key = (namespace, bead_id);
            let entry = match tracked.remove(&key) {
                Some(entry) if entry.lease_id == lease.id && entry.renewed_at == lease.renewed_at => entry,
                // A grant or renewal not seen before is due its ttl from now; on taking office,
                // with the election timeout on top.
                _ => {
                    let extra = if first { grace } else { Duration::ZERO };
                    let due = now + Duration::from_millis(lease.ttl_ms) + extra;
                    Tracked { lease_id: lease.id, renewed_at: lease.renewed_at, due }
                }
            };
            if entry.due <= now && due.len() < EXPIRIES_PER_SWEEP_MAX {
                due.push((key.clone(), entry.lease_id, entry.renewed_at));
            }
            seen.insert(key, entry);
        }
        tracked = seen;
        first = false;
        let expiries = due.into_iter().map(|((namespace, bead_id), lease_id, renewed_at)| {
            let action = ControllerAction::ExpireLease { id: bead_id, lease_id, renewed_at };
            propose(core, namespace, term, action)
        });
        for result in futures::future::join_all(expiries).await {
            match result {
                Ok(Ok(Outcome::Beads(expired))) => expired.iter().for_each(|_| core.metrics.observe_lease_expired()),
                Ok(Ok(_)) => {}
                Ok(Err(refusal)) => tracing::warn!(%refusal, "a lease expiry was refused"),
                Err(error) => tracing::debug!(%error, "a lease expiry was not committed; the next sweep judges again"),
            }
        }
        tokio::time::sleep(sweep_every).await;
    }
}
