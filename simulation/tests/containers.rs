//! The container run (`--bin containers`): the `deploy/` compose cluster under a real nemesis,
//! checked by the simulator's checkers. Docker is required: where it is missing the run tests
//! skip with one line, except in CI (`CI` set), where they fail.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::PathBuf;
use std::process::{Command, Output};

fn containers() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_containers"));
    command.env_remove("RUST_LOG");
    command
}

/// The strand binary beside this test's build (`cargo build --workspace --bins` made it).
fn strand() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_containers")).with_file_name("strand")
}

/// Whether the run can run here; when it cannot, says why on one line, and fails in CI.
fn docker_here() -> bool {
    match simulation::containers::docker::unavailable() {
        None => true,
        Some(why) if std::env::var_os("CI").is_some() => panic!("CI must run the container run, but {why}"),
        Some(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The seed of `make test`'s run: drawn from the commit, as the simulator's fresh bands are.
fn seed() -> u64 {
    let commit = std::env::var("STRAND_SIM_FRESH_SEED").unwrap_or_default();
    commit.bytes().fold(7u64, |seed, byte| seed.wrapping_mul(31).wrapping_add(u64::from(byte)))
}

#[test]
fn bad_input_changes_nothing_and_says_what_to_do() {
    let short = containers().args(["--duration", "1s"]).output().unwrap();
    assert_eq!(short.status.code(), Some(2), "{}", text(&short));
    assert!(text(&short).contains("at least 5s"), "{}", text(&short));
    let no_binary = containers().args(["--strand", "/nonexistent/strand"]).output().unwrap();
    assert_eq!(no_binary.status.code(), Some(2), "{}", text(&no_binary));
    assert!(text(&no_binary).contains("pass --strand"), "{}", text(&no_binary));
    // Without Docker on the path: one line saying why, and the skip exit code.
    let strand = strand();
    let no_docker =
        containers().args(["--strand", strand.to_str().unwrap()]).env("PATH", "/nonexistent").output().unwrap();
    assert_eq!(no_docker.status.code(), Some(77), "{}", text(&no_docker));
    let said = String::from_utf8_lossy(&no_docker.stdout);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.starts_with("skipped: ") && said.contains("Docker is not available"), "{said}");
}

#[test]
fn the_compose_cluster_holds_under_real_partitions_kills_and_membership_changes() {
    if !docker_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let artifacts = dir.path().join("artifacts");
    let seed = seed().to_string();
    let output = containers()
        .args(["--seed", &seed, "--duration", "60s", "--agents", "4", "--json"])
        .arg(&report)
        .arg("--artifacts")
        .arg(&artifacts)
        .output()
        .unwrap();
    let said = text(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(report["violations"].as_array().unwrap().is_empty(), "{report:#}");
    assert!(report["operations"].as_u64().unwrap() >= 200, "{report:#}");
    // Faults of many kinds were applied (each kind once a round), a kill among them (one during
    // the join).
    let faults = report["faults"].as_object().unwrap();
    assert!(faults.len() >= 6 && faults["kill"].as_u64().unwrap() >= 1, "{report:#}");
    // Every member was upgraded, and the cluster switched to the newer build's apply version.
    assert!(faults["upgrade"].as_u64().unwrap() >= 3, "{report:#}");
    let versions = report["apply_versions"].as_object().unwrap();
    assert_eq!(versions.len(), 3, "{report:#}");
    let next = u64::from(api::version::NEXT_APPLY_VERSION);
    assert!(versions.values().all(|version| version.as_u64() == Some(next)), "{report:#}");
    // The membership change was acknowledged: node 4 joined, a first member was removed.
    let operator: Vec<&str> =
        report["operator"].as_array().unwrap().iter().map(|step| step.as_str().unwrap()).collect();
    assert!(operator.iter().any(|step| step.starts_with("AddSpare(4) -> node 4 joined")), "{operator:?}");
    assert!(operator.iter().any(|step| step.starts_with("Remove(") && step.contains("-> membership")), "{operator:?}");
    // A passing run keeps nothing, and leaves no container, network or volume behind.
    assert!(!artifacts.exists());
    let projects = Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Label \"com.docker.compose.project\"}}"])
        .output()
        .unwrap();
    let projects = String::from_utf8_lossy(&projects.stdout);
    let suffix = format!("x{seed}");
    assert!(
        !projects.lines().any(|project| project.starts_with("strandjepsen") && project.ends_with(&suffix)),
        "{projects}"
    );
}

#[test]
fn a_container_that_does_not_come_back_fails_the_run_naming_it() {
    if !docker_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let output = containers()
        .args(["--seed", "3", "--duration", "5s", "--agents", "1", "--no-membership", "--artifacts"])
        .arg(&artifacts)
        .env("STRAND_CONTAINERS_TEST_LOSE_NODE", "2")
        .env("STRAND_CONTAINERS_TEST_BACK_MS", "5000")
        .output()
        .unwrap();
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("FAILED: seed 3; first violation: [containers] node 2 did not come back after the heal"),
        "{said}"
    );
    assert!(said.contains("nemesis schedule:"), "{said}");
    for kept in ["history.txt", "schedule.txt", "violations.txt", "report.json", "logs/node1.log"] {
        assert!(artifacts.join(kept).is_file(), "{kept} not kept: {said}");
    }
}

#[test]
fn a_build_that_decides_a_rule_by_itself_is_caught_in_containers() {
    if !docker_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let output = containers()
        .args(["--seed", "2", "--duration", "10s", "--agents", "2", "--no-membership", "--ungated-canary", "--json"])
        .arg(&report)
        .arg("--artifacts")
        .arg(dir.path().join("artifacts"))
        .output()
        .unwrap();
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("FAILED: seed 2; first violation: "), "{said}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    // The replicas applied the canaries differently: their states differ.
    let violations: Vec<&str> =
        report["violations"].as_array().unwrap().iter().map(|violation| violation.as_str().unwrap()).collect();
    assert!(
        violations.iter().any(|violation| violation.starts_with("[convergence]") || violation.starts_with("[upgrade]")),
        "{violations:?}"
    );
}

#[test]
fn an_interrupted_run_removes_its_containers() {
    if !docker_here() {
        return;
    }
    let mut child = containers()
        .args(["--seed", "4", "--duration", "60s", "--agents", "1", "--no-membership", "--no-upgrade"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let project = format!("label=com.docker.compose.project=strandjepsen{}x4", child.id());
    let containers_of_run = || {
        let listed = Command::new("docker").args(["ps", "-aq", "--filter", &project]).output().unwrap();
        String::from_utf8_lossy(&listed.stdout).lines().count()
    };
    let started = std::time::Instant::now();
    while containers_of_run() < 3 {
        assert!(started.elapsed() < std::time::Duration::from_secs(300), "the run's containers never appeared");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its containers appeared");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let killed = Command::new("kill").args(["-s", "TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(containers_of_run(), 0, "containers of the interrupted run are left");
    let networks = Command::new("docker")
        .args(["network", "ls", "-q", "--filter", &format!("name=strandjepsen{}x4", child.id())])
        .output()
        .unwrap();
    assert!(networks.stdout.is_empty(), "its network is left");
}
