//! Revisions and transactions: every change moves a bead's revision to the log index that made it,
//! a condition on a stale revision refuses the whole transaction, and a transaction whose later
//! write is refused leaves every record, index and blocked state as it was.

use super::*;

fn update_title(bead_id: &BeadId, title: &str) -> Command {
    Command::Update(UpdateBead { id: bead_id.clone(), title: Some(title.into()), ..Default::default() })
}

fn outcomes(answer: Answer) -> Vec<Outcome> {
    match answer {
        Ok(Outcome::Txn(outcomes)) => outcomes,
        other => panic!("expected a transaction's outcomes, got {other:?}"),
    }
}

#[test]
fn a_change_moves_the_revision_to_its_log_index_and_a_no_op_keeps_it() {
    let mut harness = Harness::new();
    let bead_id = harness.create("first");
    let created = harness.get(&bead_id).revision;
    assert_eq!(created, harness.now as u64, "a new bead's revision is the index that created it");
    harness.apply(update_title(&bead_id, "second")).unwrap();
    let updated = harness.get(&bead_id).revision;
    assert!(updated > created, "{updated} > {created}");
    harness.apply(update_title(&bead_id, "second")).unwrap();
    assert_eq!(harness.get(&bead_id).revision, updated, "an update that changes nothing keeps the revision");
    harness.close(&bead_id).unwrap();
    assert!(harness.get(&bead_id).revision > updated, "close moves it");
}

#[test]
fn every_write_answers_the_bead_with_its_new_revision_and_update_time() {
    let mut harness = Harness::new();
    let bead_id = harness.create("first");
    let id = || bead_id.clone();
    let writes = [
        update_title(&bead_id, "second"),
        Command::SetMetadata(crate::command::SetMetadata {
            id: id(),
            entries: [("k".to_string(), Some("v".to_string()))].into(),
        }),
        Command::Claim(crate::command::Claim { id: id(), actor: Actor("agent".into()), lease_ms: None }),
        Command::Close(crate::command::Close { ids: vec![id()], reason: None }),
        Command::Reopen(crate::command::Reopen { id: id() }),
        Command::Txn(Txn::conditional(id(), 0, update_title(&bead_id, "third"))),
    ];
    for mut write in writes {
        if let Command::Txn(txn) = &mut write {
            txn.conditions[0].revision = harness.get(&bead_id).revision;
        }
        let answer = harness.apply(write.clone());
        let answered = match answer {
            Ok(Outcome::Bead(bead)) => *bead,
            Ok(Outcome::Beads(mut beads)) => beads.remove(0),
            Ok(Outcome::Txn(mut outcomes)) => match outcomes.remove(0) {
                Outcome::Bead(bead) => *bead,
                other => panic!("{write:?} answered {other:?}"),
            },
            other => panic!("{write:?} answered {other:?}"),
        };
        let stored = harness.get(&bead_id);
        assert_eq!(answered.revision, harness.now as u64, "{write:?}: the answer carries the write's log index");
        assert_eq!(answered, stored, "{write:?}: the answer is the bead as stored");
    }
}

#[test]
fn a_condition_on_the_current_revision_applies_and_a_stale_one_is_refused_with_the_current() {
    let mut harness = Harness::new();
    let bead_id = harness.create("first");
    let revision = harness.get(&bead_id).revision;
    let txn = Txn::conditional(bead_id.clone(), revision, update_title(&bead_id, "second"));
    outcomes(harness.apply(Command::Txn(txn.clone())));
    let current = harness.get(&bead_id).revision;
    let before = content(&harness.state);
    match harness.apply(Command::Txn(txn)) {
        Err(Refusal::RevisionMismatch { id, expected, current: reported }) => {
            assert_eq!((id, expected, reported), (bead_id.clone(), revision, current));
        }
        other => panic!("a stale revision is refused, got {other:?}"),
    }
    assert_eq!(content(&harness.state), before, "a refused condition changes nothing");
    let missing = Txn::conditional(BeadId::from("st-404"), 1, update_title(&bead_id, "third"));
    assert!(matches!(harness.apply(Command::Txn(missing)), Err(Refusal::NotFound(_))));
}

#[test]
fn a_graph_of_new_beads_and_edges_is_one_step_through_dollar_references() {
    let mut harness = Harness::new();
    let writes = vec![
        Command::Create(CreateBead { title: "root".into(), ..Default::default() }),
        Command::Create(CreateBead { title: "step".into(), parent_id: Some(BeadId::from("$0")), ..Default::default() }),
        Command::Create(CreateBead { title: "next".into(), needs: vec!["$1".into()], ..Default::default() }),
        Command::DepAdd(crate::command::DepAdd {
            issue_id: "$2".into(),
            depends_on_id: "$0".into(),
            dep_type: DepType("related".into()),
        }),
    ];
    let answer = outcomes(harness.apply(Command::Txn(Txn { conditions: Vec::new(), fences: Vec::new(), writes })));
    let ids: Vec<BeadId> = answer
        .iter()
        .take(3)
        .map(|outcome| match outcome {
            Outcome::Bead(bead) => bead.id.clone(),
            other => panic!("a create answers with its bead, got {other:?}"),
        })
        .collect();
    assert_eq!(harness.get(&ids[1]).parent_id.as_ref(), Some(&ids[0]));
    let next = harness.get(&ids[2]);
    assert_eq!(next.depends_on.get(&ids[1]), Some(&DepType::blocks()));
    assert_eq!(next.depends_on.get(&ids[0]), Some(&DepType("related".into())));
    assert!(!harness.ready_all().contains(&ids[2]), "next waits for step");
    let revisions: BTreeSet<u64> = ids.iter().map(|bead_id| harness.get(bead_id).revision).collect();
    assert_eq!(revisions.len(), 1, "every bead of one transaction has that transaction's revision");
}

#[test]
fn a_refused_later_write_undoes_every_earlier_write_of_the_transaction() {
    let mut harness = Harness::new();
    let blocker = harness.create("blocker");
    let parent = harness.create("parent");
    let child = harness.create_child("child", &parent);
    let waiting = harness.create_with(CreateBead {
        title: "waiting".into(),
        needs: vec![blocker.0.clone()],
        ..Default::default()
    });
    let before = content(&harness.state);
    let ready_before = harness.ready_all();
    let blocked_before = harness.state.namespaces[&harness.namespace].indexes().blocked.clone();
    let events_before = harness.state.namespaces[&harness.namespace].meta().last_event_seq();
    let writes = vec![
        Command::Close(crate::command::Close { ids: vec![blocker.clone()], reason: None }),
        Command::Update(UpdateBead { id: parent.clone(), status: Some(Status::Blocked), ..Default::default() }),
        Command::Create(CreateBead { title: "new".into(), ..Default::default() }),
        Command::Delete(crate::command::Delete { id: child.clone() }),
        Command::DepAdd(crate::command::DepAdd {
            issue_id: waiting.clone(),
            depends_on_id: "$2".into(),
            dep_type: DepType::blocks(),
        }),
        Command::Update(UpdateBead { id: BeadId::from("st-404"), title: Some("x".into()), ..Default::default() }),
    ];
    match harness.apply(Command::Txn(Txn { conditions: Vec::new(), fences: Vec::new(), writes })) {
        Err(Refusal::TxnWriteRefused { index: 5, refusal }) => assert!(matches!(*refusal, Refusal::NotFound(_))),
        other => panic!("the sixth write is refused, got {other:?}"),
    }
    assert_eq!(content(&harness.state), before, "records are as before");
    assert_eq!(harness.ready_all(), ready_before, "the ready set is as before");
    assert_eq!(harness.state.namespaces[&harness.namespace].indexes().blocked, blocked_before);
    assert_eq!(harness.state.namespaces[&harness.namespace].meta().last_event_seq(), events_before, "no event");
    assert_eq!(harness.create("after"), BeadId::from("st-5"), "the undone create gave back its id");
}

#[test]
fn a_transaction_holds_bead_writes_only_and_at_least_one() {
    let mut harness = Harness::new();
    let empty = Txn::default();
    assert!(matches!(harness.apply(Command::Txn(empty)), Err(Refusal::Invalid(_))));
    let nested = Txn { conditions: Vec::new(), fences: Vec::new(), writes: vec![Command::Txn(Txn::default())] };
    assert!(matches!(harness.apply(Command::Txn(nested)), Err(Refusal::Invalid(_))));
    let reference =
        Txn { conditions: Vec::new(), fences: Vec::new(), writes: vec![update_title(&BeadId::from("$0"), "x")] };
    assert!(matches!(harness.apply(Command::Txn(reference)), Err(Refusal::Invalid(_))), "$0 names no earlier create");
}

#[test]
fn a_set_metadata_value_that_is_exactly_a_dollar_reference_names_the_created_bead() {
    let mut harness = Harness::new();
    let refers = |value: &str| {
        Command::SetMetadata(crate::command::SetMetadata {
            id: BeadId::from("$1"),
            entries: [("gc.root".to_string(), Some(value.to_string()))].into(),
        })
    };
    let create = |title: &str, value: &str| {
        Command::Create(CreateBead {
            title: title.into(),
            metadata: [("kept".to_string(), value.to_string())].into(),
            ..Default::default()
        })
    };
    let writes = vec![create("root", ""), create("step", "$0"), refers("$0")];
    let outcomes = outcomes(harness.apply(Command::Txn(Txn { conditions: Vec::new(), fences: Vec::new(), writes })));
    let root = bead_of(Ok(outcomes[0].clone()));
    let step = harness.get(&bead_of(Ok(outcomes[1].clone())).id);
    assert_eq!(step.metadata["gc.root"], root.id.0, "$0 in a set_metadata is the root's id");
    assert_eq!(step.metadata["kept"], "$0", "a create's metadata is kept as written");
    let dangling = vec![create("root", ""), create("step", ""), refers("$5")];
    let refusal = harness
        .apply(Command::Txn(Txn { conditions: Vec::new(), fences: Vec::new(), writes: dangling }))
        .expect_err("refused");
    assert!(refusal.to_string().contains("names no bead"), "{refusal}");
}
