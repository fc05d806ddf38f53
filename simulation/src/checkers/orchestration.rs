//! Orchestration commands apply whole, once, and durably.
//!
//! Property (docs/beads.md §7; Ongaro 2014 §6.3 for exactly-once): a cook, a sling or a mail send
//! is one replicated command that creates its beads all together. Each carries a title unique in
//! the run, so, among every bead read back after healing: an acknowledged one's beads are there
//! exactly once (a sling's task and its auto-convoy both), a refused one's are not there, and one
//! of unknown outcome's are there at most once. A close of what `hook --claim` handed out that
//! was acknowledged reads back closed.
//!
//! A canary create of the upgrade runs ([`Op::Canary`]) is judged the same way, under the name of
//! the upgrade checker: whether the cluster applied it or refused it (by the apply version), the
//! client's answer must say which.

use std::collections::BTreeMap;

use api::model::{Bead, Status};

use super::Violation;
use crate::history::{History, Op, OpResult};

/// The titles of the beads an orchestration operation creates.
fn created_titles(op: &Op) -> Vec<String> {
    match op {
        Op::Cook { title } | Op::Mail { subject: title } => vec![title.clone()],
        Op::Sling { title } => vec![title.clone(), format!("sling: {title}")],
        Op::Canary { title } => vec![title.clone()],
        _ => Vec::new(),
    }
}

/// Checks the orchestration agent's operations against every bead read back after healing.
pub fn check(history: &History, all_beads: &Result<Vec<Bead>, String>) -> Vec<Violation> {
    let beads = match all_beads {
        Ok(beads) => beads,
        Err(error) => {
            let detail = format!("the beads could not be read back: {error}");
            return vec![Violation { checker: "orchestration", detail }];
        }
    };
    let mut by_title: BTreeMap<&str, usize> = BTreeMap::new();
    for bead in beads {
        *by_title.entry(bead.title.as_str()).or_default() += 1;
    }
    let mut violations = Vec::new();
    for entry in
        history.entries.iter().filter(|entry| entry.op.is_orchestration_op() || matches!(entry.op, Op::Canary { .. }))
    {
        let checker = if let Op::Canary { .. } = entry.op { super::upgrade::CHECKER } else { "orchestration" };
        let violation = |detail: String| Violation { checker, detail };
        let allowed = match &entry.result {
            OpResult::Ok(_) => 1..=1,
            OpResult::Refused(_) => 0..=0,
            OpResult::Unknown(_) | OpResult::Pending => 0..=1,
        };
        for title in created_titles(&entry.op) {
            let found = by_title.get(title.as_str()).copied().unwrap_or(0);
            if !allowed.contains(&found) {
                violations.push(violation(format!(
                    "{:?} (invoked at {}, {}) left {found} beads titled {title:?}; expected {allowed:?}",
                    entry.op,
                    entry.invoked,
                    match &entry.result {
                        OpResult::Ok(_) => "acknowledged".to_string(),
                        OpResult::Refused(refusal) => format!("refused: {refusal}"),
                        _ => "outcome unknown".to_string(),
                    }
                )));
            }
        }
        if let (Op::HookClose { id }, OpResult::Ok(_)) = (&entry.op, &entry.result) {
            let status = beads.iter().find(|bead| &bead.id == id).map(|bead| bead.status);
            if status != Some(Status::Closed) {
                violations.push(violation(format!(
                    "the acknowledged close of {id} (invoked at {}) reads back as {status:?}",
                    entry.invoked
                )));
            }
        }
    }
    violations
}
