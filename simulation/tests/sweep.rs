//! The simulator as a CI system runs it: `--jobs`, `--time-budget`, `--keep-going`, `--swarm`, the
//! JUnit and JSON reports and the artifacts of failing seeds, through the `simulation` program
//! itself; and the bad input it must refuse before any seed runs.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn simulator() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_simulation"));
    command.env_remove(api::version::TEST_APPLY_NEXT_ENV);
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_report(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The records of a JSON report, each without its wall-clock time.
fn records_without_time(report: &Value) -> Vec<Value> {
    report["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|record| {
            let mut record = record.clone();
            record.as_object_mut().unwrap().remove("wall_ms");
            record
        })
        .collect()
}

#[test]
fn bad_input_exits_2_with_the_reason_before_any_seed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let report = dir.path().join("report.json");
    let cases: [(Vec<String>, &str); 6] = [
        (vec!["--jobs".into(), "0".into()], "--jobs"),
        (vec!["--time-budget".into(), "-5m".into()], "cannot be negative"),
        (vec!["--time-budget".into(), "0s".into()], "runs nothing"),
        (vec!["--artifacts".into(), file.join("artifacts").display().to_string()], "cannot write artifacts"),
        (vec!["--junit".into(), dir.path().display().to_string()], "is a directory"),
        (vec!["--junit".into(), file.join("junit.xml").display().to_string()], "cannot write the report"),
    ];
    for (args, reason) in cases {
        let output = simulator().args(["--seeds", "3", "--json"]).arg(&report).args(&args).output().unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(reason), "{args:?} did not say {reason:?}: {stderr}");
        assert!(!text(&output.stdout).contains("| seeds |"), "{args:?} ran seeds");
        assert!(!report.exists(), "{args:?} wrote a report");
    }
}

/// Seeds run in two worker processes record exactly what one worker running them in turn does;
/// the time budget stops handing out seeds once spent and says how many ran.
#[test]
fn a_sweep_on_two_workers_records_what_one_worker_does() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = |jobs: &str, report: &Path| {
        let output = simulator()
            .args(["--seeds", "4", "--start-seed", "40", "--duration", "3s", "--jobs", jobs, "--json"])
            .arg(report)
            .output()
            .unwrap();
        assert!(output.status.success(), "--jobs {jobs}: {}", text(&output.stderr));
        json_report(report)
    };
    let (serial, parallel) =
        (sweep("1", &dir.path().join("serial.json")), sweep("2", &dir.path().join("parallel.json")));
    assert_eq!(serial["totals"]["seeds"], 4);
    assert_eq!(records_without_time(&serial), records_without_time(&parallel));

    let budgeted = dir.path().join("budget.json");
    let output = simulator()
        .args(["--time-budget", "2s", "--duration", "2s", "--jobs", "1", "--json"])
        .arg(&budgeted)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report = json_report(&budgeted);
    let ran = report["totals"]["seeds"].as_u64().unwrap();
    assert!(ran >= 1 && report["budget_spent"] == true && report["seeds_asked"].is_null(), "{report}");
    assert!(text(&output.stdout).contains(&format!("the time budget of 2s was spent after {ran} seeds")));
}

/// The planted no-fsync bug under a swarm sweep that keeps going: every failing seed is in the
/// JUnit report (valid against the schema CI reporters read), in the JSON report, and has its
/// artifacts; a report that existed before is replaced only once the sweep is over.
#[test]
fn a_planted_bug_found_by_a_swarm_sweep_is_reported_in_junit_json_and_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let (junit, json, artifacts) =
        (dir.path().join("junit.xml"), dir.path().join("report.json"), dir.path().join("artifacts"));
    std::fs::write(&json, "an older report").unwrap();
    let seeds = 8;
    let output = simulator()
        .args(["--swarm", "--faults", "crash,partition,clock", "--mutation", "no-fsync", "--duration", "6s"])
        .args(["--seeds", &seeds.to_string(), "--keep-going", "--jobs", "2", "--junit"])
        .arg(&junit)
        .arg("--json")
        .arg(&json)
        .arg("--artifacts")
        .arg(&artifacts)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "the planted bug went unnoticed in {seeds} swarm seeds: {stderr}");

    let report = json_report(&json);
    assert_eq!(report["totals"]["seeds"], seeds, "--keep-going stopped early");
    let failing: Vec<u64> =
        report["failing_seeds"].as_array().unwrap().iter().map(|seed| seed.as_u64().unwrap()).collect();
    assert!(!failing.is_empty());
    let plans: std::collections::BTreeSet<&str> =
        report["seeds"].as_array().unwrap().iter().map(|record| record["plan"].as_str().unwrap()).collect();
    assert_eq!(plans.len(), seeds, "swarm seeds drew the same plan");

    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/junit.xsd");
    let lint = Command::new("xmllint").arg("--noout").arg("--schema").arg(&schema).arg(&junit).output().unwrap();
    assert!(lint.status.success(), "the JUnit report breaks the schema: {}", text(&lint.stderr));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), seeds);
    assert_eq!(xml.matches("<failure ").count(), failing.len());

    for &seed in &failing {
        assert!(xml.contains(&format!("name=\"seed {seed}\"")));
        assert!(stderr.contains(&format!("seed {seed} FAILED")), "seed {seed} not named: {stderr}");
        let seed_dir = artifacts.join(format!("seed-{seed}"));
        for file in ["violations.txt", "trace.txt", "schedule.txt", "replay.sh", "timeline.html", "plan.txt"] {
            let contents = std::fs::read_to_string(seed_dir.join(file)).unwrap_or_default();
            assert!(!contents.is_empty(), "seed {seed}'s {file} is missing or empty");
        }
        let replay = std::fs::read_to_string(seed_dir.join("replay.sh")).unwrap();
        assert!(replay.contains(&format!("--seed {seed} ")) && replay.contains("--swarm"), "{replay}");
        let timeline = std::fs::read_to_string(seed_dir.join("timeline.html")).unwrap();
        assert!(
            timeline.contains("<svg") && timeline.contains("agent-0") && timeline.contains("crash n"),
            "the timeline lacks its parts"
        );
        let schedule = std::fs::read_to_string(seed_dir.join("schedule.txt")).unwrap();
        assert!(schedule.starts_with("swarm: ") && schedule.contains("nemesis: "), "{schedule}");
        let violations = std::fs::read_to_string(seed_dir.join("violations.txt")).unwrap();
        assert!(!violations.contains("traced differently"), "the replay for the artifacts diverged: {violations}");
        let logs = std::fs::read_dir(seed_dir.join("nodes")).unwrap().count();
        assert_eq!(logs, 3, "one log per node");
    }

    // The README's shrink example is one of these failing seeds, with these options: shrunk, it
    // is smaller and still fails.
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let example = readme.lines().find(|line| line.contains("-- --shrink --seed ")).unwrap();
    let options: Vec<&str> = example.split_once(" -- ").unwrap().1.split_whitespace().collect();
    let seed: u64 = options[options.iter().position(|option| *option == "--seed").unwrap() + 1].parse().unwrap();
    assert!(failing.contains(&seed), "the README shrinks seed {seed}, which the swarm sweep did not find failing");
    for sweep_option in ["--swarm", "crash,partition,clock", "no-fsync", "6s"] {
        assert!(options.contains(&sweep_option), "the README's example lacks the sweep's {sweep_option}");
    }
    let output = simulator().args(&options).output().unwrap();
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}{}", text(&output.stderr));
    let size = |label: &str| -> Vec<u64> {
        let line = stdout.lines().find(|line| line.starts_with(label)).unwrap();
        line.split(|c: char| !c.is_ascii_digit()).filter_map(|number| number.parse().ok()).collect()
    };
    let (before, after) = (size("before:"), size("after:"));
    assert!(after[0] <= before[0] && after != before, "nothing shrank: {stdout}");
    let replay = stdout.lines().skip_while(|line| !line.starts_with("replay the smallest")).nth(1).unwrap();
    let (_, options) = replay.split_once(" -- ").unwrap();
    let replayed = simulator().args(options.split_whitespace()).output().unwrap();
    assert_eq!(replayed.status.code(), Some(1), "the smallest failing run passed when replayed: {replay}");
}

/// A sweep killed before it ends leaves a report that existed as it was, and no partial file.
#[test]
fn an_interrupted_sweep_leaves_the_reports_as_they_were() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let (json, artifacts) = (dir.path().join("report.json"), dir.path().join("artifacts"));
    std::fs::write(&json, "an older report").unwrap();
    let mut child = simulator()
        .args(["--faults", "crash", "--mutation", "no-fsync", "--duration", "6s", "--seeds", "200", "--keep-going"])
        .args(["--jobs", "1", "--json"])
        .arg(&json)
        .arg("--artifacts")
        .arg(&artifacts)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Waits for the first failing seed's artifacts: the sweep is then well under way.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let under_way = loop {
        let seeds = std::fs::read_dir(&artifacts)
            .map(|entries| {
                entries.flatten().filter(|entry| entry.file_name().to_string_lossy().starts_with("seed-")).count()
            })
            .unwrap_or(0);
        if seeds > 0 || std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            break seeds > 0;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // The whole process group: the sweep and its workers.
    let killed = Command::new("kill").args(["-s", "KILL", "--", &format!("-{}", child.id())]).status().unwrap();
    let _ = child.wait();
    assert!(under_way && killed.success(), "the sweep wrote no artifacts before the deadline");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "an older report");
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "partial reports left: {leftovers:?}");
}
