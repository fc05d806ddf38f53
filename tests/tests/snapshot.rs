//! (c) A node that was down while the log moved past the purge point catches up through a
//! snapshot streamed over gRPC.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::sync::Arc;

use api::command::{Command, CreateBead};
use tests::{Cluster, wait_for};

const CONFIG: &str =
    "[raft]\nsnapshot_logs_since_last = 300\nmax_in_snapshot_log_to_keep = 1000\npurge_batch_size = 256\n";
const WRITERS: usize = 16;
const WRITES: usize = 2_400;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lagging_node_catches_up_through_a_snapshot() {
    let mut cluster = Cluster::start(3, Some(CONFIG));
    let leader = cluster.wait_for_leader().await;
    let lagging = cluster.nodes.iter().find(|node| node.id != leader).expect("a follower").id;
    let before = cluster.client().status(false).await.unwrap();
    let lagging_log_end = before.nodes.iter().find(|node| node.id == lagging).expect("lagging status").last_log_index;
    cluster.kill(lagging);

    let client =
        Arc::new(cluster.client_of(
            cluster.nodes.iter().filter(|node| node.id != lagging).map(|node| node.address.clone()).collect(),
        ));
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let client = client.clone();
            tokio::spawn(async move {
                for n in 0..WRITES / WRITERS {
                    let create = CreateBead { title: format!("w{writer}-{n}"), ..Default::default() };
                    client.execute(Command::Create(create)).await.expect("create");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // The leader purges once no replication has the range in flight; a trickle of writes gives
    // it the occasions to try.
    let leader_status = wait_for("the leader to purge past the lagging node's log", || async {
        let create = CreateBead { title: "trickle".into(), ..Default::default() };
        client.execute(Command::Create(create)).await.ok()?;
        let status = client.status(false).await.ok()?;
        let leader = status.nodes.into_iter().find(|node| node.id == status.leader_id)?;
        (leader.purged_index > lagging_log_end).then_some(leader)
    })
    .await;
    assert!(leader_status.snapshot_index > lagging_log_end);
    let expected_beads = leader_status.bead_count;

    cluster.restart(lagging);
    cluster.wait_for_convergence(3).await;
    let probe = cluster.client();
    let lagging_status = wait_for("the lagging node's status", || async {
        let status = probe.status(false).await.ok()?;
        status.nodes.into_iter().find(|node| node.id == lagging && node.state != "unreachable")
    })
    .await;
    assert!(lagging_status.snapshot_index > lagging_log_end, "the lagging node holds a snapshot: {lagging_status:?}");
    assert!(lagging_status.bead_count >= expected_beads, "{lagging_status:?}");
}
