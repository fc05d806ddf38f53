//! The bead commands with `bd`'s flags, aliases, exit codes and JSON shapes: create, show, update,
//! assign, claim, release, close, reopen, delete, list, ready, children and `dep add|remove|list`.
//! Where bd prints an array (show, update, close, reopen, list, ready) Strand prints an array;
//! where it prints one object (create, assign, claim, delete, dep add/remove, and `release`, which
//! bd lacks) it prints one with `schema_version: 1`.
//!
//! This folder holds what a user does to beads themselves, past these commands: labels and
//! comments (`annotate`), gates (`gate`, with their await fields in `gate_fields`), `list` and
//! `ready` as bd has them (`listing`), `query` and `prune`.

pub mod annotate;
pub mod gate;
pub mod gate_fields;
pub mod listing;
pub mod prune;
pub mod query;

use std::collections::{BTreeMap, BTreeSet};

use api::client::Client;
use api::command::{Command, CreateBead, DepDirection, Fence, ListFilter, Query, ReadyFilter, Txn, UpdateBead};
use api::commands::children::Children;
use api::commands::dep_list::DepList;
use api::commands::get::Get;
use api::commands::get::Lookup;
use api::commands::ready::Ready;
use api::convert::{parse_key_value, parse_status};
use api::model::{Actor, Bead, BeadId, DepType, Status, Timestamp};
use api::outcome::Outcome;
use api::printable::printable;
use clap::{Args, Subcommand};

use crate::answers::beads_of;
use crate::beads::listing::{LIST_LIMIT_DEFAULT, Listing, LocalFilter, ReadySort, SortOrder, hidden_types, window};
use crate::output::{
    BD_DEFAULT_PRIORITY, print_bead_object, print_beads, print_details, print_value, print_with_counts,
};
use crate::values::{now_ms, parse_lease, parse_priority, parse_time};
use crate::{Cli, CommandResult, Failure};

#[derive(Subcommand, Debug)]
pub enum BeadCommand {
    /// Create a bead and print it (JSON: one object).
    #[command(visible_alias = "new")]
    Create(Box<CreateArgs>),
    /// Show beads (JSON: an array, with each dependency as the bead it points at).
    #[command(visible_alias = "view")]
    Show(ShowArgs),
    /// Change fields of beads; unset flags leave fields unchanged (JSON: an array).
    Update(Box<UpdateArgs>),
    /// Claim a bead for the actor: exit 1 if someone else holds it. With `--lease`, the claim
    /// lapses unless renewed (`strand lease renew|keepalive`); its JSON carries the lease id, the
    /// fencing token for `--lease-id`.
    Claim {
        /// The bead.
        id: String,
        /// A lease: the claim lapses this long after its grant or last renewal (1s to 7d; 10m, 1h).
        #[arg(long, value_name = "DURATION", value_parser = parse_lease)]
        lease: Option<u64>,
    },
    /// Give back a claim you hold without a lease: the bead goes back to open, unassigned (JSON:
    /// one object). Exit 1 if someone else holds it, naming the holder; a leased claim is given
    /// back with `strand lease release`.
    Release {
        /// The bead.
        id: String,
    },
    /// Assign a bead to someone ("" unassigns): bd's shorthand for `update ID --assignee NAME`
    /// (JSON: one object).
    Assign {
        /// The bead.
        id: String,
        /// The assignee.
        name: String,
        /// Only if the bead is still at this revision (exit 1 naming the current one otherwise).
        #[arg(long, value_name = "N")]
        if_revision: Option<u64>,
    },
    /// Close beads (closing a closed bead succeeds; JSON: an array).
    #[command(visible_alias = "done")]
    Close(CloseArgs),
    /// Reopen beads: any status goes back to open (an open bead is left as it is).
    Reopen {
        /// The beads.
        #[arg(required = true)]
        ids: Vec<String>,
        /// Why (printed; Strand keeps no comments).
        #[arg(long, short)]
        reason: Option<String>,
    },
    /// Delete beads and their dependency edges (without --force: a preview).
    Delete(DeleteArgs),
    /// List beads: open ones by default, bd's order, at most 50 (`--limit 0`: all, paged).
    List(Box<ListArgs>),
    /// Ready work: open, unblocked, not deferred, in priority order.
    Ready(Box<ReadyArgs>),
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
pub struct ShowArgs {
    /// Bead ids.
    ids: Vec<String>,
    /// More bead ids.
    #[arg(long = "id")]
    more_ids: Vec<String>,
    /// Accepted for bd compatibility; the text form is always the long one.
    #[arg(long, hide = true)]
    long: bool,
    /// One line per bead.
    #[arg(long)]
    short: bool,
}

#[derive(Args, Debug)]
pub struct CloseArgs {
    /// Bead ids.
    #[arg(required = true)]
    ids: Vec<String>,
    /// Why (also --resolution, -m/--message, --comment).
    #[arg(long, short, alias = "resolution", alias = "message", alias = "comment", short_alias = 'm')]
    reason: Option<String>,
    /// Close even when blocked or pinned: Strand never refuses those, so this changes nothing.
    #[arg(long, short)]
    force: bool,
    /// Apply only if the bead (one id) is still at this revision.
    #[arg(long = "if-revision")]
    if_revision: Option<u64>,
    /// Accepted for bd compatibility; Strand records no session.
    #[arg(long, hide = true)]
    session: Option<String>,
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// Bead ids.
    #[arg(required = true)]
    ids: Vec<String>,
    /// Really delete (without it, print what would be deleted and exit 0, as bd does).
    #[arg(long, short)]
    force: bool,
    /// Print what would be deleted.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Apply only if the bead (one id) is still at this revision.
    #[arg(long = "if-revision")]
    if_revision: Option<u64>,
    /// Also delete every bead that depends on these, and on those, all in one transaction.
    #[arg(long)]
    cascade: bool,
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Title (or --title).
    #[arg(value_name = "TITLE")]
    positional_title: Option<String>,
    /// Title.
    #[arg(long)]
    title: Option<String>,
    /// Keep this id instead of taking the next `<prefix>-<n>` (it must be free): letters, digits,
    /// '-', '_', '.' and ':', starting with a letter or digit (st-12, bd-a3f8, gc-abc.1.3).
    #[arg(long)]
    id: Option<String>,
    /// Create a whole graph plan from this JSON file in one transaction (Gas City's
    /// `ApplyGraphPlan`; JSON: {"ids": {key: id}}).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["positional_title", "title", "id"])]
    graph: Option<std::path::PathBuf>,
    /// Type (task, bug, feature, epic, convoy, message, ...).
    #[arg(long = "type", short = 't', default_value = "")]
    bead_type: String,
    /// Priority 0 (highest) to 4, or P0 to P4; 2 when not given, as in bd.
    #[arg(long, short, value_parser = parse_priority)]
    priority: Option<u8>,
    /// Description (also --body, -m/--message).
    #[arg(long, short, default_value = "", alias = "body", alias = "message", short_alias = 'm')]
    description: String,
    /// Working notes.
    #[arg(long, default_value = "")]
    notes: String,
    /// Print only the new id.
    #[arg(long)]
    silent: bool,
    /// Not ready before this time (RFC 3339, or +6h, +2d, +1w from now).
    #[arg(long)]
    defer: Option<String>,
    /// Assignee.
    #[arg(long, short, default_value = "")]
    assignee: String,
    /// Sender (messages).
    #[arg(long, default_value = "")]
    from: String,
    /// Beads this one waits for: ID or TYPE:ID, comma-separated.
    #[arg(long, value_delimiter = ',')]
    deps: Vec<String>,
    /// Labels, comma-separated (also --label).
    #[arg(long, short, value_delimiter = ',', alias = "label")]
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
    #[arg(long, conflicts_with = "no_history")]
    ephemeral: bool,
    /// bd's no-history bead: durable and not a wisp (Strand keeps no per-bead history anyway).
    #[arg(long)]
    no_history: bool,
    /// bd's design notes, kept as metadata `design`.
    #[arg(long)]
    design: Option<String>,
    /// bd's acceptance criteria, kept as metadata `acceptance_criteria`.
    #[arg(long = "acceptance", alias = "acceptance-criteria")]
    acceptance: Option<String>,
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// The beads (each is updated on its own; with several, the answer is an array).
    #[arg(required = true)]
    ids: Vec<String>,
    #[arg(long)]
    title: Option<String>,
    #[arg(long, short)]
    status: Option<String>,
    #[arg(long = "type", short = 't')]
    bead_type: Option<String>,
    /// 0 to 4, or P0 to P4.
    #[arg(long, short, value_parser = parse_priority)]
    priority: Option<u8>,
    /// New description (also --body, -m/--message).
    #[arg(long, short, alias = "body", alias = "message", short_alias = 'm')]
    description: Option<String>,
    /// New working notes.
    #[arg(long)]
    notes: Option<String>,
    /// Text appended to the notes on a new line.
    #[arg(long = "append-notes")]
    append_notes: Option<String>,
    /// Not ready before this time ("" clears it).
    #[arg(long)]
    defer: Option<String>,
    /// Apply only if the bead is still at this revision (refused with its current one otherwise).
    #[arg(long = "if-revision")]
    if_revision: Option<u64>,
    /// Accepted for bd compatibility; Strand records no session.
    #[arg(long, hide = true)]
    session: Option<String>,
    /// New parent ("" clears it).
    #[arg(long)]
    parent: Option<String>,
    /// New assignee ("" unassigns).
    #[arg(long, short)]
    assignee: Option<String>,
    /// Set a metadata key, k=v (repeatable).
    #[arg(long = "set-metadata")]
    set_metadata: Vec<String>,
    /// Remove a metadata key (repeatable).
    #[arg(long = "unset-metadata")]
    unset_metadata: Vec<String>,
    /// Add labels (repeatable, comma-separated; also --label).
    #[arg(long = "add-label", alias = "label", short = 'l', value_delimiter = ',')]
    add_label: Vec<String>,
    /// Replace every label with these (comma-separated).
    #[arg(long = "set-labels", value_delimiter = ',')]
    set_labels: Option<Vec<String>>,
    /// Remove labels (repeatable, comma-separated).
    #[arg(long = "remove-label", value_delimiter = ',')]
    remove_label: Vec<String>,
    /// Claim the bead for the actor, atomically with the other changes.
    #[arg(long)]
    claim: bool,
    /// With --claim: a lease, so the claim lapses unless renewed (1s to 7d; 10m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_lease, requires = "claim")]
    lease: Option<u64>,
    /// Metadata as a JSON object (or @FILE), merged key by key into the bead's.
    #[arg(long, conflicts_with_all = ["set_metadata", "unset_metadata"])]
    metadata: Option<String>,
    /// Apply only if the bead is assigned to this agent now ("" for unassigned); exit 13 if not.
    #[arg(long = "if-assignee", value_name = "AGENT")]
    if_assignee: Option<String>,
    /// Apply only if the bead is in this status now; exit 13 if not.
    #[arg(long = "if-status", value_name = "STATUS")]
    if_status: Option<String>,
    /// Make the bead a wisp (refused on a no-history bead: clear that with --history).
    #[arg(long, conflicts_with_all = ["persistent", "no_history"])]
    ephemeral: bool,
    /// Make a wisp persistent.
    #[arg(long)]
    persistent: bool,
    /// Mark the bead no-history (refused on a wisp: make it --persistent).
    #[arg(long = "no-history", conflicts_with = "history")]
    no_history: bool,
    /// Clear no-history.
    #[arg(long)]
    history: bool,
}

/// The label filters `list` and `ready` share.
#[derive(Args, Clone, Debug)]
pub struct LabelArgs {
    /// Beads with every one of these labels (repeatable, comma-separated).
    #[arg(long, short, value_delimiter = ',')]
    label: Vec<String>,
    /// Beads with any of these labels.
    #[arg(long = "label-any", value_delimiter = ',')]
    label_any: Vec<String>,
    /// Beads without these labels (repeatable, comma-separated).
    #[arg(long = "exclude-label", value_delimiter = ',')]
    exclude_label: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Statuses, comma-separated, or `all` (default: every status but closed and pinned).
    #[arg(long, short, alias = "state")]
    status: Option<String>,
    /// Only this assignee ("" for unassigned).
    #[arg(long, short)]
    assignee: Option<String>,
    /// Only beads without an assignee.
    #[arg(long = "no-assignee")]
    no_assignee: bool,
    /// Only this type.
    #[arg(long = "type", short = 't')]
    bead_type: Option<String>,
    /// Not these types (repeatable, comma-separated).
    #[arg(long = "exclude-type", value_delimiter = ',')]
    exclude_type: Vec<String>,
    #[command(flatten)]
    labels: LabelArgs,
    /// Only beads without labels.
    #[arg(long = "no-labels")]
    no_labels: bool,
    /// Title contains this, any case (also --title).
    #[arg(long = "title-contains", alias = "title")]
    title_contains: Option<String>,
    /// Description contains this, any case.
    #[arg(long = "desc-contains")]
    desc_contains: Option<String>,
    /// Notes contain this, any case.
    #[arg(long = "notes-contains")]
    notes_contains: Option<String>,
    /// Only beads with an empty description.
    #[arg(long = "empty-description")]
    empty_description: bool,
    /// Only these ids (comma-separated).
    #[arg(long, value_delimiter = ',')]
    id: Vec<String>,
    /// Only this priority.
    #[arg(long, short, value_parser = parse_priority)]
    priority: Option<u8>,
    #[arg(long = "priority-min", value_parser = parse_priority)]
    priority_min: Option<u8>,
    #[arg(long = "priority-max", value_parser = parse_priority)]
    priority_max: Option<u8>,
    /// Direct children of this parent (also --filter-parent).
    #[arg(long, alias = "filter-parent")]
    parent: Option<String>,
    /// Only beads without a parent.
    #[arg(long = "no-parent")]
    no_parent: bool,
    /// Metadata key=value (repeatable: all of them).
    #[arg(long = "metadata-field")]
    metadata_field: Vec<String>,
    /// Only beads holding this metadata key.
    #[arg(long = "has-metadata-key")]
    has_metadata_key: Option<String>,
    /// Only deferred beads.
    #[arg(long)]
    deferred: bool,
    /// Only leased beads whose lease has lapsed by the wall clock (the leader's sweep expires them).
    #[arg(long, conflicts_with = "lease_expiring")]
    lease_expired: bool,
    /// Only leased beads whose lease lapses within this time (2m, 1h), lapsed ones included.
    #[arg(long, value_name = "DURATION", value_parser = crate::values::parse_duration)]
    lease_expiring: Option<std::time::Duration>,
    /// Times: RFC 3339, a date, or a relative time such as -2d.
    #[arg(long = "created-after", value_parser = parse_time)]
    created_after: Option<i64>,
    #[arg(long = "created-before", value_parser = parse_time)]
    created_before: Option<i64>,
    #[arg(long = "updated-after", value_parser = parse_time)]
    updated_after: Option<i64>,
    #[arg(long = "updated-before", value_parser = parse_time)]
    updated_before: Option<i64>,
    #[arg(long = "closed-after", value_parser = parse_time)]
    closed_after: Option<i64>,
    #[arg(long = "closed-before", value_parser = parse_time)]
    closed_before: Option<i64>,
    /// Every status and no limit.
    #[arg(long)]
    all: bool,
    /// At most N (0: all, paged through the cluster); default 50.
    #[arg(long, short = 'n')]
    limit: Option<u32>,
    /// Skip the first N.
    #[arg(long, default_value_t = 0)]
    offset: u32,
    /// priority (default), created, updated, closed, status, id, title, type or assignee.
    #[arg(long, default_value = "")]
    sort: String,
    /// Reverse the order.
    #[arg(long, short)]
    reverse: bool,
    /// Include the infrastructure types agent, rig, role and message.
    #[arg(long = "include-infra")]
    include_infra: bool,
    /// Include gates.
    #[arg(long = "include-gates")]
    include_gates: bool,
    /// Accepted for bd compatibility: Strand has no templates to hide.
    #[arg(long = "include-templates")]
    include_templates: bool,
    /// Accepted: `list` includes wisps (ephemeral beads) as bd's does; with `--ready`, include
    /// them in the ready beads too.
    #[arg(long = "include-ephemeral")]
    include_ephemeral: bool,
    /// Ready beads only (as `ready`).
    #[arg(long)]
    ready: bool,
    /// Text layouts of bd, accepted: Strand prints one line per bead.
    #[arg(long, hide = true)]
    flat: bool,
    #[arg(long, hide = true)]
    tree: bool,
    #[arg(long, hide = true)]
    pretty: bool,
    #[arg(long, hide = true)]
    long: bool,
    #[arg(long = "no-pager", hide = true)]
    no_pager: bool,
    #[arg(long = "skip-labels", hide = true)]
    skip_labels: bool,
}

#[derive(Args, Debug)]
pub struct ReadyArgs {
    #[arg(long, short)]
    assignee: Option<String>,
    /// Only unassigned beads.
    #[arg(long, short)]
    unassigned: bool,
    #[command(flatten)]
    labels: LabelArgs,
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
    #[arg(long = "type", short = 't')]
    bead_type: Vec<String>,
    /// Not these types (repeatable, comma-separated).
    #[arg(long = "exclude-type", value_delimiter = ',')]
    exclude_type: Vec<String>,
    /// Only this priority.
    #[arg(long, short, value_parser = parse_priority)]
    priority: Option<u8>,
    /// Include wisps.
    #[arg(long = "include-ephemeral")]
    include_ephemeral: bool,
    /// At most N (0: unlimited).
    #[arg(long, short = 'n', default_value_t = api::limits::READY_LIMIT_DEFAULT)]
    limit: u32,
    /// Skip the first N.
    #[arg(long, default_value_t = 0)]
    offset: u32,
    /// priority (default), oldest or hybrid.
    #[arg(long, short, default_value = "priority")]
    sort: String,
    /// Claim the first ready bead atomically; exit 1 if none.
    #[arg(long)]
    claim: bool,
    /// With --claim: a lease, so the claim lapses unless renewed (1s to 7d; 10m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_lease, requires = "claim")]
    lease: Option<u64>,
    /// Text layouts of bd, accepted.
    #[arg(long, hide = true)]
    pretty: bool,
    #[arg(long, hide = true)]
    plain: bool,
}

/// `dep`: a subcommand, or bd's shorthand `dep ID --blocks OTHER` (OTHER waits for ID).
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct DepArgs {
    #[command(subcommand)]
    command: Option<DepCommand>,
    /// The bead that blocks (shorthand form).
    #[arg(value_name = "ID", requires = "blocks")]
    id: Option<String>,
    /// The bead that waits for ID (shorthand form).
    #[arg(long, short = 'b', value_name = "OTHER", requires = "id")]
    blocks: Option<String>,
    /// Accepted for bd compatibility: a cycle is always refused.
    #[arg(long = "no-cycle-check", hide = true)]
    no_cycle_check: bool,
}

#[derive(Subcommand, Debug)]
pub enum DepCommand {
    /// Make ISSUE wait for DEPENDS_ON (re-adding retypes the edge). Either id may name no bead
    /// (another rig's, `external:<rig>:<id>`): such an edge never blocks.
    Add {
        issue: String,
        depends_on: Option<String>,
        /// blocks (default), parent-child, conditional-blocks, waits-for, related, ...
        #[arg(long = "type", short = 't', default_value = DepType::BLOCKS)]
        dep_type: String,
        /// The bead ISSUE waits for (instead of the second argument; also --depends-on).
        #[arg(long = "blocked-by", alias = "depends-on")]
        blocked_by: Option<String>,
        /// Accepted for bd compatibility: a cycle is always refused.
        #[arg(long = "no-cycle-check", hide = true)]
        no_cycle_check: bool,
    },
    /// Remove an edge (a missing edge is fine).
    #[command(visible_alias = "rm")]
    Remove { issue: String, depends_on: String },
    /// List edges: with one id, the beads at the other end with their `dependency_type`; with
    /// several, the edge records.
    List {
        #[arg(required = true)]
        ids: Vec<String>,
        /// down (default: what it depends on) or up (what depends on it).
        #[arg(long, default_value = "down")]
        direction: String,
        /// Only edges of this type.
        #[arg(long = "type", short = 't')]
        dep_type: Option<String>,
    },
}

fn usage(message: String) -> Failure {
    Failure::Usage(message)
}

/// The wall-clock bound of `--lease-expired` (now) or `--lease-expiring D` (now plus D).
fn lease_due_by(expired: bool, expiring: Option<std::time::Duration>) -> Option<i64> {
    let within = match (expired, expiring) {
        (true, _) => 0,
        (false, Some(within)) => i64::try_from(within.as_millis()).unwrap_or(i64::MAX),
        (false, None) => return None,
    };
    Some(now_ms().saturating_add(within))
}

fn key_values(pairs: &[String], flag: &str) -> Result<Vec<(String, String)>, Failure> {
    pairs
        .iter()
        .map(|pair| parse_key_value(pair).map_err(|_| usage(format!("{flag} {pair:?} is not key=value"))))
        .collect()
}

/// `--metadata`: a JSON object, or `@FILE` holding one, as bd takes it. A value that is not a
/// string is kept as its JSON text (`3`, `true`), as Gas City reads metadata.
fn parse_metadata_json(text: &str) -> Result<BTreeMap<String, String>, Failure> {
    let text = match text.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| Failure::Refused(format!("cannot read --metadata file {path}: {error}")))?,
        None => text.to_string(),
    };
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).map_err(|error| {
        usage(format!("--metadata is not a JSON object ({error}); write it like '{{\"key\":\"value\"}}'"))
    })?;
    Ok(object
        .into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(text) => (key, text),
            other => (key, other.to_string()),
        })
        .collect())
}

fn status_arg(text: &str) -> Result<Status, Failure> {
    parse_status(text).map_err(|refusal| usage(refusal.to_string()))
}

fn create_command(args: &CreateArgs) -> Result<Command, Failure> {
    let title = match (&args.positional_title, &args.title) {
        (Some(positional), Some(flag)) if positional != flag => {
            return Err(usage("cannot specify different titles as both positional argument and --title flag".into()));
        }
        (Some(title), _) | (None, Some(title)) => title.clone(),
        (None, None) => return Err(usage("title required: strand create \"TITLE\" or --title \"TITLE\"".into())),
    };
    let mut metadata = args.metadata.as_deref().map(parse_metadata_json).transpose()?.unwrap_or_default();
    for (key, text) in [("design", &args.design), ("acceptance_criteria", &args.acceptance)] {
        if let Some(text) = text.as_ref().filter(|text| !text.is_empty()) {
            metadata.insert(key.to_string(), text.clone());
        }
    }
    let defer_until = args.defer.as_deref().map(parse_time).transpose().map_err(usage)?.map(Timestamp);
    Ok(Command::Create(CreateBead {
        title,
        description: args.description.clone(),
        notes: args.notes.clone(),
        bead_type: args.bead_type.clone(),
        // bd's `create` stores its default priority when none is given.
        priority: Some(args.priority.unwrap_or(BD_DEFAULT_PRIORITY)),
        assignee: args.assignee.clone(),
        from: args.from.clone(),
        parent_id: args.parent.as_deref().filter(|parent| !parent.is_empty()).map(BeadId::from),
        reference: args.reference.clone(),
        needs: args.deps.iter().filter(|dep| !dep.is_empty()).cloned().collect(),
        labels: args.labels.iter().filter(|label| !label.is_empty()).cloned().collect(),
        metadata,
        ephemeral: args.ephemeral,
        no_history: args.no_history,
        defer_until,
        requested_status: None,
    }))
}

/// The update of one bead; `current_labels` is needed only for `--set-labels`.
fn update_command(
    cli: &Cli,
    args: &UpdateArgs,
    id: &str,
    current_labels: &BTreeSet<String>,
) -> Result<UpdateBead, Failure> {
    let mut metadata: BTreeMap<String, Option<String>> =
        key_values(&args.set_metadata, "--set-metadata")?.into_iter().map(|(key, value)| (key, Some(value))).collect();
    metadata.extend(args.unset_metadata.iter().map(|key| (key.clone(), None)));
    if let Some(text) = &args.metadata {
        metadata.extend(parse_metadata_json(text)?.into_iter().map(|(key, value)| (key, Some(value))));
    }
    let mut add_labels: BTreeSet<String> = args.add_label.iter().filter(|label| !label.is_empty()).cloned().collect();
    let mut remove_labels: BTreeSet<String> = args.remove_label.iter().cloned().collect();
    if let Some(set) = &args.set_labels {
        add_labels.extend(set.iter().filter(|label| !label.is_empty()).cloned());
        remove_labels.extend(current_labels.iter().filter(|label| !set.contains(label)).cloned());
    }
    Ok(UpdateBead {
        id: BeadId::from(id),
        title: args.title.clone(),
        description: args.description.clone(),
        notes: args.notes.clone(),
        append_notes: args.append_notes.clone(),
        status: args.status.as_deref().map(status_arg).transpose()?,
        bead_type: args.bead_type.clone(),
        priority: args.priority,
        assignee: args.assignee.clone(),
        parent_id: args.parent.as_deref().map(BeadId::from),
        add_labels,
        remove_labels,
        metadata,
        claim_for: args.claim.then(|| Actor(cli.actor())),
        lease_ms: args.lease,
        ephemeral: flag(args.ephemeral, args.persistent),
        no_history: flag(args.no_history, args.history),
    })
}

/// A flag pair as an update: `Some(true)` when set, `Some(false)` when cleared, else unchanged.
fn flag(set: bool, cleared: bool) -> Option<bool> {
    match (set, cleared) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    }
}

/// `--status`: comma-separated statuses, or `all`; `None` when not given.
pub fn statuses_arg(text: &str) -> Result<Vec<Status>, Failure> {
    if text == "all" {
        return Ok(Status::ALL.to_vec());
    }
    text.split(',').map(str::trim).filter(|part| !part.is_empty()).map(status_arg).collect()
}

/// What a bare `list` shows: every status but closed and pinned.
const LIST_STATUSES_DEFAULT: [Status; 5] =
    [Status::Open, Status::InProgress, Status::Blocked, Status::Deferred, Status::Hooked];

fn listing(args: &ListArgs) -> Result<Listing, Failure> {
    let statuses = match (&args.status, args.all) {
        (Some(text), _) => statuses_arg(text)?,
        (None, true) => Status::ALL.to_vec(),
        (None, false) => LIST_STATUSES_DEFAULT.to_vec(),
    };
    let unassigned = args.no_assignee || args.assignee.as_deref() == Some("");
    let mut exclude_types = args.exclude_type.clone();
    exclude_types.extend(hidden_types(args.include_infra, args.include_gates, args.bead_type.as_deref()));
    let limit = args.limit.unwrap_or(if args.all { 0 } else { LIST_LIMIT_DEFAULT });
    let filter = ListFilter {
        statuses,
        assignee: if unassigned { Some(String::new()) } else { args.assignee.clone() },
        labels_all: args.labels.label.clone(),
        bead_type: args.bead_type.clone(),
        parent: args.parent.as_deref().map(BeadId::from),
        metadata_equals: key_values(&args.metadata_field, "--metadata-field")?,
        all: true,
        ..Default::default()
    };
    let local = LocalFilter {
        title_contains: args.title_contains.clone(),
        description_contains: args.desc_contains.clone(),
        notes_contains: args.notes_contains.clone(),
        exclude_types,
        exclude_labels: args.labels.exclude_label.clone(),
        labels_any: args.labels.label_any.clone(),
        no_assignee: unassigned,
        no_labels: args.no_labels,
        no_parent: args.no_parent,
        empty_description: args.empty_description,
        has_metadata_key: args.has_metadata_key.clone(),
        ids: args.id.clone(),
        priority_min: args.priority.or(args.priority_min),
        priority_max: args.priority.or(args.priority_max),
        created_after: args.created_after,
        created_before: args.created_before,
        updated_after: args.updated_after,
        updated_before: args.updated_before,
        closed_after: args.closed_after,
        closed_before: args.closed_before,
        deferred: args.deferred,
        lease_due_by: lease_due_by(args.lease_expired, args.lease_expiring),
        // bd's list searches its wisps too (a filter that names no `ephemeral` takes both).
        hide_ephemeral: false,
    };
    Ok(Listing { filter, local, sort: SortOrder::parse(&args.sort, args.reverse)?, offset: args.offset, limit })
}

fn ready_filter(args: &ReadyArgs, limit: u32) -> Result<ReadyFilter, Failure> {
    let unassigned = args.unassigned || args.assignee.as_deref() == Some("");
    Ok(ReadyFilter {
        assignee: args.assignee.clone().filter(|assignee| !assignee.is_empty()),
        unassigned,
        labels_all: args.labels.label.clone(),
        labels_any: args.labels.label_any.clone(),
        exclude_labels: args.labels.exclude_label.clone(),
        metadata_equals: key_values(&args.metadata_field, "--metadata-field")?,
        metadata_has_keys: args.has_metadata_key.clone(),
        parent: args.parent.as_deref().map(BeadId::from),
        types: args.bead_type.clone(),
        exclude_types: args.exclude_type.clone(),
        include_ephemeral: args.include_ephemeral,
        limit,
    })
}

/// What a single-bead write must still find: the bead at a revision (`--if-revision`) and held
/// under a lease (`--lease-id`, `$STRAND_LEASE_ID`). An empty guard sends the write as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct Guard<'a> {
    /// The bead the guard is about.
    id: &'a str,
    /// The revision it must be at.
    revision: Option<u64>,
    /// The lease it must still be held under.
    lease_id: Option<u64>,
}

impl Guard<'_> {
    /// The same guard, at another revision.
    fn at(self, revision: u64) -> Self {
        Guard { revision: Some(revision), ..self }
    }

    /// The transaction's conditions and fences (both empty for an empty guard).
    fn parts(&self) -> (Vec<api::command::Condition>, Vec<Fence>) {
        let id = BeadId::from(self.id);
        let conditions = self.revision.map(|revision| api::command::Condition { id: id.clone(), revision });
        let fences = self.lease_id.map(|lease_id| Fence { id, lease_id });
        (conditions.into_iter().collect(), fences.into_iter().collect())
    }
}

/// Sends a write to one bead, fenced by the lease id writes carry (`--lease-id`), if any.
pub async fn write_fenced(cli: &Cli, client: &Client, id: &str, command: Command) -> Result<Outcome, Failure> {
    write_if(client, command, Guard { id, revision: None, lease_id: cli.lease_id() }).await
}

/// Sends one write, as its guard says.
async fn write_if(client: &Client, command: Command, guard: Guard<'_>) -> Result<Outcome, Failure> {
    let (conditions, fences) = guard.parts();
    if conditions.is_empty() && fences.is_empty() {
        return Ok(client.execute(command).await?);
    }
    match client.execute(Command::Txn(Txn { conditions, fences, writes: vec![command] })).await? {
        Outcome::Txn(mut outcomes) if outcomes.len() == 1 => Ok(outcomes.remove(0)),
        other => Err(Failure::Refused(format!("the cluster answered a conditional write with {other:?}"))),
    }
}

/// The guard of a write to `ids`: `--if-revision` and the lease id apply to one bead only.
fn single_id<'a>(cli: &Cli, ids: &'a [String], if_revision: Option<u64>) -> Result<Guard<'a>, Failure> {
    let lease_id = cli.lease_id();
    match (if_revision, lease_id, ids) {
        (None, None, _) => Ok(Guard::default()),
        (revision, lease_id, [id]) => Ok(Guard { id, revision, lease_id }),
        (Some(_), _, _) => Err(usage("--if-revision applies to one bead; name exactly one id".into())),
        (None, Some(_), _) => Err(usage(
            "--lease-id (or $STRAND_LEASE_ID) fences a write to the one bead its lease holds; name exactly one id"
                .into(),
        )),
    }
}

/// Runs a bead command.
pub async fn run(cli: &Cli, command: &BeadCommand) -> CommandResult {
    let client = cli.client()?;
    let json = cli.json;
    match command {
        BeadCommand::Create(args) if args.graph.is_some() => {
            let path = args.graph.as_deref().expect("matched above");
            crate::bulk::graph::apply(cli, path, args.ephemeral, args.no_history).await
        }
        BeadCommand::Create(args) => {
            let command = match (create_command(args)?, args.id.as_deref().filter(|id| !id.is_empty())) {
                (Command::Create(create), Some(id)) => {
                    Command::Import(api::command::Import { beads: vec![create.into_bead(BeadId::from(id))] })
                }
                (command, _) => command,
            };
            let bead = one(client.execute(command).await?)?;
            if args.silent {
                println!("{}", printable(bead.id.as_str()));
            } else {
                print_bead_object(&bead, json);
            }
            Ok(true)
        }
        BeadCommand::Update(args) => run_update(cli, args).await,
        BeadCommand::Assign { id, name, if_revision } => {
            let update =
                UpdateBead { id: BeadId::from(id.as_str()), assignee: Some(name.clone()), ..UpdateBead::default() };
            let guard = single_id(cli, std::slice::from_ref(id), *if_revision)?;
            print_bead_object(&one(write_if(&client, Command::Update(update), guard).await?)?, json);
            Ok(true)
        }
        BeadCommand::Claim { id, lease } => {
            let command = Command::Claim(api::command::Claim {
                id: BeadId::from(id.as_str()),
                actor: Actor(cli.actor()),
                lease_ms: *lease,
            });
            print_bead_object(&one(client.execute(command).await?)?, json);
            Ok(true)
        }
        BeadCommand::Release { id } => {
            let command = api::command::Release { id: BeadId::from(id.as_str()) }.into();
            print_bead_object(&one(client.execute(command).await?)?, json);
            Ok(true)
        }
        BeadCommand::Close(args) => {
            let guard = single_id(cli, &args.ids, args.if_revision)?;
            let ids = args.ids.iter().map(|id| BeadId::from(id.as_str())).collect();
            let answer =
                write_if(&client, Command::Close(api::command::Close { ids, reason: args.reason.clone() }), guard)
                    .await?;
            print_beads(&beads_of(answer), json);
            Ok(true)
        }
        BeadCommand::Reopen { ids, .. } => run_reopen(cli, ids).await,
        BeadCommand::Delete(args) => run_delete(cli, args).await,
        BeadCommand::Show(args) => run_show(cli, args).await,
        BeadCommand::List(args) => {
            if args.ready {
                let ready = ReadyArgs::from_list(args);
                return run_ready(cli, &ready).await;
            }
            let beads = listing(args)?.run(&client).await?;
            print_with_counts(&beads, json);
            Ok(true)
        }
        BeadCommand::Ready(args) => run_ready(cli, args).await,
        BeadCommand::Children { id, all } => {
            let query = Query::from(Children { parent: BeadId::from(id.as_str()), include_closed: *all });
            print_with_counts(&beads_of(client.query(query).await?), json);
            Ok(true)
        }
    }
}

impl ReadyArgs {
    /// `list --ready`: the list's filters that ready has, with ready's defaults.
    fn from_list(args: &ListArgs) -> ReadyArgs {
        ReadyArgs {
            assignee: args.assignee.clone(),
            unassigned: args.no_assignee,
            labels: args.labels.clone(),
            metadata_field: args.metadata_field.clone(),
            has_metadata_key: args.has_metadata_key.iter().cloned().collect(),
            parent: args.parent.clone(),
            bead_type: args.bead_type.iter().cloned().collect(),
            exclude_type: args.exclude_type.clone(),
            priority: args.priority,
            include_ephemeral: args.include_ephemeral,
            limit: args.limit.unwrap_or(LIST_LIMIT_DEFAULT),
            offset: args.offset,
            sort: "priority".into(),
            claim: false,
            lease: None,
            pretty: false,
            plain: false,
        }
    }
}

fn one(answer: Outcome) -> Result<Bead, Failure> {
    beads_of(answer).into_iter().next().ok_or_else(|| Failure::Refused("the cluster answered with no bead".into()))
}

/// How often `--if-assignee`/`--if-status` read and try again when the bead moved in between.
const GUARD_ATTEMPTS: usize = 16;

/// A write applied only while the bead's assignee and status are what `--if-assignee` and
/// `--if-status` say: read, compare, then write conditional on the revision read, again if it
/// moved. Exit 13 (bd's) when the bead is not as required; nothing is written then.
async fn guarded_write(
    client: &Client,
    args: &UpdateArgs,
    guard: Guard<'_>,
    command: Command,
) -> Result<Outcome, Failure> {
    let id = guard.id;
    let wanted_status = args.if_status.as_deref().map(status_arg).transpose()?;
    for _ in 0..GUARD_ATTEMPTS {
        // bd's words for a bead that is not there, which Gas City's release reads as "not held".
        let found = beads_of(client.query(Query::from(Lookup { ids: vec![BeadId::from(id)] })).await?);
        let bead = found.into_iter().next().ok_or_else(|| {
            Failure::Refused(format!(
                "no issue found matching {id}; nothing was written (check the id with `strand list`)"
            ))
        })?;
        if let Some(wanted) = args.if_assignee.as_ref().filter(|wanted| **wanted != bead.assignee) {
            return Err(Failure::Unmet(format!(
                "precondition not met: {id} is assigned to {:?}, not {wanted:?}; nothing was written",
                bead.assignee
            )));
        }
        if let Some(wanted) = wanted_status.filter(|wanted| *wanted != bead.status) {
            return Err(Failure::Unmet(format!(
                "precondition not met: {id} is {}, not {wanted}; nothing was written",
                bead.status
            )));
        }
        match write_if(client, command.clone(), guard.at(bead.revision)).await {
            Err(Failure::Precondition { .. }) => continue,
            other => return other,
        }
    }
    Err(Failure::Refused(format!("{id} kept changing while it was checked; try again")))
}

async fn run_update(cli: &Cli, args: &UpdateArgs) -> CommandResult {
    if args.if_revision.is_some() && (args.if_assignee.is_some() || args.if_status.is_some()) {
        return Err(usage("--if-revision cannot be combined with --if-assignee or --if-status; use one kind".into()));
    }
    let guard = single_id(cli, &args.ids, args.if_revision)?;
    let client = cli.client()?;
    let mut updated = Vec::with_capacity(args.ids.len());
    let mut failures = 0;
    for id in &args.ids {
        let current_labels = match &args.set_labels {
            Some(_) => one(client.query(Query::from(Get { ids: vec![BeadId::from(id.as_str())] })).await?)?.labels,
            None => BTreeSet::new(),
        };
        let update = update_command(cli, args, id, &current_labels)?;
        let mut update = update;
        if let Some(defer) = &args.defer {
            // bd: a deferral time also defers the bead; "" clears it and reopens a deferred bead.
            let status = if defer.is_empty() { Status::Open } else { Status::Deferred };
            update.status = update.status.or(Some(status));
        }
        if update.is_empty() && !args.claim {
            println!("No updates specified");
            return Ok(true);
        }
        let written = if args.if_assignee.is_some() || args.if_status.is_some() {
            guarded_write(&client, args, Guard { id, ..guard }, Command::Update(update)).await
        } else {
            write_if(&client, Command::Update(update), guard).await
        };
        match written {
            Ok(answer) => updated.extend(beads_of(answer)),
            Err(failure) if args.ids.len() > 1 => {
                failures += 1;
                report(&failure, id);
            }
            Err(failure) => return Err(failure),
        }
    }
    print_beads(&updated, cli.json);
    Ok(failures < args.ids.len())
}

fn report(failure: &Failure, id: &str) {
    eprintln!("error: {}: {}", printable(id), printable(failure.message()));
}

async fn run_reopen(cli: &Cli, ids: &[String]) -> CommandResult {
    let client = cli.client()?;
    let mut reopened = Vec::new();
    let mut failed = false;
    for id in ids {
        let bead_id = BeadId::from(id.as_str());
        let current = match client.query(Query::from(Get { ids: vec![bead_id.clone()] })).await {
            Ok(answer) => one(answer)?,
            Err(error) => {
                failed = true;
                report(&Failure::from(error), id);
                continue;
            }
        };
        if current.status == Status::Open {
            eprintln!("{} is already open", printable(id));
            continue;
        }
        reopened.extend(beads_of(
            write_fenced(cli, &client, id, Command::Reopen(api::command::Reopen { id: bead_id })).await?,
        ));
    }
    print_beads(&reopened, cli.json);
    Ok(!failed)
}

async fn run_delete(cli: &Cli, args: &DeleteArgs) -> CommandResult {
    let guard = single_id(cli, &args.ids, args.if_revision)?;
    let client = cli.client()?;
    let ids: Vec<BeadId> = args.ids.iter().map(|id| BeadId::from(id.as_str())).collect();
    let beads = beads_of(client.query(Query::from(Get { ids: ids.clone() })).await?);
    let beads = if args.cascade { with_dependents(&client, beads).await? } else { beads };
    if !args.force || args.dry_run {
        println!("DELETE PREVIEW: {} bead(s) and their dependency edges", beads.len());
        for bead in &beads {
            println!("  {}", crate::output::bead_line(bead));
        }
        let cascade = if args.cascade { " --cascade" } else { "" };
        println!("To proceed, run: strand delete {}{cascade} --force", printable(&args.ids.join(" ")));
        return Ok(true);
    }
    let mut edges_removed = 0;
    for bead in &beads {
        let dependents =
            client.query(Query::from(DepList { id: bead.id.clone(), direction: DepDirection::Up })).await?;
        edges_removed += bead.depends_on.len() + dependencies_of(dependents).len();
    }
    if args.cascade {
        // Every bead of the cascade goes in one transaction: all of them, or none.
        let writes = beads.iter().map(|bead| Command::Delete(api::command::Delete { id: bead.id.clone() })).collect();
        let (conditions, fences) = guard.parts();
        client.execute(Command::Txn(Txn { conditions, fences, writes })).await?;
    } else {
        for bead in &beads {
            write_if(&client, Command::Delete(api::command::Delete { id: bead.id.clone() }), guard).await?;
        }
    }
    if cli.json {
        let value = match ids.as_slice() {
            [id] if !args.cascade => {
                serde_json::json!({ "deleted": id.0, "dependencies_removed": edges_removed, "references_updated": 0, "schema_version": 1 })
            }
            _ => serde_json::json!({
                "deleted": ids.iter().map(|id| id.0.clone()).collect::<Vec<_>>(),
                "deleted_count": beads.len(),
                "dependencies_removed": edges_removed,
                "references_updated": 0,
                "schema_version": 1,
            }),
        };
        print_value(&value);
    } else {
        for bead in &beads {
            println!("deleted {}", printable(bead.id.as_str()));
        }
    }
    Ok(true)
}

/// The beads and, transitively, every bead that depends on them or is their child (bd's
/// `--cascade` follows its dependency rows, `parent-child` among them), at most a transaction's
/// worth. Edges from ids that are not beads lead nowhere.
async fn with_dependents(client: &Client, beads: Vec<Bead>) -> Result<Vec<Bead>, Failure> {
    let mut found: Vec<Bead> = Vec::new();
    let mut seen: BTreeSet<BeadId> = BTreeSet::new();
    let mut queue: std::collections::VecDeque<Bead> = beads.into_iter().collect();
    while let Some(bead) = queue.pop_front() {
        if !seen.insert(bead.id.clone()) {
            continue;
        }
        let rows = dependencies_of(
            client.query(Query::from(DepList { id: bead.id.clone(), direction: DepDirection::Up })).await?,
        );
        let sources: Vec<BeadId> = rows.into_iter().map(|row| row.issue_id).filter(|id| !seen.contains(id)).collect();
        if !sources.is_empty() {
            queue.extend(beads_of(client.query(Query::from(Lookup { ids: sources })).await?));
        }
        queue.extend(beads_of(
            client.query(Query::from(Children { parent: bead.id.clone(), include_closed: true })).await?,
        ));
        found.push(bead);
        if found.len() > api::limits::TXN_WRITES_MAX {
            return Err(Failure::Refused(format!(
                "--cascade reaches more than {} beads; delete some of their dependents first",
                api::limits::TXN_WRITES_MAX
            )));
        }
    }
    Ok(found)
}

async fn run_show(cli: &Cli, args: &ShowArgs) -> CommandResult {
    let ids: Vec<BeadId> = args.ids.iter().chain(&args.more_ids).map(|id| BeadId::from(id.as_str())).collect();
    if ids.is_empty() {
        return Err(usage("at least one bead id is required (positional, or --id)".into()));
    }
    let client = cli.client()?;
    let found = beads_of(client.query(Query::from(Lookup { ids: ids.clone() })).await?);
    for id in ids.iter().filter(|id| !found.iter().any(|bead| &bead.id == *id)) {
        eprintln!("error: bead {} not found", printable(id.as_str()));
    }
    if found.is_empty() {
        if cli.json {
            print_value(&serde_json::json!({ "error": "no beads found matching the given ids", "schema_version": 1 }));
        }
        return Ok(false);
    }
    if args.short {
        print_beads(&found, false);
        return Ok(true);
    }
    if !cli.json {
        print_details(&found, &[], &[], false);
        return Ok(true);
    }
    // bd's `dependents` beside `dependencies`: the edges into each bead (the cluster's reverse
    // index), then the beads at the far end of every edge, looked up together.
    let mut up = Vec::new();
    for bead in &found {
        let rows = client.query(Query::from(DepList { id: bead.id.clone(), direction: DepDirection::Up })).await?;
        up.extend(dependencies_of(rows));
    }
    let far_ends: BTreeSet<BeadId> = found
        .iter()
        .flat_map(|bead| bead.depends_on.keys().cloned())
        .chain(up.iter().map(|row| row.issue_id.clone()))
        .collect();
    let others = lookup_all(&client, far_ends.into_iter().collect()).await?;
    print_details(&found, &others, &up, true);
    Ok(true)
}

/// The beads of these ids that exist, asked for at most [`api::limits::IDS_PER_REQUEST_MAX`] at
/// a time (a bead may have any number of dependents).
async fn lookup_all(client: &Client, ids: Vec<BeadId>) -> Result<Vec<Bead>, Failure> {
    let mut found = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(api::limits::IDS_PER_REQUEST_MAX) {
        found.extend(beads_of(client.query(Query::from(Lookup { ids: chunk.to_vec() })).await?));
    }
    Ok(found)
}

async fn run_ready(cli: &Cli, args: &ReadyArgs) -> CommandResult {
    let client = cli.client()?;
    let sort = ReadySort::parse(&args.sort)?;
    if args.claim {
        let filter = ready_filter(args, 1)?;
        let claim =
            Command::ClaimNext(api::command::ClaimNext { actor: Actor(cli.actor()), filter, lease_ms: args.lease });
        let beads = beads_of(client.execute(claim).await?);
        print_with_counts(&beads, cli.json);
        if beads.is_empty() {
            // Exit 1 as `bd`, with the reason on stderr (stdout keeps what scripts parse).
            eprintln!("no ready bead matched; nothing was claimed");
        }
        return Ok(!beads.is_empty());
    }
    // Another order than the cluster's, a priority filter or an offset needs every ready bead.
    let whole = sort != ReadySort::Priority || args.priority.is_some() || args.offset > 0;
    let filter = ready_filter(args, if whole { 0 } else { args.limit })?;
    let mut beads = beads_of(client.query(Query::from(Ready { filter, now: Timestamp(0) })).await?);
    beads.retain(|bead| args.priority.is_none_or(|priority| bead.priority == Some(priority)));
    sort.apply(&mut beads, now_ms());
    print_with_counts(&window(beads, args.offset, args.limit), cli.json);
    Ok(true)
}

fn dependencies_of(answer: Outcome) -> Vec<api::model::Dependency> {
    match answer {
        Outcome::Dependencies(rows) => rows,
        _ => Vec::new(),
    }
}

/// Runs a `dep` command.
pub async fn run_dep(cli: &Cli, args: &DepArgs) -> CommandResult {
    let shorthand;
    let command = match (&args.command, &args.id, &args.blocks) {
        (Some(command), _, _) => command,
        (None, Some(id), Some(other)) => {
            shorthand = DepCommand::Add {
                issue: other.clone(),
                depends_on: Some(id.clone()),
                dep_type: DepType::BLOCKS.to_string(),
                blocked_by: None,
                no_cycle_check: args.no_cycle_check,
            };
            &shorthand
        }
        _ => return Err(usage("dep needs add, remove or list, or the shorthand `dep ID --blocks OTHER`".into())),
    };
    run_dep_command(cli, command).await
}

async fn run_dep_command(cli: &Cli, command: &DepCommand) -> CommandResult {
    let client = cli.client()?;
    match command {
        DepCommand::Add { issue, depends_on, dep_type, blocked_by, .. } => {
            let Some(target) = depends_on.as_ref().or(blocked_by.as_ref()) else {
                return Err(usage("dep add needs the bead ISSUE waits for: a second id, or --blocked-by ID".into()));
            };
            let command = Command::DepAdd(api::command::DepAdd {
                issue_id: BeadId::from(issue.as_str()),
                depends_on_id: BeadId::from(target.as_str()),
                dep_type: DepType(dep_type.clone()),
            });
            write_fenced(cli, &client, issue, command).await?;
            if cli.json {
                print_value(
                    &serde_json::json!({ "status": "added", "issue_id": issue, "depends_on_id": target, "type": dep_type, "schema_version": 1 }),
                );
            } else {
                println!("{} now depends on {} ({})", printable(issue), printable(target), printable(dep_type));
            }
            Ok(true)
        }
        DepCommand::Remove { issue, depends_on } => {
            let command = Command::DepRemove(api::command::DepRemove {
                issue_id: BeadId::from(issue.as_str()),
                depends_on_id: BeadId::from(depends_on.as_str()),
            });
            write_fenced(cli, &client, issue, command).await?;
            if cli.json {
                print_value(
                    &serde_json::json!({ "status": "removed", "issue_id": issue, "depends_on_id": depends_on, "schema_version": 1 }),
                );
            } else {
                println!("{} no longer depends on {}", printable(issue), printable(depends_on));
            }
            Ok(true)
        }
        DepCommand::List { ids, direction, dep_type } => {
            // bd reads any direction but `up` as down.
            let direction = if direction == "up" { DepDirection::Up } else { DepDirection::Down };
            let mut rows = Vec::new();
            for id in ids {
                let answer = client.query(Query::from(DepList { id: BeadId::from(id.as_str()), direction })).await?;
                rows.extend(dependencies_of(answer));
            }
            rows.retain(|row| dep_type.as_ref().is_none_or(|dep_type| &row.dep_type.0 == dep_type));
            if ids.len() > 1 && direction == DepDirection::Down {
                crate::output::print_dependencies(&rows, cli.json);
                return Ok(true);
            }
            // One id, or up: the beads at the other end, each with its edge's type.
            let other_end = |row: &api::model::Dependency| match direction {
                DepDirection::Up => row.issue_id.clone(),
                DepDirection::Down => row.depends_on_id.clone(),
            };
            let others: Vec<BeadId> = rows.iter().map(other_end).collect();
            let beads = if others.is_empty() {
                Vec::new()
            } else {
                beads_of(client.query(Query::from(Lookup { ids: others })).await?)
            };
            crate::output::print_edge_beads(&rows, &beads, direction == DepDirection::Up, cli.json);
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct ListLine {
        #[command(flatten)]
        args: ListArgs,
    }

    #[derive(Parser)]
    struct CreateLine {
        #[command(flatten)]
        args: CreateArgs,
    }

    fn list_args(words: &[&str]) -> ListArgs {
        ListLine::try_parse_from(std::iter::once("list").chain(words.iter().copied())).unwrap().args
    }

    fn created_priority(words: &[&str]) -> Option<u8> {
        let args = CreateLine::try_parse_from(std::iter::once("create").chain(words.iter().copied())).unwrap().args;
        match create_command(&args).unwrap() {
            Command::Create(create) => create.priority,
            other => panic!("a create, not {other:?}"),
        }
    }

    #[test]
    fn list_takes_wisps_as_bds_does_and_list_ready_only_when_asked() {
        let wisp = CreateBead { title: "patrol".into(), ephemeral: true, ..CreateBead::default() };
        let wisp = wisp.into_bead(BeadId::from("st-4"));
        for words in [&["--all", "-n", "0"][..], &[], &["--include-ephemeral"]] {
            assert!(listing(&list_args(words)).unwrap().local.accepts(&wisp), "{words:?}");
        }
        assert!(!ReadyArgs::from_list(&list_args(&["--ready"])).include_ephemeral);
        assert!(ReadyArgs::from_list(&list_args(&["--ready", "--include-ephemeral"])).include_ephemeral);
    }

    #[test]
    fn create_without_a_priority_stores_bds_default() {
        assert_eq!(created_priority(&["Write docs"]), Some(BD_DEFAULT_PRIORITY));
        assert_eq!(created_priority(&["Fix it", "-p", "P0"]), Some(0));
        assert_eq!(created_priority(&["--title", "Later", "--priority", "4"]), Some(4));
    }
}
