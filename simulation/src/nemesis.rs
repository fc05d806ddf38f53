//! The nemesis: faults injected between simulation steps, every choice drawn from the run's
//! seeded RNG, so a seed replays the same faults at the same simulated instants.
//!
//! Faults: symmetric and one-way partitions, an isolated leader, a majority/minority split,
//! message delay and loss on links, process crash and restart (the memory disk dropping a
//! seeded share of its unsynced writes), a node's clock jumping forward, damage to a stopped
//! node's synced storage ([`Fault::Corrupt`], see [`crate::damage`]), and the loss of a node's
//! whole storage ([`Fault::Wipe`]): the node crashes, everything it stored is gone, and it
//! restarts empty with `rejoin`, as the README's recovery says. At the end of the fault phase
//! [`Nemesis::heal`] removes them all; clock jumps stay, as a real clock that jumped would until
//! an operator fixed it, and so does damage, as on a real disk.
//!
//! Under [`Fault::Upgrade`] the nemesis also follows a plan of its own, drawn apart from its other
//! choices: it upgrades each first member in turn at even steps through the fault phase, so that
//! every member runs the newer build before healing (one whose start failed stays as it was).
//!
//! Invariant: the storage of at most a minority of the nodes is ever damaged or wiped
//! ([`Nemesis::damaged_nodes_max`]), so a majority with intact storage remains to keep the cluster
//! live and to hold every acknowledged write. A node is wiped only while no wiped node is still
//! rejoining (its rejoin marker is set), one at a time, as an operator replaces one disk at a time,
//! and only once the cluster has formed ([`Nemesis::formed`]): before, no member holds anything
//! to lose, and a lowest id that lost its data after it stood for election leaves a cluster that
//! can never form (the members it asked remember the vote, and no one holds a membership), whose
//! recovery is to start every member again on empty data directories.
//! A node whose start failed ([`cluster::FailedStarts`]) is down for good: the nemesis neither
//! crashes nor restarts it again, and says so in the trace once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use turmoil::Sim;

use crate::cluster::{self, FailedStarts, SimNode};
use crate::damage::{self, Sealing};

/// Shortest pause between two nemesis actions (simulated time).
pub const ACTION_GAP_MS_MIN: u64 = 300;
/// Longest pause between two nemesis actions (simulated time).
pub const ACTION_GAP_MS_MAX: u64 = 2_000;
/// Longest time a crashed node stays down (simulated time).
pub const DOWN_MS_MAX: u64 = 3_000;
/// Message latency on a healthy link.
pub const LATENCY_MS_MAX: u64 = 2;
/// Longest latency the nemesis puts on a slow link.
pub const SLOW_LATENCY_MS_MAX: u64 = 300;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Fault {
    /// Symmetric partitions: a random split, a majority/minority split, an isolated leader.
    Partition,
    /// One-way partitions: one node cannot reach another, but hears from it.
    Oneway,
    /// Message delay and loss on random links.
    Lossy,
    /// Process crash, then restart from what the disk kept.
    Crash,
    /// A node's clock jumps forward.
    Clock,
    /// A node crashes, and while it is down a few bytes of its synced storage are flipped or
    /// zeroed (a log entry, a meta value, a state record, or its snapshot file).
    Corrupt,
    /// A node crashes and its whole storage is lost; it restarts empty with `rejoin` and must
    /// catch up from the leader.
    Wipe,
    /// Membership changes while the other faults happen: the operator ([`crate::operator`])
    /// adds a spare node as a learner, promotes it, moves the leader, removes a first member and
    /// moves the leader again. Not an action of the nemesis itself.
    Membership,
    /// A rolling upgrade under the other faults: every node starts on the older build (it
    /// applies one version fewer, see [`crate::cluster::ClusterSetup::older_build`]) and the
    /// nemesis upgrades one first member at a time, at even steps through the fault phase, in a
    /// seeded order: it crashes the node (if up) and the node restarts on the newer build. A
    /// spare joins on the newer build. Needs a debug simulator in the test-only apply-next mode
    /// (`STRAND_TEST_APPLY_NEXT=1`); not in [`Fault::ALL`], since a build applies one version only
    /// outside that mode.
    Upgrade,
    /// Faults inside the node's own code: the fault points of `raft_store::faults` (a delayed
    /// apply, a delayed log append, a slow snapshot build, a response lost after its write) fire
    /// with chances drawn from the seed ([`crate::code_faults`]). Not an action of the nemesis;
    /// not in [`Fault::ALL`], whose seeds stay as they were.
    Code,
}

impl Fault {
    /// Every fault kind a default build runs: all but [`Fault::Upgrade`].
    pub const ALL: [Fault; 8] = [
        Fault::Partition,
        Fault::Oneway,
        Fault::Lossy,
        Fault::Crash,
        Fault::Clock,
        Fault::Corrupt,
        Fault::Wipe,
        Fault::Membership,
    ];
    /// The faults a run injects unless told otherwise.
    pub const DEFAULT: [Fault; 5] = [Fault::Partition, Fault::Oneway, Fault::Lossy, Fault::Crash, Fault::Clock];
}

/// The nemesis of one run.
pub struct Nemesis {
    rng: StdRng,
    faults: Vec<Fault>,
    ids: Vec<u64>,
    next_at: Duration,
    down_until: BTreeMap<u64, Duration>,
    cut: BTreeSet<(u64, u64)>,
    slow: BTreeSet<(u64, u64)>,
    failed_starts: FailedStarts,
    sealing: Sealing,
    /// Failed starts already put in the trace.
    failures_told: BTreeSet<u64>,
    /// Faults injected so far.
    pub injected: usize,
    /// What was damaged on each node's storage, by node (a wipe included).
    pub damaged: BTreeMap<u64, Vec<String>>,
    /// Wipes so far.
    pub wipes: usize,
    /// Under [`Fault::Upgrade`]: when each first member is upgraded, earliest first.
    upgrades_due: Vec<(Duration, u64)>,
    /// Nodes upgraded so far.
    pub upgrades: usize,
    /// The pause between two actions is drawn from this range, in simulated milliseconds
    /// ([`ACTION_GAP_MS_MIN`] to [`ACTION_GAP_MS_MAX`] unless a swarm run drew its own).
    pub action_gap_ms: (u64, u64),
    /// Once this many faults are injected, the nemesis injects no more (a shrunk run).
    pub max_faults: Option<usize>,
    /// Whether the cluster has formed: a node applied an entry past its first membership, so a
    /// majority holds that membership. No node is wiped before.
    pub formed: bool,
}

impl Nemesis {
    /// A nemesis over these nodes, drawing from `seed`; it leaves the nodes of `failed_starts`
    /// down, and damages storage with `sealing`. Under [`Fault::Upgrade`] it upgrades every first
    /// member within `fault_phase`.
    pub fn new(
        seed: u64,
        faults: &[Fault],
        ids: &[u64],
        failed_starts: &FailedStarts,
        sealing: Sealing,
        fault_phase: Duration,
    ) -> Nemesis {
        let upgrades_due = if faults.contains(&Fault::Upgrade) {
            // The order has a generator of its own; the upgrades' crashes draw from the nemesis'.
            let mut order = ids.to_vec();
            rand::seq::SliceRandom::shuffle(
                order.as_mut_slice(),
                &mut StdRng::seed_from_u64(seed ^ 0x0075_7067_7261_6465),
            );
            let step = fault_phase / (ids.len() as u32 + 1);
            order.into_iter().enumerate().map(|(rank, id)| (step * (rank as u32 + 1), id)).collect()
        } else {
            Vec::new()
        };
        Nemesis {
            rng: StdRng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7300),
            // The operator makes the membership changes, the upgrades follow their own plan and
            // the fault points fire in the node's code: none is a random action.
            faults: faults
                .iter()
                .copied()
                .filter(|fault| !matches!(fault, Fault::Membership | Fault::Upgrade | Fault::Code))
                .collect(),
            ids: ids.to_vec(),
            next_at: Duration::from_millis(1_000),
            down_until: BTreeMap::new(),
            cut: BTreeSet::new(),
            slow: BTreeSet::new(),
            failed_starts: failed_starts.clone(),
            sealing,
            failures_told: BTreeSet::new(),
            injected: 0,
            damaged: BTreeMap::new(),
            wipes: 0,
            upgrades_due,
            upgrades: 0,
            action_gap_ms: (ACTION_GAP_MS_MIN, ACTION_GAP_MS_MAX),
            max_faults: None,
            formed: false,
        }
    }

    /// Acts if it is time to; returns what it did, for the trace. `leader` answers the current
    /// leader; it is asked only when a partition may isolate it (it walks every observation).
    pub fn tick(
        &mut self,
        sim: &mut Sim<'_>,
        nodes: &[SimNode],
        now: Duration,
        leader: impl FnOnce() -> Option<u64>,
    ) -> Vec<String> {
        let mut events = self.failures_to_tell();
        events.extend(self.restart_due(sim, now));
        events.extend(self.upgrade_due(sim, nodes, now));
        if now < self.next_at || self.faults.is_empty() || self.max_faults.is_some_and(|max| self.injected >= max) {
            return events;
        }
        let (gap_min, gap_max) = self.action_gap_ms;
        self.next_at = now + Duration::from_millis(self.rng.random_range(gap_min..=gap_max));
        if self.rng.random_bool(0.4) {
            events.extend(self.repair_network(sim));
        }
        let fault = *self.faults.choose(&mut self.rng).expect("faults is not empty");
        let event = match fault {
            Fault::Partition => self.partition(sim, leader()),
            Fault::Oneway => self.oneway(sim),
            Fault::Lossy => self.lossy(sim),
            Fault::Crash => self.crash(sim, nodes, now),
            Fault::Clock => self.jump_clock(nodes),
            Fault::Corrupt => self.corrupt(sim, nodes, now),
            Fault::Wipe => self.wipe(sim, nodes, now),
            Fault::Membership | Fault::Upgrade | Fault::Code => None,
        };
        if let Some(event) = event {
            self.injected += 1;
            events.push(event);
        }
        events
    }

    /// The nodes whose start failed.
    fn failed(&self) -> BTreeSet<u64> {
        self.failed_starts.lock().expect("failed starts lock").keys().copied().collect()
    }

    /// Failed starts not yet in the trace.
    pub fn failures_to_tell(&mut self) -> Vec<String> {
        let failed = self.failed_starts.lock().expect("failed starts lock").clone();
        let mut events = Vec::new();
        for (id, failure) in failed {
            if self.failures_told.insert(id) {
                events.push(format!("n{id} failed to start and stays down: {}", failure.error));
            }
        }
        events
    }

    fn restart_due(&mut self, sim: &mut Sim<'_>, now: Duration) -> Vec<String> {
        let due: Vec<u64> = self.down_until.iter().filter(|(_, until)| **until <= now).map(|(id, _)| *id).collect();
        due.into_iter()
            .map(|id| {
                self.down_until.remove(&id);
                sim.bounce(cluster::host_name(id));
                format!("restart n{id}")
            })
            .collect()
    }

    fn cut_link(&mut self, sim: &Sim<'_>, from: u64, to: u64, oneway: bool) {
        if oneway {
            sim.partition_oneway(cluster::host_name(from), cluster::host_name(to));
        } else {
            sim.partition(cluster::host_name(from), cluster::host_name(to));
        }
        self.cut.insert((from, to));
    }

    fn partition(&mut self, sim: &Sim<'_>, leader: Option<u64>) -> Option<String> {
        let mut shuffled = self.ids.clone();
        rand::seq::SliceRandom::shuffle(shuffled.as_mut_slice(), &mut self.rng);
        let (side, kind) = match (self.rng.random_range(0..3), leader) {
            (0, Some(leader)) => (vec![leader], "isolate leader"),
            (1, _) => (shuffled[..self.ids.len() / 2].to_vec(), "majority/minority split"),
            _ => (shuffled[..self.rng.random_range(1..self.ids.len())].to_vec(), "split"),
        };
        let rest: Vec<u64> = self.ids.iter().copied().filter(|id| !side.contains(id)).collect();
        for a in &side {
            for b in &rest {
                self.cut_link(sim, *a, *b, false);
            }
        }
        Some(format!("{kind} {side:?} from the rest"))
    }

    fn oneway(&mut self, sim: &Sim<'_>) -> Option<String> {
        let pair: Vec<u64> = self.ids.choose_multiple(&mut self.rng, 2).copied().collect();
        self.cut_link(sim, pair[0], pair[1], true);
        Some(format!("one-way cut n{} -> n{}", pair[0], pair[1]))
    }

    fn lossy(&mut self, sim: &mut Sim<'_>) -> Option<String> {
        let pair: Vec<u64> = self.ids.choose_multiple(&mut self.rng, 2).copied().collect();
        let (a, b) = (cluster::host_name(pair[0]), cluster::host_name(pair[1]));
        let fail_rate = self.rng.random_range(0.05..0.4);
        let latency = Duration::from_millis(self.rng.random_range(LATENCY_MS_MAX..=SLOW_LATENCY_MS_MAX));
        sim.set_link_fail_rate(a.clone(), b.clone(), fail_rate);
        sim.set_link_max_message_latency(a, b, latency);
        self.slow.insert((pair[0], pair[1]));
        Some(format!("lossy link n{}-n{}: {:.0}% loss, up to {latency:?}", pair[0], pair[1], fail_rate * 100.0))
    }

    fn crash(&mut self, sim: &mut Sim<'_>, nodes: &[SimNode], now: Duration) -> Option<String> {
        let failed = self.failed();
        let running: Vec<&SimNode> =
            nodes.iter().filter(|node| !self.down_until.contains_key(&node.id) && !failed.contains(&node.id)).collect();
        let node = running.choose(&mut self.rng)?;
        Some(self.crash_node(sim, node, now))
    }

    fn crash_node(&mut self, sim: &mut Sim<'_>, node: &SimNode, now: Duration) -> String {
        sim.crash(cluster::host_name(node.id));
        let unsynced = node.disk.unsynced_batches();
        let keep = self.rng.random_range(0..=unsynced);
        node.disk.crash(keep);
        let down = Duration::from_millis(self.rng.random_range(100..=DOWN_MS_MAX));
        self.down_until.insert(node.id, now + down);
        format!("crash n{} (kept {keep} of {unsynced} unsynced batches), down {down:?}", node.id)
    }

    /// Restarts each node whose Raft core an injected disk write failure stopped
    /// (`raft_store::faults::FaultPoint::DiskWriteFail`), as an operator or a supervisor would:
    /// it crashes the node (losing what it had not synced) and brings it back after a while.
    /// Looks at the observations from `observed` on.
    pub fn restart_failed_writes(
        &mut self,
        sim: &mut Sim<'_>,
        nodes: &[SimNode],
        now: Duration,
        observations: &cluster::Observations,
        observed: &mut usize,
    ) -> Vec<String> {
        let stopped: BTreeSet<u64> = {
            let observations = observations.lock().expect("observations lock");
            let new = observations.get(*observed..).unwrap_or_default();
            *observed = observations.len();
            new.iter()
                .filter(|seen| {
                    seen.fatal.as_deref().is_some_and(|fatal| fatal.contains(raft_store::faults::INJECTED_FAILURE))
                })
                .map(|seen| seen.node)
                .collect()
        };
        let mut events = Vec::new();
        for id in stopped {
            if self.down_until.contains_key(&id) {
                continue;
            }
            let Some(node) = nodes.iter().find(|node| node.id == id) else { continue };
            let crashed = self.crash_node(sim, node, now);
            events.push(format!("n{id}'s disk write failed and its Raft core stopped; restart it: {crashed}"));
        }
        events
    }

    /// Upgrades the first members whose turn came: a node that is up crashes and restarts on the
    /// newer build after a short while; one that is down restarts on it when it comes back; one
    /// whose start failed stays down on the older build.
    fn upgrade_due(&mut self, sim: &mut Sim<'_>, nodes: &[SimNode], now: Duration) -> Vec<String> {
        let mut events = Vec::new();
        while let Some((_, id)) = self.upgrades_due.first().copied().filter(|(at, _)| *at <= now) {
            self.upgrades_due.remove(0);
            let Some(node) = nodes.iter().find(|node| node.id == id) else { continue };
            if self.failed().contains(&id) {
                events.push(format!("n{id} stays on the older build: it failed to start"));
                continue;
            }
            node.upgraded.store(true, Ordering::Relaxed);
            self.upgrades += 1;
            if self.down_until.contains_key(&id) {
                events.push(format!("upgrade n{id}: it is down and restarts on the newer build"));
            } else {
                let crashed = self.crash_node(sim, node, now);
                events.push(format!("upgrade n{id}: {crashed}, restarts on the newer build"));
            }
        }
        events
    }

    /// Most nodes whose storage may be damaged in a run: a minority.
    pub fn damaged_nodes_max(&self) -> usize {
        (self.ids.len() - 1) / 2
    }

    /// Picks a node whose storage a fault may harm (not one whose start failed; only one already
    /// harmed once a minority is) and crashes it unless it is down already; answers it and what
    /// the crash did, for the trace.
    fn stop_one_for_storage<'n>(
        &mut self,
        sim: &mut Sim<'_>,
        nodes: &'n [SimNode],
        now: Duration,
    ) -> Option<(&'n SimNode, String)> {
        let failed = self.failed();
        let room = self.damaged.len() < self.damaged_nodes_max();
        let candidates: Vec<&SimNode> = nodes
            .iter()
            .filter(|node| !failed.contains(&node.id) && (room || self.damaged.contains_key(&node.id)))
            .collect();
        let node = *candidates.choose(&mut self.rng)?;
        let crashed = if self.down_until.contains_key(&node.id) {
            String::new()
        } else {
            format!("{}; ", self.crash_node(sim, node, now))
        };
        Some((node, crashed))
    }

    /// Crashes a node (unless it is down already) and damages its storage while it is down. Only
    /// nodes already damaged qualify once a minority is.
    fn corrupt(&mut self, sim: &mut Sim<'_>, nodes: &[SimNode], now: Duration) -> Option<String> {
        let (node, crashed) = self.stop_one_for_storage(sim, nodes, now)?;
        match damage::damage_node(&mut self.rng, node, self.sealing) {
            Ok(Some(what)) => {
                self.damaged.entry(node.id).or_default().push(what.clone());
                Some(format!("{crashed}damage n{}: {what}", node.id))
            }
            Ok(None) => Some(format!("{crashed}n{} stores nothing to damage yet", node.id)),
            Err(error) => Some(format!("{crashed}could not damage n{}: {error}", node.id)),
        }
    }

    /// Crashes a node (unless it is down already), loses its whole storage, and lets it restart
    /// with `rejoin`. Only while no node is still rejoining, and within the damaged-nodes bound.
    fn wipe(&mut self, sim: &mut Sim<'_>, nodes: &[SimNode], now: Duration) -> Option<String> {
        if !self.formed || nodes.iter().any(SimNode::rejoining) {
            return None;
        }
        let (node, crashed) = self.stop_one_for_storage(sim, nodes, now)?;
        match node.wipe() {
            Ok(()) => {
                self.wipes += 1;
                self.damaged.entry(node.id).or_default().push("wiped".into());
                Some(format!("{crashed}wipe n{}: its storage is lost; it restarts with rejoin", node.id))
            }
            Err(error) => Some(format!("{crashed}could not wipe n{}: {error}", node.id)),
        }
    }

    fn jump_clock(&mut self, nodes: &[SimNode]) -> Option<String> {
        let node = nodes.choose(&mut self.rng)?;
        let jump_ms: i64 =
            if self.rng.random_bool(0.1) { 2 * 3_600_000 } else { self.rng.random_range(1_000..=600_000) };
        node.clock_offset_ms.fetch_add(jump_ms, Ordering::Relaxed);
        Some(format!("clock of n{} jumps {jump_ms} ms forward", node.id))
    }

    fn repair_network(&mut self, sim: &mut Sim<'_>) -> Vec<String> {
        let mut events = Vec::new();
        for (a, b) in std::mem::take(&mut self.cut) {
            sim.repair(cluster::host_name(a), cluster::host_name(b));
            events.push(format!("repair n{a}-n{b}"));
        }
        for (a, b) in std::mem::take(&mut self.slow) {
            let (a_host, b_host) = (cluster::host_name(a), cluster::host_name(b));
            sim.set_link_fail_rate(a_host.clone(), b_host.clone(), 0.0);
            sim.set_link_max_message_latency(a_host, b_host, Duration::from_millis(LATENCY_MS_MAX));
            events.push(format!("heal link n{a}-n{b}"));
        }
        events
    }

    /// Removes every fault but clock jumps: repairs the network and restarts crashed nodes (not
    /// those whose start failed: they stay down).
    pub fn heal(&mut self, sim: &mut Sim<'_>) -> Vec<String> {
        let mut events = self.failures_to_tell();
        events.extend(self.repair_network(sim));
        for id in std::mem::take(&mut self.down_until).into_keys() {
            sim.bounce(cluster::host_name(id));
            events.push(format!("restart n{id}"));
        }
        self.faults.clear();
        events
    }
}
