//! Where a run's clients send their calls, and the clock they read: the simulated cluster over
//! turmoil's network and simulated time, or a real cluster over TCP, TLS and a bearer token, on
//! the wall clock since the run began (the container run, [`crate::containers`]).
//!
//! The agents ([`crate::workload`]), the healed-phase reader ([`crate::healed`]) and the history
//! ([`crate::history`]) take a [`Target`], so both runs drive and record with the same code and
//! the checkers judge both histories alike.
//!
//! Invariant: a simulated target never reads the wall clock, so a seed's run stays deterministic.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::client::{Client, ClientConfig};
use api::proto::StatusResponse;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// How long one client call may take, retries included, against the simulated cluster
/// (simulated time).
pub const CALL_DEADLINE_MS: u64 = 3_000;
/// How long one attempt of a call may take (simulated time).
pub const ATTEMPT_TIMEOUT_MS: u64 = 800;
/// How long one client call may take against a real cluster: a node paused or cut off is left
/// after the failover timeout, and the rest of the deadline goes to the others.
pub const REAL_CALL_DEADLINE_MS: u64 = 5_000;
/// How long one attempt may take against a real cluster.
pub const REAL_ATTEMPT_TIMEOUT_MS: u64 = 2_000;

/// A real cluster's address book and credentials.
pub struct RealCluster {
    /// Each node's client endpoint as the clients reach it (`host:port`), by node id; a node
    /// that joins during the run is added.
    pub endpoints: Mutex<BTreeMap<u64, String>>,
    /// The nodes' CA and the client's certificate.
    pub tls: api::tls::ClientTls,
    /// The bearer token every call carries.
    pub token: Option<String>,
    /// When the run began: the history's and the schedules' time zero.
    pub started: Instant,
    /// A client of each node alone, for its status.
    pub status_clients: Mutex<BTreeMap<u64, Arc<Client>>>,
}

impl RealCluster {
    /// A real cluster whose nodes' client endpoints are `endpoints`, beginning now.
    pub fn new(endpoints: BTreeMap<u64, String>, tls: api::tls::ClientTls, token: Option<String>) -> RealCluster {
        RealCluster {
            endpoints: Mutex::new(endpoints),
            tls,
            token,
            started: Instant::now(),
            status_clients: Mutex::new(BTreeMap::new()),
        }
    }
}

/// Where calls go.
#[derive(Clone)]
pub enum Target {
    /// The simulated cluster, in simulated time.
    Simulated,
    /// A real cluster, on the wall clock.
    Real(Arc<RealCluster>),
}

impl Target {
    /// Time since the run began: simulated time, or the wall clock since [`RealCluster::started`].
    pub fn now(&self) -> Duration {
        match self {
            Target::Simulated => turmoil::sim_elapsed().unwrap_or_default(),
            Target::Real(real) => real.started.elapsed(),
        }
    }

    /// When the run began, on a real cluster.
    pub fn started(&self) -> Option<Instant> {
        match self {
            Target::Simulated => None,
            Target::Real(real) => Some(real.started),
        }
    }

    /// A client of the nodes `node_ids`, in an order drawn from `rng`, whose proposals carry
    /// `actor` (empty: none), with a client id drawn from `rng`.
    pub fn client_as(&self, node_ids: &[u64], rng: &mut StdRng, actor: &str) -> Result<Client, String> {
        let mut ids = node_ids.to_vec();
        ids.shuffle(rng);
        let client_id = rng.random::<u64>() | 1;
        self.client_of(&ids, client_id, actor)
    }

    /// A client of the nodes `ids`, tried in that order.
    fn client_of(&self, ids: &[u64], client_id: u64, actor: &str) -> Result<Client, String> {
        match self {
            Target::Simulated => {
                let endpoints: Vec<String> = ids.iter().map(|id| crate::cluster::address(*id)).collect();
                let channels =
                    endpoints.iter().map(|address| crate::net::channel(address)).collect::<Result<Vec<_>, _>>()?;
                let mut config = ClientConfig::new(endpoints);
                config.client_id = Some(client_id);
                config.deadline = Duration::from_millis(CALL_DEADLINE_MS);
                config.attempt_timeout = Duration::from_millis(ATTEMPT_TIMEOUT_MS);
                config.actor = actor.to_string();
                Client::with_channels(config, channels).map_err(|error| error.to_string())
            }
            Target::Real(real) => {
                let known = real.endpoints.lock().expect("endpoints lock");
                let endpoints = ids
                    .iter()
                    .map(|id| known.get(id).cloned().ok_or(format!("node {id} has no known client endpoint")))
                    .collect::<Result<Vec<_>, _>>()?;
                drop(known);
                let mut config = ClientConfig::new(endpoints);
                config.client_id = Some(client_id);
                config.deadline = Duration::from_millis(REAL_CALL_DEADLINE_MS);
                config.attempt_timeout = Duration::from_millis(REAL_ATTEMPT_TIMEOUT_MS);
                config.actor = actor.to_string();
                config.tls = Some(real.tls.clone());
                config.token = real.token.clone();
                Client::new(config).map_err(|error| error.to_string())
            }
        }
    }

    /// Node `id`'s status, as it answers it itself within `timeout`.
    pub async fn status(&self, id: u64, include_digest: bool, timeout: Duration) -> Result<StatusResponse, String> {
        let asked = async {
            match self {
                Target::Simulated => {
                    let channel = crate::net::channel(&crate::cluster::address(id))?;
                    let mut client = api::proto::cluster_client::ClusterClient::new(channel);
                    let request = tonic::Request::new(api::proto::StatusRequest { include_digest });
                    let answer =
                        client.status(request).await.map_err(|status| format!("node {id}: {}", status.message()))?;
                    Ok(answer.into_inner())
                }
                Target::Real(real) => {
                    // One endpoint: the answer is this node's own.
                    let cached = real.status_clients.lock().expect("status clients lock").get(&id).cloned();
                    let client = match cached {
                        Some(client) => client,
                        None => {
                            let client = Arc::new(self.client_of(&[id], 1, "")?);
                            real.status_clients.lock().expect("status clients lock").insert(id, client.clone());
                            client
                        }
                    };
                    client.status(include_digest).await.map_err(|error| format!("node {id}: {error}"))
                }
            }
        };
        tokio::time::timeout(timeout, asked)
            .await
            .map_err(|_| format!("node {id} did not answer its status in time"))?
    }
}
