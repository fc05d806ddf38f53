//! Day-2 operations on a real 3-node cluster, as the README's "Operating Strand" recipes give
//! them: moving the leader under write load (no client request fails), and the moves that are
//! refused, each with its message and no change of leader.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::sync::atomic::Ordering;

use api::command::{Command, CreateBead};
use api::commands::list::List;
use api::outcome::Outcome;
use tests::{Cluster, Load, json_of, strand_as, wait_for};

/// A 3-node cluster under write load that has acknowledged `acks` writes; its leader.
async fn loaded_cluster(acks: usize) -> (Cluster, u64, Load) {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let load = Load::start(&cluster, 4);
    load.acknowledges(acks).await;
    (cluster, leader, load)
}

async fn leader_of(cluster: &Cluster) -> u64 {
    cluster.client().status(false).await.unwrap().leader_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn move_leader_under_load_fails_no_request() {
    let (cluster, first, load) = loaded_cluster(50).await;

    // To a follower, asked of the leader; then back, asked of a node that is not the leader
    // (the request is forwarded to the leader).
    let target = (1..=3).find(|id| *id != first).unwrap();
    let moved = json_of(&strand_as(&cluster, "ops", &["--json", "cluster", "move-leader", &target.to_string()]));
    assert_eq!(moved["previous_leader_id"], first, "{moved}");
    assert_eq!(moved["leader_id"], target, "{moved}");
    assert_eq!(leader_of(&cluster).await, target, "the command returns once the target leads");
    load.acknowledges(50).await;

    let third = (1..=3).find(|id| *id != first && *id != target).unwrap();
    let endpoint = cluster.nodes.iter().find(|node| node.id == third).unwrap().address.clone();
    let output = std::process::Command::new(tests::strand_binary())
        .args(["--endpoints", &endpoint, "cluster", "move-leader", &first.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains(&format!("leadership moved from node {target} to node {first}")), "{text}");
    load.acknowledges(50).await;

    let (acked, failed) = load.stop().await;
    assert_eq!(failed, 0, "a client request failed while the leadership moved");
    println!("acknowledged {acked} writes across two moves, none failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_moves_say_why_and_leave_the_leader() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let refused = |args: &[&str]| {
        let output = strand_as(&cluster, "ops", args);
        assert_eq!(output.status.code(), Some(1), "{args:?} should be refused");
        String::from_utf8_lossy(&output.stderr).to_string()
    };

    let unknown = refused(&["cluster", "move-leader", "9"]);
    assert!(unknown.contains("node 9 is not a member of this cluster (members: 1, 2, 3)"), "{unknown}");

    let same = strand_as(&cluster, "ops", &["cluster", "move-leader", &leader.to_string()]);
    let text = String::from_utf8_lossy(&same.stdout);
    assert!(same.status.success() && text.contains(&format!("node {leader} already leads")), "{text}");

    // `member list`: every member a voter, one leader, each reachable once the watch looked.
    let listed = wait_for("the member watch to look at every member", || async {
        let listed = json_of(&strand_as(&cluster, "ops", &["--json", "member", "list"]));
        listed["members"].as_array().unwrap().iter().all(|member| member["reachable"] == true).then_some(listed)
    })
    .await;
    let members = listed["members"].as_array().unwrap();
    assert_eq!(members.len(), 3, "{listed}");
    assert!(members.iter().all(|member| member["role"] == "voter" && member["lag"].is_u64()), "{listed}");
    let leaders: Vec<_> = members.iter().filter(|member| member["leader"] == true).collect();
    assert_eq!((leaders.len(), &leaders[0]["id"]), (1, &serde_json::json!(leader)), "{listed}");

    // A follower that is down: the leader's member watch finds it unreachable within seconds.
    // (A move asked before that would be tried, and could leave no leader for an election.)
    let down = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill(down);
    let listed = wait_for("the leader to find the stopped node unreachable", || async {
        let listed = json_of(&strand_as(&cluster, "ops", &["--json", "member", "list"]));
        let row = listed["members"].as_array()?.iter().find(|member| member["id"] == down)?.clone();
        (row["reachable"] == false).then_some(listed)
    })
    .await;
    assert_eq!(listed["leader_id"], leader, "{listed}");
    let output = strand_as(&cluster, "ops", &["cluster", "move-leader", &down.to_string(), "--wait", "1s"]);
    let unreachable = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(1), "{unreachable}");
    assert!(unreachable.contains("did not answer the leader's last status request"), "{unreachable}");
    assert!(unreachable.contains("start it, or check the network"), "{unreachable}");
    let text = String::from_utf8_lossy(&strand_as(&cluster, "ops", &["member", "list"]).stdout).to_string();
    assert!(text.lines().next().unwrap().contains("reachable") && text.lines().count() == 4, "{text}");
    assert_eq!(leader_of(&cluster).await, leader, "a refused move changes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_of_the_leader_under_load_hands_over_and_fails_no_request() {
    let (mut cluster, leader, load) = loaded_cluster(50).await;
    let term = cluster.client().status(false).await.unwrap().term;

    cluster.signal(leader, "TERM");
    let exit = cluster.wait_for_exit(leader).await;
    assert!(exit.success(), "the leader exits cleanly on SIGTERM: {exit:?}");
    let log = cluster.log(leader);
    assert!(log.contains("shutting down: handing the leadership to node"), "{log}");
    assert!(log.contains("leads; shutting down"), "the handover completed before the exit:\n{log}");
    load.acknowledges(50).await;

    let (_, failed) = load.stop().await;
    assert_eq!(failed, 0, "a client request failed while the leader shut down");
    let survivors: Vec<String> =
        cluster.nodes.iter().filter(|node| node.id != leader).map(|node| node.address.clone()).collect();
    let status = cluster.client_of(survivors).status(false).await.unwrap();
    assert_ne!(status.leader_id, leader);
    assert_eq!(status.term, term + 1, "the handover took one term: no election was contested");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_holds_every_write_acknowledged_before_it_and_checks_its_bytes() {
    let (cluster, leader, load) = loaded_cluster(200).await;
    let acked_before = load.acked.load(Ordering::Relaxed) as u64;
    let dir = cluster.dir().join("backups");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("strand.backup");
    let path = file.to_str().unwrap();

    // Asked of a follower, under load.
    let follower = cluster.nodes.iter().find(|node| node.id != leader).unwrap().address.clone();
    let run = |endpoint: &str, args: &[&str]| {
        std::process::Command::new(tests::strand_binary()).args(["--endpoints", endpoint]).args(args).output().unwrap()
    };
    let saved = run(&follower, &["--json", "snapshot", "save", path]);
    let saved = json_of(&saved);
    load.acknowledges(50).await;
    let (_, failed) = load.stop().await;
    assert_eq!(failed, 0, "no write failed while the backup was taken");
    assert!(saved["counts"]["beads"].as_u64().unwrap() >= acked_before, "every acknowledged create is in it: {saved}");
    assert_eq!(saved["counts"]["namespaces"], 1, "{saved}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600, "owner-only");
    }
    assert!(!dir.join("strand.backup.part").exists(), "no part file is left");
    let status = json_of(&run(&follower, &["--json", "snapshot", "status", path]));
    assert_eq!(status["header"], saved["header"], "status reads what save wrote");
    assert_eq!(
        status["header"]["cluster_id"],
        format!("{:016x}", cluster.cluster_id().await),
        "a hash, in hex: {status}"
    );

    // Refused, changing nothing: an existing file; a damaged, a cut and a foreign file.
    let bytes = std::fs::read(&file).unwrap();
    let again = run(&follower, &["snapshot", "save", path]);
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists; nothing was written"), "{again:?}");
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "the existing file is untouched");
    let damaged = dir.join("damaged.backup");
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x20;
    std::fs::write(&damaged, &flipped).unwrap();
    let cut = dir.join("cut.backup");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let foreign = dir.join("foreign.backup");
    std::fs::write(&foreign, b"not a backup at all").unwrap();
    for (bad, reason) in [(&damaged, "fails its checksum"), (&cut, "cut short"), (&foreign, "not a Strand backup file")]
    {
        let checked = run(&follower, &["snapshot", "status", bad.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&checked.stderr);
        assert_eq!(checked.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(reason), "{}: {stderr}", bad.display());
    }
}

/// Every bead a client of `cluster` lists: (id, title, status), in id order.
async fn all_beads(cluster: &Cluster) -> Vec<(String, String, String)> {
    let filter = api::command::ListFilter { all: true, limit: 0, ..Default::default() };
    let Outcome::Beads(beads) = cluster.client().query(api::command::Query::from(List(filter))).await.unwrap() else {
        panic!("a list answers beads")
    };
    let mut beads: Vec<_> =
        beads.into_iter().map(|bead| (bead.id.0, bead.title, format!("{:?}", bead.status))).collect();
    beads.sort();
    beads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_restored_into_a_new_cluster_serves_the_same_beads_under_a_new_cluster_id() {
    let (source, _, load) = loaded_cluster(100).await;
    let (_, failed) = load.stop().await;
    assert_eq!(failed, 0);
    // A backup taken after the first term: the restored log ends in a later term than any a
    // fresh member would vote in (a restore once wrote no vote, and the winner of term 1 then
    // held entries of term 2: openraft's leader assertion failed and it never served).
    let leader = source.wait_for_leader().await;
    let other = (1..=3).find(|id| *id != leader).unwrap().to_string();
    json_of(&strand_as(&source, "ops", &["--json", "cluster", "move-leader", &other]));
    let before = all_beads(&source).await;
    let file = source.dir().join("source.backup");
    let saved = json_of(&strand_as(&source, "ops", &["--json", "snapshot", "save", file.to_str().unwrap()]));
    assert_eq!(saved["counts"]["beads"].as_u64().unwrap(), before.len() as u64, "{saved}");

    // A new cluster's three directories, restored from the backup, then started.
    let mut target = Cluster::start(3, None);
    target.wait_for_leader().await;
    let peers = target.peers().to_string();
    let restore = |id: u64, data_dir: &std::path::Path, file: &std::path::Path| {
        std::process::Command::new(tests::strand_binary())
            .args(["--json", "snapshot", "restore"])
            .arg(file)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--id", &id.to_string(), "--peers", &peers])
            .output()
            .unwrap()
    };
    let node_1 = target.nodes[0].data_dir.clone();
    let refused = restore(1, &node_1, &file);
    assert_eq!(refused.status.code(), Some(2), "a directory in use is refused: {refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not empty; nothing was written"), "{refused:?}");
    let damaged = source.dir().join("damaged.backup");
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&damaged, bytes).unwrap();
    let fresh = target.dir().join("never-made");
    let refused = restore(1, &fresh, &damaged);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("fails its checksum"), "{refused:?}");
    assert!(!fresh.exists(), "a bad backup leaves no directory behind");

    let mut cluster_ids = Vec::new();
    for id in 1..=3 {
        target.kill(id);
        let data_dir = target.nodes[(id - 1) as usize].data_dir.clone();
        std::fs::remove_dir_all(&data_dir).unwrap();
        let restored = json_of(&restore(id, &data_dir, &file));
        cluster_ids.push(restored["cluster_id"].clone());
    }
    // The lowest member's restore draws the new id; the others learn it once the cluster runs.
    let drawn = cluster_ids[0].as_str().expect("node 1's restore draws the id").to_string();
    assert_eq!(&cluster_ids[1..], [serde_json::Value::Null, serde_json::Value::Null], "{cluster_ids:?}");
    assert_ne!(drawn, format!("{:016x}", source.cluster_id().await), "a new cluster id");
    let elsewhere = target.dir().join("restored-elsewhere");
    let again = json_of(&restore(1, &elsewhere, &file));
    assert_ne!(again["cluster_id"].as_str().unwrap(), drawn, "a second restore of one backup is another cluster");
    let token = std::process::Command::new(tests::strand_binary())
        .args(["snapshot", "restore"])
        .arg(&file)
        .arg("--data-dir")
        .arg(target.dir().join("with-token"))
        .args(["--id", "1", "--peers", &peers, "--cluster-token", "t"])
        .output()
        .unwrap();
    assert_eq!(token.status.code(), Some(2), "{token:?}");
    assert!(String::from_utf8_lossy(&token.stderr).contains("--cluster-token is no longer needed"), "{token:?}");
    for id in 1..=3 {
        target.restart(id);
    }
    target.wait_for_leader().await;
    assert_eq!(all_beads(&target).await, before, "the restored cluster serves every bead of the backup");
    for id in 1..=3 {
        let learned = wait_for("every member to learn the drawn id", || async {
            let known = target.own_status(id).await.cluster_id;
            (known != 0).then_some(known)
        })
        .await;
        assert_eq!(format!("{learned:016x}"), drawn, "node {id}");
    }

    // A lost disk in the restored cluster: node 2 comes back empty with --rejoin and learns the
    // restored cluster's id from a member (it once computed another and was refused for good).
    target.kill(2);
    std::fs::remove_dir_all(&target.nodes[1].data_dir).unwrap();
    target.restart_with(2, &["--rejoin"]);
    wait_for("the rejoined node to vote again", || async {
        target.log(2).contains("caught up after rejoining; this node votes again").then_some(())
    })
    .await;
    target
        .client()
        .execute(Command::Create(CreateBead { title: "after the restore".into(), ..Default::default() }))
        .await
        .unwrap();
    target.wait_for_convergence(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_stopped_at_once_stops_without_waiting_for_a_handover() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    cluster.wait_for_convergence(3).await;
    // The followers first: by the time the leader drains, each is stopping or gone, so no voter
    // can take over, and the leader must not wait for one.
    for id in (1..=3).filter(|id| *id != leader).chain([leader]) {
        cluster.signal(id, "TERM");
    }
    for id in 1..=3 {
        assert!(cluster.wait_for_exit(id).await.success(), "node {id} stops cleanly");
    }
    let log = cluster.log(leader);
    assert!(!log.contains("could not hand the leadership over"), "the leader waited for a handover: {log}");
    assert!(log.contains("without a handover") || log.contains("no other voter ready to take over"), "{log}");
}
