//! A node's configuration: identity, addresses, peers, event retention, the limits on inbound
//! connections, the Raft timing and snapshot policy, and the leader's controller duties.
//!
//! A node has two listeners, as etcd has 2379 and 2380: the client listener (`listen_client`,
//! clients' services, health and metrics) and the peer listener (`listen_peer`, Raft traffic
//! between members only). `peers` names the other members' peer addresses.
//!
//! It is read from a TOML file (`--config`), then overridden by command-line flags. Every setting
//! that matters for safety is spelled out in [`RaftSettings::to_openraft`], never left to a
//! library default.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use api::go_duration::parse_go_duration;
use serde::{Deserialize, Serialize};

/// Which listener a connection arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    /// Clients' services, health and metrics (`listen_client`).
    Client,
    /// Raft between members (`listen_peer`).
    Peer,
}

impl Listener {
    /// Both listeners; a listener's index here is its discriminant.
    pub const ALL: [Listener; 2] = [Listener::Client, Listener::Peer];

    /// The listener as the metrics' `listener` label says it.
    pub fn label(self) -> &'static str {
        match self {
            Listener::Client => "client",
            Listener::Peer => "peer",
        }
    }
}

/// The default client port.
pub const DEFAULT_PORT: u16 = 7400;
/// The default peer port.
pub const DEFAULT_PEER_PORT: u16 = 7500;
/// How long a joining or rejoining node asks the members by default before it gives up.
pub const JOIN_TIMEOUT_MS_DEFAULT: u64 = 60_000;

/// Raft timing, snapshot and purge policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RaftSettings {
    /// How often the leader sends heartbeats.
    pub heartbeat_interval_ms: u64,
    /// Shortest election timeout. A follower that has heard nothing from the leader for
    /// `election_timeout_ms_max` (the leader's lease, during which it refuses to vote) plus its
    /// own timeout, drawn between the two bounds, asks for votes. So a leader that stalls is
    /// deposed after `max + min` of silence at the earliest, and a killed leader is replaced
    /// after about `max + (min + max) / 2`.
    pub election_timeout_ms_min: u64,
    /// Longest election timeout, and the leader's lease (see `election_timeout_ms_min`).
    pub election_timeout_ms_max: u64,
    /// Build a snapshot after this many log entries since the last one.
    pub snapshot_logs_since_last: u64,
    /// Entries kept in the log behind the snapshot. Kept generous: openraft 0.10 can race a
    /// purge against a queued apply when this is small (openraft issue 2116).
    pub max_in_snapshot_log_to_keep: u64,
    /// Entries deleted per purge.
    pub purge_batch_size: u64,
    /// How long sending one whole snapshot may take.
    pub install_snapshot_timeout_ms: u64,
    /// Most entries per append RPC.
    pub max_payload_entries: u64,
    /// Timeout of a vote, forward, read-index or status RPC.
    pub rpc_timeout_ms: u64,
    /// Send new entries to followers as soon as they are written locally, before the local
    /// fsync finishes, so the leader's and the followers' fsyncs overlap. Safe: an entry still
    /// commits only once a majority has it on disk.
    pub replicate_before_local_sync: bool,
    /// Largest snapshot this node accepts from another, in bytes; a larger one is refused as its
    /// bytes arrive, and its file deleted.
    pub snapshot_receive_bytes_max: u64,
    /// Longest a received snapshot may take to arrive; a slower one is refused and its file
    /// deleted.
    pub snapshot_receive_timeout_ms: u64,
    /// How long a learner marked for auto-promotion must stay caught up (reachable, within
    /// `leader::membership::PROMOTE_LAG_ENTRIES_MAX` entries) before the leader promotes it to a
    /// voter: Consul autopilot's server stabilization time.
    pub promote_after_ms: u64,
}

impl Default for RaftSettings {
    fn default() -> Self {
        RaftSettings {
            // A killed leader is replaced after about 1 s (etcd's defaults: about 1.1 to 1.5 s,
            // scripts/failover-vs-etcd); a leader is deposed only after 0.9 s of silence.
            heartbeat_interval_ms: 100,
            election_timeout_ms_min: 300,
            election_timeout_ms_max: 600,
            snapshot_logs_since_last: 20_000,
            max_in_snapshot_log_to_keep: 10_000,
            purge_batch_size: 1024,
            install_snapshot_timeout_ms: 120_000,
            max_payload_entries: 512,
            rpc_timeout_ms: 2_000,
            replicate_before_local_sync: false,
            snapshot_receive_bytes_max: 8 * 1024 * 1024 * 1024,
            snapshot_receive_timeout_ms: 180_000,
            promote_after_ms: 10_000,
        }
    }
}

/// Why a configuration cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// openraft refused the timing.
    #[error(
        "invalid raft settings: {0}; check heartbeat_interval_ms < election_timeout_ms_min < election_timeout_ms_max"
    )]
    Raft(#[from] openraft::ConfigError),
    /// A setting is out of range.
    #[error("{0}")]
    Invalid(String),
}

impl RaftSettings {
    /// The openraft configuration, every safety-relevant field set explicitly.
    pub fn to_openraft(&self, cluster_name: &str) -> Result<openraft::Config, ConfigError> {
        if self.snapshot_receive_bytes_max == 0 || self.snapshot_receive_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "snapshot_receive_bytes_max and snapshot_receive_timeout_ms must be above 0; a node that accepts no snapshot can never catch up from one".into(),
            ));
        }
        if self.max_in_snapshot_log_to_keep < 1000 {
            return Err(ConfigError::Invalid(
                "max_in_snapshot_log_to_keep must be at least 1000 (openraft issue 2116: a small value lets a purge race a queued apply)".into(),
            ));
        }
        let config = openraft::Config {
            cluster_name: cluster_name.to_string(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_ms_min,
            election_timeout_max: self.election_timeout_ms_max,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            max_payload_entries: self.max_payload_entries,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_logs_since_last),
            max_in_snapshot_log_to_keep: self.max_in_snapshot_log_to_keep,
            purge_batch_size: self.purge_batch_size,
            enable_tick: true,
            enable_heartbeat: true,
            enable_elect: true,
            enable_pre_vote: Some(true),
            // Off: a restarted leader must win a new term and commit an entry in it before it
            // serves anything. Applied state and the committed index are written unsynced (the
            // synced log is the source of truth), so after a crash a restored leader could take
            // a regressed commit index as its read index and serve a stale linearizable read.
            // The simulator found exactly that (seed 103; simulation/tests/seeds.rs).
            enable_leader_restore: Some(false),
            // On: a member whose log went back (its data was lost and it came back empty, or was
            // restored from an older copy) is replicated to from the start. Off, the leader keeps
            // its old matching index for that member and retries the same conflict forever
            // (openraft guards it only with a debug assertion). Safe because such a member must
            // not vote until it has caught up, which `--rejoin` ensures (`crate::rejoin`): the
            // argument is in ARCHITECTURE.md, "A member whose log went back".
            allow_log_reversion: Some(true),
            broadcast_submitted_on_append: Some(self.replicate_before_local_sync),
            ..Default::default()
        };
        Ok(config.validate()?)
    }
}

/// Limits on the node's inbound connections, clients and peers alike (the `[connections]` table);
/// [`crate::connections`] enforces them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// Most inbound connections open at once. When it is reached, a new connection closes the
    /// oldest pending one to make room, or is closed itself when none is pending. `strand node`
    /// lowers it when the open-files limit leaves too little room beside the files the node
    /// keeps for itself ([`crate::connections::DESCRIPTORS_RESERVED`]).
    pub connections_max: u64,
    /// Most pending connections (accepted, handshake not yet sent) at once, and at most half of
    /// `connections_max`; a new one beyond it closes the oldest pending one.
    pub pending_max: u64,
    /// A connection that has not sent its handshake within this time is closed.
    pub handshake_timeout_ms: u64,
    /// A connection with no traffic either way for this long is closed (after at most twice
    /// it); gRPC clients reconnect, and live peer channels carry heartbeats or pings.
    pub idle_timeout_ms: u64,
}

/// The fewest connections a node may be limited to: its peers and a few clients.
pub const CONNECTIONS_MIN: u64 = 16;
/// The most connections a node may be configured for.
pub const CONNECTIONS_MAX: u64 = 1_000_000;
/// The shortest handshake timeout: a client on a slow link must get its first bytes through.
pub const HANDSHAKE_TIMEOUT_MS_MIN: u64 = 100;

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            connections_max: 1024,
            pending_max: 128,
            handshake_timeout_ms: 5_000,
            idle_timeout_ms: 300_000,
        }
    }
}

impl ConnectionLimits {
    /// The pending connections allowed at once: `pending_max`, and at most half the connections.
    pub fn pending_allowed(&self) -> u64 {
        self.pending_max.min(self.connections_max / 2).max(1)
    }

    /// Checks the limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(CONNECTIONS_MIN..=CONNECTIONS_MAX).contains(&self.connections_max) {
            return Err(ConfigError::Invalid(format!(
                "connections.connections_max = {} is out of range; use {CONNECTIONS_MIN} to {CONNECTIONS_MAX} (default {})",
                self.connections_max,
                ConnectionLimits::default().connections_max
            )));
        }
        if self.pending_max == 0 {
            return Err(ConfigError::Invalid(
                "connections.pending_max = 0 would close every new connection; use 1 or more (default 128)".into(),
            ));
        }
        if self.handshake_timeout_ms < HANDSHAKE_TIMEOUT_MS_MIN {
            return Err(ConfigError::Invalid(format!(
                "connections.handshake_timeout_ms = {} is too short for a client to connect; use {HANDSHAKE_TIMEOUT_MS_MIN} or more (default {})",
                self.handshake_timeout_ms,
                ConnectionLimits::default().handshake_timeout_ms
            )));
        }
        if self.idle_timeout_ms < self.handshake_timeout_ms {
            return Err(ConfigError::Invalid(format!(
                "connections.idle_timeout_ms = {} is shorter than handshake_timeout_ms = {}; raise it (default {})",
                self.idle_timeout_ms,
                self.handshake_timeout_ms,
                ConnectionLimits::default().idle_timeout_ms
            )));
        }
        Ok(())
    }
}

/// How the state is held (the `[storage]` table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSettings {
    /// The most bytes of closed beads read back from disk kept in memory. Closed beads live on
    /// disk only; this cache keeps the ones read lately (`0`: none, every read goes to RocksDB).
    pub bead_cache_bytes: u64,
}

impl Default for StorageSettings {
    fn default() -> Self {
        StorageSettings { bead_cache_bytes: raft_store::state_machine::BEAD_CACHE_BYTES_DEFAULT }
    }
}

/// The leader's controller (the `[controller]` table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControllerSettings {
    /// How often the leader looks for expired leases; a lease is expired within one interval of
    /// its due time. Every duty is looked at on this tick, so it is also their finest grain.
    pub lease_sweep_interval_ms: u64,
    /// How often closed wisps are collected (Go duration, as Gas City's `[daemon]`
    /// `wisp_gc_interval`); `0` turns wisp GC off.
    pub wisp_gc_interval: String,
    /// How long a closed wisp is kept before it is collected (Gas City's `wisp_ttl`).
    pub wisp_ttl: String,
    /// How often open convoys whose children are all closed are closed; `0` turns it off.
    pub convoy_check_interval: String,
    /// How often orders' triggers are judged; `0` turns orders off (they still run by hand).
    pub order_check_interval: String,
    /// How often the leader proposes a consistency checkpoint, at which every replica takes a
    /// digest of its state for the leader to compare; `0` turns the check off.
    pub consistency_check_interval: String,
}

/// The range `lease_sweep_interval_ms` takes.
pub const LEASE_SWEEP_INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=60_000;

impl Default for ControllerSettings {
    fn default() -> Self {
        ControllerSettings {
            lease_sweep_interval_ms: 1000,
            wisp_gc_interval: "5m".into(),
            wisp_ttl: "24h".into(),
            convoy_check_interval: "1m".into(),
            order_check_interval: "1s".into(),
            consistency_check_interval: "5m".into(),
        }
    }
}

impl ControllerSettings {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !LEASE_SWEEP_INTERVAL_MS.contains(&self.lease_sweep_interval_ms) {
            return Err(ConfigError::Invalid(format!(
                "controller.lease_sweep_interval_ms = {} is out of range; use {} to {} (default {})",
                self.lease_sweep_interval_ms,
                LEASE_SWEEP_INTERVAL_MS.start(),
                LEASE_SWEEP_INTERVAL_MS.end(),
                ControllerSettings::default().lease_sweep_interval_ms
            )));
        }
        for (key, value) in [
            ("wisp_gc_interval", &self.wisp_gc_interval),
            ("wisp_ttl", &self.wisp_ttl),
            ("convoy_check_interval", &self.convoy_check_interval),
            ("order_check_interval", &self.order_check_interval),
            ("consistency_check_interval", &self.consistency_check_interval),
        ] {
            parse_go_duration(value).map_err(|why| {
                ConfigError::Invalid(format!("controller.{key}: {why}; 0 turns the duty off where it can be"))
            })?;
        }
        if self.wisp_gc_interval().is_some() && self.wisp_ttl().is_none() {
            return Err(ConfigError::Invalid(
                "controller.wisp_ttl = 0 would collect wisps the moment they close; give a TTL (e.g. \"24h\"), or set wisp_gc_interval = \"0\" to turn wisp GC off".into(),
            ));
        }
        Ok(())
    }

    /// How often wisps are collected; `None`: off.
    pub fn wisp_gc_interval(&self) -> Option<Duration> {
        duty_interval(&self.wisp_gc_interval)
    }

    /// How long a closed wisp is kept; `None`: zero.
    pub fn wisp_ttl(&self) -> Option<Duration> {
        duty_interval(&self.wisp_ttl)
    }

    /// How often convoys are checked; `None`: off.
    pub fn convoy_check_interval(&self) -> Option<Duration> {
        duty_interval(&self.convoy_check_interval)
    }

    /// How often orders are judged; `None`: off.
    pub fn order_check_interval(&self) -> Option<Duration> {
        duty_interval(&self.order_check_interval)
    }

    /// How often the leader proposes a consistency checkpoint; `None`: off.
    pub fn consistency_check_interval(&self) -> Option<Duration> {
        duty_interval(&self.consistency_check_interval)
    }
}

/// A duty's interval (checked by [`ControllerSettings::validate`]); zero is `None`, off.
fn duty_interval(text: &str) -> Option<Duration> {
    parse_go_duration(text).ok().filter(|interval| !interval.is_zero())
}

/// TLS files (PEM). With them, the peer listener is mutual TLS and the client listener TLS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// The node's certificate, leaf first; it must name the node as `strand-node-<id>`, and the
    /// hosts clients dial.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA that signs the members' certificates; a peer must show one it signed.
    pub ca: PathBuf,
    /// When set, the client listener requires a client certificate signed by this CA.
    pub client_ca: Option<PathBuf>,
}

impl TlsSettings {
    /// Every file, for the reload watcher.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.cert.clone(), self.key.clone(), self.ca.clone()];
        files.extend(self.client_ca.clone());
        files
    }
}

/// A node's configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// This node's id, unique in the cluster, non-zero.
    pub id: u64,
    /// Address of the client listener, `host:port` (`listen` is accepted too).
    #[serde(alias = "listen")]
    pub listen_client: String,
    /// Address clients reach this node at; defaults to `listen_client` (`advertise` is accepted
    /// too).
    #[serde(alias = "advertise")]
    pub advertise_client: Option<String>,
    /// Address of the peer listener, `host:port`: Raft traffic between members, never served on
    /// the client listener.
    pub listen_peer: String,
    /// Address the other members reach this node at; defaults to `listen_peer`.
    pub advertise_peer: Option<String>,
    /// Where the node keeps its RocksDB database and snapshots.
    pub data_dir: PathBuf,
    /// The other members: id to `host:port`. Empty: a single-node cluster.
    pub peers: BTreeMap<u64, String>,
    /// The cluster's name; a data directory of another cluster is refused.
    pub cluster_name: String,
    /// The id prefix of namespaces created without one.
    pub id_prefix: String,
    /// How many events each namespace keeps; older ones are compacted. The leader stamps its
    /// value into every proposal, so every replica compacts at the same entry. At least
    /// [`api::limits::EVENT_RETENTION_MIN`].
    pub event_retention: u64,
    /// Limits on inbound connections.
    pub connections: ConnectionLimits,
    /// Raft timing and snapshot policy.
    pub raft: RaftSettings,
    /// What the leader's controller does, and how often.
    pub controller: ControllerSettings,
    /// How the state is held in memory and on disk.
    pub storage: StorageSettings,
    /// TLS on both listeners and to peers; `None`: plain TCP.
    pub tls: Option<TlsSettings>,
    /// With auth enabled, `/metrics` answers only a request with a token (any role) the node's
    /// replica knows; without auth enabled it stays open.
    pub metrics_auth: bool,
    /// Start as a member rejoining after its data was lost: on an empty data directory, the node
    /// does not vote until it has caught up with the leader (see `node::rejoin`). No effect on a
    /// directory that holds data.
    pub rejoin: bool,
    /// Peer addresses of members of a running cluster to ask to join (`--join`); on an empty
    /// data directory the node joins as a learner instead of initialising a cluster. No effect on
    /// a directory that holds data. Not together with `peers`.
    pub join: Vec<String>,
    /// How long a joining or rejoining node asks the members before it gives up (`--join-timeout`;
    /// see `node::join`).
    pub join_timeout_ms: u64,
    /// With `join`: whether the leader promotes this node to a voter once it stayed caught up
    /// (`--no-auto-promote` turns it off; it stays a learner until `strand member promote`).
    pub auto_promote: bool,
    /// The admin token a join presents when auth is on (`--token`); never read from the config
    /// file.
    #[serde(skip)]
    pub join_token: Option<String>,
    /// Start a one-voter cluster from this node's data after the quorum was lost for good
    /// (`--force-new-cluster`; see `node::force`). Never read from the config file.
    #[serde(skip)]
    pub force_new_cluster: bool,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            id: 1,
            listen_client: format!("127.0.0.1:{DEFAULT_PORT}"),
            advertise_client: None,
            listen_peer: format!("127.0.0.1:{DEFAULT_PEER_PORT}"),
            advertise_peer: None,
            data_dir: PathBuf::from("strand-data"),
            peers: BTreeMap::new(),
            cluster_name: "strand".into(),
            id_prefix: "st".into(),
            event_retention: api::limits::EVENT_RETENTION_DEFAULT,
            connections: ConnectionLimits::default(),
            controller: ControllerSettings::default(),
            storage: StorageSettings::default(),
            tls: None,
            metrics_auth: false,
            raft: RaftSettings::default(),
            rejoin: false,
            join: Vec::new(),
            join_timeout_ms: JOIN_TIMEOUT_MS_DEFAULT,
            auto_promote: true,
            join_token: None,
            force_new_cluster: false,
        }
    }
}

impl NodeConfig {
    /// The address clients reach this node at.
    pub fn advertised_client(&self) -> String {
        self.advertise_client.clone().unwrap_or_else(|| self.listen_client.clone())
    }

    /// The address the other members reach this node at.
    pub fn advertised_peer(&self) -> String {
        self.advertise_peer.clone().unwrap_or_else(|| self.listen_peer.clone())
    }

    /// Every member's peer address, this node included.
    pub fn members(&self) -> BTreeMap<u64, String> {
        let mut members = self.peers.clone();
        members.insert(self.id, self.advertised_peer());
        members
    }

    /// Checks the configuration before a node starts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.id == 0 {
            return Err(ConfigError::Invalid("node id 0 is reserved; use --id 1 or higher".into()));
        }
        if self.peers.contains_key(&self.id) && self.peers[&self.id] != self.advertised_peer() {
            return Err(ConfigError::Invalid(format!(
                "--peers gives node {} the peer address {}, but this node advertises {} (--advertise-peer, default --listen-peer)",
                self.id,
                self.peers[&self.id],
                self.advertised_peer()
            )));
        }
        if !self.join.is_empty() && !self.peers.is_empty() {
            return Err(ConfigError::Invalid(
                "both --join and --peers are given: --peers is for the first start of a static cluster, --join for a node added to a running one; give one".into(),
            ));
        }
        if self.force_new_cluster && !self.join.is_empty() {
            return Err(ConfigError::Invalid(
                "--force-new-cluster starts a cluster from this node's own data; it cannot --join another".into(),
            ));
        }
        if self.listen_client == self.listen_peer {
            return Err(ConfigError::Invalid(format!(
                "listen_client and listen_peer are both {}: the peer listener serves Raft only and must have an address of its own; set --listen-peer (default port {DEFAULT_PEER_PORT})",
                self.listen_client
            )));
        }
        api::validate::validate_prefix(&self.id_prefix).map_err(|refusal| ConfigError::Invalid(refusal.to_string()))?;
        if self.event_retention < api::limits::EVENT_RETENTION_MIN {
            return Err(ConfigError::Invalid(format!(
                "event_retention = {} is too small: a namespace must keep at least {} events so that watchers can resume; raise it (default {})",
                self.event_retention,
                api::limits::EVENT_RETENTION_MIN,
                api::limits::EVENT_RETENTION_DEFAULT
            )));
        }
        self.connections.validate()?;
        self.controller.validate()?;
        self.raft.to_openraft(&self.cluster_name)?;
        Ok(())
    }
}

/// Parses `--peers ID=ADDR,...`.
pub fn parse_peers(text: &str) -> Result<BTreeMap<u64, String>, ConfigError> {
    let mut peers = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let malformed = || {
            ConfigError::Invalid(format!(
                "--peers entry {item:?} is malformed; use ID=HOST:PORT, e.g. 2=10.0.0.2:7500 (the peer listener)"
            ))
        };
        let (id, address) = item.split_once('=').ok_or_else(malformed)?;
        let id: u64 = id.trim().parse().map_err(|_| malformed())?;
        let address = address.trim();
        let (host, port) = address.rsplit_once(':').ok_or_else(malformed)?;
        if id == 0 || host.is_empty() || port.parse::<u16>().is_err() {
            return Err(malformed());
        }
        if peers.insert(id, address.to_string()).is_some() {
            return Err(ConfigError::Invalid(format!("--peers names node {id} twice")));
        }
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_and_malformed_peers_are_refused() {
        let peers = parse_peers("1=127.0.0.1:7401, 2=127.0.0.1:7402").unwrap();
        assert_eq!(peers[&2], "127.0.0.1:7402");
        for bad in ["1", "x=127.0.0.1:1", "1=127.0.0.1", "1=:80", "0=h:1", "1=h:1,1=h:2", "1=h:99999"] {
            let error = parse_peers(bad).unwrap_err().to_string();
            assert!(error.contains("--peers"), "{bad}: {error}");
        }
    }

    #[test]
    fn default_settings_validate_and_tiny_log_keep_is_refused() {
        NodeConfig::default().validate().unwrap();
        let mut config = NodeConfig::default();
        config.raft.max_in_snapshot_log_to_keep = 10;
        assert!(config.validate().is_err());
    }

    #[test]
    fn event_retention_defaults_and_too_small_a_retention_is_refused() {
        assert_eq!(NodeConfig::default().event_retention, api::limits::EVENT_RETENTION_DEFAULT);
        let config: NodeConfig = toml::from_str("event_retention = 5000\n").unwrap();
        assert_eq!(config.event_retention, 5000);
        config.validate().unwrap();
        let config: NodeConfig = toml::from_str("event_retention = 10\n").unwrap();
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("event_retention"), "{error}");
    }

    #[test]
    fn connection_limits_parse_and_out_of_range_limits_are_refused() {
        let config: NodeConfig =
            toml::from_str("[connections]\nconnections_max = 64\nhandshake_timeout_ms = 1000\n").unwrap();
        config.validate().unwrap();
        assert_eq!((config.connections.connections_max, config.connections.handshake_timeout_ms), (64, 1000));
        assert_eq!(config.connections.idle_timeout_ms, ConnectionLimits::default().idle_timeout_ms);
        // The default pending cap (128) is held to half of a small connections_max.
        assert_eq!(config.connections.pending_allowed(), 32);
        for bad in [
            "connections_max = 2",
            "pending_max = 0",
            "handshake_timeout_ms = 5",
            "handshake_timeout_ms = 9000\nidle_timeout_ms = 8000",
        ] {
            let config: NodeConfig = toml::from_str(&format!("[connections]\n{bad}\n")).unwrap();
            let error = config.validate().unwrap_err().to_string();
            assert!(error.starts_with("connections."), "{bad}: {error}");
        }
        assert!(toml::from_str::<NodeConfig>("[connections]\nmax = 3\n").is_err());
    }

    #[test]
    fn toml_round_trip_and_unknown_keys_refused() {
        let config: NodeConfig =
            toml::from_str("id = 3\nlisten = \"0.0.0.0:9000\"\n[raft]\nheartbeat_interval_ms = 100\n").unwrap();
        assert_eq!((config.id, config.raft.heartbeat_interval_ms), (3, 100));
        assert_eq!(config.listen_client, "0.0.0.0:9000", "`listen` names the client listener");
        assert!(toml::from_str::<NodeConfig>("idd = 3\n").is_err());
    }

    #[test]
    fn the_peer_listener_needs_an_address_of_its_own() {
        let config: NodeConfig =
            toml::from_str("listen_client = \"127.0.0.1:9000\"\nlisten_peer = \"127.0.0.1:9000\"\n").unwrap();
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("set --listen-peer"), "{error}");
        let config: NodeConfig = toml::from_str(
            "listen_client = \"0.0.0.0:9000\"\nlisten_peer = \"0.0.0.0:9100\"\nadvertise_peer = \"10.0.0.1:9100\"\n",
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(
            (config.advertised_client(), config.advertised_peer()),
            ("0.0.0.0:9000".into(), "10.0.0.1:9100".into())
        );
        assert_eq!(config.members()[&config.id], "10.0.0.1:9100", "members are named by their peer addresses");
    }
}
