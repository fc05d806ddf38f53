//! A sweep: seeds run by worker processes, at most `--jobs` at once. A worker is the simulator
//! itself started with `--worker --seed N` and the sweep's options: it runs that one seed
//! ([`crate::run::run`]) and answers its [`SeedRecord`] as a line of JSON on standard output.
//!
//! One process per seed is how a replay runs too (determinism is held across processes, not
//! between runs inside one), so a seed's record does not depend on how many workers ran, or on
//! which seeds ran before it: a sweep's records, sorted by seed, are those of a serial run of the
//! same seeds. A worker is also the unit of failure: a panic inside a simulated host aborts the
//! whole process (turmoil shuts the host's runtime down), so it takes down that seed's worker
//! only, and the seed is recorded as failed with the worker's last words.
//!
//! A sweep stops handing out seeds at its first failure, unless it keeps going, and once its time
//! budget is spent; seeds already handed out finish and are recorded.
//!
//! Invariant: every seed handed out ends in exactly one record, and every record names the
//! command that replays it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::run::{Counts, RunConfig, RunReport, run};

/// Lines of a dead worker's standard error kept for its seed's record.
const STDERR_LINES_KEPT: usize = 20;

/// What one seed did and found: one line of a worker's answer, and of the JSON report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedRecord {
    /// The seed.
    pub seed: u64,
    /// No checker found anything and the run completed.
    pub passed: bool,
    /// What the checkers found (`[checker] detail`), or why the run could not complete.
    pub violations: Vec<String>,
    /// The command that replays the seed.
    pub replay: String,
    /// What it injected and drove (drawn from the seed in a swarm run).
    pub plan: String,
    /// Whether its plan was drawn (a swarm run).
    pub swarm: bool,
    /// Its agents (drawn in a swarm run).
    pub agents: usize,
    /// What it counted.
    #[serde(flatten)]
    pub counts: Counts,
    /// Simulated time, in milliseconds.
    pub simulated_ms: u64,
    /// Wall-clock time, in milliseconds.
    pub wall_ms: u64,
    /// The trace's hash, in hex (empty when the run did not complete).
    pub trace_hash: String,
    /// The directory of its artifacts, when it failed and artifacts were asked for.
    pub artifacts: Option<String>,
}

/// Violations a record keeps; a failing seed's artifacts (`violations.txt`) hold them all, so
/// that a sweep of many failing seeds keeps its reports, and its memory, bounded per seed.
pub const VIOLATIONS_KEPT: usize = 100;

fn kept_violations(violations: &[crate::checkers::Violation]) -> Vec<String> {
    let mut kept: Vec<String> = violations.iter().take(VIOLATIONS_KEPT).map(ToString::to_string).collect();
    if violations.len() > VIOLATIONS_KEPT {
        kept.push(format!(
            "... and {} more (a failing seed's artifacts, violations.txt, hold them all)",
            violations.len() - VIOLATIONS_KEPT
        ));
    }
    kept
}

impl SeedRecord {
    /// The record of a completed run.
    pub fn of(report: &RunReport) -> SeedRecord {
        SeedRecord {
            seed: report.config.seed,
            passed: report.violations.is_empty(),
            violations: kept_violations(&report.violations),
            replay: report.config.replay_command(),
            plan: report.plan.describe(),
            swarm: report.plan.drawn,
            agents: report.plan.agents,
            counts: report.counts.clone(),
            simulated_ms: report.simulated.as_millis() as u64,
            wall_ms: report.wall.as_millis() as u64,
            trace_hash: format!("{:016x}", report.trace_hash),
            artifacts: None,
        }
    }

    /// The record of a seed whose run did not complete: the simulator could not run it, or its
    /// worker died while running it.
    pub fn incomplete(config: &RunConfig, why: String, wall: Duration) -> SeedRecord {
        let plan = crate::swarm::Plan::of(config);
        SeedRecord {
            seed: config.seed,
            passed: false,
            violations: vec![format!("[simulator] {why}")],
            replay: config.replay_command(),
            plan: plan.describe(),
            swarm: config.swarm,
            agents: plan.agents,
            counts: Counts::default(),
            simulated_ms: 0,
            wall_ms: wall.as_millis() as u64,
            trace_hash: String::new(),
            artifacts: None,
        }
    }
}

/// Which seeds a sweep runs.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// Every run's configuration but its seed.
    pub template: RunConfig,
    /// The first seed.
    pub start: u64,
    /// How many seeds at most (none: until the budget is spent).
    pub count: Option<u64>,
    /// Hand out no seed once this much wall-clock time has passed.
    pub budget: Option<Duration>,
    /// Worker processes.
    pub jobs: usize,
    /// Go on past failures.
    pub keep_going: bool,
    /// The simulator program the workers run.
    pub program: PathBuf,
    /// Environment the workers get beside the sweep's own.
    pub env: Vec<(String, String)>,
    /// Where a failing seed's artifacts go.
    pub artifacts: Option<PathBuf>,
}

impl Sweep {
    /// A sweep of `count` seeds from `start` with `template`, one worker, stopping at the first
    /// failure, run by `program`.
    pub fn new(template: RunConfig, start: u64, count: u64, program: impl Into<PathBuf>) -> Sweep {
        Sweep {
            template,
            start,
            count: Some(count),
            budget: None,
            jobs: 1,
            keep_going: false,
            program: program.into(),
            env: Vec::new(),
            artifacts: None,
        }
    }

    /// The command line of the worker that runs `seed`.
    fn worker(&self, seed: u64) -> Command {
        let mut command = Command::new(&self.program);
        command.args(["--worker", "--seed", &seed.to_string()]).args(self.template.cli_args());
        if let Some(dir) = &self.artifacts {
            command.arg("--artifacts").arg(dir);
        }
        command.envs(self.env.iter().map(|(key, value)| (key, value)));
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    }
}

/// What a sweep did.
#[derive(Debug)]
pub struct Outcome {
    /// One record per seed run, by seed.
    pub records: Vec<SeedRecord>,
    /// Wall-clock time.
    pub wall: Duration,
    /// When it started, by the machine's clock (the JUnit report's timestamp).
    pub started_at: std::time::SystemTime,
    /// It stopped handing out seeds at a failure.
    pub stopped_at_failure: bool,
    /// It stopped handing out seeds when its budget was spent.
    pub budget_spent: bool,
}

impl Outcome {
    /// The records of the seeds that failed.
    pub fn failures(&self) -> impl Iterator<Item = &SeedRecord> {
        self.records.iter().filter(|record| !record.passed)
    }
}

/// The seeds left to hand out.
struct Dispatch {
    next: u64,
    end: Option<u64>,
    stop: bool,
    budget_spent: bool,
    stopped_at_failure: bool,
}

impl Dispatch {
    fn take(&mut self, started: Instant, budget: Option<Duration>) -> Option<u64> {
        if budget.is_some_and(|budget| started.elapsed() >= budget) {
            self.budget_spent = true;
            self.stop = true;
        }
        if self.stop || self.end.is_some_and(|end| self.next >= end) {
            return None;
        }
        let seed = self.next;
        self.next = self.next.wrapping_add(1);
        Some(seed)
    }
}

/// Runs `seed` in a worker process of its own; answers its record, or why the worker gave none.
fn run_in_worker(sweep: &Sweep, seed: u64) -> SeedRecord {
    let began = Instant::now();
    let config = RunConfig { seed, ..sweep.template.clone() };
    let mut child = match sweep.worker(seed).spawn() {
        Ok(child) => child,
        Err(error) => {
            let why = format!("cannot start a worker ({}): {error}", sweep.program.display());
            return SeedRecord::incomplete(&config, why, began.elapsed());
        }
    };
    let stderr_pipe = child.stderr.take().expect("piped stderr");
    // Keeps the worker's last lines of standard error in case it dies, and passes them all on
    // when RUST_LOG asks for logs (a failing seed's artifacts hold its nodes' logs).
    let forward = std::env::var_os("RUST_LOG").is_some();
    let last_words = std::thread::spawn(move || {
        let mut kept = VecDeque::new();
        for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
            if forward {
                eprintln!("{line}");
            }
            if kept.len() == STDERR_LINES_KEPT {
                kept.pop_front();
            }
            kept.push_back(line);
        }
        kept
    });
    let mut answer = String::new();
    let read = child.stdout.take().expect("piped stdout").read_to_string(&mut answer);
    let status = child.wait();
    let last_words: Vec<String> = last_words.join().unwrap_or_default().into();
    let record = read.ok().and_then(|_| answer.lines().last().and_then(|line| serde_json::from_str(line).ok()));
    match (record, status) {
        (Some(record), Ok(_)) => record,
        (_, status) => {
            let status = status.map_or_else(|error| error.to_string(), |status| status.to_string());
            let why = format!(
                "its worker process ended ({status}) without answering; its last words:\n{}",
                last_words.join("\n")
            );
            SeedRecord::incomplete(&config, why, began.elapsed())
        }
    }
}

/// Runs the sweep; `on_record` sees each record as it comes, with the seeds run so far. A seed
/// whose worker could not start or gave no answer is a failed record.
pub fn sweep(sweep: &Sweep, mut on_record: impl FnMut(&SeedRecord, usize)) -> Outcome {
    let started = Instant::now();
    #[allow(clippy::disallowed_methods)] // The CI run's own time, outside every simulated run.
    let started_at = std::time::SystemTime::now();
    let dispatch = Arc::new(Mutex::new(Dispatch {
        next: sweep.start,
        end: sweep.count.map(|count| sweep.start.saturating_add(count)),
        stop: false,
        budget_spent: false,
        stopped_at_failure: false,
    }));
    let (sender, receiver) = mpsc::channel::<SeedRecord>();
    let mut threads = Vec::new();
    for _ in 0..sweep.jobs.max(1) {
        let (sweep, dispatch, sender) = (sweep.clone(), dispatch.clone(), sender.clone());
        threads.push(std::thread::spawn(move || {
            loop {
                let Some(seed) = dispatch.lock().expect("dispatch lock").take(started, sweep.budget) else { break };
                let record = run_in_worker(&sweep, seed);
                if !record.passed && !sweep.keep_going {
                    let mut dispatch = dispatch.lock().expect("dispatch lock");
                    dispatch.stop = true;
                    dispatch.stopped_at_failure = true;
                }
                if sender.send(record).is_err() {
                    break;
                }
            }
        }));
    }
    drop(sender);
    let mut records = Vec::new();
    for record in receiver {
        records.push(record);
        on_record(records.last().expect("just pushed"), records.len());
    }
    for thread in threads {
        let _ = thread.join();
    }
    records.sort_by_key(|record| record.seed);
    let dispatch = dispatch.lock().expect("dispatch lock");
    Outcome {
        records,
        wall: started.elapsed(),
        started_at,
        stopped_at_failure: dispatch.stopped_at_failure,
        budget_spent: dispatch.budget_spent,
    }
}

/// A worker's life: runs the one seed of `config` and answers its record as one line of JSON on
/// standard output. A failing seed's artifacts are written under `artifacts`, from a second run
/// of the same seed that keeps its trace and its nodes' logs.
pub fn serve(config: &RunConfig, artifacts: Option<&Path>) -> Result<(), String> {
    let began = Instant::now();
    let seed = config.seed;
    let record = match run(config) {
        Ok(report) => {
            let mut record = SeedRecord::of(&report);
            if let (false, Some(dir)) = (record.passed, artifacts) {
                match crate::report::artifacts(dir, &report) {
                    Ok(written) => record.artifacts = Some(written.display().to_string()),
                    Err(error) => eprintln!("seed {seed}: its artifacts could not be written: {error}"),
                }
            }
            record
        }
        Err(error) => {
            SeedRecord::incomplete(config, format!("the simulator could not run it: {error}"), began.elapsed())
        }
    };
    let json = serde_json::to_string(&record).map_err(|error| error.to_string())?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{json}").and_then(|()| stdout.flush()).map_err(|error| format!("cannot answer: {error}"))
}
