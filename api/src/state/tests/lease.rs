//! Leased claims: a lease is granted by a claim and named by its id (the fencing token), renewed
//! and released only by its holder, ended by any change that takes the bead from its holder; a
//! write fenced by a lease that is no longer current is refused; the controller expires a lease
//! only while it is current as judged, dead-letters a bead after `MAX_DELIVERIES_DEFAULT`
//! expiries, and refuses actions of a term lower than one it applied.

use super::*;
use crate::command::{ControllerAction, Fence};
use crate::commands::events::Events;
use crate::limits::MAX_DELIVERIES_DEFAULT;
use crate::model::{LABEL_DEAD_LETTER, Lease, event_type};

const MINUTE_MS: u64 = 60_000;

impl Harness {
    fn claim_leased(&mut self, bead_id: &BeadId, actor: &str, lease_ms: u64) -> Answer {
        self.apply(Command::Claim(crate::command::Claim {
            id: bead_id.clone(),
            actor: Actor(actor.into()),
            lease_ms: Some(lease_ms),
        }))
    }

    fn as_actor(&mut self, actor: &str, command: Command) -> Answer {
        let own = std::mem::replace(&mut self.actor, Actor(actor.into()));
        let answer = self.apply(command);
        self.actor = own;
        answer
    }

    fn lease(&self, bead_id: &BeadId) -> Lease {
        self.get(bead_id).lease.expect("the bead has a lease")
    }

    fn expire(&mut self, term: u64, bead_id: &BeadId, lease: &Lease) -> Answer {
        let action =
            ControllerAction::ExpireLease { id: bead_id.clone(), lease_id: lease.id, renewed_at: lease.renewed_at };
        self.apply(Command::Controller(crate::command::Controller { term, action }))
    }

    fn event_types(&self) -> Vec<String> {
        match self.query(Query::from(Events { after: 0, types: Vec::new(), limit: 0 })) {
            Ok(Outcome::Events { events, .. }) => events.into_iter().map(|event| event.event_type).collect(),
            other => panic!("events answered {other:?}"),
        }
    }
}

fn fenced(bead_id: &BeadId, lease_id: u64, write: Command) -> Command {
    Command::Txn(Txn {
        conditions: Vec::new(),
        fences: vec![Fence { id: bead_id.clone(), lease_id }],
        writes: vec![write],
    })
}

#[test]
fn a_leased_claim_carries_a_fencing_token_that_grows_with_every_grant() {
    let mut harness = Harness::new();
    let bead_id = harness.create("work");
    let claimed = bead_of(harness.claim_leased(&bead_id, "alice", 10 * MINUTE_MS));
    let lease = claimed.lease.clone().expect("a leased claim answers its lease");
    assert_eq!((lease.id, lease.holder.as_str(), lease.ttl_ms), (harness.now as u64, "alice", 10 * MINUTE_MS));
    assert_eq!(lease.expires_at, Timestamp(harness.now + 10 * MINUTE_MS as i64));
    let judged = crate::command::JudgedLease { id: bead_id.clone(), lease_id: lease.id, renewed_at: lease.renewed_at };
    assert_eq!(harness.state.lease_marks(), vec![(harness.namespace.clone(), judged, lease.ttl_ms)]);

    // Renewal keeps the id and moves the renewal; a claim again by the holder renews too.
    harness
        .as_actor(
            "alice",
            Command::LeaseRenew(crate::command::LeaseRenew { id: bead_id.clone(), lease_id: Some(lease.id) }),
        )
        .unwrap();
    let renewed = harness.lease(&bead_id);
    assert_eq!(renewed.id, lease.id);
    assert!(renewed.renewed_at > lease.renewed_at && renewed.expires_at > lease.expires_at);

    // A claim again by the holder, with a lease, renews the same lease.
    let again = bead_of(harness.claim_leased(&bead_id, "alice", 5 * MINUTE_MS)).lease.unwrap();
    assert_eq!((again.id, again.ttl_ms), (lease.id, 5 * MINUTE_MS));
    assert!(again.renewed_at > renewed.renewed_at);

    // Released, then granted to another: a higher id.
    harness
        .as_actor("alice", Command::LeaseRelease(crate::command::LeaseRelease { id: bead_id.clone(), lease_id: None }))
        .unwrap();
    let released = harness.get(&bead_id);
    assert_eq!((released.status, released.assignee.as_str(), released.lease.is_none()), (Status::Open, "", true));
    let next = bead_of(harness.claim_leased(&bead_id, "bob", MINUTE_MS)).lease.unwrap();
    assert!(next.id > lease.id, "{} > {}", next.id, lease.id);
    assert!(harness.event_types().contains(&event_type::LEASE_RELEASED.to_string()));
}

#[test]
fn only_the_holder_renews_or_releases_and_a_stale_lease_id_is_refused() {
    let mut harness = Harness::new();
    let bead_id = harness.create("work");
    let lease = bead_of(harness.claim_leased(&bead_id, "alice", MINUTE_MS)).lease.unwrap();
    let before = content(&harness.state);
    for (actor, command) in [
        ("bob", Command::LeaseRenew(crate::command::LeaseRenew { id: bead_id.clone(), lease_id: None })),
        ("bob", Command::LeaseRelease(crate::command::LeaseRelease { id: bead_id.clone(), lease_id: None })),
    ] {
        match harness.as_actor(actor, command) {
            Err(refusal @ Refusal::NotLeaseHolder { .. }) => {
                assert!(refusal.to_string().contains("is leased to alice"), "{refusal}");
            }
            other => panic!("another actor is refused, got {other:?}"),
        }
    }
    let stale = Command::LeaseRenew(crate::command::LeaseRenew { id: bead_id.clone(), lease_id: Some(lease.id + 1) });
    assert!(matches!(harness.as_actor("alice", stale), Err(Refusal::LeaseLost { .. })));
    assert_eq!(content(&harness.state), before, "refusals change nothing");
    let other = harness.create("other");
    let wrong_bead =
        fenced(&other, lease.id, Command::Close(crate::command::Close { ids: vec![other.clone()], reason: None }));
    let refusal = harness.apply(wrong_bead).unwrap_err();
    assert!(refusal.to_string().contains("has no lease (status open)"), "{refusal}");
    let unleased = harness.create("plain");
    harness.claim(&unleased, "alice").unwrap();
    let refusal = harness
        .as_actor("alice", Command::LeaseRenew(crate::command::LeaseRenew { id: unleased, lease_id: None }))
        .unwrap_err();
    assert!(
        refusal.to_string().contains("holds no lease (it was claimed without --lease, or its lease expired)"),
        "{refusal}"
    );
}

#[test]
fn leases_out_of_range_are_refused() {
    let mut harness = Harness::new();
    let bead_id = harness.create("work");
    for lease_ms in [0, 999, crate::limits::LEASE_MS_MAX + 1, u64::MAX] {
        match harness.claim_leased(&bead_id, "alice", lease_ms) {
            Err(Refusal::Invalid(message)) => assert!(message.contains("out of range"), "{message}"),
            other => panic!("a lease of {lease_ms} ms is refused, got {other:?}"),
        }
    }
    assert_eq!(harness.get(&bead_id).status, Status::Open, "nothing was claimed");
}

#[test]
fn a_write_fenced_by_a_lost_lease_is_refused_and_the_new_holders_work_stands() {
    let mut harness = Harness::new();
    let bead_id = harness.create("work");
    let old = bead_of(harness.claim_leased(&bead_id, "alice", MINUTE_MS)).lease.unwrap();
    let note = |text: &str| {
        Command::Update(UpdateBead { id: bead_id.clone(), notes: Some(text.into()), ..Default::default() })
    };
    harness.apply(fenced(&bead_id, old.id, note("alice's progress"))).expect("the holder's fenced write applies");

    // The lease expires; bob claims; alice comes back late with her old lease id.
    harness.expire(1, &bead_id, &harness.lease(&bead_id)).unwrap();
    let new = bead_of(harness.claim_leased(&bead_id, "bob", MINUTE_MS)).lease.unwrap();
    harness.apply(fenced(&bead_id, new.id, note("bob's work"))).unwrap();
    let before = content(&harness.state);
    let late_close = Command::Close(crate::command::Close { ids: vec![bead_id.clone()], reason: Some("done".into()) });
    match harness.apply(fenced(&bead_id, old.id, late_close)) {
        Err(refusal @ Refusal::LeaseLost { .. }) => {
            let message = refusal.to_string();
            let expected = format!("now held by bob under lease {}", new.id);
            assert!(message.starts_with("claim lost: lease") && message.contains(&expected), "{message}");
        }
        other => panic!("a stale lease's write is refused, got {other:?}"),
    }
    assert_eq!(content(&harness.state), before, "the refused write changed nothing");
    let bead = harness.get(&bead_id);
    assert_eq!((bead.status, bead.notes.as_str(), bead.assignee.as_str()), (Status::InProgress, "bob's work", "bob"));
}

#[test]
fn any_change_that_takes_the_bead_from_its_holder_ends_the_lease() {
    let mut harness = Harness::new();
    for (name, change) in [
        ("close", Command::Close(crate::command::Close { ids: vec![BeadId::from("st-1")], reason: None })),
        (
            "reassign",
            Command::Update(UpdateBead { id: "st-1".into(), assignee: Some("bob".into()), ..Default::default() }),
        ),
        ("reopen", Command::Reopen(crate::command::Reopen { id: "st-1".into() })),
    ] {
        let mut harness_for = Harness::new();
        let bead_id = harness_for.create("work");
        harness_for.claim_leased(&bead_id, "alice", MINUTE_MS).unwrap();
        harness_for.apply(change).unwrap();
        assert_eq!(harness_for.get(&bead_id).lease, None, "{name} ends the lease");
        assert!(harness_for.state.lease_marks().is_empty(), "{name}: the sweep sees no lease");
    }
    // An update that leaves the holder in charge keeps it.
    let bead_id = harness.create("work");
    harness.claim_leased(&bead_id, "alice", MINUTE_MS).unwrap();
    harness
        .apply(Command::Update(UpdateBead { id: bead_id.clone(), notes: Some("n".into()), ..Default::default() }))
        .unwrap();
    assert!(harness.get(&bead_id).lease.is_some());
}

#[test]
fn an_expiry_reopens_the_bead_once_and_dead_letters_it_after_the_limit() {
    let mut harness = Harness::new();
    let bead_id = harness.create("flaky");
    for delivery in 1..=MAX_DELIVERIES_DEFAULT {
        let lease = bead_of(harness.claim_leased(&bead_id, "alice", MINUTE_MS)).lease.unwrap();
        let expired = beads_of(harness.expire(1, &bead_id, &lease));
        assert_eq!(expired.len(), 1, "delivery {delivery}: the current lease expires");
        assert!(beads_of(harness.expire(1, &bead_id, &lease)).is_empty(), "applying it twice is harmless");
        let bead = harness.get(&bead_id);
        assert_eq!((bead.delivery_count, bead.assignee.as_str(), bead.lease.is_none()), (delivery, "", true));
        if delivery < MAX_DELIVERIES_DEFAULT {
            assert_eq!(bead.status, Status::Open, "delivery {delivery}: back to open");
            assert!(harness.ready_all().contains(&bead_id));
        } else {
            assert_eq!(bead.status, Status::Blocked, "the last delivery dead-letters it");
            assert!(bead.labels.contains(LABEL_DEAD_LETTER));
            assert!(!harness.ready_all().contains(&bead_id));
        }
    }
    // Reopening a dead-lettered bead gives it a fresh set of deliveries.
    let reopened = bead_of(harness.apply(Command::Reopen(crate::command::Reopen { id: bead_id.clone() })));
    assert_eq!((reopened.status, reopened.delivery_count), (Status::Open, 0));
    assert!(!reopened.labels.contains(LABEL_DEAD_LETTER));
    let types = harness.event_types();
    let expired = types.iter().filter(|kind| *kind == event_type::LEASE_EXPIRED).count();
    assert_eq!(expired, MAX_DELIVERIES_DEFAULT as usize);
    assert!(types.contains(&event_type::BEAD_DEAD_LETTERED.to_string()));
}

#[test]
fn a_lease_renewed_after_the_leader_judged_it_is_not_expired() {
    let mut harness = Harness::new();
    let bead_id = harness.create("work");
    let judged = bead_of(harness.claim_leased(&bead_id, "alice", MINUTE_MS)).lease.unwrap();
    harness
        .as_actor("alice", Command::LeaseRenew(crate::command::LeaseRenew { id: bead_id.clone(), lease_id: None }))
        .unwrap();
    assert!(beads_of(harness.expire(1, &bead_id, &judged)).is_empty(), "a renewal in between keeps the lease");
    assert_eq!(harness.get(&bead_id).assignee, "alice");
}

#[test]
fn a_controller_action_of_a_lower_term_than_one_applied_is_refused() {
    let mut harness = Harness::new();
    let bead_id = harness.create("work");
    let lease = bead_of(harness.claim_leased(&bead_id, "alice", MINUTE_MS)).lease.unwrap();
    harness
        .apply(Command::Controller(crate::command::Controller { term: 7, action: ControllerAction::Begin }))
        .unwrap();
    assert_eq!(harness.state.controller_term(), 7);
    let before = content(&harness.state);
    match harness.expire(6, &bead_id, &lease) {
        Err(Refusal::StaleControllerTerm { term: 6, current: 7 }) => {}
        other => panic!("a deposed leader's action is refused, got {other:?}"),
    }
    assert_eq!(content(&harness.state), before);
    assert_eq!(beads_of(harness.expire(7, &bead_id, &lease)).len(), 1, "the current term acts");
    // An action names no namespace into being.
    harness.namespace = Namespace("elsewhere".into());
    harness.expire(7, &bead_id, &lease).unwrap();
    assert!(!harness.state.namespaces.contains_key(&Namespace("elsewhere".into())));
}

#[test]
fn ready_claim_hook_claim_and_update_claim_take_a_lease_too() {
    let mut harness = Harness::new();
    let first = harness.create("first");
    let next = Command::ClaimNext(crate::command::ClaimNext {
        actor: Actor("alice".into()),
        filter: ReadyFilter::default(),
        lease_ms: Some(MINUTE_MS),
    });
    let claimed = beads_of(harness.apply(next)).remove(0);
    assert_eq!((claimed.id.clone(), claimed.lease.map(|lease| lease.holder)), (first, Some("alice".to_string())));

    let second =
        harness.create_with(CreateBead { title: "second".into(), assignee: "bob".into(), ..Default::default() });
    let hook = Command::HookClaim(crate::command::HookClaim {
        agent: Actor("bob".into()),
        pool: None,
        lease_ms: Some(MINUTE_MS),
    });
    let hooked = beads_of(harness.apply(hook)).remove(0);
    assert_eq!((hooked.id.clone(), hooked.lease.map(|lease| lease.holder)), (second, Some("bob".to_string())));

    let third = harness.create("third");
    let update = |lease_ms, claim_for: Option<&str>| {
        Command::Update(UpdateBead {
            id: third.clone(),
            claim_for: claim_for.map(|actor| Actor(actor.into())),
            lease_ms,
            ..Default::default()
        })
    };
    match harness.apply(update(Some(MINUTE_MS), None)) {
        Err(Refusal::Invalid(message)) => assert!(message.contains("add --claim"), "{message}"),
        other => panic!("a lease without a claim is refused, got {other:?}"),
    }
    let updated = bead_of(harness.apply(update(Some(MINUTE_MS), Some("carol"))));
    assert_eq!(updated.lease.map(|lease| lease.holder), Some("carol".to_string()));
}

#[test]
fn a_namespace_sets_the_default_lease_and_the_delivery_limit() {
    let mut harness = Harness::new();
    let bead_id = harness.create("work");
    for (bad, says) in [
        (
            Command::NamespaceConfigure(crate::command::NamespaceConfigure {
                default_lease_ms: None,
                max_deliveries: None,
            }),
            "needs a setting",
        ),
        (
            Command::NamespaceConfigure(crate::command::NamespaceConfigure {
                default_lease_ms: Some(Some(10)),
                max_deliveries: None,
            }),
            "out of range",
        ),
        (
            Command::NamespaceConfigure(crate::command::NamespaceConfigure {
                default_lease_ms: None,
                max_deliveries: Some(0),
            }),
            "out of range",
        ),
    ] {
        let before = content(&harness.state);
        match harness.apply(bad) {
            Err(Refusal::Invalid(message)) => assert!(message.contains(says), "{message}"),
            other => panic!("refused, got {other:?}"),
        }
        assert_eq!(content(&harness.state), before);
    }
    let configure = Command::NamespaceConfigure(crate::command::NamespaceConfigure {
        default_lease_ms: Some(Some(MINUTE_MS)),
        max_deliveries: Some(1),
    });
    match harness.apply(configure) {
        Ok(Outcome::Namespaces(infos)) => {
            assert_eq!((infos[0].default_lease_ms, infos[0].max_deliveries), (Some(MINUTE_MS), 1));
        }
        other => panic!("configured, got {other:?}"),
    }
    // A claim that names no lease gets the default; one expiry dead-letters it.
    let lease = bead_of(harness.claim(&bead_id, "alice")).lease.expect("the namespace's default lease");
    assert_eq!(lease.ttl_ms, MINUTE_MS);
    harness.expire(1, &bead_id, &lease).unwrap();
    assert_eq!(harness.get(&bead_id).status, Status::Blocked, "dead-lettered after one delivery");
    // Cleared again: a claim without a lease holds as before leases.
    let other = harness.create("other");
    harness
        .apply(Command::NamespaceConfigure(crate::command::NamespaceConfigure {
            default_lease_ms: Some(None),
            max_deliveries: None,
        }))
        .unwrap();
    assert_eq!(bead_of(harness.claim(&other, "alice")).lease, None);
}

#[test]
fn a_batch_of_expiries_expires_each_lease_still_as_judged_and_no_other() {
    let mut harness = Harness::new();
    let (stale, renewed) = (harness.create("stale"), harness.create("renewed"));
    harness.claim_leased(&stale, "alice", MINUTE_MS).expect("claimed");
    harness.claim_leased(&renewed, "bob", MINUTE_MS).expect("claimed");
    let judged: Vec<crate::command::JudgedLease> =
        harness.state.lease_marks().into_iter().map(|(_, judged, _)| judged).collect();
    assert_eq!(judged.len(), 2);
    harness
        .as_actor("bob", Command::LeaseRenew(crate::command::LeaseRenew { id: renewed.clone(), lease_id: None }))
        .expect("renewed after judgement");
    let action = ControllerAction::ExpireLeases { leases: judged };
    let expired = beads_of(harness.apply(Command::Controller(crate::command::Controller { term: 1, action })));
    assert_eq!(expired.iter().map(|bead| bead.id.clone()).collect::<Vec<_>>(), vec![stale.clone()]);
    assert_eq!(harness.get(&stale).status, Status::Open);
    assert_eq!(harness.get(&renewed).status, Status::InProgress, "a renewal after judgement is kept");
    let too_many = vec![harness.state.lease_marks()[0].1.clone(); crate::limits::EXPIRIES_PER_COMMAND_MAX + 1];
    let refused = harness.apply(Command::Controller(crate::command::Controller {
        term: 1,
        action: ControllerAction::ExpireLeases { leases: too_many },
    }));
    assert!(matches!(refused, Err(Refusal::TooLarge { .. })), "{refused:?}");
}
