//! `strand-node`, the full build: every command of `strand` (the `cli` library), and those that run
//! cluster members or open a data directory in process: `node` and `dev` (`run_node`, whose log
//! `log_limit` rate-limits) and `snapshot` (`snapshot`). Only this crate names `node` and
//! `raft-store`; the client build `strand` never loads them (see the library's header).

mod log_limit;
mod run_node;
mod snapshot;

use cli::{Cli, MemberCommand, MemberFuture};

/// A node allocates and frees on every message and every applied entry, and glibc's allocator
/// took a fifth to a quarter of a node's CPU in a claim benchmark (docs/benchmarks.md, "Where the
/// CPU goes").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs a member command in this process.
fn member_commands<'a>(cli: &'a Cli, command: MemberCommand<'a>) -> MemberFuture<'a> {
    Box::pin(async move {
        match command {
            MemberCommand::Node(args) => run_node::run_node(args, cli.token()?).await,
            MemberCommand::Dev(args) => run_node::run_dev(args).await,
            MemberCommand::Snapshot(command) => snapshot::run(cli, command).await,
        }
    })
}

fn main() -> std::process::ExitCode {
    cli::main(Some(member_commands))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_client_and_the_node_agree_on_the_default_port() {
        assert_eq!(cli::DEFAULT_PORT, node::config::DEFAULT_PORT);
    }
}
