//! `cargo run -p simulation --bin containers -- --seed N --duration 3m`: a Jepsen-style run of the
//! real build in the `deploy/` compose cluster, under a seeded nemesis of partitions, kills,
//! pauses, drains, leader moves and membership changes, checked by the simulator's checkers (see
//! `simulation::containers`).
//!
//! Exit codes: 0 no violation, 1 violations (each printed, with the seed, the nemesis schedule and
//! the artifacts kept), 2 usage error or a run that could not be made, 77 Docker or what the
//! nemesis needs is missing here (one line says what), 130 interrupted (Ctrl-C or SIGTERM; the
//! containers are removed first).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use simulation::containers::{self, Config, docker};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Exit code of a run that cannot be made on this machine (automake's "skipped").
const SKIPPED: u8 = 77;

/// A Jepsen-style run: the deploy/ compose cluster (3 containers, mutual TLS, auth) under real
/// partitions, kills, pauses, drains, leader moves and a membership change, its history checked
/// for linearizability, durability, exactly-once, leases and fencing, membership, Raft election
/// safety, convergence, orders and liveness.
#[derive(Parser, Debug)]
#[command(name = "containers")]
struct Args {
    /// The seed of the nemesis and the agents [default: drawn, and printed].
    #[arg(long)]
    seed: Option<u64>,
    /// Length of the fault phase, e.g. 90s or 10m.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Concurrent agents, beside the two lease agents and the orchestration agent.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    agents: u64,
    /// Leave out the membership change (node 4 joining, a first member removed).
    #[arg(long)]
    no_membership: bool,
    /// Leave out the rolling upgrade (each member in turn made again from the newer build's
    /// image: this debug build in its test-only apply-next mode).
    #[arg(long)]
    no_upgrade: bool,
    /// Plant a bug: the newer build's canary rule is decided by its build, not by the replicated
    /// apply version (STRAND_TEST_UNGATED_CANARY). The run must fail.
    #[arg(long, conflicts_with = "no_upgrade")]
    ungated_canary: bool,
    /// The strand binary the image is built from, strand-node beside it [default: the one beside
    /// this program].
    #[arg(long)]
    strand: Option<PathBuf>,
    /// Where a failing run keeps its history, nemesis schedule, violations and container logs
    /// [default: containers-artifacts/seed-N].
    #[arg(long)]
    artifacts: Option<PathBuf>,
    /// Keep the artifacts of a passing run too.
    #[arg(long)]
    keep_artifacts: bool,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|error| format!("{error}; write it as 90s or 5m"))?;
    if duration < Duration::from_secs(5) {
        return Err("the fault phase must last at least 5s, or no fault is held".into());
    }
    Ok(duration)
}

/// A setting of the harness's own tests, from the environment: `STRAND_CONTAINERS_TEST_BACK_MS`
/// (how long a member has to come back after the heal) and `STRAND_CONTAINERS_TEST_LOSE_NODE` (a
/// node whose container is removed at the end of the fault phase).
fn test_setting(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let strand = match args.strand {
        Some(path) => path,
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name("strand"),
            Err(error) => {
                eprintln!("containers: cannot find this program's directory ({error}); pass --strand");
                return ExitCode::from(2);
            }
        },
    };
    if !strand.is_file() || !strand.with_file_name("strand-node").is_file() {
        eprintln!(
            "containers: no strand and strand-node at {}; run `cargo build --workspace --bins` or pass --strand",
            strand.display()
        );
        return ExitCode::from(2);
    }
    if let Some(json) = &args.json
        && let Err(error) = std::fs::write(json, b"")
    {
        eprintln!("containers: cannot write the report {}: {error}; give a writable path", json.display());
        return ExitCode::from(2);
    }
    if let Some(why) = docker::unavailable() {
        println!("skipped: the container run cannot run here: {why}");
        return ExitCode::from(SKIPPED);
    }
    let seed = args.seed.unwrap_or_else(rand::random::<u64>);
    let config = Config {
        seed,
        duration: args.duration,
        agents: args.agents as usize,
        membership: !args.no_membership,
        upgrade: !args.no_upgrade,
        ungated_canary: args.ungated_canary,
        strand,
        deploy_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy"),
        artifacts: args.artifacts.unwrap_or_else(|| PathBuf::from(format!("containers-artifacts/seed-{seed}"))),
        keep_artifacts: args.keep_artifacts,
        back_bound: Duration::from_millis(
            test_setting("STRAND_CONTAINERS_TEST_BACK_MS").unwrap_or(containers::nemesis::BACK_MS_MAX),
        ),
        lose_node: test_setting("STRAND_CONTAINERS_TEST_LOSE_NODE"),
    };
    let nemesis_lines = tracing_subscriber::filter::Targets::new().with_target("containers", tracing::Level::INFO);
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_target(false).with_filter(nemesis_lines),
        )
        .init();
    eprintln!("containers: seed {seed}, {:?} of faults", config.duration);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a Tokio runtime starts");
    // Interrupted (Ctrl-C, or SIGTERM from a test runner's timeout), the run is dropped, and with
    // it the deployment, whose drop removes the containers, network and volumes.
    let interrupted = async {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler installs");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "an interrupt",
            _ = terminate.recv() => "SIGTERM",
        }
    };
    let finished = runtime.block_on(async {
        tokio::select! {
            report = containers::run(&config) => Some(report),
            by = interrupted => {
                eprintln!("containers: seed {seed}: stopped by {by}; removing the containers");
                None
            }
        }
    });
    let Some(finished) = finished else {
        // Dropping the runtime waits for the Docker calls under way; then nothing is left.
        drop(runtime);
        return ExitCode::from(130);
    };
    let report = match finished {
        Ok(report) => report,
        Err(error) => {
            eprintln!("containers: seed {seed}: the run could not be made: {error}");
            return ExitCode::from(2);
        }
    };
    if let Some(json) = &args.json
        && let Err(error) = std::fs::write(json, format!("{:#}\n", report.json()))
    {
        eprintln!("containers: cannot write {}: {error}", json.display());
    }
    println!("{}", report.figures());
    for step in &report.operator_steps {
        println!("  operator: {step}");
    }
    if report.violations.is_empty() {
        return ExitCode::SUCCESS;
    }
    println!("FAILED: seed {seed}; first violation: {}", report.violations[0]);
    println!("nemesis schedule:");
    for line in &report.schedule {
        println!("  {line}");
    }
    println!("violations ({}):", report.violations.len());
    for violation in report.violations.iter().take(20) {
        println!("  {violation}");
    }
    if let Some(dir) = &report.artifacts {
        println!("history, schedule, violations and container logs kept in {}", dir.display());
    }
    let mut again = format!(
        "cargo run -p simulation --bin containers -- --seed {seed} --duration {} --agents {}",
        humantime::format_duration(config.duration),
        config.agents
    );
    for (set, flag) in [
        (!config.membership, "--no-membership"),
        (!config.upgrade, "--no-upgrade"),
        (config.ungated_canary, "--ungated-canary"),
    ] {
        if set {
            again.push(' ');
            again.push_str(flag);
        }
    }
    println!("the same draws again (timings differ on real containers): {again}");
    ExitCode::from(1)
}
