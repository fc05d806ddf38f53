//! `strand import [FILE]`: beads from `bd export` JSONL, with their ids, statuses, timestamps,
//! labels, metadata and dependencies, into the namespace, all or nothing per file.
//!
//! Every line is read and checked before anything is written; a bad line is reported by number
//! and nothing is imported. No imported id may exist in the namespace already (an import adds,
//! never overwrites), and every parent must be in the file or the namespace. The beads go to the
//! cluster in [`Command::Import`] batches of at most [`IMPORT_BEADS_MAX`] beads and half a
//! request's bytes, parents before children; each batch is atomic. If a batch is refused (a
//! cycle with the namespace's beads, or a change made meanwhile), the batches already written are
//! taken out again by [`Command::ImportUndo`], last first, which leaves the namespace as the
//! import found it; while a large file is being written, readers can see the batches written so
//! far. A pair of non-blocking edges between two beads in both directions (bd keeps
//! `relates-to` that way) is kept one way, since Strand's edges never form cycles.
//!
//! bd's `parent-child` dependency becomes the bead's parent; every other dependency an edge.
//! bd's `sender` is Strand's `from`; `design` and `acceptance_criteria` are kept as metadata of
//! those names, as are a gate's `await_type`, `await_id`, `timeout` and `waiters` (see
//! `gate_fields`). Comments and memory lines have no place in Strand: they are counted and
//! reported, not imported.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::Duration;

use api::client::{Client, ClientError};
use api::command::validate_command;
use api::command::{Command, ImportedBead, Query};
use api::commands::get::Lookup;
use api::convert::parse_status;
use api::limits::{IDS_PER_REQUEST_MAX, IMPORT_BEADS_MAX, REQUEST_BYTES_MAX};
use api::model::{Bead, BeadId, DepType, Status, Timestamp};
use clap::Args;
use serde::Deserialize;

use crate::answers::beads_of;
use crate::beads::gate_fields::{AWAIT_ID_KEY, AWAIT_TYPE_KEY, REF_KEY, TIMEOUT_KEY, WAITERS_KEY};
use crate::output::print_value;
use crate::{Cli, CommandResult, Failure};
use api::go_duration::format_go_duration;

/// `strand import`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The JSONL file (`bd export` output); `-` reads stdin.
    file: Option<PathBuf>,
    /// The file, as bd's `-i` names it (also `--from-file`).
    #[arg(long = "input", short = 'i', alias = "from-file", conflicts_with = "file")]
    input: Option<PathBuf>,
    /// Check every line and the namespace, and write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// The bytes of source lines one batch carries at most: half a request, leaving room for the
/// encoding's overhead.
const BATCH_BYTES_MAX: usize = REQUEST_BYTES_MAX / 2;
/// The longest line read: one bead's fields at their limits fit well within it.
const LINE_BYTES_MAX: usize = 32 * 1024 * 1024;

/// A dependency as `bd export` writes it.
#[derive(Deserialize)]
struct DependencyLine {
    depends_on_id: String,
    #[serde(rename = "type", default)]
    dep_type: String,
}

/// One issue line of `bd export`; fields Strand has no place for are ignored.
#[derive(Deserialize)]
struct IssueLine {
    #[serde(rename = "_type")]
    record_type: Option<String>,
    id: Option<String>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    design: String,
    #[serde(default)]
    acceptance_criteria: String,
    #[serde(default)]
    notes: String,
    #[serde(default)]
    status: String,
    priority: Option<u8>,
    issue_type: Option<String>,
    #[serde(rename = "type")]
    bead_type: Option<String>,
    #[serde(default)]
    assignee: String,
    #[serde(default)]
    sender: String,
    #[serde(default)]
    from: String,
    parent: Option<String>,
    created_at: Option<String>,
    updated_at: Option<String>,
    started_at: Option<String>,
    closed_at: Option<String>,
    close_reason: Option<String>,
    defer_until: Option<String>,
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    dependencies: Vec<DependencyLine>,
    #[serde(default)]
    comments: Vec<serde_json::Value>,
    #[serde(default)]
    ephemeral: bool,
    /// bd's legacy name for `ephemeral`.
    #[serde(default)]
    wisp: bool,
    #[serde(default)]
    no_history: bool,
    /// A gate's columns, kept in metadata (see `gate_fields`).
    #[serde(default)]
    await_type: String,
    #[serde(default)]
    await_id: String,
    /// Go's `time.Duration`: nanoseconds (0 or less: none).
    #[serde(default)]
    timeout: i64,
    #[serde(default)]
    waiters: Vec<String>,
}

/// What reading a file found.
#[derive(Default)]
struct Parsed {
    /// The beads, with the source length of each line.
    beads: Vec<(Bead, usize)>,
    /// Memory and tombstone lines.
    skipped: usize,
    /// Comments left behind.
    comments: usize,
    /// Reverse edges of two-way non-blocking pairs, left out.
    folded: usize,
}

fn time(text: Option<&str>, field: &str) -> Result<Option<Timestamp>, String> {
    match text.filter(|text| !text.is_empty()) {
        None => Ok(None),
        Some(text) => {
            Timestamp::parse_rfc3339(text).map(Some).ok_or_else(|| format!("{field} {text:?} is not an RFC 3339 time"))
        }
    }
}

/// A metadata value as text: strings as they are, anything else as its JSON.
fn metadata_text(value: serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    }
}

impl IssueLine {
    fn into_bead(self, now: Timestamp) -> Result<Bead, String> {
        let id = self
            .id
            .filter(|id| !id.is_empty())
            .ok_or("it has no \"id\"; an import keeps ids, so each line needs one")?;
        let status = if self.status.is_empty() {
            Status::Open
        } else {
            parse_status(&self.status).map_err(|e| e.to_string())?
        };
        let mut metadata: BTreeMap<String, String> = match self.metadata {
            None | Some(serde_json::Value::Null) => BTreeMap::new(),
            Some(serde_json::Value::Object(map)) => {
                map.into_iter().map(|(key, value)| (key, metadata_text(value))).collect()
            }
            Some(serde_json::Value::String(text)) if text.is_empty() || text == "{}" => BTreeMap::new(),
            Some(other) => return Err(format!("metadata is {other}, not a JSON object")),
        };
        let timeout = u64::try_from(self.timeout).ok().filter(|nanos| *nanos > 0);
        let timeout = timeout.map(|nanos| format_go_duration(Duration::from_nanos(nanos)));
        // Gas City's gate-sweep reads a GitHub gate's run or PR from `metadata.ref`.
        let reference = if self.await_type.starts_with("gh:") { self.await_id.clone() } else { String::new() };
        let waiters = (!self.waiters.is_empty()).then(|| serde_json::Value::from(self.waiters).to_string());
        for (key, text) in [
            ("design", self.design),
            ("acceptance_criteria", self.acceptance_criteria),
            (AWAIT_TYPE_KEY, self.await_type),
            (AWAIT_ID_KEY, self.await_id),
            (TIMEOUT_KEY, timeout.unwrap_or_default()),
            (WAITERS_KEY, waiters.unwrap_or_default()),
            (REF_KEY, reference),
        ] {
            if !text.is_empty() {
                metadata.entry(key.to_string()).or_insert(text);
            }
        }
        let mut parent_id = self.parent.filter(|parent| !parent.is_empty()).map(BeadId);
        let mut depends_on = BTreeMap::new();
        for dependency in self.dependencies {
            let target = BeadId(dependency.depends_on_id);
            match dependency.dep_type.as_str() {
                "parent-child" => {
                    parent_id.get_or_insert(target);
                }
                "" => {
                    depends_on.insert(target, DepType::blocks());
                }
                other => {
                    depends_on.insert(target, DepType(other.to_string()));
                }
            }
        }
        let created_at = time(self.created_at.as_deref(), "created_at")?.unwrap_or(now);
        Ok(Bead {
            id: BeadId(id),
            seq: 0,
            title: self.title,
            description: self.description,
            notes: self.notes,
            status,
            bead_type: self.issue_type.or(self.bead_type).unwrap_or_default(),
            priority: self.priority,
            assignee: self.assignee,
            from: if self.from.is_empty() { self.sender } else { self.from },
            parent_id,
            reference: String::new(),
            labels: self.labels.into_iter().filter(|label| !label.is_empty()).collect(),
            metadata,
            ephemeral: self.ephemeral || self.wisp,
            no_history: self.no_history,
            created_at,
            updated_at: time(self.updated_at.as_deref(), "updated_at")?.unwrap_or(created_at),
            revision: 0,
            started_at: time(self.started_at.as_deref(), "started_at")?,
            closed_at: time(self.closed_at.as_deref(), "closed_at")?,
            close_reason: self.close_reason.filter(|reason| !reason.is_empty()),
            defer_until: time(self.defer_until.as_deref(), "defer_until")?,
            depends_on,
            lease: None,
            delivery_count: 0,
            counts: Default::default(),
        })
    }
}

/// Reads and checks every line; the first bad one is refused by number.
fn parse(mut reader: impl BufRead, source: &str) -> Result<Parsed, Failure> {
    let mut parsed = Parsed::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    // Lines without `created_at` are stamped with the reader's clock, as bd stamps them.
    let now = Timestamp(crate::values::now_ms());
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        // Never more of a line than its limit and one byte: an endless line is refused, not held.
        let read = (&mut reader)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|error| Failure::Refused(format!("cannot read {source}: {error}")))?;
        if read == 0 {
            break;
        }
        number += 1;
        let bad = |reason: String| {
            Failure::Refused(format!(
                "line {number} of {source}: {reason}; nothing was imported, fix the line and run the import again"
            ))
        };
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > LINE_BYTES_MAX {
            return Err(bad(format!("the line is over {LINE_BYTES_MAX} bytes")));
        }
        let text = std::str::from_utf8(&line).map_err(|_| bad("the line is not UTF-8".into()))?.trim();
        if text.is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(text).map_err(|error| bad(format!("not JSON: {error}")))?;
        if !value.is_object() {
            return Err(bad("a line is one JSON object (a bead)".into()));
        }
        let issue: IssueLine = serde_json::from_value(value).map_err(|error| bad(error.to_string()))?;
        match issue.record_type.as_deref() {
            None | Some("issue") => {}
            Some("memory") => {
                parsed.skipped += 1;
                continue;
            }
            Some(other) => return Err(bad(format!("_type {other:?} is neither \"issue\" nor \"memory\""))),
        }
        if issue.status == "tombstone" {
            parsed.skipped += 1;
            continue;
        }
        parsed.comments += issue.comments.len();
        let bead = issue.into_bead(now).map_err(bad)?;
        if let Some(first) = seen.insert(bead.id.0.clone(), number) {
            return Err(bad(format!("id {} appears again (first on line {first})", bead.id)));
        }
        if text.len() > BATCH_BYTES_MAX {
            return Err(bad(format!(
                "the bead is {} bytes, over the {BATCH_BYTES_MAX} one import command carries; shorten its description, notes or metadata",
                text.len()
            )));
        }
        validate_command(&Command::Import(api::command::Import { beads: vec![bead.clone()] }))
            .map_err(|refusal| bad(refusal.to_string()))?;
        parsed.beads.push((bead, text.len()));
    }
    parsed.folded = fold_two_way_edges(&mut parsed.beads);
    parsed.beads = parents_first(parsed.beads)?;
    Ok(parsed)
}

/// Keeps one direction of each pair of same-typed, non-blocking edges that two beads of the file
/// hold to each other (the one from the lower id); answers how many were left out.
fn fold_two_way_edges(beads: &mut [(Bead, usize)]) -> usize {
    let edge = |from: &BeadId, to: &BeadId, beads: &[(Bead, usize)]| -> Option<DepType> {
        beads.iter().find(|(bead, _)| &bead.id == from).and_then(|(bead, _)| bead.depends_on.get(to).cloned())
    };
    let index: BTreeMap<BeadId, usize> =
        beads.iter().enumerate().map(|(position, (bead, _))| (bead.id.clone(), position)).collect();
    let mut dropped: Vec<(usize, BeadId)> = Vec::new();
    for (bead, _) in beads.iter() {
        for (target, dep_type) in &bead.depends_on {
            let non_blocking = !dep_type.blocks_until_closed() && !dep_type.inherits_blocked();
            let reverse = index.get(target).and_then(|_| edge(target, &bead.id, beads));
            if non_blocking && bead.id > *target && reverse.as_ref() == Some(dep_type) {
                dropped.push((index[&bead.id], target.clone()));
            }
        }
    }
    for (position, target) in &dropped {
        beads[*position].0.depends_on.remove(target);
    }
    dropped.len()
}

/// Puts parents before their children (a parent must exist when its child is written), keeping
/// the file's order otherwise; refuses parents that form a cycle.
fn parents_first(beads: Vec<(Bead, usize)>) -> Result<Vec<(Bead, usize)>, Failure> {
    let position: BTreeMap<&BeadId, usize> =
        beads.iter().enumerate().map(|(index, (bead, _))| (&bead.id, index)).collect();
    let parents: Vec<Option<usize>> = beads
        .iter()
        .map(|(bead, _)| bead.parent_id.as_ref().and_then(|parent| position.get(parent).copied()))
        .collect();
    let order = crate::bulk::graph::parents_first(&parents)
        .ok_or_else(|| Failure::Refused("the parents in the file form a cycle; nothing was imported".into()))?;
    let mut slots: Vec<Option<(Bead, usize)>> = beads.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|index| slots[index].take()).collect())
}

/// Batches of at most [`IMPORT_BEADS_MAX`] beads and [`BATCH_BYTES_MAX`] source bytes.
fn batches(beads: Vec<(Bead, usize)>) -> Vec<Vec<Bead>> {
    let mut batches: Vec<Vec<Bead>> = Vec::new();
    let mut bytes = 0;
    for (bead, size) in beads {
        let full = batches.last().is_none_or(|batch| batch.len() >= IMPORT_BEADS_MAX || bytes + size > BATCH_BYTES_MAX);
        if full {
            batches.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        batches.last_mut().expect("a batch was just pushed").push(bead);
    }
    batches
}

/// Refuses the import if any of its ids is already a bead.
async fn check_ids_free(client: &Client, beads: &[(Bead, usize)]) -> Result<(), Failure> {
    let ids: Vec<BeadId> = beads.iter().map(|(bead, _)| bead.id.clone()).collect();
    for chunk in ids.chunks(IDS_PER_REQUEST_MAX) {
        if let Some(existing) = beads_of(client.query(Query::from(Lookup { ids: chunk.to_vec() })).await?).first() {
            return Err(Failure::Refused(format!(
                "bead {} already exists in this namespace; an import only adds beads, so import into an empty namespace (--namespace) or leave that bead out; nothing was imported",
                existing.id
            )));
        }
    }
    Ok(())
}

/// Refuses the import if a parent is neither in the file nor in the namespace.
async fn check_parents(client: &Client, beads: &[(Bead, usize)]) -> Result<(), Failure> {
    let in_file: BTreeSet<&BeadId> = beads.iter().map(|(bead, _)| &bead.id).collect();
    let outside: BTreeSet<BeadId> = beads
        .iter()
        .filter_map(|(bead, _)| bead.parent_id.clone())
        .filter(|parent| !in_file.contains(parent))
        .collect();
    let outside: Vec<BeadId> = outside.into_iter().collect();
    for chunk in outside.chunks(IDS_PER_REQUEST_MAX) {
        let found: BTreeSet<BeadId> = beads_of(client.query(Query::from(Lookup { ids: chunk.to_vec() })).await?)
            .into_iter()
            .map(|bead| bead.id)
            .collect();
        if let Some(missing) = chunk.iter().find(|parent| !found.contains(*parent)) {
            let child =
                beads.iter().find(|(bead, _)| bead.parent_id.as_ref() == Some(missing)).map(|(bead, _)| &bead.id);
            return Err(Failure::Refused(format!(
                "bead {} names parent {missing}, which is neither in the file nor in this namespace; nothing was imported",
                child.map_or_else(String::new, ToString::to_string)
            )));
        }
    }
    Ok(())
}

/// Takes out what an import wrote, the last batch first, so children go before their parents.
async fn undo(client: &Client, written: &[ImportedBead]) -> Result<(), Failure> {
    let last_first: Vec<ImportedBead> = written.iter().rev().cloned().collect();
    for chunk in last_first.chunks(IMPORT_BEADS_MAX) {
        client.execute(Command::ImportUndo(api::command::ImportUndo { beads: chunk.to_vec() })).await?;
    }
    Ok(())
}

fn open(args: &ImportArgs) -> Result<(Box<dyn BufRead>, String), Failure> {
    match args.file.as_ref().or(args.input.as_ref()).filter(|path| path.as_os_str() != "-") {
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|error| Failure::Refused(format!("cannot open {}: {error}", path.display())))?;
            Ok((Box::new(BufReader::new(file)), path.display().to_string()))
        }
        None => {
            crate::wire::say_when_reading_a_terminal("the beads to import (bd export JSONL)");
            Ok((Box::new(BufReader::new(std::io::stdin())), "stdin".to_string()))
        }
    }
}

/// Runs `strand import`. JSON: bd's `{source, created, skipped, ids, dry_run?, schema_version}`.
pub async fn run(cli: &Cli, args: &ImportArgs) -> CommandResult {
    let (reader, source) = open(args)?;
    let mut parsed = parse(reader, &source)?;
    let client = cli.client()?;
    check_ids_free(&client, &parsed.beads).await?;
    check_parents(&client, &parsed.beads).await?;
    let ids: Vec<String> = parsed.beads.iter().map(|(bead, _)| bead.id.0.clone()).collect();
    let count = ids.len();
    if parsed.comments > 0 {
        let comments = crate::output::counted(parsed.comments as u64, "comment");
        eprintln!("note: {comments} not imported: Strand keeps no comments");
    }
    if parsed.folded > 0 {
        eprintln!(
            "note: {} that two beads held to each other kept one way (from the lower id): Strand's edges form no cycles",
            crate::output::counted(parsed.folded as u64, "edge")
        );
    }
    if !args.dry_run && count > 0 {
        let mut written: Vec<ImportedBead> = Vec::with_capacity(count);
        let bar = crate::output::progress(count as u64, "{pos}/{len} beads {wide_bar} {per_sec}, {eta} left");
        for batch in batches(std::mem::take(&mut parsed.beads)) {
            bar.inc(batch.len() as u64);
            let sent: BTreeMap<BeadId, Vec<BeadId>> =
                batch.iter().map(|bead| (bead.id.clone(), bead.depends_on.keys().cloned().collect())).collect();
            let imported = |bead: Bead| ImportedBead {
                edges: sent.get(&bead.id).cloned().unwrap_or_default(),
                id: bead.id,
                revision: bead.revision,
            };
            match client.execute(Command::Import(api::command::Import { beads: batch })).await {
                Ok(answer) => written.extend(beads_of(answer).into_iter().map(imported)),
                Err(error @ ClientError::Refused(_)) => return Err(undo_after(&client, &written, error.into()).await),
                Err(error) => {
                    // The batch may have been applied before the answer was lost: find out.
                    let ids: Vec<BeadId> = sent.keys().cloned().collect();
                    match client.query(Query::from(Lookup { ids })).await {
                        Ok(answer) => written.extend(beads_of(answer).into_iter().map(imported)),
                        Err(_) => {
                            return Err(Failure::Refused(format!(
                                "{error}; whether the last batch was written is unknown, and there are {} written before it; check with `strand list --all` and remove them with `strand delete --force`",
                                crate::output::counted(written.len() as u64, "bead")
                            )));
                        }
                    }
                    return Err(undo_after(&client, &written, error.into()).await);
                }
            }
        }
        bar.finish_and_clear();
    }
    if cli.json {
        let mut value = serde_json::json!({
            "source": source, "created": if args.dry_run { 0 } else { count }, "skipped": parsed.skipped,
            "ids": ids, "schema_version": 1,
        });
        if args.dry_run {
            value["dry_run"] = true.into();
            value["would_create"] = count.into();
        }
        print_value(&value);
    } else {
        let source = api::printable::printable(&source);
        let done = if args.dry_run { "Would import" } else { "Imported" };
        println!("{done} {count} issues from {source} ({} lines skipped)", parsed.skipped);
    }
    Ok(true)
}

/// After a refused batch: removes what earlier batches wrote and says what happened.
async fn undo_after(client: &Client, written: &[ImportedBead], failure: Failure) -> Failure {
    let reason = failure.message().to_string();
    if written.is_empty() {
        return Failure::Refused(format!("{reason}; nothing was imported"));
    }
    match undo(client, written).await {
        Ok(()) => Failure::Refused(format!(
            "{reason}; the {} written before {} taken out again, so nothing was imported",
            crate::output::counted(written.len() as u64, "bead"),
            if written.len() == 1 { "was" } else { "were" }
        )),
        Err(undo_failure) => {
            let ids: BTreeSet<&str> = written.iter().map(|bead| bead.id.0.as_str()).collect();
            let undo_reason = undo_failure.message().to_string();
            Failure::Refused(format!(
                "{reason}; removing the {} written before also failed ({undo_reason}); delete them with `strand delete --force`: {}",
                crate::output::counted(ids.len() as u64, "bead"),
                ids.into_iter().collect::<Vec<_>>().join(" ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPORT: &str = concat!(
        r#"{"_type":"issue","id":"gc-a1","title":"Parent","status":"open","priority":1,"issue_type":"epic","created_at":"2026-01-02T03:04:05.123456789Z","updated_at":"2026-01-03T00:00:00Z","labels":["x"],"metadata":{"gc.kind":"workflow","n":3},"dependency_count":0}"#,
        "\n\n",
        r#"{"_type":"memory","key":"k","value":"v"}"#,
        "\n",
        r#"{"_type":"issue","id":"gc-b2","title":"Child","status":"closed","priority":2,"issue_type":"task","created_at":"2026-01-02T00:00:00Z","updated_at":"2026-01-04T00:00:00Z","closed_at":"2026-01-04T00:00:00Z","close_reason":"done","dependencies":[{"issue_id":"gc-b2","depends_on_id":"gc-a1","type":"parent-child","created_at":"2026-01-02T00:00:00Z","metadata":"{}"},{"issue_id":"gc-b2","depends_on_id":"external:rig:x","type":"blocks"}],"comments":[{"id":"1","issue_id":"gc-b2","author":"a","text":"t","created_at":"2026-01-02T00:00:00Z"}],"sender":"mayor","design":"the plan"}"#,
        "\n",
    );

    #[test]
    fn a_bd_export_reads_into_beads_with_ids_times_parents_and_edges() {
        let parsed = parse(EXPORT.as_bytes(), "export.jsonl").unwrap_or_else(|_| panic!("parses"));
        assert_eq!((parsed.beads.len(), parsed.skipped, parsed.comments), (2, 1, 1));
        let (parent, child) = (&parsed.beads[0].0, &parsed.beads[1].0);
        assert_eq!((parent.id.0.as_str(), parent.bead_type.as_str(), parent.priority), ("gc-a1", "epic", Some(1)));
        assert_eq!(parent.created_at, Timestamp::parse_rfc3339("2026-01-02T03:04:05.123Z").expect("time"));
        assert_eq!(parent.metadata.get("n").map(String::as_str), Some("3"), "a number is kept as its JSON text");
        assert_eq!(child.parent_id, Some(BeadId::from("gc-a1")), "parent-child becomes the parent");
        assert_eq!(child.depends_on.get(&BeadId::from("external:rig:x")), Some(&DepType::blocks()));
        assert_eq!((child.status, child.close_reason.as_deref()), (Status::Closed, Some("done")));
        assert_eq!((child.from.as_str(), child.metadata["design"].as_str()), ("mayor", "the plan"));
    }

    #[test]
    fn a_bad_line_is_refused_by_number() {
        let good = r#"{"id":"gc-1","title":"one"}"#;
        for (bad, expected) in [
            ("{not json", "not JSON"),
            ("[1,2]", "one JSON object"),
            (r#"{"title":"no id"}"#, "has no \"id\""),
            (r#"{"id":"gc-2","title":"x","status":"shipped"}"#, "invalid status"),
            (r#"{"id":"gc-2","title":"x","created_at":"yesterday"}"#, "not an RFC 3339 time"),
            (r#"{"id":"gc-2","title":""}"#, "title"),
            (r#"{"id":"gc-2","title":"x","priority":9}"#, "priority"),
            (r#"{"id":"gc-1","title":"again"}"#, "appears again (first on line 1)"),
            (r#"{"id":"gc-2","title":"x","metadata":[1]}"#, "not a JSON object"),
            (r#"{"_type":"audit","id":"gc-2"}"#, "neither \"issue\""),
            (
                r#"{"id":"../../etc","title":"x"}"#,
                "imported bead \"../../etc\": id \"../../etc\" has characters an id cannot hold",
            ),
        ] {
            let text = format!("{good}\n{bad}\n");
            let Err(Failure::Refused(message)) = parse(text.as_bytes(), "f.jsonl") else { panic!("{bad}: refused") };
            assert!(message.starts_with("line 2 of f.jsonl: "), "{message}");
            assert!(message.contains(expected), "{bad}: {message}");
            assert!(message.contains("nothing was imported"), "{message}");
        }
    }

    #[test]
    fn parents_come_first_and_batches_stay_within_their_bounds() {
        let parsed = parse(EXPORT.as_bytes(), "f").unwrap_or_else(|_| panic!("parses"));
        let beads = parents_first(parsed.beads.into_iter().rev().collect()).unwrap_or_else(|_| panic!("no cycle"));
        assert_eq!(beads[0].0.id.0, "gc-a1");
        let many: Vec<(Bead, usize)> = (0..2500).map(|_| (beads[0].0.clone(), 10)).collect();
        let sizes: Vec<usize> = batches(many).iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![1000, 1000, 500]);
        let large: Vec<(Bead, usize)> = (0..5).map(|_| (beads[0].0.clone(), BATCH_BYTES_MAX / 2)).collect();
        assert_eq!(batches(large).iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 1]);
    }
}
