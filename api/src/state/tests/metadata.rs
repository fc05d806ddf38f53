//! Gas City's metadata conformance (`internal/beads/beadstest/conformance.go`,
//! `metadata_cas_conformance.go`, `conditional_writer_conformance.go` and
//! `metadata_empty_clear_conformance_test.go` at commit ed267ad6), asserted on the state machine:
//! what a create echoes is what a read returns, an empty value is present, a batch merges and may
//! clear one key while setting another, an update overlays, a metadata filter is ANDed with the
//! others, every write moves the revision and no read does, and a compare-and-set built on
//! `--if-revision` admits exactly one of several racers.

use super::*;
use crate::commands::children::Children;
use crate::commands::list::List;

fn entries(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
    pairs.iter().map(|(key, value)| (key.to_string(), value.map(str::to_string))).collect()
}

fn metadata_of(harness: &Harness, bead_id: &BeadId) -> BTreeMap<String, String> {
    harness.get(bead_id).metadata
}

#[test]
fn create_echo_absent_versus_empty_batches_and_overlays_follow_gas_city() {
    let mut harness = Harness::new();
    let session: BTreeMap<String, String> =
        [("session_name", "polecat-1"), ("state", "start_pending"), ("alias", "pc-1"), ("pool_slot", "3")]
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
    let echo = bead_of(harness.apply(Command::Create(CreateBead {
        title: "session".into(),
        bead_type: "gc:session".into(),
        metadata: session.clone(),
        ..Default::default()
    })));
    assert_eq!(echo.metadata, session, "CreateEchoMatchesGetOnMetadata: the echo holds every key");
    assert_eq!(metadata_of(&harness, &echo.id), echo.metadata, "and a read returns the echo");
    let set = |id: &BeadId, pairs: &[(&str, Option<&str>)]| {
        Command::SetMetadata(crate::command::SetMetadata { id: id.clone(), entries: entries(pairs) })
    };

    harness.apply(set(&echo.id, &[("key", Some(""))])).unwrap();
    let read = metadata_of(&harness, &echo.id);
    assert_eq!(read.get("key").map(String::as_str), Some(""), "MetadataAbsentVsEmpty: empty is present");
    assert!(!read.contains_key("nonexistent"));

    harness
        .apply(set(&echo.id, &[("key1", Some("value1")), ("key2", Some("value2")), ("key3", Some("value3"))]))
        .unwrap();
    let read = metadata_of(&harness, &echo.id);
    assert_eq!((read["key1"].as_str(), read["key3"].as_str()), ("value1", "value3"), "SetMetadataBatch");
    assert_eq!(read["session_name"], "polecat-1", "a batch merges");
    let missing = harness.apply(set(&BeadId::from("st-999"), &[("k", Some("v"))]));
    assert_eq!(missing, Err(Refusal::NotFound(BeadId::from("st-999"))), "SetMetadataBatchNotFound");

    harness.apply(set(&echo.id, &[("state", Some("asleep")), ("alias", Some(""))])).unwrap();
    let read = metadata_of(&harness, &echo.id);
    assert_eq!((read["state"].as_str(), read["alias"].as_str()), ("asleep", ""), "BatchClearsOneKeyKeepsAnother");

    let overlay =
        UpdateBead { id: echo.id.clone(), metadata: entries(&[("state", Some("running"))]), ..Default::default() };
    harness.apply(Command::Update(overlay)).unwrap();
    let read = metadata_of(&harness, &echo.id);
    assert_eq!((read["state"].as_str(), read["session_name"].as_str()), ("running", "polecat-1"), "an update overlays");
    let clear = UpdateBead { id: echo.id.clone(), metadata: entries(&[("state", Some(""))]), ..Default::default() };
    harness.apply(Command::Update(clear)).unwrap();
    assert_eq!(metadata_of(&harness, &echo.id)["state"], "", "an empty value clears what reads back");
}

#[test]
fn a_metadata_filter_is_anded_with_type_label_and_parent() {
    let mut harness = Harness::new();
    let scoped = |title: &str, bead_type: &str, label: &str, parent: Option<&BeadId>, scope: &str| CreateBead {
        title: title.into(),
        bead_type: bead_type.into(),
        labels: [label.to_string()].into(),
        parent_id: parent.cloned(),
        metadata: [("scope".to_string(), scope.to_string())].into(),
        ..Default::default()
    };
    let parent = harness.create_with(scoped("parent", "epic", "root", None, "a"));
    let wanted = harness.create_with(scoped("match", "task", "focus", Some(&parent), "a"));
    harness.create_with(scoped("wrong-parent", "task", "focus", None, "a"));
    harness.create_with(scoped("wrong-metadata", "task", "focus", Some(&parent), "b"));
    let filter = ListFilter {
        bead_type: Some("task".into()),
        labels_all: vec!["focus".into()],
        parent: Some(parent),
        metadata_equals: vec![("scope".into(), "a".into())],
        all: true,
        ..Default::default()
    };
    let found: Vec<BeadId> =
        beads_of(harness.query(Query::from(List(filter)))).into_iter().map(|bead| bead.id).collect();
    assert_eq!(found, vec![wanted], "ListFiltersByQueryFields");
}

#[test]
fn every_write_moves_the_revision_no_read_does_and_a_revision_cas_admits_one_racer() {
    let mut harness = Harness::new();
    let bead_id = harness.create("lease");
    let mut last = harness.get(&bead_id).revision;
    let writes = [
        Command::Update(UpdateBead {
            id: bead_id.clone(),
            metadata: entries(&[("mo", Some("1"))]),
            ..Default::default()
        }),
        Command::SetMetadata(crate::command::SetMetadata {
            id: bead_id.clone(),
            entries: entries(&[("k", Some("v"))]),
        }),
        Command::SetMetadata(crate::command::SetMetadata {
            id: bead_id.clone(),
            entries: entries(&[("counter", Some("a"))]),
        }),
        Command::SetMetadata(crate::command::SetMetadata {
            id: bead_id.clone(),
            entries: entries(&[("counter", Some("b"))]),
        }),
    ];
    for write in writes {
        harness.apply(write).unwrap();
        let now = harness.get(&bead_id).revision;
        assert!(now > last, "every mutation moves the revision: {now} > {last}");
        last = now;
    }
    let _ = harness.query(Query::from(List(ListFilter { all: true, ..Default::default() })));
    let _ = harness.query(Query::from(Children { parent: bead_id.clone(), include_closed: true }));
    assert_eq!(harness.get(&bead_id).revision, last, "reads never move it");

    // CompareAndSetMetadataKey as Gas City's bd store does it: read, compare, write
    // `--set-metadata k=v --if-revision <read revision>`. Eight racers read the same revision.
    let racers: Vec<Command> = (0..8)
        .map(|racer| {
            let holder = format!("holder-{racer}");
            let write = Command::SetMetadata(crate::command::SetMetadata {
                id: bead_id.clone(),
                entries: entries(&[("lease", Some(&holder))]),
            });
            Command::Txn(Txn::conditional(bead_id.clone(), last, write))
        })
        .collect();
    let outcomes: Vec<Answer> = racers.into_iter().map(|racer| harness.apply(racer)).collect();
    assert_eq!(outcomes.iter().filter(|outcome| outcome.is_ok()).count(), 1, "exactly one racer wins");
    assert!(
        outcomes
            .iter()
            .filter(|outcome| outcome.is_err())
            .all(|outcome| matches!(outcome, Err(Refusal::RevisionMismatch { .. }))),
        "every loser is told the revision moved"
    );
    assert_eq!(metadata_of(&harness, &bead_id)["lease"], "holder-0", "the stored value is the winner's");
    assert_eq!(metadata_of(&harness, &bead_id)["k"], "v", "a CAS leaves sibling keys alone");
}
