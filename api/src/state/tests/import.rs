//! Imports: beads from another store keep their ids, statuses and timestamps, edges among them
//! and to existing beads block as usual, the id counter moves past imported numbers, and a
//! refused import (an id that exists, a missing parent) changes nothing.

use super::*;

fn imported(id: &str, title: &str) -> Bead {
    Bead {
        id: BeadId::from(id),
        seq: 0,
        title: title.into(),
        description: String::new(),
        notes: String::new(),
        status: Status::Open,
        bead_type: String::new(),
        priority: Some(1),
        assignee: String::new(),
        from: String::new(),
        parent_id: None,
        reference: String::new(),
        labels: BTreeSet::new(),
        metadata: BTreeMap::new(),
        ephemeral: false,
        no_history: false,
        created_at: Timestamp(10),
        updated_at: Timestamp(20),
        revision: 0,
        started_at: None,
        closed_at: None,
        close_reason: None,
        defer_until: None,
        depends_on: BTreeMap::new(),
    }
}

#[test]
fn imported_beads_keep_ids_statuses_and_times_and_their_edges_block() {
    let mut harness = Harness::new();
    let existing = harness.create("existing");
    let mut waiting = imported("st-40", "waits for a later line and an existing bead");
    waiting.depends_on.insert(BeadId::from("gc-b"), DepType::blocks());
    waiting.depends_on.insert(existing.clone(), DepType::blocks());
    let mut done = imported("gc-b", "done");
    done.status = Status::Closed;
    let mut child = imported("gc-c", "child");
    child.parent_id = Some(BeadId::from("gc-b"));
    child.no_history = true;
    let answer = beads_of(harness.apply(Command::Import { beads: vec![waiting, done, child] }));
    assert_eq!(answer.len(), 3);
    let got = harness.get(&BeadId::from("st-40"));
    assert_eq!((got.created_at, got.updated_at, got.bead_type.as_str()), (Timestamp(10), Timestamp(20), "task"));
    assert_eq!(got.revision, harness.now as u64, "the import's log index is the revision");
    let closed = harness.get(&BeadId::from("gc-b"));
    assert_eq!(
        (closed.status, closed.closed_at),
        (Status::Closed, Some(Timestamp(20))),
        "closed_at defaults to updated_at"
    );
    assert!(harness.get(&BeadId::from("gc-c")).no_history);
    assert!(!harness.ready_all().contains(&BeadId::from("st-40")), "the open existing blocker blocks it");
    harness.close(&existing).unwrap();
    assert!(harness.ready_all().contains(&BeadId::from("st-40")), "a closed import and a closed blocker do not");
    let next = harness.create("after the import");
    let number: u64 = next.0.strip_prefix("st-").and_then(|n| n.parse().ok()).expect("an assigned id");
    assert!(number > 40, "the counter moves past the imported st-40: {next}");
    harness.check_persistence();
}

#[test]
fn a_refused_import_changes_nothing() {
    let mut harness = Harness::new();
    let existing = harness.create("existing");
    let before = content(&harness.state);
    let mut orphan = imported("gc-x", "orphan");
    orphan.parent_id = Some(BeadId::from("gc-nowhere"));
    for (beads, expected) in [
        (vec![imported("gc-1", "new"), imported(&existing.0, "clash")], "already exists"),
        (vec![imported("gc-1", "new"), orphan], "neither in the import nor in this namespace"),
        (vec![imported("gc-1", "one"), imported("gc-1", "two")], "appears twice"),
        (vec![imported("gc 1", "space")], "without spaces"),
        (vec![imported("$0", "reference")], "may not start with $"),
        (vec![imported("gc-1", "")], "title"),
        (Vec::new(), "1 to 1000 beads"),
    ] {
        let refusal = match harness.apply(Command::Import { beads }) {
            Err(refusal) => refusal.to_string(),
            Ok(outcome) => panic!("{expected}: accepted as {outcome:?}"),
        };
        assert!(refusal.contains(expected), "{refusal} should say {expected}");
        assert_eq!(content(&harness.state), before, "a refused import ({expected}) changes nothing");
    }
}
