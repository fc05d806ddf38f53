//! `strand`: the command line of a Strand cluster, and (`strand node`) a cluster member.
//!
//! The bead commands follow `bd`'s flags (docs/beads.md §5) so an agent prompt written for `bd` works
//! with `strand` in its place. This crate is a thin layer over `api`'s client.
//!
//! Two binaries share this library. `strand` (`src/main.rs`) is the client: it links nothing of
//! the node, so an agent's one-shot command starts without loading RocksDB's C++ and its static
//! initialisers. It hands `node`, `dev` and `snapshot` to `strand-node`, installed beside it, by
//! `exec` (same process id, so a signal sent to `strand node` reaches the member).
//! `strand-node` (`src/bin/strand-node/`, feature `node`) is the full build: every command, and
//! those three in process. This library never names the `node` or `raft-store` crates: a crate
//! that depends on them may reuse their compiled generic code, which would pull RocksDB into the
//! client's link.
//!
//! Each command lives in a folder by what a user does with it: `beads/` (beads themselves: create,
//! show, update, list, ready, query, labels, gates, prune), `work/` (namespaces, formulas,
//! molecules, orders, sling, hook, mail, convoys, leases, events), `bulk/` (tx, graph plans,
//! import), `compat/` (the exec-store protocol), `admin/` (cluster, auth, certificates, nodes,
//! snapshots) and `bench/`. The root holds what the whole process shares: this file (the global
//! flags and the dispatch), `failure` (failures and their exit codes), `output`, `answers`,
//! `values`, `wire` and `help`.

pub mod admin;
mod answers;
mod beads;
mod bench;
mod bulk;
mod compat;
mod failure;
mod help;
pub mod output;
mod values;
mod wire;
mod work;

pub use failure::{CommandResult, Failure};

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use api::client::{Client, ClientConfig};
use api::convert::Consistency;
use api::model::Namespace;
use api::printable::printable;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use failure::EXIT_CODES;

/// Strand: a replicated bead store for fleets of AI coding agents.
#[derive(Parser, Debug)]
#[command(name = "strand", version = VERSION, long_version = version_text(), about, after_help = EXIT_CODES)]
pub struct Cli {
    /// Cluster nodes to talk to, host:port,... (any node will do). Without it: the `endpoints`
    /// of the TOML file named by $STRAND_CONFIG, else 127.0.0.1:7400.
    #[arg(long, global = true, env = "STRAND_ENDPOINTS", value_delimiter = ',')]
    endpoints: Option<Vec<String>>,
    /// The bead store (namespace) to use. Default: the store of $BEADS_DIR when set (as bd picks
    /// its database, so each of a city's rigs is its own store; `strand namespace of-store`
    /// names it), else `default`.
    #[arg(long, global = true, env = "STRAND_NAMESPACE")]
    namespace: Option<String>,
    /// Who acts (claims, closes). Default: $STRAND_ACTOR, $BEADS_ACTOR, $GC_SESSION_NAME, $GC_AGENT, then the OS user.
    #[arg(long, global = true)]
    actor: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// TLS: the CA certificate (PEM) that signed the nodes' certificates. Default: $STRAND_CACERT,
    /// else `cacert` of the $STRAND_CONFIG file; without it the CLI speaks plain TCP.
    #[arg(long, global = true, env = "STRAND_CACERT", value_name = "PEM")]
    cacert: Option<PathBuf>,
    /// TLS: a client certificate (PEM), for a cluster that requires one ($STRAND_CERT, `cert`).
    #[arg(long, global = true, env = "STRAND_CERT", value_name = "PEM", requires = "key")]
    cert: Option<PathBuf>,
    /// TLS: the client certificate's private key (PEM) ($STRAND_KEY, `key`).
    #[arg(long, global = true, env = "STRAND_KEY", value_name = "PEM", requires = "cert")]
    key: Option<PathBuf>,
    /// The bearer token of a cluster with auth enabled (`strand_` and 64 hex digits, as
    /// `strand auth token create` printed it). Default: $STRAND_TOKEN, else `token` of the
    /// $STRAND_CONFIG file.
    #[arg(long, global = true, env = "STRAND_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The actor of the token (from the cluster), when a token is given and nothing names the
    /// actor: an agent's token fixes it.
    #[arg(skip)]
    token_actor: Option<String>,
    /// Whether `--namespace` was written on the command line (not taken from the environment).
    #[arg(skip)]
    namespace_given: bool,
    /// A lease id (the fencing token a leased claim answered): a write to its bead is refused,
    /// "claim lost", once that lease is no longer the bead's current one.
    #[arg(long = "lease-id", global = true, env = "STRAND_LEASE_ID", value_name = "LEASE")]
    lease_id: Option<u64>,
    /// Read consistency. `linearizable` (default) sees every write acknowledged before the read
    /// began; `serializable` answers from the contacted node's replica at once and MAY BE STALE.
    #[arg(long, global = true, value_enum, default_value_t = ConsistencyArg::Linearizable)]
    consistency: ConsistencyArg,
    /// bd's global flags that have no meaning for a cluster, accepted so bd command lines work:
    /// --sandbox, --no-daemon, -q/--quiet, -v/--verbose, --db, -C/--directory,
    /// --dolt-auto-commit, --profile, --global, --ignore-schema-skew.
    #[arg(long, global = true, hide = true)]
    sandbox: bool,
    #[arg(long = "no-daemon", global = true, hide = true)]
    no_daemon: bool,
    #[arg(long, short = 'q', global = true, hide = true)]
    quiet: bool,
    #[arg(long, short = 'v', global = true, hide = true)]
    verbose: bool,
    #[arg(long, global = true, hide = true)]
    db: Option<String>,
    #[arg(long, short = 'C', global = true, hide = true)]
    directory: Option<String>,
    #[arg(long = "dolt-auto-commit", global = true, hide = true)]
    dolt_auto_commit: Option<String>,
    #[arg(long, global = true, hide = true)]
    profile: bool,
    #[arg(long, global = true, hide = true)]
    global: bool,
    #[arg(long = "ignore-schema-skew", global = true, hide = true)]
    ignore_schema_skew: bool,
    /// `--format json` is bd's hidden spelling of --json.
    #[arg(long, global = true, hide = true)]
    format: Option<String>,
    /// How long to keep retrying while no node answers or no leader is elected (15s, 2m). On a
    /// `gate create` command line (before or after the subcommand), `--timeout` is the gate's
    /// own, as in bd; $STRAND_TIMEOUT still sets this one then.
    #[arg(long, global = true, env = TIMEOUT_VARIABLE, default_value = TIMEOUT_DEFAULT, value_name = "DURATION")]
    timeout: String,
    /// Whether `--timeout` was written on the command line (not taken from the environment or
    /// the default).
    #[arg(skip)]
    timeout_given: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ConsistencyArg {
    Linearizable,
    Serializable,
}

#[derive(Subcommand, Debug)]
enum Command {
    #[command(flatten)]
    Bead(beads::BeadCommand),
    /// Dependencies between beads (also bd's shorthand `dep ID --blocks OTHER`).
    Dep(beads::DepArgs),
    /// Labels of beads.
    #[command(subcommand)]
    Label(beads::annotate::LabelCommand),
    /// Add a comment to a bead: Strand keeps no comments, so it is appended to the notes as
    /// `<actor>: TEXT` (JSON: bd's comment object).
    #[command(visible_alias = "comments")]
    Comment {
        /// The bead.
        id: String,
        /// The text (several words are joined by spaces).
        #[arg(required = true)]
        text: Vec<String>,
    },
    /// Gates: beads that block a step until a person, a timer, a GitHub run or pull request,
    /// or another bead lets it go (bd's `gate`).
    #[command(subcommand)]
    Gate(beads::gate::GateCommand),
    /// Leased claims: renew, release, or keep a lease alive (`claim --lease` grants one).
    #[command(subcommand)]
    Lease(work::lease::LeaseCommand),
    /// Cluster administration.
    #[command(subcommand)]
    Cluster(admin::cluster::ClusterCommand),
    /// The cluster's members: `member list`, `member add` (as a learner, promoted once caught
    /// up), `member promote`, `member remove`.
    #[command(subcommand)]
    Member(admin::cluster::MemberCommand),
    /// TLS certificates: `certs init` makes a development CA and node and client certificates.
    #[command(subcommand)]
    Certs(admin::certs::CertsCommand),
    /// Authentication: `auth enable` turns it on and prints the first admin token; `auth token
    /// create|list|revoke` manage tokens (roles admin, agent, reader).
    #[command(subcommand)]
    Auth(admin::auth::AuthCommand),
    /// A live view of the cluster and its work: what needs attention, the members, the
    /// controller's duties, each namespace's beads by status; refreshes until `q` (one snapshot
    /// when stdout is not a terminal, or with --json).
    Top(admin::top::TopArgs),
    /// Run one cluster member.
    Node(Box<admin::member_args::NodeArgs>),
    /// Start a local cluster of child processes for trying things out; Ctrl-C stops it.
    Dev(admin::member_args::DevArgs),
    /// Backups: `snapshot save FILE` (the whole state, at a linearized point), `snapshot status
    /// FILE` (checks a backup and says what it holds), `snapshot restore FILE` (a new cluster's
    /// data directory from a backup).
    #[command(subcommand)]
    Snapshot(admin::member_args::SnapshotCommand),
    /// Benchmarks against a running cluster.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Namespaces (isolated bead stores) of the cluster.
    #[command(subcommand)]
    Namespace(work::orchestration::NamespaceCommand),
    /// Formulas: TOML recipes of steps, cooked into molecules.
    #[command(subcommand)]
    Formula(work::molecule::FormulaCommand),
    /// Orders: automations the leader fires on a cooldown, a cron schedule, an event or a
    /// condition, cooking a formula and slinging it (TOML as Gas City's orders/*.toml).
    #[command(subcommand)]
    Order(work::order::OrderCommand),
    /// Molecules: a root bead and one child per formula step.
    #[command(subcommand)]
    Mol(work::molecule::MolCommand),
    /// Route a bead (or a new task, or a convoy's open children) to an agent or a pool.
    Sling(work::orchestration::SlingArgs),
    /// An agent's work queue: its in-progress beads, then ready beads assigned to it, then its
    /// pool's. Exit 0 when there is work, 1 when there is none (with --inject, always 0).
    Hook(work::orchestration::HookArgs),
    /// Messages between agents (beads of type `message`).
    #[command(subcommand)]
    Mail(work::mail::MailCommand),
    /// Convoys: beads that track other beads and close when all of them are closed.
    #[command(subcommand)]
    Convoy(work::convoy::ConvoyCommand),
    /// The namespace's event log, oldest first.
    Events(work::events::EventsArgs),
    /// Stream events as they happen, until Ctrl-C.
    Watch(work::events::WatchArgs),
    /// Remove closed wisps (ephemeral beads).
    Purge(work::orchestration::PurgeArgs),
    /// Remove closed persistent beads by age or id pattern (bd's prune; without --force, a
    /// preview and exit 1).
    Prune(beads::prune::PruneArgs),
    /// Beads matching an expression: `strand query "ephemeral=true AND status=open"` (bd's
    /// query language: = != < <= > >=, AND, OR, NOT, parentheses; JSON: an array).
    Query(beads::query::QueryArgs),
    /// Bead writes from a JSON document, applied all together or not at all
    /// (JSON: {"results": [bead or null per write]}).
    Tx(bulk::tx::TxArgs),
    /// Beads from `bd export` JSONL, ids and timestamps kept; all or nothing per file
    /// (JSON: {source, created, skipped, ids}).
    Import(bulk::import::ImportArgs),
    /// This build's version, and the bd command line it stands in for. Run as `bd`, the first
    /// line is bd's own form (`bd version 1.0.4 (strand X)`), which Gas City parses.
    Version,
    /// Gas City's exec-store protocol (docs/beads.md §6): `strand exec-store OP [ARGS]`, JSON on
    /// stdin and stdout. The store is the namespace of $GC_STORE_ROOT and $GC_STORE_SCOPE (id
    /// prefix $GC_BEADS_PREFIX), else --namespace. Exit 0 ok, 1 error (including an unreachable
    /// cluster), 2 unknown operation only.
    #[command(name = "exec-store")]
    ExecStore(compat::exec_store::ExecStoreArgs),
    /// Print the completion script of a shell to stdout (bash, zsh, fish, elvish, powershell):
    /// `strand completion bash > /etc/bash_completion.d/strand`.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::aot::Shell,
    },
    /// Man pages: strand.1 on stdout, or with --dir, strand.1 and one page per subcommand
    /// (strand-create.1, strand-mail-send.1, ...) written into DIR.
    Man {
        /// The directory to write the pages to, created if missing (e.g. /usr/local/share/man/man1).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The bd release whose command line Strand stands in for. Not 1.0.5: Gas City turns on its
/// `bd sql` ready projection for 1.0.5, and Strand has no SQL.
const BD_COMPATIBLE_VERSION: &str = "1.0.4";

/// This build's version with its source as semver build metadata: `0.1.0+3f2a9c1e0b7d`, with
/// `.dirty` when the tree had uncommitted changes (`build.rs`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("STRAND_VERSION_SUFFIX"));

/// Where this binary was built from, as `build.rs` read it from git.
pub const BUILD_SOURCE: api::version::BuildSource = api::version::BuildSource {
    commit: env!("STRAND_GIT_COMMIT"),
    dirty: matches!(env!("STRAND_GIT_DIRTY").as_bytes(), b"true"),
};

/// The storage format of the data directories this build's nodes write.
const STORAGE_FORMAT: u32 = api::version::STORAGE_FORMAT;

/// `strand version` and `strand --version` in text: the build's name, then what it was built
/// from and what it speaks, a line each (as `etcd --version` names its git SHA and API version).
fn version_text() -> String {
    let applies = api::version::build_apply_versions();
    let changes = if BUILD_SOURCE.dirty { " (with uncommitted changes)" } else { "" };
    format!(
        "{VERSION}\ncommit: {}{changes}\nstorage format: {STORAGE_FORMAT}\napply versions: {applies}\nbd command line: {BD_COMPATIBLE_VERSION}",
        BUILD_SOURCE.commit
    )
}

/// `strand version`: as `bd version` prints it when run under the name `bd`.
fn print_version(json: bool) {
    let own = env!("CARGO_PKG_VERSION");
    let applies = api::version::build_apply_versions();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "version": own, "bd_compatible": BD_COMPATIBLE_VERSION, "schema_version": 1,
                "build": api::version::build_name(), "commit": BUILD_SOURCE.commit, "dirty": BUILD_SOURCE.dirty,
                "storage_format": STORAGE_FORMAT,
                "apply_versions": { "min": applies.min, "max": applies.max },
            })
        );
        return;
    }
    let invoked = std::env::args_os().next().unwrap_or_default();
    let name =
        std::path::Path::new(&invoked).file_stem().and_then(|stem| stem.to_str()).unwrap_or_default().to_string();
    if name == "bd" {
        println!("bd version {BD_COMPATIBLE_VERSION} (strand {own})");
    } else {
        println!("strand {}", version_text());
    }
}

/// The variable that sets `--timeout`.
const TIMEOUT_VARIABLE: &str = "STRAND_TIMEOUT";
/// How long a command retries by default.
const TIMEOUT_DEFAULT: &str = "15s";

/// bd's database directory: Gas City sets it to `<scope>/.beads` for every bd it runs.
const BEADS_DIR_VARIABLE: &str = "BEADS_DIR";
/// A node's client port when nothing names one (`node::config::DEFAULT_PORT`; a test checks).
pub const DEFAULT_PORT: u16 = 7400;
/// The endpoint used when no flag, variable or config file names one.
const DEFAULT_ENDPOINT: &str = "127.0.0.1:7400";
/// The variable naming a client config file (TOML with `endpoints = ["host:port", ...]`).
const CONFIG_VARIABLE: &str = "STRAND_CONFIG";
/// A client config file larger than this is not a client config file.
const CLIENT_CONFIG_BYTES_MAX: u64 = 64 * 1024;

/// The client config file: TOML with the cluster's endpoints and, for TLS, the CA and a client
/// certificate (paths relative to the file's directory).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientConfigFile {
    /// `host:port` of cluster nodes.
    endpoints: Vec<String>,
    /// The CA certificate that signed the nodes' certificates.
    cacert: Option<PathBuf>,
    /// A client certificate.
    cert: Option<PathBuf>,
    /// Its private key.
    key: Option<PathBuf>,
    /// The bearer token of a cluster with auth enabled.
    token: Option<String>,
}

/// Reads the client config file named by `$STRAND_CONFIG`, if one is named.
fn client_config_file() -> Result<Option<ClientConfigFile>, Failure> {
    use std::io::Read;
    let path = match std::env::var_os(CONFIG_VARIABLE) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => return Ok(None),
    };
    let shown = path.display();
    let mut text = String::new();
    std::fs::File::open(&path)
        .and_then(|file| file.take(CLIENT_CONFIG_BYTES_MAX).read_to_string(&mut text))
        .map_err(|error| Failure::Usage(format!("cannot read ${CONFIG_VARIABLE} file {shown}: {error}")))?;
    let mut config: ClientConfigFile = toml::from_str(&text).map_err(|error| {
        let reason = error.message().to_string();
        Failure::Usage(format!(
            "${CONFIG_VARIABLE} file {shown} is not valid: {reason}; write endpoints = [\"host:port\", ...] and, for TLS, cacert = \"ca.pem\""
        ))
    })?;
    if config.endpoints.is_empty() {
        return Err(Failure::Usage(format!(
            "${CONFIG_VARIABLE} file {shown} lists no endpoints; add endpoints = [\"host:port\"]"
        )));
    }
    if config.cert.is_some() != config.key.is_some() {
        return Err(Failure::Usage(format!(
            "${CONFIG_VARIABLE} file {shown} gives a client cert without its key or a key without its cert; give both"
        )));
    }
    let dir = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    for file in [&mut config.cacert, &mut config.cert, &mut config.key].into_iter().flatten() {
        *file = dir.join(&*file);
    }
    Ok(Some(config))
}

/// A client of `config`; a configuration it refuses (a TLS file that does not load, say) is a
/// usage error.
fn connect(config: ClientConfig) -> Result<Client, Failure> {
    Client::new(config).map_err(|error| Failure::Usage(error.to_string()))
}

impl Cli {
    /// Whether the command is one only the full build runs (`node`, `dev`, `snapshot`).
    fn is_member_command(&self) -> bool {
        matches!(&self.command, Command::Node(_) | Command::Dev(_) | Command::Snapshot(_))
    }

    /// Whether the command runs cluster members in this process or its children (`node`, `dev`).
    fn runs_members(&self) -> bool {
        matches!(&self.command, Command::Node(_) | Command::Dev(_))
    }

    /// The gate timeout of `gate create --timeout T` (bd's flag), which is then not the client's.
    pub fn gate_timeout(&self) -> Option<&str> {
        let creating_gate = matches!(&self.command, Command::Gate(beads::gate::GateCommand::Create(_)));
        (creating_gate && self.timeout_given).then_some(self.timeout.as_str())
    }

    /// How long to keep retrying: `--timeout`, else $STRAND_TIMEOUT, else 15 s.
    fn retry_timeout(&self) -> Result<Duration, Failure> {
        let from_environment = std::env::var(TIMEOUT_VARIABLE).ok();
        let (text, named) = match (self.gate_timeout(), self.timeout_given) {
            (None, true) => (self.timeout.clone(), "--timeout".to_string()),
            _ => match from_environment {
                Some(text) => (text, format!("${TIMEOUT_VARIABLE}")),
                None => (TIMEOUT_DEFAULT.to_string(), "the default timeout".to_string()),
            },
        };
        values::parse_duration(&text).map_err(|error| Failure::Usage(format!("{named} {text:?}: {error}")))
    }

    /// Whether to print JSON (`--json`, or bd's `--format json`).
    pub fn json(&self) -> bool {
        self.json
    }

    /// The lease id writes carry (`--lease-id`, `$STRAND_LEASE_ID`).
    pub fn lease_id(&self) -> Option<u64> {
        self.lease_id
    }

    /// The actor, resolved through the chain of docs/beads.md §3; with a token and nothing naming
    /// the actor, the token's actor comes before the OS user.
    pub fn actor(&self) -> String {
        if let Some(actor) = self.named_actor() {
            return actor;
        }
        if let Some(actor) = &self.token_actor {
            return actor.clone();
        }
        for variable in ["USER", "USERNAME"] {
            if let Ok(value) = std::env::var(variable)
                && !value.is_empty()
            {
                return value;
            }
        }
        "unknown".into()
    }

    /// The actor `--actor` or an agent's variable names, if any.
    fn named_actor(&self) -> Option<String> {
        if let Some(actor) = &self.actor {
            return Some(actor.clone());
        }
        ["STRAND_ACTOR", "BEADS_ACTOR", "GC_SESSION_NAME", "GC_AGENT"]
            .into_iter()
            .find_map(|variable| std::env::var(variable).ok().filter(|value| !value.is_empty()))
    }

    /// The bearer token: `--token` or `$STRAND_TOKEN`, else `token` of the client config file.
    pub fn token(&self) -> Result<Option<String>, Failure> {
        if let Some(token) = self.token.as_ref().filter(|token| !token.trim().is_empty()) {
            return Ok(Some(token.trim().to_string()));
        }
        Ok(client_config_file()?.and_then(|file| file.token))
    }

    /// The namespace `--namespace` names on the command line, if it does.
    pub fn namespace_given(&self) -> Option<&str> {
        self.namespace.as_deref().filter(|_| self.namespace_given)
    }

    /// The actor `--actor` names on the command line, if it does.
    pub fn actor_given(&self) -> Option<&str> {
        self.actor.as_deref()
    }

    /// With a token and nothing naming the actor, asks the cluster for the token's actor, so that
    /// writes and look-ups by actor (hook, inbox) use it. A failure leaves the actor as it was;
    /// the command then meets the failure itself.
    async fn resolve_token_actor(&mut self) {
        let needs_actor = !matches!(
            &self.command,
            Command::Certs(_)
                | Command::Version
                | Command::Cluster(_)
                | Command::Top(_)
                | Command::Member(_)
                | Command::Auth(_)
                | Command::Bench(_)
                | Command::Completion { .. }
                | Command::Man { .. }
        );
        let needs_actor =
            needs_actor && !matches!(&self.command, Command::Node(_) | Command::Dev(_) | Command::Snapshot(_));
        if !needs_actor || self.named_actor().is_some() || !matches!(self.token(), Ok(Some(_))) {
            return;
        }
        // From the contacted node's replica at once: no read index, so it costs no round to the
        // leader, and it answers quickly or not at all.
        let Ok(mut config) = self.client_config(&self.namespace(), None) else { return };
        config.consistency = Consistency::Serializable;
        config.deadline = config.deadline.min(Duration::from_secs(3));
        let Ok(client) = Client::new(config) else { return };
        if let Ok(api::outcome::Outcome::Tokens { tokens, .. }) = client.query(api::command::Query::WhoAmI).await
            && let Some(token) = tokens.into_iter().next()
        {
            self.token_actor = Some(token.actor.0);
        }
    }

    /// The namespace the global flags name (see `--namespace`).
    pub fn namespace(&self) -> String {
        if let Some(namespace) = self.namespace.as_ref().filter(|namespace| !namespace.is_empty()) {
            return namespace.clone();
        }
        match std::env::var(BEADS_DIR_VARIABLE).ok().filter(|dir| !dir.is_empty()) {
            Some(dir) => compat::exec_store::namespace_of_beads_dir(&dir),
            None => Namespace::DEFAULT.to_string(),
        }
    }

    /// Whether the namespace is derived from `$BEADS_DIR` (bd's place), not named.
    fn namespace_derived(&self) -> bool {
        self.namespace.as_ref().is_none_or(|namespace| namespace.is_empty())
            && std::env::var(BEADS_DIR_VARIABLE).is_ok_and(|dir| !dir.is_empty())
    }

    /// Whether requests to `namespace` may not create it: it is the one `--namespace` or
    /// `$STRAND_NAMESPACE` names, so that a typo there is refused instead of making a new store
    /// with the same id prefix. `default`, and a namespace the CLI derives (from `$BEADS_DIR`,
    /// `$GC_STORE_ROOT`), are created by the first write to them.
    pub fn namespace_must_exist(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_some_and(|named| named == namespace && named != Namespace::DEFAULT)
    }

    /// A client with the global flags. A namespace derived from `$BEADS_DIR` is created by its
    /// first write with the id prefix `$GC_BEADS_PREFIX` (the cluster's when unset).
    pub fn client(&self) -> Result<Client, Failure> {
        let prefix = match self.namespace_derived() {
            true => std::env::var(compat::exec_store::PREFIX_VARIABLE).ok().filter(|prefix| !prefix.is_empty()),
            false => None,
        };
        self.client_with(&self.namespace(), prefix)
    }

    /// A client of `namespace`, which must exist (requests are refused if it does not).
    pub fn client_of_existing(&self, namespace: &str) -> Result<Client, Failure> {
        let mut config = self.client_config(namespace, None)?;
        config.namespace_must_exist = true;
        connect(config)
    }

    /// A client with the global flags whose requests go to `namespace` instead of `--namespace`.
    pub fn client_in(&self, namespace: &str) -> Result<Client, Failure> {
        self.client_with(namespace, None)
    }

    /// The cluster's endpoints: `--endpoints` or `$STRAND_ENDPOINTS`, else the `endpoints` of
    /// the client config file `$STRAND_CONFIG`, else [`DEFAULT_ENDPOINT`].
    pub fn endpoints(&self) -> Result<Vec<String>, Failure> {
        let given = self.endpoints.iter().flatten().filter(|endpoint| !endpoint.trim().is_empty());
        let given: Vec<String> = given.cloned().collect();
        let endpoints = if !given.is_empty() {
            given
        } else {
            match client_config_file()? {
                Some(file) => file.endpoints,
                None => vec![DEFAULT_ENDPOINT.to_string()],
            }
        };
        for endpoint in &endpoints {
            check_endpoint(endpoint)?;
        }
        Ok(endpoints)
    }

    /// TLS to the nodes: `--cacert` (and `--cert`, `--key`) or their variables, else the TLS files
    /// of the client config file; `None`: plain TCP.
    pub fn tls(&self) -> Result<Option<api::tls::ClientTls>, Failure> {
        if let Some(ca) = &self.cacert {
            let identity = self.cert.clone().zip(self.key.clone());
            return Ok(Some(api::tls::ClientTls { ca: ca.clone(), identity }));
        }
        if self.cert.is_some() {
            return Err(Failure::Usage(
                "--cert needs --cacert (or $STRAND_CACERT): the CA that signed the nodes' certificates".into(),
            ));
        }
        let Some(file) = client_config_file()? else { return Ok(None) };
        match file.cacert {
            Some(ca) => Ok(Some(api::tls::ClientTls { ca, identity: file.cert.zip(file.key) })),
            None if file.cert.is_some() => Err(Failure::Usage(format!(
                "${CONFIG_VARIABLE} file gives a client cert but no cacert; add cacert = \"ca.pem\""
            ))),
            None => Ok(None),
        }
    }

    /// A client with the global flags, in `namespace`, creating it with `prefix` on first write
    /// (the cluster's configured prefix when `None`).
    pub fn client_with(&self, namespace: &str, prefix: Option<String>) -> Result<Client, Failure> {
        connect(self.client_config(namespace, prefix)?)
    }

    /// A client whose attempts and deadline allow a server-side wait of `wait` (a leadership move
    /// answers only once the new leader is in office).
    pub fn client_waiting(&self, wait: Duration) -> Result<Client, Failure> {
        let mut config = self.client_config(&self.namespace(), None)?;
        config.attempt_timeout = config.attempt_timeout.max(wait + Duration::from_secs(2));
        config.deadline = config.deadline.max(config.attempt_timeout);
        connect(config)
    }

    /// A client of `namespace` whose writes are sent as `actor` (the benchmarks' agents).
    pub fn client_as(&self, namespace: &str, actor: &str) -> Result<Client, Failure> {
        let mut config = self.client_config(namespace, None)?;
        config.actor = actor.to_string();
        connect(config)
    }

    /// The client settings the global flags give, for `namespace`.
    fn client_config(&self, namespace: &str, prefix: Option<String>) -> Result<ClientConfig, Failure> {
        let mut config = ClientConfig::new(self.endpoints()?);
        config.tls = self.tls()?;
        config.token = self.token()?;
        config.prefix = prefix;
        config.namespace_must_exist = self.namespace_must_exist(namespace);
        config.namespace = Namespace(namespace.to_string());
        config.actor = self.actor();
        config.consistency = match self.consistency {
            ConsistencyArg::Linearizable => Consistency::Linearizable,
            ConsistencyArg::Serializable => Consistency::Serializable,
        };
        let timeout = self.retry_timeout()?;
        config.deadline = timeout;
        config.attempt_timeout = timeout.min(Duration::from_secs(5));
        config.failover_timeout = config.failover_timeout.min(timeout);
        Ok(config)
    }
}

/// A command that runs cluster members or opens a data directory, which only the full build
/// runs in process.
pub enum MemberCommand<'a> {
    /// `strand node`.
    Node(&'a admin::member_args::NodeArgs),
    /// `strand dev`.
    Dev(&'a admin::member_args::DevArgs),
    /// `strand snapshot`.
    Snapshot(&'a admin::member_args::SnapshotCommand),
}

/// What running a [`MemberCommand`] answers.
pub type MemberFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = CommandResult> + 'a>>;

/// How a build runs the [`MemberCommand`]s: the full build's, in process.
pub type MemberCommands = for<'a> fn(&'a Cli, MemberCommand<'a>) -> MemberFuture<'a>;

/// The full build's file name, beside the client's.
pub const FULL_BUILD: &str = "strand-node";

/// Runs a member command in process, or (the client build) replaces this process with the full
/// build's, given the same command line.
async fn run_members(cli: &Cli, command: MemberCommand<'_>, members: Option<MemberCommands>) -> CommandResult {
    match members {
        Some(members) => members(cli, command).await,
        None => Err(exec_full_build()),
    }
}

/// Replaces this process with `strand-node` from this binary's directory, given this command line
/// and environment; it returns only the failure to do so.
fn exec_full_build() -> Failure {
    use std::os::unix::process::CommandExt;
    let own = match std::env::current_exe() {
        Ok(own) => own,
        Err(error) => {
            return Failure::Refused(format!(
                "cannot find this program's own path to run {FULL_BUILD} beside it: {error}"
            ));
        }
    };
    let full = own.with_file_name(FULL_BUILD);
    let mut arguments = std::env::args_os();
    let invoked = arguments.next().unwrap_or_default();
    let error = std::process::Command::new(&full).arg0(invoked).args(arguments).exec();
    let dir = full.parent().unwrap_or(std::path::Path::new("/"));
    if error.kind() == std::io::ErrorKind::NotFound {
        Failure::Usage(format!(
            "`node`, `dev` and `snapshot` run in the full build, {FULL_BUILD}, which is not in {} beside this strand; install it there (make build and make release build both)",
            dir.display()
        ))
    } else {
        Failure::Refused(format!("cannot run {}: {error}", full.display()))
    }
}

async fn dispatch(cli: &Cli, members: Option<MemberCommands>) -> CommandResult {
    match &cli.command {
        Command::Bead(command) => beads::run(cli, command).await,
        Command::Dep(args) => beads::run_dep(cli, args).await,
        Command::Label(command) => beads::annotate::run_label(cli, command).await,
        Command::Comment { id, text } => beads::annotate::run_comment(cli, id, text).await,
        Command::Gate(command) => beads::gate::run(cli, command).await,
        Command::Lease(command) => work::lease::run(cli, command).await,
        Command::Cluster(command) => admin::cluster::run(cli, command).await,
        Command::Top(args) => admin::top::run(cli, args).await,
        Command::Member(command) => admin::cluster::run_member(cli, command).await,
        Command::Certs(command) => admin::certs::run(cli, command),
        Command::Auth(command) => admin::auth::run(cli, command).await,
        Command::Node(args) => run_members(cli, MemberCommand::Node(args), members).await,
        Command::Dev(args) => run_members(cli, MemberCommand::Dev(args), members).await,
        Command::Snapshot(command) => run_members(cli, MemberCommand::Snapshot(command), members).await,
        Command::Bench(command) => bench::run(cli, command).await,
        Command::Namespace(command) => work::orchestration::run_namespace(cli, command).await,
        Command::Formula(command) => work::molecule::run_formula(cli, command).await,
        Command::Order(command) => work::order::run(cli, command).await,
        Command::Mol(command) => work::molecule::run(cli, command).await,
        Command::Sling(args) => work::orchestration::run_sling(cli, args).await,
        Command::Hook(args) => work::orchestration::run_hook(cli, args).await,
        Command::Mail(command) => work::mail::run(cli, command).await,
        Command::Convoy(command) => work::convoy::run(cli, command).await,
        Command::Events(args) => work::events::run_events(cli, args).await,
        Command::Watch(args) => work::events::run_watch(cli, args).await,
        Command::Purge(args) => work::orchestration::run_purge(cli, args).await,
        Command::Query(args) => beads::query::run(cli, args).await,
        Command::Prune(args) => beads::prune::run(cli, args).await,
        Command::Tx(args) => bulk::tx::run(cli, args).await,
        Command::Import(args) => bulk::import::run(cli, args).await,
        Command::Version => {
            print_version(cli.json);
            Ok(true)
        }
        Command::ExecStore(args) => compat::exec_store::run(cli, args).await,
        Command::Completion { shell } => help::run_completion(*shell),
        Command::Man { dir } => help::run_man(dir.as_deref()),
    }
}

/// The command line as clap parses it, prints its help, completes it and documents it.
pub fn clap_command() -> clap::Command {
    with_negative_values(with_exit_codes(help::with_client_flags_hidden(Cli::command())))
}

/// Adds the exit codes to the help of every subcommand, nested ones (`mail send`) included.
fn with_exit_codes(command: clap::Command) -> clap::Command {
    command.mut_subcommands(|subcommand| with_exit_codes(subcommand.after_help(EXIT_CODES)))
}

/// Lets every option that takes a value take a negative number (`-p -1`, `-n -1`, `--after -1`),
/// and a duration (its value named `DURATION`: `--lease -5m`, `--wait -5s`) a leading hyphen, so
/// that its own parser refuses it with what it accepts instead of clap calling it an unexpected
/// argument; nested subcommands included.
fn with_negative_values(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| {
            if !matches!(arg.get_action(), clap::ArgAction::Set | clap::ArgAction::Append) {
                return arg;
            }
            let duration = arg.get_value_names().is_some_and(|names| names.iter().any(|name| name == "DURATION"));
            let arg = arg.allow_negative_numbers(true);
            if duration { arg.allow_hyphen_values(true) } else { arg }
        })
        .mut_subcommands(with_negative_values)
}

/// Refuses an endpoint that is not HOST:PORT with a port from 1 to 65535, before any connection
/// is tried.
fn check_endpoint(endpoint: &str) -> Result<(), Failure> {
    let endpoint = endpoint.trim();
    let address = endpoint.strip_prefix("http://").or_else(|| endpoint.strip_prefix("https://")).unwrap_or(endpoint);
    if api::validate::is_host_port(address) {
        Ok(())
    } else {
        Err(Failure::Usage(format!(
            "endpoint {:?} is not HOST:PORT with a port from 1 to 65535 (for example 127.0.0.1:7400); fix --endpoints, $STRAND_ENDPOINTS or `endpoints` in $STRAND_CONFIG",
            printable(endpoint)
        )))
    }
}

/// A clap error as one line: its message and what it names on the lines below it (the missing
/// flags, a similar subcommand), up to the usage.
fn one_line(rendered: &str) -> String {
    let mut line = String::new();
    for part in rendered.lines().map(str::trim).take_while(|part| !part.starts_with("Usage:")) {
        if part.is_empty() || part.starts_with("For more information") {
            continue;
        }
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(part);
    }
    let line = line.strip_prefix("error: ").unwrap_or(&line).to_string();
    if line.is_empty() { "invalid command line".into() } else { line }
}

/// The command whose help a usage error points to: the program's name and the subcommands the
/// command line names, found by walking `command`'s tree over `words` (the arguments after the
/// program's name) and skipping the values of the options met on the way. clap's error does not
/// say which subcommand it is about. Run as `bd`, the program is named `bd`.
fn help_command(command: &clap::Command, words: impl Iterator<Item = std::ffi::OsString>) -> String {
    let invoked = std::env::args_os().next().unwrap_or_default();
    let program = std::path::Path::new(&invoked).file_stem().and_then(|stem| stem.to_str()) == Some("bd");
    let mut path = vec![if program { "bd" } else { "strand" }.to_string()];
    let mut command = command.clone();
    command.build();
    let mut current = &command;
    let mut words = words.map(|word| word.to_string_lossy().into_owned());
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        let takes_value = |arg: &clap::Arg| matches!(arg.get_action(), clap::ArgAction::Set | clap::ArgAction::Append);
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = long.split_once('=').map_or((long, false), |(name, _)| (name, true));
            let arg = current.get_arguments().find(|arg| {
                arg.get_long() == Some(name) || arg.get_all_aliases().is_some_and(|aliases| aliases.contains(&name))
            });
            if arg.is_some_and(|arg| takes_value(arg) && !inline) {
                words.next();
            }
        } else if let Some(shorts) = word.strip_prefix('-').filter(|shorts| !shorts.is_empty()) {
            // A cluster of short flags (`-qv`): the first that takes a value takes the rest of the
            // word, or the next word when it ends the cluster.
            for (at, short) in shorts.char_indices() {
                let arg = current.get_arguments().find(|arg| arg.get_short() == Some(short));
                if arg.is_some_and(takes_value) {
                    if at + short.len_utf8() == shorts.len() {
                        words.next();
                    }
                    break;
                }
            }
        } else if let Some(subcommand) = current.find_subcommand(&word) {
            path.push(subcommand.get_name().to_string());
            current = subcommand;
        }
    }
    path.join(" ")
}

/// Parses the command line; a usage error becomes one line on stderr and exit code 2.
fn parse() -> Result<Cli, ExitCode> {
    let parsed = clap_command().try_get_matches().and_then(|matches| {
        let mut cli = Cli::from_arg_matches(&matches)?;
        cli.timeout_given = matches.value_source("timeout") == Some(clap::parser::ValueSource::CommandLine);
        cli.namespace_given = matches.value_source("namespace") == Some(clap::parser::ValueSource::CommandLine);
        Ok(cli)
    });
    match parsed {
        Ok(mut cli) => {
            if cli.format.as_deref().is_some_and(|format| format.eq_ignore_ascii_case("json")) {
                cli.json = true;
            }
            Ok(cli)
        }
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            Err(ExitCode::SUCCESS)
        }
        Err(error) => {
            let help = help_command(&clap_command(), std::env::args_os().skip(1));
            eprintln!("error: {}; see `{help} --help`", printable(&one_line(&error.render().to_string())));
            // Gas City reads exit 2 from an exec store as "unknown operation, done": a command
            // line the exec store cannot parse (a bad $STRAND_TIMEOUT, say) must fail instead.
            let exec_store = std::env::args_os().any(|word| word == "exec-store");
            Err(ExitCode::from(if exec_store { 1 } else { 2 }))
        }
    }
}

/// A reader that stops reading (`strand list | head -1`) ends the command as it ends `ls`: by
/// SIGPIPE, quietly, instead of a panic on the next print. Rust ignores SIGPIPE, and it stays
/// ignored while the command runs: a socket write to a peer that closed (a gRPC connection
/// reset) must fail as an error, never kill the process. Only once a print to standard output
/// finds the pipe closed does the process take SIGPIPE's default back and write once more, which
/// ends it by that signal. `strand node` and `strand dev` never do this, so a closed log pipe
/// never kills a member (or leaves `dev`'s children running).
fn end_quietly_on_a_closed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |panic| {
        let message = panic
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            use std::io::Write;
            sigpipe::reset();
            let mut stdout = std::io::stdout();
            let _ = stdout.write_all(b"\n").and_then(|()| stdout.flush());
            std::process::exit(141);
        }
        previous(panic);
    }));
}

/// The whole program: parses the command line, runs the command, and answers its exit code.
/// `members` runs `node`, `dev` and `snapshot` in process (the full build); without it, they are
/// handed to the full build's binary.
pub fn main(members: Option<MemberCommands>) -> ExitCode {
    api::version::set_build_source(BUILD_SOURCE);
    let mut cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // The client hands a member command to the full build before it starts anything.
    if members.is_none() && cli.is_member_command() {
        return failure::exit_code(Err(exec_full_build()), cli.json);
    }
    if !cli.runs_members() {
        end_quietly_on_a_closed_stdout();
    }
    // A node and a benchmark's agents run on every core; a one-shot command, what agents call
    // once per action, on this thread alone: starting no worker threads is most of its start.
    let mut builder = if cli.runs_members() || matches!(cli.command, Command::Bench(_)) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(async {
        cli.resolve_token_actor().await;
        dispatch(&cli, members).await
    });
    failure::exit_code(outcome, cli.json)
}
