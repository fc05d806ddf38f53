//! A node killed with SIGKILL restarts from its data directory with everything it acknowledged,
//! and a data directory is refused by any other node id or cluster.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use api::command::{Command, CreateBead, Query};
use api::commands::get::Get;
use api::model::BeadId;
use api::outcome::Outcome;
use tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_node_restarts_with_its_data_and_refuses_a_foreign_directory() {
    let mut cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let client = cluster.client();
    let mut created = Vec::new();
    for n in 0..20 {
        let create = CreateBead { title: format!("durable {n}"), ..Default::default() };
        let Outcome::Bead(bead) = client.execute(Command::Create(create)).await.unwrap() else { panic!("create") };
        created.push(bead.id);
    }
    cluster.kill(1);
    cluster.restart(1);
    cluster.wait_for_leader().await;
    let Outcome::Beads(beads) = cluster.client().query(Query::from(Get { ids: created.clone() })).await.unwrap() else {
        panic!("get")
    };
    assert_eq!(beads.iter().map(|bead| bead.id.clone()).collect::<Vec<BeadId>>(), created);
    cluster.kill(1);

    let data_dir = cluster.nodes[0].data_dir.clone();
    let foreign = std::process::Command::new(tests::strand_binary())
        .args(["node", "--id", "2", "--listen", &format!("127.0.0.1:{}", tests::free_port())])
        .args(["--listen-peer", &format!("127.0.0.1:{}", tests::free_port())])
        .arg("--data-dir")
        .arg(&data_dir)
        .output()
        .unwrap();
    assert_eq!(foreign.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&foreign.stderr);
    assert!(stderr.contains("belongs to node 1 of cluster \"strand\", not node 2"), "{stderr}");

    let other_cluster = std::process::Command::new(tests::strand_binary())
        .args([
            "node",
            "--id",
            "1",
            "--cluster-name",
            "other",
            "--listen",
            &format!("127.0.0.1:{}", tests::free_port()),
            "--listen-peer",
            &format!("127.0.0.1:{}", tests::free_port()),
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .output()
        .unwrap();
    assert_eq!(other_cluster.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&other_cluster.stderr).contains("use a fresh --data-dir"));
}
