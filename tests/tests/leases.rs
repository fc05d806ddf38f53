//! Leased claims with real processes: an agent holding a leased claim dies, its bead comes back
//! to `ready` within the lease and a sweep, another agent claims it, and the dead agent's late
//! write with its old lease id is refused while the new holder's work stands; a leader change
//! expires no lease whose holder keeps renewing it.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;
use tests::{Cluster, json_of, strand_as, strand_binary, wait_for};

/// Sweeps often, so a test waits little for an expiry.
const CONFIG: &str = "[controller]\nlease_sweep_interval_ms = 200\n";

fn strand(cluster: &Cluster, actor: &str, args: &[&str]) -> Output {
    strand_as(cluster, actor, args)
}

fn json(output: &Output) -> Value {
    json_of(output)
}

fn show(cluster: &Cluster, id: &str) -> Value {
    json(&strand(cluster, "observer", &["show", id, "--json"]))[0].clone()
}

/// A `lease keepalive` process, killed when dropped; its renewals arrive as lines.
struct Keepalive {
    child: Child,
    lines: Receiver<String>,
}

impl Keepalive {
    fn start(cluster: &Cluster, actor: &str, id: &str) -> Keepalive {
        let mut child = Command::new(strand_binary())
            .args(["--endpoints", &cluster.endpoints().join(","), "--actor", actor, "--json"])
            .args(["lease", "keepalive", id])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Keepalive { child, lines }
    }

    /// Waits for `count` more renewals; answers the last one's bead.
    fn renewals(&self, count: usize) -> Value {
        let mut last = Value::Null;
        for _ in 0..count {
            let line = self.lines.recv_timeout(Duration::from_secs(30)).expect("a renewal within 30 s");
            last = serde_json::from_str(&line).unwrap();
        }
        last
    }
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_agents_leased_claim_comes_back_and_its_late_write_is_refused() {
    let cluster = Cluster::start(3, Some(CONFIG));
    json(&strand(&cluster, "lead", &["create", "build the parser", "--json"]));

    // Bad leases are refused, and nothing is claimed.
    for (lease, says) in
        [("0s", "out of range"), ("500ms", "out of range"), ("30d", "out of range"), ("soon", "not a duration")]
    {
        let output = strand(&cluster, "alice", &["claim", "st-1", "--lease", lease]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "--lease {lease}: {stderr}");
        assert!(stderr.contains(says), "--lease {lease}: {stderr}");
    }
    assert_eq!(show(&cluster, "st-1")["status"], "open");

    // Alice claims with a 2 s lease and keeps it alive past the lease; then she dies.
    let claimed = json(&strand(&cluster, "alice", &["claim", "st-1", "--lease", "2s", "--json"]));
    let old_lease = claimed["lease"]["id"].as_u64().expect("a leased claim prints its lease id");
    assert_eq!(claimed["lease"]["holder"], "alice");
    let keepalive = Keepalive::start(&cluster, "alice", "st-1");
    let renewed = keepalive.renewals(5);
    assert_eq!((renewed["lease"]["id"].as_u64(), renewed["assignee"].as_str()), (Some(old_lease), Some("alice")));
    assert_eq!(show(&cluster, "st-1")["status"], "in_progress", "renewed past its 2 s lease, the claim holds");
    let listed = |args: &[&str]| -> Vec<Value> {
        json(&strand(&cluster, "observer", &[&["list", "--json"][..], args].concat())).as_array().unwrap().clone()
    };
    assert_eq!(listed(&["--lease-expiring", "1h"]).len(), 1, "the lease lapses within the hour");
    assert!(listed(&["--lease-expired"]).is_empty(), "a renewed lease has not lapsed");
    let refused = strand(&cluster, "mallory", &["lease", "renew", "st-1"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is leased to alice"), "the holder is named");
    drop(keepalive);

    // Within the lease and a sweep (and a margin), the bead is ready again.
    let ready = wait_for("the dead agent's bead to be ready again", || async {
        let listed = json(&strand(&cluster, "bob", &["ready", "--json"]));
        listed.as_array().unwrap().iter().any(|bead| bead["id"] == "st-1").then_some(())
    });
    tokio::time::timeout(Duration::from_secs(20), ready).await.expect("ready again within 20 s");
    let bead = show(&cluster, "st-1");
    assert_eq!((bead["assignee"].as_str(), bead["delivery_count"].as_u64()), (Some(""), Some(1)), "{bead}");
    let events = json(&strand(&cluster, "observer", &["events", "--json"]));
    let expired = events.as_array().unwrap().iter().find(|event| event["type"] == "lease.expired").expect("an event");
    assert_eq!(expired["message"], "alice", "the event names the old holder: {expired}");

    // Bob takes it; alice's late close with her old lease id is refused, and bob's work stands.
    let taken = json(&strand(&cluster, "bob", &["claim", "st-1", "--lease", "1m", "--json"]));
    let new_lease = taken["lease"]["id"].as_u64().unwrap();
    assert!(new_lease > old_lease, "the fencing token grows: {new_lease} > {old_lease}");
    json(&strand(
        &cluster,
        "bob",
        &["update", "st-1", "--notes", "bob's fix", "--lease-id", &new_lease.to_string(), "--json"],
    ));
    let late = strand(&cluster, "alice", &["close", "st-1", "--lease-id", &old_lease.to_string()]);
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert_eq!(late.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("claim lost") && stderr.contains("now held by bob"), "{stderr}");
    let bead = show(&cluster, "st-1");
    assert_eq!((bead["status"].as_str(), bead["notes"].as_str()), (Some("in_progress"), Some("bob's fix")));
    let done = Command::new(strand_binary())
        .args(["--endpoints", &cluster.endpoints().join(","), "--actor", "bob", "close", "st-1"])
        .env("STRAND_LEASE_ID", new_lease.to_string())
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(0), "the holder's fenced close: {}", String::from_utf8_lossy(&done.stderr));
    assert_eq!(show(&cluster, "st-1")["status"], "closed");

    // A namespace's default lease applies to claims that name none.
    let made = strand(&cluster, "ops", &["namespace", "create", "rig", "--prefix", "st"]);
    assert_eq!(made.status.code(), Some(0), "{}", String::from_utf8_lossy(&made.stderr));
    let bad = strand(&cluster, "ops", &["namespace", "configure", "rig", "--default-lease", "1ms"]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    let configured = json(&strand(
        &cluster,
        "ops",
        &["namespace", "configure", "rig", "--default-lease", "5m", "--max-deliveries", "2", "--json"],
    ));
    assert_eq!(
        (configured["default_lease_ms"].as_u64(), configured["max_deliveries"].as_u64()),
        (Some(300_000), Some(2))
    );
    let created = json(&strand(&cluster, "ops", &["--namespace", "rig", "create", "task", "--json"]));
    let id = created["id"].as_str().unwrap();
    let claimed = json(&strand(&cluster, "carol", &["--namespace", "rig", "claim", id, "--json"]));
    assert_eq!(claimed["lease"]["ttl_ms"], 300_000, "the namespace's default lease: {claimed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_change_expires_no_lease_whose_holder_keeps_renewing() {
    let mut cluster = Cluster::start(3, Some(CONFIG));
    json(&strand(&cluster, "lead", &["create", "long job", "--json"]));
    let claimed = json(&strand(&cluster, "alice", &["claim", "st-1", "--lease", "3s", "--json"]));
    let lease = claimed["lease"]["id"].as_u64().unwrap();
    let keepalive = Keepalive::start(&cluster, "alice", "st-1");
    keepalive.renewals(2);
    let leader = cluster.wait_for_leader().await;
    cluster.kill(leader);
    // Renewals go on through the new leader for well past the lease.
    let renewed = keepalive.renewals(6);
    assert_eq!((renewed["lease"]["id"].as_u64(), renewed["assignee"].as_str()), (Some(lease), Some("alice")));
    let bead = show(&cluster, "st-1");
    assert_eq!((bead["status"].as_str(), bead.get("delivery_count")), (Some("in_progress"), None), "{bead}");
    // The new leader runs the controller, and cluster status says so.
    let status = json(&strand(&cluster, "ops", &["cluster", "status", "--json"]));
    assert_ne!(status["controller"], leader, "{status}");
    assert_eq!(status["controller"], status["leader_id"], "{status}");
}
