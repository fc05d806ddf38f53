//! Rolling upgrades between two builds of one tree: the default build (apply versions up to
//! `NEWEST_APPLY_VERSION`) and the same binary in the test-only apply-next mode
//! (`tests::apply_next_binary`), whose one more version, `NEXT_APPLY_VERSION`, refuses canary
//! creates (see `api/src/version.rs`).
//! A rule applied early shows in the canaries' answers and in the replicas' digests.
//!
//! `STRAND_UPGRADE_TEST_UNGATED=1` runs the node-by-node test with the `apply-next` nodes deciding
//! the canary rule by their own build (`STRAND_TEST_UNGATED_CANARY`): the test must then fail.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::command::{Command, CreateBead};
use api::commands::apply_version::ApplyVersionChange;
use api::outcome::Outcome;
use api::proto::NodeStatus;
use api::version::{CANARY_NEXT_PREFIX, NEWEST_APPLY_VERSION as OLD, NEXT_APPLY_VERSION as NEW};
use tests::{Cluster, Load, wait_for};

/// Small snapshots and purges, so a node that was down catches up from a snapshot; a
/// consistency checkpoint every second.
const CONFIG: &str = "[raft]\nsnapshot_logs_since_last = 300\nmax_in_snapshot_log_to_keep = 1000\npurge_batch_size = 256\n\n[controller]\nconsistency_check_interval = \"1s\"\n";

/// Canary creates through every node until stopped, each answer recorded: the bead's revision
/// (its entry's log index) when accepted, the refusal otherwise.
struct Canaries {
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Vec<Result<u64, String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Canaries {
    fn start(cluster: &Cluster) -> Canaries {
        let (stop, answers) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let client = cluster.client();
        let (stopping, recorded) = (stop.clone(), answers.clone());
        let task = tokio::spawn(async move {
            let mut n = 0;
            while !stopping.load(Ordering::Relaxed) {
                n += 1;
                let create = CreateBead { title: format!("{CANARY_NEXT_PREFIX} {n}"), ..Default::default() };
                let answer = match client.execute(Command::Create(create)).await {
                    Ok(Outcome::Bead(bead)) => Ok(bead.revision),
                    Ok(other) => panic!("a create answered {other:?}"),
                    Err(api::client::ClientError::Refused(refusal)) => Err(refusal.to_string()),
                    Err(error) => panic!("a canary failed: {error}"),
                };
                recorded.lock().unwrap().push(answer);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Canaries { stop, answers, task }
    }

    fn refused(&self) -> usize {
        self.answers.lock().unwrap().iter().filter(|answer| answer.is_err()).count()
    }

    async fn stop(self) -> Vec<Result<u64, String>> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the canary task ends cleanly");
        Arc::try_unwrap(self.answers).unwrap().into_inner().unwrap()
    }
}

async fn statuses(cluster: &Cluster) -> Vec<NodeStatus> {
    cluster.client().status(false).await.unwrap().nodes
}

/// The leader's own status.
async fn leader_status(cluster: &Cluster) -> NodeStatus {
    let leader = cluster.wait_for_leader().await;
    cluster.own_status(leader).await
}

/// Every pair of nodes agrees on the digest of every checkpoint both took, and the leader found
/// no divergence.
async fn digests_agree(cluster: &Cluster, step: &str) {
    let nodes = statuses(cluster).await;
    for node in &nodes {
        assert!(node.divergence.is_empty(), "{step}: node {} reports {}", node.id, node.divergence);
        for other in &nodes {
            for checkpoint in &node.checkpoints {
                if let Some(theirs) = other.checkpoints.iter().find(|theirs| theirs.index == checkpoint.index) {
                    assert_eq!(
                        theirs.digest, checkpoint.digest,
                        "{step}: nodes {} and {} differ at checkpoint {}",
                        node.id, other.id, checkpoint.index
                    );
                }
            }
        }
    }
}

/// Waits until a checkpoint taken after `after` is on every live node (so the digests compared
/// cover the step just made).
async fn fresh_checkpoint(cluster: &Cluster, after: u64) {
    wait_for("a checkpoint on every live node", || async {
        let nodes = statuses(cluster).await;
        let live = nodes.iter().filter(|node| node.state != "unreachable");
        live.clone().count().gt(&0).then_some(())?;
        live.into_iter().all(|node| node.checkpoints.iter().any(|checkpoint| checkpoint.index > after)).then_some(())
    })
    .await;
}

/// Stops node `id` with SIGTERM (a leader hands its leadership over first) and waits for it.
async fn stop(cluster: &mut Cluster, id: u64) {
    cluster.signal(id, "TERM");
    let status = cluster.wait_for_exit(id).await;
    assert!(status.success(), "node {id} stopped with {status:?}: {}", cluster.log(id));
}

/// Restarts node `id` on `binary`, with the ungated canary when asked.
fn run_on(cluster: &mut Cluster, id: u64, binary: &std::path::Path, ungated: bool) {
    let node = &mut cluster.nodes[(id - 1) as usize];
    node.binary = Some(binary.to_path_buf());
    node.env = if ungated { vec![(api::version::UNGATED_CANARY_ENV.into(), "1".into())] } else { Vec::new() };
    cluster.restart(id);
}

/// Waits until node `id` has applied what the leader had applied when asked.
async fn caught_up(cluster: &Cluster, id: u64) {
    let target = leader_status(cluster).await.applied_index;
    wait_for(&format!("node {id} to catch up"), || async {
        let status = cluster.client_of(vec![cluster.nodes[(id - 1) as usize].address.clone()]).status(false).await;
        let own = status.ok()?.nodes.into_iter().find(|node| node.id == id)?;
        (own.applied_index >= target).then_some(())
    })
    .await;
}

/// Writes until the leader's log is purged past `index`, so a node behind it needs a snapshot.
async fn purged_past(cluster: &Cluster, index: u64) {
    wait_for("the leader to purge its log past a stopped node's end", || async {
        (leader_status(cluster).await.purged_index > index).then_some(())
    })
    .await;
}

async fn apply_version(cluster: &Cluster) -> (u32, bool, u64) {
    let leader = leader_status(cluster).await;
    (leader.apply_version, leader.apply_pinned, leader.apply_since)
}

/// Waits until the leader's last status request reached every other member, each on a build
/// that applies the new version.
async fn every_member_answered(cluster: &Cluster) {
    wait_for("the leader to hear from every member", || async {
        let leader = leader_status(cluster).await;
        let answered = leader.members.iter().filter(|member| member.reachable && member.apply_max >= NEW).count();
        (answered + 1 == leader.membership.len()).then_some(())
    })
    .await;
}

fn a_follower(leader: u64, of: &[u64]) -> u64 {
    *of.iter().find(|id| **id != leader).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_upgrades_node_by_node_under_load_and_switches_rules_at_one_index() {
    let (v1, v2) = (tests::strand_binary(), tests::apply_next_binary());
    let ungated = std::env::var_os("STRAND_UPGRADE_TEST_UNGATED").is_some();
    let mut cluster = Cluster::start(3, Some(CONFIG));
    cluster.wait_for_leader().await;
    cluster.wait_for_controller().await;
    let load = Load::start(&cluster, 2);
    let canaries = Canaries::start(&cluster);
    load.acknowledges(20).await;
    // A fresh cluster of the old build rises to the old build's newest version.
    wait_for("the switch to the old build's version", || async {
        let (version, pinned, since) = apply_version(&cluster).await;
        (version == OLD && !pinned && since > 0).then_some(())
    })
    .await;

    // An old leader with a new follower, which catches up from the old leader's snapshot.
    let leader = cluster.wait_for_leader().await;
    let first = a_follower(leader, &[1, 2, 3]);
    let its_end = cluster.own_status(first).await.last_log_index;
    stop(&mut cluster, first).await;
    purged_past(&cluster, its_end).await;
    run_on(&mut cluster, first, &v2, ungated);
    caught_up(&cluster, first).await;
    let snapshot = cluster.own_status(first).await.snapshot_index;
    assert!(snapshot > its_end, "node {first} installed a snapshot past its log's end ({snapshot} > {its_end})");
    fresh_checkpoint(&cluster, leader_status(&cluster).await.applied_index).await;
    digests_agree(&cluster, "one new follower").await;
    assert_eq!(apply_version(&cluster).await.0, OLD, "an old member remains");

    // A learner of the new build joins.
    let learner = cluster.add_joining(&[1, 2, 3]);
    run_on(&mut cluster, learner, &v2, ungated);
    caught_up(&cluster, learner).await;

    // A new leader with old followers; an old follower installs the new leader's snapshot.
    cluster.client().move_leader(first, Duration::from_secs(10)).await.unwrap();
    let old = a_follower(first, &[1, 2, 3].iter().copied().filter(|id| *id != first).collect::<Vec<_>>());
    let its_end = cluster.own_status(old).await.last_log_index;
    stop(&mut cluster, old).await;
    purged_past(&cluster, its_end).await;
    run_on(&mut cluster, old, &v1, false);
    caught_up(&cluster, old).await;
    assert!(cluster.own_status(old).await.snapshot_index > its_end, "node {old} installed the new leader's snapshot");
    fresh_checkpoint(&cluster, leader_status(&cluster).await.applied_index).await;
    digests_agree(&cluster, "a new leader, old followers").await;
    assert_eq!(apply_version(&cluster).await.0, OLD, "old members remain");

    // The remaining old members, one at a time.
    for id in [1, 2, 3].into_iter().filter(|id| *id != first) {
        stop(&mut cluster, id).await;
        assert_eq!(apply_version(&cluster).await.0, OLD, "node {id} is still of the old build");
        run_on(&mut cluster, id, &v2, ungated);
        caught_up(&cluster, id).await;
    }
    let (version, pinned, since) = wait_for("the switch to the new apply version", || async {
        let found = apply_version(&cluster).await;
        (found.0 == NEW).then_some(found)
    })
    .await;
    assert!(!pinned && since > 0);
    wait_for("canaries refused by the new version", || async { (canaries.refused() >= 5).then_some(()) }).await;
    let answers = canaries.stop().await;
    let created = load.created.clone();
    let (acked, failed) = load.stop().await;
    assert_eq!(failed, 0, "a write failed during the upgrade ({acked} acknowledged)");
    assert_eq!(version, NEW);

    // Every canary before the switch was accepted, every one after refused, on every node.
    let accepted: Vec<u64> = answers.iter().filter_map(|answer| answer.as_ref().ok().copied()).collect();
    assert!(!accepted.is_empty());
    assert!(accepted.iter().all(|revision| *revision < since), "a canary accepted at or after the switch at {since}");
    let after = answers.iter().skip_while(|answer| answer.is_ok());
    for answer in after {
        let refusal = answer.as_ref().expect_err("no canary is accepted after the first refusal");
        assert!(refusal.contains(&format!("from apply version {NEW} on")), "{refusal}");
    }
    let (applied, _) = cluster.wait_for_convergence(4).await;
    let created = created.lock().unwrap().clone();
    assert_eq!(created.len(), acked);
    for chunk in created.chunks(100) {
        let query = api::command::Query::from(api::commands::get::Get { ids: chunk.to_vec() });
        let Outcome::Beads(beads) = cluster.client().query(query).await.unwrap() else { panic!("get") };
        assert_eq!(beads.len(), chunk.len(), "every acknowledged write survived the upgrade");
    }
    for node in statuses(&cluster).await {
        assert_eq!((node.apply_version, node.apply_since), (NEW, since), "node {} at {applied}", node.id);
    }
    digests_agree(&cluster, "all new").await;

    // An old build is refused: on a data directory at the new version, and as a new member.
    let leader = cluster.wait_for_leader().await;
    let refused = a_follower(leader, &[1, 2, 3]);
    stop(&mut cluster, refused).await;
    run_on(&mut cluster, refused, &v1, false);
    let exit = cluster.wait_for_exit(refused).await;
    let log = cluster.log(refused);
    assert!(!exit.success(), "{log}");
    let (at_new, old_range) =
        (format!("is at apply version {NEW}, and this build"), format!("applies versions 1-{OLD}"));
    assert!(log.contains(&at_new) && log.contains(&old_range), "{log}");
    run_on(&mut cluster, refused, &v2, false);
    let stranger = cluster.add_joining(&[1, 2, 3]);
    run_on(&mut cluster, stranger, &v1, false);
    let exit = cluster.wait_for_exit(stranger).await;
    let log = cluster.log(stranger);
    assert!(!exit.success(), "{log}");
    let refused_joiner = format!("applies versions 1-{OLD}, and this cluster's state is at apply version {NEW}");
    assert!(log.contains(&refused_joiner), "{log}");

    // A downgrade: lowered and pinned first, then one node goes back to the old build.
    // `set` needs the leader to have heard every member since `refused` came back on the new build.
    every_member_answered(&cluster).await;
    // The leader refuses this before it reaches the log, so its client starts afresh after it.
    let beyond = ApplyVersionChange::Set { to: NEW + 1 };
    let refusal = cluster.client().execute(Command::ApplyVersion(beyond)).await.unwrap_err();
    assert!(refusal.to_string().contains(&format!("applies versions 1-{NEW}, not {}", NEW + 1)), "{refusal}");
    let client = cluster.client();
    client.execute(Command::ApplyVersion(ApplyVersionChange::Pin)).await.unwrap();
    client.execute(Command::ApplyVersion(ApplyVersionChange::Set { to: OLD })).await.unwrap();
    let (version, pinned, lowered_at) = apply_version(&cluster).await;
    assert_eq!((version, pinned), (OLD, true));
    let load = Load::start(&cluster, 2);
    let create = CreateBead { title: format!("{CANARY_NEXT_PREFIX} after the downgrade"), ..Default::default() };
    let Outcome::Bead(bead) = client.execute(Command::Create(create)).await.unwrap() else { panic!("create") };
    assert!(bead.revision > lowered_at, "the old version accepts the canary again");
    let downgraded = a_follower(cluster.wait_for_leader().await, &[1, 2, 3]);
    // As the README's recipe waits: the node's own state must hold the lowered version before it
    // stops, or the old build refuses it at start.
    caught_up(&cluster, downgraded).await;
    stop(&mut cluster, downgraded).await;
    run_on(&mut cluster, downgraded, &v1, false);
    caught_up(&cluster, downgraded).await;
    client.execute(Command::ApplyVersion(ApplyVersionChange::Unpin)).await.unwrap();
    load.acknowledges(20).await;
    let (_, failed) = load.stop().await;
    assert_eq!(failed, 0);
    assert_eq!(apply_version(&cluster).await, (OLD, false, lowered_at), "an old member holds the version down");
    fresh_checkpoint(&cluster, leader_status(&cluster).await.applied_index).await;
    digests_agree(&cluster, "after the downgrade").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_applies_differently_raises_the_divergence_alarm() {
    let mut cluster = Cluster::start(3, Some(CONFIG));
    cluster.wait_for_leader().await;
    cluster.wait_for_controller().await;
    let leader = cluster.wait_for_leader().await;
    let odd = a_follower(leader, &[1, 2, 3]);
    stop(&mut cluster, odd).await;
    run_on(&mut cluster, odd, &tests::apply_next_binary(), true);
    caught_up(&cluster, odd).await;
    let checked = tests::strand_as(&cluster, "operator", &["cluster", "check"]);
    let shown = String::from_utf8_lossy(&checked.stdout).to_string();
    assert!(checked.status.success() && shown.contains("every member holds the same state"), "{checked:?}");
    let create = CreateBead { title: format!("{CANARY_NEXT_PREFIX} applied differently"), ..Default::default() };
    let Outcome::Bead(bead) = cluster.client().execute(Command::Create(create)).await.unwrap() else { panic!() };
    let divergence = wait_for("the divergence alarm", || async {
        let status = leader_status(&cluster).await;
        (!status.divergence.is_empty()).then_some(status.divergence)
    })
    .await;
    assert!(divergence.contains(&format!("node {odd}'s state digest at applied index")), "{divergence}");
    let index: u64 = divergence.split("applied index ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(index > bead.revision, "the divergence is found at a checkpoint after the canary ({index})");
    let page = cluster.metrics_page(cluster.wait_for_leader().await).await;
    assert!(page.contains("strand_divergence 1") && page.contains(&format!("strand_apply_version {OLD}")), "{page}");
    let versions = tests::json_of(&tests::strand_as(&cluster, "operator", &["cluster", "version", "--json"]));
    assert_eq!(
        (&versions["apply_version"], &versions["switch_to"]),
        (&serde_json::json!(OLD), &serde_json::json!(OLD))
    );
    let odd_row = versions["nodes"].as_array().unwrap().iter().find(|node| node["id"] == odd).unwrap().clone();
    // The builds name their commit; the newer one says it runs the apply-next mode.
    let build = odd_row["build"].as_str().unwrap().to_string();
    assert_eq!(odd_row["apply_max"], serde_json::json!(NEW));
    assert!(build.starts_with(&format!("{}+", env!("CARGO_PKG_VERSION"))) && build.ends_with(".apply-next"), "{build}");
    let shown = tests::strand_as(&cluster, "operator", &["cluster", "status"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("DIVERGENCE: divergence: node"), "{shown}");
    assert!(shown.contains(&format!("node {odd} {build}")) && shown.contains("builds: node 1 "), "{shown}");
    let members = tests::json_of(&tests::strand_as(&cluster, "operator", &["member", "list", "--json"]));
    let odd_member = members["members"].as_array().unwrap().iter().find(|member| member["id"] == odd).unwrap().clone();
    assert_eq!(odd_member["version"], serde_json::json!(build), "{members}");
    let checked = tests::strand_as(&cluster, "operator", &["cluster", "check", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!((checked.status.code(), &report["agree"]), (Some(1), &serde_json::json!(false)), "{report}");
    let verdict = report["nodes"].as_array().unwrap().iter().find(|node| node["id"] == odd).unwrap()["verdict"].clone();
    assert_eq!(verdict, "DIFFERS from the leader's", "{report}");
}

/// Data directories of earlier storage formats (`tests/fixtures/format-N.tar.gz`, each made by a
/// build of that format with [`writes_a_fixture_data_directory`]) are upgraded in place at start,
/// one format at a time, and a kill before or after any step's write leaves each readable and the
/// upgrade resumable. Format 10 holds three open beads; format 11 three beads labelled `fixture`,
/// two of them closed, whose index entries the first start of format 12 builds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_of_earlier_formats_upgrade_in_place_even_when_killed_mid_upgrade() {
    let to = raft_store::codec::STORAGE_FORMAT;
    for from in [10, 11] {
        let mut cluster = Cluster::start(1, None);
        cluster.wait_for_leader().await;
        unpack_fixture(&mut cluster, from);
        kill_at_every_upgrade_step(&mut cluster, from).await;
        cluster.restart(1);
        cluster.wait_for_leader().await;
        assert!(!cluster.log(1).contains("upgrading the data directory"), "the kill after the write left format {to}");
        let titles = |args: &[&str]| -> Vec<String> {
            let listed = tests::strand_as(&cluster, "reader", args);
            let beads = tests::json_of(&listed);
            beads.as_array().unwrap().iter().map(|bead| bead["title"].as_str().unwrap().to_string()).collect()
        };
        let written = format!("written in format {from}");
        if from == 10 {
            assert_eq!(titles(&["list", "--json"]), [written.as_str(); 3]);
        } else {
            assert_eq!(titles(&["list", "--json"]), [written.as_str()], "one open bead");
            assert_eq!(titles(&["list", "--status", "closed", "--json"]), [written.as_str(); 2]);
            assert_eq!(titles(&["list", "--all", "--label", "fixture", "--json"]), [written.as_str(); 3]);
        }
        // The upgraded state starts at version 1 (format 10 recorded none), and rises like any other.
        wait_for("the upgraded node to switch to the newest apply version", || async {
            (cluster.own_status(1).await.apply_version == OLD).then_some(())
        })
        .await;
    }
}

/// Replaces node 1's data directory (the node killed) with the fixture of format `from`.
fn unpack_fixture(cluster: &mut Cluster, from: u32) {
    cluster.kill(1);
    let data = cluster.nodes[0].data_dir.clone();
    std::fs::remove_dir_all(&data).unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/format-{from}.tar.gz"));
    let unpacked = std::process::Command::new("tar")
        .arg("xzf")
        .arg(&fixture)
        .arg("-C")
        .arg(data.parent().unwrap())
        .status()
        .unwrap();
    assert!(unpacked.success() && data.exists(), "the fixture unpacks to {}", data.display());
}

/// Starts node 1 aborting just before, then just after, each upgrade step's write from format
/// `from`: a kill before the write leaves the format found, which the next start upgrades from again.
async fn kill_at_every_upgrade_step(cluster: &mut Cluster, from: u32) {
    use raft_store::upgrade::FAILPOINT_ENV;
    for to in from + 1..=raft_store::codec::STORAGE_FORMAT {
        for failpoint in [format!("before:{to}"), format!("after:{to}")] {
            cluster.nodes[0].env = vec![(FAILPOINT_ENV.into(), failpoint.clone())];
            cluster.restart(1);
            let exit = cluster.wait_for_exit(1).await;
            let log = cluster.log(1);
            assert!(!exit.success(), "{log}");
            assert!(log.contains(&format!("{FAILPOINT_ENV}={failpoint}: aborting")), "{log}");
            assert!(log.contains(&format!("found={}", to - 1)), "{log}");
        }
    }
    cluster.nodes[0].env = Vec::new();
}

/// Writes a fixture: a one-node cluster's data directory with three beads titled "written in
/// format N" (`$STRAND_FIXTURE_FORMAT`, this build's by default) and labelled `fixture`, two of
/// them closed, as `$STRAND_FIXTURE_OUT` (a `.tar.gz`). Run it with the build of that format:
/// `STRAND_BIN=<its strand> STRAND_FIXTURE_FORMAT=N STRAND_FIXTURE_OUT=$PWD/tests/fixtures/format-N.tar.gz
/// cargo nextest run -p tests --run-ignored only -E 'test(writes_a_fixture_data_directory)'`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "on demand: makes tests/fixtures/format-N.tar.gz"]
async fn writes_a_fixture_data_directory() {
    let out = std::path::PathBuf::from(std::env::var("STRAND_FIXTURE_OUT").expect("STRAND_FIXTURE_OUT names the file"));
    let format =
        std::env::var("STRAND_FIXTURE_FORMAT").unwrap_or_else(|_| raft_store::codec::STORAGE_FORMAT.to_string());
    let mut cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let title = format!("written in format {format}");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let created = tests::strand_as(&cluster, "writer", &["create", &title, "--labels", "fixture", "--json"]);
        ids.push(tests::json_of(&created)["id"].as_str().unwrap().to_string());
    }
    let closed = tests::strand_as(&cluster, "writer", &["close", &ids[0], &ids[1]]);
    assert!(closed.status.success(), "{closed:?}");
    cluster.kill(1);
    let data = cluster.nodes[0].data_dir.clone();
    let packed = std::process::Command::new("tar")
        .arg("czf")
        .arg(std::path::absolute(&out).unwrap())
        .arg("-C")
        .arg(data.parent().unwrap())
        .arg(data.file_name().unwrap())
        .status()
        .unwrap();
    assert!(packed.success(), "tar wrote {}", out.display());
}

/// A message as a build from before apply versions sends it (the cluster id as
/// `strand-cluster-id`, no apply versions) is refused with a message that says to upgrade the
/// sender, and logged. The on-demand `scripts/upgrade-from` runs a real older build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_of_a_build_from_before_apply_versions_is_refused_naming_the_upgrade() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let cluster_id = cluster.cluster_id().await;
    let follower = a_follower(leader, &[1, 2, 3]);
    let address = format!("http://{}", cluster.nodes[(follower - 1) as usize].peer_address);
    let channel = tonic::transport::Channel::from_shared(address).unwrap().connect().await.unwrap();
    let mut old =
        api::proto::raft_client::RaftClient::with_interceptor(channel, move |mut request: tonic::Request<()>| {
            request.metadata_mut().insert("strand-cluster-id", cluster_id.into());
            request.metadata_mut().insert("strand-member-id", leader.into());
            Ok(request)
        });
    let refused = old.vote(api::proto::RaftPayload { data: Vec::new() }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let expected = format!("a message from node {leader}, which runs a build from before apply versions");
    assert!(refused.message().contains(&expected), "{}", refused.message());
    assert!(refused.message().contains("Upgrade node"), "{}", refused.message());
    wait_for("the refusal in the log", || async { cluster.log(follower).contains(&expected).then_some(()) }).await;
}

/// A rolling upgrade from a real earlier build (`$STRAND_OLD_BIN`, which `scripts/upgrade-from
/// COMMIT` builds) to this one, under load: every acknowledged write survives. A build from
/// before apply versions and this one refuse each other's messages, so while both run, the nodes
/// of the kind that holds a majority serve and the others wait; the logs say which node to
/// upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "on demand: scripts/upgrade-from COMMIT"]
async fn a_rolling_upgrade_from_an_older_build() {
    let old = std::path::PathBuf::from(std::env::var("STRAND_OLD_BIN").expect("STRAND_OLD_BIN names the older build"));
    let new = tests::strand_binary();
    let mut cluster = Cluster::start(3, None);
    for id in 1..=3 {
        cluster.kill(id);
        cluster.nodes[(id - 1) as usize].binary = Some(old.clone());
        cluster.restart(id);
    }
    cluster.wait_for_leader().await;
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let (client, stop, acked) = (cluster.client(), stop.clone(), acked.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let create = CreateBead { title: "across builds".into(), ..Default::default() };
                    if let Ok(Outcome::Bead(bead)) = client.execute(Command::Create(create)).await {
                        acked.lock().unwrap().push(bead.id);
                    }
                }
            })
        })
        .collect();
    let acknowledged = |count: usize| {
        let acked = acked.clone();
        async move {
            let target = acked.lock().unwrap().len() + count;
            wait_for("writes to be acknowledged", || async { (acked.lock().unwrap().len() >= target).then_some(()) })
                .await;
        }
    };
    acknowledged(50).await;
    for id in [3, 2, 1] {
        cluster.signal(id, "TERM");
        cluster.wait_for_exit(id).await;
        cluster.nodes[(id - 1) as usize].binary = Some(new.clone());
        cluster.restart(id);
        acknowledged(50).await;
        eprintln!("node {id} upgraded; {} writes acknowledged", acked.lock().unwrap().len());
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    cluster.wait_for_convergence(3).await;
    let ids = acked.lock().unwrap().clone();
    for chunk in ids.chunks(100) {
        let query = api::command::Query::from(api::commands::get::Get { ids: chunk.to_vec() });
        let Outcome::Beads(beads) = cluster.client().query(query).await.unwrap() else { panic!("get") };
        assert_eq!(beads.len(), chunk.len(), "every acknowledged write is on the upgraded cluster");
    }
    let refused = (1..=3).any(|id| cluster.log(id).contains("runs a build from before apply versions"));
    eprintln!("{} writes acknowledged and found; a node logged the older build: {refused}", ids.len());
}
