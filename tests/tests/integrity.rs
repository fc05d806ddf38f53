//! Integrity against a damaged disk, large writes and stray messages, with real node processes:
//! - a byte flipped in the write-ahead log of one node, or of two, stops the damaged nodes at
//!   start with a message naming the damage and the recovery, and the undamaged nodes still hold
//!   every acknowledged write; a damaged node moved away rejoins empty and catches up, and two
//!   damaged nodes restored from backups bring the cluster back whole;
//! - 250 creates of about 0.9 MB each while a follower is down: the follower catches up;
//! - an oversized forwarded proposal is refused at once, and writes go on;
//! - a snapshot with a bad checksum, from the wrong cluster, in another member's name, or over the
//!   size cap is refused, its file deleted, and the state unchanged;
//! - a Raft message from another cluster, from no cluster, or in another node's name is refused, a
//!   non-member's read index too (a vote or an append from a node no member saw leave is judged:
//!   it may have been added since), and a
//!   stream of vote requests that claim a leadership transfer nobody started disturbs nothing;
//! - two clusters started apart with the same name and ids draw different ids, and a node of one
//!   that comes back at the address of a node of the other refuses that cluster's leader, logging
//!   the repeated refusal once per window with a count.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use api::command::{Command, CreateBead, ListFilter, Query, RequestId};
use api::commands::list::List;
use api::model::BeadId;
use api::outcome::Outcome;
use api::proto::raft_client::RaftClient;
use api::proto::{RaftPayload, SnapshotChunk};
use node::leader::{BeadWrite, LeaderRequest};
use node::peer::network::{PeerIdentity, SnapshotMeta, TypeConfig, Vote};
use tests::{Cluster, wait_for};

/// Creates `count` beads titled `{title} N` through the cluster; answers their ids.
async fn create_beads(cluster: &Cluster, title: &str, count: usize) -> Vec<BeadId> {
    let client = cluster.client();
    let mut ids = Vec::new();
    for number in 0..count {
        let create = CreateBead { title: format!("{title} {number}"), ..Default::default() };
        let Outcome::Bead(bead) = client.execute(Command::Create(create)).await.unwrap() else { panic!("create") };
        ids.push(bead.id);
    }
    ids
}

/// Every bead id node `id` holds, read from its own replica (no leader needed).
async fn ids_on(cluster: &Cluster, id: u64) -> Vec<BeadId> {
    let mut config = api::client::ClientConfig::new(vec![cluster.nodes[(id - 1) as usize].address.clone()]);
    config.consistency = api::convert::Consistency::Serializable;
    let client = api::client::Client::new(config).unwrap();
    let filter = ListFilter { all: true, limit: 0, ..Default::default() };
    let Outcome::Beads(beads) = client.query(Query::from(List(filter))).await.unwrap() else { panic!("list") };
    beads.into_iter().map(|bead| bead.id).collect()
}

/// The newest write-ahead log file of node `id`.
fn newest_wal(cluster: &Cluster, id: u64) -> PathBuf {
    let db = cluster.nodes[(id - 1) as usize].data_dir.join("db");
    let mut wals: Vec<PathBuf> = std::fs::read_dir(&db)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "log"))
        .filter(|path| std::fs::metadata(path).unwrap().len() > 0)
        .collect();
    wals.sort();
    wals.pop().expect("a non-empty write-ahead log")
}

/// Flips every bit of the byte in the middle of `path`.
fn flip_middle_byte(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

/// Node `id`'s own status, asked of it alone.
async fn own_status(cluster: &Cluster, id: u64) -> api::proto::NodeStatus {
    let client = cluster.client_of(vec![cluster.nodes[(id - 1) as usize].address.clone()]);
    let status = client.status(false).await.unwrap();
    status.nodes.into_iter().find(|node| node.id == id).unwrap()
}

/// Copies a stopped node's data directory (a backup).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Writes, converges, kills every node, backs up and damages the WAL of `damaged`, restarts all:
/// the damaged nodes refuse to start, and the others still hold every acknowledged write in their
/// logs. Answers the cluster, the acknowledged ids and the backups of the damaged nodes.
async fn wal_damage(damaged: &[u64]) -> (Cluster, Vec<BeadId>, Vec<(u64, PathBuf)>) {
    let mut cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let acknowledged = create_beads(&cluster, "before the crash", 300).await;
    let (applied_index, _) = cluster.wait_for_convergence(3).await;
    for id in 1..=3 {
        cluster.kill(id);
    }
    let mut backups = Vec::new();
    for id in damaged {
        let data_dir = cluster.nodes[(*id - 1) as usize].data_dir.clone();
        let backup = data_dir.with_extension("backup");
        copy_dir(&data_dir, &backup);
        backups.push((*id, backup));
        flip_middle_byte(&newest_wal(&cluster, *id));
    }
    for id in 1..=3 {
        cluster.restart(id);
    }
    for id in damaged {
        let status = cluster.wait_for_exit(*id).await;
        assert!(!status.success(), "damaged node {id} must refuse to start");
        let log = cluster.log(*id);
        assert!(log.contains("refusing to start") && log.contains("is damaged"), "node {id} names the damage: {log}");
        assert!(log.contains("restore") && log.contains("--rejoin"), "node {id} names the recovery: {log}");
    }
    for id in (1..=3).filter(|id| !damaged.contains(id)) {
        let status = own_status(&cluster, id).await;
        assert!(
            status.last_log_index >= applied_index,
            "undamaged node {id} holds its log through {}, short of the acknowledged {applied_index}",
            status.last_log_index
        );
    }
    (cluster, acknowledged, backups)
}

/// Every acknowledged id is in the cluster's linearizable list.
async fn assert_all_held(cluster: &Cluster, acknowledged: &[BeadId]) {
    let filter = ListFilter { all: true, limit: 0, ..Default::default() };
    let Outcome::Beads(beads) = cluster.client().query(Query::from(List(filter))).await.unwrap() else {
        panic!("list")
    };
    let held: Vec<BeadId> = beads.into_iter().map(|bead| bead.id).collect();
    for bead_id in acknowledged {
        assert!(held.contains(bead_id), "acknowledged {bead_id} was lost");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_byte_flip_on_one_node_stops_it_and_it_rejoins_once_moved_away() {
    let (mut cluster, acknowledged, _) = wal_damage(&[2]).await;
    // The two undamaged nodes serve on, with every acknowledged write.
    assert_all_held(&cluster, &acknowledged).await;
    let after = create_beads(&cluster, "after the damage", 1).await;
    // The documented recovery: move the damaged directory away, start empty with --rejoin: the
    // node does not vote until it caught up, then does.
    let data_dir = cluster.nodes[1].data_dir.clone();
    std::fs::rename(&data_dir, data_dir.with_extension("damaged")).unwrap();
    cluster.restart_with(2, &["--rejoin"]);
    cluster.wait_for_convergence(3).await;
    wait_for("the rejoined node to vote again", || async {
        cluster.log(2).contains("caught up after rejoining; this node votes again").then_some(())
    })
    .await;
    assert!(cluster.log(2).contains("does not vote until it has caught up"), "{}", cluster.log(2));
    let held = ids_on(&cluster, 2).await;
    for bead_id in acknowledged.iter().chain(&after) {
        assert!(held.contains(bead_id), "the rejoined node lacks {bead_id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_byte_flip_on_two_nodes_stops_both_and_the_third_keeps_every_write() {
    let (mut cluster, acknowledged, backups) = wal_damage(&[1, 3]).await;
    // The documented recovery with a majority damaged: restore the damaged nodes from backups.
    for (id, backup) in backups {
        let data_dir = cluster.nodes[(id - 1) as usize].data_dir.clone();
        std::fs::rename(&data_dir, data_dir.with_extension("damaged")).unwrap();
        std::fs::rename(&backup, &data_dir).unwrap();
        cluster.restart(id);
    }
    cluster.wait_for_convergence(3).await;
    assert_all_held(&cluster, &acknowledged).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_down_during_250_large_creates_catches_up() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    cluster.kill(follower);
    let value = "v".repeat(63 * 1024);
    let client = cluster.client();
    for number in 0..250 {
        let metadata: BTreeMap<String, String> = (0..14).map(|key| (format!("key{key}"), value.clone())).collect();
        let create = CreateBead { title: format!("large {number}"), metadata, ..Default::default() };
        client.execute(Command::Create(create)).await.unwrap();
    }
    cluster.restart(follower);
    // Convergence within the harness's bound: the follower took every entry, about 225 MB.
    cluster.wait_for_convergence(3).await;
}

/// `command`, as a peer forwards it to the leader.
fn forwarded(command: Command) -> RaftPayload {
    let forwarded = LeaderRequest::Write(BeadWrite {
        namespace: api::model::Namespace("default".into()),
        request_id: RequestId { client_id: 77, request_seq: 1, lowest_unacked: 1 },
        actor: api::model::Actor("forger".into()),
        prefix: None,
        command,
        credential: None,
    });
    node::peer::network::encode(&forwarded)
}

/// A peer client of the leader, in the name of a follower.
async fn peer_client_of_leader(cluster: &Cluster) -> node::peer::network::PeerRpc {
    let leader = cluster.wait_for_leader().await;
    let identity = PeerIdentity::fixed(cluster.cluster_id().await, (1..=3).find(|id| *id != leader).unwrap());
    cluster.peer_client(leader, identity).await
}

/// A forwarded write of a bead whose title has `title_bytes` bytes.
fn forwarded_create(title_bytes: usize) -> RaftPayload {
    forwarded(Command::Create(CreateBead { title: "x".repeat(title_bytes), ..Default::default() }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_proposal_is_refused_at_once_and_writes_go_on() {
    let cluster = Cluster::start(3, None);
    let mut raft = peer_client_of_leader(&cluster).await;
    for title_bytes in [2 * 1024 * 1024, 70 * 1024 * 1024] {
        let refused = tokio::time::timeout(Duration::from_secs(10), raft.propose(forwarded_create(title_bytes)))
            .await
            .expect("refused at once, not after a commit wait");
        let status = refused.expect_err("an oversized proposal is refused");
        assert!(
            matches!(
                status.code(),
                tonic::Code::InvalidArgument | tonic::Code::OutOfRange | tonic::Code::ResourceExhausted
            ),
            "{title_bytes} bytes: {status:?}"
        );
    }
    create_beads(&cluster, "after the oversized proposal", 3).await;
    cluster.wait_for_convergence(3).await;
}

/// A controller action is only ever proposed by the leader's own controller: one forwarded by a
/// peer, here a `Begin` of the highest possible term that would fence every real controller out,
/// is refused, and the controller's term stays the leader's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_controller_action_is_refused() {
    let cluster = Cluster::start(3, None);
    let mut raft = peer_client_of_leader(&cluster).await;
    let begin =
        Command::Controller(api::command::Controller { term: u64::MAX, action: api::command::ControllerAction::Begin });
    let response = raft.propose(forwarded(begin)).await.unwrap().into_inner();
    let answer: Result<api::outcome::Answer, String> = node::peer::network::decode(&response).unwrap();
    match answer {
        Ok(Err(api::outcome::Refusal::Invalid(why))) => assert!(why.contains("never forwarded"), "{why}"),
        other => panic!("a forwarded controller action must be refused, got {other:?}"),
    }
    create_beads(&cluster, "after the forged controller action", 1).await;
    let status = cluster.client().status(false).await.unwrap();
    for node in &status.nodes {
        assert!(node.controller_term < u64::MAX, "node {} took the forged term", node.id);
    }
}

/// The metadata a snapshot file starts with (its magic line, then a sealed, framed meta).
/// The newest snapshot a node built (a checkpoint), written out as the file a follower receives.
fn written_out_snapshot(snapshots: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let snapshot = raft_store::state_machine::newest_checkpoint::<raft_store::RocksDisk>(snapshots).ok()??;
    let mut bytes = Vec::new();
    snapshot.snapshot.into_file().ok()?.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn snapshot_meta(file: &[u8]) -> SnapshotMeta {
    let magic = file.iter().position(|byte| *byte == b'\n').unwrap() + 1;
    let length = u32::from_be_bytes(file[magic..magic + 4].try_into().unwrap()) as usize;
    let sealed = &file[magic + 4..magic + 4 + length];
    postcard::from_bytes(&sealed[..sealed.len() - 4]).unwrap()
}

/// Streams `data` as a snapshot of `meta`, sent under a committed vote of `leader` in `term`.
async fn send_snapshot(
    cluster: &Cluster,
    to: u64,
    identity: PeerIdentity,
    leader: u64,
    term: u64,
    meta: &SnapshotMeta,
    data: Vec<u8>,
) -> tonic::Status {
    let vote = Vote::new_committed(term, leader);
    let header = SnapshotChunk { meta: postcard::to_stdvec(&(vote, meta.clone())).unwrap(), data: Vec::new() };
    let mut chunks = vec![header];
    chunks.extend(data.chunks(16 * 1024).map(|chunk| SnapshotChunk { meta: Vec::new(), data: chunk.to_vec() }));
    let mut raft = cluster.peer_client(to, identity).await;
    raft.install_snapshot(futures::stream::iter(chunks)).await.expect_err("the snapshot is refused")
}

fn incoming_snapshots(cluster: &Cluster, id: u64) -> Vec<String> {
    let dir = cluster.nodes[(id - 1) as usize].data_dir.join("snapshots");
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("incoming-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_foreign_forged_and_oversized_snapshots_are_refused_and_change_nothing() {
    let config = "[raft]\nsnapshot_logs_since_last = 100\nsnapshot_receive_bytes_max = 262144\n";
    let cluster = Cluster::start(3, Some(config));
    let leader = cluster.wait_for_leader().await;
    create_beads(&cluster, "snapshotted", 150).await;
    let snapshots = cluster.nodes[(leader - 1) as usize].data_dir.join("snapshots");
    let file = wait_for("the leader to build a snapshot", || async { written_out_snapshot(&snapshots) }).await;
    let meta = snapshot_meta(&file);
    let term = cluster.client().status(false).await.unwrap().term;
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let ours = PeerIdentity::fixed(cluster.cluster_id().await, leader);

    let mut damaged = file.clone();
    damaged[file.len() / 2] ^= 0x01;
    let status = send_snapshot(&cluster, follower, ours.clone(), leader, term + 5, &meta, damaged).await;
    assert_eq!(status.code(), tonic::Code::DataLoss, "{status:?}");

    let foreign = PeerIdentity::fixed(ours.cluster_id.get() ^ 1, leader);
    let status = send_snapshot(&cluster, follower, foreign, leader, term + 5, &meta, file.clone()).await;
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");

    let other = (1..=3).find(|id| *id != leader && *id != follower).unwrap();
    let status = send_snapshot(&cluster, follower, ours.clone(), other, term + 5, &meta, file.clone()).await;
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "in another member's name: {status:?}");

    let oversized: Vec<u8> = file.iter().copied().cycle().take(1024 * 1024).collect();
    let status = send_snapshot(&cluster, follower, ours.clone(), leader, term + 5, &meta, oversized).await;
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("snapshot_receive_bytes_max"), "{status:?}");

    assert!(incoming_snapshots(&cluster, follower).is_empty(), "refused snapshots leave no file");
    // The follower holds what the others hold (a snapshot taken whole, damaged or not, would
    // replace its state) and every created bead, and never took the senders' term. The indexes
    // are not compared: an election on a loaded machine appends entries and changes nothing.
    cluster.wait_for_convergence(3).await;
    let held = ids_on(&cluster, follower).await;
    assert_eq!(held, ids_on(&cluster, leader).await, "the follower's beads");
    assert_eq!(held.len(), 150, "the follower's beads");
    assert!(cluster.own_status(follower).await.term < term + 5, "the follower never took the senders' term");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_messages_from_another_cluster_or_a_stranger_are_refused() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let vote = openraft::raft::VoteRequest::<TypeConfig>::new(Vote::new(1_000, leader), None);
    let payload = node::peer::network::encode(&vote);
    let cluster_id = cluster.cluster_id().await;
    for (identity, why) in [
        (PeerIdentity::fixed(cluster_id ^ 1, leader), "another cluster"),
        (PeerIdentity::fixed(cluster_id, 99), "a node no member knows, voting in another's name"),
        (PeerIdentity::fixed(cluster_id, follower), "a member voting in another's name"),
        (PeerIdentity::fixed(node::identity::UNBOUND, leader), "a node that knows no cluster id"),
    ] {
        let mut raft = cluster.peer_client(follower, identity).await;
        let status = raft.vote(payload.clone()).await.expect_err(why);
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{why}: {status:?}");
    }
    // A candidate or leader no member saw leave may be one added after the follower's last entry,
    // so its vote or append is judged; what only a member asks (a read index, a forwarded write,
    // a leadership move) is refused from a non-member.
    let mut stranger = cluster.peer_client(follower, PeerIdentity::fixed(cluster_id, 99)).await;
    let status = stranger.read_index(RaftPayload::default()).await.expect_err("a non-member's read index");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("not a member"), "{status:?}");
    let address = format!("http://{}", cluster.nodes[(follower - 1) as usize].peer_address);
    let mut bare = RaftClient::connect(address).await.unwrap();
    let status = bare.vote(payload).await.expect_err("no identity");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    wait_for("the refusals to be logged", || async {
        cluster.log(follower).contains("refused a Raft message").then_some(())
    })
    .await;
    create_beads(&cluster, "after the strangers", 3).await;
}

/// A child process killed when dropped (a test that fails leaves none behind).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_started_apart_never_share_an_id_and_refuse_each_other() {
    // The same name and ids 1, 2, 3: each cluster draws its id as it is made.
    let (mut first, mut second) = (Cluster::start(3, None), Cluster::start(3, None));
    first.wait_for_leader().await;
    second.wait_for_leader().await;
    let (first_id, second_id) = (first.cluster_id().await, second.cluster_id().await);
    assert_ne!(first_id, second_id);
    for id in 1..=3 {
        assert_eq!(second.own_status(id).await.cluster_id, second_id, "node {id} learned its cluster's id");
    }
    // Node 3 of the second cluster comes back where node 3 of the first one was (its host and
    // ports): the first cluster's leader sends it appends, which it refuses, and nothing
    // changes on either side (with one shared id, it took them and its log went the first
    // cluster's way).
    first.kill(3);
    second.kill(3);
    let (taken, moved) = (&first.nodes[2], &second.nodes[2]);
    let peers =
        format!("1={},2={},3={}", second.nodes[0].peer_address, second.nodes[1].peer_address, taken.peer_address);
    let log_path = second.dir().join("moved.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let _moved = Reaped(
        std::process::Command::new(tests::strand_binary())
            .args(["node", "--id", "3", "--listen", &taken.address, "--listen-peer", &taken.peer_address])
            .arg("--data-dir")
            .arg(&moved.data_dir)
            .args(["--peers", &peers])
            .env("RUST_LOG", "info,openraft=warn")
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for("the moved node to refuse the other cluster's leader", || async {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        log.contains("they are different clusters").then_some(())
    })
    .await;
    // The refusals repeat several times a second; the log keeps the first, then one line per
    // window with the count of those it left out.
    let log = wait_for("a rate-limited repeat of the refusal", || async {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        log.contains("more like it in the last 10 s").then_some(log)
    })
    .await;
    let refusals = log.lines().filter(|line| line.contains("they are different clusters")).count();
    assert!(refusals <= 4, "{refusals} lines of one refusal in about 10 s: {log}");
    let status = first.client_of(vec![first.nodes[0].address.clone()]).status(false).await.unwrap();
    assert_eq!(status.voters, vec![1, 2, 3], "the first cluster's membership is unchanged");
    assert_eq!(first.own_status(1).await.cluster_id, first_id);
    let stray = first.client_of(vec![taken.address.clone()]).status(false).await.unwrap();
    let own = stray.nodes.iter().find(|member| member.id == 3).unwrap();
    assert_eq!(own.cluster_id, second_id, "the moved node keeps its own cluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vote_requests_claiming_an_unannounced_leadership_transfer_disturb_nothing() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let term = cluster.client().status(false).await.unwrap().term;
    let candidate = (1..=3).find(|id| *id != leader).unwrap();
    let voter = (1..=3).find(|id| *id != leader && *id != candidate).unwrap();
    let identity = PeerIdentity::fixed(cluster.cluster_id().await, candidate);
    let mut raft = cluster.peer_client(voter, identity).await;
    let last_log_id = openraft::type_config::alias::LogIdOf::<TypeConfig>::new_term_index(term + 10, 1_000_000);
    for round in 0..50 {
        let mut vote =
            openraft::raft::VoteRequest::<TypeConfig>::new(Vote::new(term + 1 + round, candidate), Some(last_log_id));
        vote.leadership_transfer = true;
        let _ = raft.vote(node::peer::network::encode(&vote)).await;
        create_beads(&cluster, "during forged transfers", 1).await;
    }
    let status = cluster.client().status(false).await.unwrap();
    assert_eq!((status.leader_id, status.term), (leader, term), "the forged transfer votes moved leadership");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejoining_node_does_not_vote_until_it_has_caught_up() {
    let mut cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let acknowledged = create_beads(&cluster, "before the loss", 20).await;
    cluster.wait_for_convergence(3).await;
    let cluster_id = cluster.cluster_id().await;
    for id in 1..=3 {
        cluster.kill(id);
    }
    let data_dir = cluster.nodes[1].data_dir.clone();
    std::fs::remove_dir_all(&data_dir).unwrap();
    // Node 1 alone answers which cluster node 2 belongs to; one answer about how far the logs
    // reach is too few, so node 2 stays rejoining until node 3 is back.
    cluster.restart(1);
    cluster.restart_with(2, &["--rejoin"]);
    let identity = PeerIdentity::fixed(cluster_id, 1);
    let vote = openraft::raft::VoteRequest::<TypeConfig>::new(Vote::new(50, 1), None);
    let refused = wait_for("the rejoining node to answer", || async {
        let address = format!("http://{}", cluster.nodes[1].peer_address);
        let channel = tonic::transport::Endpoint::from_shared(address).ok()?.connect().await.ok()?;
        let mut raft = RaftClient::with_interceptor(channel, identity.clone());
        raft.vote(node::peer::network::encode(&vote)).await.err()
    })
    .await;
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("rejoining"), "{refused:?}");
    cluster.restart(3);
    cluster.wait_for_convergence(3).await;
    wait_for("the rejoined node to vote again", || async {
        cluster.log(2).contains("this node votes again").then_some(())
    })
    .await;
    let mut raft = cluster.peer_client(2, identity).await;
    raft.vote(node::peer::network::encode(&vote)).await.expect("a caught-up node answers votes");
    let held = ids_on(&cluster, 2).await;
    assert!(acknowledged.iter().all(|bead_id| held.contains(bead_id)), "the rejoined node caught up");
}
