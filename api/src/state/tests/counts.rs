//! The counts a read answers with each bead (bd's `dependent_count` and `comment_count`): kept in
//! the indexes as beads change, so a read costs two look-ups a bead whatever the fan-in; never
//! held by a stored bead, nor carried by a command's answer.

use super::*;
use crate::commands::get::Get;
use crate::commands::list::List;
use crate::commands::ready::Ready;

/// The counts `list --all` answers with the bead.
fn listed_counts(harness: &Harness, bead_id: &BeadId) -> BeadCounts {
    let filter = ListFilter { all: true, limit: 0, ..Default::default() };
    let listed = beads_of(harness.query(Query::from(List(filter))));
    listed.into_iter().find(|bead| &bead.id == bead_id).map(|bead| bead.counts).expect("the bead is listed")
}

fn waits_for(title: &str, blocker: &BeadId) -> CreateBead {
    CreateBead { title: title.into(), needs: vec![blocker.0.clone()], ..Default::default() }
}

fn dep_add(issue: &BeadId, target: &BeadId, dep_type: &str) -> Command {
    Command::DepAdd(crate::command::DepAdd {
        issue_id: issue.clone(),
        depends_on_id: target.clone(),
        dep_type: DepType(dep_type.into()),
    })
}

#[test]
fn a_read_counts_the_blocks_edges_of_beads_that_point_at_a_bead() {
    let mut harness = Harness::new();
    let blocker = harness.create("blocker");
    let waiting = harness.create_with(waits_for("waits", &blocker));
    let related = harness.create("related");
    harness.apply(dep_add(&related, &blocker, "related")).unwrap();
    harness.create_child("child", &blocker);
    harness.apply(dep_add(&BeadId::from("other-rig-9"), &blocker, DepType::BLOCKS)).unwrap();
    assert_eq!(
        listed_counts(&harness, &blocker).dependents,
        1,
        "bd counts `blocks` edges of beads: not a related edge, a child, or an edge from an id that is no bead"
    );
    assert_eq!(harness.get(&blocker).counts.dependents, 1, "every read answers the counts");
    let ready =
        beads_of(harness.query(Query::from(Ready { filter: ReadyFilter::default(), now: Timestamp(harness.now) })));
    assert_eq!(ready.iter().find(|bead| bead.id == blocker).map(|bead| bead.counts.dependents), Some(1));

    let third = harness.create_with(waits_for("also waits", &blocker));
    assert_eq!(listed_counts(&harness, &blocker).dependents, 2);
    harness.apply(dep_add(&third, &blocker, "related")).unwrap();
    assert_eq!(listed_counts(&harness, &blocker).dependents, 1, "an edge retyped to related no longer counts");
    let removed =
        Command::DepRemove(crate::command::DepRemove { issue_id: waiting.clone(), depends_on_id: blocker.clone() });
    harness.apply(removed).unwrap();
    assert_eq!(listed_counts(&harness, &blocker).dependents, 0);
    harness.apply(dep_add(&waiting, &blocker, DepType::BLOCKS)).unwrap();
    assert_eq!(listed_counts(&harness, &blocker).dependents, 1);
    harness.apply(Command::Delete(crate::command::Delete { id: waiting.clone() })).unwrap();
    assert_eq!(listed_counts(&harness, &blocker).dependents, 0, "a deleted dependent no longer counts");
    assert_eq!(listed_counts(&harness, &third).dependents, 0);
}

#[test]
fn a_read_counts_the_comment_lines_of_the_notes() {
    assert_eq!(comment_count(""), 0);
    assert_eq!(comment_count("[comment] a: x\nplain: note\n[comment] b: two\nlines\n  [comment] indented"), 2);

    let mut harness = Harness::new();
    let create = CreateBead { title: "noted".into(), notes: "root cause: a race".into(), ..Default::default() };
    let bead_id = harness.create_with(create);
    let append = |text: String| {
        Command::Update(UpdateBead { id: bead_id.clone(), append_notes: Some(text), ..Default::default() })
    };
    assert_eq!(listed_counts(&harness, &bead_id).comments, 0, "a note is no comment");
    harness.apply(append(format!("{COMMENT_MARK}alice: looked into it"))).unwrap();
    harness.apply(append("fixed in abc123".into())).unwrap();
    harness.apply(append(format!("{COMMENT_MARK}bob: two\nlines"))).unwrap();
    assert_eq!(listed_counts(&harness, &bead_id).comments, 2);
    let answer = bead_of(harness.apply(append(format!("{COMMENT_MARK}carol: three"))));
    assert_eq!(answer.counts, BeadCounts::default(), "a command's answer carries no counts");
    assert_eq!(harness.get(&bead_id).counts, BeadCounts { dependents: 0, comments: 3 });
    let replaced = UpdateBead { id: bead_id.clone(), notes: Some(String::new()), ..Default::default() };
    harness.apply(Command::Update(replaced)).unwrap();
    assert_eq!(listed_counts(&harness, &bead_id).comments, 0, "notes replaced are counted again");
}

#[test]
fn counts_are_never_held_by_a_stored_bead_even_when_an_import_brings_some() {
    let mut harness = Harness::new();
    let mut bead = CreateBead { title: "imported".into(), ..Default::default() }.into_bead(BeadId::from("gc-1"));
    bead.created_at = Timestamp(10);
    bead.counts = BeadCounts { dependents: 7, comments: 7 };
    harness.apply(Command::Import(crate::command::Import { beads: vec![bead] })).unwrap();
    let waiting = harness.create_with(waits_for("waits", &BeadId::from("gc-1")));
    let held = |harness: &Harness, bead_id: &BeadId| {
        let namespace = harness.state.namespaces.get(&harness.namespace).expect("the namespace");
        namespace.bead(bead_id).ok().map(|bead| bead.counts).expect("the bead")
    };
    assert_eq!(held(&harness, &BeadId::from("gc-1")), BeadCounts::default());
    assert_eq!(held(&harness, &waiting), BeadCounts::default());
    assert_eq!(harness.get(&BeadId::from("gc-1")).counts, BeadCounts { dependents: 1, comments: 0 });
    // A reloaded replica rebuilds the same counts from the records, which carry none.
    let reloaded = State::from_records(harness.state.records()).expect("records reload");
    let read = reloaded.query(&harness.namespace, &Query::from(Get { ids: vec![BeadId::from("gc-1")] }));
    assert_eq!(beads_of(read)[0].counts, BeadCounts { dependents: 1, comments: 0 });
}
