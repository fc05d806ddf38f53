//! The operator: membership changes made while the nemesis injects its faults
//! ([`crate::nemesis::Fault::Membership`]), through the same `strand.v1.Cluster` calls
//! `strand member` and `strand cluster move-leader` make, each asked of a node drawn from the
//! run's seed, and asked again (at another node) until it is answered or the fault phase ends.
//!
//! One run's steps, each after a seeded pause: add the spare node as a learner (`AddMember`
//! with `learner`) and start it as soon as that is asked, so that it joins with `--join` (which
//! adds it too, should the operator's request be lost) and catches up; promote it
//! (refused while it is behind, so asked until it is caught up); remove one of the first members,
//! maybe the leader itself (which hands its leadership over first); move the leader to a voter. What each
//! step asked and got goes to the trace, and the removals that were acknowledged, with when, to
//! the membership checker.
//!
//! Invariant: the operator makes at most one change at a time, and never removes the spare, so
//! the cluster keeps as many voters as it began with.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::proto::cluster_client::ClusterClient;
use api::proto::{AddMemberRequest, MemberRequest, MoveLeaderRequest};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use crate::cluster;

/// Shortest pause before a step (simulated time).
pub const STEP_GAP_MS_MIN: u64 = 200;
/// Longest pause before a step.
pub const STEP_GAP_MS_MAX: u64 = 800;
/// Pause between two attempts of one step.
pub const RETRY_MS: u64 = 300;
/// How long one call may take.
pub const CALL_TIMEOUT_MS: u64 = 5_000;

/// What the operator did, for the trace and the membership checker.
#[derive(Clone, Debug, Default)]
pub struct OperatorLog {
    /// Each attempt: when it was answered, what was asked, and the answer.
    pub steps: Vec<(Duration, String, String)>,
    /// The members whose removal was acknowledged, with when.
    pub removed: BTreeMap<u64, Duration>,
    /// Whether the spare was started.
    pub spare_started: bool,
}

/// The operator's log, shared with the run.
pub type SharedOperatorLog = Arc<Mutex<OperatorLog>>;

/// What the operator works with.
#[derive(Clone)]
pub struct Operator {
    /// The first members.
    pub members: Vec<u64>,
    /// The spare node it adds.
    pub spare: u64,
    /// Set to start the spare's host (see `cluster::register`).
    pub start_spare: Arc<AtomicBool>,
    /// When the fault phase ends: no step begins after it.
    pub stop_at: Duration,
    /// The run's seed.
    pub seed: u64,
}

fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

/// One step of the operator.
#[derive(Clone, Copy, Debug)]
enum Step {
    AddSpare,
    PromoteSpare,
    MoveLeader,
    Remove(u64),
}

/// Asks `step` of node `at`; the answer as text, `Ok` when it was made.
async fn ask(step: Step, at: u64, operator: &Operator, voters: &[u64], rng: &mut StdRng) -> Result<String, String> {
    let channel = crate::net::channel(&cluster::address(at))?;
    let mut client = ClusterClient::new(channel);
    let timeout = Duration::from_millis(CALL_TIMEOUT_MS);
    let answered = match step {
        Step::AddSpare => {
            let request = AddMemberRequest {
                id: operator.spare,
                peer_address: cluster::peer_address(operator.spare),
                client_address: cluster::address(operator.spare),
                learner: true,
            };
            tokio::time::timeout(timeout, client.add_member(request))
                .await
                .map(|answer| answer.map(|membership| format!("membership at index {}", membership.into_inner().index)))
        }
        Step::PromoteSpare => {
            let request = MemberRequest { id: operator.spare };
            tokio::time::timeout(timeout, client.promote_member(request))
                .await
                .map(|answer| answer.map(|membership| format!("membership at index {}", membership.into_inner().index)))
        }
        Step::Remove(id) => tokio::time::timeout(timeout, client.remove_member(MemberRequest { id }))
            .await
            .map(|answer| answer.map(|membership| format!("membership at index {}", membership.into_inner().index))),
        Step::MoveLeader => {
            let to = *voters.choose(rng).expect("there are voters");
            let request = MoveLeaderRequest { to, timeout_ms: 3_000 };
            tokio::time::timeout(timeout, client.move_leader(request)).await.map(|answer| {
                answer.map(|moved| {
                    let moved = moved.into_inner();
                    format!("node {} leads (term {})", moved.leader_id, moved.term)
                })
            })
        }
    };
    match answered {
        Err(_) => Err("no answer in time".into()),
        Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
        Ok(Ok(text)) => Ok(text),
    }
}

/// Whether a refusal means the step was made already (an earlier attempt whose answer was lost).
fn done_already(step: Step, refusal: &str) -> bool {
    match step {
        Step::AddSpare => refusal.contains("is already a member"),
        Step::PromoteSpare => refusal.contains("is a voter already"),
        Step::Remove(_) => refusal.contains("is not a member of this cluster"),
        Step::MoveLeader => false,
    }
}

async fn run(operator: Operator, log: SharedOperatorLog) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(operator.seed ^ 0x6f70_6572_6174_6f72);
    let removed = *operator.members.choose(&mut rng).expect("there are members");
    let steps = [Step::AddSpare, Step::PromoteSpare, Step::Remove(removed), Step::MoveLeader];
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut nodes = operator.members.clone();
    for step in steps {
        tokio::time::sleep(Duration::from_millis(rng.random_range(STEP_GAP_MS_MIN..=STEP_GAP_MS_MAX))).await;
        loop {
            if now() >= operator.stop_at {
                return Ok(());
            }
            let at = *nodes.choose(&mut rng).expect("there are nodes to ask");
            if matches!(step, Step::AddSpare) {
                // As an operator starts the node once it asked for its addition: an answer that
                // is lost does not mean the addition was not made (and the node asks to join
                // itself).
                operator.start_spare.store(true, Ordering::Relaxed);
            }
            let answer = ask(step, at, &operator, &nodes, &mut rng).await;
            let made = match &answer {
                Ok(_) => true,
                Err(refusal) => done_already(step, refusal),
            };
            {
                let mut log = log.lock().expect("operator log lock");
                let text = match &answer {
                    Ok(text) | Err(text) => text.clone(),
                };
                log.steps.push((now(), format!("{step:?} asked of n{at}"), text));
                if made && let Step::Remove(id) = step {
                    log.removed.insert(id, now());
                }
                if made && matches!(step, Step::AddSpare) {
                    log.spare_started = true;
                }
            }
            if made {
                match step {
                    Step::AddSpare => nodes.push(operator.spare),
                    Step::Remove(id) => nodes.retain(|node| *node != id),
                    Step::PromoteSpare | Step::MoveLeader => {}
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
        }
    }
    Ok(())
}

/// Registers the operator as a turmoil client; what it did lands in the returned log.
pub fn register(sim: &mut turmoil::Sim<'_>, operator: &Operator) -> SharedOperatorLog {
    let log = SharedOperatorLog::default();
    sim.client("operator", run(operator.clone(), log.clone()));
    log
}
