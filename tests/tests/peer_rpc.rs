//! The replication stream's error paths, driven from outside with a raw Raft client: a request
//! that does not decode ends the session unanswered, and a session cut off mid-way ends it too;
//! either way the follower keeps replicating from the real leader.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::time::Duration;

use api::command::{Command, CreateBead};
use api::proto::RaftPayload;
use futures::StreamExt;
use node::peer::network::PeerIdentity;
use tests::{Cluster, wait_for};

/// Writes one bead through the cluster and waits until all three nodes applied it alike.
async fn write_and_converge(cluster: &Cluster, title: &str) {
    let create = Command::Create(CreateBead { title: title.into(), ..Default::default() });
    cluster.client().execute(create).await.expect("the cluster takes a write");
    cluster.wait_for_convergence(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_replication_stream_ends_unanswered_and_the_follower_keeps_replicating() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let follower = cluster.nodes.iter().find(|node| node.id != leader).unwrap();
    let identity = PeerIdentity::fixed(cluster.cluster_id().await, leader);
    let mut raft = cluster.peer_client(follower.id, identity.clone()).await;

    // A request that does not decode: the follower ends the session without answering it. The
    // request stream stays open, so only the follower can have ended the answers.
    let garbage = RaftPayload { data: vec![0xff, 0xfe, 0x01] };
    let requests = futures::stream::iter([garbage]).chain(futures::stream::pending());
    let mut answers = raft.stream_append(requests).await.unwrap().into_inner();
    let end = tokio::time::timeout(Duration::from_secs(10), answers.message()).await.expect("the session ends");
    assert!(matches!(end, Ok(None)), "the session ended without an answer: {end:?}");
    wait_for("the follower to log the malformed request", || async {
        cluster.log(follower.id).contains("a request that does not decode").then_some(())
    })
    .await;
    write_and_converge(&cluster, "after a malformed session").await;

    // A session cut off mid-way: the client goes away while its request stream is still open, so
    // the follower's side of the stream breaks rather than ends; the follower goes on.
    let (sender, receiver) = futures::channel::mpsc::channel::<RaftPayload>(1);
    let mut cut = cluster.peer_client(follower.id, identity).await;
    let answers = cut.stream_append(receiver).await.unwrap().into_inner();
    drop((answers, cut));
    write_and_converge(&cluster, "after a cut session").await;
    drop(sender);
    write_and_converge(&cluster, "after a cut session").await;
}

/// The client listener never serves Raft: a plain client there cannot vote, append, forward a
/// proposal or send a snapshot, whatever identity it claims; the peer listener serves Raft and no
/// client service; both serve health.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_on_the_client_listener_cannot_reach_the_raft_service() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let node = &cluster.nodes[(leader - 1) as usize];
    let identity = PeerIdentity::fixed(cluster.cluster_id().await, leader % 3 + 1);
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", node.address)).unwrap().connect().await.unwrap();
    let mut raft = api::proto::raft_client::RaftClient::with_interceptor(channel.clone(), identity);
    let payload = RaftPayload { data: vec![1, 2, 3] };
    let statuses = [
        raft.vote(payload.clone()).await.unwrap_err(),
        raft.propose(payload.clone()).await.unwrap_err(),
        raft.read_index(payload.clone()).await.unwrap_err(),
        match raft.stream_append(futures::stream::iter([payload.clone()])).await {
            Err(status) => status,
            Ok(answers) => answers.into_inner().message().await.unwrap_err(),
        },
    ];
    for status in statuses {
        assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");
    }
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let request = tonic_health::pb::HealthCheckRequest { service: String::new() };
    assert_eq!(health.check(request.clone()).await.unwrap().into_inner().status, 1, "SERVING on the client listener");

    let peer = tonic::transport::Endpoint::from_shared(format!("http://{}", node.peer_address))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut beads = api::proto::beads_client::BeadsClient::new(peer.clone());
    let refused = beads.list(api::proto::ListRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unimplemented, "{refused:?}");
    let mut health = tonic_health::pb::health_client::HealthClient::new(peer);
    assert_eq!(health.check(request).await.unwrap().into_inner().status, 1, "SERVING on the peer listener");
    write_and_converge(&cluster, "after the probes").await;
}
