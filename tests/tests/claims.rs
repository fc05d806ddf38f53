//! (a) 64 concurrent clients race to claim 500 beads through all three nodes: every bead is
//! claimed exactly once, and every client's view agrees.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::command::{Command, CreateBead, ListFilter, Query};
use api::commands::list::List;
use api::model::{Actor, BeadId, Status};
use api::outcome::Outcome;
use tests::Cluster;

const CLIENTS: usize = 64;
const BEADS: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_through_all_nodes_each_bead_claimed_once() {
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let creator = cluster.client();
    let mut ids = Vec::with_capacity(BEADS);
    for n in 0..BEADS {
        let create =
            CreateBead { title: format!("work {n}"), labels: ["race".to_string()].into(), ..Default::default() };
        match creator.execute(Command::Create(create)).await.unwrap() {
            Outcome::Bead(bead) => ids.push(bead.id),
            other => panic!("create answered {other:?}"),
        }
    }
    let ids = Arc::new(ids);
    let endpoints = cluster.endpoints();
    let mut tasks = Vec::new();
    for client_index in 0..CLIENTS {
        // Each client talks to one node, so claims for one bead arrive through all three.
        let client = cluster.client_of(vec![endpoints[client_index % endpoints.len()].clone()]);
        let ids = ids.clone();
        tasks.push(tokio::spawn(async move {
            let actor = Actor(format!("agent-{client_index}"));
            let mut won = Vec::new();
            // Every client tries every bead, starting at a different offset.
            for step in 0..BEADS {
                let bead_id = ids[(client_index * 7 + step) % BEADS].clone();
                match client
                    .execute(Command::Claim(api::command::Claim {
                        id: bead_id.clone(),
                        actor: actor.clone(),
                        lease_ms: None,
                    }))
                    .await
                {
                    Ok(Outcome::Bead(bead)) if bead.assignee == actor.0 => won.push(bead_id),
                    Ok(other) => panic!("claim answered {other:?}"),
                    Err(api::client::ClientError::Refused(_)) => {}
                    Err(error) => panic!("claim failed: {error}"),
                }
            }
            (actor, won)
        }));
    }
    let mut winners: BTreeMap<BeadId, Vec<String>> = BTreeMap::new();
    for task in tasks {
        let (actor, won) = task.await.unwrap();
        for bead_id in won {
            winners.entry(bead_id).or_default().push(actor.0.clone());
        }
    }
    assert_eq!(winners.len(), BEADS, "every bead was claimed by someone");
    for (bead_id, actors) in &winners {
        assert_eq!(actors.len(), 1, "{bead_id} was won by {actors:?}");
    }
    for endpoint in cluster.endpoints() {
        let client = cluster.client_of(vec![endpoint.clone()]);
        let filter = ListFilter { labels_all: vec!["race".into()], limit: 0, ..Default::default() };
        let Outcome::Beads(beads) = client.query(Query::from(List(filter))).await.unwrap() else { panic!("list") };
        assert_eq!(beads.len(), BEADS);
        for bead in beads {
            assert_eq!(bead.status, Status::InProgress);
            assert_eq!(vec![bead.assignee.clone()], winners[&bead.id], "{endpoint} disagrees on {}", bead.id);
        }
    }
}
