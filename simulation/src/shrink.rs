//! Shrinking a failing seed (`--shrink`), after Hypothesis and QuickCheck: a search for a smaller
//! run of the same seed that still fails the same way. It bounds, in turn, the number of faults
//! the nemesis injects ([`RunConfig::max_faults`], by bisection between none and as many as the
//! failing run injected), the fault phase (halved while it fails, down to a second) and the
//! agents ([`RunConfig::max_agents`], by bisection down to one), and answers the smallest failing
//! run with the command that replays it.
//!
//! Invariant: every run the search keeps failed with a violation of the same checker as the
//! original's first, so the answer is a real failing run, never a guess; each attempt is one
//! seed run by a sweep's worker process ([`crate::sweep`]), so a run that panics counts as a
//! failure of the simulator, not as the original's.

use std::path::Path;
use std::time::Duration;

use crate::run::RunConfig;
use crate::sweep::{SeedRecord, Sweep, sweep};

/// Most runs one shrink makes, the original's included.
pub const ATTEMPTS_MAX: usize = 40;
/// The shortest fault phase a shrink tries.
pub const DURATION_MIN: Duration = Duration::from_secs(1);

/// How big a run was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size {
    /// Faults the nemesis injected.
    pub faults: usize,
    /// The fault phase.
    pub duration: Duration,
    /// Agents.
    pub agents: usize,
    /// Operations.
    pub ops: usize,
}

impl Size {
    fn of(config: &RunConfig, record: &SeedRecord) -> Size {
        Size { faults: record.counts.faults, duration: config.duration, agents: record.agents, ops: record.counts.ops }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} faults, {} of faults, {} agents, {} operations",
            self.faults,
            humantime::format_duration(self.duration),
            self.agents,
            self.ops
        )
    }
}

/// What a shrink found.
#[derive(Debug)]
pub struct Shrunk {
    /// The original run's size.
    pub before: Size,
    /// The smallest failing run's size.
    pub after: Size,
    /// The smallest failing run.
    pub config: RunConfig,
    /// Its record.
    pub record: SeedRecord,
    /// The checker both fail.
    pub checker: String,
    /// Runs made.
    pub attempts: usize,
}

/// The checker of a record's first violation (`[checker] detail`).
fn first_checker(record: &SeedRecord) -> Option<String> {
    let first = record.violations.first()?;
    Some(first.strip_prefix('[')?.split(']').next()?.to_string())
}

struct Search<'a> {
    program: &'a Path,
    env: &'a [(String, String)],
    artifacts: Option<&'a Path>,
    checker: String,
    attempts: usize,
}

impl Search<'_> {
    /// Runs `config` once; answers its record when it fails like the original.
    fn fails(&mut self, config: &RunConfig, artifacts: bool) -> Result<Option<SeedRecord>, String> {
        self.attempts += 1;
        let mut one = Sweep::new(config.clone(), config.seed, 1, self.program);
        one.env = self.env.to_vec();
        one.artifacts = self.artifacts.filter(|_| artifacts).map(Path::to_path_buf);
        let record = sweep(&one, |_, _| {}).records.pop().ok_or("the worker ran nothing")?;
        Ok((first_checker(&record).as_deref() == Some(self.checker.as_str())).then_some(record))
    }

    fn room(&self) -> bool {
        self.attempts < ATTEMPTS_MAX
    }
}

/// Shrinks the failing run `config`; answers `None` when it passes (there is nothing to shrink),
/// and fails when a run cannot be made. `program` is the simulator its workers run, with `env`, and the smallest
/// failing run's artifacts go under `artifacts`.
pub fn shrink(
    config: &RunConfig,
    program: &Path,
    env: &[(String, String)],
    artifacts: Option<&Path>,
    mut progress: impl FnMut(&str),
) -> Result<Option<Shrunk>, String> {
    let mut search = Search { program, env, artifacts, checker: String::new(), attempts: 0 };
    let mut one = Sweep::new(config.clone(), config.seed, 1, program);
    one.env = env.to_vec();
    search.attempts += 1;
    let original = sweep(&one, |_, _| {}).records.pop().ok_or("the worker ran nothing")?;
    let Some(checker) = first_checker(&original) else { return Ok(None) };
    progress(&format!("seed {} fails: {}", config.seed, original.violations[0]));
    search.checker = checker.clone();
    let before = Size::of(config, &original);
    let (mut best, mut record) = (config.clone(), original);

    // Fewer faults: the fewest the failure still needs, by bisection; `high` always fails.
    let (mut low, mut high) = (0usize, record.counts.faults);
    let fewer = |bound: usize, best: &RunConfig, search: &mut Search| {
        search.fails(&RunConfig { max_faults: Some(bound), ..best.clone() }, false)
    };
    if let Some(found) = fewer(0, &best, &mut search)? {
        (best, record, high) = (RunConfig { max_faults: Some(0), ..best.clone() }, found, 0);
    }
    while high > low + 1 && search.room() {
        let middle = low + (high - low) / 2;
        match fewer(middle, &best, &mut search)? {
            Some(found) => {
                (best, record, high) = (RunConfig { max_faults: Some(middle), ..best.clone() }, found, middle);
            }
            None => low = middle,
        }
    }
    progress(&format!("at most {high} faults still fail ({} runs so far)", search.attempts));

    // A shorter fault phase: halved while it fails.
    while best.duration / 2 >= DURATION_MIN && search.room() {
        let shorter = RunConfig { duration: best.duration / 2, ..best.clone() };
        match search.fails(&shorter, false)? {
            Some(found) => (best, record) = (shorter, found),
            None => break,
        }
    }
    progress(&format!("a fault phase of {} still fails", humantime::format_duration(best.duration)));

    // Fewer agents, by bisection down to one.
    let (mut low, mut high) = (0usize, record.agents);
    while high > low + 1 && search.room() {
        let middle = low + (high - low) / 2;
        let fewer = RunConfig { max_agents: Some(middle), ..best.clone() };
        match search.fails(&fewer, false)? {
            Some(found) => (best, record, high) = (fewer, found, middle),
            None => low = middle,
        }
    }
    progress(&format!("{high} agents still fail"));

    // The smallest run once more, for its artifacts.
    if artifacts.is_some() {
        record = search.fails(&best, true)?.ok_or("the smallest failing run passed when run again")?;
    }
    let after = Size::of(&best, &record);
    Ok(Some(Shrunk { before, after, config: best, record, checker, attempts: search.attempts }))
}
