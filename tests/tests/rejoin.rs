//! A member that lost its data, or whose log went another way, catches up from the current leader
//! while the rest of the cluster runs on, without a leader change (the leader and term before the
//! node came back are the leader and term once every node holds the same state digest):
//! - a follower's data directory wiped, the follower restarted with `--rejoin`, under write load,
//!   while the leader still holds every entry (log replication from the start);
//! - the same after the leader built a snapshot and purged its log (snapshot, then the log);
//! - the same without `--rejoin`, over TLS: the leader's log warns that the node came back empty
//!   without `--rejoin`, which is the unsafe case;
//! - an old leader, cut off while it appended entries that never committed, comes back with a
//!   diverged log;
//! - node 1, the lowest id, which initialised the cluster: wiped, it rejoins and never
//!   initialises a second cluster;
//! - a member that lost its data before the cluster formed starts, once enough members said so,
//!   as the initial member it was;
//! - a node that cannot catch up (it refuses every snapshot) costs the leader a bounded number of
//!   replication sessions a second, and is reported: its lag on the metrics page, a note in
//!   `cluster status`, and a warning in the leader's log.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use api::command::{Command, CreateBead, ListFilter, Query};
use api::commands::list::List;
use api::model::BeadId;
use api::outcome::Outcome;
use tests::{Cluster, wait_for};
use tokio::sync::Mutex;

/// Snapshots often, so that a few thousand writes purge the leader's log.
const SNAPSHOT_CONFIG: &str =
    "[raft]\nsnapshot_logs_since_last = 300\nmax_in_snapshot_log_to_keep = 1000\npurge_batch_size = 256\n";

/// Writers creating beads until stopped; every acknowledged id is kept.
struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<BeadId>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(client: api::client::Client, writers: usize) -> Load {
        let client = Arc::new(client);
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..writers)
            .map(|writer| {
                let (client, stop, acked) = (client.clone(), stop.clone(), acked.clone());
                tokio::spawn(async move {
                    let mut number = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let create = CreateBead { title: format!("load {writer}-{number}"), ..Default::default() };
                        if let Ok(Outcome::Bead(bead)) = client.execute(Command::Create(create)).await {
                            acked.lock().await.push(bead.id);
                        }
                        number += 1;
                    }
                })
            })
            .collect();
        Load { stop, acked, tasks }
    }

    async fn acknowledged(&self) -> usize {
        self.acked.lock().await.len()
    }

    async fn stop(self) -> Vec<BeadId> {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        std::mem::take(&mut *self.acked.lock().await)
    }
}

/// Creates `count` beads, `concurrency` at a time.
async fn create_many(cluster: &Cluster, count: usize, concurrency: usize) -> Vec<BeadId> {
    let client = Arc::new(cluster.client());
    let tasks: Vec<_> = (0..concurrency)
        .map(|writer| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for number in 0..count / concurrency {
                    let create = CreateBead { title: format!("before {writer}-{number}"), ..Default::default() };
                    let Outcome::Bead(bead) = client.execute(Command::Create(create)).await.unwrap() else {
                        panic!("create")
                    };
                    ids.push(bead.id);
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.extend(task.await.unwrap());
    }
    ids
}

/// Every bead id node `id` holds, read from its own replica.
async fn ids_on(cluster: &Cluster, id: u64) -> Vec<BeadId> {
    let mut config = api::client::ClientConfig::new(vec![cluster.nodes[(id - 1) as usize].address.clone()]);
    config.consistency = api::convert::Consistency::Serializable;
    config.tls = cluster.client_tls();
    let client = api::client::Client::new(config).unwrap();
    let filter = ListFilter { all: true, limit: 0, ..Default::default() };
    let Outcome::Beads(beads) = client.query(Query::from(List(filter))).await.unwrap() else { panic!("list") };
    beads.into_iter().map(|bead| bead.id).collect()
}

/// The leader and its term, as the cluster reports them.
async fn leader_and_term(cluster: &Cluster, from: &[u64]) -> (u64, u64) {
    let client = cluster.client_of(from.iter().map(|id| cluster.nodes[(*id - 1) as usize].address.clone()).collect());
    wait_for("a leader", || async {
        let status = client.status(false).await.ok()?;
        (status.leader_id != 0).then_some((status.leader_id, status.term))
    })
    .await
}

/// Kills node `id`, deletes its data directory, and starts it again with `args`; answers when.
fn wipe_and_restart(cluster: &mut Cluster, id: u64, args: &[&str]) -> Instant {
    cluster.kill(id);
    std::fs::remove_dir_all(&cluster.nodes[(id - 1) as usize].data_dir).unwrap();
    cluster.restart_with(id, args);
    Instant::now()
}

/// Waits, under `load`, until node `id` has applied past `index`; then stops the load, waits for
/// equal digests on every node, and checks that every acknowledged write is on node `id` and that
/// the leader and term are still `expected`.
async fn caught_up_without_leader_change(
    cluster: &Cluster,
    (id, started): (u64, Instant),
    index: u64,
    load: Load,
    expected: (u64, u64),
) {
    wait_for(&format!("node {id} to apply past {index}"), || async {
        let status = cluster.client().status(false).await.ok()?;
        let node = status.nodes.iter().find(|node| node.id == id)?;
        (node.applied_index > index).then_some(())
    })
    .await;
    println!(
        "node {id} applied past the leader's log end of its restart ({index}) {:?} after it started",
        started.elapsed()
    );
    assert!(load.acknowledged().await > 0, "the load acknowledged nothing");
    let acknowledged = load.stop().await;
    cluster.wait_for_convergence(3).await;
    let status = cluster.client().status(false).await.unwrap();
    assert_eq!((status.leader_id, status.term), expected, "the leader changed while node {id} caught up");
    // Every conflict moved the leader's search back: no session repeated the last one's conflict.
    let repeated = metric(cluster, expected.0, "strand_replication_errors_total", "reason=\"no_progress\"").await;
    assert_eq!(repeated.unwrap_or(0), 0, "a replication session to node {id} repeated the conflict of the last one");
    let held = ids_on(cluster, id).await;
    for bead_id in &acknowledged {
        assert!(held.contains(bead_id), "node {id} lacks the acknowledged {bead_id}");
    }
}

/// A follower of a cluster whose leader still holds its whole log.
fn a_follower(leader: u64) -> u64 {
    (1..=3).rev().find(|id| *id != leader).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wiped_follower_rejoins_from_the_log_under_load() {
    let mut cluster = Cluster::start(3, None);
    let (leader, term) = leader_and_term(&cluster, &[1, 2, 3]).await;
    let before = create_many(&cluster, 48, 4).await;
    let follower = a_follower(leader);
    let load = Load::start(cluster.client(), 4);
    wait_for("load", || async { (load.acknowledged().await >= 20).then_some(()) }).await;
    let started = wipe_and_restart(&mut cluster, follower, &["--rejoin"]);
    let index = cluster.own_status(leader).await.last_log_index;
    caught_up_without_leader_change(&cluster, (follower, started), index, load, (leader, term)).await;
    let held = ids_on(&cluster, follower).await;
    assert!(before.iter().all(|bead_id| held.contains(bead_id)), "the rejoined node lacks an early write");
    wait_for("the rejoined node to vote again", || async {
        cluster.log(follower).contains("caught up after rejoining; this node votes again").then_some(())
    })
    .await;
    let leader_log = cluster.log(leader);
    assert!(
        leader_log.contains(&format!("node {follower}'s log went back")) && leader_log.contains("--rejoin: yes"),
        "the leader names the node whose log went back: {leader_log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wiped_follower_rejoins_through_a_snapshot_under_load() {
    let mut cluster = Cluster::start(3, Some(SNAPSHOT_CONFIG));
    let (leader, term) = leader_and_term(&cluster, &[1, 2, 3]).await;
    let before = create_many(&cluster, 2_400, 16).await;
    wait_for("the leader to purge its log", || async {
        let status = cluster.own_status(leader).await;
        (status.purged_index > 0).then_some(())
    })
    .await;
    let follower = a_follower(leader);
    let load = Load::start(cluster.client(), 4);
    let started = wipe_and_restart(&mut cluster, follower, &["--rejoin"]);
    let index = cluster.own_status(leader).await.last_log_index;
    caught_up_without_leader_change(&cluster, (follower, started), index, load, (leader, term)).await;
    let held = ids_on(&cluster, follower).await;
    assert!(before.iter().all(|bead_id| held.contains(bead_id)), "the rejoined node lacks a write of its snapshot");
    assert!(cluster.own_status(follower).await.snapshot_index > 0, "the node caught up through a snapshot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wiped_follower_without_rejoin_catches_up_over_tls_and_the_leader_warns() {
    let mut cluster = Cluster::start_tls(3, false);
    let (leader, term) = leader_and_term(&cluster, &[1, 2, 3]).await;
    create_many(&cluster, 30, 3).await;
    let follower = a_follower(leader);
    let load = Load::start(cluster.client(), 4);
    let started = wipe_and_restart(&mut cluster, follower, &[]);
    let index = cluster.own_status(leader).await.last_log_index;
    caught_up_without_leader_change(&cluster, (follower, started), index, load, (leader, term)).await;
    let leader_log = cluster.log(leader);
    assert!(
        leader_log.contains(&format!("node {follower}'s log went back")) && leader_log.contains("--rejoin: no"),
        "the leader warns of a node that came back empty without --rejoin: {leader_log}"
    );
    assert!(leader_log.contains("unsafe"), "{leader_log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_old_leader_with_a_diverged_log_catches_up() {
    let mut cluster = Cluster::start(3, None);
    let (old_leader, _) = leader_and_term(&cluster, &[1, 2, 3]).await;
    create_many(&cluster, 20, 2).await;
    cluster.wait_for_convergence(3).await;
    let followers: Vec<u64> = (1..=3).filter(|id| *id != old_leader).collect();
    // The followers go down; the leader, alone, appends writes it can never commit.
    for id in &followers {
        cluster.kill(*id);
    }
    let log_end = own_metric(&cluster, old_leader, "strand_raft_last_log_index").await;
    let mut config = api::client::ClientConfig::new(vec![cluster.nodes[(old_leader - 1) as usize].address.clone()]);
    config.deadline = Duration::from_secs(3);
    let cut_off = Arc::new(api::client::Client::new(config).unwrap());
    let doomed: Vec<_> = (0..5)
        .map(|number| {
            let client = cut_off.clone();
            tokio::spawn(async move {
                let create = CreateBead { title: format!("never committed {number}"), ..Default::default() };
                client.execute(Command::Create(create)).await.is_ok()
            })
        })
        .collect();
    wait_for("the cut-off leader to append", || async {
        (own_metric(&cluster, old_leader, "strand_raft_last_log_index").await >= log_end + 5).then_some(())
    })
    .await;
    // It is cut off for good (stopped), and the followers come back and elect one of them.
    cluster.signal(old_leader, "STOP");
    for id in &followers {
        cluster.restart(*id);
    }
    for write in doomed {
        assert!(!write.await.unwrap(), "a write the cut-off leader could not commit was acknowledged");
    }
    let (leader, term) = leader_and_term(&cluster, &followers).await;
    assert_ne!(leader, old_leader);
    let survivors =
        cluster.client_of(followers.iter().map(|id| cluster.nodes[(*id - 1) as usize].address.clone()).collect());
    let load = Load::start(survivors, 4);
    wait_for("load", || async { (load.acknowledged().await >= 20).then_some(()) }).await;
    // The old leader's log holds entries of its term where the others now hold the new leader's.
    cluster.signal(old_leader, "CONT");
    let started = Instant::now();
    let index = cluster.own_status(leader).await.last_log_index;
    caught_up_without_leader_change(&cluster, (old_leader, started), index, load, (leader, term)).await;
    let filter = ListFilter { all: true, limit: 0, ..Default::default() };
    let Outcome::Beads(beads) = cluster.client().query(Query::from(List(filter))).await.unwrap() else {
        panic!("list")
    };
    assert!(
        !beads.iter().any(|bead| bead.title.starts_with("never committed")),
        "an entry only the cut-off leader held was applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_1_wiped_rejoins_and_never_initialises_a_second_cluster() {
    let mut cluster = Cluster::start(3, None);
    let (first_leader, _) = leader_and_term(&cluster, &[1, 2, 3]).await;
    create_many(&cluster, 30, 3).await;
    // Node 1 initialised the cluster; once it is gone, one of the others leads.
    cluster.kill(1);
    if first_leader == 1 {
        leader_and_term(&cluster, &[2, 3]).await;
    }
    let survivors = cluster.client_of(vec![cluster.nodes[1].address.clone(), cluster.nodes[2].address.clone()]);
    let load = Load::start(survivors, 4);
    wait_for("load", || async { (load.acknowledged().await >= 20).then_some(()) }).await;
    let (leader, term) = leader_and_term(&cluster, &[2, 3]).await;
    let started = wipe_and_restart(&mut cluster, 1, &["--rejoin"]);
    let index = cluster.own_status(leader).await.last_log_index;
    caught_up_without_leader_change(&cluster, (1, started), index, load, (leader, term)).await;
    let log = cluster.log(1);
    assert!(!log.contains("initializing the cluster"), "node 1 initialised a cluster on its rejoin: {log}");
    assert!(log.contains("caught up after rejoining"), "{log}");
}

/// A member that lost its data before the cluster formed: node 2 restarted with `--rejoin` while
/// node 1, the lowest id, has not yet started, so no member holds a membership. Node 3 alone
/// answering "not formed" is not enough (node 1 might hold the cluster); once node 1 runs and
/// answers so too, node 2 starts as the initial member it was, node 1 initialises, and the
/// cluster serves, with node 2 a voter that is not rejoining.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_lost_its_data_before_the_cluster_formed_starts_as_an_initial_member() {
    let mut cluster = Cluster::unstarted(3);
    cluster.restart(3);
    cluster.restart_with(2, &["--rejoin"]);
    wait_for("node 2 to hear from node 3 that the cluster has not formed", || async {
        cluster.log(2).contains("members answered that the cluster has not formed").then_some(())
    })
    .await;
    assert!(!cluster.log(2).contains("it starts as the initial member it was"), "{}", cluster.log(2));
    cluster.restart(1);
    cluster.wait_for_leader().await;
    let created = create_many(&cluster, 5, 1).await;
    assert_eq!(created.len(), 5);
    let log = cluster.log(2);
    assert!(log.contains("it starts as the initial member it was"), "{log}");
    assert!(cluster.log(1).contains("initializing the cluster"), "{}", cluster.log(1));
    cluster.wait_for_convergence(3).await;
    let status = cluster.own_status(2).await;
    assert!(!status.rejoining, "node 2 is still rejoining: {status:?}");
}

/// One metric's value on node `id`'s metrics page (the first series of that name).
async fn own_metric(cluster: &Cluster, id: u64, name: &str) -> u64 {
    metric(cluster, id, name, "").await.unwrap_or(0)
}

/// The sum of every series of `name` whose labels include `label` (as written on the page, e.g.
/// `member="3"`; empty: the series without labels) on node `id`'s metrics page; `None` when
/// there is none.
async fn metric(cluster: &Cluster, id: u64, name: &str, label: &str) -> Option<u64> {
    let page = cluster.metrics_page(id).await;
    let values: Vec<f64> = page
        .lines()
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let matches = match series.strip_prefix(name)? {
                "" => label.is_empty(),
                labels => labels.starts_with('{') && !label.is_empty() && labels.contains(label),
            };
            matches.then(|| value.parse::<f64>().ok()).flatten()
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_cannot_catch_up_backs_off_and_is_reported() {
    let mut cluster = Cluster::start(3, Some(SNAPSHOT_CONFIG));
    let (leader, _) = leader_and_term(&cluster, &[1, 2, 3]).await;
    create_many(&cluster, 2_400, 16).await;
    wait_for("the leader to purge its log", || async {
        (cluster.own_status(leader).await.purged_index > 0).then_some(())
    })
    .await;
    // The follower comes back empty and refuses every snapshot: it can never catch up.
    let follower = a_follower(leader);
    let refusing = cluster.dir().join("refusing.toml");
    std::fs::write(&refusing, format!("{SNAPSHOT_CONFIG}snapshot_receive_bytes_max = 1024\n")).unwrap();
    cluster.kill(follower);
    std::fs::remove_dir_all(&cluster.nodes[(follower - 1) as usize].data_dir).unwrap();
    cluster.restart_with_config(follower, Some(&refusing), &["--rejoin"]);
    let member = format!("member=\"{follower}\"");
    let sessions = "strand_replication_sessions_total";
    wait_for("the leader to try the follower", || async {
        (metric(&cluster, leader, sessions, &member).await? > 0).then_some(())
    })
    .await;
    let first = metric(&cluster, leader, sessions, &member).await.unwrap();
    let window = Duration::from_secs(10);
    tokio::time::sleep(window).await;
    let second = metric(&cluster, leader, sessions, &member).await.unwrap();
    let per_second = (second - first) as f64 / window.as_secs_f64();
    println!("replication sessions to a node that cannot catch up: {per_second:.1} a second");
    assert!(per_second <= 5.0, "{per_second} sessions a second to a node that cannot catch up");
    let errors = metric(&cluster, leader, "strand_replication_errors_total", &member).await.unwrap();
    assert!(errors > 0, "the refused snapshots count as replication errors");
    let lag = metric(&cluster, leader, "strand_member_lag_entries", &member).await.unwrap();
    assert!(lag > 1_000, "the follower's lag is reported from its own log: {lag}");
    let client = cluster.client();
    let note = wait_for("cluster status to note the member that is not catching up", || async {
        let status = client.status(false).await.ok()?;
        let node = status.nodes.into_iter().find(|node| node.id == follower)?;
        node.note.contains("not catching up").then_some(node.note)
    })
    .await;
    assert!(note.contains("behind the leader") && note.contains("rejoining"), "{note}");
    let leader_log = cluster.log(leader);
    assert!(leader_log.contains(&format!("node {follower} is not catching up")), "{leader_log}");
}
