//! `cargo run --bin simulation -- --seeds N ...`: runs many seeds, shows a progress bar with an
//! ETA on a terminal (indicatif; none when stderr is not a terminal, so CI logs stay clean),
//! prints a summary, and stops at the first violation with the seed and the command that replays
//! it.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use simulation::cluster::{DiskKind, Mutation};
use simulation::nemesis::Fault;
use simulation::run::{RunConfig, RunReport, run};

/// Strand's deterministic simulator: runs seeds of a simulated cluster under faults and checks
/// every run for linearizability, durability, exactly-once, metadata, convergence, storage
/// integrity, membership, liveness, Raft safety, leases, orchestration, controller terms and
/// orders firing at most once per window.
///
/// Exit codes: 0 every seed passed, 1 a violation (its replay command is printed), 2 usage error.
#[derive(Parser, Debug)]
#[command(name = "simulation")]
struct Args {
    /// Number of seeds to run, from --start-seed on.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
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
    /// wipe, membership), none, or a comma-separated list of those kinds and upgrade (a rolling
    /// upgrade; only a debug build run with STRAND_TEST_APPLY_NEXT=1 runs it).
    #[arg(long, default_value = "default", value_parser = parse_faults)]
    faults: FaultList,
    /// Concurrent simulated agents.
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
    /// Print the whole trace of every run (for replaying one seed).
    #[arg(long)]
    verbose: bool,
}

#[derive(Clone, Debug)]
struct FaultList(Vec<Fault>);

fn parse_faults(text: &str) -> Result<FaultList, String> {
    match text {
        "default" => Ok(FaultList(Fault::DEFAULT.to_vec())),
        "all" => Ok(FaultList(Fault::ALL.to_vec())),
        "none" => Ok(FaultList(Vec::new())),
        list => list
            .split(',')
            .map(|name| {
                <Fault as clap::ValueEnum>::from_str(name.trim(), true).map_err(|_| {
                    let names: Vec<String> = <Fault as clap::ValueEnum>::value_variants()
                        .iter()
                        .filter_map(|fault| {
                            clap::ValueEnum::to_possible_value(fault).map(|value| value.get_name().to_string())
                        })
                        .collect();
                    format!("unknown fault {name:?}; use default, all, none, or a list of {}", names.join(","))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(FaultList),
    }
}

/// Violations printed for a failing seed; the rest are counted.
const VIOLATIONS_SHOWN: usize = 3;

/// The sweep's progress bar: drawn on stderr while it is a terminal, hidden otherwise.
fn progress_bar(seeds: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(Some(seeds), indicatif::ProgressDrawTarget::stderr());
    let style = indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} seeds, {eta} left; {msg}")
        .expect("a valid progress template")
        .progress_chars("#>.");
    bar.set_style(style);
    bar
}

/// What the bar says of the last seed run.
fn last_run(report: &RunReport) -> String {
    format!(
        "seed {} ({} ops, {} faults, {:.1}s simulated in {:.2}s)",
        report.config.seed,
        report.ops,
        report.faults,
        report.simulated.as_secs_f64(),
        report.wall.as_secs_f64()
    )
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.start_seed..args.start_seed.saturating_add(args.seeds)).collect(),
    };
    let started = Instant::now();
    let (mut ops, mut faults, mut unknown, mut simulated) = (0usize, 0usize, 0usize, Duration::ZERO);
    let (mut order_firings, mut controller_actions, mut controller_terms) = (0usize, 0usize, 0usize);
    let (mut damaged, mut failed_starts, mut wipes) = (0usize, 0usize, 0usize);
    let (mut upgrades, mut switched, mut canaries) = (0usize, 0usize, (0usize, 0usize));
    let bar = progress_bar(seeds.len() as u64);
    for seed in &seeds {
        let config = RunConfig {
            seed: *seed,
            nodes: args.nodes,
            duration: args.duration,
            faults: args.faults.0.clone(),
            disk: args.disk,
            mutation: args.mutation,
            agents: args.agents,
            large_values: args.large_values,
            keep_trace: args.verbose,
        };
        let report = match run(&config) {
            Ok(report) => report,
            Err(error) => {
                bar.abandon();
                eprintln!("seed {seed}: the simulator could not run: {error}");
                return ExitCode::from(2);
            }
        };
        if args.verbose {
            bar.suspend(|| {
                for line in &report.trace {
                    println!("{line}");
                }
                println!("trace hash {:016x}", report.trace_hash);
            });
        }
        ops += report.ops;
        faults += report.faults;
        unknown += report.unknown_ops;
        order_firings += report.order_firings;
        controller_actions += report.controller.applied;
        controller_terms += report.controller.terms;
        damaged += report.damaged_nodes;
        failed_starts += report.failed_starts;
        wipes += report.wipes;
        upgrades += report.upgrades;
        switched += usize::from(report.upgrade.switched.is_some());
        canaries.0 += report.upgrade.canaries_applied;
        canaries.1 += report.upgrade.canaries_refused;
        simulated += report.simulated;
        bar.set_message(last_run(&report));
        bar.inc(1);
        if !report.violations.is_empty() {
            bar.abandon();
            eprintln!("\nseed {seed} FAILED: {} violation(s)", report.violations.len());
            for violation in report.violations.iter().take(VIOLATIONS_SHOWN) {
                eprintln!("- {violation}");
            }
            if report.violations.len() > VIOLATIONS_SHOWN {
                eprintln!("- ... and {} more", report.violations.len() - VIOLATIONS_SHOWN);
            }
            eprintln!("\nreplay it with:\n  {}", config.replay_command());
            return ExitCode::from(1);
        }
    }
    let wall = started.elapsed();
    bar.finish();
    println!(
        "| seeds | nodes | ops | unknown outcome | order firings | controller actions (terms) | faults | damaged nodes | wipes | failed starts | upgrades (runs switched) | canaries applied/refused | simulated | wall | simulated/wall | seeds/min |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {ops} | {unknown} | {order_firings} | {controller_actions} ({controller_terms}) | {faults} | {damaged} | {wipes} | {failed_starts} | {upgrades} ({switched}) | {}/{} | {:.0} s | {:.1} s | {:.1} | {:.1} |",
        seeds.len(),
        args.nodes,
        canaries.0,
        canaries.1,
        simulated.as_secs_f64(),
        wall.as_secs_f64(),
        simulated.as_secs_f64() / wall.as_secs_f64().max(f64::EPSILON),
        seeds.len() as f64 * 60.0 / wall.as_secs_f64().max(f64::EPSILON)
    );
    ExitCode::SUCCESS
}
