//! The bead commands, with `bd`'s flags (BEADS-SPEC §5): create, show, update, claim, close,
//! reopen, delete, list, ready, children and `dep add|remove|list`.

use std::collections::{BTreeMap, BTreeSet};

use api::command::{Command, CreateBead, DepDirection, ListFilter, ListSort, Query, ReadyFilter, UpdateBead};
use api::convert::{parse_key_value, parse_status};
use api::model::{Actor, BeadId, DepType, Status};
use api::outcome::Outcome as Answer;
use clap::{Args, Subcommand};

use crate::orchestration::beads_of;
use crate::output::{print_bead, print_beads, print_dependencies};
use crate::{Cli, Failure, Outcome};

#[derive(Subcommand, Debug)]
pub enum BeadCommand {
    /// Create a bead and print it.
    Create(CreateArgs),
    /// Show beads (JSON: an array).
    Show {
        /// Bead ids.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Change fields of a bead; unset flags leave fields unchanged.
    Update(UpdateArgs),
    /// Claim a bead for the actor: exit 1 if someone else holds it.
    Claim {
        /// The bead.
        id: String,
    },
    /// Close beads (closing a closed bead succeeds).
    Close {
        /// Bead ids.
        #[arg(required = true)]
        ids: Vec<String>,
        /// Why.
        #[arg(long, short)]
        reason: Option<String>,
    },
    /// Reopen a closed bead.
    Reopen {
        /// The bead.
        id: String,
    },
    /// Delete a bead and its dependency edges (needs --force).
    Delete {
        /// The bead.
        id: String,
        /// Really delete.
        #[arg(long)]
        force: bool,
    },
    /// List beads matching filters (closed ones only with --all or --status closed).
    List(ListArgs),
    /// Ready work: open, unblocked, not deferred, in priority order.
    Ready(ReadyArgs),
    /// Direct children of a bead.
    Children {
        /// The parent.
        id: String,
        /// Include closed children.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Title (required).
    title: String,
    /// Type (task, bug, feature, epic, convoy, message, ...).
    #[arg(long = "type", short = 't', default_value = "")]
    bead_type: String,
    /// Priority 0 (highest) to 4.
    #[arg(long, short)]
    priority: Option<u8>,
    /// Description.
    #[arg(long, short, default_value = "")]
    description: String,
    /// Assignee.
    #[arg(long, short, default_value = "")]
    assignee: String,
    /// Sender (messages).
    #[arg(long, default_value = "")]
    from: String,
    /// Beads this one waits for: ID or TYPE:ID, comma-separated.
    #[arg(long, value_delimiter = ',')]
    deps: Vec<String>,
    /// Labels, comma-separated.
    #[arg(long, short, value_delimiter = ',')]
    labels: Vec<String>,
    /// Parent bead.
    #[arg(long)]
    parent: Option<String>,
    /// Metadata as a JSON object of strings, e.g. '{"k":"v"}'.
    #[arg(long)]
    metadata: Option<String>,
    /// Step id or formula name.
    #[arg(long = "ref", default_value = "")]
    reference: String,
    /// Create a wisp (ephemeral).
    #[arg(long)]
    ephemeral: bool,
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// The beads (each is updated on its own; with several, the answer is an array).
    #[arg(required = true)]
    ids: Vec<String>,
    #[arg(long)]
    title: Option<String>,
    #[arg(long)]
    status: Option<String>,
    #[arg(long = "type")]
    bead_type: Option<String>,
    #[arg(long)]
    priority: Option<u8>,
    #[arg(long)]
    description: Option<String>,
    /// New parent ("" clears it).
    #[arg(long)]
    parent: Option<String>,
    /// New assignee ("" unassigns).
    #[arg(long)]
    assignee: Option<String>,
    /// Set a metadata key, k=v (repeatable).
    #[arg(long = "set-metadata")]
    set_metadata: Vec<String>,
    /// Remove a metadata key (repeatable).
    #[arg(long = "unset-metadata")]
    unset_metadata: Vec<String>,
    /// Add a label (repeatable).
    #[arg(long = "add-label")]
    add_label: Vec<String>,
    /// Remove a label (repeatable).
    #[arg(long = "remove-label")]
    remove_label: Vec<String>,
    /// Claim the bead for the actor, atomically with the other changes.
    #[arg(long)]
    claim: bool,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Beads with this label (repeatable: all of them).
    #[arg(long)]
    label: Vec<String>,
    #[arg(long)]
    assignee: Option<String>,
    #[arg(long)]
    status: Option<String>,
    #[arg(long = "type")]
    bead_type: Option<String>,
    /// Include closed beads; needed for a list with no filter.
    #[arg(long)]
    all: bool,
    /// At most N (0: unlimited).
    #[arg(long, default_value_t = 0)]
    limit: u32,
    /// Direct children of this parent.
    #[arg(long)]
    parent: Option<String>,
    /// Metadata key=value (repeatable).
    #[arg(long = "metadata-field")]
    metadata_field: Vec<String>,
    /// created_desc (newest first, default) or created_asc.
    #[arg(long, default_value = "created_desc")]
    sort: String,
}

#[derive(Args, Debug)]
pub struct ReadyArgs {
    #[arg(long)]
    assignee: Option<String>,
    /// Only unassigned beads.
    #[arg(long)]
    unassigned: bool,
    /// Beads with this label (repeatable: all of them).
    #[arg(long)]
    label: Vec<String>,
    /// Beads with any of these labels.
    #[arg(long = "label-any", value_delimiter = ',')]
    label_any: Vec<String>,
    /// Beads without this label (repeatable).
    #[arg(long = "exclude-label")]
    exclude_label: Vec<String>,
    /// Metadata key=value (repeatable).
    #[arg(long = "metadata-field")]
    metadata_field: Vec<String>,
    /// Beads that have this metadata key (repeatable).
    #[arg(long = "has-metadata-key")]
    has_metadata_key: Vec<String>,
    /// Below this parent, at any depth.
    #[arg(long)]
    parent: Option<String>,
    /// Only these types (repeatable).
    #[arg(long = "type")]
    bead_type: Vec<String>,
    /// Not these types (repeatable).
    #[arg(long = "exclude-type")]
    exclude_type: Vec<String>,
    /// Include wisps.
    #[arg(long)]
    include_ephemeral: bool,
    /// At most N (0: unlimited).
    #[arg(long, default_value_t = api::limits::READY_LIMIT_DEFAULT)]
    limit: u32,
    /// Claim the first ready bead atomically; exit 1 if none.
    #[arg(long)]
    claim: bool,
}

#[derive(Subcommand, Debug)]
pub enum DepCommand {
    /// Make ISSUE wait for DEPENDS_ON (re-adding updates the type).
    Add {
        issue: String,
        depends_on: String,
        /// blocks (default), parent-child, conditional-blocks, waits-for, related, ...
        #[arg(long = "type", short = 't', default_value = DepType::BLOCKS)]
        dep_type: String,
    },
    /// Remove an edge (a missing edge is fine).
    Remove { issue: String, depends_on: String },
    /// List edges of a bead.
    List {
        id: String,
        /// down: what it depends on; up: what depends on it.
        #[arg(long, default_value = "down")]
        direction: String,
    },
}

fn usage(message: String) -> Failure {
    Failure::Usage(message)
}

fn key_values(pairs: &[String], flag: &str) -> Result<Vec<(String, String)>, Failure> {
    pairs
        .iter()
        .map(|pair| parse_key_value(pair).map_err(|_| usage(format!("{flag} {pair:?} is not key=value"))))
        .collect()
}

fn parse_metadata_json(text: &str) -> Result<BTreeMap<String, String>, Failure> {
    serde_json::from_str(text).map_err(|error| {
        usage(format!("--metadata is not a JSON object of strings ({error}); write it like '{{\"key\":\"value\"}}'"))
    })
}

fn status_arg(text: &str) -> Result<Status, Failure> {
    parse_status(text).map_err(|refusal| usage(refusal.to_string()))
}

fn create_command(args: &CreateArgs) -> Result<Command, Failure> {
    let metadata = args.metadata.as_deref().map(parse_metadata_json).transpose()?.unwrap_or_default();
    Ok(Command::Create(CreateBead {
        title: args.title.clone(),
        description: args.description.clone(),
        bead_type: args.bead_type.clone(),
        priority: args.priority,
        assignee: args.assignee.clone(),
        from: args.from.clone(),
        parent_id: args.parent.as_deref().filter(|parent| !parent.is_empty()).map(BeadId::from),
        reference: args.reference.clone(),
        needs: args.deps.iter().filter(|dep| !dep.is_empty()).cloned().collect(),
        labels: args.labels.iter().filter(|label| !label.is_empty()).cloned().collect(),
        metadata,
        ephemeral: args.ephemeral,
        defer_until: None,
        requested_status: None,
    }))
}

fn update_command(cli: &Cli, args: &UpdateArgs, id: &str) -> Result<Command, Failure> {
    let mut metadata: BTreeMap<String, Option<String>> =
        key_values(&args.set_metadata, "--set-metadata")?.into_iter().map(|(key, value)| (key, Some(value))).collect();
    metadata.extend(args.unset_metadata.iter().map(|key| (key.clone(), None)));
    Ok(Command::Update(UpdateBead {
        id: BeadId::from(id),
        title: args.title.clone(),
        description: args.description.clone(),
        status: args.status.as_deref().map(status_arg).transpose()?,
        bead_type: args.bead_type.clone(),
        priority: args.priority,
        assignee: args.assignee.clone(),
        parent_id: args.parent.as_deref().map(BeadId::from),
        add_labels: args.add_label.iter().cloned().collect::<BTreeSet<_>>(),
        remove_labels: args.remove_label.iter().cloned().collect(),
        metadata,
        claim_for: args.claim.then(|| Actor(cli.actor())),
    }))
}

fn list_query(args: &ListArgs) -> Result<Query, Failure> {
    let sort = match args.sort.as_str() {
        "created_desc" => ListSort::CreatedDesc,
        "created_asc" => ListSort::CreatedAsc,
        other => return Err(usage(format!("--sort {other:?} is unknown; use created_asc or created_desc"))),
    };
    Ok(Query::List(ListFilter {
        statuses: args.status.as_deref().map(status_arg).transpose()?.into_iter().collect(),
        assignee: args.assignee.clone(),
        labels_all: args.label.clone(),
        bead_type: args.bead_type.clone(),
        parent: args.parent.as_deref().map(BeadId::from),
        metadata_equals: key_values(&args.metadata_field, "--metadata-field")?,
        all: args.all,
        limit: args.limit,
        sort,
    }))
}

fn ready_filter(args: &ReadyArgs) -> Result<ReadyFilter, Failure> {
    Ok(ReadyFilter {
        assignee: args.assignee.clone(),
        unassigned: args.unassigned,
        labels_all: args.label.clone(),
        labels_any: args.label_any.clone(),
        exclude_labels: args.exclude_label.clone(),
        metadata_equals: key_values(&args.metadata_field, "--metadata-field")?,
        metadata_has_keys: args.has_metadata_key.clone(),
        parent: args.parent.as_deref().map(BeadId::from),
        types: args.bead_type.clone(),
        exclude_types: args.exclude_type.clone(),
        include_ephemeral: args.include_ephemeral,
        limit: args.limit,
    })
}

/// Runs a bead command.
pub async fn run(cli: &Cli, command: &BeadCommand) -> Outcome {
    let client = cli.client()?;
    let json = cli.json;
    let write = |command: Command| async { client.execute(command).await.map_err(Failure::from) };
    match command {
        BeadCommand::Create(args) => print_one(write(create_command(args)?).await?, json),
        BeadCommand::Update(args) => {
            let commands = args.ids.iter().map(|id| update_command(cli, args, id)).collect::<Result<Vec<_>, _>>()?;
            if commands.len() == 1 {
                return print_one(write(commands.into_iter().next().expect("one command")).await?, json);
            }
            let mut updated = Vec::with_capacity(commands.len());
            for command in commands {
                updated.extend(beads_of(write(command).await?));
            }
            print_beads(&updated, json);
            Ok(true)
        }
        BeadCommand::Claim { id } => {
            let command = Command::Claim { id: BeadId::from(id.as_str()), actor: Actor(cli.actor()) };
            print_one(write(command).await?, json)
        }
        BeadCommand::Close { ids, reason } => {
            let command = Command::Close {
                ids: ids.iter().map(|id| BeadId::from(id.as_str())).collect(),
                reason: reason.clone(),
            };
            print_many(write(command).await?, json)
        }
        BeadCommand::Reopen { id } => print_one(write(Command::Reopen { id: BeadId::from(id.as_str()) }).await?, json),
        BeadCommand::Delete { id, force } => {
            if !force {
                return Err(usage(format!("refusing to delete {id} without --force")));
            }
            write(Command::Delete { id: BeadId::from(id.as_str()) }).await?;
            if json {
                crate::output::print_value(&serde_json::json!({ "deleted": id }));
            } else {
                println!("deleted {id}");
            }
            Ok(true)
        }
        BeadCommand::Show { ids } => {
            let query = Query::Get { ids: ids.iter().map(|id| BeadId::from(id.as_str())).collect() };
            print_many(client.query(query).await?, json)
        }
        BeadCommand::List(args) => print_many(client.query(list_query(args)?).await?, json),
        BeadCommand::Ready(args) => {
            let filter = ready_filter(args)?;
            if args.claim {
                let beads = beads_of(write(Command::ClaimNext { actor: Actor(cli.actor()), filter }).await?);
                print_beads(&beads, json);
                return Ok(!beads.is_empty());
            }
            let now = api::model::Timestamp(0);
            print_many(client.query(Query::Ready { filter, now }).await?, json)
        }
        BeadCommand::Children { id, all } => {
            let query = Query::Children { parent: BeadId::from(id.as_str()), include_closed: *all };
            print_many(client.query(query).await?, json)
        }
    }
}

fn print_one(answer: Answer, json: bool) -> Outcome {
    match answer {
        Answer::Bead(bead) => print_bead(&bead, json),
        other => print_beads(&beads_of(other), json),
    }
    Ok(true)
}

fn print_many(answer: Answer, json: bool) -> Outcome {
    print_beads(&beads_of(answer), json);
    Ok(true)
}

/// Runs a `dep` command.
pub async fn run_dep(cli: &Cli, command: &DepCommand) -> Outcome {
    let client = cli.client()?;
    match command {
        DepCommand::Add { issue, depends_on, dep_type } => {
            let command = Command::DepAdd {
                issue_id: BeadId::from(issue.as_str()),
                depends_on_id: BeadId::from(depends_on.as_str()),
                dep_type: DepType(dep_type.clone()),
            };
            client.execute(command).await?;
            if !cli.json {
                println!("{issue} now depends on {depends_on} ({dep_type})");
            }
            Ok(true)
        }
        DepCommand::Remove { issue, depends_on } => {
            let command = Command::DepRemove {
                issue_id: BeadId::from(issue.as_str()),
                depends_on_id: BeadId::from(depends_on.as_str()),
            };
            client.execute(command).await?;
            if !cli.json {
                println!("{issue} no longer depends on {depends_on}");
            }
            Ok(true)
        }
        DepCommand::List { id, direction } => {
            let direction = match direction.as_str() {
                "down" => DepDirection::Down,
                "up" => DepDirection::Up,
                other => return Err(usage(format!("--direction {other:?} is unknown; use down or up"))),
            };
            let rows = match client.query(Query::DepList { id: BeadId::from(id.as_str()), direction }).await? {
                Answer::Dependencies(rows) => rows,
                _ => Vec::new(),
            };
            print_dependencies(&rows, cli.json);
            Ok(true)
        }
    }
}
