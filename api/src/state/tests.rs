//! State-machine tests: one `Harness` that applies commands like the log would, the twelve store
//! invariants of docs/beads.md §2 each under its own name, then table tests per command.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::*;
use crate::command::*;
use crate::commands::children::Children;
use crate::commands::dep_list::DepList;
use crate::commands::get::Get;
use crate::commands::list::List;
use crate::commands::list_by_label::ListByLabel;
use crate::commands::order_list::OrderList;
use crate::commands::ready::Ready;
use crate::model::*;
use crate::outcome::Outcome;

/// The cache of cold beads of the harness: a few beads, so reads go both to it and to the disk.
const HARNESS_CACHE_BYTES: u64 = 4096;

/// The harness's disk: every record as written, behind a lock the state's cold store reads, and
/// the index entries of closed beads ([`closed_index`]).
#[derive(Clone, Default)]
struct MemoryRecords(Arc<std::sync::Mutex<BTreeMap<RecordKey, Record>>>, Arc<std::sync::Mutex<BTreeSet<Vec<u8>>>>);

impl BeadSource for MemoryRecords {
    fn index_keys(&self, from: &[u8], to: &[u8], reverse: bool, limit: usize) -> Result<Vec<Vec<u8>>, String> {
        let index = self.1.lock().expect("harness index lock");
        if from >= to {
            return Ok(Vec::new());
        }
        let range = index.range(from.to_vec()..to.to_vec());
        Ok(if reverse { range.rev().take(limit).cloned().collect() } else { range.take(limit).cloned().collect() })
    }

    fn read_bead(&self, namespace: &Namespace, id: &BeadId) -> Result<Option<(Bead, u64)>, String> {
        let disk = self.0.lock().expect("harness disk lock");
        match disk.get(&RecordKey::Bead(namespace.clone(), id.clone())) {
            Some(Record::Bead(bead)) => Ok(Some(((**bead).clone(), 100))),
            Some(other) => Err(format!("bead {id} holds {other:?}")),
            None => Ok(None),
        }
    }
}

/// A state machine under test, checking after every apply that a reload gives the same state;
/// shared with the tests of registered commands (`crate::commands`).
pub(crate) struct Harness {
    pub(crate) state: State,
    /// The records as the storage layer holds them, which the state reads closed beads back from.
    disk: MemoryRecords,
    pub(crate) now: i64,
    pub(crate) namespace: Namespace,
    pub(crate) actor: Actor,
    event_retention: u64,
    credential: Option<crate::auth::TokenHash>,
}

impl Harness {
    pub(crate) fn new() -> Harness {
        let disk = MemoryRecords::default();
        let mut state = State::new();
        state.attach_cold_store(ColdStore::new(Arc::new(disk.clone()), HARNESS_CACHE_BYTES));
        Harness {
            state,
            disk,
            now: 1_000,
            namespace: Namespace::default_namespace(),
            actor: Actor("tester".into()),
            event_retention: crate::limits::EVENT_RETENTION_DEFAULT,
            credential: None,
        }
    }

    fn apply_with(&mut self, request_id: Option<RequestId>, command: Command) -> Answer {
        self.now += 1;
        let proposal = Proposal {
            request_id,
            timestamp: Timestamp(self.now),
            default_prefix: "st".into(),
            namespace: self.namespace.clone(),
            actor: self.actor.clone(),
            event_retention: self.event_retention,
            credential: self.credential,
            command,
        };
        let answer = self.state.apply(self.now as u64, &proposal);
        self.check_persistence();
        answer
    }

    /// Every apply is followed by a persist, after which closed beads leave memory; the records
    /// the state reads (cold beads from the disk) must be those on the disk, and reloading them
    /// with every bead in memory must give the same state.
    fn check_persistence(&mut self) {
        let keys = self.state.take_changed_keys();
        let changes: Vec<(RecordKey, Option<Record>)> = self
            .state
            .changed_records(&keys)
            .map(|(key, record)| (key.clone(), record.map(RecordRef::to_record)))
            .collect();
        let index_writes: Vec<closed_index::IndexWrite> = self.state.closed_index_writes(&keys).collect();
        {
            let mut disk = self.disk.0.lock().expect("harness disk lock");
            for (key, record) in changes {
                match record {
                    Some(record) => disk.insert(key, record),
                    None => disk.remove(&key),
                };
            }
            let mut index = self.disk.1.lock().expect("harness index lock");
            for write in index_writes {
                match write {
                    closed_index::IndexWrite::Put(key) => index.insert(key),
                    closed_index::IndexWrite::Delete(key) => index.remove(&key),
                    closed_index::IndexWrite::DeleteRange(from, to) => {
                        index.retain(|key| *key < from || *key >= to);
                        true
                    }
                };
            }
            let rebuilt: BTreeSet<Vec<u8>> = disk
                .iter()
                .filter_map(|(key, record)| match (key, record) {
                    (RecordKey::Bead(namespace, _), Record::Bead(bead)) if bead.status == Status::Closed => {
                        Some(closed_index::entries(namespace, bead))
                    }
                    _ => None,
                })
                .flatten()
                .collect();
            assert_eq!(
                *index, rebuilt,
                "the closed beads' index entries on disk are those of the closed beads written"
            );
        }
        self.state.records_written(&keys);
        let records = self.state.records();
        let beads = |records: &mut dyn Iterator<Item = (&RecordKey, &Record)>| -> BTreeMap<RecordKey, Record> {
            records.filter(|(key, _)| matches!(key, RecordKey::Bead(..))).map(|(k, r)| (k.clone(), r.clone())).collect()
        };
        let on_disk = beads(&mut self.disk.0.lock().expect("harness disk lock").iter());
        assert_eq!(beads(&mut records.iter().map(|(k, r)| (k, r))), on_disk, "the state's beads are the disk's");
        let reloaded = State::from_records(records).expect("records reload");
        assert_eq!(reloaded.digest(), self.state.digest());
        for (namespace, namespace_state) in &self.state.namespaces {
            let open = namespace_state.len() - namespace_state.count_with_status(Status::Closed);
            assert_eq!(namespace_state.held_count(), open, "every closed bead written is kept on disk alone");
            let rebuilt = reloaded.namespaces.get(namespace).map(|reloaded| &reloaded.indexes().open_children);
            assert_eq!(rebuilt, Some(&namespace_state.indexes().open_children), "open-children counts match a rebuild");
            let rebuilt = reloaded.namespaces.get(namespace).map(|reloaded| &reloaded.indexes().closed_ephemeral);
            assert_eq!(rebuilt, Some(&namespace_state.indexes().closed_ephemeral), "closed wisps match a rebuild");
            let rebuilt = reloaded.namespaces.get(namespace).map(|reloaded| &reloaded.indexes().leased);
            assert_eq!(rebuilt, Some(&namespace_state.indexes().leased), "leased beads match a rebuild");
            let rebuilt = reloaded.namespaces.get(namespace).map(|reloaded| &reloaded.indexes().blocks_dependents);
            assert_eq!(rebuilt, Some(&namespace_state.indexes().blocks_dependents), "dependent counts match a rebuild");
            let rebuilt = reloaded.namespaces.get(namespace).map(|reloaded| &reloaded.indexes().blocked);
            assert_eq!(rebuilt, Some(&namespace_state.indexes().blocked), "blocked beads match a rebuild");
        }
        assert_eq!(reloaded.controller_term(), self.state.controller_term(), "the controller's term is kept");
        let ready = |state: &State| {
            let filter = ReadyFilter { limit: 0, include_ephemeral: true, ..Default::default() };
            state.query(&self.namespace, &Query::from(Ready { filter, now: Timestamp(i64::MAX) }))
        };
        assert_eq!(ready(&reloaded), ready(&self.state), "a reloaded replica has the same ready set");
        // Listings walk cold beads' entries on disk merged with the memory indexes; a replica
        // that holds every bead in memory must list the same, in both orders.
        let list = |state: &State, filter: &crate::input::ListFilter| {
            state.query(&self.namespace, &Query::from(List(filter.clone())))
        };
        for sort in [crate::input::ListSort::CreatedDesc, crate::input::ListSort::CreatedAsc] {
            let every = crate::input::ListFilter { all: true, limit: 0, sort, ..Default::default() };
            let closed = crate::input::ListFilter { statuses: vec![Status::Closed, Status::Open], ..every.clone() };
            for filter in [every, closed] {
                assert_eq!(list(&reloaded, &filter), list(&self.state, &filter), "a reloaded replica lists the same");
            }
        }
        let formulas = |state: &State| state.query(&self.namespace, &crate::commands::formula_list::FormulaList.into());
        assert_eq!(formulas(&reloaded), formulas(&self.state), "a reloaded replica parsed the same formulas");
        let orders = |state: &State| state.query(&self.namespace, &Query::from(OrderList { now: Timestamp(self.now) }));
        assert_eq!(orders(&reloaded), orders(&self.state), "a reloaded replica has the same orders and firings");
        let tokens = |state: &State| state.query(&self.namespace, &Query::Tokens);
        assert_eq!(tokens(&reloaded), tokens(&self.state), "a reloaded replica has the same auth and tokens");
    }

    pub(crate) fn apply(&mut self, command: Command) -> Answer {
        self.apply_with(None, command)
    }

    pub(crate) fn query(&self, query: Query) -> Answer {
        self.state.query(&self.namespace, &query)
    }

    pub(crate) fn create(&mut self, title: &str) -> BeadId {
        self.create_with(CreateBead { title: title.into(), ..Default::default() })
    }

    pub(crate) fn create_with(&mut self, create: CreateBead) -> BeadId {
        bead_of(self.apply(Command::Create(create))).id
    }

    fn create_child(&mut self, title: &str, parent: &BeadId) -> BeadId {
        self.create_with(CreateBead { title: title.into(), parent_id: Some(parent.clone()), ..Default::default() })
    }

    pub(crate) fn get(&self, bead_id: &BeadId) -> Bead {
        beads_of(self.query(Query::from(Get { ids: vec![bead_id.clone()] }))).remove(0)
    }

    fn ready(&self, filter: ReadyFilter) -> Vec<BeadId> {
        let answer = self.query(Query::from(Ready { filter, now: Timestamp(self.now) }));
        beads_of(answer).into_iter().map(|bead| bead.id).collect()
    }

    pub(crate) fn ready_all(&self) -> Vec<BeadId> {
        self.ready(ReadyFilter { limit: 0, ..Default::default() })
    }

    pub(crate) fn claim(&mut self, bead_id: &BeadId, actor: &str) -> Answer {
        self.apply(Command::Claim(crate::command::Claim {
            id: bead_id.clone(),
            actor: Actor(actor.into()),
            lease_ms: None,
        }))
    }

    pub(crate) fn close(&mut self, bead_id: &BeadId) -> Answer {
        self.apply(Command::Close(crate::command::Close { ids: vec![bead_id.clone()], reason: None }))
    }
}

/// The state's beads and namespaces (the clock and dedup table move on every apply).
fn content(state: &State) -> String {
    let records: Vec<_> = state
        .records()
        .into_iter()
        .filter(|(key, _)| matches!(key, RecordKey::Bead(..) | RecordKey::Namespace(_)))
        .collect();
    format!("{records:?}")
}

pub(crate) fn bead_of(answer: Answer) -> Bead {
    match answer {
        Ok(Outcome::Bead(bead)) => *bead,
        other => panic!("expected one bead, got {other:?}"),
    }
}

fn beads_of(answer: Answer) -> Vec<Bead> {
    match answer {
        Ok(Outcome::Beads(beads)) => beads,
        other => panic!("expected beads, got {other:?}"),
    }
}

fn ids(names: &[&BeadId]) -> Vec<BeadId> {
    names.iter().map(|bead_id| (*bead_id).clone()).collect()
}

fn labels(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|name| name.to_string()).collect()
}

// ---- The twelve store invariants of docs/beads.md §2 ----

#[test]
fn invariant_01_create_assigns_unique_nonempty_ids() {
    let mut harness = Harness::new();
    let created: BTreeSet<BeadId> = (0..200).map(|n| harness.create(&format!("bead {n}"))).collect();
    assert_eq!(created.len(), 200);
    assert!(created.iter().all(|bead_id| !bead_id.0.is_empty() && bead_id.0.starts_with("st-")));
}

#[test]
fn invariant_02_create_always_yields_open() {
    let mut harness = Harness::new();
    let bead_id = harness.create_with(CreateBead {
        title: "t".into(),
        requested_status: Some(Status::Closed),
        ..Default::default()
    });
    assert_eq!(harness.get(&bead_id).status, Status::Open);
}

#[test]
fn invariant_03_create_defaults_type_to_task_and_keeps_explicit() {
    let mut harness = Harness::new();
    let default = harness.create("a");
    let explicit = harness.create_with(CreateBead { title: "b".into(), bead_type: "bug".into(), ..Default::default() });
    assert_eq!(harness.get(&default).bead_type, "task");
    assert_eq!(harness.get(&explicit).bead_type, "bug");
}

#[test]
fn invariant_04_create_stamps_created_at_with_proposal_time() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    let bead = harness.get(&bead_id);
    assert_eq!(bead.created_at, Timestamp(harness.now));
    assert_eq!(bead.updated_at, bead.created_at);
}

#[test]
fn invariant_05_get_of_missing_id_is_not_found() {
    let harness = Harness::new();
    let answer = harness.query(Query::from(Get { ids: vec!["st-404".into()] }));
    assert_eq!(answer, Err(Refusal::NotFound("st-404".into())));
    assert!(answer.unwrap_err().to_string().contains("not found"));
}

#[test]
fn invariant_06_close_is_idempotent() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    let first = beads_of(harness.close(&bead_id)).remove(0);
    let second = beads_of(harness.close(&bead_id)).remove(0);
    assert_eq!(first.status, Status::Closed);
    assert_eq!(second.status, Status::Closed);
    assert_eq!(first.closed_at, second.closed_at, "a second close changes nothing");
}

#[test]
fn invariant_07_closed_bead_never_ready() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    assert_eq!(harness.ready_all(), ids(&[&bead_id]));
    harness.close(&bead_id).unwrap();
    assert!(harness.ready_all().is_empty());
}

#[test]
fn invariant_08_empty_update_changes_nothing() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    let before = harness.get(&bead_id);
    let after = bead_of(harness.apply(Command::Update(UpdateBead { id: bead_id.clone(), ..Default::default() })));
    assert_eq!(before, after);
    assert_eq!(before, harness.get(&bead_id));
}

#[test]
fn invariant_09_update_labels_add_and_remove_labels_removes() {
    let mut harness = Harness::new();
    let bead_id = harness.create_with(CreateBead { title: "a".into(), labels: labels(&["x"]), ..Default::default() });
    let update = UpdateBead { id: bead_id.clone(), add_labels: labels(&["y"]), ..Default::default() };
    assert_eq!(bead_of(harness.apply(Command::Update(update))).labels, labels(&["x", "y"]));
    let update = UpdateBead { id: bead_id.clone(), remove_labels: labels(&["x"]), ..Default::default() };
    assert_eq!(bead_of(harness.apply(Command::Update(update))).labels, labels(&["y"]));
}

#[test]
fn invariant_10_children_are_exactly_the_beads_with_that_parent() {
    let mut harness = Harness::new();
    let parent = harness.create("parent");
    let other = harness.create("other");
    let child_a = harness.create_child("a", &parent);
    let child_b = harness.create_child("b", &parent);
    harness.create_child("c", &other);
    let children = beads_of(harness.query(Query::from(Children { parent, include_closed: true })));
    assert_eq!(children.into_iter().map(|bead| bead.id).collect::<Vec<_>>(), vec![child_a, child_b]);
}

#[test]
fn invariant_11_list_by_label_exact_unlimited_newest_first() {
    let mut harness = Harness::new();
    let first =
        harness.create_with(CreateBead { title: "a".into(), labels: labels(&["pool:web"]), ..Default::default() });
    harness.create_with(CreateBead { title: "b".into(), labels: labels(&["pool:web-2"]), ..Default::default() });
    let second =
        harness.create_with(CreateBead { title: "c".into(), labels: labels(&["pool:web"]), ..Default::default() });
    let listed = beads_of(harness.query(Query::from(ListByLabel { label: "pool:web".into(), limit: 0 })));
    assert_eq!(listed.into_iter().map(|bead| bead.id).collect::<Vec<_>>(), vec![second.clone(), first]);
    let limited = beads_of(harness.query(Query::from(ListByLabel { label: "pool:web".into(), limit: 1 })));
    assert_eq!(limited.into_iter().map(|bead| bead.id).collect::<Vec<_>>(), vec![second]);
    assert!(beads_of(harness.query(Query::from(ListByLabel { label: "pool".into(), limit: 0 }))).is_empty());
}

#[test]
fn invariant_12_container_types_are_case_sensitive() {
    assert!(is_container_type("convoy"));
    assert!(!is_container_type("CONVOY"));
    let mut harness = Harness::new();
    let bead_id =
        harness.create_with(CreateBead { title: "a".into(), bead_type: "CONVOY".into(), ..Default::default() });
    assert_eq!(harness.get(&bead_id).bead_type, "CONVOY");
}

// ---- Claim (docs/beads.md §3) ----

#[test]
fn claim_table() {
    struct Case {
        name: &'static str,
        setup: fn(&mut Harness, &BeadId),
        actor: &'static str,
        expect: fn(&BeadId, Answer),
    }
    let cases = [
        Case {
            name: "open and unassigned is claimed",
            setup: |_, _| {},
            actor: "alice",
            expect: |_, answer| {
                let bead = bead_of(answer);
                assert_eq!((bead.status, bead.assignee.as_str()), (Status::InProgress, "alice"));
                assert!(bead.started_at.is_some());
            },
        },
        Case {
            name: "claiming again by the holder succeeds",
            setup: |harness, bead_id| {
                harness.claim(bead_id, "alice").unwrap();
            },
            actor: "alice",
            expect: |_, answer| assert_eq!(bead_of(answer).assignee, "alice"),
        },
        Case {
            name: "held by another actor",
            setup: |harness, bead_id| {
                harness.claim(bead_id, "bob").unwrap();
            },
            actor: "alice",
            expect: |bead_id, answer| {
                let refusal = answer.unwrap_err();
                assert_eq!(refusal, Refusal::AlreadyClaimed { id: bead_id.clone(), holder: "bob".into() });
                assert!(refusal.to_string().contains("already claimed by bob"));
            },
        },
        Case {
            name: "open but assigned to another actor",
            setup: |harness, bead_id| {
                let update = UpdateBead { id: bead_id.clone(), assignee: Some("bob".into()), ..Default::default() };
                harness.apply(Command::Update(update)).unwrap();
            },
            actor: "alice",
            expect: |_, answer| assert!(matches!(answer, Err(Refusal::AlreadyClaimed { .. }))),
        },
        Case {
            name: "open and assigned to the claimer",
            setup: |harness, bead_id| {
                let update = UpdateBead { id: bead_id.clone(), assignee: Some("alice".into()), ..Default::default() };
                harness.apply(Command::Update(update)).unwrap();
            },
            actor: "alice",
            expect: |_, answer| assert_eq!(bead_of(answer).status, Status::InProgress),
        },
        Case {
            name: "closed is not claimable",
            setup: |harness, bead_id| {
                harness.close(bead_id).unwrap();
            },
            actor: "alice",
            expect: |bead_id, answer| {
                let refusal = answer.unwrap_err();
                assert_eq!(refusal, Refusal::NotClaimable { id: bead_id.clone(), status: Status::Closed });
                assert!(refusal.to_string().contains("not claimable (status closed)"));
            },
        },
        Case {
            name: "deferred is not claimable",
            setup: |harness, bead_id| {
                let update = UpdateBead { id: bead_id.clone(), status: Some(Status::Deferred), ..Default::default() };
                harness.apply(Command::Update(update)).unwrap();
            },
            actor: "alice",
            expect: |_, answer| assert!(matches!(answer, Err(Refusal::NotClaimable { status: Status::Deferred, .. }))),
        },
    ];
    for case in cases {
        let mut harness = Harness::new();
        let bead_id = harness.create("work");
        (case.setup)(&mut harness, &bead_id);
        let before = content(&harness.state);
        let answer = harness.claim(&bead_id, case.actor);
        if answer.is_err() {
            assert_eq!(before, content(&harness.state), "refused claim changed state: {}", case.name);
        }
        (case.expect)(&bead_id, answer);
    }
}

#[test]
fn claim_of_missing_bead_is_not_found() {
    let mut harness = Harness::new();
    assert_eq!(harness.claim(&"st-9".into(), "alice"), Err(Refusal::NotFound("st-9".into())));
}

#[test]
fn claim_next_takes_first_ready_in_order_and_skips_held() {
    let mut harness = Harness::new();
    let low = harness.create_with(CreateBead { title: "low".into(), priority: Some(3), ..Default::default() });
    let high = harness.create_with(CreateBead { title: "high".into(), priority: Some(0), ..Default::default() });
    let unset = harness.create("unset");
    let next = |harness: &mut Harness, actor: &str| {
        let command = Command::ClaimNext(crate::command::ClaimNext {
            actor: Actor(actor.into()),
            filter: ReadyFilter::default(),
            lease_ms: None,
        });
        beads_of(harness.apply(command)).into_iter().map(|bead| bead.id).collect::<Vec<_>>()
    };
    assert_eq!(next(&mut harness, "a"), vec![high]);
    assert_eq!(next(&mut harness, "b"), vec![low]);
    assert_eq!(next(&mut harness, "c"), vec![unset]);
    assert!(next(&mut harness, "d").is_empty());
}

#[test]
fn claim_next_skips_beads_assigned_to_others() {
    let mut harness = Harness::new();
    harness.create_with(CreateBead {
        title: "bob's".into(),
        assignee: "bob".into(),
        priority: Some(0),
        ..Default::default()
    });
    let free = harness.create("free");
    let command = Command::ClaimNext(crate::command::ClaimNext {
        actor: Actor("alice".into()),
        filter: ReadyFilter::default(),
        lease_ms: None,
    });
    assert_eq!(beads_of(harness.apply(command))[0].id, free);
}

// ---- Ready (docs/beads.md §4) ----

#[test]
fn ready_order_priority_then_created_then_id() {
    let mut harness = Harness::new();
    let unset = harness.create("unset");
    let p2 = harness.create_with(CreateBead { title: "p2".into(), priority: Some(2), ..Default::default() });
    let p0 = harness.create_with(CreateBead { title: "p0".into(), priority: Some(0), ..Default::default() });
    let p2_later = harness.create_with(CreateBead { title: "p2b".into(), priority: Some(2), ..Default::default() });
    assert_eq!(harness.ready_all(), ids(&[&p0, &p2, &p2_later, &unset]));
}

#[test]
fn ready_excludes_infrastructure_types_ephemeral_blocked_and_deferred() {
    let mut harness = Harness::new();
    let plain = harness.create("plain");
    for bead_type in INFRASTRUCTURE_TYPES {
        harness.create_with(CreateBead { title: "infra".into(), bead_type: bead_type.into(), ..Default::default() });
    }
    let wisp = harness.create_with(CreateBead { title: "wisp".into(), ephemeral: true, ..Default::default() });
    let later = Timestamp(harness.now + 1_000_000);
    harness.create_with(CreateBead { title: "deferred".into(), defer_until: Some(later), ..Default::default() });
    let blocker = harness.create("blocker");
    harness.create_with(CreateBead { title: "blocked".into(), needs: vec![blocker.0.clone()], ..Default::default() });
    assert_eq!(harness.ready_all(), ids(&[&plain, &blocker]));
    let with_wisps = harness.ready(ReadyFilter { include_ephemeral: true, limit: 0, ..Default::default() });
    assert_eq!(with_wisps, ids(&[&plain, &wisp, &blocker]));
}

#[test]
fn ready_becomes_ready_when_blocker_closes_and_blocked_again_on_reopen() {
    let mut harness = Harness::new();
    let blocker = harness.create("blocker");
    let waiting = harness.create("waiting");
    harness
        .apply(Command::DepAdd(crate::command::DepAdd {
            issue_id: waiting.clone(),
            depends_on_id: blocker.clone(),
            dep_type: DepType::blocks(),
        }))
        .unwrap();
    assert_eq!(harness.ready_all(), ids(&[&blocker]));
    harness.close(&blocker).unwrap();
    assert_eq!(harness.ready_all(), ids(&[&waiting]));
    harness.apply(Command::Reopen(crate::command::Reopen { id: blocker.clone() })).unwrap();
    assert_eq!(harness.ready_all(), ids(&[&blocker]));
}

#[test]
fn ready_child_of_blocked_parent_is_blocked() {
    let mut harness = Harness::new();
    let blocker = harness.create("blocker");
    let parent = harness.create_with(CreateBead {
        title: "parent".into(),
        needs: vec![blocker.0.clone()],
        ..Default::default()
    });
    let child = harness.create_child("child", &parent);
    let grandchild = harness.create_child("gc", &child);
    assert_eq!(harness.ready_all(), ids(&[&blocker]));
    harness.close(&blocker).unwrap();
    assert_eq!(harness.ready_all(), ids(&[&parent, &child, &grandchild]));
    let update = UpdateBead { id: parent.clone(), status: Some(Status::Blocked), ..Default::default() };
    harness.apply(Command::Update(update)).unwrap();
    assert!(harness.ready_all().is_empty());
}

#[test]
fn ready_waits_for_and_related_edges() {
    let mut harness = Harness::new();
    let gate = harness.create("gate");
    let waits = harness.create_with(CreateBead {
        title: "w".into(),
        needs: vec![format!("waits-for:{gate}")],
        ..Default::default()
    });
    let related = harness.create_with(CreateBead {
        title: "r".into(),
        needs: vec![format!("related:{gate}")],
        ..Default::default()
    });
    assert_eq!(harness.ready_all(), ids(&[&gate, &related]));
    harness.close(&gate).unwrap();
    assert_eq!(harness.ready_all(), ids(&[&waits, &related]));
}

#[test]
fn ready_filters_table() {
    let mut harness = Harness::new();
    let mut metadata = BTreeMap::new();
    metadata.insert("gc.routed_to".to_string(), "web".to_string());
    let routed = harness.create_with(CreateBead { title: "routed".into(), metadata, ..Default::default() });
    let alice = harness.create_with(CreateBead {
        title: "alice".into(),
        assignee: "alice".into(),
        labels: labels(&["a", "b"]),
        ..Default::default()
    });
    let bug = harness.create_with(CreateBead {
        title: "bug".into(),
        bead_type: "bug".into(),
        labels: labels(&["b"]),
        ..Default::default()
    });
    let parent =
        harness.create_with(CreateBead { title: "epic".into(), bead_type: "epic".into(), ..Default::default() });
    let child = harness.create_child("child", &parent);
    let grandchild = harness.create_child("gc", &child);
    let cases: Vec<(&str, ReadyFilter, Vec<BeadId>)> = vec![
        ("assignee", ReadyFilter { assignee: Some("alice".into()), ..Default::default() }, ids(&[&alice])),
        (
            "unassigned",
            ReadyFilter { unassigned: true, ..Default::default() },
            ids(&[&routed, &bug, &parent, &child, &grandchild]),
        ),
        ("label all", ReadyFilter { labels_all: vec!["a".into(), "b".into()], ..Default::default() }, ids(&[&alice])),
        (
            "label any",
            ReadyFilter { labels_any: vec!["a".into(), "b".into()], ..Default::default() },
            ids(&[&alice, &bug]),
        ),
        (
            "exclude label",
            ReadyFilter { exclude_labels: vec!["b".into()], ..Default::default() },
            ids(&[&routed, &parent, &child, &grandchild]),
        ),
        (
            "metadata field",
            ReadyFilter { metadata_equals: vec![("gc.routed_to".into(), "web".into())], ..Default::default() },
            ids(&[&routed]),
        ),
        (
            "has metadata key",
            ReadyFilter { metadata_has_keys: vec!["gc.routed_to".into()], ..Default::default() },
            ids(&[&routed]),
        ),
        (
            "parent recursive",
            ReadyFilter { parent: Some(parent.clone()), ..Default::default() },
            ids(&[&child, &grandchild]),
        ),
        ("type", ReadyFilter { types: vec!["bug".into()], ..Default::default() }, ids(&[&bug])),
        (
            "exclude type",
            ReadyFilter { exclude_types: vec!["task".into(), "epic".into()], ..Default::default() },
            ids(&[&bug]),
        ),
        ("limit", ReadyFilter { limit: 2, ..Default::default() }, ids(&[&routed, &alice])),
    ];
    for (name, filter, expected) in cases {
        assert_eq!(harness.ready(filter), expected, "filter {name}");
    }
}

// ---- Update, transitions, metadata ----

#[test]
fn update_invalid_transition_names_current_and_allowed() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    harness.close(&bead_id).unwrap();
    let update = UpdateBead { id: bead_id.clone(), status: Some(Status::InProgress), ..Default::default() };
    let refusal = harness.apply(Command::Update(update)).unwrap_err();
    let message = refusal.to_string();
    assert!(message.contains("from closed to in_progress"), "{message}");
    assert!(message.contains("allowed from closed: open"), "{message}");
    assert_eq!(harness.get(&bead_id).status, Status::Closed);
}

#[test]
fn transition_table_is_consistent() {
    for from in Status::ALL {
        assert!(from.can_become(from), "{from} to itself");
        assert!(!from.allowed_next().contains(&from), "{from} lists itself");
        if from != Status::Closed {
            assert!(from.can_become(Status::Closed), "{from} can close");
        }
    }
    assert_eq!(Status::Closed.allowed_next(), &[Status::Open]);
}

#[test]
fn update_with_claim_is_atomic() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    harness.claim(&bead_id, "bob").unwrap();
    let update = UpdateBead {
        id: bead_id.clone(),
        title: Some("new".into()),
        claim_for: Some(Actor("alice".into())),
        ..Default::default()
    };
    assert!(matches!(harness.apply(Command::Update(update)), Err(Refusal::AlreadyClaimed { .. })));
    assert_eq!(harness.get(&bead_id).title, "a", "a lost claim changes nothing");
}

#[test]
fn set_metadata_sets_keys_independently_and_batches_atomically() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    let set = |key: &str, value: Option<&str>| {
        Command::SetMetadata(crate::command::SetMetadata {
            id: bead_id.clone(),
            entries: [(key.to_string(), value.map(str::to_string))].into_iter().collect(),
        })
    };
    harness.apply(set("a", Some("1"))).unwrap();
    harness.apply(set("b", Some(""))).unwrap();
    let bead = harness.get(&bead_id);
    assert_eq!(bead.metadata.get("a").map(String::as_str), Some("1"));
    assert_eq!(bead.metadata.get("b").map(String::as_str), Some(""), "empty is not absent");
    harness.apply(set("a", None)).unwrap();
    assert!(!harness.get(&bead_id).metadata.contains_key("a"));
    let too_big = "x".repeat(crate::limits::METADATA_VALUE_BYTES_MAX + 1);
    let batch = Command::SetMetadata(crate::command::SetMetadata {
        id: bead_id.clone(),
        entries: [("c".to_string(), Some("ok".to_string())), ("d".to_string(), Some(too_big))].into_iter().collect(),
    });
    assert!(matches!(harness.apply(batch), Err(Refusal::TooLarge { .. })));
    assert!(!harness.get(&bead_id).metadata.contains_key("c"), "a refused batch sets no key");
    assert!(harness.apply(set("a", Some("1"))).is_ok());
    let missing = Command::SetMetadata(crate::command::SetMetadata {
        id: "st-99".into(),
        entries: [("a".to_string(), Some("1".to_string()))].into_iter().collect(),
    });
    assert_eq!(harness.apply(missing), Err(Refusal::NotFound("st-99".into())));
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let long = |n: usize| "x".repeat(n + 1);
    let cases: Vec<(&str, Command)> = vec![
        ("empty title", Command::Create(CreateBead { title: "  ".into(), ..Default::default() })),
        (
            "oversized title",
            Command::Create(CreateBead { title: long(crate::limits::TITLE_BYTES_MAX), ..Default::default() }),
        ),
        (
            "oversized description",
            Command::Create(CreateBead {
                title: "t".into(),
                description: long(crate::limits::DESCRIPTION_BYTES_MAX),
                ..Default::default()
            }),
        ),
        (
            "priority out of range",
            Command::Create(CreateBead { title: "t".into(), priority: Some(9), ..Default::default() }),
        ),
        (
            "unknown parent",
            Command::Create(CreateBead { title: "t".into(), parent_id: Some("st-404".into()), ..Default::default() }),
        ),
        (
            "update unknown",
            Command::Update(UpdateBead { id: "st-404".into(), title: Some("x".into()), ..Default::default() }),
        ),
        ("close unknown", Command::Close(crate::command::Close { ids: vec!["st-404".into()], reason: None })),
        ("delete unknown", Command::Delete(crate::command::Delete { id: "st-404".into() })),
        (
            "claim without actor",
            Command::Claim(crate::command::Claim { id: "st-1".into(), actor: Actor(String::new()), lease_ms: None }),
        ),
    ];
    for (name, command) in cases {
        let mut harness = Harness::new();
        harness.create("existing");
        let before = content(&harness.state);
        let refusal = harness.apply(command).expect_err(name);
        assert!(!refusal.to_string().is_empty());
        assert_eq!(before, content(&harness.state), "{name} changed state");
    }
}

#[test]
fn child_takes_parent_prefix_and_namespaces_are_isolated() {
    let mut harness = Harness::new();
    let parent = harness.create("p");
    let child = harness.create_child("c", &parent);
    assert_eq!(child.prefix(), "st");
    harness.namespace = Namespace("rig-a".into());
    assert_eq!(harness.query(Query::from(Get { ids: vec![parent.clone()] })), Err(Refusal::NotFound(parent)));
    let other = harness.create("other");
    assert_eq!(other.0, "st-1", "each namespace numbers its own ids");
}

// ---- Close, reopen, delete, list, deps ----

#[test]
fn close_many_with_reason_all_or_nothing() {
    let mut harness = Harness::new();
    let a = harness.create("a");
    let b = harness.create("b");
    assert!(
        harness
            .apply(Command::Close(crate::command::Close { ids: vec![a.clone(), "st-404".into()], reason: None }))
            .is_err()
    );
    assert_eq!(harness.get(&a).status, Status::Open);
    let closed =
        beads_of(harness.apply(Command::Close(crate::command::Close {
            ids: vec![a.clone(), b.clone()],
            reason: Some("done".into()),
        })));
    assert!(closed.iter().all(|bead| bead.status == Status::Closed && bead.close_reason.as_deref() == Some("done")));
}

#[test]
fn reopen_moves_any_status_back_to_open_as_bd_does_and_leaves_an_open_bead_alone() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    let revision = harness.get(&bead_id).revision;
    let bead = bead_of(harness.apply(Command::Reopen(crate::command::Reopen { id: bead_id.clone() })));
    assert_eq!((bead.status, bead.revision), (Status::Open, revision), "an open bead is not changed");
    harness.claim(&bead_id, "alice").unwrap();
    let bead = bead_of(harness.apply(Command::Reopen(crate::command::Reopen { id: bead_id.clone() })));
    assert_eq!(bead.status, Status::Open, "in_progress is reopened");
    harness
        .apply(Command::Update(UpdateBead { id: bead_id.clone(), assignee: Some(String::new()), ..Default::default() }))
        .unwrap();
    harness.close(&bead_id).unwrap();
    let bead = bead_of(harness.apply(Command::Reopen(crate::command::Reopen { id: bead_id.clone() })));
    assert_eq!((bead.status, bead.closed_at, bead.close_reason), (Status::Open, None, None));
    assert!(matches!(
        harness.apply(Command::Reopen(crate::command::Reopen { id: "st-404".into() })),
        Err(Refusal::NotFound(_))
    ));
}

/// Gas City's dependency conformance (`RunDepTests`): edges between ids that are not beads.
#[test]
fn edges_between_ids_that_are_not_beads_follow_gas_citys_dependency_conformance() {
    let mut harness = Harness::new();
    let dep_add = |harness: &mut Harness, from: &str, to: &str, dep_type: &str| {
        harness
            .apply(Command::DepAdd(crate::command::DepAdd {
                issue_id: from.into(),
                depends_on_id: to.into(),
                dep_type: DepType(dep_type.into()),
            }))
            .unwrap();
    };
    let dep_list = |harness: &Harness, id: &str, direction: DepDirection| match harness
        .query(Query::from(DepList { id: id.into(), direction }))
    {
        Ok(Outcome::Dependencies(rows)) => rows,
        other => panic!("expected rows, got {other:?}"),
    };
    dep_add(&mut harness, "a", "b", "blocks");
    dep_add(&mut harness, "a", "b", "blocks");
    assert_eq!(dep_list(&harness, "a", DepDirection::Down).len(), 1, "adding an edge again is idempotent");
    dep_add(&mut harness, "a", "b", "tracks");
    let rows = dep_list(&harness, "a", DepDirection::Down);
    assert_eq!((rows.len(), rows[0].dep_type.0.as_str()), (1, "tracks"), "adding with a new type re-types the edge");
    let up = dep_list(&harness, "b", DepDirection::Up);
    assert_eq!((up.len(), up[0].issue_id.0.as_str()), (1, "a"), "up lists the source");
    dep_add(&mut harness, "a", "c", "blocks");
    harness
        .apply(Command::DepRemove(crate::command::DepRemove { issue_id: "a".into(), depends_on_id: "b".into() }))
        .unwrap();
    let rows = dep_list(&harness, "a", DepDirection::Down);
    assert_eq!((rows.len(), rows[0].depends_on_id.0.as_str()), (1, "c"), "remove takes one edge");
    harness
        .apply(Command::DepRemove(crate::command::DepRemove { issue_id: "x".into(), depends_on_id: "y".into() }))
        .unwrap();
    assert!(dep_list(&harness, "nonexistent", DepDirection::Down).is_empty());
    // A bead with an edge to an id the namespace does not hold (another rig's) stays ready.
    let bead_id = harness.create("cross-rig");
    dep_add(&mut harness, &bead_id.0, "external:other-rig:or-7", "blocks");
    dep_add(&mut harness, &bead_id.0, "zz-9", "blocks");
    assert!(harness.ready_all().contains(&bead_id), "edges to ids that are not beads never block");
    // An id that holds edges is never allocated to a new bead, which would inherit them unasked;
    // the edges stay with the id (a bead imported or created under it with --id takes them over).
    dep_add(&mut harness, "st-2", &bead_id.0, "blocks");
    let next = harness.create("not st-2");
    assert_eq!(next.0, "st-3");
    assert!(harness.get(&next).depends_on.is_empty());
    assert_eq!(dep_list(&harness, "st-2", DepDirection::Down).len(), 1);
}

#[test]
fn delete_removes_bead_and_edges() {
    let mut harness = Harness::new();
    let blocker = harness.create("blocker");
    let waiting =
        harness.create_with(CreateBead { title: "w".into(), needs: vec![blocker.0.clone()], ..Default::default() });
    harness.apply(Command::Delete(crate::command::Delete { id: blocker.clone() })).unwrap();
    assert_eq!(harness.query(Query::from(Get { ids: vec![blocker.clone()] })), Err(Refusal::NotFound(blocker)));
    assert!(harness.get(&waiting).depends_on.is_empty());
    assert_eq!(harness.ready_all(), ids(&[&waiting]));
    let parent = harness.create("parent");
    let child = harness.create_child("child", &parent);
    harness.apply(Command::Delete(crate::command::Delete { id: parent.clone() })).unwrap();
    assert_eq!(harness.get(&child).parent_id, None, "children of a deleted bead become roots");
    assert!(beads_of(harness.query(Query::from(Children { parent, include_closed: true }))).is_empty());
}

#[test]
fn list_filters_sort_and_closed_handling() {
    let mut harness = Harness::new();
    let a = harness.create_with(CreateBead { title: "a".into(), assignee: "alice".into(), ..Default::default() });
    let b = harness.create_with(CreateBead { title: "b".into(), assignee: "alice".into(), ..Default::default() });
    let c = harness.create_with(CreateBead { title: "c".into(), assignee: "bob".into(), ..Default::default() });
    harness.close(&b).unwrap();
    let list = |harness: &Harness, filter: ListFilter| {
        beads_of(harness.query(Query::from(List(filter)))).into_iter().map(|bead| bead.id).collect::<Vec<_>>()
    };
    assert_eq!(harness.query(Query::from(List(ListFilter::default()))), Err(Refusal::UnfilteredList));
    assert_eq!(list(&harness, ListFilter { all: true, ..Default::default() }), ids(&[&c, &b, &a]));
    assert_eq!(list(&harness, ListFilter { assignee: Some("alice".into()), ..Default::default() }), ids(&[&a]));
    assert_eq!(
        list(
            &harness,
            ListFilter { assignee: Some("alice".into()), all: true, sort: ListSort::CreatedAsc, ..Default::default() }
        ),
        ids(&[&a, &b])
    );
    assert_eq!(list(&harness, ListFilter { statuses: vec![Status::Closed], ..Default::default() }), ids(&[&b]));
    assert_eq!(list(&harness, ListFilter { all: true, limit: 1, ..Default::default() }), ids(&[&c]));
}

#[test]
fn list_by_several_statuses_is_one_ordered_answer() {
    let mut harness = Harness::new();
    let mut made = Vec::new();
    for (title, status, assignee) in [
        ("open", Status::Open, "alice"),
        ("blocked", Status::Blocked, "bob"),
        ("working", Status::InProgress, "alice"),
        ("deferred", Status::Deferred, "alice"),
        ("closed", Status::Closed, "alice"),
        ("open again", Status::Open, "bob"),
    ] {
        let bead_id =
            harness.create_with(CreateBead { title: title.into(), assignee: assignee.into(), ..Default::default() });
        if status != Status::Open {
            let update = UpdateBead { id: bead_id.clone(), status: Some(status), ..Default::default() };
            harness.apply(Command::Update(update)).unwrap();
        }
        made.push(bead_id);
    }
    let [open, blocked, _working, deferred, closed, open_again] = &made[..] else { unreachable!() };
    let list = |filter: ListFilter| {
        beads_of(harness.query(Query::from(List(filter)))).into_iter().map(|bead| bead.id).collect::<Vec<_>>()
    };
    let folded_open = vec![Status::Open, Status::Blocked, Status::Deferred];
    let by = |sort, limit| ListFilter { statuses: folded_open.clone(), sort, limit, ..Default::default() };
    assert_eq!(list(by(ListSort::CreatedAsc, 0)), ids(&[open, blocked, deferred, open_again]));
    assert_eq!(list(by(ListSort::CreatedDesc, 0)), ids(&[open_again, deferred, blocked, open]));
    assert_eq!(list(by(ListSort::CreatedAsc, 2)), ids(&[open, blocked]));
    let repeated =
        ListFilter { statuses: vec![Status::Blocked, Status::Open, Status::Blocked], ..by(ListSort::CreatedAsc, 0) };
    assert_eq!(list(repeated), ids(&[open, blocked, open_again]), "a status named twice lists its beads once");
    let alice = ListFilter { assignee: Some("alice".into()), ..by(ListSort::CreatedAsc, 0) };
    assert_eq!(list(alice), ids(&[open, deferred]), "another filter's index narrows the statuses");
    let with_closed = ListFilter { statuses: vec![Status::Closed, Status::Blocked], ..Default::default() };
    assert_eq!(list(with_closed), ids(&[closed, blocked]), "naming closed lists closed beads");
}

#[test]
fn dep_add_idempotent_retype_remove_noop_and_cycles_refused() {
    let mut harness = Harness::new();
    let a = harness.create("a");
    let b = harness.create("b");
    let add = |dep_type: &str| {
        Command::DepAdd(crate::command::DepAdd {
            issue_id: a.clone(),
            depends_on_id: b.clone(),
            dep_type: DepType(dep_type.into()),
        })
    };
    harness.apply(add("blocks")).unwrap();
    harness.apply(add("blocks")).unwrap();
    harness.apply(add("related")).unwrap();
    let rows = |harness: &Harness, id: &BeadId, direction| match harness
        .query(Query::from(DepList { id: id.clone(), direction }))
    {
        Ok(Outcome::Dependencies(rows)) => rows,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        rows(&harness, &a, DepDirection::Down),
        vec![Dependency { issue_id: a.clone(), depends_on_id: b.clone(), dep_type: DepType("related".into()) }]
    );
    assert_eq!(rows(&harness, &b, DepDirection::Up).len(), 1);
    assert!(rows(&harness, &"st-404".into(), DepDirection::Down).is_empty());
    let cycle = Command::DepAdd(crate::command::DepAdd {
        issue_id: b.clone(),
        depends_on_id: a.clone(),
        dep_type: DepType::blocks(),
    });
    assert!(harness.apply(cycle).unwrap_err().to_string().contains("cycle"));
    harness
        .apply(Command::DepRemove(crate::command::DepRemove { issue_id: a.clone(), depends_on_id: b.clone() }))
        .unwrap();
    harness
        .apply(Command::DepRemove(crate::command::DepRemove { issue_id: a.clone(), depends_on_id: b.clone() }))
        .unwrap();
    assert!(rows(&harness, &a, DepDirection::Down).is_empty());
}

// ---- Exactly-once ----

#[test]
fn retried_request_is_applied_once_and_answered_the_same() {
    let mut harness = Harness::new();
    let request_id = RequestId { client_id: 7, request_seq: 1, lowest_unacked: 1 };
    let create = Command::Create(CreateBead { title: "once".into(), ..Default::default() });
    let first = harness.apply_with(Some(request_id), create.clone());
    let again = harness.apply_with(Some(request_id), create);
    assert_eq!(first, again);
    assert_eq!(harness.state.bead_count(), 1);
}

#[test]
fn retry_of_a_refused_request_is_refused_again() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    harness.claim(&bead_id, "bob").unwrap();
    let request_id = RequestId { client_id: 8, request_seq: 1, lowest_unacked: 1 };
    let claim =
        Command::Claim(crate::command::Claim { id: bead_id.clone(), actor: Actor("alice".into()), lease_ms: None });
    let first = harness.apply_with(Some(request_id), claim.clone());
    harness.close(&bead_id).unwrap();
    assert_eq!(first, harness.apply_with(Some(request_id), claim));
}

#[test]
fn acknowledged_requests_are_forgotten_and_not_reapplied() {
    let mut harness = Harness::new();
    let create = Command::Create(CreateBead { title: "a".into(), ..Default::default() });
    harness.apply_with(Some(RequestId { client_id: 9, request_seq: 1, lowest_unacked: 1 }), create.clone()).unwrap();
    harness.apply_with(Some(RequestId { client_id: 9, request_seq: 2, lowest_unacked: 2 }), create.clone()).unwrap();
    let stale = harness.apply_with(Some(RequestId { client_id: 9, request_seq: 1, lowest_unacked: 1 }), create);
    assert!(matches!(stale, Err(Refusal::RequestTooOld { .. })));
    assert_eq!(harness.state.bead_count(), 2);
}

#[test]
fn evicted_session_is_reported_not_reapplied() {
    let mut harness = Harness::new();
    let create = Command::Create(CreateBead { title: "a".into(), ..Default::default() });
    harness.apply_with(Some(RequestId { client_id: 10, request_seq: 1, lowest_unacked: 1 }), create.clone()).unwrap();
    harness.now += crate::limits::SESSION_IDLE_MS_MAX + 1;
    harness.create("tick");
    let retry = harness.apply_with(Some(RequestId { client_id: 10, request_seq: 2, lowest_unacked: 2 }), create);
    assert!(matches!(retry, Err(Refusal::SessionExpired { .. })));
    assert_eq!(harness.state.bead_count(), 2);
}

#[test]
fn clock_never_goes_backwards() {
    let mut harness = Harness::new();
    harness.now = 5_000;
    harness.create("a");
    harness.now = 100;
    let bead_id = harness.create("b");
    assert_eq!(harness.get(&bead_id).created_at, Timestamp(5_001));
}

#[test]
fn ready_limit_one_walks_one_entry_of_a_large_store() {
    let mut harness = Harness::new();
    for n in 0..5_000 {
        harness
            .state
            .apply(
                n as u64,
                &Proposal {
                    request_id: None,
                    timestamp: Timestamp(n),
                    default_prefix: "st".into(),
                    namespace: harness.namespace.clone(),
                    actor: Actor::default(),
                    event_retention: crate::limits::EVENT_RETENTION_DEFAULT,
                    credential: None,
                    command: Command::Create(CreateBead { title: format!("b{n}"), ..Default::default() }),
                },
            )
            .unwrap();
    }
    let found = harness.ready(ReadyFilter { limit: 1, ..Default::default() });
    assert_eq!(found, vec![BeadId::from("st-1")]);
}

#[test]
fn reload_computes_blocked_state_across_load_order() {
    let mut harness = Harness::new();
    let first = harness.create("created first");
    let later = harness.create("created later");
    let dep = Command::DepAdd(crate::command::DepAdd {
        issue_id: first.clone(),
        depends_on_id: later.clone(),
        dep_type: DepType::blocks(),
    });
    harness.apply(dep).unwrap();
    assert_eq!(harness.ready_all(), ids(&[&later]));
    let reloaded = State::from_records(harness.state.records()).unwrap();
    let filter = ReadyFilter { limit: 0, ..Default::default() };
    let answer = reloaded.query(&harness.namespace, &Query::from(Ready { filter, now: Timestamp(i64::MAX) }));
    assert_eq!(beads_of(answer).into_iter().map(|bead| bead.id).collect::<Vec<_>>(), vec![later]);
}

/// Records that hold one bead's id under two keys are corrupt: the load refuses them, naming the
/// second key, rather than stopping the process.
#[test]
fn a_bead_id_stored_twice_is_refused_at_load() {
    let mut harness = Harness::new();
    let first = harness.create("stored twice");
    let mut records = harness.state.records();
    let copy = records.iter().find(|(key, _)| matches!(key, RecordKey::Bead(_, id) if *id == first)).unwrap().1.clone();
    let key = RecordKey::Bead(harness.namespace.clone(), BeadId::from("st-zz"));
    records.push((key, copy));
    let error = State::from_records(records).expect_err("one id twice");
    assert_eq!(error.key, RecordKey::Bead(harness.namespace.clone(), first));
}

/// An id an edge names, to a bead not made yet or from a loose source, is never allocated to a
/// new bead (which would silently inherit the edge): the allocator skips it, also after a reload.
#[test]
fn an_allocated_id_never_inherits_a_dangling_edge() {
    let mut harness = Harness::new();
    let first = harness.create("first");
    assert_eq!(first, BeadId::from("st-1"));
    let dangling = Command::DepAdd(crate::command::DepAdd {
        issue_id: first.clone(),
        depends_on_id: BeadId::from("st-2"),
        dep_type: DepType::blocks(),
    });
    harness.apply(dangling).unwrap();
    let loose = Command::DepAdd(crate::command::DepAdd {
        issue_id: BeadId::from("st-3"),
        depends_on_id: first.clone(),
        dep_type: DepType::blocks(),
    });
    harness.apply(loose).unwrap();
    let next = harness.create("next");
    assert_eq!(next, BeadId::from("st-4"), "st-2 and st-3 are named by edges");
    let bead =
        beads_of(harness.state.query(&harness.namespace, &Query::from(Get { ids: vec![next.clone()] }))).remove(0);
    assert!(bead.depends_on.is_empty(), "{bead:?}");
    assert_eq!(harness.ready_all().first(), Some(&first), "st-1 waits on no bead, as before");
    harness.state = State::from_records(harness.state.records()).unwrap();
    assert_eq!(harness.create("after a reload"), BeadId::from("st-5"));
}

#[test]
fn wide_parent_child_fan_in_refreshes_without_panicking() {
    let mut harness = Harness::new();
    let parent = harness.create("parent");
    let children: Vec<String> = (0..200)
        .map(|n| {
            harness
                .create_with(CreateBead {
                    title: format!("c{n}"),
                    parent_id: Some(parent.clone()),
                    ..Default::default()
                })
                .0
        })
        .collect();
    for n in 0..20 {
        let needs = children.iter().map(|child| format!("parent-child:{child}")).collect();
        harness.create_with(CreateBead { title: format!("fan-in {n}"), needs, ..Default::default() });
    }
    let block = UpdateBead { id: parent.clone(), status: Some(Status::Blocked), ..Default::default() };
    harness.apply(Command::Update(block)).unwrap();
    assert!(harness.ready_all().is_empty());
    let unblock = UpdateBead { id: parent, status: Some(Status::Open), ..Default::default() };
    harness.apply(Command::Update(unblock)).unwrap();
    assert_eq!(harness.ready_all().len(), 221);
}

#[test]
fn refused_write_leaves_no_namespace_and_metadata_only_list_walks_all() {
    let mut harness = Harness::new();
    harness.namespace = Namespace("fresh".into());
    assert!(harness.apply(Command::Close(crate::command::Close { ids: vec!["st-1".into()], reason: None })).is_err());
    assert!(!harness.state.records().iter().any(|(key, _)| matches!(key, RecordKey::Namespace(_))));
    let mut metadata = BTreeMap::new();
    metadata.insert("k".to_string(), "v".to_string());
    let bead_id = harness.create_with(CreateBead { title: "m".into(), metadata, ..Default::default() });
    let filter = ListFilter { metadata_equals: vec![("k".into(), "v".into())], ..Default::default() };
    assert_eq!(
        beads_of(harness.query(Query::from(List(filter)))).into_iter().map(|bead| bead.id).collect::<Vec<_>>(),
        vec![bead_id]
    );
}

#[test]
fn a_write_that_may_not_create_its_namespace_is_refused_naming_the_closest() {
    let mut harness = Harness::new();
    harness.create("in default");
    let must_exist = |namespace: &str, command: Command| Proposal {
        request_id: Some(RequestId { client_id: 9, request_seq: 1, lowest_unacked: 1 }),
        timestamp: Timestamp(2_000),
        default_prefix: PREFIX_NAMESPACE_MUST_EXIST.into(),
        namespace: Namespace(namespace.into()),
        actor: Actor("tester".into()),
        event_retention: crate::limits::EVENT_RETENTION_DEFAULT,
        credential: None,
        command,
    };
    let before = content(&harness.state);
    let create = Command::Create(CreateBead { title: "typo".into(), ..Default::default() });
    let proposal = must_exist("defualt", create.clone());
    assert!(!proposal.may_create_namespace());
    let refused = harness.state.apply(2, &proposal).unwrap_err();
    assert_eq!(refused, Refusal::NamespaceNotFound { namespace: "defualt".into(), closest: Some("default".into()) });
    assert!(refused.to_string().contains("did you mean default?"), "{refused}");
    // Two such writes, as two racing clients would send them: neither creates the namespace.
    let mut second = must_exist("defualt", create);
    second.request_id = Some(RequestId { client_id: 10, request_seq: 1, lowest_unacked: 1 });
    assert!(harness.state.apply(3, &second).is_err());
    let configure = Command::NamespaceConfigure(crate::command::NamespaceConfigure {
        default_lease_ms: None,
        max_deliveries: Some(2),
    });
    let mut third = must_exist("elsewhere", configure);
    third.request_id = Some(RequestId { client_id: 11, request_seq: 1, lowest_unacked: 1 });
    let far = harness.state.apply(4, &third).unwrap_err();
    assert_eq!(far, Refusal::NamespaceNotFound { namespace: "elsewhere".into(), closest: None });
    assert_eq!(content(&harness.state), before, "nothing was created");
    assert!(harness.state.query(&Namespace("defualt".into()), &Query::Namespaces).is_ok_and(|answer| {
        matches!(answer, Outcome::Namespaces(infos) if infos.len() == 1 && infos[0].name == "default")
    }));
    // Reads: refused when asked to find the namespace, read as empty otherwise.
    let list = Query::from(List(ListFilter { all: true, ..Default::default() }));
    let typo = Namespace("defualt".into());
    assert!(matches!(
        harness.state.query_as(None, &typo, true, &list),
        Err(Refusal::NamespaceNotFound { closest: Some(_), .. })
    ));
    assert!(beads_of(harness.state.query_as(None, &typo, false, &list)).is_empty());
    assert!(harness.state.query_as(None, &typo, true, &Query::Namespaces).is_ok(), "a listing names no namespace");
    assert_eq!(beads_of(harness.state.query_as(None, &harness.namespace, true, &list)).len(), 1);
}

#[test]
fn update_cannot_grow_labels_past_the_limit() {
    let mut harness = Harness::new();
    let bead_id = harness.create("a");
    for n in 0..crate::limits::LABELS_MAX {
        let update = UpdateBead { id: bead_id.clone(), add_labels: labels(&[&format!("l{n}")]), ..Default::default() };
        harness.apply(Command::Update(update)).unwrap();
    }
    let update = UpdateBead { id: bead_id.clone(), add_labels: labels(&["one-too-many"]), ..Default::default() };
    assert!(harness.apply(Command::Update(update)).unwrap_err().to_string().contains("more than"));
}

mod auth;
mod counts;
mod import;
mod lease;
mod metadata;
mod orchestration;
mod orders;
mod txn;

#[test]
fn an_update_turns_a_wisp_persistent_and_moves_it_between_ready_sets() {
    let mut harness = Harness::new();
    let wisp = harness.create_with(CreateBead { title: "wisp".into(), ephemeral: true, ..Default::default() });
    assert!(!harness.ready_all().contains(&wisp), "a wisp is not ready unless asked");
    let persist = UpdateBead { id: wisp.clone(), ephemeral: Some(false), ..Default::default() };
    harness.apply(Command::Update(persist)).unwrap();
    assert!(!harness.get(&wisp).ephemeral);
    assert!(harness.ready_all().contains(&wisp), "now it is ordinary ready work");
    let both = UpdateBead { id: wisp.clone(), ephemeral: Some(true), no_history: Some(true), ..Default::default() };
    let refusal = harness.apply(Command::Update(both)).expect_err("both is refused");
    assert!(refusal.to_string().contains("one or the other"), "{refusal}");
    harness.check_persistence();
}

#[test]
fn ids_sort_by_their_prefixes_as_whole_strings_do() {
    let ids = [
        "",
        "a",
        "a\0",
        "a\0b",
        "b",
        "st-9",
        "st-10",
        "st-1",
        "longprefixlongprefix-10",
        "longprefixlongprefix-9",
        "longprefixlongprefix-1",
        "longprefixlongpre",
        "longprefixlongprefi",
        "longprefixlongprefix",
        "é",
        "z\u{ff}",
    ];
    let mut sorted: Vec<&str> = ids.to_vec();
    namespace::sort_by_id(&mut sorted, |id| id);
    let mut expected = ids.to_vec();
    expected.sort();
    assert_eq!(sorted, expected);
}
