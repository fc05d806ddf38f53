//! Imports: beads from another store keep their ids, statuses and timestamps, edges among them
//! and to existing beads block as usual, assigned ids skip imported ones, and a refused import
//! (an id that exists, a missing parent, a cycle) changes nothing; an undo leaves the namespace
//! as the import found it.

use super::*;
use crate::commands::dep_list::DepList;

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
        lease: None,
        delivery_count: 0,
        depends_on: BTreeMap::new(),
        counts: Default::default(),
    }
}

#[test]
fn imported_beads_keep_ids_statuses_and_times_and_their_edges_block() {
    let mut harness = Harness::new();
    let existing = harness.create("existing");
    let mut waiting = imported("st-5", "waits for a later line and an existing bead");
    waiting.depends_on.insert(BeadId::from("gc-b"), DepType::blocks());
    waiting.depends_on.insert(existing.clone(), DepType::blocks());
    let mut done = imported("gc-b", "done");
    done.status = Status::Closed;
    let mut child = imported("gc-c", "child");
    child.parent_id = Some(BeadId::from("gc-b"));
    child.no_history = true;
    let answer = beads_of(harness.apply(Command::Import(crate::command::Import { beads: vec![waiting, done, child] })));
    assert_eq!(answer.len(), 3);
    let got = harness.get(&BeadId::from("st-5"));
    assert_eq!((got.created_at, got.updated_at, got.bead_type.as_str()), (Timestamp(10), Timestamp(20), "task"));
    assert_eq!(got.revision, harness.now as u64, "the import's log index is the revision");
    let closed = harness.get(&BeadId::from("gc-b"));
    assert_eq!(
        (closed.status, closed.closed_at),
        (Status::Closed, Some(Timestamp(20))),
        "closed_at defaults to updated_at"
    );
    assert!(harness.get(&BeadId::from("gc-c")).no_history);
    assert!(!harness.ready_all().contains(&BeadId::from("st-5")), "the open existing blocker blocks it");
    harness.close(&existing).unwrap();
    assert!(harness.ready_all().contains(&BeadId::from("st-5")), "a closed import and a closed blocker do not");
    let next = harness.create("after the import");
    assert_eq!(next.0, "st-6", "an assigned id skips the imported st-5");
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
        (vec![imported("gc 1", "space")], "imported bead \"gc 1\": id \"gc 1\" has characters an id cannot hold"),
        (vec![imported("$0", "reference")], "has characters an id cannot hold"),
        (vec![imported("../../etc", "path")], "id \"../../etc\" has characters an id cannot hold"),
        (vec![imported("gc-1", "fine"), imported("gc..2", "dots")], "holds \"..\""),
        (vec![imported("gc-1", "")], "title"),
        (Vec::new(), "1 to 1000 beads"),
    ] {
        let refusal = match harness.apply(Command::Import(crate::command::Import { beads })) {
            Err(refusal) => refusal.to_string(),
            Ok(outcome) => panic!("{expected}: accepted as {outcome:?}"),
        };
        assert!(refusal.contains(expected), "{refusal} should say {expected}");
        assert_eq!(content(&harness.state), before, "a refused import ({expected}) changes nothing");
    }
}

/// `create --id` is an import of one bead without a creation time: its refusals speak of the
/// create, not of an import, and change nothing.
#[test]
fn a_create_under_a_taken_id_or_a_missing_parent_is_refused_as_a_create() {
    let mut harness = Harness::new();
    let existing = harness.create("existing");
    let before = content(&harness.state);
    let create = CreateBead { title: "again".into(), ..Default::default() };
    let again = Command::Import(crate::command::Import { beads: vec![create.clone().into_bead(existing.clone())] });
    let refusal = harness.apply(again).expect_err("the id is taken");
    assert_eq!(
        refusal.to_string(),
        format!("bead {existing} already exists; give another --id, or update it with strand update {existing}")
    );
    let orphan = CreateBead { parent_id: Some(BeadId::from("st-404")), ..create.clone() };
    let orphan = Command::Import(crate::command::Import { beads: vec![orphan.into_bead(BeadId::from("gc-new"))] });
    assert_eq!(harness.apply(orphan), Err(Refusal::NotFound(BeadId::from("st-404"))));
    let path =
        Command::Import(crate::command::Import { beads: vec![create.clone().into_bead(BeadId::from("../../etc"))] });
    let refusal = harness.apply(path).expect_err("a path is no id");
    assert!(refusal.to_string().starts_with("id \"../../etc\" has characters an id cannot hold"), "{refusal}");
    assert_eq!(content(&harness.state), before, "a refused create changes nothing");
    let made =
        beads_of(harness.apply(Command::Import(crate::command::Import {
            beads: vec![create.into_bead(BeadId::from("gc-abc.1.3"))],
        })));
    assert_eq!((made[0].id.as_str(), made[0].created_at), ("gc-abc.1.3", Timestamp(harness.now)), "stamped");
}

#[test]
fn an_import_that_closes_a_cycle_is_refused_and_leaves_nothing() {
    let mut harness = Harness::new();
    let existing = harness.create("waits for gc-b");
    harness
        .apply(Command::DepAdd(crate::command::DepAdd {
            issue_id: existing.clone(),
            depends_on_id: BeadId::from("gc-b"),
            dep_type: DepType::blocks(),
        }))
        .unwrap();
    let before = content(&harness.state);
    let mut closing = imported("gc-b", "closes the cycle");
    closing.depends_on.insert(existing.clone(), DepType::blocks());
    let mut own_parent = imported("gc-p", "its own grandparent");
    own_parent.parent_id = Some(BeadId::from("gc-q"));
    let mut other = imported("gc-q", "parent");
    other.parent_id = Some(BeadId::from("gc-p"));
    let mut itself = imported("gc-s", "needs itself");
    itself.depends_on.insert(BeadId::from("gc-s"), DepType("related".into()));
    for beads in [vec![imported("gc-a", "fine"), closing], vec![own_parent, other], vec![itself]] {
        let refusal = harness.apply(Command::Import(crate::command::Import { beads })).expect_err("a cycle is refused");
        assert!(refusal.to_string().contains("cycle"), "{refusal}");
        assert_eq!(content(&harness.state), before, "a refused import leaves nothing");
    }
}

#[test]
fn an_undo_leaves_the_namespace_as_the_import_found_it() {
    let mut harness = Harness::new();
    let existing = harness.create("waits for gc-b");
    let edge = |issue: &str, target: &str| {
        Command::DepAdd(crate::command::DepAdd {
            issue_id: BeadId::from(issue),
            depends_on_id: BeadId::from(target),
            dep_type: DepType::blocks(),
        })
    };
    harness.apply(edge(&existing.0, "gc-b")).unwrap();
    harness.apply(edge("gc-b", "external:rig:x")).unwrap();
    let ready_before = harness.ready_all();
    let parent = imported("gc-a", "parent");
    let mut child = imported("gc-b", "child");
    child.parent_id = Some(BeadId::from("gc-a"));
    child.depends_on.insert(BeadId::from("gc-a"), DepType("related".into()));
    let written = beads_of(harness.apply(Command::Import(crate::command::Import { beads: vec![parent, child] })));
    let taken = harness.get(&BeadId::from("gc-b"));
    assert!(taken.depends_on.contains_key(&BeadId::from("external:rig:x")), "the loose edge was taken over");
    assert!(!harness.ready_all().contains(&existing), "the imported open gc-b blocks the bead waiting for it");
    let undo = |beads: &[Bead]| {
        Command::ImportUndo(crate::command::ImportUndo {
            beads: beads
                .iter()
                .map(|bead| ImportedBead {
                    id: bead.id.clone(),
                    revision: bead.revision,
                    edges: if bead.id.0 == "gc-b" { vec![BeadId::from("gc-a")] } else { Vec::new() },
                })
                .collect(),
        })
    };
    let stale = undo(&written);
    harness
        .apply(Command::Update(UpdateBead {
            id: BeadId::from("gc-a"),
            title: Some("changed".into()),
            ..Default::default()
        }))
        .unwrap();
    assert!(matches!(harness.apply(stale), Err(Refusal::RevisionMismatch { .. })), "a changed bead is not undone");
    let current: Vec<Bead> = written.iter().map(|bead| harness.get(&bead.id)).collect();
    harness.apply(undo(&current)).unwrap();
    assert!(harness.get(&existing).depends_on.contains_key(&BeadId::from("gc-b")), "the edge to gc-b stays");
    assert_eq!(harness.ready_all(), ready_before, "gc-b is no bead again, so it blocks nothing");
    let loose = harness.query(Query::from(DepList { id: BeadId::from("gc-b"), direction: DepDirection::Down }));
    assert!(format!("{loose:?}").contains("external:rig:x"), "the taken-over edge is loose again: {loose:?}");
    harness.check_persistence();
}
