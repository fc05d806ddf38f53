//! `strand mol current` and `strand mol progress` in bd's shapes, as Gas City's worker prompts
//! run them (`gc bd mol current <molecule-id>`).
//!
//! A molecule is a root bead of type `molecule` or `epic`, or one labelled `template`; its steps
//! are its direct children, in creation order. Without an id, the molecules are those above the
//! agent's in-progress beads (walking up `parent`), else those its hooked beads belong to or wait
//! for. A step is `done` (closed), `current` (in progress), `blocked` (so marked), `ready` (open,
//! and every step it waits for is closed) or `pending`.

use std::collections::{BTreeMap, BTreeSet};

use api::client::Client;
use api::command::{ListFilter, Query};
use api::commands::children::Children;
use api::commands::get::Lookup;
use api::model::{Bead, BeadId, MOLECULE_TYPE, Status};
use api::printable::printable;
use clap::Args;
use serde::Serialize;

use crate::answers::beads_of;
use crate::beads::listing::{Listing, LocalFilter, SortOrder};
use crate::output::{BeadJson, print_value};
use crate::{Cli, CommandResult, Failure};

/// How far up `parent` links a molecule is looked for (bd's bound).
const PARENT_DEPTH_MAX: usize = 50;
/// The label that makes any root a molecule, as in bd.
const TEMPLATE_LABEL: &str = "template";
/// bd's other molecule type.
const EPIC_TYPE: &str = "epic";

/// `mol current [ID]`.
#[derive(Args, Debug)]
pub struct CurrentArgs {
    /// The molecule; default: the molecules of the agent's in-progress work.
    id: Option<String>,
    /// Whose molecules (default: the actor).
    #[arg(long = "for", value_name = "AGENT")]
    agent: Option<String>,
    /// Show at most this many steps (0: all).
    #[arg(long, default_value_t = 0)]
    limit: usize,
    /// Show steps START-END, counting from 1, inclusive.
    #[arg(long, value_name = "START-END")]
    range: Option<String>,
}

/// `mol progress [ID]`.
#[derive(Args, Debug)]
pub struct ProgressArgs {
    /// The molecule; default: the first molecule of the actor's in-progress work.
    id: Option<String>,
}

fn is_molecule(bead: &Bead) -> bool {
    bead.bead_type == MOLECULE_TYPE || bead.bead_type == EPIC_TYPE || bead.labels.contains(TEMPLATE_LABEL)
}

/// A molecule root and its steps.
struct Molecule {
    root: Bead,
    steps: Vec<Bead>,
}

impl Molecule {
    async fn load(client: &Client, root: Bead) -> Result<Molecule, Failure> {
        let query = Query::from(Children { parent: root.id.clone(), include_closed: true });
        Ok(Molecule { root, steps: beads_of(client.query(query).await?) })
    }

    fn completed(&self) -> usize {
        self.steps.iter().filter(|step| step.status == Status::Closed).count()
    }

    /// Each step with bd's state name, in bd's order: steps waiting on fewer others first,
    /// creation order among equals.
    fn states(&self) -> Vec<(&Bead, &'static str)> {
        let status: BTreeMap<&BeadId, Status> = self.steps.iter().map(|step| (&step.id, step.status)).collect();
        let waits_on =
            |step: &Bead| -> Vec<Status> { step.needs().iter().filter_map(|need| status.get(need).copied()).collect() };
        let mut states: Vec<(&Bead, &'static str)> = self
            .steps
            .iter()
            .map(|step| {
                let state = match step.status {
                    Status::Closed => "done",
                    Status::InProgress => "current",
                    Status::Blocked => "blocked",
                    Status::Open if waits_on(step).iter().all(|need| *need == Status::Closed) => "ready",
                    _ => "pending",
                };
                (step, state)
            })
            .collect();
        states.sort_by_key(|(step, _)| waits_on(step).len());
        states
    }
}

/// A step as `mol current --json` prints it.
#[derive(Serialize)]
struct StepJson<'a> {
    issue: BeadJson<'a>,
    status: &'static str,
    is_current: bool,
}

/// bd's `MoleculeProgress`.
#[derive(Serialize)]
struct CurrentJson<'a> {
    molecule_id: &'a str,
    molecule_title: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    assignee: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_step: Option<BeadJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_step: Option<BeadJson<'a>>,
    /// `null` when the molecule has no steps, as bd prints it.
    steps: Option<Vec<StepJson<'a>>>,
    completed: usize,
    total: usize,
}

/// Steps START-END (1-based, inclusive) as bd parses `--range`.
fn parse_range(text: &str) -> Result<(usize, usize), Failure> {
    let invalid = |why: &str| Failure::Refused(format!("invalid range '{text}': {why}; write START-END, e.g. 1-50"));
    let (start, end) = text.split_once('-').ok_or_else(|| invalid("no '-'"))?;
    let start: usize = start.trim().parse().map_err(|_| invalid("the start is not a number"))?;
    let end: usize = end.trim().parse().map_err(|_| invalid("the end is not a number"))?;
    if start < 1 {
        return Err(invalid("the start counts from 1"));
    }
    if end < start {
        return Err(invalid("the end is before the start"));
    }
    Ok((start, end))
}

/// The bead with this id, or bd's "molecule 'ID' not found".
async fn molecule_root(client: &Client, id: &str) -> Result<Bead, Failure> {
    let found = beads_of(client.query(Query::from(Lookup { ids: vec![BeadId::from(id)] })).await?);
    found.into_iter().next().ok_or_else(|| {
        Failure::Refused(format!("molecule '{id}' not found; check the id with `strand list --type molecule`"))
    })
}

/// The molecules above `agent`'s beads in `status`, by id.
async fn molecules_above(client: &Client, agent: &str, status: Status) -> Result<Vec<Bead>, Failure> {
    let listing = Listing {
        filter: ListFilter { statuses: vec![status], assignee: Some(agent.to_string()), ..ListFilter::default() },
        local: LocalFilter::default(),
        sort: SortOrder::parse("", false)?,
        offset: 0,
        limit: 0,
    };
    let mut roots: BTreeMap<BeadId, Bead> = BTreeMap::new();
    for bead in listing.run(client).await? {
        let mut candidates = vec![bead.clone()];
        if status == Status::Hooked && !is_molecule(&bead) {
            // A hooked bead that is not a molecule itself points at one through what it waits for.
            let ids: Vec<BeadId> = bead.needs();
            candidates =
                if ids.is_empty() { Vec::new() } else { beads_of(client.query(Query::from(Lookup { ids })).await?) };
        }
        for candidate in candidates {
            if let Some(root) = molecule_of(client, candidate, status == Status::InProgress).await? {
                roots.insert(root.id.clone(), root);
            }
        }
    }
    Ok(roots.into_values().collect())
}

/// The molecule a bead belongs to: the top of its `parent` chain (when `walk`), if a molecule.
async fn molecule_of(client: &Client, bead: Bead, walk: bool) -> Result<Option<Bead>, Failure> {
    let mut top = bead;
    let mut visited = BTreeSet::from([top.id.clone()]);
    while walk && visited.len() <= PARENT_DEPTH_MAX {
        let Some(parent) = top.parent_id.clone().filter(|parent| !visited.contains(parent)) else { break };
        let Some(next) = beads_of(client.query(Query::from(Lookup { ids: vec![parent.clone()] })).await?).pop() else {
            break;
        };
        visited.insert(parent);
        top = next;
    }
    Ok(is_molecule(&top).then_some(top))
}

/// Runs `mol current`.
pub async fn run_current(cli: &Cli, args: &CurrentArgs) -> CommandResult {
    let range = args.range.as_deref().map(parse_range).transpose()?;
    let client = cli.client()?;
    let agent = args.agent.clone().unwrap_or_else(|| cli.actor());
    let roots = match &args.id {
        Some(id) => vec![molecule_root(&client, id).await?],
        None => {
            let in_progress = molecules_above(&client, &agent, Status::InProgress).await?;
            if in_progress.is_empty() { molecules_above(&client, &agent, Status::Hooked).await? } else { in_progress }
        }
    };
    let mut molecules = Vec::with_capacity(roots.len());
    for root in roots {
        molecules.push(Molecule::load(&client, root).await?);
    }
    if molecules.is_empty() {
        if cli.json {
            print_value(&serde_json::json!([]));
        } else {
            println!("No molecules in progress for {}.", printable(&agent));
            println!("  Start one: strand mol cook FORMULA, then strand update STEP --claim");
        }
        return Ok(true);
    }
    let mut values = Vec::with_capacity(molecules.len());
    for molecule in &molecules {
        let states = molecule.states();
        // bd takes the last step in progress in creation order, before its sort.
        let current = molecule.steps.iter().rev().find(|step| step.status == Status::InProgress);
        // bd takes the next step in creation order, before its sort.
        let ready: BTreeSet<&BeadId> =
            states.iter().filter(|(_, state)| *state == "ready").map(|(step, _)| &step.id).collect();
        let next = molecule.steps.iter().find(|step| ready.contains(&step.id));
        let window: Vec<&(&Bead, &str)> = match range {
            Some((start, end)) => states.iter().skip(start - 1).take((end - start).saturating_add(1)).collect(),
            None if args.limit > 0 => states.iter().take(args.limit).collect(),
            None => states.iter().collect(),
        };
        if !cli.json {
            print_current_text(molecule, &window, current, next);
            continue;
        }
        let steps: Vec<StepJson> = window
            .iter()
            .map(|(step, state)| StepJson {
                issue: BeadJson::from(*step),
                status: state,
                is_current: *state == "current",
            })
            .collect();
        values.push(CurrentJson {
            molecule_id: &molecule.root.id.0,
            molecule_title: &molecule.root.title,
            assignee: &molecule.root.assignee,
            current_step: current.map(BeadJson::from),
            next_step: next.map(BeadJson::from),
            steps: (!molecule.steps.is_empty()).then_some(steps),
            completed: molecule.completed(),
            total: molecule.steps.len(),
        });
    }
    if cli.json {
        print_value(&values);
    }
    Ok(true)
}

fn print_current_text(molecule: &Molecule, window: &[&(&Bead, &str)], current: Option<&Bead>, next: Option<&Bead>) {
    println!("You're working on molecule {}", printable(molecule.root.id.as_str()));
    println!("  {}", printable(&molecule.root.title));
    if !molecule.root.assignee.is_empty() {
        println!("  Assigned to: {}", printable(&molecule.root.assignee));
    }
    println!();
    for (step, state) in window {
        let here = if *state == "current" { "  <- YOU ARE HERE" } else { "" };
        println!("  [{state}] {}: {}{here}", printable(step.id.as_str()), printable(&step.title));
    }
    println!();
    println!("Progress: {}/{} steps complete", molecule.completed(), molecule.steps.len());
    if let (None, Some(next)) = (current, next) {
        println!("Next ready: {}: {}", printable(next.id.as_str()), printable(&next.title));
    }
}

/// Runs `mol progress`.
pub async fn run_progress(cli: &Cli, args: &ProgressArgs) -> CommandResult {
    let client = cli.client()?;
    let root = match &args.id {
        Some(id) => molecule_root(&client, id).await?,
        None => match molecules_above(&client, &cli.actor(), Status::InProgress).await?.into_iter().next() {
            Some(root) => root,
            None => {
                if cli.json {
                    print_value(&serde_json::json!([]));
                } else {
                    println!("No molecules in progress.\n\nUse: strand mol progress <molecule-id>");
                }
                return Ok(true);
            }
        },
    };
    let molecule = Molecule::load(&client, root).await?;
    let total = molecule.steps.len();
    let completed = molecule.completed();
    let in_progress: Vec<&Bead> = molecule.steps.iter().filter(|step| step.status == Status::InProgress).collect();
    let current_step_id = in_progress.first().map(|step| step.id.0.clone()).unwrap_or_default();
    let percent = (total > 0).then(|| completed as f64 * 100.0 / total as f64);
    if cli.json {
        let mut value = serde_json::json!({
            "molecule_id": molecule.root.id.0,
            "molecule_title": molecule.root.title,
            "total": total,
            "completed": completed,
            "in_progress": in_progress.len(),
            "current_step_id": current_step_id,
            "schema_version": 1,
        });
        if let Some(percent) = percent {
            value["percent"] = percent.into();
        }
        print_value(&value);
        return Ok(true);
    }
    println!("Molecule: {} ({})", printable(molecule.root.id.as_str()), printable(&molecule.root.title));
    println!("Progress: {completed} / {total} ({:.1}%)", percent.unwrap_or(0.0));
    match in_progress.as_slice() {
        [] => {}
        [one] => println!("Current step: {}", printable(one.id.as_str())),
        many => println!("In progress: {} step(s)", many.len()),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_counts_from_one_and_names_what_is_wrong() {
        assert_eq!(parse_range("1-50").ok(), Some((1, 50)));
        for (text, expected) in
            [("5", "no '-'"), ("0-3", "counts from 1"), ("4-2", "before the start"), ("a-2", "start is not")]
        {
            let Err(Failure::Refused(message)) = parse_range(text) else { panic!("{text} is refused") };
            assert!(message.contains(expected), "{text}: {message}");
        }
    }
}
