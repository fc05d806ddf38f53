//! TLS on real node processes: clients over TLS and plain ones refused with a hint, peers that
//! must show a certificate naming the member they speak for, required client certificates, and
//! a certificate rotation under load that fails no request; and a request that would grow past
//! the decoding budget refused unread.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use api::client::{Client, ClientConfig};
use api::command::{Command, CreateBead, ListFilter, Query};
use api::commands::list::List;
use api::outcome::Outcome;
use api::proto::RaftPayload;
use node::peer::network::PeerIdentity;
use tests::{Cluster, strand_binary, wait_for};

fn create(title: &str) -> Command {
    Command::Create(CreateBead { title: title.into(), ..Default::default() })
}

/// A Raft client of node `to`'s peer listener over TLS, showing node `shown`'s certificate (or
/// the client certificate when `None`), whose calls claim to come from `claimed`.
async fn peer_client(cluster: &Cluster, to: u64, shown: Option<u64>, claimed: u64) -> node::peer::network::PeerRpc {
    dial_peer(cluster, to, to, shown, claimed).await
}

/// [`peer_client`], dialling node `to`'s peer listener but expecting its certificate to name
/// node `expected`.
async fn dial_peer(
    cluster: &Cluster,
    to: u64,
    expected: u64,
    shown: Option<u64>,
    claimed: u64,
) -> node::peer::network::PeerRpc {
    let tls = cluster.tls().unwrap();
    let (cert, key) = match shown {
        Some(id) => (format!("node-{id}.pem"), format!("node-{id}.key")),
        None => ("client.pem".to_string(), "client.key".to_string()),
    };
    let config =
        api::tls::ClientTls { ca: tls.dir.join("ca.pem"), identity: Some((tls.dir.join(cert), tls.dir.join(key))) }
            .config()
            .unwrap();
    let endpoint =
        tonic::transport::Endpoint::from_shared(format!("http://{}", cluster.nodes[(to - 1) as usize].peer_address))
            .unwrap();
    let channel = api::tls::channel(
        endpoint,
        move || config.clone().into(),
        Some(api::tls::node_name(expected)),
        Duration::from_secs(5),
    );
    node::peer::network::peer_rpc(channel, PeerIdentity::fixed(cluster.cluster_id().await, claimed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_serves_tls_clients_replicates_over_mutual_tls_and_refuses_plain_clients() {
    let cluster = Cluster::start_tls(3, false);
    cluster.wait_for_leader().await;
    let tls = cluster.tls().unwrap();
    let output = std::process::Command::new(strand_binary())
        .args(["--endpoints", &cluster.endpoints().join(","), "--json", "create", "over tls"])
        .arg("--cacert")
        .arg(tls.dir.join("ca.pem"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let plain = std::process::Command::new(strand_binary())
        .args(["--endpoints", &cluster.nodes[0].address, "--timeout", "3s", "ready"])
        .env_remove("STRAND_CACERT")
        .env_remove("STRAND_CONFIG")
        .output()
        .unwrap();
    assert!(!plain.status.success());
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(stderr.contains("pass --cacert"), "a plain client is told what to do: {stderr}");
    // Every node applied the write: the peers replicate over mutual TLS.
    cluster.wait_for_convergence(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_a_certificate_for_another_node_id_is_refused() {
    let cluster = Cluster::start_tls(3, false);
    let leader = cluster.wait_for_leader().await;
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let other = (1..=3).find(|id| *id != leader && *id != follower).unwrap();
    let vote = openraft::raft::VoteRequest::<node::peer::network::TypeConfig>::new(
        node::peer::network::Vote::new(1_000, leader),
        None,
    );
    let payload: RaftPayload = node::peer::network::encode(&vote);
    // Node `other`'s valid certificate, speaking for the leader: refused, naming both.
    let mut posing = peer_client(&cluster, follower, Some(other), leader).await;
    let refused = posing.vote(payload.clone()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains(&format!("strand-node-{leader}")), "{refused:?}");
    // The client certificate names no node: refused in the handshake, and the node logs it.
    let mut client_posing = peer_client(&cluster, follower, None, leader).await;
    client_posing.vote(payload).await.unwrap_err();
    wait_for("the follower to log the refused handshake", || async {
        cluster.log(follower).contains("a TLS handshake on the peer listener failed").then_some(())
    })
    .await;
    // The same connection shape in its own name is served.
    let mut honest = peer_client(&cluster, follower, Some(other), other).await;
    honest.get_node_status(api::proto::StatusRequest { include_digest: false }).await.unwrap();
    // A peer dialled must be the member meant: node `other`'s listener, dialled as `follower`.
    let mut misdialled = dial_peer(&cluster, other, follower, Some(leader), leader).await;
    let failed = misdialled.get_node_status(api::proto::StatusRequest { include_digest: false }).await.unwrap_err();
    assert!(failed.to_string().contains("certificate"), "the dialler refuses a certificate for another node: {failed}");
    // And the cluster kept its leader.
    let status = cluster.client().status(false).await.unwrap();
    assert_eq!(status.leader_id, leader);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_when_the_client_listener_asks_for_them() {
    let cluster = Cluster::start_tls(3, true);
    cluster.wait_for_leader().await;
    cluster.client().execute(create("with a client certificate")).await.unwrap();
    let mut config = ClientConfig::new(cluster.endpoints());
    config.tls = Some(api::tls::ClientTls { ca: cluster.tls().unwrap().dir.join("ca.pem"), identity: None });
    config.deadline = Duration::from_secs(3);
    let error = Client::new(config).unwrap().query(Query::from(List(ListFilter::default()))).await.unwrap_err();
    assert!(error.to_string().contains("--cert and --key"), "{error}");
    // A TLS verification failure is final: the client says so at once instead of retrying until
    // its deadline (which would end in `Unavailable`, "no node ... could serve the request").
    assert!(matches!(error, api::client::ClientError::Failed(_)), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_trust_the_nodes_certificates_fails_at_once_saying_why() {
    let cluster = Cluster::start_tls(1, false);
    cluster.wait_for_leader().await;
    let other = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(strand_binary())
        .args(["certs", "init", "--nodes", "1", "--dir"])
        .arg(other.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let output = std::process::Command::new(strand_binary())
        .args(["--endpoints", &cluster.endpoints().join(","), "--timeout", "60s", "ready"])
        .arg("--cacert")
        .arg(other.path().join("ca.pem"))
        .env_remove("STRAND_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("TLS with") && stderr.contains("invalid peer certificate"), "{stderr}");
    assert!(stderr.contains("check that --cacert is the CA"), "{stderr}");
    assert!(!stderr.contains("could serve the request within"), "it did not wait out its deadline: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_under_load_fails_no_request() {
    let cluster = Cluster::start_tls(3, false);
    cluster.wait_for_leader().await;
    let tls = cluster.tls().unwrap().dir.clone();
    let old_cert = std::fs::read_to_string(tls.join("node-1.pem")).unwrap();
    let (stop, done, failed) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut writers = Vec::new();
    for writer in 0..2 {
        let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
        // One writer keeps its connections; the other opens new ones (a new client) every write,
        // so it handshakes with whatever certificates the nodes hold at that moment.
        let endpoints = cluster.endpoints();
        // The client's own files, copied aside: the rotation rewrites the directory's files one
        // by one, and this test is about the nodes, not about a client reading a half-rotated pair.
        let own = tls.join(format!("writer-{writer}"));
        std::fs::create_dir_all(&own).unwrap();
        for name in ["ca.pem", "client.pem", "client.key"] {
            std::fs::copy(tls.join(name), own.join(name)).unwrap();
        }
        let client_tls = Some(api::tls::ClientTls {
            ca: own.join("ca.pem"),
            identity: Some((own.join("client.pem"), own.join("client.key"))),
        });
        let kept = cluster.client();
        writers.push(tokio::spawn(async move {
            let mut number = 0;
            while !stop.load(Ordering::Relaxed) {
                let command = create(&format!("writer {writer} write {number}"));
                let result = if writer == 0 {
                    kept.execute(command).await
                } else {
                    let mut config = ClientConfig::new(endpoints.clone());
                    config.tls = client_tls.clone();
                    Client::new(config).unwrap().execute(command).await
                };
                match result {
                    Ok(Outcome::Bead(_)) => done.fetch_add(1, Ordering::Relaxed),
                    other => {
                        eprintln!("writer {writer}: {other:?}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                number += 1;
            }
        }));
    }
    wait_for("writes before the rotation", || async { (done.load(Ordering::Relaxed) >= 20).then_some(()) }).await;
    let rotated = std::process::Command::new(strand_binary())
        .args(["certs", "init", "--nodes", "3", "--force", "--dir"])
        .arg(&tls)
        .arg("--ca-dir")
        .arg(&tls)
        .output()
        .unwrap();
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    assert_ne!(std::fs::read_to_string(tls.join("node-1.pem")).unwrap(), old_cert, "new node certificates");
    wait_for("every node to reload its certificates", || async {
        (1..=3).all(|id| cluster.log(id).contains("TLS certificates reloaded")).then_some(())
    })
    .await;
    let after = done.load(Ordering::Relaxed);
    wait_for("writes after the rotation", || async { (done.load(Ordering::Relaxed) >= after + 20).then_some(()) })
        .await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    assert_eq!(failed.load(Ordering::Relaxed), 0, "no request failed across the rotation");
    // A new connection is served the new certificate.
    assert_eq!(
        served_certificate(&cluster, 1, &tls).await,
        pem_der(&std::fs::read_to_string(tls.join("node-1.pem")).unwrap())
    );
}

/// The DER of the first certificate of a PEM text.
fn pem_der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
}

/// The certificate node `id` serves a new connection on its client listener.
async fn served_certificate(cluster: &Cluster, id: u64, tls: &std::path::Path) -> Vec<u8> {
    let config = api::tls::ClientTls { ca: tls.join("ca.pem"), identity: None }.config().unwrap();
    let tcp = tokio::net::TcpStream::connect(&cluster.nodes[(id - 1) as usize].address).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.unwrap();
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_would_grow_past_the_decoding_budget_is_refused_unread() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let address = format!("http://{}", cluster.nodes[0].address);
    let mut beads = api::proto::beads_client::BeadsClient::connect(address).await.unwrap();
    // 40,000 empty beads: 80 KB on the wire, far more decoded than the budget allows.
    let bead_size = api::decode_budget::Schema::get().message(".strand.v1.Bead").unwrap().size as usize;
    let count = 40_000;
    assert!(count * bead_size > api::limits::DECODED_REQUEST_BYTES_MAX, "the request is over the budget");
    let request = api::proto::ImportRequest { beads: vec![api::proto::Bead::default(); count], ..Default::default() };
    let status = beads.import(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("send them in several requests"), "{}", status.message());
    // The node goes on serving, and nothing was imported.
    let client = cluster.client();
    client.execute(create("after")).await.unwrap();
    let filter = ListFilter { all: true, limit: 0, ..Default::default() };
    let Outcome::Beads(listed) = client.query(Query::from(List(filter))).await.unwrap() else { panic!("list") };
    assert_eq!(listed.iter().map(|bead| bead.title.as_str()).collect::<Vec<_>>(), ["after"]);
}

/// `certs node` issues one node's certificate under the cluster's CA, leaving the others: node 3
/// takes it over its old one and goes on replicating over mutual TLS, and serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_issued_for_one_node_under_the_existing_ca_is_accepted_by_its_peers() {
    let cluster = Cluster::start_tls(3, false);
    cluster.wait_for_leader().await;
    let tls = cluster.tls().unwrap().dir.clone();
    let before: Vec<String> =
        (1..=2).map(|id| std::fs::read_to_string(tls.join(format!("node-{id}.pem"))).unwrap()).collect();
    let issued = cluster.dir().join("issued");
    let run = |args: &[&str]| std::process::Command::new(strand_binary()).args(args).output().unwrap();
    let (ca_dir, dir) = (tls.to_str().unwrap(), issued.to_str().unwrap());
    let made = run(&["--json", "certs", "node", "--id", "3", "--ca-dir", ca_dir, "--dir", dir]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&made.stdout).unwrap();
    assert_eq!(listed["files"].as_array().unwrap().len(), 3, "ca.pem, node-3.pem, node-3.key: {listed}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(issued.join("node-3.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key is readable by its owner only");
    }
    let again = run(&["certs", "node", "--id", "3", "--ca-dir", ca_dir, "--dir", dir]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing was written"), "{again:?}");
    let missing = run(&["certs", "node", "--id", "3", "--ca-dir", dir, "--dir", dir]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("ca.key"), "{missing:?}");

    for name in ["node-3.pem", "node-3.key"] {
        std::fs::copy(issued.join(name), tls.join(name)).unwrap();
    }
    wait_for("node 3 to reload its certificate", || async {
        cluster.log(3).contains("TLS certificates reloaded").then_some(())
    })
    .await;
    let (_, digest) = cluster.wait_for_convergence(3).await;
    cluster.client().execute(create("after node 3's new certificate")).await.unwrap();
    assert_ne!(cluster.wait_for_convergence(3).await.1, digest, "the write reached every node");
    assert_eq!(
        served_certificate(&cluster, 3, &tls).await,
        pem_der(&std::fs::read_to_string(issued.join("node-3.pem")).unwrap())
    );
    for (id, pem) in (1..=2).zip(before) {
        assert_eq!(std::fs::read_to_string(tls.join(format!("node-{id}.pem"))).unwrap(), pem, "node {id} untouched");
    }
}
