//! End-to-end orchestration against 3 real `strand node` processes: pool agents hammer
//! `hook --claim` and no bead is handed out twice; a `watch` stream survives a leader kill and
//! resumes with no event missed and none twice.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use api::client::ClientConfig;
use api::command::{Command, CreateBead};
use api::model::{Actor, BeadId, Namespace};
use api::outcome::Outcome;
use futures::StreamExt;
use tests::{Cluster, wait_for};

const POOL_AGENTS: usize = 12;
const POOL_BEADS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pool_agents_hammering_hook_claim_never_share_a_bead() {
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let setup = cluster.client();
    for n in 0..POOL_BEADS {
        // Half routed by label, half by metadata, as older and newer orchestrators do.
        let create = if n % 2 == 0 {
            CreateBead { title: format!("w{n}"), labels: ["pool:web".to_string()].into(), ..Default::default() }
        } else {
            let metadata = [("gc.routed_to".to_string(), "web".to_string())].into();
            CreateBead { title: format!("w{n}"), metadata, ..Default::default() }
        };
        setup.execute(Command::Create(create)).await.unwrap();
    }
    let endpoints = cluster.endpoints();
    let mut agents = Vec::new();
    for agent in 0..POOL_AGENTS {
        // Each agent talks to a different node first, so claims race across the cluster.
        let mut rotated = endpoints.clone();
        rotated.rotate_left(agent % endpoints.len());
        let client = cluster.client_of(rotated);
        agents.push(tokio::spawn(async move {
            let actor = Actor(format!("agent-{agent}"));
            let mut got = Vec::new();
            loop {
                let command = Command::HookClaim(api::command::HookClaim {
                    agent: actor.clone(),
                    pool: Some("web".into()),
                    lease_ms: None,
                });
                let Outcome::Beads(beads) = client.execute(command).await.unwrap() else { panic!("hook answer") };
                let Some(bead) = beads.into_iter().next() else { break };
                assert_eq!(bead.assignee, actor.0, "hook --claim answers the agent's own claim");
                client
                    .execute(Command::Close(api::command::Close { ids: vec![bead.id.clone()], reason: None }))
                    .await
                    .unwrap();
                got.push(bead.id);
            }
            got
        }));
    }
    let mut handed_out: Vec<BeadId> = Vec::new();
    for agent in agents {
        handed_out.extend(agent.await.unwrap());
    }
    let distinct: BTreeSet<&BeadId> = handed_out.iter().collect();
    assert_eq!(distinct.len(), handed_out.len(), "a bead was handed to two agents");
    assert_eq!(handed_out.len(), POOL_BEADS, "every routed bead was handed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_survives_a_leader_kill_with_no_gap_and_no_duplicate() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let writer = Arc::new(cluster.client());
    writer.execute(Command::Create(CreateBead { title: "first".into(), ..Default::default() })).await.unwrap();

    // The watcher prefers the leader, so the kill cuts its stream.
    let leader_address = cluster.nodes[(leader - 1) as usize].address.clone();
    let mut endpoints = vec![leader_address];
    endpoints.extend(cluster.nodes.iter().filter(|node| node.id != leader).map(|node| node.address.clone()));
    let mut config = ClientConfig::new(endpoints);
    config.namespace = Namespace::default_namespace();
    config.deadline = Duration::from_secs(30);
    let watcher = api::client::Client::new(config).unwrap();
    let seen = Arc::new(tokio::sync::Mutex::new(Vec::<u64>::new()));
    let collector = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let stream = watcher.watch(0, Vec::new());
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                seen.lock().await.push(event.unwrap().seq);
            }
        })
    };
    let written = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let write_some = |count: usize| {
        let (writer, written) = (writer.clone(), written.clone());
        async move {
            for n in 0..count {
                let create = CreateBead { title: format!("e{n}"), ..Default::default() };
                writer.execute(Command::Create(create)).await.unwrap();
                written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    };
    write_some(50).await;
    wait_for("the watcher to see the first events", || async { (seen.lock().await.len() >= 51).then_some(()) }).await;
    let background = tokio::spawn(write_some(100));
    cluster.kill(leader);
    background.await.unwrap();
    write_some(20).await;
    let total = written.load(std::sync::atomic::Ordering::SeqCst);
    wait_for("the watcher to catch up after the failover", || async {
        (seen.lock().await.len() as u64 >= total).then_some(())
    })
    .await;
    collector.abort();
    let seen = seen.lock().await.clone();
    let expected: Vec<u64> = (1..=total).collect();
    assert_eq!(seen, expected, "every event exactly once, in order, across the leader kill");
}
