//! `strand`: the command line of a Strand cluster, and (`strand node`) a cluster member.
//!
//! The bead commands follow `bd`'s flags (BEADS-SPEC §5) so an agent prompt written for `bd` works
//! with `strand` in its place. This crate is a thin layer over `api`'s client; `strand node` and
//! `strand dev` call the `node` crate (feature `node`, on by default).

mod beads;
mod bench;
mod cluster;
mod output;
#[cfg(feature = "node")]
mod run_node;

use std::process::ExitCode;
use std::time::Duration;

use api::client::{Client, ClientConfig, ClientError};
use api::convert::Consistency;
use api::model::Namespace;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

const EXIT_CODES: &str = "Exit codes: 0 ok; 1 operation refused or failed (lost claim, not found, invalid transition); 2 usage error; 3 cluster unavailable.";

/// Strand: a replicated bead store for fleets of AI coding agents.
#[derive(Parser, Debug)]
#[command(name = "strand", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// Cluster nodes to talk to, host:port,... (any node will do).
    #[arg(long, global = true, env = "STRAND_ENDPOINTS", default_value = "127.0.0.1:7400", value_delimiter = ',')]
    endpoints: Vec<String>,
    /// The bead store (namespace) to use.
    #[arg(long, global = true, env = "STRAND_NAMESPACE", default_value = Namespace::DEFAULT)]
    namespace: String,
    /// Who acts (claims, closes). Default: $STRAND_ACTOR, $BEADS_ACTOR, $GC_SESSION_NAME, $GC_AGENT, then the OS user.
    #[arg(long, global = true)]
    actor: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Read consistency. `linearizable` (default) sees every write acknowledged before the read
    /// began; `serializable` answers from the contacted node's replica at once and MAY BE STALE.
    #[arg(long, global = true, value_enum, default_value_t = ConsistencyArg::Linearizable)]
    consistency: ConsistencyArg,
    /// How long to keep retrying while no node answers or no leader is elected.
    #[arg(long, global = true, default_value = "15s", value_parser = humantime::parse_duration)]
    timeout: Duration,
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
    /// Dependencies between beads.
    #[command(subcommand)]
    Dep(beads::DepCommand),
    /// Cluster administration.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Run one cluster member.
    #[cfg(feature = "node")]
    Node(run_node::NodeArgs),
    /// Start a local cluster of child processes for trying things out; Ctrl-C stops it.
    #[cfg(feature = "node")]
    Dev(run_node::DevArgs),
    /// Benchmarks against a running cluster.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// What a command's failure maps to.
pub enum Failure {
    /// Refused or failed: exit 1.
    Refused(String),
    /// Usage error: exit 2.
    Usage(String),
    /// Cluster unavailable: exit 3.
    Unavailable(String),
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Failure {
        match error {
            ClientError::Unavailable(_) => Failure::Unavailable(error.to_string()),
            ClientError::Refused(_) | ClientError::Failed(_) => Failure::Refused(error.to_string()),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure::Refused(format!("{error:#}"))
    }
}

/// The result of a command: `Ok(true)` success, `Ok(false)` nothing done (exit 1, no message).
pub type Outcome = Result<bool, Failure>;

impl Cli {
    /// The actor, resolved through the chain of BEADS-SPEC §3.
    pub fn actor(&self) -> String {
        if let Some(actor) = &self.actor {
            return actor.clone();
        }
        for variable in ["STRAND_ACTOR", "BEADS_ACTOR", "GC_SESSION_NAME", "GC_AGENT", "USER", "USERNAME"] {
            if let Ok(value) = std::env::var(variable)
                && !value.is_empty()
            {
                return value;
            }
        }
        "unknown".into()
    }

    /// A client with the global flags.
    pub fn client(&self) -> Result<Client, Failure> {
        let mut config = ClientConfig::new(self.endpoints.clone());
        config.namespace = Namespace(self.namespace.clone());
        config.consistency = match self.consistency {
            ConsistencyArg::Linearizable => Consistency::Linearizable,
            ConsistencyArg::Serializable => Consistency::Serializable,
        };
        config.deadline = self.timeout;
        config.attempt_timeout = self.timeout.min(Duration::from_secs(5));
        Client::new(config).map_err(|error| Failure::Usage(error.to_string()))
    }
}

async fn dispatch(cli: &Cli) -> Outcome {
    match &cli.command {
        Command::Bead(command) => beads::run(cli, command).await,
        Command::Dep(command) => beads::run_dep(cli, command).await,
        Command::Cluster(command) => cluster::run(cli, command).await,
        #[cfg(feature = "node")]
        Command::Node(args) => run_node::run_node(args).await,
        #[cfg(feature = "node")]
        Command::Dev(args) => run_node::run_dev(args).await,
        Command::Bench(command) => bench::run(cli, command).await,
    }
}

/// Parses the command line; a usage error becomes one line on stderr and exit code 2.
fn parse() -> Result<Cli, ExitCode> {
    let command = Cli::command().mut_subcommands(|subcommand| subcommand.after_help(EXIT_CODES));
    let parsed = command.try_get_matches().and_then(|matches| Cli::from_arg_matches(&matches));
    match parsed {
        Ok(cli) => Ok(cli),
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            Err(ExitCode::SUCCESS)
        }
        Err(error) => {
            let rendered = error.render().to_string();
            let first = rendered.lines().next().unwrap_or("error: invalid command line").trim_end();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("error: {first}; see `strand --help`");
            Err(ExitCode::from(2))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(dispatch(&cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Failure::Refused(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Unavailable(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(3)
        }
    }
}
