//! `strand exec-store OP [ARGS]`: Gas City's exec-store protocol (docs/beads.md §6) on a Strand
//! cluster, so an orchestrator configured with `exec:<deploy/gc-exec-store>` keeps its beads here.
//!
//! The protocol, kept exactly:
//! - mutations read one JSON object on stdin; results are compact JSON on stdout (lists are `[]`,
//!   never `null`); `mol-cook` prints the root id as plain text;
//! - exit 0 success; exit 1 error with one line on stderr (a missing bead says "not found");
//!   exit 2 only for an unknown operation, which the orchestrator reads as success with no output,
//!   and for the lifecycle operations a Strand cluster does not need (`start`, `stop`, `init`,
//!   `recover`: nodes run on their own), which it reads as "not needed". A usage mistake or an
//!   unreachable cluster is therefore exit 1 here, never 2 or 3;
//! - `health` and `probe` answer within [`PROBE_DEADLINE_MS`], inside the orchestrator's 10 s
//!   probe limit, even when no node answers;
//! - beads go out in the wire shape, with the status folded to open / in_progress / closed;
//! - the namespace comes from `GC_STORE_ROOT` and `GC_STORE_SCOPE` (a store root seen for the first
//!   time is an empty store), the id prefix from `GC_BEADS_PREFIX`.
//!
//! Malformed stdin is refused before anything is sent, so it changes nothing.

use std::collections::BTreeMap;

use api::command::{Command, Cook, DepDirection, FormulaSource, ListFilter, Query, ReadyFilter};
use api::commands::children::Children;
use api::commands::dep_list::DepList;
use api::commands::get::Get;
use api::commands::list_by_label::ListByLabel;
use api::commands::purge_preview::PurgePreview;
use api::commands::ready::Ready;
use api::convert::parse_status;
use api::model::{Bead, BeadId, DepType, Status, Timestamp};
use api::outcome::Outcome;
use clap::Args;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::answers::{beads_of, one_bead, unexpected};
use crate::beads::listing::{Listing, LocalFilter, SortOrder};
use crate::output::DependencyJson;
use crate::wire::{CreateInput, UpdateInput};
use crate::work::molecule::formula_source;
use crate::{Cli, CommandResult, Failure};

/// `strand exec-store OP [ARGS...]`.
#[derive(Args, Debug)]
pub struct ExecStoreArgs {
    /// The operation and its arguments: create, get ID, update ID, close ID, list [--status=S]
    /// [--assignee=A] [--type=T] [--limit=N], ready, children PARENT, list-by-label LABEL LIMIT,
    /// list-by-status STATUS LIMIT, set-metadata ID KEY, delete --force ID, dep-add ISSUE
    /// DEPENDS_ON [TYPE], dep-remove ISSUE DEPENDS_ON, dep-list ID [down|up], reopen ID,
    /// ready [--include-ephemeral], mol-cook, purge, health, probe; start, stop, init and recover
    /// are not needed (exit 2).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "OP [ARGS]")]
    words: Vec<String>,
}

/// How long `health` and `probe` wait for any node: inside the orchestrator's 10 s probe limit.
pub const PROBE_DEADLINE_MS: u64 = 5_000;

/// The environment variables of the protocol.
const STORE_ROOT_VARIABLE: &str = "GC_STORE_ROOT";
const STORE_SCOPE_VARIABLE: &str = "GC_STORE_SCOPE";
pub const PREFIX_VARIABLE: &str = "GC_BEADS_PREFIX";

/// Namespace names derived from a store root start with this.
const NAMESPACE_PREFIX: &str = "gc";
/// Hex digits of the root's SHA-256 kept in a derived namespace name: enough that two roots
/// never meet in practice, short enough to read in `strand namespace list`.
const ROOT_HASH_HEX_DIGITS: usize = 12;
/// Characters of the root's last path component kept in a derived namespace name.
const ROOT_NAME_CHARS_MAX: usize = 48;

/// The namespace of a store root and scope: `gc:<scope>:<root's last component>:<hash of root>`,
/// so every distinct root (and scope within it) is its own store, and the name says which.
pub fn namespace_of_store(root: &str, scope: &str) -> String {
    let digest = Sha256::digest(format!("{scope}\0{root}").as_bytes());
    let hash: String = api::printable::hex(&digest)[..ROOT_HASH_HEX_DIGITS].into();
    let last = root.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    let readable = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
            .take(ROOT_NAME_CHARS_MAX)
            .collect()
    };
    let scope = if scope.is_empty() { "default".to_string() } else { readable(scope) };
    format!("{NAMESPACE_PREFIX}:{scope}:{}:{hash}", readable(last))
}

/// The scope a bd store's namespace is named with: not `city` or `rig`, so that a scope moved
/// from the bd path to the exec path (or back) never meets its other store by accident.
const BEADS_DIR_SCOPE: &str = "bd";

/// The namespace of bd's `BEADS_DIR` (`<scope root>/.beads`): the store of its scope root. An
/// existing directory is named by its canonical path, so `./.beads` and a symlink to it agree.
pub fn namespace_of_beads_dir(dir: &str) -> String {
    let canonical = std::fs::canonicalize(dir).ok().and_then(|path| path.to_str().map(str::to_string));
    let dir = canonical.as_deref().unwrap_or(dir).trim_end_matches('/');
    let root = match dir.rsplit_once('/') {
        Some((root, ".beads")) if !root.is_empty() => root,
        _ => dir,
    };
    namespace_of_store(root, BEADS_DIR_SCOPE)
}

/// A bead in the protocol's wire shape.
#[derive(Serialize)]
struct WireBead<'a> {
    id: &'a str,
    title: &'a str,
    /// Folded to open, in_progress or closed.
    status: &'static str,
    #[serde(rename = "type")]
    bead_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<u8>,
    created_at: String,
    updated_at: String,
    assignee: &'a str,
    from: &'a str,
    parent_id: String,
    #[serde(rename = "ref")]
    reference: &'a str,
    needs: Vec<String>,
    description: &'a str,
    labels: Vec<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    metadata: &'a BTreeMap<String, String>,
    /// Only when true, as Gas City's own wire type has it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    ephemeral: bool,
    /// Only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    no_history: bool,
    /// RFC 3339; only when set (a future time too: the orchestrator filters it).
    #[serde(skip_serializing_if = "Option::is_none")]
    defer_until: Option<String>,
}

impl<'a> From<&'a Bead> for WireBead<'a> {
    fn from(bead: &'a Bead) -> Self {
        WireBead {
            id: &bead.id.0,
            title: &bead.title,
            status: bead.status.folded().as_str(),
            bead_type: &bead.bead_type,
            priority: bead.priority,
            created_at: bead.created_at.to_rfc3339(),
            updated_at: bead.updated_at.to_rfc3339(),
            assignee: &bead.assignee,
            from: &bead.from,
            parent_id: bead.parent_id.as_ref().map(|id| id.0.clone()).unwrap_or_default(),
            reference: &bead.reference,
            needs: bead.needs().into_iter().map(|id| id.0).collect(),
            description: &bead.description,
            labels: bead.labels.iter().map(String::as_str).collect(),
            metadata: &bead.metadata,
            ephemeral: bead.ephemeral,
            no_history: bead.no_history,
            defer_until: bead.defer_until.map(|time| time.to_rfc3339()),
        }
    }
}

/// `mol-cook`'s stdin.
#[derive(Deserialize)]
struct CookInput {
    formula: String,
    title: Option<String>,
    vars: Option<Vec<String>>,
    ephemeral: Option<bool>,
}

/// `purge`'s stdin. `dry_run` is required and nothing else is accepted: a misspelt key must
/// not turn a preview into a purge.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PurgeInput {
    dry_run: bool,
}

fn error(message: impl Into<String>) -> Failure {
    Failure::Refused(message.into())
}

/// Reads stdin whole, refusing more than a request may carry.
fn read_stdin() -> Result<String, Failure> {
    crate::wire::read_request(std::io::stdin(), "stdin")
}

/// Parses stdin as the JSON object an operation takes. Only an object is accepted: serde would
/// also read a struct from an array, position by position, which no caller means.
fn read_json<T: for<'de> Deserialize<'de>>(op: &str) -> Result<T, Failure> {
    parse_json(&read_stdin()?, op)
}

/// Parses `text` as the JSON object operation `op` takes (see [`read_json`]).
fn parse_json<T: for<'de> Deserialize<'de>>(text: &str, op: &str) -> Result<T, Failure> {
    let malformed = |reason: String| {
        error(format!("{op}: stdin is not the JSON object this operation takes ({reason}); nothing was written"))
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|json_error| malformed(json_error.to_string()))?;
    if !value.is_object() {
        return Err(malformed("it is not an object".into()));
    }
    serde_json::from_value(value).map_err(|json_error| malformed(json_error.to_string()))
}

/// The words after the operation, checked for count.
struct Words<'a> {
    op: &'a str,
    words: &'a [String],
}

impl<'a> Words<'a> {
    fn exactly(&self, count: usize, usage: &str) -> Result<&'a [String], Failure> {
        if self.words.len() != count {
            return Err(error(format!("{}: takes {usage}; got {} argument(s)", self.op, self.words.len())));
        }
        Ok(self.words)
    }

    fn one(&self, usage: &str) -> Result<&'a String, Failure> {
        Ok(&self.exactly(1, usage)?[0])
    }

    fn two(&self, usage: &str) -> Result<(&'a String, &'a String), Failure> {
        let words = self.exactly(2, usage)?;
        Ok((&words[0], &words[1]))
    }

    fn between(&self, low: usize, high: usize, usage: &str) -> Result<&'a [String], Failure> {
        if self.words.len() < low || self.words.len() > high {
            return Err(error(format!("{}: takes {usage}; got {} argument(s)", self.op, self.words.len())));
        }
        Ok(self.words)
    }
}

fn bead_id(text: &str) -> BeadId {
    BeadId::from(text)
}

fn limit_of(text: &str, op: &str) -> Result<u32, Failure> {
    text.parse().map_err(|_| error(format!("{op}: limit {text:?} is not a whole number (0 means no limit)")))
}

fn print_json<T: Serialize>(value: &T) {
    println!("{}", serde_json::to_string(value).expect("wire JSON serializes"));
}

fn print_wire_beads(beads: &[Bead]) {
    print_json(&beads.iter().map(WireBead::from).collect::<Vec<_>>());
}

fn print_wire_bead(answer: Outcome) -> CommandResult {
    print_json(&WireBead::from(&one_bead(answer, "bead")?));
    Ok(true)
}

/// The operations this store knows, named in kebab case (`list-by-label`); any other is
/// answered with exit 2 and no output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Operation {
    Create,
    Get,
    Update,
    Close,
    List,
    Ready,
    Children,
    ListByLabel,
    ListByStatus,
    SetMetadata,
    Delete,
    DepAdd,
    DepRemove,
    DepList,
    MolCook,
    Purge,
    Health,
    Probe,
    Reopen,
    Start,
    Stop,
    Init,
    Recover,
}

impl Operation {
    /// A lifecycle operation a Strand cluster does not need: nodes run on their own.
    fn not_needed(self) -> bool {
        matches!(self, Operation::Start | Operation::Stop | Operation::Init | Operation::Recover)
    }
}

/// Exit 2 with why: "not needed", which the orchestrator reads as success.
fn not_needed(op: &str) -> Failure {
    Failure::Usage(format!(
        "{op}: not needed: Strand nodes run on their own (`strand node`), and a store is created by its first write"
    ))
}

/// Runs one operation. Every failure but an unknown operation is exit 1 (see the module header).
pub async fn run(cli: &Cli, args: &ExecStoreArgs) -> CommandResult {
    let Some((op, rest)) = args.words.split_first() else {
        return Err(error("exec-store: no operation given; usage: strand exec-store OP [ARGS]"));
    };
    let Ok(operation) = <Operation as clap::ValueEnum>::from_str(op, false) else {
        return Err(Failure::Usage(format!("unknown operation {op:?}")));
    };
    let words = Words { op, words: rest };
    if operation.not_needed() {
        // Answered without the cluster, and before the mapping below keeps its exit 2.
        return Err(not_needed(op));
    }
    match dispatch(cli, operation, &words).await {
        Err(
            failure @ (Failure::Usage(_) | Failure::Unavailable(_) | Failure::Precondition { .. } | Failure::Unmet(_)),
        ) => Err(Failure::Refused(failure.message().to_string())),
        other => other,
    }
}

async fn dispatch(cli: &Cli, operation: Operation, words: &Words<'_>) -> CommandResult {
    let op = words.op;
    let client = store_client(cli)?;
    match operation {
        Operation::Create => {
            let input: CreateInput = read_json(op)?;
            print_wire_bead(client.execute(input.command(op)?).await?)
        }
        Operation::Get => {
            let id = words.one("ID")?;
            print_wire_bead(client.query(Query::from(Get { ids: vec![bead_id(id)] })).await?)
        }
        Operation::Update => {
            let id = words.one("ID")?;
            let input: UpdateInput = read_json(op)?;
            client.execute(input.command(op, bead_id(id))?).await?;
            Ok(true)
        }
        Operation::Close => {
            let id = words.one("ID")?;
            client.execute(Command::Close(api::command::Close { ids: vec![bead_id(id)], reason: None })).await?;
            Ok(true)
        }
        Operation::List => list(&client, words).await,
        Operation::Ready => {
            let include_ephemeral = match words.between(0, 1, "[--include-ephemeral]")? {
                [] => false,
                [flag] if flag == "--include-ephemeral" => true,
                [other] => return Err(error(format!("ready: unknown flag {other:?}; use --include-ephemeral"))),
                _ => unreachable!("between(0, 1) answers at most one word"),
            };
            let filter = ReadyFilter { limit: 0, include_ephemeral, ..ReadyFilter::default() };
            print_wire_beads(&beads_of(client.query(Query::from(Ready { filter, now: Timestamp(0) })).await?));
            Ok(true)
        }
        Operation::Children => {
            let parent = words.one("PARENT")?;
            let query = Query::from(Children { parent: bead_id(parent), include_closed: true });
            print_wire_beads(&beads_of(client.query(query).await?));
            Ok(true)
        }
        Operation::ListByLabel => {
            let found = words.between(1, 2, "LABEL [LIMIT]")?;
            let limit = found.get(1).map(|text| limit_of(text, op)).transpose()?.unwrap_or(0);
            let query = Query::from(ListByLabel { label: found[0].clone(), limit });
            print_wire_beads(&beads_of(client.query(query).await?));
            Ok(true)
        }
        Operation::ListByStatus => {
            let found = words.between(1, 2, "STATUS [LIMIT]")?;
            let limit = found.get(1).map(|text| limit_of(text, op)).transpose()?.unwrap_or(0);
            print_wire_beads(&list_beads(&client, Some(&found[0]), None, None, limit).await?);
            Ok(true)
        }
        Operation::SetMetadata => {
            let (id, key) = words.two("ID KEY (the value on stdin)")?;
            let value = read_stdin()?;
            let entries = BTreeMap::from([(key.clone(), Some(value))]);
            client.execute(Command::SetMetadata(api::command::SetMetadata { id: bead_id(id), entries })).await?;
            Ok(true)
        }
        Operation::Delete => {
            let found = words.exactly(2, "--force ID")?;
            let Some(id) = found.iter().find(|word| *word != "--force") else {
                return Err(error("delete: takes --force ID"));
            };
            if !found.iter().any(|word| word == "--force") {
                return Err(error(format!("delete: refusing to delete {id} without --force")));
            }
            client.execute(Command::Delete(api::command::Delete { id: bead_id(id) })).await?;
            Ok(true)
        }
        Operation::DepAdd => {
            let found = words.between(2, 3, "ISSUE DEPENDS_ON [TYPE]")?;
            let given = found.get(2).filter(|dep_type| !dep_type.is_empty());
            let dep_type = DepType(given.cloned().unwrap_or_else(|| DepType::BLOCKS.to_string()));
            let command = Command::DepAdd(api::command::DepAdd {
                issue_id: bead_id(&found[0]),
                depends_on_id: bead_id(&found[1]),
                dep_type,
            });
            client.execute(command).await?;
            Ok(true)
        }
        Operation::DepRemove => {
            let (issue, depends_on) = words.two("ISSUE DEPENDS_ON")?;
            client
                .execute(Command::DepRemove(api::command::DepRemove {
                    issue_id: bead_id(issue),
                    depends_on_id: bead_id(depends_on),
                }))
                .await?;
            Ok(true)
        }
        Operation::DepList => {
            let found = words.between(1, 2, "ID [down|up]")?;
            let direction = match found.get(1).map(String::as_str) {
                None | Some("down") => DepDirection::Down,
                Some("up") => DepDirection::Up,
                Some(other) => return Err(error(format!("dep-list: direction {other:?} is unknown; use down or up"))),
            };
            let rows = match client.query(Query::from(DepList { id: bead_id(&found[0]), direction })).await? {
                Outcome::Dependencies(rows) => rows,
                other => return Err(unexpected(&other)),
            };
            print_json(&rows.iter().map(DependencyJson::from).collect::<Vec<_>>());
            Ok(true)
        }
        Operation::MolCook => {
            words.exactly(0, "no arguments (the cook on stdin)")?;
            let input: CookInput = read_json(op)?;
            let root = cook(&client, input).await?;
            println!("{root}");
            Ok(true)
        }
        Operation::Purge => {
            words.exactly(0, "no arguments (the options on stdin)")?;
            let input: PurgeInput = read_json(op)?;
            let answer = if input.dry_run {
                client.query(Query::from(PurgePreview { older_than_ms: 0, now: Timestamp(0) })).await?
            } else {
                client.execute(Command::Purge(api::command::Purge { older_than_ms: 0 })).await?
            };
            let Outcome::Purged { purged_count } = answer else { return Err(unexpected(&answer)) };
            print_json(&serde_json::json!({ "purged_count": purged_count }));
            Ok(true)
        }
        Operation::Reopen => {
            let id = words.one("ID")?;
            client.execute(Command::Reopen(api::command::Reopen { id: bead_id(id) })).await?;
            Ok(true)
        }
        Operation::Health | Operation::Probe => {
            words.exactly(0, "no arguments")?;
            let deadline = std::time::Duration::from_millis(PROBE_DEADLINE_MS);
            match tokio::time::timeout(deadline, client.status(false)).await {
                Ok(answer) => answer.map(|_| true).map_err(Failure::from),
                Err(_) => Err(Failure::Unavailable(format!(
                    "cluster unavailable: no node answered within {PROBE_DEADLINE_MS} ms; check STRAND_ENDPOINTS and that the nodes run"
                ))),
            }
        }
        Operation::Start | Operation::Stop | Operation::Init | Operation::Recover => Err(not_needed(op)),
    }
}

/// A client of the store the environment names: the namespace of `GC_STORE_ROOT` (else
/// `--namespace`), created with `GC_BEADS_PREFIX` by its first write (the cluster checks the
/// prefix then, so a bad one fails writes to a new store, not reads).
fn store_client(cli: &Cli) -> Result<api::client::Client, Failure> {
    let variable = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let namespace = match variable(STORE_ROOT_VARIABLE) {
        Some(root) => namespace_of_store(&root, &variable(STORE_SCOPE_VARIABLE).unwrap_or_default()),
        None => cli.namespace(),
    };
    cli.client_with(&namespace, variable(PREFIX_VARIABLE))
}

async fn cook(client: &api::client::Client, input: CookInput) -> Result<String, Failure> {
    let vars = crate::work::molecule::vars(&input.vars.unwrap_or_default()).map_err(|failure| match failure {
        Failure::Usage(message) => error(format!("mol-cook: {message}")),
        other => other,
    })?;
    let formula = match formula_source(&input.formula)? {
        FormulaSource::Named(name) if name.is_empty() => return Err(error("mol-cook: formula is empty; name one")),
        source => source,
    };
    let command =
        Command::MolCook(Cook { formula, title: input.title, vars, ephemeral: input.ephemeral.unwrap_or(false) });
    Ok(one_bead(client.execute(command).await?, "molecule root")?.id.0)
}

/// `list [--status=S] [--assignee=A] [--type=T] [--limit=N]`, each flag also as `--flag VALUE`.
async fn list(client: &api::client::Client, words: &Words<'_>) -> CommandResult {
    let mut flags: BTreeMap<&str, String> = BTreeMap::new();
    let mut remaining = words.words.iter();
    while let Some(word) = remaining.next() {
        let (name, value) = match word.split_once('=') {
            Some((name, value)) => (name, value.to_string()),
            None => (word.as_str(), remaining.next().cloned().unwrap_or_default()),
        };
        if value.is_empty() {
            // `--status=` is no filter, as an absent flag is.
            continue;
        }
        let name = match name {
            "--status" => "status",
            "--assignee" => "assignee",
            "--type" => "type",
            "--limit" => "limit",
            other => {
                return Err(error(format!(
                    "list: unknown flag {other:?}; use --status, --assignee, --type or --limit"
                )));
            }
        };
        flags.insert(name, value);
    }
    let limit = flags.get("limit").map(|text| limit_of(text, "list")).transpose()?.unwrap_or(0);
    let status = flags.get("status").map(String::as_str);
    let beads = list_beads(client, status, flags.get("assignee"), flags.get("type"), limit).await?;
    print_wire_beads(&beads);
    Ok(true)
}

/// Beads oldest first, closed included. A status is read as the protocol folds it: `open` means
/// every status that folds to open; any other of bd's statuses matches itself. Each page is one
/// query for all of the statuses.
async fn list_beads(
    client: &api::client::Client,
    status: Option<&str>,
    assignee: Option<&String>,
    bead_type: Option<&String>,
    limit: u32,
) -> Result<Vec<Bead>, Failure> {
    let statuses: Vec<Status> = match status {
        None | Some("") => Vec::new(),
        Some(text) => {
            let status = parse_status(text).map_err(|refusal| error(format!("{refusal}")))?;
            if status == Status::Open {
                Status::ALL.iter().copied().filter(|each| each.folded() == Status::Open).collect()
            } else {
                vec![status]
            }
        }
    };
    let filter = ListFilter {
        statuses,
        assignee: assignee.cloned(),
        bead_type: bead_type.cloned(),
        all: true,
        ..ListFilter::default()
    };
    // Paged through the cluster, oldest first: a store of any size lists whole.
    let oldest_first = SortOrder::parse("created", true)?;
    Listing { filter, local: LocalFilter::default(), sort: oldest_first, offset: 0, limit }.run(client).await
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// JSON values of every shape, nested a little.
    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(serde_json::Value::from),
            ".{0,40}".prop_map(serde_json::Value::from),
            prop::sample::select(vec!["task", "bug", "open", "closed", "in_progress", "st-1", "", "a=b"])
                .prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 32, 8, |inner| {
            let keys = prop::sample::select(vec![
                "title",
                "type",
                "status",
                "labels",
                "metadata",
                "parent",
                "assignee",
                "priority",
                "description",
                "formula",
                "vars",
                "dry_run",
                "add_labels",
                "remove_labels",
                "other",
            ]);
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(keys.prop_map(String::from), inner, 0..6)
                    .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("STRAND_FUZZ_CASES").ok().and_then(|text| text.parse().ok()).unwrap_or(300),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// The exec-store stdin parser, with the commands its input becomes: structure-aware
        /// (JSON objects with the keys operations take, and values of every type) and raw
        /// bytes through the bounded reader. Nothing may panic.
        #[test]
        fn exec_store_stdin_never_panics(value in json(), raw in prop::collection::vec(any::<u8>(), 0..256)) {
            for text in [value.to_string(), String::from_utf8_lossy(&raw).into_owned()] {
                let Ok(text) = crate::wire::read_request(std::io::Cursor::new(text.into_bytes()), "stdin") else { continue };
                if let Ok(input) = parse_json::<CreateInput>(&text, "create") {
                    let _ = input.command("create");
                }
                if let Ok(input) = parse_json::<UpdateInput>(&text, "update") {
                    let _ = input.command("update", bead_id("st-1"));
                }
                let _ = parse_json::<CookInput>(&text, "cook");
                let _ = parse_json::<PurgeInput>(&text, "purge");
            }
        }
    }

    #[test]
    fn a_beads_dir_names_the_store_of_its_scope_root_apart_from_the_exec_stores() {
        let city = namespace_of_beads_dir("/srv/city/.beads");
        assert_eq!(city, namespace_of_beads_dir("/srv/city/.beads/"));
        assert_eq!(city, namespace_of_store("/srv/city", "bd"));
        assert!(city.starts_with("gc:bd:city:"), "{city}");
        assert_ne!(city, namespace_of_store("/srv/city", "city"), "the exec path's store is another");
        assert_ne!(city, namespace_of_beads_dir("/srv/city/rigs/web/.beads"), "each rig is its own store");
        assert_eq!(namespace_of_beads_dir("/srv/odd"), namespace_of_store("/srv/odd", "bd"));
    }
}
