//! State-machine tests of the orchestration layer (docs/beads.md §7): events, convoys, formulas and
//! molecules, sling, hook, mail, purge and namespaces. Every apply goes through the harness,
//! which also checks that a reload from the persisted records gives the same state.

use super::*;
use crate::commands::events::Events;
use crate::commands::get::Get;
use crate::commands::hook::Hook;
use crate::commands::inbox::Inbox;
use crate::commands::list::List;
use crate::commands::purge_preview::PurgePreview;
use crate::commands::ready::Ready;
use crate::outcome::{NamespaceInfo, Progress, Refusal};

const RELEASE: &str = r#"
formula = "release"
description = "Cut a release"
[vars]
version = { required = true }
[[steps]]
id = "build"
title = "Build {{version}}"
[[steps]]
id = "test"
title = "Test {{version}}"
needs = ["build"]
[[steps]]
id = "publish"
title = "Publish {{version}}"
needs = ["build", "test"]
"#;

fn cook(harness: &mut Harness, source: &str, vars: &[(&str, &str)], ephemeral: bool) -> Answer {
    let vars = vars.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
    harness.apply(Command::MolCook(Cook {
        formula: FormulaSource::Inline(source.into()),
        title: None,
        vars,
        ephemeral,
    }))
}

fn events(harness: &Harness, after: u64) -> Vec<Event> {
    match harness.query(Query::from(Events { after, types: Vec::new(), limit: 0 })) {
        Ok(Outcome::Events { events, .. }) => events,
        other => panic!("expected events, got {other:?}"),
    }
}

fn event_types(harness: &Harness, after: u64) -> Vec<String> {
    events(harness, after).into_iter().map(|event| format!("{} {}", event.event_type, event.subject)).collect()
}

fn last_seq(harness: &Harness) -> u64 {
    events(harness, 0).last().map_or(0, |event| event.seq)
}

fn progress(answer: Answer) -> Progress {
    match answer {
        Ok(Outcome::Progress(progress)) => *progress,
        other => panic!("expected progress, got {other:?}"),
    }
}

fn sling(subject: &str, target: &str) -> Sling {
    Sling {
        subject: subject.into(),
        target: target.into(),
        pool: false,
        formula: None,
        vars: BTreeMap::new(),
        no_convoy: false,
        owned: false,
        merge: None,
    }
}

fn refusal(answer: Answer) -> String {
    answer.expect_err("the command must be refused").to_string()
}

// ---- events ----

#[test]
fn every_change_appends_gap_free_events_in_the_same_apply() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    harness.claim(&bead_id, "alice").unwrap();
    harness
        .apply(Command::SetMetadata(crate::command::SetMetadata {
            id: bead_id.clone(),
            entries: [("k".into(), Some("v".into()))].into(),
        }))
        .unwrap();
    harness.close(&bead_id).unwrap();
    harness.close(&bead_id).unwrap(); // idempotent: no change, no event
    harness.apply(Command::Delete(crate::command::Delete { id: bead_id.clone() })).unwrap();
    assert_eq!(
        event_types(&harness, 0),
        ["bead.created st-1", "bead.claimed st-1", "bead.updated st-1", "bead.closed st-1", "bead.deleted st-1"]
    );
    let all = events(&harness, 0);
    let seqs: Vec<u64> = all.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert!(all.iter().all(|event| event.actor == "tester"));
    assert_eq!(event_types(&harness, 3), ["bead.closed st-1", "bead.deleted st-1"]);
}

#[test]
fn a_refused_command_appends_no_event() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    harness.claim(&bead_id, "alice").unwrap();
    let before = last_seq(&harness);
    refusal(harness.claim(&bead_id, "bob"));
    refusal(cook(&mut harness, RELEASE, &[], false));
    assert_eq!(last_seq(&harness), before);
}

#[test]
fn event_type_filter_and_limit() {
    let mut harness = Harness::new();
    for n in 0..5 {
        let bead_id = harness.create(&format!("b{n}"));
        harness.close(&bead_id).unwrap();
    }
    let closed = harness.query(Query::from(Events { after: 0, types: vec!["bead.closed".into()], limit: 2 }));
    let Ok(Outcome::Events { events, last_seq }) = closed else { panic!("events") };
    assert_eq!(events.iter().map(|event| event.seq).collect::<Vec<_>>(), [2, 4]);
    assert_eq!(last_seq, 10);
}

#[test]
fn retention_compacts_old_events_and_a_compacted_seq_is_refused() {
    let mut harness = Harness::new();
    harness.event_retention = crate::limits::EVENT_RETENTION_MIN;
    for n in 0..150 {
        harness.create(&format!("b{n}"));
    }
    let kept = events(&harness, 50);
    assert_eq!(kept.len(), 100);
    assert_eq!(kept[0].seq, 51);
    let error = harness.query(Query::from(Events { after: 10, types: Vec::new(), limit: 0 })).expect_err("compacted");
    assert_eq!(error, Refusal::Compacted { requested: 10, compacted: 50 });
    assert!(error.to_string().contains("--after 50"), "{error}");
}

#[test]
fn events_are_per_namespace() {
    let mut harness = Harness::new();
    harness.create("in default");
    harness.namespace = Namespace("rig".into());
    harness.create("in rig");
    harness.create("in rig too");
    assert_eq!(event_types(&harness, 0), ["bead.created st-1", "bead.created st-2"]);
    harness.namespace = Namespace::default_namespace();
    assert_eq!(event_types(&harness, 0), ["bead.created st-1"]);
}

// ---- convoys ----

#[test]
fn a_convoy_closes_in_the_command_that_closes_its_last_child() {
    let mut harness = Harness::new();
    let first = harness.create("first");
    let second = harness.create("second");
    let convoy = bead_of(harness.apply(Command::ConvoyCreate(crate::command::ConvoyCreate {
        title: "ship".into(),
        children: ids(&[&first, &second]),
        owned: false,
    })));
    harness.close(&first).unwrap();
    assert_eq!(harness.get(&convoy.id).status, Status::Open);
    let before = last_seq(&harness);
    harness.close(&second).unwrap();
    assert_eq!(harness.get(&convoy.id).status, Status::Closed);
    assert_eq!(
        event_types(&harness, before),
        [
            "bead.closed st-2",
            format!("bead.closed {}", convoy.id).as_str(),
            format!("convoy.closed {}", convoy.id).as_str()
        ]
    );
}

#[test]
fn an_owned_convoy_and_an_empty_convoy_never_auto_close() {
    let mut harness = Harness::new();
    let child = harness.create("child");
    let owned = bead_of(harness.apply(Command::ConvoyCreate(crate::command::ConvoyCreate {
        title: "mine".into(),
        children: ids(&[&child]),
        owned: true,
    })));
    let empty = bead_of(harness.apply(Command::ConvoyCreate(crate::command::ConvoyCreate {
        title: "empty".into(),
        children: vec![],
        owned: false,
    })));
    harness.close(&child).unwrap();
    assert!(beads_of(harness.apply(Command::ConvoyCheck(crate::command::ConvoyCheck))).is_empty());
    assert_eq!(harness.get(&owned.id).status, Status::Open);
    assert_eq!(harness.get(&empty.id).status, Status::Open);
    let landed =
        bead_of(harness.apply(Command::ConvoyLand(crate::command::ConvoyLand { id: owned.id.clone(), reason: None })));
    assert_eq!(landed.status, Status::Closed);
}

#[test]
fn convoy_check_closes_every_finished_convoy_and_stranded_lists_unassigned_open_children() {
    let mut harness = Harness::new();
    let done = harness.create("done");
    let waiting = harness.create("waiting");
    let held = harness.create("held");
    let finished = bead_of(harness.apply(Command::ConvoyCreate(crate::command::ConvoyCreate {
        title: "a".into(),
        children: vec![],
        owned: false,
    })));
    let running = bead_of(harness.apply(Command::ConvoyCreate(crate::command::ConvoyCreate {
        title: "b".into(),
        children: vec![],
        owned: false,
    })));
    harness.close(&done).unwrap(); // closed before it joins the convoy: no auto-close yet
    harness
        .apply(Command::ConvoyAdd(crate::command::ConvoyAdd { id: finished.id.clone(), children: ids(&[&done]) }))
        .unwrap();
    harness
        .apply(Command::ConvoyAdd(crate::command::ConvoyAdd {
            id: running.id.clone(),
            children: ids(&[&waiting, &held]),
        }))
        .unwrap();
    harness.claim(&held, "alice").unwrap();
    let closed = beads_of(harness.apply(Command::ConvoyCheck(crate::command::ConvoyCheck)));
    assert_eq!(closed.iter().map(|bead| bead.id.clone()).collect::<Vec<_>>(), ids(&[&finished.id]));
    let stranded = beads_of(harness.query(crate::commands::stranded::Stranded { convoy: None }.into()));
    assert_eq!(stranded.iter().map(|bead| bead.id.clone()).collect::<Vec<_>>(), ids(&[&waiting]));
    let status =
        progress(harness.query(crate::commands::convoy_status::ConvoyStatus { id: running.id.clone() }.into()));
    assert_eq!((status.closed(), status.children.len()), (0, 2));
    assert!(
        refusal(
            harness
                .apply(Command::ConvoyAdd(crate::command::ConvoyAdd { id: finished.id, children: ids(&[&waiting]) }))
        )
        .contains("closed")
    );
    assert!(
        refusal(harness.query(crate::commands::convoy_status::ConvoyStatus { id: waiting }.into()))
            .contains("not a convoy")
    );
}

// ---- formulas and molecules ----

#[test]
fn cooking_creates_the_root_and_steps_in_one_command_with_needs_mapped() {
    let mut harness = Harness::new();
    let before = last_seq(&harness);
    let beads = beads_of(cook(&mut harness, RELEASE, &[("version", "1.0")], false));
    assert_eq!(beads.len(), 4);
    let (root, steps) = (&beads[0], &beads[1..]);
    assert_eq!(
        (root.bead_type.as_str(), root.reference.as_str(), root.title.as_str()),
        ("molecule", "release", "release")
    );
    assert!(steps.iter().all(|step| step.parent_id.as_ref() == Some(&root.id) && step.bead_type == "task"));
    assert_eq!(steps.iter().map(|step| step.reference.as_str()).collect::<Vec<_>>(), ["build", "test", "publish"]);
    assert_eq!(steps[1].title, "Test 1.0");
    assert_eq!(steps[2].needs(), ids(&[&steps[0].id, &steps[1].id]));
    assert_eq!(last_seq(&harness) - before, 4, "one bead.created per bead, all in one apply");
    assert_eq!(harness.ready_all(), ids(&[&steps[0].id]), "only the first step is ready; the root never is");
}

#[test]
fn a_failed_cook_leaves_nothing_behind() {
    let mut harness = Harness::new();
    harness.create("existing");
    let before = content(&harness.state);
    let cases = [
        (RELEASE.to_string(), vec![], "needs variable \"version\""),
        (RELEASE.replace("needs = [\"build\"]", "needs = [\"nope\"]"), vec![("version", "1")], "unknown step \"nope\""),
        (RELEASE.replace("needs = [\"build\"]", "needs = [\"publish\"]"), vec![("version", "1")], "cycle"),
        ("formula = [".to_string(), vec![], "not valid TOML"),
    ];
    for (source, vars, expected) in cases {
        let error = refusal(cook(&mut harness, &source, &vars, false));
        assert!(error.contains(expected), "{error:?} should contain {expected:?}");
        assert_eq!(content(&harness.state), before, "a refused cook changes nothing");
    }
    let named = Command::MolCook(Cook {
        formula: FormulaSource::Named("missing".into()),
        title: None,
        vars: BTreeMap::new(),
        ephemeral: false,
    });
    assert!(refusal(harness.apply(named)).contains("not found"));
}

#[test]
fn molecule_status_tracks_the_current_step_and_the_root_closes_with_the_last_step() {
    let mut harness = Harness::new();
    let beads = beads_of(cook(&mut harness, RELEASE, &[("version", "2")], false));
    let root = beads[0].id.clone();
    let status = progress(harness.query(crate::commands::mol_status::MolStatus { root: root.clone() }.into()));
    assert_eq!((status.current.clone(), status.closed()), (Some(beads[1].id.clone()), 0));
    harness.close(&beads[1].id).unwrap();
    harness.close(&beads[2].id).unwrap();
    let status = progress(harness.query(crate::commands::mol_status::MolStatus { root: root.clone() }.into()));
    assert_eq!((status.current.clone(), status.closed(), status.children.len()), (Some(beads[3].id.clone()), 2, 3));
    harness.close(&beads[3].id).unwrap();
    assert_eq!(harness.get(&root).status, Status::Closed, "the root closes in the command that closes the last step");
}

#[test]
fn stored_formulas_are_put_listed_shown_cooked_by_name_and_deleted() {
    let mut harness = Harness::new();
    harness.apply(Command::FormulaPut(crate::command::FormulaPut { source: RELEASE.into() })).unwrap();
    let Ok(Outcome::Formulas(list)) = harness.query(crate::commands::formula_list::FormulaList.into()) else {
        panic!("formulas")
    };
    assert_eq!((list[0].name.as_str(), list[0].steps), ("release", 3));
    let Ok(Outcome::Formulas(shown)) =
        harness.query(crate::commands::formula_get::FormulaGet { name: "release".into() }.into())
    else {
        panic!()
    };
    assert_eq!(shown[0].source, RELEASE);
    let cooked = Command::MolCook(Cook {
        formula: FormulaSource::Named("release".into()),
        title: Some("Release 3".into()),
        vars: [("version".to_string(), "3".to_string())].into(),
        ephemeral: true,
    });
    let beads = beads_of(harness.apply(cooked));
    assert_eq!(beads[0].title, "Release 3");
    assert!(beads.iter().all(|bead| bead.ephemeral), "a wisp is cooked ephemeral");
    assert!(harness.ready_all().is_empty(), "wisps are not ready unless asked");
    assert!(
        refusal(harness.apply(Command::FormulaPut(crate::command::FormulaPut { source: "formula = \"x\"".into() })))
            .contains("no [[steps]]")
    );
    harness.apply(Command::FormulaDelete(crate::command::FormulaDelete { name: "release".into() })).unwrap();
    assert!(
        refusal(harness.query(crate::commands::formula_get::FormulaGet { name: "release".into() }.into()))
            .contains("not found")
    );
}

// ---- sling ----

#[test]
fn sling_to_an_agent_assigns_and_wraps_the_bead_in_an_auto_convoy() {
    let mut harness = Harness::new();
    let bead_id = harness.create("fix it");
    let answer = beads_of(harness.apply(Command::Sling(Sling { merge: Some("mr".into()), ..sling("st-1", "alice") })));
    let (routed, convoy) = (&answer[0], &answer[1]);
    assert_eq!((routed.id.clone(), routed.assignee.as_str()), (bead_id, "alice"));
    assert_eq!(routed.metadata.get("gc.merge").map(String::as_str), Some("mr"));
    assert_eq!((convoy.bead_type.as_str(), routed.parent_id.clone()), ("convoy", Some(convoy.id.clone())));
    harness.close(&routed.id).unwrap();
    assert_eq!(harness.get(&convoy.id).status, Status::Closed, "the auto-convoy closes with its only child");
}

#[test]
fn sling_to_a_pool_labels_and_routes_and_text_creates_a_bead() {
    let mut harness = Harness::new();
    let answer =
        beads_of(harness.apply(Command::Sling(Sling { pool: true, no_convoy: true, ..sling("write docs", "web") })));
    assert_eq!(answer.len(), 1, "--no-convoy creates no convoy");
    let bead = &answer[0];
    assert_eq!(bead.title, "write docs");
    assert!(bead.labels.contains("pool:web"));
    assert_eq!(bead.metadata.get("gc.routed_to").map(String::as_str), Some("web"));
    assert!(bead.assignee.is_empty());
    let owned = beads_of(harness.apply(Command::Sling(Sling { owned: true, ..sling("other", "bob") })));
    assert!(owned[1].labels.contains("owned"));
}

#[test]
fn slinging_a_convoy_routes_its_open_children_all_or_nothing() {
    let mut harness = Harness::new();
    let mut children: Vec<BeadId> = (0..500).map(|n| harness.create(&format!("c{n}"))).collect();
    let crowded_labels = (0..crate::limits::LABELS_MAX).map(|n| format!("l{n}")).collect();
    let crowded =
        harness.create_with(CreateBead { title: "crowded".into(), labels: crowded_labels, ..Default::default() });
    children.push(crowded.clone());
    let convoy = bead_of(harness.apply(Command::ConvoyCreate(crate::command::ConvoyCreate {
        title: "big".into(),
        children: children.clone(),
        owned: false,
    })));
    harness.close(&children[0]).unwrap();
    harness.claim(&children[1], "carol").unwrap();
    let before = content(&harness.state);
    let error = refusal(harness.apply(Command::Sling(Sling { pool: true, ..sling(&convoy.id.0, "web") })));
    assert!(error.contains(&format!("bead {crowded} has too many labels")), "{error}");
    assert_eq!(content(&harness.state), before, "a refused sling routes nothing");
    let update = UpdateBead { id: crowded.clone(), remove_labels: labels(&["l0"]), ..Default::default() };
    harness.apply(Command::Update(update)).unwrap();
    let routed = beads_of(harness.apply(Command::Sling(Sling { pool: true, ..sling(&convoy.id.0, "web") })));
    assert_eq!(routed.len(), 499, "open children only: not the closed one, not carol's");
    assert!(routed.iter().all(|bead| bead.labels.contains("pool:web")));
    let held = harness.get(&children[1]);
    assert_eq!((held.assignee.as_str(), held.labels.contains("pool:web")), ("carol", false));
    let again = beads_of(harness.apply(Command::Sling(Sling { pool: true, ..sling(&convoy.id.0, "api") })));
    assert!(again.iter().all(|bead| bead.labels.contains("pool:api") && !bead.labels.contains("pool:web")));
    let convoys = beads_of(
        harness.query(Query::from(List(ListFilter { bead_type: Some("convoy".into()), ..Default::default() }))),
    );
    assert_eq!(convoys.len(), 1, "slinging a container creates no convoy");
}

#[test]
fn sling_refuses_unknown_ids_and_cooks_a_wisp_with_a_formula() {
    let mut harness = Harness::new();
    assert!(refusal(harness.apply(Command::Sling(sling("st-99", "alice")))).contains("st-99 not found"));
    let bead_id = harness.create("feature x");
    let with_formula = Sling {
        formula: Some(FormulaSource::Inline(RELEASE.into())),
        vars: [("version".to_string(), "9".to_string())].into(),
        ..sling(&bead_id.0, "alice")
    };
    let answer = beads_of(harness.apply(Command::Sling(with_formula)));
    let root = &answer[0];
    assert_eq!((root.bead_type.as_str(), root.assignee.as_str(), root.ephemeral), ("molecule", "alice", true));
    assert_eq!(root.metadata.get("gc.source_bead"), Some(&bead_id.0));
    let steps = &answer[2..];
    assert_eq!(steps.len(), 3);
    assert!(steps.iter().all(|step| step.assignee == "alice" && step.ephemeral), "the wisp's steps are routed too");
    let query = Query::from(Hook { agent: "alice".into(), pool: None, limit: 10, now: Timestamp(harness.now) });
    let hooked: Vec<BeadId> = beads_of(harness.query(query)).into_iter().map(|bead| bead.id).collect();
    assert_eq!(hooked, vec![steps[0].id.clone()], "alice's hook finds the wisp's ready step");
}

#[test]
fn hook_with_in_progress_work_at_the_limit_lists_no_more_and_an_empty_agent_is_refused() {
    let mut harness = Harness::new();
    let mine = harness.create("mine");
    harness.claim(&mine, "alice").unwrap();
    harness.create_with(CreateBead { title: "assigned".into(), assignee: "alice".into(), ..Default::default() });
    let query = Query::from(Hook { agent: "alice".into(), pool: None, limit: 1, now: Timestamp(harness.now) });
    assert_eq!(beads_of(harness.query(query)).len(), 1, "--limit 1 is one bead");
    let empty = Query::from(Hook { agent: String::new(), pool: None, limit: 1, now: Timestamp(harness.now) });
    assert!(harness.query(empty).expect_err("refused").to_string().contains("hook needs an agent"));
}

#[test]
fn a_convoy_refuses_a_bead_that_belongs_to_another_parent() {
    let mut harness = Harness::new();
    let cooked = beads_of(cook(&mut harness, RELEASE, &[("version", "1")], false));
    let step = cooked[1].id.clone();
    let before = content(&harness.state);
    let answer = harness.apply(Command::ConvoyCreate(crate::command::ConvoyCreate {
        title: "steal".into(),
        children: vec![step.clone()],
        owned: false,
    }));
    assert!(refusal(answer).contains(&format!("{step} already belongs to {}", cooked[0].id)));
    assert_eq!(content(&harness.state), before);
}

#[test]
fn a_cycle_is_reported_at_a_step_on_the_cycle_and_a_missing_var_names_its_step() {
    let downstream = r#"
formula = "loop"
[[steps]]
id = "after"
title = "After"
needs = ["a"]
[[steps]]
id = "a"
title = "A"
needs = ["b"]
[[steps]]
id = "b"
title = "B"
needs = ["a"]
"#;
    let error = crate::formula::Formula::parse(downstream).expect_err("a cycle").to_string();
    assert!(error.contains("step \"a\"") || error.contains("step \"b\""), "{error}");
    let mut harness = Harness::new();
    let error = refusal(cook(&mut harness, RELEASE, &[], false));
    assert!(error.contains("needs variable \"version\" (step \"build\" uses it)"), "{error}");
}

#[test]
fn events_after_zero_start_at_the_oldest_kept() {
    let mut harness = Harness::new();
    harness.event_retention = 100;
    for n in 0..150 {
        harness.create(&format!("b{n}"));
    }
    let kept = events(&harness, 0);
    assert_eq!(kept.len(), 100);
    assert_eq!(kept[0].seq, 51);
    let compacted = harness.query(Query::from(Events { after: 10, types: Vec::new(), limit: 0 }));
    assert!(refusal(compacted).contains("50"), "a compacted position is still refused");
}

/// A disk of records: what `take_changes` batches leave behind.
fn persist(disk: &mut BTreeMap<RecordKey, Record>, state: &mut State) {
    for (key, record) in state.take_changes() {
        match record {
            Some(record) => disk.insert(key, record),
            None => disk.remove(&key),
        };
    }
}

#[test]
fn deleting_a_namespace_deletes_every_record_even_those_removed_earlier_in_the_same_batch() {
    let mut state = State::new();
    let mut disk = BTreeMap::new();
    let apply = |state: &mut State, timestamp: i64, command: Command| {
        state.apply(timestamp as u64, &bare_proposal(timestamp, command))
    };
    apply(&mut state, 1, Command::Create(CreateBead { title: "kept".into(), ..Default::default() })).unwrap();
    apply(&mut state, 2, Command::Create(CreateBead { title: "gone".into(), ..Default::default() })).unwrap();
    persist(&mut disk, &mut state);
    // One batch: a bead removed, then its namespace deleted, then a refused write to it.
    apply(&mut state, 3, Command::Delete(crate::command::Delete { id: BeadId::from("st-2") })).unwrap();
    apply(&mut state, 4, Command::NamespaceDelete(crate::command::NamespaceDelete { force: true })).unwrap();
    apply(&mut state, 5, Command::Close(crate::command::Close { ids: vec![BeadId::from("st-1")], reason: None }))
        .unwrap_err();
    persist(&mut disk, &mut state);
    let reloaded = State::from_records(disk.clone()).expect("the disk reloads");
    assert_eq!(reloaded.digest(), state.digest());
    assert!(
        disk.keys().all(|key| matches!(key, RecordKey::Clock | RecordKey::ControllerTerm | RecordKey::Session(_))),
        "{disk:?}"
    );
}

// ---- hook ----

#[test]
fn hook_puts_own_work_first_then_assigned_then_pool() {
    let mut harness = Harness::new();
    let pooled =
        harness.create_with(CreateBead { title: "pooled".into(), labels: labels(&["pool:web"]), ..Default::default() });
    let routed = harness.create_with(CreateBead {
        title: "routed by metadata".into(),
        metadata: [("gc.routed_to".to_string(), "web".to_string())].into(),
        ..Default::default()
    });
    let assigned =
        harness.create_with(CreateBead { title: "assigned".into(), assignee: "alice".into(), ..Default::default() });
    let mine = harness.create("mine");
    harness.claim(&mine, "alice").unwrap();
    let hook = |harness: &Harness| {
        let query = Query::from(Hook {
            agent: "alice".into(),
            pool: Some("web".into()),
            limit: 10,
            now: Timestamp(harness.now),
        });
        beads_of(harness.query(query)).into_iter().map(|bead| bead.id).collect::<Vec<_>>()
    };
    assert_eq!(hook(&harness), ids(&[&mine, &assigned, &pooled, &routed]));
    let claim = |harness: &mut Harness, agent: &str| {
        let command = Command::HookClaim(crate::command::HookClaim {
            agent: Actor(agent.into()),
            pool: Some("web".into()),
            lease_ms: None,
        });
        beads_of(harness.apply(command)).into_iter().map(|bead| bead.id).collect::<Vec<_>>()
    };
    assert_eq!(claim(&mut harness, "alice"), ids(&[&mine]), "own in-progress work comes back first");
    assert_eq!(claim(&mut harness, "bob"), ids(&[&pooled]));
    assert_eq!(claim(&mut harness, "carol"), ids(&[&routed]), "pool members never take the same bead");
    assert!(claim(&mut harness, "dave").is_empty(), "nothing left for the pool");
    assert_eq!(claim(&mut harness, "bob"), ids(&[&pooled]), "bob's claimed bead is now his own work");
}

// ---- mail ----

#[test]
fn mail_round_trip_send_inbox_read_reply_thread_archive() {
    let mut harness = Harness::new();
    harness.actor = Actor("alice".into());
    let body = format!("{}\nsecond line", "x".repeat(100));
    let sent = bead_of(harness.apply(Command::MailSend(MailSend { to: "bob".into(), body, ..Default::default() })));
    assert_eq!(sent.title.chars().count(), 80, "the body's first line, cut to 80 characters");
    assert_eq!((sent.bead_type.as_str(), sent.assignee.as_str(), sent.from.as_str()), ("message", "bob", "alice"));
    assert_eq!(sent.labels, labels(&["gc:message", &format!("thread:{}", sent.id)]));
    let inbox = |harness: &Harness, include_read: bool| {
        let query = Query::from(Inbox { recipient: "bob".into(), include_read, limit: 0 });
        beads_of(harness.query(query)).into_iter().map(|bead| bead.id).collect::<Vec<_>>()
    };
    assert_eq!(inbox(&harness, false), ids(&[&sent.id]));
    harness.apply(Command::MailMark(crate::command::MailMark { id: sent.id.clone(), read: true })).unwrap();
    assert!(inbox(&harness, false).is_empty(), "read messages leave the inbox");
    assert_eq!(inbox(&harness, true), ids(&[&sent.id]), "read does not close");
    harness.apply(Command::MailMark(crate::command::MailMark { id: sent.id.clone(), read: false })).unwrap();
    assert_eq!(inbox(&harness, false), ids(&[&sent.id]));
    harness.actor = Actor("bob".into());
    let reply =
        MailSend { subject: "re".into(), body: "ok".into(), reply_to: Some(sent.id.clone()), ..Default::default() };
    let reply = bead_of(harness.apply(Command::MailSend(reply)));
    assert_eq!((reply.assignee.as_str(), reply.from.as_str()), ("alice", "bob"));
    assert!(reply.labels.contains(&format!("thread:{}", sent.id)));
    assert!(reply.labels.contains(&format!("reply-to:{}", sent.id)));
    let thread = beads_of(harness.query(crate::commands::thread::Thread { thread: sent.id.0.clone() }.into()));
    assert_eq!(thread.iter().map(|bead| bead.id.clone()).collect::<Vec<_>>(), ids(&[&sent.id, &reply.id]));
    harness.apply(Command::MailArchive(crate::command::MailArchive { id: sent.id.clone() })).unwrap();
    assert!(inbox(&harness, true).is_empty());
    assert!(
        refusal(harness.apply(Command::MailArchive(crate::command::MailArchive { id: sent.id.clone() })))
            .contains("already archived")
    );
    let types: Vec<String> = events(&harness, 0).into_iter().map(|event| event.event_type).collect();
    for expected in ["mail.sent", "mail.read", "mail.archived"] {
        assert!(types.iter().any(|found| found == expected), "{expected} in {types:?}");
    }
    let task = harness.create("not mail");
    assert!(
        refusal(harness.apply(Command::MailArchive(crate::command::MailArchive { id: task })))
            .contains("not a message")
    );
}

// ---- purge ----

#[test]
fn purge_removes_only_closed_wisps_older_than_asked() {
    let mut harness = Harness::new();
    let beads = beads_of(cook(&mut harness, RELEASE, &[("version", "1")], true));
    let kept = harness.create("durable");
    harness.close(&kept).unwrap();
    for bead in &beads[1..] {
        harness.close(&bead.id).unwrap();
    }
    let open_wisp =
        harness.create_with(CreateBead { title: "open wisp".into(), ephemeral: true, ..Default::default() });
    let preview = |harness: &Harness, older_than_ms| {
        harness.query(Query::from(PurgePreview { older_than_ms, now: Timestamp(harness.now) }))
    };
    assert_eq!(preview(&harness, 1_000_000), Ok(Outcome::Purged { purged_count: 0 }));
    assert_eq!(preview(&harness, 0), Ok(Outcome::Purged { purged_count: 4 }));
    assert_eq!(
        harness.apply(Command::Purge(crate::command::Purge { older_than_ms: 0 })),
        Ok(Outcome::Purged { purged_count: 4 })
    );
    assert_eq!(harness.state.bead_count(), 2);
    harness.get(&kept);
    harness.get(&open_wisp);
}

#[test]
fn purge_goes_by_close_time_whatever_the_creation_order() {
    let mut harness = Harness::new();
    let wisp = |title: &str| CreateBead { title: title.into(), ephemeral: true, ..Default::default() };
    let first = harness.create_with(wisp("created first, closed last"));
    let second = harness.create_with(wisp("created second, closed first"));
    harness.close(&second).unwrap();
    harness.now += 10_000;
    harness.close(&first).unwrap();
    harness.now += 5_000;
    // 15 s after `second` closed and 5 s after `first` did: only `second` is older than 8 s.
    let preview = harness.query(Query::from(PurgePreview { older_than_ms: 8_000, now: Timestamp(harness.now) }));
    assert_eq!(preview, Ok(Outcome::Purged { purged_count: 1 }));
    assert_eq!(
        harness.apply(Command::Purge(crate::command::Purge { older_than_ms: 8_000 })),
        Ok(Outcome::Purged { purged_count: 1 })
    );
    harness.get(&first);
    let gone = harness.query(Query::from(Get { ids: vec![second.clone()] }));
    assert!(refusal(gone).contains("not found"), "the wisp closed longest ago was purged");
    assert_eq!(
        harness.apply(Command::Purge(crate::command::Purge { older_than_ms: 0 })),
        Ok(Outcome::Purged { purged_count: 1 })
    );
    assert_eq!(harness.state.bead_count(), 0);
}

// ---- namespaces ----

#[test]
fn namespaces_are_created_with_a_prefix_listed_and_deleted_only_when_empty_or_forced() {
    let mut harness = Harness::new();
    harness.namespace = Namespace("city".into());
    harness.apply(Command::NamespaceCreate(crate::command::NamespaceCreate { prefix: "gc".into() })).unwrap();
    harness
        .apply(Command::NamespaceCreate(crate::command::NamespaceCreate { prefix: "gc".into() }))
        .expect("same prefix again is a no-op");
    assert!(
        refusal(harness.apply(Command::NamespaceCreate(crate::command::NamespaceCreate { prefix: "zz".into() })))
            .contains("already exists")
    );
    assert_eq!(harness.create("first").0, "gc-1");
    harness.apply(Command::FormulaPut(crate::command::FormulaPut { source: RELEASE.into() })).unwrap();
    let Ok(Outcome::Namespaces(list)) = harness.query(Query::Namespaces) else { panic!("namespaces") };
    assert_eq!(
        list,
        vec![NamespaceInfo {
            name: "city".into(),
            prefix: "gc".into(),
            beads: 1,
            last_event_seq: 1,
            default_lease_ms: None,
            max_deliveries: crate::limits::MAX_DELIVERIES_DEFAULT,
        }]
    );
    assert!(
        refusal(harness.apply(Command::NamespaceDelete(crate::command::NamespaceDelete { force: false })))
            .contains("--force")
    );
    harness.apply(Command::NamespaceDelete(crate::command::NamespaceDelete { force: true })).unwrap();
    assert!(
        harness
            .state
            .records()
            .iter()
            .all(|(key, _)| matches!(key, RecordKey::Clock | RecordKey::ControllerTerm | RecordKey::Session(_)))
    );
    assert!(
        refusal(harness.apply(Command::NamespaceDelete(crate::command::NamespaceDelete { force: true })))
            .contains("does not exist")
    );
    assert_eq!(harness.create("again").0, "st-1", "a deleted namespace starts over with the default prefix");
}

// ---- readiness at scale ----

fn bare_proposal(timestamp: i64, command: Command) -> Proposal {
    Proposal {
        request_id: None,
        timestamp: Timestamp(timestamp),
        default_prefix: "st".into(),
        namespace: Namespace::default_namespace(),
        actor: Actor::default(),
        event_retention: crate::limits::EVENT_RETENTION_DEFAULT,
        credential: None,
        command,
    }
}

#[test]
fn closing_a_blocker_with_ten_thousand_dependents_makes_them_all_ready() {
    let mut state = State::new();
    state
        .apply(1, &bare_proposal(0, Command::Create(CreateBead { title: "blocker".into(), ..Default::default() })))
        .unwrap();
    for n in 1..=10_000 {
        let create = CreateBead { title: format!("d{n}"), needs: vec!["st-1".into()], ..Default::default() };
        state.apply(n as u64, &bare_proposal(n, Command::Create(create))).unwrap();
    }
    let ready = |state: &State| {
        let filter = ReadyFilter { limit: 0, ..Default::default() };
        match state.query(&Namespace::default_namespace(), &Query::from(Ready { filter, now: Timestamp(i64::MAX) })) {
            Ok(Outcome::Beads(beads)) => beads.len(),
            other => panic!("ready: {other:?}"),
        }
    };
    assert_eq!(ready(&state), 1);
    let close = Command::Close(crate::command::Close { ids: vec![BeadId::from("st-1")], reason: None });
    state.apply(20_000, &bare_proposal(20_000, close)).unwrap();
    assert_eq!(ready(&state), 10_000);
}
