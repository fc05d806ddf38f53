//! The seed bands CI runs, the determinism check, the mutations that the checkers must catch,
//! and the regression seeds of bugs the simulator found.
//!
//! The default bands run the default faults; storage damage (`Fault::Corrupt`) has bands of its
//! own, because a damaged node often refuses to start and then stays down for the rest of its run,
//! which would leave most runs of the default bands one node short. So does the loss of a node's
//! whole storage (`Fault::Wipe`): the wiped node rejoins empty, and the wipe bands require it to
//! catch up. Both are also in the corruption bands, which run every fault.
//!
//! The fixed bands run the same seeds on every commit; the fresh bands start at a seed taken
//! from the commit hash (`STRAND_SIM_FRESH_SEED`, which the Makefile sets from `git rev-parse
//! HEAD`), so every commit explores new seeds while a failure still replays exactly.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use simulation::cluster::{DiskKind, Mutation};
use simulation::nemesis::Fault;
use simulation::report;
use simulation::run::{RunConfig, run};
use simulation::sweep::{SeedRecord, Sweep, sweep};

/// Seeds per fresh band of 3-node clusters.
const SEEDS_3_NODES: u64 = 60;
/// Seeds per fresh band of 5-node clusters.
const SEEDS_5_NODES: u64 = 50;
/// Seeds of the fixed bands, smaller than the fresh ones: every commit has run the fixed seeds
/// before, so past the regression net they keep, their time buys more as fresh seeds.
const FIXED_SEEDS_3_NODES: u64 = 30;
/// Seeds of the fixed band of 5-node clusters.
const FIXED_SEEDS_5_NODES: u64 = 20;
/// Seeds of the fixed corruption band of 3-node clusters (the fresh one runs
/// [`SEEDS_CORRUPTION_3_NODES`]).
const FIXED_SEEDS_CORRUPTION_3_NODES: u64 = 25;
/// Seeds within which the no-fsync mutation must be caught.
const MUTATION_SEEDS_MAX: u64 = 20;
/// Seeds of the large-values band (each moves ~10 MiB through every node, so fewer).
const SEEDS_LARGE_VALUES: u64 = 8;
/// Seeds per band of 3-node clusters under every fault, storage damage included.
const SEEDS_CORRUPTION_3_NODES: u64 = 40;
/// Seeds per band of 5-node clusters under every fault, storage damage included.
const SEEDS_CORRUPTION_5_NODES: u64 = 20;
/// Seeds within which the no-checksum mutation must be caught.
const NO_CHECKSUM_SEEDS_MAX: u64 = 10;
/// Seeds within which the stale-controller mutation must be caught.
const STALE_CONTROLLER_SEEDS_MAX: u64 = 10;
/// Seeds per band of 3-node clusters whose nodes lose their whole storage and rejoin.
const SEEDS_WIPE_3_NODES: u64 = 20;
/// The faults of the wipe bands: a node's storage lost, beside partitions, crashes and lossy
/// links, so that it rejoins while the cluster keeps writing and failing over.
const WIPE_FAULTS: [Fault; 4] = [Fault::Partition, Fault::Crash, Fault::Lossy, Fault::Wipe];

/// Seeds of the swarm band (its seeds were the fresh 3-node band's: a swarm seed explores more).
const SEEDS_SWARM_3_NODES: u64 = 30;
/// Seeds of the band with fault points firing inside the nodes' code (taken from the fresh
/// 3-node band too).
const SEEDS_CODE_3_NODES: u64 = 10;
/// Seeds within which the lost-answer-refused mutation must be caught.
const LOST_ANSWER_SEEDS_MAX: u64 = 5;

/// Seeds within which the forced-membership mutation must be caught.
const FORCED_MEMBERSHIP_SEEDS_MAX: u64 = 10;
/// Seeds per band of 3-node clusters whose membership changes under faults.
const SEEDS_MEMBERSHIP_3_NODES: u64 = 20;
/// The faults of the membership bands: the operator's changes (a spare added and promoted, the
/// leader moved, a first member removed) while partitions, crashes, lossy links and clock jumps
/// happen.
const MEMBERSHIP_FAULTS: [Fault; 5] = [Fault::Partition, Fault::Crash, Fault::Lossy, Fault::Clock, Fault::Membership];

fn config(seed: u64, nodes: u64) -> RunConfig {
    RunConfig { nodes, duration: Duration::from_secs(6), ..RunConfig::new(seed) }
}

/// Runs `count` seeds from `start` of `template` as `simulation --jobs 1` does (the sweep, with
/// one worker process), and answers their records; every seed must pass.
fn sweep_clean(template: &RunConfig, start: u64, count: u64) -> Vec<SeedRecord> {
    let outcome = sweep(&Sweep::new(template.clone(), start, count, env!("CARGO_BIN_EXE_simulation")), |_, _| {});
    let failures = report::failures(&outcome.records, 10);
    assert!(failures.is_empty(), "{failures}");
    assert_eq!(outcome.records.len() as u64, count, "the sweep ran fewer seeds than asked");
    outcome.records
}

/// Runs one seed through the sweep; it must pass.
fn run_clean(config: &RunConfig) -> SeedRecord {
    sweep_clean(config, config.seed, 1).remove(0)
}

/// A planted bug must show: one of `count` seeds from 0 of `template` fails (the sweep stops
/// there, and the seed that caught it is printed), or `what` went unnoticed.
fn assert_caught(template: &RunConfig, count: u64, what: &str) {
    let outcome = sweep(&Sweep::new(template.clone(), 0, count, env!("CARGO_BIN_EXE_simulation")), |_, _| {});
    match outcome.records.into_iter().find(|record| !record.passed) {
        Some(caught) => eprintln!("caught at seed {}: {}", caught.seed, caught.violations[0]),
        None => panic!("{what} went unnoticed for {count} seeds"),
    }
}

fn band(start: u64, count: u64, nodes: u64) {
    let records = sweep_clean(&config(start, nodes), start, count);
    let sum = |field: fn(&SeedRecord) -> usize| records.iter().map(field).sum::<usize>() as u64;
    let controller_terms = sum(|record| record.counts.controller_terms);
    assert!(
        controller_terms > count,
        "controllers acted in only {controller_terms} terms over {count} runs: the term fence went unexercised"
    );
    let orchestration = sum(|record| record.counts.orchestration_acks);
    assert!(orchestration >= count * 10, "the orchestration agent had only {orchestration} operations acknowledged");
    let lease_grants = sum(|record| record.counts.lease_grants);
    assert!(lease_grants >= count * 3, "the lease agents were granted only {lease_grants} leases");
    assert!(
        sum(|record| record.counts.stale_fences_refused) > 0,
        "no stalled agent's stale fenced close was ever refused: fencing went unexercised"
    );
    let ops = sum(|record| record.counts.ops);
    assert!(ops > count * 50, "the workload ran too few operations ({ops}) to mean anything");
    let order_firings = sum(|record| record.counts.order_firings);
    assert!(
        order_firings >= count * 2,
        "the controllers fired only {order_firings} orders in {count} runs: the orders checker saw too little"
    );
}

/// A band under every fault, storage damage included: it must damage storage and see starts
/// refused, and stay clean.
fn corruption_band(start: u64, count: u64, nodes: u64) {
    let records = sweep_clean(&RunConfig { faults: Fault::ALL.to_vec(), ..config(start, nodes) }, start, count);
    let damaged: usize = records.iter().map(|record| record.counts.damaged_nodes).sum();
    assert!(damaged as u64 >= count / 3, "the band damaged only {damaged} nodes' storage");
    assert!(records.iter().any(|record| record.counts.failed_starts > 0), "no damaged node ever refused to start");
}

/// A band in which nodes lose their whole storage and rejoin empty: it must wipe, and every
/// wiped node must catch up (the convergence checker), and stay clean.
fn wipe_band(start: u64, count: u64, nodes: u64) {
    let records = sweep_clean(&RunConfig { faults: WIPE_FAULTS.to_vec(), ..config(start, nodes) }, start, count);
    let wipes: usize = records.iter().map(|record| record.counts.wipes).sum();
    assert!(wipes as u64 >= count / 2, "the band wiped only {wipes} nodes' storage in {count} runs");
}

fn membership_band(start: u64, count: u64, nodes: u64) {
    let records = sweep_clean(&RunConfig { faults: MEMBERSHIP_FAULTS.to_vec(), ..config(start, nodes) }, start, count);
    let changes: usize = records.iter().map(|record| record.counts.membership_changes).sum();
    // Three changes a run when every step gets through before the faults end.
    assert!(changes as u64 >= count * 3 / 2, "the band made only {changes} membership changes in {count} runs");
}

/// A swarm band: each seed draws its own faults (of every kind), pace, agents and mix; they
/// must differ from seed to seed, and every seed stay clean.
fn swarm_band(start: u64, count: u64, nodes: u64) {
    let mut faults = Fault::ALL.to_vec();
    faults.push(Fault::Code);
    let template = RunConfig { faults, swarm: true, ..config(start, nodes) };
    let records = sweep_clean(&template, start, count);
    let plans: std::collections::BTreeSet<&str> = records.iter().map(|record| record.plan.as_str()).collect();
    assert!(records.iter().all(|record| record.swarm), "a seed of the swarm band drew no plan");
    assert_eq!(plans.len() as u64, count, "seeds of the swarm band drew the same plan");
    let ops: usize = records.iter().map(|record| record.counts.ops).sum();
    assert!(ops as u64 > count * 30, "the swarm band ran too few operations ({ops})");
}

/// The first seed of the fresh bands: from the commit hash when the Makefile passes it, else
/// from `git rev-parse HEAD` directly.
fn fresh_start() -> u64 {
    let hash = std::env::var("STRAND_SIM_FRESH_SEED").ok().or_else(|| {
        let output = std::process::Command::new("git").args(["rev-parse", "HEAD"]).output().ok()?;
        Some(String::from_utf8_lossy(&output.stdout).trim().to_string())
    });
    let hash = hash.unwrap_or_default();
    let start = u64::from_str_radix(hash.get(..12).unwrap_or("0"), 16).unwrap_or(0);
    eprintln!("fresh band starts at seed {start} (from commit {hash:?})");
    start
}

#[test]
fn fixed_band_3_nodes() {
    band(0, FIXED_SEEDS_3_NODES, 3);
}

#[test]
fn fixed_band_5_nodes() {
    band(1_000_000, FIXED_SEEDS_5_NODES, 5);
}

#[test]
fn fresh_band_3_nodes() {
    band(fresh_start(), SEEDS_3_NODES, 3);
}

#[test]
fn fresh_band_5_nodes() {
    band(fresh_start().wrapping_add(1_000_000), SEEDS_5_NODES, 5);
}

/// Creates near the request size limit, under every fault: replication, catch-up and snapshots
/// of entries and records of ~0.9 MiB.
#[test]
fn large_values_band_3_nodes() {
    let records = sweep_clean(&RunConfig { large_values: true, ..config(0, 3) }, 2_000_000, SEEDS_LARGE_VALUES);
    let large: usize = records.iter().map(|record| record.counts.large_creates).sum();
    assert!(large as u64 >= SEEDS_LARGE_VALUES * 4, "the band made only {large} large creates");
}

#[test]
fn corruption_band_3_nodes() {
    corruption_band(3_000_000, FIXED_SEEDS_CORRUPTION_3_NODES, 3);
}

#[test]
fn corruption_band_5_nodes() {
    corruption_band(3_100_000, SEEDS_CORRUPTION_5_NODES, 5);
}

#[test]
fn fresh_corruption_band_3_nodes() {
    corruption_band(fresh_start().wrapping_add(3_000_000), SEEDS_CORRUPTION_3_NODES, 3);
}

#[test]
fn wipe_band_3_nodes() {
    wipe_band(4_000_000, SEEDS_WIPE_3_NODES, 3);
}

#[test]
fn fresh_wipe_band_3_nodes() {
    wipe_band(fresh_start().wrapping_add(4_000_000), SEEDS_WIPE_3_NODES, 3);
}

/// The default faults and the fault points inside the nodes' code (delayed applies, log appends
/// and snapshot builds, answers lost after their write, failed log writes that stop a node until
/// it is restarted): every seed clean, and the points fired.
#[test]
fn fresh_code_band_3_nodes() {
    let start = fresh_start().wrapping_add(8_000_000);
    let mut faults = Fault::DEFAULT.to_vec();
    faults.push(Fault::Code);
    let records = sweep_clean(&RunConfig { faults, ..config(start, 3) }, start, SEEDS_CODE_3_NODES);
    let fired: usize = records.iter().map(|record| record.counts.fault_points).sum();
    assert!(fired as u64 >= SEEDS_CODE_3_NODES * 10, "the fault points fired only {fired} times");
    let failed: usize = records.iter().map(|record| record.counts.failed_writes).sum();
    assert!(failed > 0, "no log write failed on purpose: no node was stopped and restarted");
}

/// A node that answers a write whose answer was lost as refused, though it took effect, must show
/// to the checkers (exactly-once, linearizability): the response-drop point reaches them.
#[test]
fn lost_answer_refused_mutation_is_caught() {
    let template = RunConfig {
        mutation: Some(Mutation::LostAnswerRefused),
        faults: vec![Fault::Crash, Fault::Partition, Fault::Code],
        ..config(0, 3)
    };
    assert_caught(&template, LOST_ANSWER_SEEDS_MAX, "answers of writes that took effect, given as refusals");
}

/// Swarm testing in CI: fresh seeds, each drawing its own faults of every kind (the fault points
/// included), pace, agents and mix.
#[test]
fn fresh_swarm_band_3_nodes() {
    swarm_band(fresh_start().wrapping_add(7_000_000), SEEDS_SWARM_3_NODES, 3);
}

#[test]
fn membership_band_3_nodes() {
    membership_band(5_000_000, SEEDS_MEMBERSHIP_3_NODES, 3);
}

#[test]
fn fresh_membership_band_3_nodes() {
    membership_band(fresh_start().wrapping_add(5_000_000), SEEDS_MEMBERSHIP_3_NODES, 3);
}

/// The simulator in the test-only apply-next mode (`STRAND_TEST_APPLY_NEXT=1`, see
/// `api/src/version.rs`): the upgrade fault needs a build that applies two versions.
fn apply_next_simulator() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_simulation"));
    command.env(api::version::TEST_APPLY_NEXT_ENV, "1");
    command
}

/// Seeds per band of 3-node rolling upgrades.
const SEEDS_UPGRADE_3_NODES: u64 = 10;
/// The faults of the upgrade bands: every first member upgraded in turn while partitions, lossy
/// links, crashes, clock jumps and membership changes happen (the spare joins on the newer build).
const UPGRADE_FAULTS: &str = "partition,oneway,lossy,crash,clock,membership,upgrade";

/// Runs `seeds` seeds from `start` of the apply-next simulator with `faults` in a process of its
/// own (with `env` set); answers whether it passed, its summary row by column, and its stderr.
fn sweep_apply_next(
    start: u64,
    seeds: u64,
    faults: &str,
    env: &[(&str, &str)],
) -> (bool, BTreeMap<String, String>, String) {
    let output = apply_next_simulator()
        .args(["--seeds", &seeds.to_string(), "--start-seed", &start.to_string(), "--duration", "6s", "--jobs", "1"])
        .args(["--faults", faults])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .filter(|line| line.starts_with('|') && !line.starts_with("|---"))
        .map(|line| line.trim_matches('|').split('|').map(|cell| cell.trim().to_string()).collect())
        .collect();
    let summary = match rows.as_slice() {
        [header, row] => header.iter().cloned().zip(row.iter().cloned()).collect(),
        _ => BTreeMap::new(),
    };
    (output.status.success(), summary, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A rolling upgrade under faults: the nodes start on the older build and are upgraded one by one;
/// the checkers (the upgrade checker among them) find nothing, and most runs switch.
fn upgrade_band(start: u64) {
    let (passed, summary, stderr) = sweep_apply_next(start, SEEDS_UPGRADE_3_NODES, UPGRADE_FAULTS, &[]);
    assert!(passed, "the upgrade band from seed {start} failed:\n{stderr}");
    let upgrades = &summary["upgrades (runs switched)"];
    let switched: u64 = upgrades.split(['(', ')']).nth(1).and_then(|runs| runs.parse().ok()).unwrap();
    // A member whose start failed never reports its versions, so a few runs may not switch.
    assert!(switched >= SEEDS_UPGRADE_3_NODES / 2, "only {upgrades} runs switched their apply version");
    let canaries = &summary["canaries applied/refused"];
    let (applied, refused) = canaries.split_once('/').unwrap();
    assert!(applied.parse::<u64>().unwrap() > 0 && refused.parse::<u64>().unwrap() > 0, "canaries {canaries}");
}

/// Seeds 234 123 176 953 876 and 264 588 062 453 221 (3 nodes, 6 s, the upgrade faults; fresh
/// upgrade bands found them): node 3 was down while node 4 was added and node 3 removed, and both
/// other first members restarted for their upgrades after applying the removal. Node 3's log
/// named only nodes 1 to 3, and a restarted member had forgotten whom it saw leave, so no member
/// ever told node 3 it was removed. A node now keeps them on disk (`node::standing::Seen`).
#[test]
fn regression_upgrade_seeds_a_member_restarted_since_a_removal_still_tells_the_removed_node() {
    for seed in [234_123_176_953_876, 264_588_062_453_221] {
        let (passed, _, stderr) = sweep_apply_next(seed, 1, UPGRADE_FAULTS, &[]);
        assert!(passed, "seed {seed} failed:\n{stderr}");
    }
}

/// Seed 251 754 725 580 112 (3 nodes, 6 s, every fault; a fresh corruption band found it): node 1
/// was wiped while its removal was under way, and the removal's joint configuration was left for
/// the next leader's member watch to complete. Completing it told no one, and node 1, rejoining,
/// votes and campaigns for nothing, so it sent no Raft message a member could refuse with the
/// removal: it served on as a member. Completing a joint configuration now tells each node it
/// leaves out.
#[test]
fn regression_a_removal_completed_by_the_next_leader_tells_the_removed_node() {
    run_clean(&RunConfig { faults: Fault::ALL.to_vec(), ..config(251_754_725_580_112, 3) });
}

#[test]
fn upgrade_band_3_nodes() {
    upgrade_band(6_000_000);
}

#[test]
fn fresh_upgrade_band_3_nodes() {
    upgrade_band(fresh_start().wrapping_add(6_000_000));
}

/// The test of the upgrade checker: the apply-next mode with its canary rule decided by the build
/// instead of the state's apply version (`STRAND_TEST_UNGATED_CANARY`) refuses canaries before
/// the switch, and the first seed shows it.
#[test]
fn an_apply_rule_decided_by_the_build_is_caught() {
    let env = [(api::version::UNGATED_CANARY_ENV, "1")];
    let (passed, _, stderr) = sweep_apply_next(6_000_000, 3, UPGRADE_FAULTS, &env);
    assert!(!passed, "a canary rule applied before the switch went unnoticed for 3 seeds");
    assert!(stderr.contains("[upgrade] canary"), "caught, but not by the upgrade checker:\n{stderr}");
}

/// Outside the test-only apply-next mode a build applies no version that another build does not,
/// so it cannot run the upgrade fault, and says so.
#[test]
fn a_default_build_refuses_the_upgrade_fault() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_simulation"))
        .env_remove(api::version::TEST_APPLY_NEXT_ENV)
        .args(["--seed", "1", "--faults", "crash,upgrade"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("needs a simulator that applies a version no other build applies")
            && stderr.contains("STRAND_TEST_APPLY_NEXT=1"),
        "{stderr}"
    );
}

#[test]
fn rocksdb_backend_under_crashes_and_partitions() {
    let template = RunConfig { disk: DiskKind::Rocks, faults: vec![Fault::Crash, Fault::Partition], ..config(0, 3) };
    sweep_clean(&template, 0, 4);
}

/// Runs one seed in a fresh simulator process, as a replay does, and returns its trace.
fn trace_of(seed: u64, options: &[&str]) -> String {
    trace_of_command(std::process::Command::new(env!("CARGO_BIN_EXE_simulation")), seed, options)
}

/// [`trace_of`] with the simulator that `command` starts.
fn trace_of_command(mut command: std::process::Command, seed: u64, options: &[&str]) -> String {
    let output =
        command.args(["--seed", &seed.to_string(), "--duration", "6s", "--verbose"]).args(options).output().unwrap();
    assert!(output.status.success(), "seed {seed} failed:\n{}", String::from_utf8_lossy(&output.stderr));
    // The trace ends with its hash; the summary table after it holds wall-clock times.
    let stdout = String::from_utf8(output.stdout).unwrap();
    let end = stdout.find("trace hash ").map(|start| start + stdout[start..].find('\n').unwrap_or(0)).unwrap();
    stdout[..end].to_string()
}

/// Replays are separate processes, so that is how determinism is checked: the same seed in two
/// processes gives the same trace, byte for byte (and so the same trace hash, its last line).
/// Also with storage damage (seed 3 000 000 damages a node's log and sees it refuse to start,
/// seed 3 000 006 damages a snapshot file) and with large values.
#[test]
fn the_same_seed_gives_the_same_trace() {
    let all: &[&str] = &["--faults", "all"];
    let runs: [(u64, &[&str]); 6] =
        [(3, &[]), (17, &[]), (42, &[]), (3_000_000, all), (3_000_006, all), (2_000_000, &["--large-values"])];
    for (seed, options) in runs {
        let (first, second) = (trace_of(seed, options), trace_of(seed, options));
        if first != second {
            let diverged = first.lines().zip(second.lines()).position(|(a, b)| a != b);
            panic!(
                "seed {seed} ran twice gave different traces; first difference at line {diverged:?}:\n{:?}\n{:?}",
                diverged.and_then(|line| first.lines().nth(line)),
                diverged.and_then(|line| second.lines().nth(line))
            );
        }
        assert!(first.lines().count() > 500, "seed {seed} traced only {} lines", first.lines().count());
        assert!(first.lines().last().unwrap().starts_with("trace hash "));
    }
}

/// A rolling upgrade replays as exactly as any run: the nodes' builds are part of the seed's
/// schedule.
#[test]
fn an_upgrade_run_gives_the_same_trace() {
    let options = ["--faults", UPGRADE_FAULTS];
    let (first, second) = (
        trace_of_command(apply_next_simulator(), 6_000_001, &options),
        trace_of_command(apply_next_simulator(), 6_000_001, &options),
    );
    assert!(first == second, "seed 6000001 with upgrades ran twice gave different traces");
    assert!(first.contains("nemesis: upgrade n"), "the run upgraded no node:\n{first}");
}

/// Damage that the checksums cannot see (resealed) must show to the checkers: as a state digest
/// that differs (convergence), a log entry that differs (log matching), or a wrong answer.
#[test]
fn no_checksum_mutation_is_caught() {
    let template = RunConfig { mutation: Some(Mutation::NoChecksum), faults: Fault::ALL.to_vec(), ..config(0, 3) };
    assert_caught(&template, NO_CHECKSUM_SEEDS_MAX, "storage damage under recomputed checksums");
}

#[test]
fn no_fsync_mutation_is_caught() {
    let template = RunConfig { mutation: Some(Mutation::NoFsync), faults: vec![Fault::Crash], ..config(0, 3) };
    assert_caught(&template, MUTATION_SEEDS_MAX, "acknowledging unsynced log entries");
}

/// A membership change that bypasses joint consensus (node 1 makes itself the only voter each
/// time it restarts, while the others are alive: a configuration whose majority is one node
/// commits beside the old one) must show to the checkers: two leaders, diverged states, lost or
/// unexplained writes.
#[test]
fn forced_membership_mutation_is_caught() {
    let template = RunConfig {
        mutation: Some(Mutation::ForcedMembership),
        faults: vec![Fault::Crash, Fault::Partition],
        ..config(0, 3)
    };
    assert_caught(&template, FORCED_MEMBERSHIP_SEEDS_MAX, "a membership that bypassed joint consensus");
}

/// A controller that never notices its deposition, with the state machine's term fence off,
/// must show to the controller-term checker as an action of a lower term taking effect after one
/// of a higher term. Its stale actions commit only once its node leads again, so the runs are
/// longer and partition the leader again and again.
#[test]
fn stale_controller_mutation_is_caught() {
    for seed in 0..STALE_CONTROLLER_SEEDS_MAX {
        let config = RunConfig {
            mutation: Some(Mutation::StaleController),
            faults: vec![Fault::Partition],
            duration: Duration::from_secs(20),
            ..config(seed, 3)
        };
        let report = run(&config).unwrap();
        if let Some(violation) = report.violations.iter().find(|violation| violation.checker == "controller terms") {
            eprintln!("caught at seed {seed}: {violation}");
            return;
        }
    }
    panic!("a deposed controller acting late went unnoticed for {STALE_CONTROLLER_SEEDS_MAX} seeds");
}

/// Seed 4 000 000 (3 nodes, 6 s, the wipe band's faults) found a node that never caught up after
/// losing its storage: it rejoined empty while the others served, the leader kept its old
/// matching index for it and retried the same conflicting append forever. With openraft's debug
/// assertions on, openraft's "follower log reversion is not allowed" assertion stopped the run;
/// without them, the convergence checker named node 3 behind at applied index 0. Fixed by letting
/// the leader search such a node's log from the start (`allow_log_reversion` in `node::config`).
#[test]
fn regression_seed_4000000_a_wiped_node_catches_up() {
    let report = run_clean(&RunConfig { faults: WIPE_FAULTS.to_vec(), ..config(4_000_000, 3) });
    assert!(report.counts.wipes > 0, "the seed wiped no node");
}

/// Seed 249 628 576 259 355 (3 nodes, 6 s, the wipe band's faults) found a wiped node that helped
/// a deposed leader commit: node 1, leader of term 1, was cut off while nodes 2 and 3 elected node
/// 2 in term 2 and committed entries 96 to 99; node 2 was then wiped, and on its return, with its
/// vote lost, it accepted node 1's term-1 appends, so node 1 counted it towards committing its own
/// entries 96 to 128. openraft's assertion that a follower's committed entries never conflict
/// stopped the run; without it, the leader-completeness checker saw node 3 lead term 3 without
/// them. Fixed by a rejoining node accepting no replication before the other members told it the
/// cluster's term, and none from a leader of an older term after (`node::rejoin`).
#[test]
fn regression_seed_249628576259355_a_wiped_node_refuses_a_deposed_leader() {
    let report = run_clean(&RunConfig { faults: WIPE_FAULTS.to_vec(), ..config(249_628_576_259_355, 3) });
    assert!(report.counts.wipes > 0, "the seed wiped no node");
}

/// Seed 163 569 193 936 533 (3 nodes, 6 s, a swarm of every fault) found a client that stuck to a
/// dead endpoint: once a failed call had moved its position past its last endpoint, no failed call
/// moved it again, so the healed reader tried node 2 (damaged, down for good) until its deadline,
/// call after call, while nodes 1 and 4 served; the orders, orchestration and leases checkers
/// could read nothing back. Fixed in `api::client` (`move_past` keeps the position below the
/// endpoints' count and judges it by the endpoint it leads to).
#[test]
fn regression_seed_163569193936533_a_client_leaves_a_dead_endpoint() {
    let mut faults = Fault::ALL.to_vec();
    faults.push(Fault::Code);
    let report = run_clean(&RunConfig { faults, swarm: true, ..config(163_569_193_936_533, 3) });
    assert!(report.counts.failed_starts > 0, "no node stayed down, so no endpoint was dead");
}

/// Seeds 806676336648 and 806676336742 (3 nodes, 10 s, a swarm of every fault and the fault
/// points) once never formed a cluster: the lowest id's first log write failed as it initialised,
/// and before the cluster formed a member was wiped and restarted with `--rejoin`. No member could
/// name a membership, so the wiped node stayed down; where it was the lowest id, after its vote
/// requests had reached the others, the cluster could never form. A rejoining node now starts as
/// the initial member it was once enough members show no cluster (`node::join`), and the nemesis
/// wipes a node only once the cluster has formed.
#[test]
fn regression_seeds_806676336648_and_806676336742_a_wipe_before_the_cluster_formed() {
    for seed in [806_676_336_648, 806_676_336_742] {
        let mut faults = Fault::ALL.to_vec();
        faults.push(Fault::Code);
        run_clean(&RunConfig { faults, swarm: true, duration: Duration::from_secs(10), ..config(seed, 3) });
    }
}

/// Seed 17 (3 nodes, 6 s) once reported a leader-completeness violation: a restarted node
/// restored its leadership of term 1 after the cluster had moved to term 2. The checker was wrong
/// (it held a leader to entries of later terms); this keeps that seed clean.
#[test]
fn regression_seed_17_restored_leadership_of_an_older_term() {
    run_clean(&config(17, 3));
}

/// Seeds 78 (3 nodes) and 1 000 026 (5 nodes) found a client bug: a refusal comes back as an
/// error status, and on that path the client never renewed its id after `SessionExpired`, so
/// once a 2-hour clock jump on the leader had evicted the sessions, every later request of every
/// agent was refused as well. Fixed in `api::client::Client::execute`.
#[test]
fn regression_seeds_78_and_1000026_client_renews_after_session_expiry() {
    run_clean(&config(78, 3));
    run_clean(&config(1_000_026, 5));
}

/// Seed 103 (3 nodes) found a stale linearizable read: the leader crashed right after a claim was
/// acknowledged, losing its unsynced applied state and committed index; it restarted, restored
/// its leadership of the same term (openraft's `enable_leader_restore`), took its regressed
/// commit index as the read index, and answered `ready` without the claim. Fixed by turning leader
/// restore off in `node::config`: a restarted leader now wins a new term first.
#[test]
fn regression_seed_103_no_stale_read_from_a_restored_leader() {
    run_clean(&config(103, 3));
}

/// Seed 193 043 188 885 123 (3 nodes) found two leaders of term 2: openraft's default
/// `leader_id_adv` lets two candidates win one term (the higher node id prevails). Fixed by
/// declaring standard Raft leader ids (`leader_id_std`) in `raft_store::types`.
#[test]
fn regression_seed_193043188885123_one_leader_per_term() {
    run_clean(&config(193_043_188_885_123, 3));
}

/// Seed 227 324 777 722 169 (3 nodes, 6 s, every fault) left the membership in a joint
/// configuration: the leader that promoted the spare lost its office between the two steps, and
/// openraft does not complete a joint configuration by itself, so every later change (the wiped
/// spare's own join among them) was refused as in progress and the spare never came back. Fixed by
/// the next leader's member watch completing it (`leader::membership::complete_joint`).
#[test]
fn regression_seed_227324777722169_a_joint_configuration_is_completed() {
    let report = run_clean(&RunConfig { faults: Fault::ALL.to_vec(), ..config(227_324_777_722_169, 3) });
    assert!(report.counts.membership_changes > 0, "the seed changed no membership");
}

/// Seed 3 100 011 (5 nodes, 6 s, every fault): the operator's request to add the spare got no
/// answer, yet the addition committed, and the spare, never started, held convergence back. The
/// operator now starts the spare once it asked (and the spare asks to join itself).
#[test]
fn regression_seed_3100011_a_spare_whose_addition_was_unanswered_still_starts() {
    run_clean(&RunConfig { faults: Fault::ALL.to_vec(), ..config(3_100_011, 5) });
}

/// Seed 39 652 363 255 988 (3 nodes, 6 s, the membership bands' faults): node 1, the leader, was
/// cut off and removed; the leader that removed it crashed before its notice got through, so node
/// 1 still held the old membership and still called itself leader, and the healed reader took
/// the membership from it. The reader now takes it from the node with the greatest last log id.
/// Node 1 must also know of its removal by the end (the membership checker): the members that
/// applied it refuse its votes with a removal notice (`node::peer::network::Heeded`); without the
/// notice this seed ends with node 1 still answering as a member.
#[test]
fn regression_seed_39652363255988_a_removed_node_that_was_never_told() {
    let report = run_clean(&RunConfig { faults: MEMBERSHIP_FAULTS.to_vec(), ..config(39_652_363_255_988, 3) });
    assert!(report.counts.membership_changes > 0, "the seed changed no membership");
}

/// Seed 256 637 050 588 295 (3 nodes, 6 s, every fault): node 1, a voter that was down while the
/// spare (node 4) was added, held an uncommitted membership entry adding node 4; leader 4 truncated
/// it, and node 1, judging who had left on the log's last membership (now without node 4), took
/// node 4 for a removed node and refused every later append from it, campaigning for ever. A
/// member now judges who left on its applied membership only (`node::standing`).
#[test]
fn regression_seed_256637050588295_a_truncated_membership_entry_is_no_removal() {
    let report = run_clean(&RunConfig { faults: Fault::ALL.to_vec(), ..config(256_637_050_588_295, 3) });
    assert!(report.counts.membership_changes > 0, "the seed changed no membership");
}

/// Seed 77 482 600 343 231 (3 nodes, 6 s, every fault; a fresh corruption band found it): node 2
/// was removed and the spare, node 4, became a voter while node 3 lagged behind a lossy link at
/// an entry before node 4 was added; node 1 was then wiped. Node 4 needed node 3's vote, and node
/// 3 refused it from a node that was not a member of the membership it knew, so no leader was
/// ever elected again. A candidate this node never saw leave now gets its vote judged, as a
/// leader's append is (`node::peer::service`).
#[test]
fn regression_seed_77482600343231_a_lagging_voter_votes_for_a_member_added_since() {
    let report = run_clean(&RunConfig { faults: Fault::ALL.to_vec(), ..config(77_482_600_343_231, 3) });
    assert!(report.counts.membership_changes > 0, "the seed changed no membership");
}
