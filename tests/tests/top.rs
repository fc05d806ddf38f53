//! `strand top` against a real 3-node cluster: one plain snapshot when stdout is not a terminal
//! (and JSON with `--json`); live under tmux (`send-keys`, `capture-pane`), where a new bead shows
//! in its namespace's counts, a killed node shows as needing attention, and `q` quits; an
//! unavailable cluster shows no figures; a refresh interval under 100ms is refused.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::process::Command;

use api::command::{Command as Write, CreateBead};
use tests::{Cluster, strand_binary, strand_tls, wait_for};

fn strand_top(endpoints: &str, args: &[&str]) -> std::process::Output {
    Command::new(strand_binary())
        .args(["--endpoints", endpoints, "top"])
        .args(args)
        .env_remove("STRAND_NAMESPACE")
        .env_remove("STRAND_CONFIG")
        .output()
        .unwrap()
}

/// A tmux session of its own, killed on drop.
struct Tmux(String);

impl Tmux {
    fn capture(&self) -> String {
        let output = Command::new("tmux").args(["capture-pane", "-p", "-t", &self.0]).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn alive(&self) -> bool {
        Command::new("tmux").args(["has-session", "-t", &self.0]).output().unwrap().status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.0]).output();
    }
}

async fn create(cluster: &Cluster, title: &str) {
    let create = CreateBead { title: title.into(), ..Default::default() };
    cluster.client().execute(Write::Create(create)).await.unwrap();
}

/// The count of beads of `column` in the `default` namespace's row of a view.
fn default_count(view: &str, column: &str) -> Option<u64> {
    let header = view.lines().find(|line| line.contains("namespace") && line.contains(column))?;
    let index = header.split_whitespace().position(|word| word == column)?;
    let row = view.lines().find(|line| line.trim_start_matches(['│', ' ']).starts_with("default "))?;
    row.trim_matches(['│', ' ']).split_whitespace().nth(index)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_without_a_terminal_and_as_json() {
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    create(&cluster, "queued").await;
    let endpoints = cluster.endpoints().join(",");
    let output = strand_top(&endpoints, &[]);
    let view = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{view}{}", String::from_utf8_lossy(&output.stderr));
    assert!(view.contains("all is well") && view.contains("CLUSTER  leader"), "{view}");
    assert_eq!(view.lines().filter(|line| line.contains("127.0.0.1:")).count(), 3, "{view}");
    assert_eq!(default_count(&view, "open"), Some(1), "{view}");
    let output = strand_top(&endpoints, &["--json"]);
    let snapshot: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(snapshot["cluster"]["nodes"].as_array().unwrap().len(), 3, "{snapshot}");
    assert_eq!(snapshot["namespaces"][0]["counts"]["open"], 1, "{snapshot}");
    // The queues' figures, as the console shows them: one ready bead, routed to no pool.
    let queues = &snapshot["namespaces"][0]["queues"];
    assert_eq!((queues["ready"].as_u64(), queues["leased"].as_u64()), (Some(1), Some(0)), "{snapshot}");
    assert_eq!(queues["ready_by_pool"][0], serde_json::json!({ "name": "", "count": 1 }), "{snapshot}");
    let row = view.lines().skip_while(|line| !line.starts_with("QUEUES")).find(|line| line.starts_with("default "));
    assert!(row.is_some_and(|row| row.contains("(none) 1")), "{view}");

    // No cluster: no figures, exit 3; a refresh too often: a usage error.
    let output = Command::new(strand_binary())
        .args(["--endpoints", "127.0.0.1:1", "--timeout", "1s", "top"])
        .env_remove("STRAND_CONFIG")
        .output()
        .unwrap();
    let view = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{view}");
    assert!(view.contains("CLUSTER UNAVAILABLE") && !view.contains("CLUSTER  leader"), "{view}");
    let output = strand_top(&endpoints, &["--interval", "10ms"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("100ms or more"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_under_tmux_it_refreshes_shows_a_dead_node_and_quits_on_q() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    create(&cluster, "first").await;
    let session = Tmux(format!("strandtop{}", std::process::id()));
    let command =
        format!("{} --endpoints {} top --interval 200ms", strand_binary().display(), cluster.endpoints().join(","));
    let started = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session.0, "-x", "200", "-y", "40"])
        .arg(command)
        .env_remove("STRAND_NAMESPACE")
        .env_remove("STRAND_CONFIG")
        .status()
        .unwrap();
    assert!(started.success());
    wait_for("top to show one open bead", || async {
        (default_count(&session.capture(), "open") == Some(1)).then_some(())
    })
    .await;
    assert!(session.capture().contains("all is well"), "{}", session.capture());

    create(&cluster, "second").await;
    wait_for("top to show the second bead", || async {
        (default_count(&session.capture(), "open") == Some(2)).then_some(())
    })
    .await;

    let follower = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill(follower);
    let unreachable = format!("node {follower} is unreachable");
    wait_for("top to show the killed node", || async {
        let view = session.capture();
        (view.contains("NEEDS ATTENTION") && view.contains(&unreachable)).then_some(())
    })
    .await;

    let quit = Command::new("tmux").args(["send-keys", "-t", &session.0, "q"]).status().unwrap();
    assert!(quit.success());
    wait_for("top to quit on q", || async { (!session.alive()).then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_auth_a_scoped_token_sees_its_namespace_only() {
    let cluster = Cluster::start_tls(3, false);
    cluster.wait_for_leader().await;
    let enabled = strand_tls(&cluster, None, &["auth", "enable", "--json"]);
    let admin: serde_json::Value = serde_json::from_slice(&enabled.stdout).unwrap();
    let admin = admin["token"].as_str().unwrap().to_string();
    for namespace in ["alpha", "beta"] {
        let made = strand_tls(&cluster, Some(&admin), &["namespace", "create", namespace]);
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    }
    let created = strand_tls(&cluster, Some(&admin), &["--namespace", "alpha", "create", "alpha work"]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let made = strand_tls(
        &cluster,
        Some(&admin),
        &["auth", "token", "create", "watcher", "--role", "reader", "--namespace", "alpha", "--json"],
    );
    let reader: serde_json::Value = serde_json::from_slice(&made.stdout).unwrap();
    let reader = reader["token"].as_str().unwrap().to_string();

    let output = strand_tls(&cluster, Some(&reader), &["top"]);
    let view = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{view}{}", String::from_utf8_lossy(&output.stderr));
    assert!(view.contains("CLUSTER  leader") && view.contains("alpha "), "{view}");
    assert!(!view.contains("beta"), "a token scoped to alpha sees no other namespace, nor its name: {view}");
    // Without a token: no figures, and what to do.
    let output = strand_tls(&cluster, None, &["top"]);
    let view = String::from_utf8_lossy(&output.stdout);
    assert!(!view.contains("CLUSTER  leader") && !view.contains("alpha"), "{view}");
}
