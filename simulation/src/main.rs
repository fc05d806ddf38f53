//! `cargo run --bin simulation -- --seeds N ...`: runs many seeds in worker processes (`--jobs`,
//! see `simulation::sweep`), shows a progress bar with an ETA on a terminal (indicatif; none when
//! stderr is not a terminal, so CI logs stay clean), prints a summary, writes the reports asked
//! for (`--json`, `--junit`, `--artifacts`, see `simulation::report`), and names every failing
//! seed with the command that replays it. `--verbose` runs its seeds in this process and prints
//! their traces: that is the replay.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use simulation::cluster::{DiskKind, Mutation};
use simulation::nemesis::Fault;
use simulation::report::{self, Totals};
use simulation::run::{self, RunConfig, run};
use simulation::sweep::{self, Outcome, SeedRecord, Sweep};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Strand's deterministic simulator: runs seeds of a simulated cluster under faults and checks
/// every run for linearizability, durability, exactly-once, metadata, convergence, storage
/// integrity, membership, liveness, Raft safety, leases, orchestration, controller terms and
/// orders firing at most once per window.
///
/// Exit codes: 0 every seed passed, 1 a seed failed (each is named with its replay command),
/// 2 usage error or a sweep that could not start.
#[derive(Parser, Debug)]
#[command(name = "simulation")]
struct Args {
    /// Number of seeds to run, from --start-seed on [default: 100, or as many as the time
    /// budget allows].
    #[arg(long)]
    seeds: Option<u64>,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    start_seed: u64,
    /// Run exactly this one seed (replay); overrides --seeds and --start-seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Cluster size.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=7))]
    nodes: u64,
    /// Simulated length of the fault phase, e.g. 10s or 1m.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Faults to inject: default (partition, oneway, lossy, crash, clock), all (those and corrupt,
    /// wipe, membership), none, or a comma-separated list of those kinds (default and all
    /// included), upgrade (a rolling upgrade; only a debug build run with STRAND_TEST_APPLY_NEXT=1
    /// runs it) and code (fault points inside the node's code). With --swarm, the kinds each seed
    /// draws from.
    #[arg(long, default_value = "default", value_parser = parse_faults)]
    faults: FaultList,
    /// Concurrent simulated agents (with --swarm, each seed draws its own).
    #[arg(long, default_value_t = 5)]
    agents: usize,
    /// The storage of the nodes.
    #[arg(long, value_enum, default_value_t = DiskKind::Memory)]
    disk: DiskKind,
    /// Plant a bug, to see the checkers catch it.
    #[arg(long, value_enum)]
    mutation: Option<Mutation>,
    /// Some creates carry metadata near the request size limit (about 0.9 MiB each, a few per
    /// seed), to exercise byte-bounded replication, catch-up and snapshots.
    #[arg(long)]
    large_values: bool,
    /// Swarm testing: each seed draws from itself a subset of the --faults kinds, the nemesis'
    /// pace, the number of agents and their mix of operations (recorded in the trace and the
    /// reports; `--swarm --seed N` replays it).
    #[arg(long)]
    swarm: bool,
    /// Worker processes running seeds at once [default: the number of cores].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
    /// Run seeds from --start-seed until this much wall-clock time is spent (e.g. 10m, 90s);
    /// seeds under way then finish.
    #[arg(long, value_parser = parse_budget, allow_hyphen_values = true)]
    time_budget: Option<Duration>,
    /// Run every seed and report every failure, instead of stopping at the first (the exit code
    /// is still 1 when any seed failed).
    #[arg(long)]
    keep_going: bool,
    /// Write a JUnit XML report here: one test case per seed.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a JSON report here: the summary and one record per seed.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write each failing seed's artifacts under this directory (seed-N/: trace, nemesis
    /// schedule, each node's log, violations, replay script, HTML timeline).
    #[arg(long, value_name = "DIR")]
    artifacts: Option<PathBuf>,
    /// The nemesis injects at most this many faults (what --shrink bounds).
    #[arg(long)]
    max_faults: Option<usize>,
    /// At most this many agents, whatever --agents or the swarm draw (what --shrink bounds).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_agents: Option<u64>,
    /// Shrink the failing seed given by --seed: search for the smallest run of it (fewer faults,
    /// a shorter fault phase, fewer agents) that still fails the same checker, and print its
    /// size before and after and the command that replays it.
    #[arg(long, requires = "seed", conflicts_with_all = ["verbose", "junit", "json", "keep_going", "time_budget"])]
    shrink: bool,
    /// Print the whole trace of every run, running the seeds in this process (for replaying one
    /// seed).
    #[arg(long)]
    verbose: bool,
    /// Run as a sweep's worker: the one seed of --seed, its record on standard output.
    #[arg(long, hide = true)]
    worker: bool,
}

#[derive(Clone, Debug)]
struct FaultList(Vec<Fault>);

fn parse_faults(text: &str) -> Result<FaultList, String> {
    if text == "none" {
        return Ok(FaultList(Vec::new()));
    }
    let mut faults = Vec::new();
    for name in text.split(',').map(str::trim) {
        let named: Vec<Fault> = match name {
            "default" => Fault::DEFAULT.to_vec(),
            "all" => Fault::ALL.to_vec(),
            name => vec![<Fault as clap::ValueEnum>::from_str(name, true).map_err(|_| {
                let names: Vec<String> = <Fault as clap::ValueEnum>::value_variants()
                    .iter()
                    .filter_map(|fault| {
                        clap::ValueEnum::to_possible_value(fault).map(|value| value.get_name().to_string())
                    })
                    .collect();
                format!(
                    "unknown fault {name:?}; use default, all, none, or a list of {} (default and all may be in it)",
                    names.join(",")
                )
            })?],
        };
        for fault in named {
            if !faults.contains(&fault) {
                faults.push(fault);
            }
        }
    }
    Ok(FaultList(faults))
}

/// A time budget: a positive duration.
fn parse_budget(text: &str) -> Result<Duration, String> {
    if text.trim_start().starts_with('-') {
        return Err("a time budget cannot be negative; give a duration such as 10m or 90s".into());
    }
    let budget =
        humantime::parse_duration(text).map_err(|error| format!("{error}; give a duration such as 10m or 90s"))?;
    if budget.is_zero() {
        return Err("a time budget of zero runs nothing; give a duration such as 10m or 90s".into());
    }
    Ok(budget)
}

/// Violations printed for a failing seed; the rest are counted (the reports hold them all).
const VIOLATIONS_SHOWN: usize = 3;

/// The sweep's progress bar, drawn on stderr while it is a terminal, hidden otherwise: seeds out
/// of the count, or seconds out of the time budget.
fn progress_bar(args: &Args, count: Option<u64>) -> indicatif::ProgressBar {
    let (length, template) = match (count, args.time_budget) {
        (Some(count), _) => (count, "[{bar:30}] {pos}/{len} seeds, {eta} left; {msg}"),
        (None, Some(budget)) => (budget.as_secs().max(1), "[{bar:30}] {pos}/{len} s of the budget; {msg}"),
        (None, None) => (0, "{msg}"),
    };
    let bar = indicatif::ProgressBar::with_draw_target(Some(length), indicatif::ProgressDrawTarget::stderr());
    let style =
        indicatif::ProgressStyle::with_template(template).expect("a valid progress template").progress_chars("#>.");
    bar.set_style(style);
    bar
}

/// What the bar says of the last seed run.
fn last_run(record: &SeedRecord, run: usize, failed: usize) -> String {
    format!(
        "{run} run, {failed} failed; seed {} ({} ops, {} faults, {:.1}s simulated in {:.2}s)",
        record.seed,
        record.counts.ops,
        record.counts.faults,
        record.simulated_ms as f64 / 1000.0,
        record.wall_ms as f64 / 1000.0
    )
}

fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("simulation: {message}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(tracing_subscriber::EnvFilter::from_default_env()),
        )
        .with(simulation::logs::layer())
        .init();
    let template = RunConfig {
        seed: 0,
        nodes: args.nodes,
        duration: args.duration,
        faults: args.faults.0.clone(),
        disk: args.disk,
        mutation: args.mutation,
        agents: args.agents,
        large_values: args.large_values,
        swarm: args.swarm,
        max_faults: args.max_faults,
        max_agents: args.max_agents.map(|max| max as usize),
        keep_trace: args.verbose,
        node_logs: false,
    };
    if args.worker {
        let Some(seed) = args.seed else { return usage_error("a worker runs the one seed --seed names") };
        return match sweep::serve(&RunConfig { seed, ..template }, args.artifacts.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => usage_error(error),
        };
    }
    // Everything that could stop the sweep is checked before any seed runs.
    if let Err(error) = run::check(&template) {
        return usage_error(error);
    }
    for path in [&args.junit, &args.json].into_iter().flatten() {
        if let Err(error) = report::check_report_path(path) {
            return usage_error(error);
        }
    }
    if let Some(Err(error)) = args.artifacts.as_deref().map(report::check_artifacts_dir) {
        return usage_error(error);
    }
    let (start, count) = match (args.seed, args.seeds, args.time_budget) {
        (Some(seed), _, _) => (seed, Some(1)),
        (None, Some(seeds), _) => (args.start_seed, Some(seeds)),
        (None, None, Some(_)) => (args.start_seed, None),
        (None, None, None) => (args.start_seed, Some(100)),
    };
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return usage_error(format!("cannot find this program to start its workers: {error}")),
    };
    if args.shrink {
        return shrink(RunConfig { seed: start, ..template }, &program, args.artifacts.as_deref());
    }
    let jobs =
        args.jobs.map_or_else(|| std::thread::available_parallelism().map_or(1, usize::from), |jobs| jobs as usize);
    let sweep = Sweep {
        template: RunConfig { keep_trace: false, ..template.clone() },
        start,
        count,
        budget: args.time_budget,
        jobs,
        keep_going: args.keep_going,
        program,
        env: Vec::new(),
        artifacts: args.artifacts.clone(),
    };
    let bar = progress_bar(&args, count);
    let mut failed = 0;
    let mut on_record = |record: &SeedRecord, run: usize| {
        failed += usize::from(!record.passed);
        bar.set_message(last_run(record, run, failed));
        match count {
            Some(_) => bar.inc(1),
            None => bar.set_position(bar.elapsed().as_secs()),
        }
    };
    let outcome = if args.verbose {
        replay(&template, start, count.unwrap_or(1), args.keep_going, &bar, &mut on_record)
    } else {
        sweep::sweep(&sweep, on_record)
    };
    bar.finish_and_clear();
    let totals = Totals::of(&outcome);
    println!("{}", totals.table(args.nodes));
    if outcome.budget_spent {
        println!(
            "the time budget of {} was spent after {} seeds",
            humantime::format_duration(sweep.budget.unwrap_or_default()),
            totals.seeds
        );
    }
    let mut written = Vec::new();
    if let Some(path) = &args.json {
        written.push((path, report::json(&sweep, &outcome)));
    }
    if let Some(path) = &args.junit {
        written.push((path, report::junit(&sweep, &outcome)));
    }
    for (path, contents) in written {
        if let Err(error) = report::write_atomically(path, &contents) {
            eprintln!("simulation: {error}");
            return ExitCode::from(2);
        }
    }
    if totals.failed == 0 {
        return ExitCode::SUCCESS;
    }
    eprint!("{}", report::failures(&outcome.records, VIOLATIONS_SHOWN));
    if outcome.stopped_at_failure {
        eprintln!("\nstopped at the first failure; --keep-going runs every seed");
    }
    ExitCode::from(1)
}

/// `--shrink`: the smallest failing run of one seed.
fn shrink(config: RunConfig, program: &std::path::Path, artifacts: Option<&std::path::Path>) -> ExitCode {
    let seed = config.seed;
    match simulation::shrink::shrink(&config, program, &[], artifacts, |step| eprintln!("shrink: {step}")) {
        Err(error) => usage_error(format!("cannot shrink seed {seed}: {error}")),
        Ok(None) => {
            println!("seed {seed} passes with these options: there is nothing to shrink");
            ExitCode::SUCCESS
        }
        Ok(Some(shrunk)) => {
            println!(
                "seed {seed} shrunk in {} runs, failing the {} checker throughout",
                shrunk.attempts, shrunk.checker
            );
            println!("before: {}", shrunk.before);
            println!("after:  {}", shrunk.after);
            println!("first violation: {}", shrunk.record.violations.first().map_or("", String::as_str));
            println!("replay the smallest failing run with:\n  {}", shrunk.record.replay);
            if let Some(dir) = &shrunk.record.artifacts {
                println!("artifacts: {dir}");
            }
            ExitCode::from(1)
        }
    }
}

/// `--verbose`: runs the seeds in this process, one after another, printing each trace.
fn replay(
    template: &RunConfig,
    start: u64,
    count: u64,
    keep_going: bool,
    bar: &indicatif::ProgressBar,
    on_record: &mut impl FnMut(&SeedRecord, usize),
) -> Outcome {
    let started = Instant::now();
    let mut records = Vec::new();
    let mut stopped_at_failure = false;
    for seed in start..start.saturating_add(count) {
        let config = RunConfig { seed, ..template.clone() };
        let record = match run(&config) {
            Ok(report) => {
                bar.suspend(|| {
                    for line in &report.trace {
                        println!("{line}");
                    }
                    println!("trace hash {:016x}", report.trace_hash);
                });
                SeedRecord::of(&report)
            }
            Err(error) => {
                SeedRecord::incomplete(&config, format!("the simulator could not run it: {error}"), started.elapsed())
            }
        };
        records.push(record);
        on_record(records.last().expect("just pushed"), records.len());
        if !records.last().expect("just pushed").passed && !keep_going {
            stopped_at_failure = seed.saturating_add(1) < start.saturating_add(count);
            break;
        }
    }
    #[allow(clippy::disallowed_methods)] // The replay's own time, outside the simulated run.
    let started_at = std::time::SystemTime::now() - started.elapsed();
    Outcome { records, wall: started.elapsed(), started_at, stopped_at_failure, budget_spent: false }
}
