//! `strand convoy`: a convoy is a bead of type `convoy` whose children are the work it tracks
//! (docs/beads.md §7). It closes by itself when its last open child closes, unless it is labelled
//! `owned`; `land` force-closes it and `check` applies the auto-close rule to every open convoy.

use api::command::Command;
use api::model::BeadId;
use api::outcome::Outcome;
use clap::Subcommand;

use crate::answers::{beads_of, unexpected};
use crate::output::{bead_line, print_bead, print_beads, print_progress};
use crate::{Cli, CommandResult, Failure};

#[derive(Subcommand, Debug)]
pub enum ConvoyCommand {
    /// Create a convoy tracking these beads (they become its children) and print it.
    Create {
        /// Its title.
        title: String,
        /// The beads it tracks.
        ids: Vec<String>,
        /// Label it `owned`: it never closes by itself (use `convoy land`).
        #[arg(long)]
        owned: bool,
    },
    /// Add beads to an open convoy.
    Add {
        /// The convoy.
        convoy: String,
        /// The beads.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// A convoy's progress: closed/total and each child's state
    /// (JSON: {root, children, current, closed, total}).
    Status {
        /// The convoy.
        convoy: String,
    },
    /// Open children with no assignee, of one convoy or of every open convoy.
    Stranded {
        /// The convoy; default: every open convoy.
        convoy: Option<String>,
    },
    /// Force-close a convoy, whatever its children's state.
    Land {
        /// The convoy.
        convoy: String,
        /// Why.
        #[arg(long, short)]
        reason: Option<String>,
    },
    /// Close every open, not-owned convoy whose children are all closed; print those closed.
    Check,
}

fn ids_of(ids: &[String]) -> Vec<BeadId> {
    ids.iter().map(|id| BeadId::from(id.as_str())).collect()
}

/// Runs a `convoy` command.
pub async fn run(cli: &Cli, command: &ConvoyCommand) -> CommandResult {
    let client = cli.client()?;
    let json = cli.json;
    let write = |command: Command| async { client.execute(command).await.map_err(Failure::from) };
    match command {
        ConvoyCommand::Create { title, ids, owned } => {
            let command = Command::ConvoyCreate(api::command::ConvoyCreate {
                title: title.clone(),
                children: ids_of(ids),
                owned: *owned,
            });
            print_convoys(&beads_of(write(command).await?), json);
        }
        ConvoyCommand::Add { convoy, ids } => {
            let command = Command::ConvoyAdd(api::command::ConvoyAdd {
                id: BeadId::from(convoy.as_str()),
                children: ids_of(ids),
            });
            print_convoys(&beads_of(write(command).await?), json);
        }
        ConvoyCommand::Status { convoy } => {
            let answer = client
                .query(api::commands::convoy_status::ConvoyStatus { id: BeadId::from(convoy.as_str()) }.into())
                .await?;
            let Outcome::Progress(progress) = answer else { return Err(unexpected(&answer)) };
            print_progress(&progress, "children", json);
        }
        ConvoyCommand::Stranded { convoy } => {
            let query = api::commands::stranded::Stranded { convoy: convoy.as_deref().map(BeadId::from) }.into();
            print_beads(&beads_of(client.query(query).await?), json);
        }
        ConvoyCommand::Land { convoy, reason } => {
            let command = Command::ConvoyLand(api::command::ConvoyLand {
                id: BeadId::from(convoy.as_str()),
                reason: reason.clone(),
            });
            print_convoys(&beads_of(write(command).await?), json);
        }
        ConvoyCommand::Check => {
            let closed = beads_of(write(Command::ConvoyCheck(api::command::ConvoyCheck)).await?);
            if json {
                print_beads(&closed, true);
            } else {
                println!("closed {} convoys", closed.len());
                closed.iter().for_each(|convoy| println!("  {}", bead_line(convoy)));
            }
        }
    }
    Ok(true)
}

/// A convoy answer: the bead object in JSON (as `create` prints it), its line in text.
fn print_convoys(convoys: &[api::model::Bead], json: bool) {
    match convoys {
        [convoy] => print_bead(convoy, json),
        convoys => print_beads(convoys, json),
    }
}
