//! Membership changes on real node processes, as the README's "Operating Strand" recipes give
//! them: growing a cluster with `--join` and shrinking it with `member remove` (the leader
//! included) under write load, replacing a failed node, the refusals, and recovering from a lost
//! quorum with `--force-new-cluster`.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use tests::{Cluster, Load, json_of, strand_as, wait_for};

/// Learners are promoted after 1 s caught up instead of 10 s, so the tests do not wait.
const FAST_PROMOTION: &str = "[raft]\npromote_after_ms = 1000\n";

/// The roles `member list` shows, by id, once every listed member is reachable.
async fn roles(cluster: &Cluster) -> Vec<(u64, String)> {
    let listed = json_of(&strand_as(cluster, "ops", &["--json", "member", "list"]));
    listed["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| (member["id"].as_u64().unwrap(), member["role"].as_str().unwrap().to_string()))
        .collect()
}

/// Waits until the voters are exactly `voters`, and no learner is left.
async fn wait_for_voters(cluster: &Cluster, voters: &[u64]) {
    let expected: Vec<(u64, String)> = voters.iter().map(|id| (*id, "voter".to_string())).collect();
    wait_for(&format!("the voters to be {voters:?}"), || async {
        let roles = roles(cluster).await;
        (roles == expected).then_some(())
    })
    .await;
}

/// The bead count of every member the status lists, once they have converged.
async fn converged_beads(cluster: &Cluster, members: usize) -> u64 {
    cluster.wait_for_convergence(members).await;
    let status = cluster.client().status(true).await.unwrap();
    let counts: Vec<u64> = status.nodes.iter().map(|node| node.bead_count).collect();
    assert!(counts.windows(2).all(|pair| pair[0] == pair[1]), "{counts:?}");
    counts[0]
}

/// A command that is expected to be refused (exit 1): its standard error.
fn refused(cluster: &Cluster, args: &[&str]) -> String {
    let output = strand_as(cluster, "ops", args);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(1), "{args:?} should be refused: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grow_to_five_and_shrink_to_three_removing_the_leader_under_load() {
    let mut cluster = Cluster::start(3, Some(FAST_PROMOTION));
    cluster.wait_for_leader().await;
    let load = Load::start(&cluster, 4);
    load.acknowledges(50).await;

    // Grow: two nodes join through the peer listeners of the members; each enters as a learner
    // and is promoted once caught up.
    let four = cluster.join(&[1, 2, 3], &[]);
    let five = cluster.join(&[2], &[]);
    wait_for_voters(&cluster, &[1, 2, 3, four, five]).await;
    load.acknowledges(50).await;

    // Shrink: remove the leader itself (it hands its leadership over first), then a follower.
    let leader = cluster.client().status(false).await.unwrap().leader_id;
    let removed = json_of(&strand_as(&cluster, "ops", &["--json", "member", "remove", &leader.to_string()]));
    let left: Vec<u64> =
        removed["members"].as_array().unwrap().iter().map(|member| member["id"].as_u64().unwrap()).collect();
    assert!(!left.contains(&leader) && left.len() == 4, "{removed}");
    load.acknowledges(50).await;
    let now_leading = cluster.client().status(false).await.unwrap().leader_id;
    let follower = *left.iter().find(|id| **id != now_leading).unwrap();
    let output = strand_as(&cluster, "ops", &["member", "remove", &follower.to_string()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains(&format!("removed node {follower}")));
    load.acknowledges(50).await;
    let (acked, failed) = load.stop().await;

    let remaining: Vec<u64> = left.iter().copied().filter(|id| *id != follower).collect();
    wait_for_voters(&cluster, &remaining).await;
    let beads = converged_beads(&cluster, 3).await;
    assert!(beads >= acked as u64, "{beads} beads, but {acked} creates were acknowledged");
    assert!(beads <= (acked + failed) as u64, "{beads} beads from {acked} acknowledged and {failed} failed creates");
    println!("grew to 5 and shrank to 3 under load: {acked} writes acknowledged, {failed} failed, none lost");

    // A removed node exits, saying why, and never starts again on its data.
    for removed in [leader, follower] {
        assert!(!cluster.wait_for_exit(removed).await.success(), "node {removed} exits with an error");
        let log = cluster.log(removed);
        assert!(log.contains(&format!("stopped: node {removed} was removed from cluster")), "{log}");
        cluster.restart(removed);
        let status = cluster.wait_for_exit(removed).await;
        assert!(!status.success());
        let log = cluster.log(removed);
        assert!(log.contains(&format!("refusing to start: node {removed} was removed from cluster")), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_added_first_joins_once_started_and_a_held_learner_waits_for_promote() {
    let mut cluster = Cluster::start(3, Some(FAST_PROMOTION));
    cluster.wait_for_leader().await;

    // Added first (as etcd's `member add`), then started with --join: promoted once caught up.
    let four = cluster.add_joining(&[1]);
    let (peer, client) = (cluster.nodes[3].peer_address.clone(), cluster.nodes[3].address.clone());
    let added =
        json_of(&strand_as(&cluster, "ops", &["--json", "member", "add", "4", &peer, "--client-address", &client]));
    let listed: Vec<_> = added["members"].as_array().unwrap().iter().filter(|member| member["id"] == 4).collect();
    assert_eq!((&listed[0]["role"], &listed[0]["auto_promote"]), (&"learner".into(), &true.into()), "{added}");
    cluster.restart(four);
    wait_for_voters(&cluster, &[1, 2, 3, four]).await;

    // --no-auto-promote: it stays a learner until `member promote`.
    let five = cluster.join(&[2], &["--no-auto-promote"]);
    wait_for("node 5 to be a caught-up learner", || async {
        let listed = json_of(&strand_as(&cluster, "ops", &["--json", "member", "list"]));
        let member = listed["members"].as_array().unwrap().iter().find(|member| member["id"] == five).cloned()?;
        (member["role"] == "learner" && member["reachable"] == true && member["lag"].as_u64()? < 10).then_some(())
    })
    .await;
    // Well past the stabilization time, still a learner.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let roles = roles(&cluster).await;
    assert!(roles.contains(&(five, "learner".to_string())), "{roles:?}");
    let output = strand_as(&cluster, "ops", &["member", "promote", &five.to_string()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    wait_for_voters(&cluster, &[1, 2, 3, four, five]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_node_is_replaced_by_a_new_one_that_catches_up_by_snapshot() {
    // Snapshots every 100 entries, and the log purged 1,000 behind: after 1,500 writes, the new
    // node must catch up from a snapshot.
    let config = format!("{FAST_PROMOTION}snapshot_logs_since_last = 100\nmax_in_snapshot_log_to_keep = 1000\n");
    let mut cluster = Cluster::start(3, Some(&config));
    let leader = cluster.wait_for_leader().await;
    let load = Load::start(&cluster, 4);
    load.acknowledges(1_500).await;

    // The failed node: killed, its disk gone.
    let failed_node = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill(failed_node);
    std::fs::remove_dir_all(&cluster.nodes[(failed_node - 1) as usize].data_dir).unwrap();
    let output = strand_as(&cluster, "ops", &["member", "remove", &failed_node.to_string()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    load.acknowledges(100).await;
    wait_for("the leader to purge its log", || async {
        let leader = cluster.client().status(false).await.ok()?.leader_id;
        (cluster.own_status(leader).await.purged_index > 0).then_some(())
    })
    .await;

    let survivors: Vec<u64> = (1..=3).filter(|id| *id != failed_node).collect();
    let new = cluster.join(&survivors, &[]);
    let mut voters = survivors.clone();
    voters.push(new);
    wait_for_voters(&cluster, &voters).await;
    let (acked, failed) = load.stop().await;
    assert_eq!(failed, 0, "a client request failed while a node was replaced");
    let beads = converged_beads(&cluster, 3).await;
    assert!(beads >= acked as u64);
    assert!(cluster.own_status(new).await.snapshot_index > 0, "node {new} caught up through a snapshot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_membership_changes_say_why_and_change_nothing() {
    let mut cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let before = roles(&cluster).await;

    let taken_id = refused(&cluster, &["member", "add", "2", "127.0.0.1:1"]);
    assert!(taken_id.contains("node 2 is already a member (voter at peer"), "{taken_id}");
    let peer_of_3 = cluster.nodes[2].peer_address.clone();
    let taken_address = refused(&cluster, &["member", "add", "7", &peer_of_3]);
    assert!(taken_address.contains(&format!("peer address {peer_of_3} is already node 3's")), "{taken_address}");
    // A malformed address is a usage error, said by the CLI before any request (issue 36).
    let malformed = strand_as(&cluster, "ops", &["member", "add", "7", "nowhere"]);
    let stderr = String::from_utf8_lossy(&malformed.stderr);
    assert_eq!(malformed.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not HOST:PORT with a port from 1 to 65535"), "{stderr}");
    for command in ["promote", "remove"] {
        let unknown = refused(&cluster, &["member", command, "9"]);
        assert!(unknown.contains("node 9 is not a member of this cluster (members: 1, 2, 3)"), "{unknown}");
    }
    assert_eq!(roles(&cluster).await, before, "nothing changed");

    // A learner that never started: it cannot be promoted, and cannot lead.
    let added = strand_as(&cluster, "ops", &["member", "add", "7", "127.0.0.1:9", "--learner"]);
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let promote = wait_for("the member watch to look at the learner", || async {
        let stderr = refused(&cluster, &["member", "promote", "7"]);
        stderr.contains("did not answer").then_some(stderr)
    })
    .await;
    assert!(promote.contains("node 7 did not answer the leader's last status request"), "{promote}");
    let learner_lead = refused(&cluster, &["cluster", "move-leader", "7"]);
    assert!(learner_lead.contains("node 7 is a learner, and only a voter can lead"), "{learner_lead}");
    let output = strand_as(&cluster, "ops", &["member", "remove", "7"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(roles(&cluster).await, before);

    // A node of another cluster name is refused when it asks to join, and stops.
    let other = cluster.join(&[1], &["--cluster-name", "other"]);
    let status = cluster.wait_for_exit(other).await;
    assert!(!status.success());
    let log = cluster.log(other);
    assert!(log.contains("asked to join cluster") && log.contains("start it with --cluster-name"), "{log}");
    assert_eq!(roles(&cluster).await, before);

    // --join and --peers together: the node says which to give.
    let both = cluster.node_command(1).args(["--join", "127.0.0.1:1"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert_eq!(both.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("both --join and --peers are given"), "{stderr}");

    // A node's log written to a file carries no colour codes.
    assert!(!cluster.log(1).contains('\x1b'), "escape codes in a node's log file");

    // The last voter of a one-node cluster cannot be removed.
    let single = Cluster::start(1, None);
    single.wait_for_leader().await;
    let last = refused(&single, &["member", "remove", "1"]);
    assert!(last.contains("node 1 is the last voter"), "{last}");
}

/// A change asked while another has not committed is refused, and changes nothing: here the first
/// cannot commit, because the leader's followers are down.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_while_another_is_in_progress_is_refused_and_changes_nothing() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    for id in &followers {
        cluster.kill(*id);
    }
    // The first addition is proposed, and waits for a quorum that is gone; the client gives up.
    let first = strand_as(&cluster, "ops", &["--timeout", "2s", "member", "add", "4", "127.0.0.1:1", "--learner"]);
    assert!(!first.status.success(), "an addition committed without a quorum: {first:?}");
    let second = refused(&cluster, &["member", "add", "5", "127.0.0.1:2", "--learner"]);
    assert!(second.contains("another membership change is in progress"), "{second}");

    for id in &followers {
        cluster.restart(*id);
    }
    cluster.wait_for_leader().await;
    let members = wait_for("the members to be listed", || async {
        let listed = json_of(&strand_as(&cluster, "ops", &["--json", "member", "list"]));
        let ids: Vec<u64> =
            listed["members"].as_array().unwrap().iter().map(|member| member["id"].as_u64().unwrap()).collect();
        ids.contains(&1).then_some(ids)
    })
    .await;
    assert!(!members.contains(&5), "the refused addition was made: {members:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_quorum_is_recovered_with_force_new_cluster_keeping_every_write() {
    let mut cluster = Cluster::start(3, Some(FAST_PROMOTION));
    let leader = cluster.wait_for_leader().await;
    let load = Load::start(&cluster, 4);
    load.acknowledges(200).await;
    let (acked, _) = load.stop().await;

    // Two of three are lost for good. The survivor is the leader, which held every committed
    // entry (a follower may lack the last ones a majority acknowledged). The operator stops it,
    // still running, and starts it again with the flag; a stop syncs its log, where a crash
    // could lose the entries it had not synced yet (the followers' copies made them committed).
    let survivor = leader;
    for id in (1..=3).filter(|id| *id != survivor) {
        cluster.kill(id);
    }
    cluster.signal(survivor, "TERM");
    assert!(cluster.wait_for_exit(survivor).await.success(), "the survivor stops cleanly");
    cluster.restart_with(survivor, &["--force-new-cluster"]);
    let endpoint = cluster.nodes[(survivor - 1) as usize].address.clone();
    let beads = wait_for("the survivor to lead alone", || async {
        let client = cluster.client_of(vec![endpoint.clone()]);
        let status = client.status(false).await.ok()?;
        // Leading alone is not enough: the log it kept is applied after its new term's first
        // entry commits, so the count is read once everything in the log is applied.
        let node = status.nodes.iter().find(|node| node.id == survivor)?;
        (status.leader_id == survivor && status.voters == vec![survivor] && node.applied_index >= node.last_log_index)
            .then_some(node.bead_count)
    })
    .await;
    assert!(beads >= acked as u64, "{beads} beads after the recovery, {acked} creates were acknowledged before");
    let log = cluster.log(survivor);
    assert!(log.contains("--force-new-cluster: this node is now the only voter"), "{log}");

    // Two fresh members join; the cluster has three voters and one state again.
    let four = cluster.join(&[survivor], &[]);
    let five = cluster.join(&[survivor], &[]);
    let client = cluster.client_of(vec![endpoint.clone()]);
    wait_for("three voters", || async {
        let status = client.status(false).await.ok()?;
        (status.voters == vec![survivor, four, five]).then_some(())
    })
    .await;
    let after = converged_beads(&cluster, 3).await;
    assert_eq!(after, beads);

    // Refused on a directory with no state.
    let empty = cluster.dir().join("empty");
    let output = std::process::Command::new(tests::strand_binary())
        .args(["node", "--id", "9", "--force-new-cluster", "--data-dir"])
        .arg(&empty)
        .args(["--listen", &format!("127.0.0.1:{}", tests::free_port())])
        .args(["--listen-peer", &format!("127.0.0.1:{}", tests::free_port())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("refusing --force-new-cluster"), "{stderr}");
    assert!(!empty.exists(), "a refused start leaves no directory behind");
}

/// `strand node ARGS` on a fresh data directory under the cluster's, with fresh listeners unless
/// `args` names them; waits for it to exit and answers its output and the directory.
fn node_alone(cluster: &Cluster, name: &str, args: &[&str]) -> (std::process::Output, std::path::PathBuf) {
    let dir = cluster.dir().join(name);
    let mut command = std::process::Command::new(tests::strand_binary());
    command.arg("node").arg("--data-dir").arg(&dir).args(args);
    for flag in ["--listen", "--listen-peer"] {
        if !args.contains(&flag) {
            command.args([flag, &format!("127.0.0.1:{}", tests::free_port())]);
        }
    }
    let output = tests::output_within(command.stderr(std::process::Stdio::piped()).spawn().unwrap(), WAIT_EXIT)
        .expect("the node exits by itself");
    (output, dir)
}

/// How long a refused start may take (a join that asks until its timeout included).
const WAIT_EXIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits until node `id`'s log says it caught up after `--rejoin` and votes again.
async fn wait_rejoined(cluster: &Cluster, id: u64) {
    wait_for(&format!("node {id} to vote again after rejoining"), || async {
        cluster.log(id).contains("caught up after rejoining; this node votes again").then_some(())
    })
    .await;
}

/// Wipes node `id`'s data directory (killed first) and starts it again with `--rejoin`, as the
/// README's "A lost disk" recipe does, with the command it was first started with.
fn lose_disk_and_rejoin(cluster: &mut Cluster, id: u64) {
    cluster.kill(id);
    std::fs::remove_dir_all(&cluster.nodes[(id - 1) as usize].data_dir).unwrap();
    cluster.restart_with(id, &["--rejoin"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_disk_rejoins_after_the_membership_changed_and_a_join_never_clobbers_a_member() {
    let mut cluster = Cluster::start(3, Some(FAST_PROMOTION));
    cluster.wait_for_leader().await;
    let load = Load::start(&cluster, 2);
    load.acknowledges(30).await;

    // A join through an address where nothing listens gives up at its deadline; one through a
    // client port is refused at once as one. Neither leaves a directory behind.
    let nowhere = format!("127.0.0.1:{}", tests::free_port());
    let (output, dir) =
        node_alone(&cluster, "join-nowhere", &["--id", "9", "--join", &nowhere, "--join-timeout", "2s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("no member answered within 2 s"), "{stderr}");
    assert!(!dir.exists(), "no directory is left behind: {stderr}");
    let client_port = cluster.nodes[0].address.clone();
    let (output, dir) = node_alone(&cluster, "join-client-port", &["--id", "9", "--join", &client_port]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("client port"), "{stderr}");
    assert!(!dir.exists(), "{stderr}");

    // Node 4 joins; node 3 is removed, and its process exits saying so.
    let four = cluster.join(&[1, 2], &[]);
    wait_for_voters(&cluster, &[1, 2, 3, four]).await;
    json_of(&strand_as(&cluster, "ops", &["--json", "member", "remove", "3"]));
    let exited = cluster.wait_for_exit(3).await;
    assert!(!exited.success(), "a removed node exits with an error");
    assert!(cluster.log(3).contains("stopped: node 3 was removed from cluster"), "{}", cluster.log(3));
    wait_for_voters(&cluster, &[1, 2, four]).await;

    // A fresh directory that asks to join under a voter's id is refused, and changes nothing:
    // that is a lost disk, which --rejoin brings back.
    cluster.kill(2);
    let node_2 = &cluster.nodes[1];
    let (listen, listen_peer) = (node_2.address.clone(), node_2.peer_address.clone());
    let through = cluster.nodes[0].peer_address.clone();
    let args = ["--id", "2", "--listen", &listen, "--listen-peer", &listen_peer, "--join", &through];
    let (output, dir) = node_alone(&cluster, "clobber", &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("is already a voter") && stderr.contains("--rejoin"),
        "{stderr}"
    );
    assert!(!dir.exists(), "{stderr}");
    let leader = cluster.wait_for_leader().await;
    assert!(!cluster.log(leader).contains("log went back"), "the leader saw no wiped member");

    // Node 2 stayed while node 3 was replaced: it rejoins with the --peers it was started with.
    lose_disk_and_rejoin(&mut cluster, 2);
    wait_rejoined(&cluster, 2).await;
    // Node 4 joined: it rejoins with its --join, which --rejoin turns into asking.
    lose_disk_and_rejoin(&mut cluster, four);
    wait_rejoined(&cluster, four).await;
    assert!(!cluster.log(four).contains("has no effect"), "{}", cluster.log(four));

    // Node 1 is removed and comes back under a new id (5) on its host; then it loses its disk.
    json_of(&strand_as(&cluster, "ops", &["--json", "member", "remove", "1"]));
    assert!(!cluster.wait_for_exit(1).await.success());
    let five = cluster.join(&[2, four], &[]);
    wait_for_voters(&cluster, &[2, four, five]).await;
    lose_disk_and_rejoin(&mut cluster, five);
    wait_rejoined(&cluster, five).await;

    let (acked, failed) = load.stop().await;
    assert_eq!(failed, 0, "no write failed for good");
    assert!(converged_beads(&cluster, 3).await >= acked as u64);
}

/// Runs the CLI against a TLS cluster, with `token` as `$STRAND_TOKEN`.
fn tls_cli(cluster: &Cluster, token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(tests::strand_binary());
    command
        .args(["--endpoints", &cluster.endpoints()[..3].join(","), "--actor", "ops", "--cacert"])
        .arg(cluster.tls().unwrap().dir.join("ca.pem"))
        .args(args)
        .env_remove("STRAND_TOKEN")
        .env_remove("STRAND_CONFIG");
    if let Some(token) = token {
        command.env("STRAND_TOKEN", token);
    }
    command.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_joins_over_mutual_tls_only_with_its_own_certificate_and_an_admin_token() {
    let mut cluster = Cluster::start_tls(3, false);
    cluster.wait_for_leader().await;
    let admin = json_of(&tls_cli(&cluster, None, &["--json", "auth", "enable"]))["token"].as_str().unwrap().to_string();
    let reader = json_of(&tls_cli(
        &cluster,
        Some(&admin),
        &["--json", "auth", "token", "create", "auditor", "--role", "reader"],
    ))["token"]
        .as_str()
        .unwrap()
        .to_string();

    // A reader's token is refused, and the node stops with the reason.
    let denied = cluster.join(&[1], &["--token", &reader]);
    assert!(!cluster.wait_for_exit(denied).await.success());
    let log = cluster.log(denied);
    assert!(log.contains("joining the cluster needs an admin token"), "{log}");

    // The certificate of another node: a join in the name of node 5 over node 4's certificate.
    let dir = cluster.tls().unwrap().dir.clone();
    let settings = node::config::TlsSettings {
        cert: dir.join("node-4.pem"),
        key: dir.join("node-4.key"),
        ca: dir.join("ca.pem"),
        client_ca: None,
    };
    let tls = std::sync::Arc::new(node::tls::NodeTls::load(&settings, 4).unwrap());
    let connector =
        node::peer::network::TcpConnector { connect_timeout: std::time::Duration::from_secs(2), tls: Some(tls) };
    use node::peer::network::Connector;
    let channel = connector.channel_to_address(&cluster.nodes[0].peer_address).unwrap();
    let request = node::peer::JoinRequest {
        cluster_name: "strand".into(),
        id: 5,
        member: raft_store::types::Member::new("127.0.0.1:1"),
    };
    let mut call = tonic::Request::new(node::peer::network::encode(&request));
    call.metadata_mut().insert("authorization", format!("Bearer {admin}").parse().unwrap());
    let versions = api::version::build_apply_versions().to_string().parse().unwrap();
    call.metadata_mut().insert(node::peer::network::APPLY_VERSIONS_HEADER, versions);
    let answer = api::proto::raft_client::RaftClient::new(channel).join(call).await.unwrap().into_inner();
    let answer: Result<node::peer::Joined, node::peer::ChangeRefused> = node::peer::network::decode(&answer).unwrap();
    let refused = answer.expect_err("a join over another node's certificate is refused");
    assert!(refused.to_string().contains("whose certificate names node 4"), "{refused}");

    // With its own certificate and the admin token it joins, and is promoted.
    let joined = cluster.join(&[2, 3], &["--token", &admin]);
    let listed = wait_for("the new node to be a voter", || async {
        let listed = json_of(&tls_cli(&cluster, Some(&admin), &["--json", "member", "list"]));
        let voters = listed["members"].as_array().unwrap().iter().filter(|member| member["role"] == "voter").count();
        (voters == 4).then_some(listed)
    })
    .await;
    assert!(listed["members"].as_array().unwrap().iter().any(|member| member["id"] == joined), "{listed}");
}
