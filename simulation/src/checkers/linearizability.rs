//! Linearizability of the observed history, bead by bead.
//!
//! Property (Herlihy & Wing, 1990): there is one total order of all operations that respects
//! real time (an operation that completed before another was invoked comes first) in which
//! every operation's answer is the answer the reference model gives. The reference model is the
//! `api` state machine itself, holding the one bead. Linearizability is local (Herlihy & Wing,
//! Theorem 1), so each bead's sub-history is checked on its own, which keeps the search small.
//!
//! The search is Wing & Gong's (1993) with Lowe's memoisation of (linearized set, model state),
//! as Porcupine does it. An operation whose outcome is unknown may take effect at any point
//! after its invoke, or never; a claim_next with an unknown outcome might have claimed any bead,
//! so it joins every bead's sub-history as such an optional operation.
//!
//! What it catches: two actors holding one claim, a successful claim that a later read does not
//! show, a read that goes back in time, a lost metadata key or update, an answer the model would
//! not give.

use std::collections::{BTreeMap, HashSet};

use api::command::{Command, CreateBead, Proposal};
use api::commands::get::Get;
use api::model::{Actor, Bead, BeadId, Namespace, Status, Timestamp};
use api::outcome::{Answer, Outcome, Refusal};
use api::state::{NamespaceMeta, Record, RecordKey, State};

use super::Violation;
use crate::history::{Entry, History, Op, OpResult, compact_value};
use crate::workload::{LABEL, large_metadata};

/// Most model steps the search may take for one bead before it gives up (and says so).
pub const SEARCH_STEPS_MAX: usize = 2_000_000;

/// What the checker compares of a bead: everything the workload can change or observe, not
/// the timestamps the leader stamps.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Projection {
    title: String,
    status: Status,
    assignee: String,
    priority: Option<u8>,
    labels: Vec<String>,
    metadata: BTreeMap<String, String>,
}

impl Projection {
    fn of(bead: &Bead) -> Projection {
        Projection {
            title: bead.title.clone(),
            status: bead.status,
            assignee: bead.assignee.clone(),
            priority: bead.priority,
            labels: bead.labels.iter().cloned().collect(),
            metadata: bead.metadata.iter().map(|(key, value)| (key.clone(), compact_value(value))).collect(),
        }
    }
}

/// The answer an operation got, as the checker compares it.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// Applied, answering with this bead.
    Bead(Projection),
    /// Refused with exactly this refusal.
    Refused(Refusal),
    /// Read the bead in this state.
    Read(Projection),
    /// Outcome unknown: may apply at any point after its invoke, or never.
    Unknown,
}

/// One operation of a bead's sub-history.
#[derive(Clone, Debug)]
pub struct BeadOp {
    /// Index of the history entry.
    pub entry: usize,
    invoked: u64,
    completed: Option<u64>,
    command: Option<Command>,
    expect: Expect,
}

fn answer_bead(outcome: &Outcome, id: &BeadId) -> Option<Projection> {
    match outcome {
        Outcome::Bead(bead) if &bead.id == id => Some(Projection::of(bead)),
        Outcome::Beads(beads) => beads.iter().find(|bead| &bead.id == id).map(Projection::of),
        _ => None,
    }
}

/// The command an operation applies (writes only).
fn command_of(op: &Op) -> Option<Command> {
    match op {
        Op::Create { title } => Some(Command::Create(CreateBead {
            title: title.clone(),
            labels: [LABEL.to_string()].into(),
            ..Default::default()
        })),
        // The model holds the values as the history keeps them (compact), so its answers compare
        // with the recorded ones as they are.
        Op::CreateLarge { title } => Some(Command::Create(CreateBead {
            title: title.clone(),
            labels: [LABEL.to_string()].into(),
            metadata: large_metadata(title).into_iter().map(|(key, value)| (key, compact_value(&value))).collect(),
            ..Default::default()
        })),
        Op::Claim { id, actor } => {
            Some(Command::Claim(api::command::Claim { id: id.clone(), actor: actor.clone(), lease_ms: None }))
        }
        Op::ClaimNext { actor } => Some(Command::ClaimNext(api::command::ClaimNext {
            actor: actor.clone(),
            filter: api::command::ReadyFilter {
                labels_all: vec![LABEL.into()],
                unassigned: true,
                ..Default::default()
            },
            lease_ms: None,
        })),
        Op::Update { id, priority } => Some(Command::Update(api::command::UpdateBead {
            id: id.clone(),
            priority: Some(*priority),
            ..Default::default()
        })),
        Op::SetMetadata { id, key, value } => Some(Command::SetMetadata(api::command::SetMetadata {
            id: id.clone(),
            entries: BTreeMap::from([(key.clone(), Some(value.clone()))]),
        })),
        Op::Close { id } => Some(Command::Close(api::command::Close { ids: vec![id.clone()], reason: None })),
        Op::Get { .. } | Op::Ready | Op::List { .. } => None,
        // Leasable beads are the leases checker's, the orchestration agent's the
        // orchestration checker's.
        Op::CreateLeasable { .. } | Op::LeaseClaimNext { .. } | Op::LeaseRenew { .. } | Op::FencedClose { .. } => None,
        Op::Cook { .. }
        | Op::Sling { .. }
        | Op::HookClaim { .. }
        | Op::HookClose { .. }
        | Op::Mail { .. }
        | Op::Purge => None,
        // Canaries are the upgrade checker's.
        Op::Canary { .. } => None,
    }
}

fn targets(op: &Op) -> Option<&BeadId> {
    match op {
        Op::Claim { id, .. }
        | Op::Update { id, .. }
        | Op::SetMetadata { id, .. }
        | Op::Close { id }
        | Op::Get { id } => Some(id),
        _ => None,
    }
}

/// The sub-history of bead `id`, whose creation is the entry at `create`.
pub fn sub_history(history: &History, id: &BeadId, create: usize) -> Vec<BeadOp> {
    let mut ops = Vec::new();
    for (index, entry) in history.entries.iter().enumerate() {
        let expect = match (&entry.op, &entry.result) {
            (_, OpResult::Pending) => continue,
            (op, result) if index == create && op.created_title().is_some() => match result {
                OpResult::Ok(outcome) => Expect::Bead(answer_bead(outcome, id).unwrap_or_else(|| unreachable_bead(id))),
                _ => Expect::Unknown,
            },
            (Op::ClaimNext { .. }, OpResult::Ok(outcome)) => match answer_bead(outcome, id) {
                Some(projection) => Expect::Bead(projection),
                None => continue,
            },
            (Op::ClaimNext { .. }, OpResult::Unknown(_)) => Expect::Unknown,
            (Op::Ready | Op::List { .. }, OpResult::Ok(outcome)) => match answer_bead(outcome, id) {
                Some(projection) => Expect::Read(projection),
                None => continue,
            },
            (op, result) if targets(op) == Some(id) => match (op, result) {
                (Op::Get { .. }, OpResult::Ok(outcome)) => match answer_bead(outcome, id) {
                    Some(projection) => Expect::Read(projection),
                    None => continue,
                },
                (Op::Get { .. }, OpResult::Refused(refusal)) => Expect::Refused(refusal.clone()),
                (Op::Get { .. }, _) => continue,
                (_, OpResult::Ok(outcome)) => match answer_bead(outcome, id) {
                    Some(projection) => Expect::Bead(projection),
                    None => continue,
                },
                (_, OpResult::Refused(refusal)) => Expect::Refused(refusal.clone()),
                (_, _) => Expect::Unknown,
            },
            _ => continue,
        };
        let command = command_of(&entry.op);
        ops.push(BeadOp { entry: index, invoked: entry.invoked, completed: entry.completed, command, expect });
    }
    ops
}

fn unreachable_bead(id: &BeadId) -> Projection {
    // A create answer always holds the created bead; keep the checker total anyway: a
    // projection no model state can equal makes the search fail loudly.
    Projection {
        title: format!("<create answer without bead {id}>"),
        status: Status::Closed,
        assignee: String::new(),
        priority: None,
        labels: Vec::new(),
        metadata: BTreeMap::new(),
    }
}

/// The model before bead `id` (sequence `seq`) is created: an empty namespace whose next bead
/// takes exactly that sequence number, hence that id.
fn initial_model(seq: u64) -> State {
    let mut meta = NamespaceMeta::new("st");
    meta.next_seq = seq;
    State::from_records([(RecordKey::Namespace(Namespace::default_namespace()), Record::Namespace(meta))])
        .expect("a namespace record loads")
}

fn apply(model: &mut State, command: &Command) -> Answer {
    model.apply(
        1,
        &Proposal {
            request_id: None,
            timestamp: Timestamp(1),
            default_prefix: "st".into(),
            actor: Actor::default(),
            event_retention: api::limits::EVENT_RETENTION_DEFAULT,
            credential: None,
            namespace: Namespace::default_namespace(),
            command: command.clone(),
        },
    )
}

fn read(model: &State, id: &BeadId) -> Option<Projection> {
    let query = api::command::Query::from(Get { ids: vec![id.clone()] });
    match model.query(&Namespace::default_namespace(), &query) {
        Ok(outcome) => answer_bead(&outcome, id),
        Err(_) => None,
    }
}

/// Whether `op`, taking effect on `model` now, gives the answer it got; applies it if so.
fn step(model: &mut State, id: &BeadId, op: &BeadOp) -> bool {
    match (&op.command, &op.expect) {
        (_, Expect::Read(projection)) => read(model, id).as_ref() == Some(projection),
        (None, Expect::Refused(refusal)) => read(model, id).is_none() && matches!(refusal, Refusal::NotFound(_)),
        (Some(command), expect) => {
            let answer = apply(model, command);
            match (expect, answer) {
                (Expect::Unknown, _) => true,
                (Expect::Bead(projection), Ok(outcome)) => answer_bead(&outcome, id).as_ref() == Some(projection),
                (Expect::Refused(refusal), Err(got)) => &got == refusal,
                _ => false,
            }
        }
        (None, _) => false,
    }
}

/// The outcome of checking one bead.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A valid order exists.
    Linearizable,
    /// No order explains the answers.
    NotLinearizable,
    /// The search hit [`SEARCH_STEPS_MAX`].
    Undecided,
}

struct Search<'a> {
    id: &'a BeadId,
    ops: &'a [BeadOp],
    linearized: Vec<bool>,
    seen: HashSet<(Vec<bool>, Option<Projection>)>,
    steps: usize,
}

impl Search<'_> {
    fn done(&self) -> bool {
        self.ops.iter().zip(&self.linearized).all(|(op, done)| *done || op.expect == Expect::Unknown)
    }

    /// Depth-first: try each operation that may go next (invoked before the earliest answer
    /// still to place), keep it if the model agrees, backtrack otherwise.
    fn extend(&mut self, model: &State) -> Option<bool> {
        if self.done() {
            return Some(true);
        }
        let horizon = (0..self.ops.len())
            .filter(|&index| !self.linearized[index])
            .filter_map(|index| self.ops[index].completed)
            .min()
            .unwrap_or(u64::MAX);
        // Operations with a known answer first, in invoke order; optional (unknown) ones only
        // when those fail. A valid history is then accepted along its real order, and an
        // unknown operation is placed only where a later answer needs it.
        let known = (0..self.ops.len()).filter(|&index| self.ops[index].expect != Expect::Unknown);
        let unknown = (0..self.ops.len()).filter(|&index| self.ops[index].expect == Expect::Unknown);
        let order: Vec<usize> = known.chain(unknown).collect();
        for index in order {
            let op = &self.ops[index];
            if self.linearized[index] || op.invoked >= horizon {
                continue;
            }
            self.steps += 1;
            if self.steps > SEARCH_STEPS_MAX {
                return None;
            }
            let mut next = model.clone();
            if !step(&mut next, self.id, op) {
                continue;
            }
            let state = read(&next, self.id);
            if op.expect == Expect::Unknown && state == read(model, self.id) {
                // An unknown operation that changes nothing is the same as one never applied.
                continue;
            }
            self.linearized[index] = true;
            if self.seen.insert((self.linearized.clone(), state)) && self.extend(&next)? {
                return Some(true);
            }
            self.linearized[index] = false;
        }
        Some(false)
    }
}

/// Checks one bead's sub-history against the model, starting before its creation.
pub fn check_bead(id: &BeadId, seq: u64, ops: &[BeadOp]) -> Verdict {
    let mut search = Search { id, ops, linearized: vec![false; ops.len()], seen: HashSet::new(), steps: 0 };
    match search.extend(&initial_model(seq)) {
        Some(true) => Verdict::Linearizable,
        Some(false) => Verdict::NotLinearizable,
        None => Verdict::Undecided,
    }
}

/// Every bead that was observed, with the entry that created it and its sequence number.
pub fn observed_beads(history: &History) -> BTreeMap<BeadId, (usize, u64)> {
    let creates: BTreeMap<&str, usize> = history
        .entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| entry.op.created_title().map(|title| (title, index)))
        .collect();
    let mut beads = BTreeMap::new();
    for entry in &history.entries {
        if let OpResult::Ok(outcome) = &entry.result {
            for bead in outcome_beads(outcome) {
                if let Some(create) = creates.get(bead.title.as_str()) {
                    beads.entry(bead.id.clone()).or_insert((*create, bead.seq));
                }
            }
        }
    }
    beads
}

fn outcome_beads(outcome: &Outcome) -> Vec<&Bead> {
    match outcome {
        Outcome::Bead(bead) => vec![bead.as_ref()],
        Outcome::Beads(beads) => beads.iter().collect(),
        _ => Vec::new(),
    }
}

fn summary(result: &OpResult, id: &BeadId) -> String {
    match result {
        OpResult::Ok(outcome) => match answer_bead(outcome, id) {
            Some(bead) => format!(
                "{:?} assignee={:?} priority={:?} metadata={:?}",
                bead.status,
                bead.assignee,
                bead.priority,
                bead.metadata.keys().collect::<Vec<_>>()
            ),
            None => "ok".into(),
        },
        OpResult::Refused(refusal) => format!("refused: {refusal}"),
        OpResult::Unknown(why) => format!("unknown ({why})"),
        OpResult::Pending => "pending".into(),
    }
}

fn describe(history: &History, id: &BeadId, ops: &[BeadOp]) -> String {
    let lines: Vec<String> = ops
        .iter()
        .map(|op| {
            let Entry { agent, op: what, invoked, completed, result, .. } = &history.entries[op.entry];
            let what = match what {
                Op::Ready | Op::List { .. } | Op::ClaimNext { .. } => format!("{what:?}"),
                other => format!("{other:?}").replace(&format!("id: BeadId({:?}), ", id.0), ""),
            };
            let completed = completed.map_or("?".into(), |tick| tick.to_string());
            format!("  [{invoked}..{completed}] agent-{agent} {what} -> {}", summary(result, id))
        })
        .collect();
    lines.join("\n")
}

/// Checks every observed bead.
pub fn check(history: &History) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (id, (create, seq)) in observed_beads(history) {
        let ops = sub_history(history, &id, create);
        let verdict = check_bead(&id, seq, &ops);
        if verdict != Verdict::Linearizable {
            let what = if verdict == Verdict::Undecided {
                "could not be decided within the search bound"
            } else {
                "is not linearizable"
            };
            violations.push(Violation {
                checker: "linearizability",
                detail: format!("the history of bead {id} {what}:\n{}", describe(history, &id, &ops)),
            });
        }
    }
    violations
}
