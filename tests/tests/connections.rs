//! A node bounds its inbound connections, and a client leaves a frozen node quickly.
//!
//! A probe once opened more idle TCP connections to the leader than its open-files limit, and
//! every write in the cluster stopped: the followers could not connect to forward writes, and
//! the server never closed a connection that sent nothing. Here the nodes run under a small
//! open-files limit and a small connection limit; the flood is closed (the oldest pending
//! connections to make room, the rest at the handshake timeout) and writes go on through every
//! node.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use api::client::{Client, ClientConfig};
use api::command::{Command, CreateBead};
use tests::{Cluster, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The leader's connection limit, through the config file.
const CONNECTIONS_MAX: u64 = 64;
/// How long a connection may stay silent after it was accepted.
const HANDSHAKE_TIMEOUT_MS: u64 = 2_000;
/// The nodes' open-files limit (`ulimit -n`): room for the connections and the node's own
/// files, and fewer than the probe's connections.
const OPEN_FILES: u64 = 384;
/// Idle connections the probe opens to the leader and holds.
const PROBE_CONNECTIONS: usize = 400;

const _: () = assert!(OPEN_FILES >= node::connections::DESCRIPTORS_RESERVED + CONNECTIONS_MAX);
const _: () = assert!(PROBE_CONNECTIONS as u64 > OPEN_FILES);

fn config() -> String {
    format!("[connections]\nconnections_max = {CONNECTIONS_MAX}\nhandshake_timeout_ms = {HANDSHAKE_TIMEOUT_MS}\n")
}

/// Writes one bead through each node by itself (a follower forwards it to the leader).
async fn write_through_every_node(cluster: &Cluster, when: &str) {
    for node in &cluster.nodes {
        let client = cluster.client_of(vec![node.address.clone()]);
        let create = CreateBead { title: format!("{when}, through node {}", node.id), ..Default::default() };
        let written = client.execute(Command::Create(create)).await;
        written.unwrap_or_else(|error| panic!("a write through node {} {when} failed: {error}", node.id));
    }
}

/// Whether the server closed `stream` (a read sees its end or a reset).
fn closed_by_server(mut stream: &TcpStream) -> bool {
    match stream.read(&mut [0; 1]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => error.kind() != ErrorKind::WouldBlock,
    }
}

/// The leader's metrics page.
async fn metrics_page(address: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

/// The value of the sample line `name value`.
fn sample(page: &str, name: &str) -> f64 {
    let value = page.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok());
    value.unwrap_or_else(|| panic!("no {name} in\n{page}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_beyond_the_limit_are_closed_and_writes_go_on_through_every_node() {
    let cluster = Cluster::start_with(3, Some(&config()), Some(OPEN_FILES));
    let leader = cluster.wait_for_leader().await;
    let address = cluster.nodes[leader as usize - 1].address.clone();
    assert!(cluster.log(leader).contains("LimitNOFILE"), "a low open-files limit is warned about");

    // The probe: connections that never send a byte, held open from this side.
    let probes: Vec<TcpStream> = (0..PROBE_CONNECTIONS)
        .map(|_| {
            let stream = TcpStream::connect(&address).unwrap();
            stream.set_nonblocking(true).unwrap();
            stream
        })
        .collect();

    write_through_every_node(&cluster, "during the flood").await;
    wait_for("the leader to close every idle connection", || async {
        probes.iter().all(closed_by_server).then_some(())
    })
    .await;
    write_through_every_node(&cluster, "after the flood").await;

    let page = metrics_page(&address).await;
    let evicted = sample(&page, "strand_connections_closed_total{listener=\"client\",reason=\"evicted\"}");
    let timed_out = sample(&page, "strand_connections_closed_total{listener=\"client\",reason=\"handshake_timeout\"}");
    assert!(evicted + timed_out >= PROBE_CONNECTIONS as f64, "every probe was closed by a limit:\n{page}");
    assert!(timed_out >= 1.0, "the last pending probes were closed at the handshake timeout:\n{page}");
    assert!(sample(&page, "strand_connections_open{listener=\"client\"}") <= CONNECTIONS_MAX as f64, "{page}");
    // The flood reached the client listener only: the peer listener closed nothing.
    for reason in ["refused", "evicted", "handshake_timeout"] {
        let name = format!("strand_connections_closed_total{{listener=\"peer\",reason=\"{reason}\"}}");
        assert_eq!(sample(&page, &name), 0.0, "{page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_first_endpoint_is_frozen_writes_through_the_next() {
    let cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let frozen = cluster.nodes.iter().find(|node| node.id != leader).unwrap();
    let others = cluster.nodes.iter().filter(|node| node.id != frozen.id).map(|node| node.address.clone());
    let endpoints: Vec<String> = std::iter::once(frozen.address.clone()).chain(others).collect();

    // A frozen process: its kernel still accepts TCP connections, but nothing answers on them.
    cluster.signal(frozen.id, "STOP");
    // An attempt may take the whole deadline, so only leaving the silent node early lets the
    // write through: waiting out the attempt on it would fail the call.
    let mut config = ClientConfig::new(endpoints);
    config.deadline = Duration::from_secs(20);
    config.attempt_timeout = config.deadline;
    let client = Client::new(config).unwrap();
    let started = Instant::now();
    let create = CreateBead { title: "past a frozen node".into(), ..Default::default() };
    let written = client.execute(Command::Create(create)).await;
    let elapsed = started.elapsed();
    cluster.signal(frozen.id, "CONT");
    written.unwrap_or_else(|error| panic!("the write failed after {elapsed:?}: {error}"));
    eprintln!("the write past the frozen node took {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "left the frozen node in about the failover timeout: {elapsed:?}");
}
