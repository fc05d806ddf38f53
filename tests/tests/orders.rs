//! The leader's controller with real processes: a cooldown order that is due when the leader is
//! SIGKILLed fires exactly once for its window, whichever leader fires it; leases expire no
//! earlier than their ttl across the leader change, while a renewed one holds; a malformed
//! order is refused with its field named and stores nothing; `cluster status` shows when each
//! duty last ran.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use tests::{Cluster, json_of, strand_as, strand_binary, wait_for};

/// Judges often, so a test waits little.
const CONFIG: &str = "[controller]\nlease_sweep_interval_ms = 200\norder_check_interval = \"200ms\"\nconvoy_check_interval = \"200ms\"\n";

const FORMULA: &str = "formula = \"patrol\"\n[[steps]]\nid = \"look\"\ntitle = \"Look around\"\n";

fn strand(cluster: &Cluster, args: &[&str]) -> Output {
    strand_as(cluster, "ops", args)
}

fn json(output: &Output) -> Value {
    json_of(output)
}

/// `cluster status --json`, and the `orders` duty of the node whose controller runs.
fn orders_duty(cluster: &Cluster) -> Option<(Value, Value)> {
    let status = json(&strand(cluster, &["cluster", "status", "--json"]));
    let controller = status["controller"].as_u64()?;
    let node = status["nodes"].as_array()?.iter().find(|node| node["id"] == controller)?.clone();
    let duty = node["duties"].as_array()?.iter().find(|duty| duty["name"] == "orders")?.clone();
    Some((status, duty))
}

fn fired(cluster: &Cluster) -> u64 {
    json(&strand(cluster, &["order", "show", "patrol-sweep", "--json"]))["fired"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_order_fires_once_across_a_leader_kill_and_no_lease_expires_early() {
    let mut cluster = Cluster::start(3, Some(CONFIG));
    let dir = tempfile::tempdir().unwrap();
    let formula = dir.path().join("patrol.toml");
    std::fs::write(&formula, FORMULA).unwrap();
    json(&strand(&cluster, &["formula", "put", formula.to_str().unwrap(), "--json"]));

    // A malformed order is refused with its field named, and nothing is stored.
    let bad = dir.path().join("bad.toml");
    for (body, field) in [
        ("gate = \"hourly\"", "gate"),
        ("gate = \"cron\"\nschedule = \"61 * * * *\"", "schedule"),
        ("gate = \"manual\"\nformula = \"nope\"", "formula"),
    ] {
        let formula_line = if body.contains("formula") { "" } else { "formula = \"patrol\"\n" };
        std::fs::write(&bad, format!("[order]\n{formula_line}{body}\n")).unwrap();
        let output = strand(&cluster, &["order", "put", bad.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{body}: {stderr}");
        assert!(stderr.contains(&format!("{field}:")), "{body}: {stderr}");
    }
    assert_eq!(json(&strand(&cluster, &["order", "list", "--json"])), serde_json::json!([]));

    // Two leased claims: one kept alive, one whose agent is gone.
    for title in ["kept", "abandoned"] {
        json(&strand(&cluster, &["create", title, "--json"]));
    }
    let claimed_at = Instant::now();
    json(&strand(&cluster, &["claim", "st-1", "--lease", "3s", "--json"]));
    json(&strand(&cluster, &["claim", "st-2", "--lease", "3s", "--json"]));
    let mut keepalive = Command::new(strand_binary())
        .args(["--endpoints", &cluster.endpoints().join(","), "--actor", "ops", "lease", "keepalive", "st-1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();

    // A cooldown order that has never fired is due at once; the leader dies as it is stored.
    let order = dir.path().join("patrol-sweep.toml");
    std::fs::write(&order, "[order]\nformula = \"patrol\"\ngate = \"cooldown\"\ninterval = \"1h\"\npool = \"dog\"\n")
        .unwrap();
    let stored = json(&strand(&cluster, &["order", "put", order.to_str().unwrap(), "--json"]));
    assert_eq!((stored["name"].as_str(), stored["trigger"].as_str()), (Some("patrol-sweep"), Some("cooldown 1h0m0s")));
    let leader = cluster.wait_for_leader().await;
    cluster.kill(leader);

    // The new leader's controller carries on: the order fired once for its window.
    let once = wait_for("the order to fire", || async { (fired(&cluster) >= 1).then_some(()) });
    tokio::time::timeout(Duration::from_secs(30), once).await.expect("fired within 30 s");
    let abandoned_back = wait_for("the abandoned bead to be ready again", || async {
        let ready = json(&strand(&cluster, &["ready", "--json"]));
        ready.as_array().unwrap().iter().any(|bead| bead["id"] == "st-2").then_some(())
    });
    tokio::time::timeout(Duration::from_secs(30), abandoned_back).await.expect("expired within 30 s");
    assert!(claimed_at.elapsed() >= Duration::from_secs(3), "no lease expired before its ttl");
    // Three judgements of the orders that fire nothing pass on the new leader: the window is
    // not fired again.
    let mut idle_runs = std::collections::BTreeSet::new();
    let status = wait_for("the new controller to judge the orders three times without firing", || {
        let (status, duty) = orders_duty(&cluster).unzip();
        if let Some(duty) = duty.filter(|duty| duty["last_result"].as_str().is_some_and(|r| r.starts_with("fired 0"))) {
            idle_runs.insert(duty["last_run"].to_string());
        }
        let judged = (idle_runs.len() >= 3).then_some(status).flatten();
        async move { judged }
    });
    let status = tokio::time::timeout(Duration::from_secs(30), status).await.expect("judged again");
    assert_ne!(status["controller"], leader, "{status}");
    assert_eq!(fired(&cluster), 1, "exactly one firing for the window");
    let history = json(&strand(&cluster, &["order", "history", "patrol-sweep", "--json"]));
    assert_eq!(history.as_array().unwrap().len(), 1, "one tracking bead: {history}");
    let wisp = history[0]["metadata"]["order.wisp"].as_str().unwrap().to_string();
    let root = json(&strand(&cluster, &["show", &wisp, "--json"]))[0].clone();
    assert!(root["labels"].as_array().unwrap().iter().any(|label| label == "pool:dog"), "{root}");

    // The kept lease held through the leader change.
    let kept = json(&strand(&cluster, &["show", "st-1", "--json"]))[0].clone();
    assert_eq!((kept["status"].as_str(), kept.get("delivery_count")), (Some("in_progress"), None), "{kept}");
    let _ = keepalive.kill();
    let _ = keepalive.wait();

    // A manual run fires again at once; cluster status names every duty.
    json(&strand(&cluster, &["order", "run", "patrol-sweep", "--json"]));
    assert_eq!(fired(&cluster), 2);
    let text = strand(&cluster, &["cluster", "status"]);
    let text = String::from_utf8_lossy(&text.stdout);
    for duty in ["lease_sweep", "wisp_gc", "convoy_check", "orders"] {
        assert!(text.contains(duty), "{duty} in: {text}");
    }
}
