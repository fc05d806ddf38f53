//! How the CLI prints beads, events and progress: the JSON shape `bd` prints (with Strand's extra
//! fields), and a one-line-per-item text form. Lists are always arrays, `[]` when empty, never `null`.
//!
//! Invariant: the text form shows every piece of stored text through `api::printable`: one-line
//! fields (ids, titles, actors, labels, metadata) with every control character escaped, block
//! fields (a description) keeping line feeds and tabs with their later lines indented. Agent text
//! thus never adds a row or drives the terminal. JSON escapes by construction and is unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};

use api::model::{Bead, BeadId, Dependency, Event, Status};
use api::outcome::Progress;
use api::printable::{printable, printable_block};
use serde::Serialize;

use crate::beads::gate_fields::GateFields;

/// A bead as printed with `--json`.
#[derive(Serialize)]
pub struct BeadJson<'a> {
    id: &'a str,
    title: &'a str,
    description: &'a str,
    notes: &'a str,
    status: &'a str,
    #[serde(rename = "type")]
    bead_type: &'a str,
    /// `bd` calls the type `issue_type`; both are printed so either reader works.
    issue_type: &'a str,
    /// Always printed, as bd prints it: a bead without one prints bd's default ([`bd_priority`]).
    priority: u8,
    assignee: &'a str,
    from: &'a str,
    parent_id: String,
    /// bd calls the parent `parent`; both are printed.
    parent: String,
    #[serde(rename = "ref")]
    reference: &'a str,
    needs: Vec<String>,
    labels: Vec<&'a str>,
    metadata: &'a BTreeMap<String, String>,
    ephemeral: bool,
    no_history: bool,
    created_at: String,
    updated_at: String,
    /// The Raft index of the bead's last change: what `--if-revision` compares.
    revision: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    closed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    close_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    defer_until: Option<String>,
    dependencies: Vec<DependencyJson>,
    /// A leased claim's lease: its id (the fencing token for `--lease-id`), holder, length and
    /// expiry; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<LeaseJson>,
    /// How many leases of the bead expired; absent while none did.
    #[serde(skip_serializing_if = "is_zero")]
    delivery_count: u32,
    /// A gate's await fields, at the top level as bd prints them (see `gate_fields`).
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    gate: Option<GateJson>,
}

/// A lease as printed with `--json`.
#[derive(Serialize)]
struct LeaseJson {
    id: u64,
    holder: String,
    ttl_ms: u64,
    expires_at: String,
    renewed_at: u64,
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

/// A gate's await fields as bd prints them: `timeout` in nanoseconds, each left out when unset.
#[derive(Serialize)]
struct GateJson {
    #[serde(skip_serializing_if = "String::is_empty")]
    await_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    await_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    waiters: Vec<String>,
}

impl From<GateFields> for GateJson {
    fn from(fields: GateFields) -> Self {
        GateJson {
            await_type: fields.await_type,
            await_id: fields.await_id,
            timeout: fields
                .timeout
                .filter(|timeout| !timeout.is_zero())
                .map(|timeout| u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX)),
            waiters: fields.waiters,
        }
    }
}

/// A dependency row `{issue_id, depends_on_id, type}`.
#[derive(Serialize)]
pub struct DependencyJson {
    issue_id: String,
    depends_on_id: String,
    #[serde(rename = "type")]
    dep_type: String,
}

impl From<&Dependency> for DependencyJson {
    fn from(dependency: &Dependency) -> Self {
        DependencyJson {
            issue_id: dependency.issue_id.0.clone(),
            depends_on_id: dependency.depends_on_id.0.clone(),
            dep_type: dependency.dep_type.0.clone(),
        }
    }
}

impl<'a> From<&'a Bead> for BeadJson<'a> {
    fn from(bead: &'a Bead) -> Self {
        BeadJson {
            id: &bead.id.0,
            title: &bead.title,
            description: &bead.description,
            notes: &bead.notes,
            status: bead.status.as_str(),
            bead_type: &bead.bead_type,
            issue_type: &bead.bead_type,
            priority: bd_priority(bead),
            assignee: &bead.assignee,
            from: &bead.from,
            parent_id: bead.parent_id.as_ref().map(|id| id.0.clone()).unwrap_or_default(),
            parent: bead.parent_id.as_ref().map(|id| id.0.clone()).unwrap_or_default(),
            reference: &bead.reference,
            needs: bead.needs().into_iter().map(|id| id.0).collect(),
            labels: bead.labels.iter().map(String::as_str).collect(),
            metadata: &bead.metadata,
            ephemeral: bead.ephemeral,
            no_history: bead.no_history,
            created_at: bead.created_at.to_rfc3339(),
            updated_at: bead.updated_at.to_rfc3339(),
            revision: bead.revision,
            started_at: bead.started_at.map(|time| time.to_rfc3339()),
            closed_at: bead.closed_at.map(|time| time.to_rfc3339()),
            close_reason: bead.close_reason.as_deref(),
            defer_until: bead.defer_until.map(|time| time.to_rfc3339()),
            dependencies: bead.dependencies().iter().map(DependencyJson::from).collect(),
            lease: bead.lease.as_ref().map(|lease| LeaseJson {
                id: lease.id,
                holder: lease.holder.clone(),
                ttl_ms: lease.ttl_ms,
                expires_at: lease.expires_at.to_rfc3339(),
                renewed_at: lease.renewed_at,
            }),
            delivery_count: bead.delivery_count,
            gate: GateFields::of(bead).map(GateJson::from),
        }
    }
}

/// bd's priority when none is given: `bd create` stores it, and bd's other ways of making a bead
/// (cook, gate, graph) give it too.
pub const BD_DEFAULT_PRIORITY: u8 = 2;

/// The priority a bead shows on bd's surface: its own, or bd's default when it has none (a bead
/// made by `tx`, `sling`, `mail` or the exec store). The exec store prints an unset one as unset.
pub fn bd_priority(bead: &Bead) -> u8 {
    bead.priority.unwrap_or(BD_DEFAULT_PRIORITY)
}

fn print_json<T: Serialize>(value: &T) {
    println!("{}", serde_json::to_string_pretty(value).expect("JSON output serializes"));
}

/// How far the lines after the first of a block field (a description) are indented in text.
pub const BLOCK_INDENT: &str = "    ";

pub use api::printable::counted;

/// A progress bar on stderr with `template` (indicatif's), drawn only while stderr is a terminal,
/// so logs and pipes get no bar.
pub fn progress(total: u64, template: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(indicatif::ProgressStyle::with_template(template).expect("the template is valid"));
    bar
}

/// An id, safe to print: control characters escaped (`printable`).
pub fn id_text(id: &BeadId) -> String {
    printable(id.as_str()).to_string()
}

/// One line for a bead: `id [status] P? title (@assignee)`, its text escaped so that it stays
/// one line.
pub fn bead_line(bead: &Bead) -> String {
    let priority = bead.priority.map(|priority| format!(" P{priority}")).unwrap_or_default();
    let assignee = if bead.assignee.is_empty() { String::new() } else { format!(" @{}", printable(&bead.assignee)) };
    format!("{} [{}]{priority} {}{assignee}", printable(bead.id.as_str()), bead.status, printable(&bead.title))
}

/// Prints one bead (an object in JSON).
pub fn print_bead(bead: &Bead, json: bool) {
    if json {
        print_json(&BeadJson::from(bead));
        return;
    }
    println!("{}", bead_line(bead));
    // Every value is escaped before it is printed (an escaped value is empty only when the value is).
    let fields = [
        ("type", printable(&bead.bead_type).to_string()),
        ("parent", bead.parent_id.as_ref().map(id_text).unwrap_or_default()),
        ("labels", printable(&bead.labels.iter().cloned().collect::<Vec<_>>().join(", ")).to_string()),
        ("needs", printable(&bead.needs().iter().map(|id| id.0.clone()).collect::<Vec<_>>().join(", ")).to_string()),
        ("created", bead.created_at.to_rfc3339()),
        (
            "lease",
            bead.lease
                .as_ref()
                .map(|lease| {
                    let ttl = humantime::format_duration(std::time::Duration::from_millis(lease.ttl_ms));
                    format!(
                        "{} held by {} for {ttl}, until about {}",
                        lease.id,
                        printable(&lease.holder),
                        lease.expires_at.to_rfc3339()
                    )
                })
                .unwrap_or_default(),
        ),
        ("deliveries", if bead.delivery_count == 0 { String::new() } else { bead.delivery_count.to_string() }),
        ("description", printable_block(&bead.description, BLOCK_INDENT).to_string()),
    ];
    for (name, value) in fields {
        if !value.is_empty() {
            println!("  {name}: {value}");
        }
    }
    for (key, value) in &bead.metadata {
        println!("  metadata {} = {}", printable(key), printable(value));
    }
    let (notes, comments) = notes_and_comments(&bead.notes);
    if !notes.is_empty() {
        println!("  notes: {}", printable_block(&notes, BLOCK_INDENT));
    }
    if !comments.is_empty() {
        println!("  comments:");
        for comment in comments {
            println!("    {}", printable(comment));
        }
    }
}

/// A bead's notes apart from its comments, and the comments (`<author>: TEXT`): the lines of the
/// notes that start with [`api::model::COMMENT_MARK`], as `strand comment` appends them and the
/// cluster counts them. bd shows notes and comments apart; Strand keeps both in the notes.
fn notes_and_comments(notes: &str) -> (String, Vec<&str>) {
    let mut plain = Vec::new();
    let mut comments = Vec::new();
    for line in notes.split('\n') {
        match line.strip_prefix(api::model::COMMENT_MARK) {
            Some(comment) => comments.push(comment),
            None => plain.push(line),
        }
    }
    (plain.join("\n").trim_matches('\n').to_string(), comments)
}

/// Prints beads (an array in JSON, one line each in text).
pub fn print_beads(beads: &[Bead], json: bool) {
    if json {
        print_json(&beads.iter().map(BeadJson::from).collect::<Vec<_>>());
        return;
    }
    for bead in beads {
        println!("{}", bead_line(bead));
    }
}

/// bd's `schema_version` on single-object answers.
const SCHEMA_VERSION: u64 = 1;

/// A bead as a JSON object with extra keys.
fn bead_value(bead: &Bead, extra: &[(&str, serde_json::Value)]) -> serde_json::Value {
    let mut value = serde_json::to_value(BeadJson::from(bead)).expect("a bead serializes");
    for (key, extra_value) in extra {
        value[*key] = extra_value.clone();
    }
    value
}

/// Prints one bead as bd prints a single object: in JSON, an object with `schema_version: 1`.
pub fn print_bead_object(bead: &Bead, json: bool) {
    if json {
        print_json(&bead_value(bead, &[("schema_version", SCHEMA_VERSION.into())]));
    } else {
        print_bead(bead, false);
    }
}

/// How many `blocks` edges leave the bead (bd's `dependency_count`).
fn blocks_count(bead: &Bead) -> usize {
    bead.depends_on.values().filter(|dep_type| dep_type.0 == api::model::DepType::BLOCKS).count()
}

/// Beads as bd's `list` and `ready` print them (bd's `IssueWithCounts`): each with its
/// `dependency_count` (`blocks` edges it has), `dependent_count` (`blocks` edges of beads that
/// point at it) and `comment_count` (comments `strand comment` added), the last two as the
/// cluster's read answered them.
pub fn with_counts(beads: &[Bead]) -> Vec<serde_json::Value> {
    beads
        .iter()
        .map(|bead| {
            let counts: [(&str, serde_json::Value); 3] = [
                ("dependency_count", blocks_count(bead).into()),
                ("dependent_count", bead.counts.dependents.into()),
                ("comment_count", bead.counts.comments.into()),
            ];
            bead_value(bead, &counts)
        })
        .collect()
}

/// Prints beads as bd's `list` and `ready` do: in JSON an array, each with its counts.
pub fn print_with_counts(beads: &[Bead], json: bool) {
    if !json {
        print_beads(beads, false);
        return;
    }
    print_json(&with_counts(beads));
}

/// A bead at the other end of an edge, as bd prints it: the bead, with the edge's type, and
/// also the edge's own keys so that either reader works.
fn edge_bead(target: &Bead, row: &Dependency) -> serde_json::Value {
    bead_value(
        target,
        &[
            ("dependency_type", row.dep_type.0.clone().into()),
            ("issue_id", row.issue_id.0.clone().into()),
            ("depends_on_id", row.depends_on_id.0.clone().into()),
            ("type", row.dep_type.0.clone().into()),
        ],
    )
}

/// Prints `show`: in JSON an array, each bead's `dependencies` being the beads it waits for and
/// its `dependents` the beads that wait for it (`up`: the edges into the shown beads), each with
/// `dependency_type`. `others` holds the beads at the far ends; an edge to or from an id that is
/// not a bead is left out there, as in bd.
pub fn print_details(beads: &[Bead], others: &[Bead], up: &[Dependency], json: bool) {
    if !json {
        for bead in beads {
            print_bead(bead, false);
        }
        return;
    }
    print_json(&details(beads, others, up));
}

/// The JSON of `show` (see [`print_details`]).
fn details(beads: &[Bead], others: &[Bead], up: &[Dependency]) -> Vec<serde_json::Value> {
    let by_id: BTreeMap<&BeadId, &Bead> = others.iter().map(|other| (&other.id, other)).collect();
    beads
        .iter()
        .map(|bead| {
            let rows = bead.dependencies();
            let dependencies: Vec<serde_json::Value> = rows
                .iter()
                .filter_map(|row| by_id.get(&row.depends_on_id).map(|target| edge_bead(target, row)))
                .collect();
            let dependents: Vec<serde_json::Value> = up
                .iter()
                .filter(|row| row.depends_on_id == bead.id)
                .filter_map(|row| by_id.get(&row.issue_id).map(|source| edge_bead(source, row)))
                .collect();
            bead_value(
                bead,
                &[
                    ("dependencies", dependencies.into()),
                    ("dependents", dependents.into()),
                    ("dependency_count", blocks_count(bead).into()),
                ],
            )
        })
        .collect()
}

/// Prints `dep list` of one bead (or `--direction up`): the beads at the other end of each edge,
/// with `dependency_type`; ids that are not beads are left out, as in bd.
pub fn print_edge_beads(rows: &[Dependency], beads: &[Bead], up: bool, json: bool) {
    let pairs: Vec<(&Dependency, &Bead)> = rows
        .iter()
        .filter_map(|row| {
            let other = if up { &row.issue_id } else { &row.depends_on_id };
            beads.iter().find(|bead| &bead.id == other).map(|bead| (row, bead))
        })
        .collect();
    if json {
        print_json(&pairs.iter().map(|(row, bead)| edge_bead(bead, row)).collect::<Vec<_>>());
        return;
    }
    for (row, bead) in pairs {
        println!(
            "  {}: {} [P{}] ({}) via {}",
            printable(bead.id.as_str()),
            printable(&bead.title),
            bead.priority.map_or("-".into(), |p| p.to_string()),
            bead.status,
            printable(&row.dep_type.0)
        );
    }
}

/// Prints dependency rows.
pub fn print_dependencies(rows: &[Dependency], json: bool) {
    if json {
        print_json(&rows.iter().map(DependencyJson::from).collect::<Vec<_>>());
        return;
    }
    for row in rows {
        println!(
            "{} -> {} ({})",
            printable(row.issue_id.as_str()),
            printable(row.depends_on_id.as_str()),
            printable(&row.dep_type.0)
        );
    }
}

/// Prints any serializable value as JSON.
pub fn print_value<T: Serialize>(value: &T) {
    print_json(value);
}

/// An event as printed with `--json`: `{seq, type, ts, actor, subject, message}`.
#[derive(Serialize)]
pub struct EventJson<'a> {
    seq: u64,
    #[serde(rename = "type")]
    event_type: &'a str,
    /// RFC 3339.
    ts: String,
    actor: &'a str,
    subject: &'a str,
    message: &'a str,
}

impl<'a> From<&'a Event> for EventJson<'a> {
    fn from(event: &'a Event) -> Self {
        EventJson {
            seq: event.seq,
            event_type: &event.event_type,
            ts: event.timestamp.to_rfc3339(),
            actor: &event.actor,
            subject: &event.subject,
            message: &event.message,
        }
    }
}

/// One line for an event: `seq ts type subject by actor: message`, its text escaped so that it
/// stays one line.
pub fn event_line(event: &Event) -> String {
    let actor = if event.actor.is_empty() { String::new() } else { format!(" by {}", printable(&event.actor)) };
    let message = if event.message.is_empty() { String::new() } else { format!(": {}", printable(&event.message)) };
    format!(
        "{} {} {} {}{actor}{message}",
        event.seq,
        event.timestamp.to_rfc3339(),
        printable(&event.event_type),
        printable(&event.subject)
    )
}

/// Prints events (an array in JSON, one line each in text).
pub fn print_events(events: &[Event], json: bool) {
    if json {
        print_json(&events.iter().map(EventJson::from).collect::<Vec<_>>());
        return;
    }
    for event in events {
        println!("{}", event_line(event));
    }
}

/// Writes one event on one line, as a stream does: compact JSON or the text line. Fails when
/// stdout is gone (the reader of a pipe quit), which ends the stream.
pub fn write_event_line(event: &Event, json: bool) -> std::io::Result<()> {
    let line = if json {
        serde_json::to_string(&EventJson::from(event)).expect("JSON output serializes")
    } else {
        event_line(event)
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()
}

/// Writes one bead as one line (compact JSON, or the text line) and flushes it, for streams.
pub fn write_bead_line(bead: &Bead, json: bool) {
    let line = if json {
        serde_json::to_string(&BeadJson::from(bead)).expect("JSON output serializes")
    } else {
        let lease =
            bead.lease.as_ref().map(|lease| format!(" lease {} until {}", lease.id, lease.expires_at.to_rfc3339()));
        format!("{}{}", bead_line(bead), lease.unwrap_or_default())
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}

/// Width of the progress bar, in cells.
const PROGRESS_BAR_CELLS: usize = 10;

/// `[###.......] 3/10`: closed out of total, in cells of `#`.
pub fn progress_bar(closed: usize, total: usize) -> String {
    assert!(closed <= total, "closed {closed} is at most total {total}");
    let filled = (closed * PROGRESS_BAR_CELLS).checked_div(total).unwrap_or(0);
    format!("[{}{}] {closed}/{total}", "#".repeat(filled), ".".repeat(PROGRESS_BAR_CELLS - filled))
}

/// How one child of a container stands, for `mol status` and `convoy status`.
fn child_state(
    child: &Bead,
    current: Option<&BeadId>,
    closed: &BTreeSet<&BeadId>,
    siblings: &BTreeSet<&BeadId>,
) -> &'static str {
    if child.status == Status::Closed {
        return "closed";
    }
    if current == Some(&child.id) {
        return "current";
    }
    if child.status != Status::Open {
        return child.status.as_str();
    }
    let waiting = child.needs().iter().any(|need| siblings.contains(need) && !closed.contains(need));
    if waiting { "waiting" } else { "ready" }
}

/// Prints a molecule's or a convoy's progress. JSON: `{root, <children_key>, current, closed, total}`;
/// text: a summary line, a bar when stdout is a terminal, then one line per child with its state.
pub fn print_progress(progress: &Progress, children_key: &str, json: bool) {
    let closed = progress.closed();
    let total = progress.children.len();
    let closed_ids: BTreeSet<&BeadId> =
        progress.children.iter().filter(|child| child.status == Status::Closed).map(|child| &child.id).collect();
    let siblings: BTreeSet<&BeadId> = progress.children.iter().map(|child| &child.id).collect();
    if json {
        let mut object = serde_json::Map::new();
        // Each child also carries its 1-based step index (0 when it has no step ref) and state.
        let children: Vec<serde_json::Value> = progress
            .children
            .iter()
            .enumerate()
            .map(|(position, child)| {
                let mut value = serde_json::to_value(BeadJson::from(child)).expect("serializes");
                let index = if child.reference.is_empty() { 0 } else { position + 1 };
                let state = child_state(child, progress.current.as_ref(), &closed_ids, &siblings);
                value["step_index"] = index.into();
                value["state"] = state.into();
                value
            })
            .collect();
        object.insert("root".into(), serde_json::to_value(BeadJson::from(&progress.root)).expect("serializes"));
        object.insert(children_key.into(), serde_json::to_value(children).expect("serializes"));
        object.insert("current".into(), progress.current.as_ref().map(|id| id.0.clone()).into());
        object.insert("closed".into(), closed.into());
        object.insert("total".into(), total.into());
        print_json(&object);
        return;
    }
    let current = match progress.children.iter().find(|child| Some(&child.id) == progress.current.as_ref()) {
        Some(child) => format!("current {} {}", printable(child.id.as_str()), printable(&child.title)),
        None if closed == total && total > 0 => "every step closed".to_string(),
        None => "nothing ready".to_string(),
    };
    println!("{}: {closed}/{total} closed, {current}", bead_line(&progress.root));
    if std::io::stdout().is_terminal() {
        println!("{}", progress_bar(closed, total));
    }
    for (index, child) in progress.children.iter().enumerate() {
        let state = child_state(child, progress.current.as_ref(), &closed_ids, &siblings);
        let reference =
            if child.reference.is_empty() { String::new() } else { format!(" ({})", printable(&child.reference)) };
        println!("  {:>3}. {state:<11} {}{reference}", index + 1, bead_line(child));
    }
}

#[cfg(test)]
mod tests {
    use api::command::CreateBead;
    use api::model::Timestamp;

    use super::*;

    #[test]
    fn notes_and_comments_are_shown_apart() {
        let notes = "root cause: a race\n[comment] alice: looked into it\nfixed in abc123\n[comment] bob: done";
        let (plain, comments) = notes_and_comments(notes);
        assert_eq!(plain, "root cause: a race\nfixed in abc123");
        assert_eq!(comments, ["alice: looked into it", "bob: done"]);
        assert_eq!(notes_and_comments("[comment] alice: only"), (String::new(), vec!["alice: only"]));
        assert_eq!(notes_and_comments(""), (String::new(), Vec::<&str>::new()));
    }

    fn bead(title: &str, assignee: &str) -> Bead {
        let create =
            CreateBead { title: title.into(), assignee: assignee.into(), priority: Some(2), ..CreateBead::default() };
        create.into_bead(BeadId::from("st-1"))
    }

    #[test]
    fn a_forged_row_in_a_title_stays_on_one_line() {
        let line = bead_line(&bead("fake\nbad-1 [closed] P0 victim @root", "mal\x1b[2Jlory"));
        assert_eq!(line, r"st-1 [open] P2 fake\nbad-1 [closed] P0 victim @root @mal\u{1b}[2Jlory");
        assert_eq!(line.lines().count(), 1);
    }

    #[test]
    fn ordinary_text_prints_as_before() {
        let line = bead_line(&bead("fix the parser: ünïcödé 🚀", "worker"));
        assert_eq!(line, "st-1 [open] P2 fix the parser: ünïcödé 🚀 @worker");
    }

    #[test]
    fn an_unset_priority_prints_bds_default_in_json_and_stays_unset_in_text() {
        let mut unset = bead("no priority", "");
        unset.priority = None;
        assert_eq!(serde_json::to_value(BeadJson::from(&unset)).unwrap()["priority"], 2);
        assert_eq!(bead_line(&unset), "st-1 [open] no priority");
        let mut urgent = bead("urgent", "");
        urgent.priority = Some(0);
        assert_eq!(serde_json::to_value(BeadJson::from(&urgent)).unwrap()["priority"], 0);
    }

    #[test]
    fn list_rows_carry_bds_counts_and_show_prints_dependents() {
        let mut blocker = bead("blocker", "");
        blocker.counts = api::model::BeadCounts { dependents: 1, comments: 2 };
        let waits = CreateBead { title: "waits".into(), needs: vec!["st-1".into()], ..CreateBead::default() };
        let waiting = waits.into_bead(BeadId::from("st-2"));
        let rows = with_counts(&[blocker.clone(), waiting.clone()]);
        let counts = |row: &serde_json::Value| {
            (row["dependency_count"].as_u64(), row["dependent_count"].as_u64(), row["comment_count"].as_u64())
        };
        assert_eq!(counts(&rows[0]), (Some(0), Some(1), Some(2)));
        assert_eq!(counts(&rows[1]), (Some(1), Some(0), Some(0)));

        let shown = details(std::slice::from_ref(&blocker), std::slice::from_ref(&waiting), &waiting.dependencies());
        assert_eq!(shown[0]["dependents"][0]["id"], "st-2");
        assert_eq!(shown[0]["dependents"][0]["dependency_type"], "blocks");
        assert_eq!(shown[0]["dependencies"], serde_json::json!([]));
        let shown = details(std::slice::from_ref(&waiting), std::slice::from_ref(&blocker), &[]);
        assert_eq!(shown[0]["dependencies"][0]["id"], "st-1");
        assert_eq!(shown[0]["dependents"], serde_json::json!([]));
        // An edge from an id that is no bead is left out, as in bd.
        let loose = Dependency {
            issue_id: BeadId::from("other-rig-9"),
            depends_on_id: BeadId::from("st-1"),
            dep_type: api::model::DepType::blocks(),
        };
        let shown = details(std::slice::from_ref(&blocker), &[], &[loose]);
        assert_eq!(shown[0]["dependents"], serde_json::json!([]));
    }

    #[test]
    fn an_event_line_escapes_its_text() {
        let event = Event {
            seq: 7,
            event_type: "bead.updated".into(),
            timestamp: Timestamp(0),
            actor: "ev\u{1b}[2Jil".into(),
            subject: "st-1".into(),
            message: "a\rb\u{202e}".into(),
        };
        let line = event_line(&event);
        assert!(line.starts_with("7 "), "{line}");
        assert!(line.ends_with(r" bead.updated st-1 by ev\u{1b}[2Jil: a\rb\u{202e}"), "{line}");
    }
}
