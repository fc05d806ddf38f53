//! Every node serves Prometheus metrics at `GET /metrics` on its gRPC address, over plain
//! HTTP/1.1 as Prometheus scrapes it: Raft's role and indexes as they are at the scrape, and
//! request counters by outcome.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use api::command::{Command, CreateBead, Query};
use api::commands::get::Get;
use api::model::{Actor, BeadId};
use tests::{Cluster, http_get, wait_for};

/// The value of an unlabelled or fully labelled sample line `name value`, if present.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_serves_raft_state_and_request_counters() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let follower = cluster.nodes.iter().find(|node| node.id != leader).unwrap();
    let leader_address = cluster.nodes[leader as usize - 1].address.clone();

    // One write through a follower (forwarded), one refused write, one read.
    let through_follower = cluster.client_of(vec![follower.address.clone()]);
    let create = CreateBead { title: "scraped".into(), ..Default::default() };
    through_follower.execute(Command::Create(create)).await.unwrap();
    let missing = Command::Claim(api::command::Claim {
        id: BeadId("st-999999".into()),
        actor: Actor("agent".into()),
        lease_ms: None,
    });
    assert!(through_follower.execute(missing).await.is_err(), "claiming a missing bead is refused");
    through_follower.query(Query::from(Get { ids: vec![BeadId("st-1".into())] })).await.unwrap();

    let (status, headers, page) = http_get(&follower.address, "/metrics").await;
    assert!(status.contains("200"), "{status}");
    assert!(headers.contains("content-type: application/openmetrics-text"), "{headers}");
    assert!(page.trim_end().ends_with("# EOF"), "{page}");
    assert_eq!(sample(&page, "strand_raft_is_leader"), Some(0.0), "{page}");
    assert_eq!(sample(&page, "strand_raft_leader_id"), Some(leader as f64), "{page}");
    assert_eq!(sample(&page, "strand_raft_fatal"), Some(0.0), "{page}");
    assert!(sample(&page, "strand_forwarded_writes_total").unwrap() >= 2.0, "{page}");
    assert_eq!(sample(&page, "strand_requests_total{kind=\"write\",outcome=\"ok\"}"), Some(1.0), "{page}");
    assert_eq!(sample(&page, "strand_requests_total{kind=\"write\",outcome=\"refused\"}"), Some(1.0), "{page}");
    assert_eq!(sample(&page, "strand_requests_total{kind=\"read\",outcome=\"ok\"}"), Some(1.0), "{page}");
    assert_eq!(sample(&page, "strand_write_duration_seconds_count"), Some(2.0), "{page}");

    // The leader's page: its role, and the applied index reaching the follower's once both applied.
    let (_, _, leader_page) = http_get(&leader_address, "/metrics").await;
    assert_eq!(sample(&leader_page, "strand_raft_is_leader"), Some(1.0), "{leader_page}");
    assert_eq!(sample(&leader_page, "strand_raft_term"), sample(&page, "strand_raft_term"), "{leader_page}");
    assert_eq!(sample(&leader_page, "strand_forwarded_writes_total"), Some(0.0), "{leader_page}");
    wait_for("the follower's page to show the bead and the leader's applied index", || async {
        let (_, _, leader_page) = http_get(&leader_address, "/metrics").await;
        let (_, _, page) = http_get(&follower.address, "/metrics").await;
        let applied = sample(&leader_page, "strand_raft_applied_index")?;
        (sample(&page, "strand_beads") == Some(1.0) && sample(&page, "strand_raft_applied_index") == Some(applied))
            .then_some(())
    })
    .await;

    let (status, _, _) = http_get(&leader_address, "/no-such-page").await;
    assert!(status.contains("404"), "{status}");
}
