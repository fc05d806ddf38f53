//! What a sweep leaves for people and CI systems: the summary table, a JSON report (the summary
//! and one record per seed), a JUnit XML report (one test case per seed), and for each failing
//! seed a directory of artifacts: its whole trace, the nemesis' schedule, each node's log, its
//! violations, a replay script and an HTML timeline ([`crate::timeline`]).
//!
//! Invariant: a report file is written whole to a temporary file beside it and renamed over the
//! old one, so an interrupted sweep never leaves half a report (and a report that existed stays
//! as it was until the run completes); so is each seed's artifacts directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::run::{RunConfig, RunReport, run};
use crate::sweep::{Outcome, SeedRecord, Sweep};
use crate::timeline::escape;

/// The sums over a sweep's records.
#[derive(Debug, Default, Serialize)]
pub struct Totals {
    /// Seeds run.
    pub seeds: usize,
    /// Seeds that failed.
    pub failed: usize,
    /// Operations.
    pub ops: usize,
    /// Operations whose outcome stayed unknown.
    pub unknown_ops: usize,
    /// Order firings read back.
    pub order_firings: usize,
    /// Controller actions applied.
    pub controller_actions: usize,
    /// Terms in which controllers acted.
    pub controller_terms: usize,
    /// Faults injected.
    pub faults: usize,
    /// Nodes whose storage was damaged.
    pub damaged_nodes: usize,
    /// Wipes.
    pub wipes: usize,
    /// Failed starts.
    pub failed_starts: usize,
    /// Nodes upgraded.
    pub upgrades: usize,
    /// Runs that switched their apply version.
    pub switched: usize,
    /// Canaries applied.
    pub canaries_applied: usize,
    /// Canaries refused.
    pub canaries_refused: usize,
    /// Simulated seconds.
    pub simulated_s: f64,
    /// Wall-clock seconds of the sweep.
    pub wall_s: f64,
    /// Seeds per minute of wall-clock time.
    pub seeds_per_min: f64,
}

impl Totals {
    /// The sums of `outcome`.
    pub fn of(outcome: &Outcome) -> Totals {
        let mut totals = Totals { seeds: outcome.records.len(), ..Totals::default() };
        for record in &outcome.records {
            totals.failed += usize::from(!record.passed);
            totals.ops += record.counts.ops;
            totals.unknown_ops += record.counts.unknown_ops;
            totals.order_firings += record.counts.order_firings;
            totals.controller_actions += record.counts.controller_actions;
            totals.controller_terms += record.counts.controller_terms;
            totals.faults += record.counts.faults;
            totals.damaged_nodes += record.counts.damaged_nodes;
            totals.wipes += record.counts.wipes;
            totals.failed_starts += record.counts.failed_starts;
            totals.upgrades += record.counts.upgrades;
            totals.switched += usize::from(record.counts.switched);
            totals.canaries_applied += record.counts.canaries_applied;
            totals.canaries_refused += record.counts.canaries_refused;
            totals.simulated_s += record.simulated_ms as f64 / 1000.0;
        }
        totals.wall_s = outcome.wall.as_secs_f64();
        totals.seeds_per_min = totals.seeds as f64 * 60.0 / totals.wall_s.max(f64::EPSILON);
        totals
    }

    /// The summary as a Markdown table.
    pub fn table(&self, nodes: u64) -> String {
        format!(
            "| seeds | failed | nodes | ops | unknown outcome | order firings | controller actions (terms) | faults | damaged nodes | wipes | failed starts | upgrades (runs switched) | canaries applied/refused | simulated | wall | simulated/wall | seeds/min |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n\
             | {} | {} | {nodes} | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} ({}) | {}/{} | {:.0} s | {:.1} s | {:.1} | {:.1} |",
            self.seeds,
            self.failed,
            self.ops,
            self.unknown_ops,
            self.order_firings,
            self.controller_actions,
            self.controller_terms,
            self.faults,
            self.damaged_nodes,
            self.wipes,
            self.failed_starts,
            self.upgrades,
            self.switched,
            self.canaries_applied,
            self.canaries_refused,
            self.simulated_s,
            self.wall_s,
            self.simulated_s / self.wall_s.max(f64::EPSILON),
            self.seeds_per_min
        )
    }
}

/// The JSON report: the sweep's settings, its totals, the failing seeds and every record.
pub fn json(sweep: &Sweep, outcome: &Outcome) -> String {
    let failing: Vec<u64> = outcome.failures().map(|record| record.seed).collect();
    let report = serde_json::json!({
        "simulator": "strand simulation",
        "version": env!("CARGO_PKG_VERSION"),
        "options": sweep.template.cli_args().join(" "),
        "start_seed": sweep.start,
        "seeds_asked": sweep.count,
        "time_budget_s": sweep.budget.map(|budget| budget.as_secs_f64()),
        "jobs": sweep.jobs,
        "keep_going": sweep.keep_going,
        "stopped_at_failure": outcome.stopped_at_failure,
        "budget_spent": outcome.budget_spent,
        "passed": failing.is_empty(),
        "totals": Totals::of(outcome),
        "failing_seeds": failing,
        "seeds": outcome.records,
    });
    let mut text = serde_json::to_string_pretty(&report).expect("a report serialises");
    text.push('\n');
    text
}

/// The JUnit XML report: one test suite, one test case per seed, a failing seed's case failing
/// with its violations and the command that replays it.
pub fn junit(sweep: &Sweep, outcome: &Outcome) -> String {
    let totals = Totals::of(outcome);
    let suite = format!("simulation {}", sweep.template.cli_args().join(" "));
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        r#"<testsuites name="strand simulation" tests="{}" failures="{}" errors="0" time="{:.3}">"#,
        totals.seeds, totals.failed, totals.wall_s
    );
    let _ = writeln!(
        xml,
        r#"  <testsuite name="{}" tests="{}" failures="{}" errors="0" skipped="0" time="{:.3}" timestamp="{}">"#,
        escape(&suite),
        totals.seeds,
        totals.failed,
        totals.wall_s,
        humantime::format_rfc3339_seconds(outcome.started_at).to_string().trim_end_matches('Z')
    );
    for record in &outcome.records {
        let _ = write!(
            xml,
            r#"    <testcase name="seed {}" classname="simulation.{}-nodes" time="{:.3}""#,
            record.seed,
            sweep.template.nodes,
            record.wall_ms as f64 / 1000.0
        );
        xml.push_str(">\n");
        if !record.passed {
            let first = record.violations.first().cloned().unwrap_or_default();
            let mut body = record.violations.join("\n");
            let _ = write!(body, "\n\nreplay it with:\n  {}", record.replay);
            if let Some(dir) = &record.artifacts {
                let _ = write!(body, "\nartifacts: {dir}");
            }
            let _ = writeln!(
                xml,
                r#"      <failure message="{} violation(s): {}" type="violation">{}</failure>"#,
                record.violations.len(),
                escape(&first),
                escape(&body)
            );
        }
        let _ = writeln!(
            xml,
            "      <system-out>plan: {}\nops {}, faults {}, simulated {:.1} s, trace hash {}\nreplay: {}</system-out>",
            escape(&record.plan),
            record.counts.ops,
            record.counts.faults,
            record.simulated_ms as f64 / 1000.0,
            record.trace_hash,
            escape(&record.replay)
        );
        xml.push_str("    </testcase>\n");
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// A temporary path beside `path`, which a rename moves into place.
fn partial(path: &Path) -> PathBuf {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// Writes `contents` to `path` whole or not at all: to a temporary file beside it, then renamed.
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), String> {
    let temporary = partial(path);
    std::fs::write(&temporary, contents).and_then(|()| std::fs::rename(&temporary, path)).map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write {}: {error}", path.display())
    })
}

/// Checks, before any seed runs, that a report can be written to `path`: its directory exists
/// and takes a file, and the path is not a directory.
pub fn check_report_path(path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!("{} is a directory; give the report a file name", path.display()));
    }
    let probe = partial(path);
    std::fs::write(&probe, b"").and_then(|()| std::fs::remove_file(&probe)).map_err(|error| {
        format!("cannot write the report {}: {error}; give a path in a writable directory", path.display())
    })
}

/// Checks, before any seed runs, that `dir` can take artifacts: it is made if missing, and a file
/// can be written in it.
pub fn check_artifacts_dir(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|error| {
            format!("cannot write artifacts to {}: {error}; give a directory that can be written", dir.display())
        })
}

/// The lines of a trace that make the nemesis' schedule: the swarm draw, the faults, the
/// repairs and the operator's steps.
fn schedule(trace: &[String]) -> String {
    let mut lines: Vec<&str> = trace
        .iter()
        .map(String::as_str)
        .filter(|line| line.starts_with("swarm: ") || line.contains("] nemesis: ") || line.contains("] operator: "))
        .collect();
    lines.push("");
    lines.join("\n")
}

/// Writes a failing seed's artifacts under `dir`/seed-N, from a second run of it that keeps its
/// trace and its nodes' logs; answers the directory.
pub fn artifacts(dir: &Path, failed: &RunReport) -> Result<PathBuf, String> {
    let config = RunConfig { keep_trace: true, node_logs: true, ..failed.config.clone() };
    let seed = config.seed;
    let replayed = run(&config)?;
    let target = dir.join(format!("seed-{seed}"));
    let temporary = partial(&target);
    let io = |error: std::io::Error| format!("{}: {error}", temporary.display());
    let _ = std::fs::remove_dir_all(&temporary);
    std::fs::create_dir_all(temporary.join("nodes")).map_err(io)?;
    let violations: Vec<String> = failed.violations.iter().map(ToString::to_string).collect();
    let mut found = violations.join("\n");
    found.push('\n');
    if replayed.trace_hash != failed.trace_hash {
        let _ = writeln!(
            found,
            "\nnote: the replay that wrote these artifacts traced differently (hash {:016x}, the failing run {:016x})",
            replayed.trace_hash, failed.trace_hash
        );
    }
    let mut trace = replayed.trace.join("\n");
    let _ = writeln!(trace, "\ntrace hash {:016x}", replayed.trace_hash);
    let replay = config.replay_command();
    let script = format!(
        "#!/bin/sh\n# Replays seed {seed} (from the repository's root); its trace goes to standard output.\nexec env {}\n",
        replay
    );
    let timeline = replayed.timeline.as_ref().map_or_else(String::new, |timeline| {
        timeline.html(&format!("Seed {seed}: {} violation(s)", violations.len()), &violations, &replay)
    });
    let files = [
        ("violations.txt", found),
        ("trace.txt", trace),
        ("schedule.txt", schedule(&replayed.trace)),
        ("replay.sh", script),
        ("timeline.html", timeline),
        ("plan.txt", format!("{}\n", replayed.plan.describe())),
    ];
    for (name, contents) in files {
        std::fs::write(temporary.join(name), contents).map_err(io)?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(temporary.join("replay.sh"), std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    }
    for (node, lines) in &replayed.node_logs {
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(temporary.join("nodes").join(format!("n{node}.log")), text).map_err(io)?;
    }
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&temporary, &target).map_err(|error| format!("{}: {error}", target.display()))?;
    Ok(target)
}

/// The records' lines for a failing sweep: each failing seed, its first violations and its
/// replay command.
pub fn failures(records: &[SeedRecord], shown: usize) -> String {
    let mut text = String::new();
    for record in records.iter().filter(|record| !record.passed) {
        let _ = writeln!(text, "\nseed {} FAILED: {} violation(s)", record.seed, record.violations.len());
        for violation in record.violations.iter().take(shown) {
            let _ = writeln!(text, "- {violation}");
        }
        if record.violations.len() > shown {
            let _ = writeln!(text, "- ... and {} more", record.violations.len() - shown);
        }
        let _ = writeln!(text, "replay it with:\n  {}", record.replay);
        if let Some(dir) = &record.artifacts {
            let _ = writeln!(text, "artifacts: {dir}");
        }
    }
    text
}
