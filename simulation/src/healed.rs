//! The healed phase's reader: a turmoil client that, once every fault is removed, checks that
//! the cluster serves a write in bounded time, reads back every bead, reads back the orders'
//! firings, and waits for all nodes to converge. What it finds goes to the liveness,
//! durability, orders and convergence checkers.
//!
//! The orderer, another client, stores a formula and two orders ([`SIM_ORDERS`]: a 1 s cooldown
//! and an every-minute cron) as soon as the cluster takes writes, so the leaders' controllers
//! fire orders through every fault of the run; the reader disables them before it reads them
//! back, so that the cluster is quiet while convergence is checked. Then it waits out
//! [`lease_bound`] and lists the lease agents' beads, for the leases checker.
//!
//! Convergence is asked of every live member: every node of the cluster's membership (as the
//! node with the greatest last log id among those that know a leader answers it; it changes only
//! under the membership fault) but those whose
//! start failed ([`cluster::FailedStarts`]), so a node that started on damaged storage is compared
//! too, and so is a node whose storage was wiped (it rejoined empty). A node that never catches up
//! is named as behind, with how far its log got. Under the upgrade fault, when every member is
//! live, convergence also waits for every node to report the newer build's apply version.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::command::{Command, ListFilter, Query};
use api::commands::list::List;
use api::commands::order_list::OrderList;
use api::outcome::Outcome;
use api::state::{ORDER_KEY, ORDER_TRACKING_LABEL};

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::cluster;
use crate::history::{Op, OpResult, SharedHistory};
use crate::target::Target;
use crate::workload::{self, FINAL_LIST_MAX};

/// Longest simulated time from healing to the first served write.
pub const WRITE_AFTER_HEAL_MS_MAX: u64 = 30_000;
/// Longest simulated time, after the final read, for every node to reach the same applied index
/// and state digest.
pub const CONVERGENCE_MS_MAX: u64 = 30_000;
/// Pause between two convergence polls.
pub const POLL_MS: u64 = 200;
/// Slack on top of the time a node's status may take (see [`status_timeout`]).
pub const STATUS_SLACK_MS: u64 = 1_000;

/// How long one node's status may take: the node asks each of its peers in turn, each for up to
/// the Raft RPC timeout, and a peer that is down for good (its start failed) takes all of it.
pub fn status_timeout(nodes: usize) -> Duration {
    Duration::from_millis(cluster::raft_settings().rpc_timeout_ms * nodes as u64 + STATUS_SLACK_MS)
}

/// The name of [`SIM_FORMULA`].
pub const SIM_FORMULA_NAME: &str = "sim-patrol";
/// The formula the simulated orders cook.
pub const SIM_FORMULA: &str = "formula = \"sim-patrol\"\n[[steps]]\nid = \"look\"\ntitle = \"Look\"\n";
/// The simulated orders: name, TOML, and the cooldown interval in ms (0: not a cooldown).
pub const SIM_ORDERS: [(&str, &str, u64); 2] = [
    (
        "sim-cooldown",
        "[order]\nformula = \"sim-patrol\"\ngate = \"cooldown\"\ninterval = \"1s\"\npool = \"sim\"\n",
        1_000,
    ),
    ("sim-cron", "[order]\nformula = \"sim-patrol\"\ngate = \"cron\"\nschedule = \"* * * * *\"\n", 0),
];

/// The orders' firings as the healed reader read them back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrderFirings {
    /// One (order, window, tracking bead) per tracking bead.
    pub tracking: Vec<(String, u64, String)>,
    /// Each order's count of firings.
    pub fired: BTreeMap<String, u64>,
    /// The cooldown orders' intervals, in ms.
    pub cooldown_ms: BTreeMap<String, u64>,
}

/// What the healed-phase reader found.
#[derive(Clone, Debug)]
pub struct Healed {
    /// Simulated time from healing to the first served write, or why there was none.
    pub write_after_heal: Result<Duration, String>,
    /// Each live node's (id, applied index, digest) once they agreed, or how they disagreed.
    pub convergence: Result<Vec<(u64, u64, u64)>, String>,
    /// The membership convergence was asked of (every member, voter or learner), as the freshest
    /// node that knew a leader answered it; empty when none did.
    pub members: Vec<u64>,
    /// The live nodes that still said they were rejoining (their rejoin marker set) when they
    /// agreed: caught up in state, yet still refusing to vote.
    pub rejoining_at_end: Vec<u64>,
    /// The orders' firings, or why they could not be read.
    pub orders: Result<OrderFirings, String>,
    /// The leasable beads once every unrenewed lease must have expired ([`lease_bound`] after
    /// the agents finished), or why they could not be read.
    pub leases_after_bound: Result<Vec<api::model::Bead>, String>,
    /// Every bead of the namespace, read after the agents stopped, or why it could not be read.
    pub all_beads: Result<Vec<api::model::Bead>, String>,
    /// First members the final membership no longer holds that still answered their status as
    /// members [`REMOVED_TOLD_MS_MAX`] after convergence, each with its answer: a removed node
    /// that was never told must learn it from the first member it sends a message.
    pub removed_serving: Vec<(u64, String)>,
    /// Each live node's apply version once they agreed, and the log index that set it.
    pub apply_versions: Vec<(u64, u32, u64)>,
    /// The divergences the live nodes reported once they agreed (only a leader checks), by node.
    pub divergences: Vec<(u64, String)>,
}

/// Longest simulated time, after convergence, for every removed first member to say that it was
/// removed (a voter never told campaigns within an election timeout, and the members refuse it
/// with the notice).
pub const REMOVED_TOLD_MS_MAX: u64 = 10_000;

/// How long after the agents' last call every lease they held must have expired: its length,
/// two sweeps, two election timeouts (a leader change gives leases one on top) and a second.
pub fn lease_bound() -> Duration {
    let sweep = node::config::ControllerSettings::default().lease_sweep_interval_ms;
    let election = cluster::raft_settings().election_timeout_ms_max;
    Duration::from_millis(workload::LEASE_MS + 2 * sweep + 2 * election + 1_000)
}

impl Default for Healed {
    fn default() -> Self {
        let never = "the healed-phase reader did not finish".to_string();
        Healed {
            write_after_heal: Err(never.clone()),
            convergence: Err(never.clone()),
            members: Vec::new(),
            rejoining_at_end: Vec::new(),
            orders: Err(never.clone()),
            leases_after_bound: Err(never.clone()),
            all_beads: Err(never),
            removed_serving: Vec::new(),
            apply_versions: Vec::new(),
            divergences: Vec::new(),
        }
    }
}

/// When the reader does what.
#[derive(Clone)]
pub struct Schedule {
    /// The ids of the first members, which clients ask.
    pub node_ids: Vec<u64>,
    /// Every node id, spares included: the nodes a membership may hold.
    pub all_ids: Vec<u64>,
    /// When the faults are removed.
    pub heal_at: Duration,
    /// When every agent has finished its last call.
    pub agents_done_at: Duration,
    /// The run's seed.
    pub seed: u64,
    /// The reader's agent number in the history.
    pub agent: usize,
    /// The nodes whose start failed: left out of convergence.
    pub failed_starts: cluster::FailedStarts,
    /// Under [`crate::nemesis::Fault::Upgrade`]: the apply version the cluster must reach once
    /// every member runs the newer build (unless a member failed to start and never reports).
    pub switch_to: Option<u32>,
    /// Where its calls go, and its clock.
    pub target: Target,
}

async fn sleep_until(target: &Target, at: Duration) {
    let current = target.now();
    if at > current {
        tokio::time::sleep(at - current).await;
    }
}

async fn first_write(
    client: &api::client::Client,
    history: &SharedHistory,
    schedule: &Schedule,
) -> Result<Duration, String> {
    let bound = schedule.heal_at + Duration::from_millis(WRITE_AFTER_HEAL_MS_MAX);
    let mut attempt = 0;
    loop {
        let op = Op::Create { title: format!("probe-{attempt}") };
        let result = workload::perform(client, history, schedule.agent, op, false).await;
        if let OpResult::Ok(_) = result {
            return Ok(schedule.target.now() - schedule.heal_at);
        }
        if schedule.target.now() >= bound {
            return Err(format!(
                "no write was served within {WRITE_AFTER_HEAL_MS_MAX} ms of healing (last answer: {result:?})"
            ));
        }
        attempt += 1;
    }
}

/// One node's own status at the end.
#[derive(Clone, Debug)]
struct NodeEnd {
    id: u64,
    applied: u64,
    digest: u64,
    last_log: u64,
    rejoining: bool,
    /// Its apply version, and the index that set it.
    apply_version: (u32, u64),
    /// A divergence it found (only a leader checks); empty when none.
    divergence: String,
}

async fn statuses(target: &Target, node_ids: &[u64], timeout: Duration) -> Vec<Result<NodeEnd, String>> {
    let mut found = Vec::new();
    for id in node_ids {
        let status = async {
            let answer = target.status(*id, true, timeout).await?;
            let own = answer.nodes.iter().find(|node| node.id == *id).ok_or(format!("node {id} left itself out"))?;
            Ok(NodeEnd {
                id: *id,
                applied: own.applied_index,
                digest: own.digest.unwrap_or(0),
                last_log: own.last_log_index,
                rejoining: own.rejoining,
                apply_version: (own.apply_version, own.apply_since),
                divergence: own.divergence.clone(),
            })
        };
        found.push(status.await);
    }
    found
}

/// How the nodes disagree: the nodes behind the furthest one, named with how far their logs got.
fn disagreement(all: &[NodeEnd]) -> String {
    let furthest = all.iter().map(|node| node.applied).max().unwrap_or(0);
    let behind: Vec<String> = all
        .iter()
        .filter(|node| node.applied < furthest)
        .map(|node| {
            format!(
                "node {} is behind: applied {} of {furthest}, its log ends at {}",
                node.id, node.applied, node.last_log
            )
        })
        .collect();
    let digests = format!(
        "(id, applied index, digest, apply version): {:?}",
        all.iter().map(|node| (node.id, node.applied, node.digest, node.apply_version.0)).collect::<Vec<_>>()
    );
    if behind.is_empty() { format!("nodes disagree {digests}") } else { format!("{}; {digests}", behind.join("; ")) }
}

/// The cluster's membership, as the node with the greatest last log id among those of
/// `node_ids` that know a leader answers it (a member removed while it was cut off still holds
/// the membership of before, and may still think it leads).
async fn membership(target: &Target, node_ids: &[u64], timeout: Duration) -> Option<Vec<u64>> {
    let mut freshest: Option<((u64, u64), Vec<u64>)> = None;
    for id in node_ids {
        let asked = async {
            let answer = target.status(*id, false, timeout).await.ok()?;
            let own = answer.nodes.iter().find(|node| node.id == *id)?;
            let last_log = (own.last_log_term, own.last_log_index);
            (answer.leader_id != 0).then(|| (last_log, answer.nodes.iter().map(|node| node.id).collect()))
        };
        if let Some((last_log, members)) = asked.await
            && freshest.as_ref().is_none_or(|(seen, _)| last_log > *seen)
        {
            freshest = Some((last_log, members));
        }
    }
    freshest.map(|(_, members)| members)
}

/// Waits until every live member reports the same applied index and digest, and, when
/// `switch_to` is set and every member is live, that apply version; answers their ends and the
/// membership.
async fn converge(
    target: &Target,
    node_ids: &[u64],
    failed_starts: &cluster::FailedStarts,
    switch_to: Option<u32>,
) -> Result<(Vec<NodeEnd>, Vec<u64>), String> {
    let bound = target.now() + Duration::from_millis(CONVERGENCE_MS_MAX);
    loop {
        let members =
            membership(target, node_ids, status_timeout(node_ids.len())).await.unwrap_or_else(|| node_ids.to_vec());
        let live: Vec<u64> = {
            let failed = failed_starts.lock().expect("failed starts lock");
            members.iter().copied().filter(|id| !failed.contains_key(id)).collect()
        };
        // A member that never started never reports its versions, so the leader cannot switch.
        let switch_to = switch_to.filter(|_| live.len() == members.len());
        let found = statuses(target, &live, status_timeout(node_ids.len())).await;
        let agreed: Result<Vec<NodeEnd>, String> = found.iter().cloned().collect();
        let last = match agreed {
            Ok(all)
                if all
                    .windows(2)
                    .all(|pair| (pair[0].applied, pair[0].digest) == (pair[1].applied, pair[1].digest))
                    && switch_to.is_none_or(|to| all.iter().all(|node| node.apply_version.0 == to)) =>
            {
                return Ok((all, members));
            }
            Ok(all) => match switch_to {
                Some(to)
                    if all.windows(2).all(|pair| pair[0].applied == pair[1].applied)
                        && all.iter().any(|node| node.apply_version.0 != to) =>
                {
                    format!(
                        "every member runs the newer build, yet the apply version is not {to}: {}",
                        disagreement(&all)
                    )
                }
                _ => disagreement(&all),
            },
            Err(error) => error,
        };
        if target.now() >= bound {
            return Err(format!("nodes did not converge within {CONVERGENCE_MS_MAX} ms of the final read: {last}"));
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

async fn final_read(client: &api::client::Client, history: &SharedHistory, agent: usize) -> bool {
    for _ in 0..10 {
        let op = Op::List { limit: FINAL_LIST_MAX };
        if let OpResult::Ok(_) = workload::perform(client, history, agent, op, true).await {
            return true;
        }
    }
    false
}

/// Stores the formula and the orders, each retried until the cluster takes it.
async fn orderer(schedule: Schedule) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(schedule.seed ^ 0x6f72_6465_7273);
    let client = workload::client(&schedule.target, &schedule.node_ids, &mut rng)?;
    let mut writes = vec![Command::FormulaPut(api::command::FormulaPut { source: SIM_FORMULA.into() })];
    writes.extend(SIM_ORDERS.iter().map(|(name, source, _)| {
        Command::OrderPut(api::command::OrderPut { name: (*name).into(), source: (*source).into() })
    }));
    for command in writes {
        while client.execute(command.clone()).await.is_err() {
            if schedule.target.now() >= schedule.agents_done_at {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }
    Ok(())
}

/// Reads back every tracking bead and every order's count.
async fn read_orders(client: &api::client::Client) -> Result<OrderFirings, String> {
    let filter = ListFilter {
        labels_all: vec![ORDER_TRACKING_LABEL.into()],
        all: true,
        limit: FINAL_LIST_MAX,
        ..Default::default()
    };
    let tracking = match client.query(Query::from(List(filter))).await.map_err(|error| error.to_string())? {
        Outcome::Beads(beads) => beads,
        other => return Err(format!("the tracking beads' list answered {other:?}")),
    };
    let orders = match client
        .query(Query::from(OrderList { now: api::model::Timestamp(0) }))
        .await
        .map_err(|error| error.to_string())?
    {
        Outcome::Orders(orders) => orders,
        other => return Err(format!("the order list answered {other:?}")),
    };
    let mut found = OrderFirings::default();
    for bead in tracking {
        let order = bead.metadata.get(ORDER_KEY).cloned().unwrap_or_default();
        let window = bead
            .metadata
            .get("order.window")
            .and_then(|window| window.parse().ok())
            .ok_or(format!("tracking bead {} has no window", bead.id))?;
        found.tracking.push((order, window, bead.id.0));
    }
    found.fired = orders.into_iter().map(|order| (order.name, order.fired)).collect();
    found.cooldown_ms =
        SIM_ORDERS.iter().filter(|(_, _, ms)| *ms > 0).map(|(name, _, ms)| ((*name).to_string(), *ms)).collect();
    Ok(found)
}

/// The beads `filter` lists, tried up to 10 times.
async fn list_retrying(client: &api::client::Client, filter: ListFilter) -> Result<Vec<api::model::Bead>, String> {
    let mut last = Err("never read".to_string());
    for _ in 0..10 {
        last = match client.query(Query::from(List(filter.clone()))).await {
            Ok(Outcome::Beads(beads)) => return Ok(beads),
            Ok(other) => Err(format!("a list answered {other:?}")),
            Err(error) => Err(error.to_string()),
        };
    }
    last
}

async fn reader(schedule: Schedule, history: SharedHistory, report: Arc<Mutex<Healed>>) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(schedule.seed ^ 0x6865_616c_6564);
    let client = workload::client(&schedule.target, &schedule.node_ids, &mut rng)?;
    sleep_until(&schedule.target, schedule.heal_at).await;
    let write_after_heal = first_write(&client, &history, &schedule).await;
    report.lock().expect("healed report lock").write_after_heal = write_after_heal;
    sleep_until(&schedule.target, schedule.agents_done_at).await;
    if !final_read(&client, &history, schedule.agent).await {
        report.lock().expect("healed report lock").convergence = Err("the final read never succeeded".into());
        return Ok(());
    }
    // Disabled, the orders stop writing, so the nodes can be caught agreeing.
    for (name, source, _) in SIM_ORDERS {
        let disabled = Command::OrderPut(api::command::OrderPut {
            name: name.into(),
            source: format!("{source}enabled = false\n"),
        });
        for _ in 0..10 {
            if client.execute(disabled.clone()).await.is_ok() {
                break;
            }
        }
    }
    let mut orders = Err("never read".to_string());
    for _ in 0..10 {
        orders = read_orders(&client).await;
        if orders.is_ok() {
            break;
        }
    }
    report.lock().expect("healed report lock").orders = orders;
    sleep_until(&schedule.target, schedule.agents_done_at + lease_bound()).await;
    let leasable = ListFilter {
        labels_all: vec![workload::LEASE_LABEL.into()],
        all: true,
        limit: FINAL_LIST_MAX,
        ..Default::default()
    };
    report.lock().expect("healed report lock").leases_after_bound = list_retrying(&client, leasable).await;
    let every = ListFilter { all: true, limit: FINAL_LIST_MAX, ..Default::default() };
    report.lock().expect("healed report lock").all_beads = list_retrying(&client, every).await;
    let convergence = converge(&schedule.target, &schedule.all_ids, &schedule.failed_starts, schedule.switch_to).await;
    let members = match convergence {
        Ok((ends, members)) => {
            let mut report = report.lock().expect("healed report lock");
            report.convergence = Ok(ends.iter().map(|node| (node.id, node.applied, node.digest)).collect());
            report.rejoining_at_end = ends.iter().filter(|node| node.rejoining).map(|node| node.id).collect();
            report.apply_versions =
                ends.iter().map(|node| (node.id, node.apply_version.0, node.apply_version.1)).collect();
            report.divergences = ends
                .iter()
                .filter(|node| !node.divergence.is_empty())
                .map(|node| (node.id, node.divergence.clone()))
                .collect();
            report.members = members.clone();
            members
        }
        Err(error) => {
            report.lock().expect("healed report lock").convergence = Err(error);
            return Ok(());
        }
    };
    let removed: Vec<u64> = schedule.node_ids.iter().copied().filter(|id| !members.contains(id)).collect();
    report.lock().expect("healed report lock").removed_serving = removed_serving(&schedule.target, &removed).await;
    Ok(())
}

/// Those of the `removed` nodes that still answer their status as members after
/// [`REMOVED_TOLD_MS_MAX`], with their answer. A node that refuses (a removed node answers every
/// request with the reason), or does not answer at all (it stopped, or refused to start on its
/// marked directory), is told.
async fn removed_serving(target: &Target, removed: &[u64]) -> Vec<(u64, String)> {
    let bound = target.now() + Duration::from_millis(REMOVED_TOLD_MS_MAX);
    loop {
        let mut serving = Vec::new();
        for id in removed {
            // Refused (a removed node answers every request with the reason), or no answer (it
            // stopped, or refused to start on its marked directory): told.
            if let Ok(status) = target.status(*id, false, Duration::from_millis(POLL_MS * 5)).await {
                serving.push((*id, format!("it answered its status, leader {}", status.leader_id)));
            }
        }
        if serving.is_empty() || target.now() >= bound {
            return serving;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

/// Registers the reader as a turmoil client; its findings land in the returned report.
pub fn register(sim: &mut turmoil::Sim<'_>, schedule: &Schedule, history: &SharedHistory) -> Arc<Mutex<Healed>> {
    let report = Arc::new(Mutex::new(Healed::default()));
    sim.client("reader", reader(schedule.clone(), history.clone(), report.clone()));
    sim.client("orderer", orderer(schedule.clone()));
    report
}

/// A task of a real run, and how it ended.
pub type Task = tokio::task::JoinHandle<Result<(), String>>;

/// Starts the reader and the orderer as tasks against a real cluster; the reader's findings land
/// in the returned report once its task (the first handle) ends.
pub fn spawn(schedule: &Schedule, history: &SharedHistory) -> (Arc<Mutex<Healed>>, [Task; 2]) {
    let report = Arc::new(Mutex::new(Healed::default()));
    let reader = reader(schedule.clone(), history.clone(), report.clone());
    let orderer = orderer(schedule.clone());
    let tasks = [
        tokio::spawn(async move { reader.await.map_err(|error| error.to_string()) }),
        tokio::spawn(async move { orderer.await.map_err(|error| error.to_string()) }),
    ];
    (report, tasks)
}
