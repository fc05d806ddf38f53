//! The container run: a Jepsen-style test of the real build in real containers, checked by the
//! simulator's own checkers.
//!
//! It starts the `deploy/` compose cluster (three containers on a private bridge network, mutual
//! TLS between the nodes, TLS and auth for clients) under a compose project of its own, drives it
//! with the simulator's agents ([`crate::workload`]: creates, claims, `ready --claim`, leased
//! claims with fenced closes, linearizable reads, retries of writes whose answers were lost, the
//! orchestration agent) over TLS with the admin token, lets the [`nemesis`] loose on the
//! containers and the network, polls every node's status for the Raft checkers ([`observe`]),
//! heals everything, runs the simulator's healed-phase reader ([`crate::healed`]) and judges the
//! history with [`crate::checkers::check_all`], the same call the simulator makes.
//!
//! A failing run prints its seed, the nemesis schedule and the first violation, and keeps the
//! history, the schedule and every container's log in its artifacts directory. The containers,
//! network and volumes go whatever happens ([`docker::Deployment`] removes them on drop;
//! [`docker::remove_abandoned`] removes those of a run killed before it could).

pub mod docker;
pub mod nemesis;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::checkers::{self, Evidence, Violation};
use crate::cluster::Observation;
use crate::healed::{self, Healed, Schedule};
use crate::history::{History, OpResult};
use crate::target::{RealCluster, Target};
use crate::workload::{self, Agents, Mix};
use docker::Deployment;
use nemesis::Nemesis;

/// The first members.
pub const NODES: [u64; 3] = [1, 2, 3];
/// How often the observer asks every node its status.
pub const OBSERVE_MS: u64 = 250;
/// How long the agents go on after the heal, so the history holds calls to a healed cluster.
pub const AGENTS_AFTER_HEAL_MS: u64 = 2_000;
/// Longest wall time for the healed-phase reader, once the agents are done: its own bounds
/// (first write, convergence, the removed nodes told) and the lease bound.
pub const READER_MS_MAX: u64 =
    healed::WRITE_AFTER_HEAL_MS_MAX + healed::CONVERGENCE_MS_MAX + healed::REMOVED_TOLD_MS_MAX + 30_000;

/// What one run does.
#[derive(Clone, Debug)]
pub struct Config {
    /// Seeds the nemesis, the agents and the schedule.
    pub seed: u64,
    /// Length of the fault phase.
    pub duration: Duration,
    /// Concurrent agents (beside the lease agents and the orchestration agent).
    pub agents: usize,
    /// Whether node 4 joins and a first member is removed during the faults.
    pub membership: bool,
    /// Whether the members are upgraded one by one to the newer build during the faults.
    pub upgrade: bool,
    /// The planted bug: the newer build decides its canary rule by itself, not by the
    /// replicated apply version. The checkers must catch it.
    pub ungated_canary: bool,
    /// The strand binary the image is built from.
    pub strand: PathBuf,
    /// `deploy/`.
    pub deploy_dir: PathBuf,
    /// Where a failing run keeps its history, schedule and logs (and a passing one with
    /// `keep_artifacts`).
    pub artifacts: PathBuf,
    /// Keep the artifacts of a passing run too.
    pub keep_artifacts: bool,
    /// How long each member has to answer its status once everything is healed.
    pub back_bound: Duration,
    /// For the harness's own test: this node's container is removed at the end of the fault
    /// phase, so it cannot come back.
    pub lose_node: Option<u64>,
}

/// What one run found.
#[derive(Clone, Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Operations in the history (the final reads included).
    pub operations: usize,
    /// Of those, the ones whose outcome is unknown (a timeout, a lost answer).
    pub unknown: usize,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, usize>,
    /// Membership changes acknowledged (node 4 added, a member removed).
    pub operator_steps: Vec<String>,
    /// Each live member's apply version at the end, by node.
    pub apply_versions: BTreeMap<u64, u32>,
    /// What the checkers found.
    pub violations: Vec<Violation>,
    /// The nemesis schedule, one line per step.
    pub schedule: Vec<String>,
    /// Where the artifacts are, when kept.
    pub artifacts: Option<PathBuf>,
    /// Wall time of the whole run.
    pub wall: Duration,
}

impl Report {
    /// The one-line figures of the run.
    pub fn figures(&self) -> String {
        let faults: Vec<String> = self.faults.iter().map(|(kind, count)| format!("{kind} {count}")).collect();
        format!(
            "seed {}: {} operations checked, {} unknown; faults: {} ({}); {} violation(s); {:.0} s",
            self.seed,
            self.operations,
            self.unknown,
            self.faults.values().sum::<usize>(),
            faults.join(", "),
            self.violations.len(),
            self.wall.as_secs_f64()
        )
    }

    /// The report as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "seed": self.seed,
            "operations": self.operations,
            "unknown": self.unknown,
            "faults": self.faults,
            "operator": self.operator_steps,
            "apply_versions": self.apply_versions,
            "violations": self.violations.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "schedule": self.schedule,
            "artifacts": self.artifacts,
            "wall_s": self.wall.as_secs_f64(),
        })
    }
}

/// Polls every node of `real` (its `target`) until `stop`, recording what each says of itself.
async fn observe(
    real: Arc<RealCluster>,
    target: Target,
    stop: Arc<AtomicBool>,
    observations: Arc<Mutex<Vec<Observation>>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let ids: Vec<u64> = real.endpoints.lock().expect("endpoints lock").keys().copied().collect();
        let asked = ids.iter().map(|id| {
            let target = target.clone();
            async move { (*id, target.status(*id, false, Duration::from_millis(OBSERVE_MS * 4)).await) }
        });
        for (id, answer) in futures::future::join_all(asked).await {
            let Ok(status) = answer else { continue };
            let Some(own) = status.nodes.iter().find(|node| node.id == id) else { continue };
            observations.lock().expect("observations lock").push(Observation {
                at: target.now(),
                node: id,
                term: own.term,
                leader: own.state == "leader",
                last_log_index: own.last_log_index,
                // The node's term bounds the term of the entry it applied last, so leader
                // completeness is judged on what it applied; status names no entry's proposer,
                // so state machine safety is left to the convergence checker's digests.
                applied: (own.applied_index > 0).then(|| (own.applied_index, own.term, String::new())),
                fatal: (!own.fatal_error.is_empty()).then(|| own.fatal_error.clone()),
            });
        }
        tokio::time::sleep(Duration::from_millis(OBSERVE_MS)).await;
    }
}

/// Stops the observer and takes the history, every pending call marked unknown, and the
/// observations.
async fn gather(
    stop: &AtomicBool,
    observer: tokio::task::JoinHandle<()>,
    history: &crate::history::SharedHistory,
    observations: &Mutex<Vec<Observation>>,
) -> (History, Vec<Observation>) {
    stop.store(true, Ordering::Relaxed);
    let _ = observer.await;
    let mut history = history.lock().expect("history lock");
    history.close_pending();
    (std::mem::take(&mut *history), std::mem::take(&mut *observations.lock().expect("observations lock")))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|error| format!("cannot write {}: {error}", path.display()))
}

/// Runs one seed end to end. Errs when the run could not be made (the cluster did not start); a
/// member that did not come back after the heal ends the run at once with that violation (the
/// checkers would judge a cluster short of a member); otherwise the report holds what the
/// checkers found.
pub async fn run(config: &Config) -> Result<Report, String> {
    let started = Instant::now();
    docker::remove_abandoned();
    let cluster_dir = tempfile::tempdir().map_err(|error| format!("cannot make a directory: {error}"))?;
    let ports = [free_port()?, free_port()?, free_port()?, free_port()?];
    let deployment = Arc::new(Deployment {
        deploy_dir: config.deploy_dir.clone(),
        strand: config.strand.clone(),
        cluster_dir,
        project: format!("{}{}x{}", docker::PROJECT_PREFIX, std::process::id(), config.seed),
        ports,
        ungated_canary: config.ungated_canary,
    });
    let up_deployment = deployment.clone();
    tokio::task::spawn_blocking(move || up_deployment.up())
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| format!("the compose cluster did not start: {error}"))?;
    if config.upgrade {
        deployment
            .build_next_image(config.ungated_canary)
            .map_err(|error| format!("the newer build's image was not built: {error}"))?;
    }
    let token = std::fs::read_to_string(deployment.dir().join("admin.token"))
        .map_err(|error| format!("deploy/cluster.sh up wrote no admin token: {error}"))?;
    let certs = deployment.dir().join("certs");
    let tls = api::tls::ClientTls {
        ca: certs.join("ca.pem"),
        identity: Some((certs.join("client.pem"), certs.join("client.key"))),
    };
    let endpoints: BTreeMap<u64, String> =
        NODES.iter().map(|id| (*id, format!("127.0.0.1:{}", ports[*id as usize - 1]))).collect();
    let real = Arc::new(RealCluster::new(endpoints, tls, Some(token.trim().to_string())));
    let target = Target::Real(real.clone());

    let heal_at = config.duration;
    let agents_stop = heal_at + Duration::from_millis(AGENTS_AFTER_HEAL_MS);
    let agents_done_at = agents_stop + Duration::from_millis(crate::target::REAL_CALL_DEADLINE_MS * 2);
    let history = workload::new_history(&target);
    let known = Arc::new(Mutex::new(Vec::new()));
    let agents = Agents {
        count: config.agents,
        node_ids: NODES.to_vec(),
        seed: config.seed,
        stop_at: agents_stop,
        large_left: Arc::new(AtomicUsize::new(0)),
        canaries: config.upgrade,
        mix: Mix::DEFAULT,
        target: target.clone(),
    };
    let mut all_ids = NODES.to_vec();
    if config.membership {
        all_ids.push(nemesis::SPARE);
    }
    let schedule = Schedule {
        node_ids: NODES.to_vec(),
        all_ids: all_ids.clone(),
        heal_at,
        agents_done_at,
        seed: config.seed,
        agent: config.agents,
        failed_starts: Default::default(),
        switch_to: config.upgrade.then_some(api::version::NEXT_APPLY_VERSION),
        target: target.clone(),
    };
    let (healed_report, [reader, orderer]) = healed::spawn(&schedule, &history);
    let clients = workload::spawn(&agents, &history, &known);
    let (stop, observations) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
    let observer = tokio::spawn(observe(real.clone(), target.clone(), stop.clone(), observations.clone()));

    let mut nemesis = Nemesis::new(deployment.clone(), target.clone(), NODES.to_vec(), config.seed);
    let (join_at, remove_at) = (heal_at * 2 / 10, heal_at * 4 / 10);
    let (mut joined, mut removed) = (!config.membership, !config.membership);
    // The upgrade's steps from 55 % of the fault phase on, a member each, every tenth of it.
    let mut upgrades: Vec<Duration> =
        if config.upgrade { (0..4).map(|step| heal_at * (55 + 10 * step) / 100).collect() } else { Vec::new() };
    let mut upgraded: Vec<u64> = Vec::new();
    loop {
        tokio::time::sleep(nemesis.gap()).await;
        if target.now() >= heal_at {
            break;
        }
        if upgrades.first().is_some_and(|at| target.now() >= *at) {
            upgrades.remove(0);
            if let Some(id) = nemesis.members.iter().copied().find(|id| !upgraded.contains(id)) {
                upgraded.push(id);
                nemesis.upgrade(id).await;
            }
        } else if !joined && target.now() >= join_at {
            joined = true;
            let endpoint = format!("127.0.0.1:{}", ports[3]);
            real.endpoints.lock().expect("endpoints lock").insert(nemesis::SPARE, endpoint);
            nemesis.join().await;
        } else if !removed && target.now() >= remove_at {
            removed = true;
            nemesis.remove().await;
        } else {
            nemesis.step().await;
        }
    }
    if let Some(id) = config.lose_node {
        let lost = deployment.container(id).map(|container| docker::run("docker", &["rm", "-f", &container]));
        tracing::info!(target: "containers", "node {id}'s container removed for the test: {lost:?}");
    }
    if let Err(detail) = nemesis.heal_all(&all_ids, config.back_bound).await {
        // The checkers would judge a cluster short of a member: the run fails here, naming it.
        for task in clients {
            task.abort();
        }
        reader.abort();
        orderer.abort();
        let (history, observations) = gather(&stop, observer, &history, &observations).await;
        let violations = vec![Violation { checker: "containers", detail }];
        let ends = BTreeMap::new();
        return finish(config, &deployment, &all_ids, &history, &observations, &nemesis, violations, ends, started);
    }
    // The rolling upgrade finishes once the faults are healed, if the fault phase ended first.
    for id in nemesis.members.clone() {
        if config.upgrade && !upgraded.contains(&id) {
            upgraded.push(id);
            nemesis.upgrade(id).await;
        }
    }

    let mut failures = Vec::new();
    for task in clients {
        match task.await {
            Ok((_, Ok(()))) => {}
            Ok((name, Err(error))) => failures.push(format!("{name} stopped: {error}")),
            Err(error) => failures.push(format!("a client task failed: {error}")),
        }
    }
    let reader_bound = Duration::from_millis(READER_MS_MAX) + healed::lease_bound();
    match tokio::time::timeout(reader_bound, reader).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(error))) => failures.push(format!("the healed-phase reader stopped: {error}")),
        Ok(Err(error)) => failures.push(format!("the healed-phase reader failed: {error}")),
        Err(_) => failures.push(format!("the healed-phase reader did not finish within {reader_bound:?}")),
    }
    orderer.abort();
    let (history, observations) = gather(&stop, observer, &history, &observations).await;
    let healed_found: Healed = healed_report.lock().expect("healed report lock").clone();
    let operator = &nemesis.schedule.operator;
    let evidence = Evidence {
        history: &history,
        observations: &observations,
        controller_applies: &[],
        versioned_applies: &[],
        healed: &healed_found,
        node_ids: &all_ids,
        disks: None,
        failed_starts: &BTreeMap::new(),
        damaged: &BTreeMap::new(),
        operator: config.membership.then_some((operator, &NODES[..], nemesis::SPARE)),
    };
    let mut violations = checkers::check_all(&evidence);
    violations.extend(failures.into_iter().map(|detail| Violation { checker: "harness", detail }));
    let ends = healed_found.apply_versions.iter().map(|(id, version, _)| (*id, *version)).collect();
    finish(config, &deployment, &all_ids, &history, &observations, &nemesis, violations, ends, started)
}

/// The report of a judged run; its artifacts kept when it failed or when asked.
#[allow(clippy::too_many_arguments)]
fn finish(
    config: &Config,
    deployment: &Deployment,
    all_ids: &[u64],
    history: &History,
    observations: &[Observation],
    nemesis: &Nemesis,
    violations: Vec<Violation>,
    apply_versions: BTreeMap<u64, u32>,
    started: Instant,
) -> Result<Report, String> {
    let operator = &nemesis.schedule.operator;
    let schedule: Vec<String> =
        nemesis.schedule.events.iter().map(|(at, what)| format!("[{:>8.3}s] {what}", at.as_secs_f64())).collect();
    let mut report = Report {
        seed: config.seed,
        operations: history.entries.len(),
        unknown: history.entries.iter().filter(|entry| matches!(entry.result, OpResult::Unknown(_))).count(),
        faults: nemesis.schedule.applied.clone(),
        operator_steps: operator.steps.iter().map(|(_, asked, answer)| format!("{asked} -> {answer}")).collect(),
        apply_versions,
        violations,
        schedule,
        artifacts: None,
        wall: Duration::ZERO,
    };
    if !report.violations.is_empty() || config.keep_artifacts {
        keep_artifacts(config, deployment, all_ids, history, observations, &report)?;
        report.artifacts = Some(config.artifacts.clone());
    }
    report.wall = started.elapsed();
    Ok(report)
}

/// Writes the history, the schedule, the violations, the observations and every container's log
/// into the artifacts directory.
fn keep_artifacts(
    config: &Config,
    deployment: &Deployment,
    ids: &[u64],
    history: &History,
    observations: &[Observation],
    report: &Report,
) -> Result<(), String> {
    let dir = &config.artifacts;
    std::fs::create_dir_all(dir.join("logs")).map_err(|error| format!("cannot make {}: {error}", dir.display()))?;
    let entries: Vec<String> = history.entries.iter().map(crate::history::Entry::trace_line).collect();
    write(&dir.join("history.txt"), &(entries.join("\n") + "\n"))?;
    write(&dir.join("schedule.txt"), &(report.schedule.join("\n") + "\n"))?;
    let violations: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
    write(&dir.join("violations.txt"), &(violations.join("\n") + "\n"))?;
    let seen: Vec<String> = observations.iter().map(|seen| format!("{seen:?}")).collect();
    write(&dir.join("observations.txt"), &(seen.join("\n") + "\n"))?;
    write(&dir.join("report.json"), &format!("{:#}\n", report.json()))?;
    for id in ids {
        if deployment.container(*id).is_some() {
            deployment.save_logs(*id, &dir.join("logs").join(format!("node{id}.log")))?;
        }
    }
    Ok(())
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|error| format!("no free port: {error}"))?;
    Ok(listener.local_addr().map_err(|error| error.to_string())?.port())
}
