//! The command lines of what runs cluster members or opens a data directory: `strand node`,
//! `strand dev` and `strand snapshot`. They are parsed by every build, so that `strand --help`,
//! the completions and the man pages describe them, and run by the full build `strand-node`
//! (`super::run_node`, `super::snapshot`), which the client build `strand` hands them to.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// This node's id (unique, 1 or more).
    #[arg(long, value_parser = crate::values::parse_node_id)]
    pub id: Option<u64>,
    /// Address of the client listener, host:port (default 127.0.0.1:7400).
    #[arg(long, visible_alias = "listen-client")]
    pub listen: Option<String>,
    /// Address clients use to reach this node (default: --listen).
    #[arg(long, visible_alias = "advertise-client")]
    pub advertise: Option<String>,
    /// Address of the peer listener, host:port, for Raft traffic between members only
    /// (default 127.0.0.1:7500).
    #[arg(long)]
    pub listen_peer: Option<String>,
    /// Address the other members use to reach this node (default: --listen-peer).
    #[arg(long)]
    pub advertise_peer: Option<String>,
    /// Directory for the node's RocksDB database and snapshots.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The members' peer addresses, ID=HOST:PORT,... (this node's own entry is optional; given,
    /// it must be the address it advertises). Without it the node runs a single-node cluster.
    #[arg(long)]
    pub peers: Option<String>,
    /// TLS: this node's certificate (PEM); it must name the node as strand-node-<id>. With
    /// --tls-key and --tls-ca it turns TLS on for both listeners ([tls] cert in the config).
    #[arg(long, value_name = "PEM", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the certificate's private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// TLS: the CA that signs the members' certificates (PEM); peers must show one it signed.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// TLS: require client certificates signed by this CA (PEM) on the client listener.
    #[arg(long, value_name = "PEM")]
    pub tls_client_ca: Option<PathBuf>,
    /// With auth enabled (`strand auth enable`), serve /metrics only to a request with a token
    /// (`authorization: Bearer ...`, any role); `metrics_auth = true` in the config file.
    #[arg(long)]
    pub metrics_auth: bool,
    /// TOML config file; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Cluster name; a data directory of another cluster is refused.
    #[arg(long)]
    pub cluster_name: Option<String>,
    /// Id prefix of new namespaces (default st).
    #[arg(long)]
    pub id_prefix: Option<String>,
    /// Rejoin after this node's data was lost: on an empty --data-dir, ask a member (--join
    /// addresses, else --peers) which cluster this node belongs to and what its membership is,
    /// and do not vote until caught up with the leader (no effect on a directory that holds data).
    #[arg(long)]
    pub rejoin: bool,
    /// Join a running cluster through these members' peer addresses (HOST:PORT,...): on an empty
    /// --data-dir the node asks to be added as a learner, catches up, and is promoted to a voter
    /// once it stayed caught up. It never initialises a cluster. Not with --peers. With auth on,
    /// give an admin token (--token or $STRAND_TOKEN). With --rejoin: the members to ask which
    /// cluster this node belongs to; it is not added again.
    #[arg(long, value_name = "ADDRS")]
    pub join: Option<String>,
    /// With --join, or --rejoin: how long to ask the members before giving up, leaving --data-dir
    /// as it was (default 60s; `join_timeout_ms` in the config file).
    #[arg(long, value_name = "DURATION", value_parser = crate::values::parse_duration)]
    pub join_timeout: Option<std::time::Duration>,
    /// With --join: stay a learner until `strand member promote`.
    #[arg(long, requires = "join")]
    pub no_auto_promote: bool,
    /// Recover from a lost quorum: start a one-voter cluster from this node's data, keeping every
    /// entry of its log; then add members with `member add` / `--join`. Never start the other
    /// old members' data directories again.
    #[arg(long, conflicts_with_all = ["join", "rejoin"])]
    pub force_new_cluster: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Args, Debug)]
pub struct DevArgs {
    /// How many nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// Client port of node 1; node i listens for clients on base_port + i - 1.
    #[arg(long, value_name = "PORT", default_value_t = crate::DEFAULT_PORT)]
    pub base_port: u16,
    /// Peer (Raft) port of node 1; node i listens for its peers on peer_base_port + i - 1.
    /// Default: --base-port + 100. The client and peer port ranges must not overlap.
    #[arg(long, value_name = "PORT")]
    pub peer_base_port: Option<u16>,
    /// Directory for the nodes' data and logs.
    #[arg(long, default_value = "strand-dev")]
    pub dir: PathBuf,
    /// Run TLS: mutual TLS between the nodes and TLS to clients, with certificates made in
    /// DIR/certs by `strand certs init` (kept across runs), and a client config DIR/client.toml
    /// for $STRAND_CONFIG.
    #[arg(long)]
    pub tls: bool,
    /// Turn auth on: the first admin token is written to DIR/admin.token (kept across runs) and
    /// into DIR/client.toml for $STRAND_CONFIG.
    #[arg(long)]
    pub auth: bool,
}

#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Save a backup of the whole state to FILE (needs an admin token when auth is on).
    Save {
        /// The backup file to write; it must not exist.
        file: PathBuf,
    },
    /// Check a backup file and print its header and what it holds.
    Status {
        /// The backup file.
        file: PathBuf,
    },
    /// Make the data directory of one member of a new cluster from a backup (as `etcdutl
    /// snapshot restore`): run it for every member, with the same --peers, then start each with
    /// `strand node`. The new cluster gets a new cluster id (drawn by its lowest member's
    /// restore, and learned by the others when the cluster first runs), so its nodes never talk
    /// to the old cluster, nor to another restored from the same backup.
    Restore {
        /// The backup file.
        file: PathBuf,
        /// The new, empty data directory of this member.
        #[arg(long)]
        data_dir: PathBuf,
        /// This member's id.
        #[arg(long, value_parser = crate::values::parse_node_id)]
        id: u64,
        /// The members' peer addresses, ID=HOST:PORT,... (this node's own entry is optional;
        /// without it, give --advertise-peer), as `strand node --peers`: every member of the new
        /// cluster.
        #[arg(long)]
        peers: String,
        /// Where the other members reach this member's peer listener, HOST:PORT (as `strand node
        /// --advertise-peer`); needed only when --peers leaves this member out.
        #[arg(long, value_name = "ADDR", value_parser = crate::values::parse_host_port)]
        advertise_peer: Option<String>,
        /// No longer used: refused with what to do instead.
        #[arg(long, hide = true)]
        cluster_token: Option<String>,
        /// The new cluster's name (as `strand node --cluster-name`).
        #[arg(long, default_value = "strand")]
        cluster_name: String,
    },
}
