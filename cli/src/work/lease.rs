//! `strand lease renew|release|keepalive`: an agent's side of a leased claim. A claim with
//! `--lease` answers a lease id, the fencing token the agent's writes carry (`--lease-id`,
//! `$STRAND_LEASE_ID`); the leader expires a lease nobody renewed, and the bead goes back to
//! `open` for another agent. `keepalive` renews every third of the lease until it is killed, as
//! `etcdctl lease keep-alive` does. Renewing a bead that holds no lease says why that may be and
//! what to do.

use std::time::Duration;

use api::client::ClientError;
use api::command::Command;
use api::model::BeadId;
use api::outcome::Refusal;
use api::printable::printable;
use clap::Subcommand;

use crate::answers::one_bead;
use crate::output::{print_bead_object, write_bead_line};
use crate::{Cli, CommandResult, Failure};

/// `strand lease ...`.
#[derive(Subcommand, Debug)]
pub enum LeaseCommand {
    /// Renew your lease on a bead for its length again (JSON: the bead, with its lease).
    Renew(LeaseArgs),
    /// Give up your leased claim: the bead goes back to `open`, unassigned (JSON: the bead).
    Release(LeaseArgs),
    /// Renew your lease every third of its length until killed (one line per renewal; with
    /// --json, one JSON bead per line). Exit 1 when the lease is lost.
    #[command(visible_alias = "keep-alive")]
    Keepalive(LeaseArgs),
}

/// The bead, and the lease it must still be held under.
#[derive(clap::Args, Debug)]
pub struct LeaseArgs {
    /// The bead.
    id: String,
}

/// The pause after a failed renewal before the next try.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// What a refused renewal of `id` means to the agent renewing it: a bead that holds no lease
/// says why that may be and what to do; anything else as the cluster said it.
fn renewal_failure(id: &str, error: ClientError) -> Failure {
    match error {
        ClientError::Refused(Refusal::NotLeaseHolder { holder, .. }) if holder.is_empty() => Failure::Refused(format!(
            "{} holds no lease (it was claimed without --lease, or its lease expired); claim it with --lease to keep one alive",
            printable(id)
        )),
        other => Failure::from(other),
    }
}

/// Runs a `lease` command.
pub async fn run(cli: &Cli, command: &LeaseCommand) -> CommandResult {
    let client = cli.client()?;
    let (LeaseCommand::Renew(args) | LeaseCommand::Release(args) | LeaseCommand::Keepalive(args)) = command;
    let id = BeadId::from(args.id.as_str());
    let lease_id = cli.lease_id();
    let renew = || Command::LeaseRenew(api::command::LeaseRenew { id: id.clone(), lease_id });
    match command {
        LeaseCommand::Renew(_) => {
            let renewed = client.execute(renew()).await.map_err(|error| renewal_failure(&args.id, error))?;
            print_bead_object(&one_bead(renewed, "bead")?, cli.json);
        }
        LeaseCommand::Release(_) => {
            let released = Command::LeaseRelease(api::command::LeaseRelease { id: id.clone(), lease_id });
            print_bead_object(&one_bead(client.execute(released).await?, "bead")?, cli.json);
        }
        LeaseCommand::Keepalive(_) => loop {
            let pause = match client.execute(renew()).await.map_err(|error| renewal_failure(&args.id, error)) {
                Ok(answer) => {
                    let bead = one_bead(answer, "bead")?;
                    write_bead_line(&bead, cli.json);
                    let ttl_ms = bead.lease.as_ref().map_or(3000, |lease| lease.ttl_ms);
                    Duration::from_millis(ttl_ms / 3)
                }
                // The cluster is away: try again soon, while the lease may still hold.
                Err(Failure::Unavailable(message)) => {
                    eprintln!("warning: {}; retrying", printable(&message));
                    RETRY_PAUSE
                }
                Err(lost) => return Err(lost),
            };
            tokio::time::sleep(pause).await;
        },
    }
    Ok(true)
}
