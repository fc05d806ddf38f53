//! One simulation run: a cluster, its agents, the nemesis and the healed-phase reader, all
//! driven step by step from one seed, then checked.
//!
//! A run has a fault phase (`duration` of simulated time, the nemesis acting), then a healed
//! phase: every fault is removed, agents stop shortly after, the reader checks liveness, reads
//! everything back and waits for convergence. The checkers then judge the whole run.
//!
//! Invariant: everything a run does follows from its [`RunConfig`]: turmoil's RNG, each node's
//! openraft RNG, tokio's per-host scheduling RNG (`--cfg tokio_unstable`), the agents', the
//! nemesis' and the simulated clock. The trace it returns is the same, byte for byte, for the
//! same configuration.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::checkers::{self, Evidence, Violation};
use crate::cluster::{self, ClusterSetup, DiskKind, Mutation, Observations, Reports};
use crate::healed::{self, Healed, Schedule};
use crate::history::{Op, OpResult};
use crate::nemesis::{Fault, Nemesis};
use crate::operator::{self, Operator};
use crate::swarm::Plan;
use crate::target::Target;
use crate::timeline::Timeline;
use crate::workload::{self, Agents};

/// How long agents keep working after the faults are removed (simulated time).
pub const AGENTS_AFTER_HEAL_MS: u64 = 2_000;
/// Slack past every bound of the healed phase before turmoil itself stops the run.
pub const SIMULATION_SLACK_MS: u64 = 120_000;

/// Everything that defines a run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The seed.
    pub seed: u64,
    /// Cluster size.
    pub nodes: u64,
    /// Length of the fault phase (simulated time).
    pub duration: Duration,
    /// The faults the nemesis may inject.
    pub faults: Vec<Fault>,
    /// The storage.
    pub disk: DiskKind,
    /// A planted bug, if any.
    pub mutation: Option<Mutation>,
    /// Number of agents.
    pub agents: usize,
    /// Some creates carry metadata near the request size limit (see [`workload::LARGE_BEADS_MAX`]).
    pub large_values: bool,
    /// Draw the faults, the nemesis' pace and the workload from the seed ([`Plan`]).
    pub swarm: bool,
    /// The nemesis injects at most this many faults (a shrunk run; restarts and repairs of what
    /// it did are not counted).
    pub max_faults: Option<usize>,
    /// At most this many agents, whatever the configuration or the swarm draw (a shrunk run).
    pub max_agents: Option<usize>,
    /// Keep the whole trace in the report, with the run's [`Timeline`].
    pub keep_trace: bool,
    /// Keep what each node logged (at info and above) in the report ([`crate::logs`]).
    pub node_logs: bool,
}

impl RunConfig {
    /// The defaults for `seed`: 3 nodes, 10 s of faults, the default faults, memory disks,
    /// 5 agents.
    pub fn new(seed: u64) -> RunConfig {
        RunConfig {
            seed,
            nodes: 3,
            duration: Duration::from_secs(10),
            faults: Fault::DEFAULT.to_vec(),
            disk: DiskKind::Memory,
            mutation: None,
            agents: 5,
            large_values: false,
            swarm: false,
            max_faults: None,
            max_agents: None,
            keep_trace: false,
            node_logs: false,
        }
    }

    /// The simulator's options that make this run, but its seed.
    pub fn cli_args(&self) -> Vec<String> {
        let faults: Vec<String> = self.faults.iter().map(|fault| format!("{fault:?}").to_lowercase()).collect();
        let mut args: Vec<String> = vec![
            "--nodes".into(),
            self.nodes.to_string(),
            "--duration".into(),
            if self.duration.subsec_millis() == 0 {
                format!("{}s", self.duration.as_secs())
            } else {
                format!("{}ms", self.duration.as_millis())
            },
            "--agents".into(),
            self.agents.to_string(),
            "--disk".into(),
            format!("{:?}", self.disk).to_lowercase(),
            "--faults".into(),
            if faults.is_empty() { "none".into() } else { faults.join(",") },
        ];
        if self.large_values {
            args.push("--large-values".into());
        }
        if self.swarm {
            args.push("--swarm".into());
        }
        if let Some(possible) = self.mutation.and_then(|mutation| clap::ValueEnum::to_possible_value(&mutation)) {
            args.extend(["--mutation".into(), possible.get_name().to_string()]);
        }
        if let Some(max) = self.max_faults {
            args.extend(["--max-faults".into(), max.to_string()]);
        }
        if let Some(max) = self.max_agents {
            args.extend(["--max-agents".into(), max.to_string()]);
        }
        args
    }

    /// The environment the simulator needs for this run, as a shell prefix: the upgrade fault
    /// runs only in the build that applies two versions.
    pub fn env_prefix(&self) -> &'static str {
        if self.faults.contains(&Fault::Upgrade) { "STRAND_TEST_APPLY_NEXT=1 " } else { "" }
    }

    /// The command line that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "{}cargo run --bin simulation -- --seed {} {} --verbose",
            self.env_prefix(),
            self.seed,
            self.cli_args().join(" ")
        )
    }
}

/// What a run counted: its operations, and what the nemesis, the operator and the controllers
/// did. The same in a run's report and in its record of a sweep.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Operations the agents and the reader completed or gave up on.
    pub ops: usize,
    /// Operations whose outcome stayed unknown.
    pub unknown_ops: usize,
    /// Large creates the cluster acknowledged.
    pub large_creates: usize,
    /// Order firings the healed reader read back (their tracking beads).
    pub order_firings: usize,
    /// Orchestration operations (cook, sling, hook, mail, purge) the cluster acknowledged.
    pub orchestration_acks: usize,
    /// Leased claims the lease agents were granted.
    pub lease_grants: usize,
    /// Closes fenced by a lease that was no longer the bead's, refused as they must be.
    pub stale_fences_refused: usize,
    /// Controller actions the nodes applied, as the controller-term checker counted them.
    pub controller_actions: usize,
    /// Terms in which controllers acted.
    pub controller_terms: usize,
    /// Faults injected.
    pub faults: usize,
    /// Nodes whose storage the nemesis damaged or wiped.
    pub damaged_nodes: usize,
    /// Wipes of a node's whole storage (each node then rejoined empty).
    pub wipes: usize,
    /// Membership changes the operator made: the spare added and promoted, a member removed
    /// (leader moves not counted).
    pub membership_changes: usize,
    /// Nodes the nemesis upgraded to the newer build.
    pub upgrades: usize,
    /// Whether the run switched its apply version (the upgrade checker saw it).
    pub switched: bool,
    /// Canaries applied.
    pub canaries_applied: usize,
    /// Canaries refused.
    pub canaries_refused: usize,
    /// Nodes whose start failed (they stayed down).
    pub failed_starts: usize,
    /// Fault points that fired inside the nodes' code ([`Fault::Code`]).
    pub fault_points: usize,
    /// Of them, log writes failed on purpose (each stopped a node, which the nemesis restarted).
    pub failed_writes: usize,
}

/// What a run did and found.
#[derive(Debug)]
pub struct RunReport {
    /// The configuration.
    pub config: RunConfig,
    /// What it counted.
    pub counts: Counts,
    /// Simulated time the run covered.
    pub simulated: Duration,
    /// Wall-clock time it took.
    pub wall: Duration,
    /// Hash of the trace.
    pub trace_hash: u64,
    /// The trace, when asked for.
    pub trace: Vec<String>,
    /// What the checkers found.
    pub violations: Vec<Violation>,
    /// What the run injected and drove (drawn from the seed in a swarm run).
    pub plan: Plan,
    /// Operations, faults and leaders over simulated time, when the trace was kept.
    pub timeline: Option<Timeline>,
    /// What each node logged, by node, when asked for.
    pub node_logs: BTreeMap<u64, Vec<String>>,
}

struct Trace {
    lines: Vec<String>,
    keep: bool,
    hasher: std::collections::hash_map::DefaultHasher,
}

impl Trace {
    fn push(&mut self, line: String) {
        line.hash(&mut self.hasher);
        if self.keep {
            self.lines.push(line);
        }
    }
}

/// Whether the cluster has formed: a node applied an entry past its first membership (index 0),
/// which commits only once a majority holds the log that begins with it.
fn formed(observations: &Observations) -> bool {
    let observations = observations.lock().expect("observations lock");
    observations.iter().any(|observation| observation.applied.as_ref().is_some_and(|(index, _, _)| *index >= 1))
}

fn current_leader(observations: &Observations) -> Option<u64> {
    let observations = observations.lock().expect("observations lock");
    let mut latest: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
    for observation in observations.iter() {
        latest.insert(observation.node, (observation.term, observation.leader));
    }
    latest.into_iter().filter(|(_, (_, leader))| *leader).max_by_key(|(_, (term, _))| *term).map(|(node, _)| node)
}

thread_local! {
    /// The run this thread is simulating, for the panic hook.
    static RUNNING: std::cell::RefCell<Option<RunConfig>> = const { std::cell::RefCell::new(None) };
    /// Panics caught in the simulated nodes' openraft tasks during the current run.
    static NODE_PANICS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Installs, once per process, a panic hook that names the seed being simulated and how to replay
/// it, before the default hook prints where the panic happened. A panic in a node's openraft task
/// (an assertion openraft makes, say: the workspace builds it with its debug assertions on) is
/// caught by the runtime's probe (`raft_store::runtime`) and becomes a violation of the run; any
/// other panic inside a host stops the whole simulation (turmoil shuts the host's runtime down
/// and the unwinding aborts the process), and this line is then what says which seed it was.
fn name_the_seed_on_panic() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            RUNNING.with(|running| {
                if let Some(config) = &*running.borrow() {
                    eprintln!(
                        "seed {}: a simulated node panicked; replay it with:\n  {}",
                        config.seed,
                        config.replay_command()
                    );
                }
            });
            previous(info);
        }));
    });
}

/// Runs one seed and checks it.
pub fn run(config: &RunConfig) -> Result<RunReport, String> {
    name_the_seed_on_panic();
    RUNNING.with(|running| *running.borrow_mut() = Some(config.clone()));
    NODE_PANICS.with(|panics| panics.borrow_mut().clear());
    raft_store::runtime::observe_panics(Some(Box::new(|text| {
        NODE_PANICS.with(|panics| panics.borrow_mut().push(text))
    })));
    let report = run_seed(config);
    raft_store::runtime::observe_panics(None);
    RUNNING.with(|running| *running.borrow_mut() = None);
    report
}

/// Whether this simulator can run `config` at all (the upgrade fault needs the apply-next mode);
/// a sweep asks before it runs any seed.
pub fn check(config: &RunConfig) -> Result<(), String> {
    older_build(&Plan::of(config)).map(|_| ())
}

/// Under [`Fault::Upgrade`], the apply versions of the older build: one fewer than this build's.
fn older_build(plan: &Plan) -> Result<Option<api::version::ApplyRange>, String> {
    if !plan.faults.contains(&Fault::Upgrade) {
        return Ok(None);
    }
    let build = api::version::build_apply_versions();
    if build.max != api::version::NEXT_APPLY_VERSION {
        return Err(format!(
            "the upgrade fault needs a simulator that applies a version no other build applies, and this one applies {build} only: \
             run a debug build with STRAND_TEST_APPLY_NEXT=1 (the test-only mode that applies version {}), \
             or leave upgrade out of --faults",
            api::version::NEXT_APPLY_VERSION
        ));
    }
    Ok(Some(api::version::ApplyRange { min: build.min, max: build.max - 1 }))
}

fn run_seed(config: &RunConfig) -> Result<RunReport, String> {
    let started = Instant::now();
    let plan = Plan::of(config);
    let older_build = older_build(&plan)?;
    // Before the hosts are registered: turmoil starts each host's software as it registers it.
    if config.node_logs {
        crate::logs::start();
    }
    let ids: Vec<u64> = (1..=config.nodes).collect();
    // Under the membership fault, one spare node, which the operator adds.
    let spares: Vec<u64> = if plan.faults.contains(&Fault::Membership) { vec![config.nodes + 1] } else { Vec::new() };
    let nodes = cluster::make_nodes(config.nodes, spares.len() as u64)
        .map_err(|error| format!("cannot make node directories: {error}"))?;
    let heal_at = config.duration;
    let agents_stop = heal_at + Duration::from_millis(AGENTS_AFTER_HEAL_MS);
    let agents_done_at = agents_stop + Duration::from_millis(workload::CALL_DEADLINE_MS * 2);
    let bounds = healed::WRITE_AFTER_HEAL_MS_MAX + healed::CONVERGENCE_MS_MAX + SIMULATION_SLACK_MS;
    let mut sim = turmoil::Builder::new()
        .rng_seed(config.seed)
        .simulation_duration(agents_done_at + Duration::from_millis(bounds))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(0))
        .max_message_latency(Duration::from_millis(crate::nemesis::LATENCY_MS_MAX))
        .tcp_capacity(4096)
        .enable_random_order()
        .build();

    let setup = ClusterSetup {
        ids: ids.clone(),
        spares: spares.clone(),
        disk_kind: config.disk,
        mutation: config.mutation,
        seed: config.seed,
        older_build,
    };
    let reports = Reports::default();
    let (observations, failed_starts) = (reports.observations.clone(), reports.failed_starts.clone());
    for node in &nodes {
        cluster::register(&mut sim, &setup, node, &reports);
    }
    let history = workload::new_history(&Target::Simulated);
    let known = Arc::new(Mutex::new(Vec::new()));
    let large_left = Arc::new(AtomicUsize::new(if config.large_values { workload::LARGE_BEADS_MAX } else { 0 }));
    let agents = Agents {
        count: plan.agents,
        node_ids: ids.clone(),
        seed: config.seed,
        stop_at: agents_stop,
        large_left,
        canaries: older_build.is_some(),
        mix: plan.mix,
        target: Target::Simulated,
    };
    workload::register(&mut sim, &agents, &history, &known);
    let schedule = Schedule {
        node_ids: ids.clone(),
        all_ids: nodes.iter().map(|node| node.id).collect(),
        heal_at,
        agents_done_at,
        seed: config.seed,
        agent: plan.agents,
        failed_starts: failed_starts.clone(),
        switch_to: older_build.map(|_| api::version::build_apply_versions().max),
        target: Target::Simulated,
    };
    let healed_report = healed::register(&mut sim, &schedule, &history);
    let operator = spares.first().map(|spare| {
        let operator = Operator {
            members: ids.clone(),
            spare: *spare,
            start_spare: nodes[(*spare - 1) as usize].start.clone(),
            stop_at: heal_at,
            seed: config.seed,
        };
        (operator::register(&mut sim, &operator), *spare)
    });

    let sealing = Mutation::sealing(config.mutation);
    let mut nemesis = Nemesis::new(config.seed, &plan.faults, &ids, &failed_starts, sealing, heal_at);
    nemesis.action_gap_ms = plan.action_gap_ms;
    nemesis.max_faults = config.max_faults;
    let mut trace = Trace { lines: Vec::new(), keep: config.keep_trace, hasher: Default::default() };
    if plan.drawn {
        trace.push(format!("swarm: {}", plan.describe()));
    }
    let mut healed = false;
    let mut stopped = None;
    let mut fault_events: Vec<(Duration, String)> = Vec::new();
    // Observations already looked at for a node stopped by an injected write failure.
    let mut observed = 0usize;
    let code_faults = plan.faults.contains(&Fault::Code).then(|| {
        let (chances, fired) = crate::code_faults::arm(config.seed, heal_at);
        trace.push(format!("fault points: {}", chances.describe()));
        fired
    });
    loop {
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(error) => {
                stopped = Some(error.to_string());
                break;
            }
        }
        let now = sim.elapsed();
        if code_faults.is_some() {
            for event in nemesis.restart_failed_writes(&mut sim, &nodes, now, &observations, &mut observed) {
                trace.push(format!("[{:>8.3}s] nemesis: {event}", now.as_secs_f64()));
                fault_events.push((now, event));
            }
        }
        let events = if now >= heal_at && !healed {
            healed = true;
            let mut events = nemesis.heal(&mut sim);
            events.push("healed: every fault removed".into());
            events
        } else {
            nemesis.formed = nemesis.formed || formed(&observations);
            nemesis.tick(&mut sim, &nodes, now, || current_leader(&observations))
        };
        for event in events {
            trace.push(format!("[{:>8.3}s] nemesis: {event}", now.as_secs_f64()));
            fault_events.push((now, event));
        }
    }
    let simulated = sim.elapsed();
    for event in nemesis.failures_to_tell() {
        trace.push(format!("[{:>8.3}s] nemesis: {event}", simulated.as_secs_f64()));
        fault_events.push((simulated, event));
    }
    drop(sim);
    let fault_points = code_faults.as_ref().map_or(0, |fired| fired.borrow().values().sum());
    let failed_writes = code_faults
        .as_ref()
        .map_or(0, |fired| fired.borrow().get(&raft_store::faults::FaultPoint::DiskWriteFail).copied().unwrap_or(0));
    if let Some(fired) = &code_faults {
        trace.push(crate::code_faults::disarm(fired));
    }
    let node_logs = if config.node_logs { crate::logs::finish() } else { BTreeMap::new() };

    history.lock().expect("history lock").close_pending();
    let history = std::mem::take(&mut *history.lock().expect("history lock"));
    let observations = std::mem::take(&mut *observations.lock().expect("observations lock"));
    let controller_applies = std::mem::take(&mut *reports.controller_applies.lock().expect("controller applies lock"));
    let versioned_applies = std::mem::take(&mut *reports.versioned_applies.lock().expect("versioned applies lock"));
    let healed_found: Healed = healed_report.lock().expect("healed report lock").clone();
    let failed_starts = std::mem::take(&mut *failed_starts.lock().expect("failed starts lock"));
    for observation in &observations {
        trace.push(format!("[{:>8.3}s] raft: {observation:?}", observation.at.as_secs_f64()));
    }
    for apply in &controller_applies {
        trace.push(format!("controller: {apply:?}"));
    }
    for apply in &versioned_applies {
        trace.push(format!("versioned: {apply:?}"));
    }
    let operator_log = operator.as_ref().map(|(log, spare)| (log.lock().expect("operator log lock").clone(), *spare));
    let membership_changes = operator_log.as_ref().map_or(0, |(log, _)| {
        let promoted = log.steps.iter().any(|(_, asked, answer)| {
            asked.starts_with("PromoteSpare")
                && (answer.starts_with("membership") || answer.contains("a voter already"))
        });
        usize::from(log.spare_started) + usize::from(promoted) + log.removed.len()
    });
    for (at, asked, answer) in operator_log.iter().flat_map(|(log, _)| log.steps.iter()) {
        trace.push(format!("[{:>8.3}s] operator: {asked} -> {answer}", at.as_secs_f64()));
        fault_events.push((*at, format!("operator: {asked} -> {answer}")));
    }
    for entry in &history.entries {
        trace.push(entry.trace_line());
    }

    let timeline = config.keep_trace.then(|| {
        fault_events.sort_by_key(|(at, _)| *at);
        Timeline::build(
            workload::client_names(plan.agents, older_build.is_some()),
            &history.entries,
            &observations,
            fault_events,
            heal_at,
            simulated,
        )
    });
    let mut violations = Vec::new();
    if let Some(error) = stopped {
        violations.push(Violation { checker: "node", detail: format!("the simulation stopped: {error}") });
    } else {
        let evidence = Evidence {
            history: &history,
            observations: &observations,
            controller_applies: &controller_applies,
            versioned_applies: &versioned_applies,
            healed: &healed_found,
            node_ids: &nodes.iter().map(|node| node.id).collect::<Vec<_>>(),
            disks: (config.disk == DiskKind::Memory).then_some(nodes.as_slice()),
            failed_starts: &failed_starts,
            damaged: &nemesis.damaged,
            operator: operator_log.as_ref().map(|(log, spare)| (log, ids.as_slice(), *spare)),
        };
        violations = checkers::check_all(&evidence);
    }
    for text in NODE_PANICS.with(|panics| std::mem::take(&mut *panics.borrow_mut())) {
        violations
            .push(Violation { checker: "raft fatal", detail: format!("an openraft task of a node panicked: {text}") });
    }
    let unknown_ops = history.entries.iter().filter(|entry| matches!(entry.result, OpResult::Unknown(_))).count();
    let large_creates = history
        .entries
        .iter()
        .filter(|entry| matches!((&entry.op, &entry.result), (Op::CreateLarge { .. }, OpResult::Ok(_))))
        .count();
    let order_firings = healed_found.orders.as_ref().map_or(0, |found| found.tracking.len());
    let orchestration_acks = history
        .entries
        .iter()
        .filter(|entry| entry.op.is_orchestration_op() && matches!(entry.result, OpResult::Ok(_)))
        .count();
    let lease_grants = history
        .entries
        .iter()
        .filter(|entry| matches!((&entry.op, &entry.result), (Op::LeaseClaimNext { .. }, OpResult::Ok(api::outcome::Outcome::Beads(beads))) if !beads.is_empty()))
        .count();
    let stale_fences_refused = history
        .entries
        .iter()
        .filter(|entry| {
            matches!(
                (&entry.op, &entry.result),
                (Op::FencedClose { .. }, OpResult::Refused(api::outcome::Refusal::LeaseLost { .. }))
            )
        })
        .count();
    let controller = checkers::controller_terms::check(&controller_applies).1;
    let upgrade = checkers::upgrade::check(&versioned_applies, &healed_found).1;
    let counts = Counts {
        ops: history.entries.len(),
        unknown_ops,
        large_creates,
        order_firings,
        orchestration_acks,
        lease_grants,
        stale_fences_refused,
        controller_actions: controller.applied,
        controller_terms: controller.terms,
        faults: nemesis.injected,
        damaged_nodes: nemesis.damaged.len(),
        wipes: nemesis.wipes,
        membership_changes,
        upgrades: nemesis.upgrades,
        switched: upgrade.switched.is_some(),
        canaries_applied: upgrade.canaries_applied,
        canaries_refused: upgrade.canaries_refused,
        failed_starts: failed_starts.len(),
        fault_points,
        failed_writes,
    };
    Ok(RunReport {
        config: config.clone(),
        counts,
        simulated,
        wall: started.elapsed(),
        trace_hash: trace.hasher.finish(),
        trace: trace.lines,
        violations,
        plan,
        timeline,
        node_logs,
    })
}
