//! The container run's nemesis: seeded faults on real containers and a real network, one at a
//! time, each held for a drawn while and then healed, and the day-2 operations of an operator.
//!
//! Faults ([`Fault`]), every kind once per round in an order drawn from the seed: the leader isolated (`docker network disconnect`); a majority/minority
//! split, a bridge (two sides that each reach one node, but not each other) and a one-way loss
//! (iptables `DROP` rules in the containers' network namespaces); packet loss (a share of every
//! packet between the members dropped, iptables' `statistic` match); `docker kill` and a restart;
//! `docker pause` longer than the election timeout; a SIGTERM stop (the node drains: a leader
//! hands its leadership over first) and a restart; and a leader moved (`MoveLeader`).
//!
//! A rolling upgrade ([`Nemesis::upgrade`]): each member in turn made again from the newer
//! build's image.
//!
//! Operations, once each in a run with membership ([`Nemesis::join`], [`Nemesis::remove`]): node
//! 4 joins with a fresh id through `deploy/cluster.sh join` while another member is killed and
//! restarted; then a first member, the leader or not, is removed. What each asked and got goes to
//! the [`OperatorLog`] the membership checker reads.
//!
//! Invariant: at most one fault is in force at a time, and [`Nemesis::heal_all`] removes every
//! kind of fault from every container, whatever the run did.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use super::docker::Deployment;
use crate::operator::OperatorLog;
use crate::target::Target;

/// A fault the nemesis injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// The leader's container is disconnected from the network.
    IsolateLeader,
    /// One member cannot exchange packets with the others.
    Split,
    /// Two sides that cannot reach each other, and one node both reach.
    Bridge,
    /// One member receives nothing from another, which still hears it.
    OneWay,
    /// A share of the packets between members is dropped.
    Loss,
    /// A member is killed (SIGKILL) and restarted.
    Kill,
    /// A member is paused longer than the election timeout.
    Pause,
    /// A member is stopped with SIGTERM (it drains) and restarted.
    Drain,
    /// The leadership is moved to another voter.
    MoveLeader,
}

impl Fault {
    /// Every kind, in the order the seed draws from.
    pub const ALL: [Fault; 9] = [
        Fault::IsolateLeader,
        Fault::Split,
        Fault::Bridge,
        Fault::OneWay,
        Fault::Loss,
        Fault::Kill,
        Fault::Pause,
        Fault::Drain,
        Fault::MoveLeader,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Fault::IsolateLeader => "isolate-leader",
            Fault::Split => "split",
            Fault::Bridge => "bridge",
            Fault::OneWay => "one-way",
            Fault::Loss => "loss",
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Drain => "drain",
            Fault::MoveLeader => "move-leader",
        }
    }
}

/// Shortest pause between two faults.
pub const GAP_MS_MIN: u64 = 500;
/// Longest pause between two faults.
pub const GAP_MS_MAX: u64 = 2_000;
/// Shortest time a fault is held.
pub const HOLD_MS_MIN: u64 = 1_000;
/// Longest time a fault is held.
pub const HOLD_MS_MAX: u64 = 4_000;
/// How long a pause lasts at least: past the nodes' longest election timeout (600 ms by default),
/// so the others elect a new leader.
pub const PAUSE_MS_MIN: u64 = 1_500;
/// The share of packets the loss fault drops.
pub const LOSS_CHANCE: f64 = 0.3;
/// The grace a SIGTERM stop gives a node to drain before Docker kills it.
pub const DRAIN_GRACE_S: u64 = 20;
/// How long a member has to answer its status once everything is healed, by default.
pub const BACK_MS_MAX: u64 = 60_000;
/// The node that joins during a run with membership.
pub const SPARE: u64 = 4;

/// What the nemesis did.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    /// Each step: when, and what was done and answered.
    pub events: Vec<(Duration, String)>,
    /// Faults injected, by kind.
    pub applied: BTreeMap<&'static str, usize>,
    /// What the operator asked and got.
    pub operator: OperatorLog,
}

/// The nemesis of one run.
pub struct Nemesis {
    deployment: Arc<Deployment>,
    target: Target,
    rng: StdRng,
    /// The members as the nemesis changed them.
    pub members: Vec<u64>,
    /// The kinds still to come in this round: every kind once per round, in a seeded order, so a
    /// short run sees many kinds.
    round: Vec<Fault>,
    /// What it did.
    pub schedule: Schedule,
}

/// Runs a blocking Docker call off the async workers.
async fn blocking<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(call).await.expect("a Docker call does not panic")
}

impl Nemesis {
    /// A nemesis of the cluster `deployment` whose first members are `members`, drawing from `seed`.
    pub fn new(deployment: Arc<Deployment>, target: Target, members: Vec<u64>, seed: u64) -> Nemesis {
        Nemesis {
            deployment,
            target,
            rng: StdRng::seed_from_u64(seed ^ 0x006e_656d_6573_6973),
            members,
            round: Vec::new(),
            schedule: Schedule::default(),
        }
    }

    fn log(&mut self, what: String) {
        let at = self.target.now();
        tracing::info!(target: "containers", "[{:>8.3}s] nemesis: {what}", at.as_secs_f64());
        self.schedule.events.push((at, what));
    }

    /// Logs the outcome of one Docker call, failed or not.
    fn noted(&mut self, what: &str, result: Result<(), String>) {
        match result {
            Ok(()) => self.log(what.to_string()),
            Err(error) => self.log(format!("{what} failed: {error}")),
        }
    }

    /// The leader, as the first member to know one says.
    async fn leader(&self) -> Option<u64> {
        for id in &self.members {
            if let Ok(status) = self.target.status(*id, false, Duration::from_secs(1)).await
                && status.leader_id != 0
            {
                return Some(status.leader_id);
            }
        }
        None
    }

    fn pick(&mut self) -> u64 {
        *self.members.choose(&mut self.rng).expect("a cluster has members")
    }

    async fn hold(&mut self, min_ms: u64) {
        let ms = self.rng.random_range(min_ms.max(HOLD_MS_MIN)..=HOLD_MS_MAX.max(min_ms));
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    async fn addresses(&self) -> BTreeMap<u64, String> {
        let (deployment, members) = (self.deployment.clone(), self.members.clone());
        blocking(move || members.iter().filter_map(|id| Some((*id, deployment.address(*id).ok()?))).collect()).await
    }

    /// Cuts every link between `side` and `other` (both ways).
    async fn cut(&mut self, side: Vec<u64>, other: Vec<u64>, chance: Option<f64>, one_way: bool) {
        let addresses = self.addresses().await;
        let deployment = self.deployment.clone();
        let cut = blocking(move || {
            let mut errors = Vec::new();
            for a in &side {
                for b in &other {
                    let (Some(from_a), Some(from_b)) = (addresses.get(a), addresses.get(b)) else { continue };
                    if let Err(error) = deployment.drop_from(*a, from_b, chance) {
                        errors.push(error);
                    }
                    if !one_way && let Err(error) = deployment.drop_from(*b, from_a, chance) {
                        errors.push(error);
                    }
                }
            }
            if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
        })
        .await;
        if let Err(error) = cut {
            self.log(format!("some rules were not added: {error}"));
        }
    }

    async fn clear_rules(&mut self) {
        let (deployment, ids) = (self.deployment.clone(), self.members.clone());
        blocking(move || {
            for id in ids {
                let _ = deployment.clear_rules(id);
            }
        })
        .await;
    }

    /// Runs one Docker call on the cluster off the async workers, logging it as `what`.
    async fn docker(&mut self, what: String, call: impl FnOnce(&Deployment) -> Result<(), String> + Send + 'static) {
        let deployment = self.deployment.clone();
        let result = blocking(move || call(&deployment)).await;
        self.noted(&what, result);
    }

    /// Holds a fault made of rules, then removes them.
    async fn hold_then_clear(&mut self) {
        self.hold(0).await;
        self.clear_rules().await;
        self.log("heal: rules removed".into());
    }

    /// Injects the next fault of the round (see [`Nemesis::round`]), holds it, and heals it.
    pub async fn step(&mut self) {
        if self.round.is_empty() {
            self.round = Fault::ALL.to_vec();
            rand::seq::SliceRandom::shuffle(self.round.as_mut_slice(), &mut self.rng);
        }
        let fault = self.round.pop().expect("a round has faults");
        *self.schedule.applied.entry(fault.name()).or_default() += 1;
        match fault {
            Fault::IsolateLeader => {
                let Some(leader) = self.leader().await else {
                    return self.log("isolate-leader: no leader known; skipped".into());
                };
                let what = format!("isolate-leader: node {leader} disconnected from the network");
                self.docker(what, move |docker| docker.disconnect(leader)).await;
                self.hold(0).await;
                self.docker(format!("heal: node {leader} connected again"), move |docker| docker.connect(leader)).await;
            }
            Fault::Split => {
                let minority = self.pick();
                let majority: Vec<u64> = self.members.iter().copied().filter(|id| *id != minority).collect();
                self.log(format!("split: node {minority} cut off from {majority:?}"));
                self.cut(vec![minority], majority, None, false).await;
                self.hold_then_clear().await;
            }
            Fault::Bridge => {
                let mut order = self.members.clone();
                rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut self.rng);
                let bridge = order[0];
                let rest = &order[1..];
                let (left, right) = rest.split_at(rest.len() / 2);
                self.log(format!("bridge: {left:?} and {right:?} cannot reach each other; node {bridge} reaches both"));
                self.cut(left.to_vec(), right.to_vec(), None, false).await;
                self.hold_then_clear().await;
            }
            Fault::OneWay => {
                let deaf = self.pick();
                let others: Vec<u64> = self.members.iter().copied().filter(|id| *id != deaf).collect();
                let Some(&sender) = others.choose(&mut self.rng) else { return };
                self.log(format!("one-way: node {deaf} receives nothing from node {sender}, which still hears it"));
                self.cut(vec![deaf], vec![sender], None, true).await;
                self.hold_then_clear().await;
            }
            Fault::Loss => {
                let members = self.members.clone();
                self.log(format!("loss: {:.0} % of the packets between members dropped", LOSS_CHANCE * 100.0));
                for (index, a) in members.iter().enumerate() {
                    self.cut(vec![*a], members[index + 1..].to_vec(), Some(LOSS_CHANCE), false).await;
                }
                self.hold_then_clear().await;
            }
            Fault::Kill => {
                let victim = self.pick();
                self.docker(format!("kill: node {victim} killed"), move |docker| docker.kill(victim)).await;
                self.hold(0).await;
                self.docker(format!("heal: node {victim} started"), move |docker| docker.start(victim)).await;
            }
            Fault::Pause => {
                let victim = match self.rng.random_bool(0.5) {
                    true => self.leader().await.unwrap_or_else(|| self.pick()),
                    false => self.pick(),
                };
                self.docker(format!("pause: node {victim} paused"), move |docker| docker.pause(victim)).await;
                self.hold(PAUSE_MS_MIN).await;
                self.docker(format!("heal: node {victim} unpaused"), move |docker| docker.unpause(victim)).await;
            }
            Fault::Drain => {
                let victim = match self.rng.random_bool(0.5) {
                    true => self.leader().await.unwrap_or_else(|| self.pick()),
                    false => self.pick(),
                };
                self.log(format!("drain: node {victim} sent SIGTERM"));
                let stop = move |docker: &Deployment| docker.stop(victim, DRAIN_GRACE_S);
                self.docker(format!("drain: node {victim} stopped"), stop).await;
                self.hold(0).await;
                self.docker(format!("heal: node {victim} started"), move |docker| docker.start(victim)).await;
            }
            Fault::MoveLeader => {
                let Some(leader) = self.leader().await else {
                    return self.log("move-leader: no leader known; skipped".into());
                };
                let others: Vec<u64> = self.members.iter().copied().filter(|id| *id != leader).collect();
                let Some(&to) = others.choose(&mut self.rng) else { return };
                let answer = self.operator_call(|client| async move {
                    client
                        .move_leader(to, Duration::from_secs(5))
                        .await
                        .map(|moved| format!("leader {}", moved.leader_id))
                });
                let answer = answer.await;
                self.log(format!("move-leader: from node {leader} to node {to}: {answer}"));
                self.schedule.operator.steps.push((self.target.now(), format!("MoveLeader({to})"), answer));
            }
        }
    }

    /// A call through a client of the current members; answers what it got, as text.
    async fn operator_call<F, Fut>(&mut self, call: F) -> String
    where
        F: FnOnce(api::client::Client) -> Fut,
        Fut: std::future::Future<Output = Result<String, api::client::ClientError>>,
    {
        let client = match self.target.client_as(&self.members, &mut self.rng, "") {
            Ok(client) => client,
            Err(error) => return format!("no client: {error}"),
        };
        match call(client).await {
            Ok(answer) => answer,
            Err(error) => format!("failed: {error}"),
        }
    }

    /// Node [`SPARE`] joins through `deploy/cluster.sh join` (a learner on a fresh volume,
    /// started with `--join`, promoted once caught up) while another member is killed and
    /// restarted.
    pub async fn join(&mut self) {
        let victim = self.pick();
        let deployment = self.deployment.clone();
        self.schedule.operator.spare_started = true;
        self.log(format!("join: node {SPARE} joins (deploy/cluster.sh join); node {victim} will be killed meanwhile"));
        let join = tokio::task::spawn_blocking({
            let deployment = deployment.clone();
            move || deployment.join()
        });
        tokio::time::sleep(Duration::from_millis(self.rng.random_range(200..=1_500))).await;
        *self.schedule.applied.entry(Fault::Kill.name()).or_default() += 1;
        self.docker(format!("kill: node {victim} killed during the join"), move |docker| docker.kill(victim)).await;
        self.hold(0).await;
        self.docker(format!("heal: node {victim} started"), move |docker| docker.start(victim)).await;
        let answer = match join.await.expect("the join does not panic") {
            Ok(said) => said,
            Err(error) => format!("failed: {error}"),
        };
        self.log(format!("join: {answer}"));
        self.schedule.operator.steps.push((self.target.now(), format!("AddSpare({SPARE})"), answer));
        if !self.members.contains(&SPARE) {
            self.members.push(SPARE);
        }
    }

    /// Removes a first member (the leader, half the time) through `RemoveMember`.
    pub async fn remove(&mut self) {
        let firsts: Vec<u64> = self.members.iter().copied().filter(|id| *id != SPARE).collect();
        let leader = self.leader().await;
        let id = match (self.rng.random_bool(0.5), leader) {
            (true, Some(leader)) if leader != SPARE => leader,
            _ => *firsts.choose(&mut self.rng).expect("first members remain"),
        };
        let answer = self
            .operator_call(|client| async move {
                client.remove_member(id).await.map(|membership| {
                    let ids: Vec<u64> = membership.members.iter().map(|member| member.id).collect();
                    format!("membership {ids:?}")
                })
            })
            .await;
        let at = self.target.now();
        self.log(format!("remove: node {id}: {answer}"));
        self.schedule.operator.steps.push((at, format!("Remove({id})"), answer.clone()));
        if answer.starts_with("membership") {
            self.schedule.operator.removed.insert(id, at);
            self.members.retain(|member| *member != id);
        }
    }

    /// A rolling upgrade's step: node `id` is stopped with SIGTERM and made again from the newer
    /// build's image on its volume (`deploy/cluster.sh upgrade`), then must catch up.
    pub async fn upgrade(&mut self, id: u64) {
        let deployment = self.deployment.clone();
        let answer = blocking(move || deployment.upgrade(id, deployment.next_image())).await;
        *self.schedule.applied.entry("upgrade").or_default() += 1;
        match answer {
            Ok(said) => self.log(format!("upgrade: {said}")),
            Err(error) => self.log(format!("upgrade: node {id} failed: {error}")),
        }
    }

    /// Removes every fault from every container of `nodes`: unpauses, reconnects, removes the
    /// rules and starts what is stopped; then waits until each member answers its status.
    /// Errs naming the first container that did not come back.
    pub async fn heal_all(&mut self, nodes: &[u64], back_bound: Duration) -> Result<(), String> {
        let (deployment, ids, members) = (self.deployment.clone(), nodes.to_vec(), self.members.clone());
        let notes = blocking(move || {
            let mut notes = Vec::new();
            for id in ids {
                if deployment.container(id).is_none() {
                    continue;
                }
                match deployment.state(id).as_deref() {
                    Ok("paused") => notes.push(format!("node {id} unpaused: {:?}", deployment.unpause(id))),
                    Ok("exited") | Ok("created") if members.contains(&id) => {
                        notes.push(format!("node {id} started: {:?}", deployment.start(id)))
                    }
                    _ => {}
                }
                if deployment.connected(id) == Ok(false) {
                    notes.push(format!("node {id} connected: {:?}", deployment.connect(id)));
                }
                let _ = deployment.clear_rules(id);
            }
            notes
        })
        .await;
        for note in notes {
            self.log(format!("heal: {note}"));
        }
        self.log("heal: every fault removed".into());
        let bound = self.target.now() + back_bound;
        for id in self.members.clone() {
            loop {
                match self.target.status(id, false, Duration::from_secs(2)).await {
                    Ok(_) => break,
                    Err(error) if self.target.now() >= bound => {
                        let deployment = self.deployment.clone();
                        let state = blocking(move || deployment.state(id)).await.unwrap_or_else(|error| error);
                        return Err(format!(
                            "node {id} did not come back after the heal: its container: {state}; its status did not answer within {} s ({error}); see its log",
                            back_bound.as_secs()
                        ));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
                }
            }
        }
        Ok(())
    }

    /// The pause before the next step, drawn from the seed.
    pub fn gap(&mut self) -> Duration {
        Duration::from_millis(self.rng.random_range(GAP_MS_MIN..=GAP_MS_MAX))
    }
}
