//! The checkers themselves under test: hand-built histories that break a property must be
//! rejected, and valid ones (with concurrency and unknown outcomes) accepted.
#![allow(clippy::unwrap_used)]

use api::command::{Command, CreateBead, Proposal};
use api::model::{Actor, Bead, BeadId, Namespace, Status, Timestamp};
use api::outcome::{Outcome, Refusal};
use api::state::State;
use std::collections::BTreeMap;
use std::time::Duration;

use simulation::checkers::{
    controller_terms, convergence, durability, exactly_once, integrity, leases, linearizability, metadata,
    orchestration, orders, raft_safety, upgrade,
};
use simulation::cluster::{Answered, ControllerApply, FailedStart, Observation, Versioned, VersionedApply};
use simulation::healed::{Healed, OrderFirings};
use simulation::history::{History, Op, OpResult, compact_value};
use simulation::workload::large_metadata;

/// The bead a create of `title` makes as the first bead of the namespace.
fn created(title: &str) -> Bead {
    let mut state = State::new();
    let create = CreateBead { title: title.into(), labels: ["sim".to_string()].into(), ..Default::default() };
    let proposal = Proposal {
        request_id: None,
        timestamp: Timestamp(1),
        default_prefix: "st".into(),
        actor: Actor::default(),
        event_retention: api::limits::EVENT_RETENTION_DEFAULT,
        credential: None,
        namespace: Namespace::default_namespace(),
        command: Command::Create(create),
    };
    match state.apply(1, &proposal).unwrap() {
        Outcome::Bead(bead) => *bead,
        other => panic!("create answered {other:?}"),
    }
}

fn claimed(bead: &Bead, actor: &str) -> Bead {
    Bead { status: Status::InProgress, assignee: actor.into(), ..bead.clone() }
}

fn actor(name: &str) -> Actor {
    Actor(name.into())
}

/// Records one operation that completes before the next one starts.
fn sequential(history: &mut History, agent: usize, op: Op, result: OpResult) {
    let index = history.invoke(agent, op, false);
    history.complete(index, result);
}

fn bead_result(bead: &Bead) -> OpResult {
    OpResult::Ok(Outcome::Bead(Box::new(bead.clone())))
}

fn get_result(bead: &Bead) -> OpResult {
    OpResult::Ok(Outcome::Beads(vec![bead.clone()]))
}

fn with_create(bead: &Bead) -> History {
    let mut history = History::default();
    sequential(&mut history, 0, Op::Create { title: bead.title.clone() }, bead_result(bead));
    history
}

fn id(bead: &Bead) -> BeadId {
    bead.id.clone()
}

#[test]
fn two_successful_claims_of_one_bead_are_rejected() {
    let bead = created("a0-0");
    let mut history = with_create(&bead);
    sequential(
        &mut history,
        1,
        Op::Claim { id: id(&bead), actor: actor("agent-1") },
        bead_result(&claimed(&bead, "agent-1")),
    );
    sequential(
        &mut history,
        2,
        Op::Claim { id: id(&bead), actor: actor("agent-2") },
        bead_result(&claimed(&bead, "agent-2")),
    );
    assert_eq!(linearizability::check(&history).len(), 1);
}

#[test]
fn a_read_that_misses_an_acknowledged_claim_is_rejected() {
    let bead = created("a0-0");
    let mut history = with_create(&bead);
    sequential(
        &mut history,
        1,
        Op::Claim { id: id(&bead), actor: actor("agent-1") },
        bead_result(&claimed(&bead, "agent-1")),
    );
    sequential(&mut history, 2, Op::Get { id: id(&bead) }, get_result(&bead));
    assert_eq!(linearizability::check(&history).len(), 1);
}

#[test]
fn a_read_that_goes_back_in_time_is_rejected() {
    let bead = created("a0-0");
    let mut history = with_create(&bead);
    let updated = Bead { priority: Some(4), ..bead.clone() };
    // The update's answer is lost (unknown), but one read saw it; a later read must too.
    let update = history.invoke(1, Op::Update { id: id(&bead), priority: 4 }, false);
    history.complete(update, OpResult::Unknown("timed out".into()));
    sequential(&mut history, 2, Op::Get { id: id(&bead) }, get_result(&updated));
    sequential(&mut history, 3, Op::Get { id: id(&bead) }, get_result(&bead));
    assert_eq!(linearizability::check(&history).len(), 1);
}

#[test]
fn concurrent_claims_with_one_winner_are_accepted() {
    let bead = created("a0-0");
    let mut history = with_create(&bead);
    let first = history.invoke(1, Op::Claim { id: id(&bead), actor: actor("agent-1") }, false);
    let second = history.invoke(2, Op::Claim { id: id(&bead), actor: actor("agent-2") }, false);
    // The later-invoked claim wins; the first one, still concurrent, lost to it.
    history.complete(first, OpResult::Refused(Refusal::AlreadyClaimed { id: id(&bead), holder: "agent-2".into() }));
    history.complete(second, bead_result(&claimed(&bead, "agent-2")));
    sequential(&mut history, 3, Op::Get { id: id(&bead) }, get_result(&claimed(&bead, "agent-2")));
    assert!(linearizability::check(&history).is_empty(), "{:?}", linearizability::check(&history));
}

#[test]
fn an_unknown_claim_may_explain_a_holder_but_nothing_else_can() {
    let bead = created("a0-0");
    let mut history = with_create(&bead);
    let claim = history.invoke(1, Op::ClaimNext { actor: actor("agent-1") }, false);
    history.complete(claim, OpResult::Unknown("deadline exceeded".into()));
    sequential(&mut history, 2, Op::Get { id: id(&bead) }, get_result(&claimed(&bead, "agent-1")));
    assert!(linearizability::check(&history).is_empty());
    sequential(&mut history, 2, Op::Get { id: id(&bead) }, get_result(&claimed(&bead, "agent-9")));
    assert_eq!(linearizability::check(&history).len(), 1);
}

#[test]
fn a_lost_metadata_key_is_rejected() {
    let bead = created("a0-0");
    let mut history = with_create(&bead);
    let one = history.invoke(1, Op::SetMetadata { id: id(&bead), key: "k1".into(), value: "v".into() }, false);
    let two = history.invoke(2, Op::SetMetadata { id: id(&bead), key: "k2".into(), value: "v".into() }, false);
    let mut with_one = bead.clone();
    with_one.metadata.insert("k1".into(), "v".into());
    let mut with_two = bead.clone();
    with_two.metadata.insert("k2".into(), "v".into());
    history.complete(one, bead_result(&with_one));
    // Last writer wins over the whole map: k1 is lost.
    history.complete(two, bead_result(&with_two));
    sequential(&mut history, 3, Op::Get { id: id(&bead) }, get_result(&with_two));
    assert_eq!(linearizability::check(&history).len(), 1);
    assert_eq!(metadata::check(&history, &[with_two]).len(), 1);
}

#[test]
fn a_create_applied_twice_is_rejected() {
    let bead = created("a0-0");
    let history = with_create(&bead);
    let twin = Bead { id: BeadId("st-2".into()), seq: 2, ..bead.clone() };
    assert_eq!(exactly_once::check(&history, &[bead.clone(), twin]).len(), 1);
    assert!(exactly_once::check(&history, &[bead]).is_empty());
}

#[test]
fn two_leaders_in_one_term_are_rejected() {
    let leader = |node, term| Observation {
        at: std::time::Duration::ZERO,
        node,
        term,
        leader: true,
        last_log_index: 5,
        applied: None,
        fatal: None,
    };
    assert!(raft_safety::check(&[leader(1, 3), leader(2, 4)], &[]).is_empty());
    assert_eq!(raft_safety::check(&[leader(1, 3), leader(2, 3)], &[]).len(), 1);
}

#[test]
fn a_leader_missing_applied_entries_is_rejected() {
    let applied = Observation {
        at: std::time::Duration::ZERO,
        node: 1,
        term: 2,
        leader: false,
        last_log_index: 10,
        applied: Some((10, 2, "T2-N1".into())),
        fatal: None,
    };
    let leader = Observation { node: 2, term: 3, leader: true, last_log_index: 7, applied: None, ..applied.clone() };
    assert_eq!(raft_safety::check(&[applied.clone(), leader], &[]).len(), 1);
    // A node restoring its own leadership of an older term owes nothing to later terms.
    let restored = Observation { node: 2, term: 1, leader: true, last_log_index: 7, applied: None, ..applied.clone() };
    assert!(raft_safety::check(&[applied, restored], &[]).is_empty());
}

#[test]
fn a_raft_core_that_stopped_is_rejected() {
    let healthy = Observation {
        at: std::time::Duration::ZERO,
        node: 1,
        term: 2,
        leader: false,
        last_log_index: 10,
        applied: None,
        fatal: None,
    };
    assert!(raft_safety::check(std::slice::from_ref(&healthy), &[]).is_empty());
    let panicked =
        Observation { fatal: Some("panicked: follower log reversion is not allowed".into()), ..healthy.clone() };
    let found = raft_safety::check(&[healthy.clone(), panicked.clone(), panicked.clone()], &[]);
    assert_eq!(found.len(), 1, "one violation a node: {found:?}");
    assert_eq!(found[0].checker, "raft fatal");
    // A node removed from the membership stops its core on purpose once it is told.
    let stopped = Observation { fatal: Some("raft stopped".into()), ..healthy.clone() };
    assert!(raft_safety::check(&[healthy, stopped], &[1]).is_empty());
}

#[test]
fn a_large_value_changed_after_its_create_was_acknowledged_is_rejected() {
    let mut bead = created("a0-0");
    bead.metadata = large_metadata("a0-0").into_iter().map(|(key, value)| (key, compact_value(&value))).collect();
    let mut history = History::default();
    sequential(&mut history, 0, Op::CreateLarge { title: "a0-0".into() }, bead_result(&bead));
    assert!(durability::check(&history, std::slice::from_ref(&bead)).is_empty());
    assert!(linearizability::check(&history).is_empty(), "{:?}", linearizability::check(&history));
    let mut changed = bead.clone();
    let mut value = large_metadata("a0-0").remove("big-03").unwrap();
    value.replace_range(100..101, "\0");
    changed.metadata.insert("big-03".into(), compact_value(&value));
    assert_eq!(durability::check(&history, &[changed.clone()]).len(), 1);
    sequential(&mut history, 1, Op::Get { id: id(&bead) }, get_result(&changed));
    assert_eq!(linearizability::check(&history).len(), 1);
}

#[test]
fn convergence_must_cover_every_live_node() {
    let healed = |agreed: Vec<(u64, u64, u64)>| Healed {
        write_after_heal: Ok(Duration::ZERO),
        convergence: Ok(agreed),
        members: vec![1, 2, 3],
        rejoining_at_end: Vec::new(),
        orders: Ok(OrderFirings::default()),
        leases_after_bound: Ok(Vec::new()),
        all_beads: Ok(Vec::new()),
        removed_serving: Vec::new(),
        apply_versions: Vec::new(),
        divergences: Vec::new(),
    };
    // Node 2 failed to start: the two others agreeing is convergence.
    assert!(convergence::check(&healed(vec![(1, 40, 7), (3, 40, 7)]), &[1, 3]).is_empty());
    // A live node left out of the comparison (a damaged node that started, say) is not.
    assert_eq!(convergence::check(&healed(vec![(1, 40, 7), (3, 40, 7)]), &[1, 2, 3]).len(), 1);
    let disagreed = Healed { convergence: Err("digests differ".into()), ..healed(Vec::new()) };
    assert_eq!(convergence::check(&disagreed, &[1, 2, 3]).len(), 1);
    // A wiped node that holds the state but never left rejoining (it never votes again) fails.
    let rejoining = Healed { rejoining_at_end: vec![2], ..healed(vec![(1, 40, 7), (2, 40, 7), (3, 40, 7)]) };
    let found = convergence::check(&rejoining, &[1, 2, 3]);
    assert_eq!(found.len(), 1);
    assert!(found[0].detail.contains("node 2"), "{found:?}");
}

#[test]
fn a_failed_start_on_undamaged_storage_is_rejected() {
    let failed = BTreeMap::from([(2, FailedStart { at: Duration::from_secs(4), error: "refusing to start".into() })]);
    let damaged_2 = BTreeMap::from([(2, vec!["log entry 17: bit 3 of byte 40 flipped".to_string()])]);
    let damaged_1 = BTreeMap::from([(1, vec!["state record: byte 9 zeroed".to_string()])]);
    assert!(integrity::check(&failed, &damaged_2, &[]).is_empty());
    assert_eq!(integrity::check(&failed, &damaged_1, &[]).len(), 1);
    assert!(integrity::check(&BTreeMap::new(), &damaged_1, &[]).is_empty());
    // A removed node refuses to start by design, and says so; only then is it not a violation.
    let error = "refusing to start: node 2 was removed from cluster \"sim\" at index 40".to_string();
    let removed = BTreeMap::from([(2, FailedStart { at: Duration::from_secs(4), error })]);
    assert!(integrity::check(&removed, &BTreeMap::new(), &[2]).is_empty());
    assert_eq!(integrity::check(&removed, &BTreeMap::new(), &[]).len(), 1);
    assert_eq!(integrity::check(&failed, &BTreeMap::new(), &[2]).len(), 1, "another refusal of a removed node");
}

#[test]
fn orders_reject_a_window_fired_twice_a_short_cooldown_and_untold_firings() {
    let firing = |order: &str, window: u64, bead: &str| (order.to_string(), window, bead.to_string());
    let found = |tracking: Vec<(String, u64, String)>, fired: u64| {
        Ok(OrderFirings {
            tracking,
            fired: [("cool".to_string(), fired), ("cron".to_string(), fired)].into(),
            cooldown_ms: [("cool".to_string(), 1_000)].into(),
        })
    };
    let fine = found(vec![firing("cool", 5_000, "st-1"), firing("cool", 6_000, "st-2"), firing("cron", 7, "st-3")], 2);
    assert_eq!(orders::check(&fine), Vec::new());
    let twice = found(vec![firing("cron", 7, "st-1"), firing("cron", 7, "st-2")], 2);
    assert!(orders::check(&twice)[0].detail.contains("fired twice in window 7"), "{:?}", orders::check(&twice));
    let early = found(vec![firing("cool", 5_000, "st-1"), firing("cool", 5_400, "st-2")], 2);
    assert!(orders::check(&early)[0].detail.contains("400 ms apart"), "{:?}", orders::check(&early));
    let untold = found(vec![firing("cool", 5_000, "st-1"), firing("cool", 9_000, "st-2")], 1);
    assert!(orders::check(&untold)[0].detail.contains("2 tracking beads but counts 1"), "{:?}", orders::check(&untold));
    assert_eq!(orders::check(&Err("no answer".into())).len(), 1, "orders that cannot be read back are a violation");
}

/// A bead as a leased claim of `actor` under lease `lease_id` answers it.
fn leased(id: &str, actor: &str, lease_id: u64) -> Bead {
    let lease = api::model::Lease {
        id: lease_id,
        holder: actor.into(),
        ttl_ms: 2_000,
        renewed_at: lease_id,
        expires_at: Timestamp(0),
    };
    Bead { lease: Some(lease), ..claimed(&Bead { id: BeadId(id.into()), ..created("leasable") }, actor) }
}

/// Records a lease operation invoked and answered at the simulated times given, in ms.
fn timed(history: &mut History, agent: usize, op: Op, result: OpResult, invoked_ms: u64, completed_ms: u64) {
    let index = history.invoke(agent, op, false);
    history.complete(index, result);
    let entry = &mut history.entries[index];
    entry.invoked_at = Duration::from_millis(invoked_ms);
    entry.completed_at = Some(Duration::from_millis(completed_ms));
}

fn lease_claim(actor: &str) -> Op {
    Op::LeaseClaimNext { actor: Actor(actor.into()), lease_ms: 2_000 }
}

#[test]
fn leases_reject_two_holders_a_stale_fenced_write_and_a_lease_left_after_the_bound() {
    let bead = |id: &str, actor: &str, lease: u64| OpResult::Ok(Outcome::Beads(vec![leased(id, actor, lease)]));
    // Alice claims at 0 s and renews at 1 s; bob's claim at 4 s comes after her lease could end.
    let mut fine = History::default();
    timed(&mut fine, 0, lease_claim("alice"), bead("st-1", "alice", 10), 0, 5);
    let renew = Op::LeaseRenew { id: BeadId("st-1".into()), actor: Actor("alice".into()) };
    timed(&mut fine, 0, renew, bead("st-1", "alice", 10), 1_000, 1_005);
    timed(&mut fine, 1, lease_claim("bob"), bead("st-1", "bob", 40), 3_990, 4_000);
    let late_close = Op::FencedClose { id: BeadId("st-1".into()), actor: Actor("alice".into()), lease_id: 10 };
    timed(&mut fine, 0, late_close.clone(), OpResult::Refused(Refusal::Invalid("claim lost".into())), 4_500, 4_510);
    assert_eq!(leases::check(&fine, 2_000, &Ok(Vec::new())), Vec::new());

    // Bob is granted the bead 2.5 s after alice's renewal at 1 s: her lease still ran.
    let mut overlap = History::default();
    timed(&mut overlap, 0, lease_claim("alice"), bead("st-1", "alice", 10), 0, 5);
    let renew = Op::LeaseRenew { id: BeadId("st-1".into()), actor: Actor("alice".into()) };
    timed(&mut overlap, 0, renew, bead("st-1", "alice", 10), 1_000, 1_005);
    timed(&mut overlap, 1, lease_claim("bob"), bead("st-1", "bob", 40), 2_400, 2_500);
    let found = leases::check(&overlap, 2_000, &Ok(Vec::new()));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].detail.contains("could not yet have expired"), "{}", found[0]);

    // Alice's close fenced by lease 10 succeeds after bob was granted lease 40.
    let mut stale = History::default();
    timed(&mut stale, 0, lease_claim("alice"), bead("st-1", "alice", 10), 0, 5);
    timed(&mut stale, 1, lease_claim("bob"), bead("st-1", "bob", 40), 3_000, 3_010);
    timed(&mut stale, 0, late_close, OpResult::Ok(Outcome::Txn(vec![])), 3_500, 3_510);
    let found = leases::check(&stale, 2_000, &Ok(Vec::new()));
    assert!(found.iter().any(|violation| violation.detail.contains("fenced by lease 10 was applied")), "{found:?}");

    // A lease still held after the bound.
    let left = leases::check(&History::default(), 2_000, &Ok(vec![leased("st-9", "carol", 7)]));
    assert!(left[0].detail.contains("still holds carol's lease 7"), "{left:?}");
    assert_eq!(leases::check(&History::default(), 2_000, &Err("no answer".into())).len(), 1);
}

#[test]
fn orchestration_rejects_a_lost_sling_a_doubled_cook_a_refused_mail_that_applied_and_an_open_close() {
    let titled = |id: &str, title: &str| Bead { id: BeadId(id.into()), title: title.into(), ..created("x") };
    let mut history = History::default();
    sequential(&mut history, 9, Op::Sling { title: "slung-1".into() }, OpResult::Ok(Outcome::Beads(vec![])));
    sequential(&mut history, 9, Op::Cook { title: "mol-2".into() }, OpResult::Ok(Outcome::Beads(vec![])));
    sequential(
        &mut history,
        9,
        Op::Mail { subject: "mail-3".into() },
        OpResult::Refused(Refusal::Invalid("no".into())),
    );
    sequential(&mut history, 9, Op::HookClose { id: BeadId("st-9".into()) }, OpResult::Ok(Outcome::Beads(vec![])));
    let fine = vec![
        titled("st-1", "slung-1"),
        titled("st-2", "sling: slung-1"),
        titled("st-3", "mol-2"),
        Bead { status: Status::Closed, ..titled("st-9", "hooked") },
    ];
    assert_eq!(orchestration::check(&history, &Ok(fine.clone())), Vec::new());
    let mut broken = fine;
    broken.remove(1); // the sling's auto-convoy is gone
    broken.push(titled("st-4", "mol-2")); // the cook applied twice
    broken.push(titled("st-5", "mail-3")); // the refused mail applied
    broken[2].status = Status::Open; // st-9's acknowledged close is gone
    let found = orchestration::check(&history, &Ok(broken));
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(orchestration::check(&history, &Err("no answer".into())).len(), 1);
}

/// One controller action as a node applied it.
fn apply(node: u64, index: u64, term: u64, action: &'static str, applied: bool) -> ControllerApply {
    ControllerApply { node, index, term, action, applied }
}

#[test]
fn controller_terms_accept_a_stale_action_refused_after_a_higher_term_is_fine() {
    let history = [
        apply(1, 10, 2, "begin", true),
        apply(2, 10, 2, "begin", true),
        apply(2, 20, 3, "begin", true),
        apply(1, 25, 2, "expire_leases", false),
        apply(2, 30, 3, "fire_order", true),
    ];
    let (violations, summary) = controller_terms::check(&history);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(summary, controller_terms::Summary { applied: 3, refused: 1, terms: 2 });
}

#[test]
fn controller_terms_reject_a_lower_term_taking_effect_after_a_higher_one() {
    let history =
        [apply(1, 10, 2, "begin", true), apply(2, 20, 3, "begin", true), apply(1, 25, 2, "expire_leases", true)];
    let (violations, _) = controller_terms::check(&history);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].detail.contains("expire_leases of term 2 took effect at index 25"), "{violations:?}");
}

#[test]
fn controller_terms_judge_in_log_order_not_in_report_order() {
    // Node 3 reports index 25 first; in log order the term-2 action still follows term 3's.
    let history = [apply(3, 25, 2, "fire_order", true), apply(1, 10, 2, "begin", true), apply(2, 20, 3, "begin", true)];
    let (violations, _) = controller_terms::check(&history);
    assert_eq!(violations.len(), 1, "{violations:?}");
}

#[test]
fn controller_terms_reject_nodes_that_disagree_on_an_outcome() {
    let history = [apply(1, 10, 2, "fire_order", true), apply(2, 10, 2, "fire_order", false)];
    let (violations, _) = controller_terms::check(&history);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].detail.contains("applied differently"), "{violations:?}");
}

/// The version of the canary rule, the newer build's.
const NEXT: u32 = api::version::NEXT_APPLY_VERSION;

/// A canary as a node applied it (`false`: refused by the next version's rule).
fn canary(node: u64, index: u64, applied: bool) -> VersionedApply {
    let title = format!("apply-next-canary-{index}");
    canary_titled(node, index, &title, if applied { Answered::Applied } else { Answered::RefusedByNextRule })
}

/// A canary of `title` as a node answered it.
fn canary_titled(node: u64, index: u64, title: &str, answered: Answered) -> VersionedApply {
    VersionedApply { node, index, what: Versioned::Canary(title.into()), answered }
}

/// The switch to the canary rule's version as a node applied it.
fn switch(node: u64, index: u64) -> VersionedApply {
    switch_to(node, index, NEXT)
}

/// The switch to version `to` as a node applied it.
fn switch_to(node: u64, index: u64, to: u32) -> VersionedApply {
    VersionedApply { node, index, what: Versioned::Switch { from: to - 1, to }, answered: Answered::Applied }
}

/// The healed reader's finding: every node of `nodes` on `version`, set at `since`.
fn ended_on(nodes: &[u64], version: u32, since: u64) -> Healed {
    Healed { apply_versions: nodes.iter().map(|node| (*node, version, since)).collect(), ..Healed::default() }
}

#[test]
fn upgrade_accepts_canaries_applied_before_the_switch_and_refused_after() {
    let applies = [canary(1, 10, true), canary(2, 10, true), switch(1, 20), switch(2, 20), canary(2, 30, false)];
    let (violations, summary) = upgrade::check(&applies, &ended_on(&[1, 2], NEXT, 20));
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(summary, upgrade::Summary { switched: Some((20, NEXT)), canaries_applied: 1, canaries_refused: 1 });
    // Without a switch, every canary applies.
    let (violations, _) = upgrade::check(&[canary(1, 10, true)], &ended_on(&[1, 2], 1, 0));
    assert!(violations.is_empty(), "{violations:?}");
    // A fresh cluster of the older build first switches to that build's newest version: canaries
    // still apply there, until the switch to the newer build's.
    let applies = [switch_to(1, 5, NEXT - 1), canary(1, 10, true), switch(1, 20), canary(1, 30, false)];
    let (violations, summary) = upgrade::check(&applies, &ended_on(&[1], NEXT, 20));
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(summary, upgrade::Summary { switched: Some((20, NEXT)), canaries_applied: 1, canaries_refused: 1 });
}

#[test]
fn upgrade_judges_a_canary_at_its_first_execution_only() {
    // Refused for an expired session before the switch, executed after it, and its retry
    // answered from the dedup table later still: refused by the rule, as at its first execution.
    let expired = Answered::Refused("session expired".into());
    let applies = [
        canary_titled(1, 10, "apply-next-canary-7", expired),
        switch(1, 20),
        canary_titled(1, 30, "apply-next-canary-7", Answered::RefusedByNextRule),
        canary_titled(1, 40, "apply-next-canary-7", Answered::RefusedByNextRule),
    ];
    let (violations, summary) = upgrade::check(&applies, &ended_on(&[1], NEXT, 20));
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(summary.canaries_refused, 1);
    // Applied before the switch, its retry answered from the dedup table after it: applied.
    let applies = [
        canary_titled(1, 10, "apply-next-canary-8", Answered::Applied),
        switch(1, 20),
        canary_titled(1, 30, "apply-next-canary-8", Answered::Applied),
    ];
    let (violations, _) = upgrade::check(&applies, &ended_on(&[1], NEXT, 20));
    assert!(violations.is_empty(), "{violations:?}");
}

#[test]
fn upgrade_rejects_a_canary_bead_created_after_the_switch() {
    // No node reported the canary (every node received it in a snapshot); its bead did.
    let bead = Bead { revision: 25, ..created("apply-next-canary-3") };
    let healed = Healed { all_beads: Ok(vec![bead]), ..ended_on(&[1], NEXT, 20) };
    let (violations, _) = upgrade::check(&[switch(1, 20)], &healed);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].detail.contains("created at index 25"), "{violations:?}");
    // The final state's index holds a canary, not a switch.
    let (violations, _) = upgrade::check(&[canary(1, 20, true)], &ended_on(&[1], NEXT, 20));
    assert!(violations.iter().any(|violation| violation.detail.contains("was set at index 20")), "{violations:?}");
}

#[test]
fn upgrade_rejects_a_canary_decided_by_other_rules_than_the_states_version() {
    // Refused before the switch (a node applied the newer rule early), applied after it.
    let applies = [canary(1, 10, false), switch(1, 20), canary(1, 30, true)];
    let (violations, _) = upgrade::check(&applies, &ended_on(&[1], NEXT, 20));
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert!(violations[0].detail.contains("at index 10 was refused by the next version's rule"), "{violations:?}");
    assert!(violations[1].detail.contains("at index 30 was applied"), "{violations:?}");
    // Refused with no switch at all.
    let (violations, _) = upgrade::check(&[canary(1, 10, false)], &ended_on(&[1], 1, 0));
    assert_eq!(violations.len(), 1, "{violations:?}");
}

#[test]
fn upgrade_rejects_nodes_that_disagree_a_second_switch_and_a_divergence() {
    let applies = [canary(1, 10, true), canary(2, 10, false)];
    let (violations, _) = upgrade::check(&applies, &ended_on(&[1, 2], 1, 0));
    assert!(violations.iter().any(|violation| violation.detail.contains("applied differently")), "{violations:?}");
    // The final state names another index than the switch the nodes applied.
    let (violations, _) = upgrade::check(&[switch(1, 20)], &ended_on(&[1], NEXT, 25));
    assert_eq!(violations.len(), 1, "{violations:?}");
    // A switch that lowers the version.
    let (violations, _) = upgrade::check(&[switch(1, 20), switch_to(1, 30, NEXT - 1)], &ended_on(&[1], NEXT - 1, 30));
    assert!(violations.iter().any(|violation| violation.detail.contains("only raises it")), "{violations:?}");
    // Nodes ending on different versions, and a divergence a leader reported.
    let mut healed = ended_on(&[1], NEXT, 20);
    healed.apply_versions.push((2, 1, 0));
    healed.divergences.push((1, "node 2 differs at checkpoint 40".into()));
    let (violations, _) = upgrade::check(&[switch(1, 20)], &healed);
    assert!(violations.iter().any(|violation| violation.detail.contains("different apply versions")), "{violations:?}");
    assert!(violations.iter().any(|violation| violation.detail.contains("divergence alarm")), "{violations:?}");
}
