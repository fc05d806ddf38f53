//! Orders: stored only with a stored formula and a valid trigger; a firing cooks the formula as
//! a wisp, routes it, and records a closed tracking bead in one command; a trigger fires at most
//! once per window (a stale or early firing is refused and changes nothing), across a replay
//! and whoever proposes it; event orders never trigger themselves; condition orders count beads.

use super::*;
use crate::command::ControllerAction;
use crate::commands::order_get::OrderGet;
use crate::commands::order_list::OrderList;
use crate::state::{ORDER_RUN_LABEL_PREFIX, ORDER_TRACKING_LABEL};

const FORMULA: &str = "formula = \"patrol\"\n[[steps]]\nid = \"look\"\ntitle = \"Look around\"\n[[steps]]\nid = \"report\"\ntitle = \"Report\"\nneeds = [\"look\"]\n";

impl Harness {
    fn with_formula() -> Harness {
        let mut harness = Harness::new();
        harness
            .apply(Command::FormulaPut(crate::command::FormulaPut { source: FORMULA.into() }))
            .expect("formula stored");
        harness
    }

    fn put_order(&mut self, name: &str, body: &str) -> Answer {
        self.apply(Command::OrderPut(crate::command::OrderPut {
            name: name.into(),
            source: format!("[order]\nformula = \"patrol\"\n{body}"),
        }))
    }

    fn order(&self, name: &str) -> crate::outcome::OrderInfo {
        match self.query(Query::from(OrderGet { name: name.into(), now: Timestamp(self.now) })) {
            Ok(Outcome::Orders(mut orders)) => orders.remove(0),
            other => panic!("order get answered {other:?}"),
        }
    }

    fn fire(&mut self, name: &str, seen_fired: u64) -> Answer {
        let action = ControllerAction::FireOrder { name: name.into(), seen_fired };
        self.apply(Command::Controller(crate::command::Controller { term: 1, action }))
    }

    fn due(&self) -> Vec<(String, u64)> {
        let due = crate::state::DutiesDue { orders: true, ..Default::default() };
        let work = self.state.controller_work(Timestamp(self.now + 1), due);
        work.into_iter().flat_map(|(_, work)| work.due_orders).collect()
    }
}

#[test]
fn a_firing_cooks_routes_and_tracks_in_one_command() {
    let mut harness = Harness::with_formula();
    harness.put_order("sweep", "gate = \"cooldown\"\ninterval = \"1h\"\npool = \"dog\"\n").expect("stored");
    assert_eq!(harness.due(), vec![("sweep".to_string(), 0)], "never fired: due at once");
    let beads = beads_of(harness.fire("sweep", 0));
    let (tracking, root, steps) = (&beads[0], &beads[1], &beads[2..]);
    assert_eq!(tracking.title, "order:sweep");
    assert_eq!(tracking.status, Status::Closed);
    assert!(tracking.ephemeral, "tracking beads are wisps: the wisp GC collects them");
    for label in [format!("{ORDER_RUN_LABEL_PREFIX}sweep"), ORDER_TRACKING_LABEL.to_string()] {
        assert!(tracking.labels.contains(&label), "{label}");
    }
    assert_eq!(tracking.metadata.get("order.wisp"), Some(&root.id.0));
    assert_eq!(root.bead_type, MOLECULE_TYPE);
    assert!(root.ephemeral && root.labels.contains(&format!("{ORDER_RUN_LABEL_PREFIX}sweep")));
    assert_eq!(steps.len(), 2);
    for bead in &beads[1..] {
        assert!(bead.labels.contains("pool:dog"), "{} is routed to the pool", bead.id);
    }
    let info = harness.order("sweep");
    assert_eq!((info.fired, info.last_run.as_str()), (1, tracking.id.0.as_str()));
    assert!(harness.due().is_empty(), "not due again within the hour");
}

#[test]
fn a_window_fires_once_whoever_proposes_it() {
    let mut harness = Harness::with_formula();
    harness.put_order("sweep", "gate = \"cooldown\"\ninterval = \"1m\"\n").expect("stored");
    harness.fire("sweep", 0).expect("the first firing");
    let beads = harness.state.bead_count();
    // A second leader (or a replayed proposal) judged the same window: refused, nothing changes.
    assert!(matches!(harness.fire("sweep", 0), Err(Refusal::Invalid(message)) if message.contains("fired since")));
    // One that saw the firing but came too early: refused too.
    assert!(matches!(harness.fire("sweep", 1), Err(Refusal::Invalid(message)) if message.contains("not due")));
    assert_eq!(harness.state.bead_count(), beads, "a refused firing leaves nothing behind");
    assert_eq!(harness.order("sweep").fired, 1);
    harness.now += 60_000;
    harness.fire("sweep", 1).expect("the next window fires");
    assert_eq!(harness.order("sweep").fired, 2);
    // A stale controller term is refused before anything is judged.
    harness
        .apply(Command::Controller(crate::command::Controller { term: 5, action: ControllerAction::Begin }))
        .expect("a new term begins");
    assert!(matches!(harness.fire("sweep", 2), Err(Refusal::StaleControllerTerm { term: 1, current: 5 })));
}

#[test]
fn a_manual_run_fires_any_order_and_restarts_its_cooldown() {
    let mut harness = Harness::with_formula();
    harness.put_order("by-hand", "gate = \"manual\"\nagent = \"mayor\"\n").expect("stored");
    assert!(harness.due().is_empty(), "a manual order is never due");
    let beads = beads_of(harness.apply(Command::OrderRun(crate::command::OrderRun { name: "by-hand".into() })));
    assert!(beads[1..].iter().all(|bead| bead.assignee == "mayor"));
    harness.put_order("cool", "gate = \"cooldown\"\ninterval = \"1h\"\n").expect("stored");
    harness.apply(Command::OrderRun(crate::command::OrderRun { name: "cool".into() })).expect("runs");
    assert!(harness.due().is_empty(), "a manual run counts as the last firing");
    assert!(
        matches!(harness.apply(Command::OrderRun(crate::command::OrderRun { name: "nope".into() })), Err(Refusal::Invalid(message)) if message.contains("not found"))
    );
}

#[test]
fn cron_orders_fire_once_per_matching_minute() {
    let mut harness = Harness::with_formula();
    harness.now = 1_800_000_000_000; // a minute boundary: 2027-01-15T08:00:00Z
    harness.put_order("every-minute", "gate = \"cron\"\nschedule = \"* * * * *\"\n").expect("stored");
    harness.put_order("never-now", "gate = \"cron\"\nschedule = \"0 0 29 2 *\"\n").expect("stored");
    assert_eq!(harness.due(), vec![("every-minute".to_string(), 0)]);
    harness.fire("every-minute", 0).expect("fires");
    assert!(harness.due().is_empty(), "once in this minute");
    assert!(harness.fire("never-now", 0).is_err(), "a schedule that does not match now is refused");
    harness.now += 60_000;
    assert_eq!(harness.due(), vec![("every-minute".to_string(), 1)]);
    let info = harness.order("every-minute");
    assert_eq!(info.last_window as i64, 1_800_000_000_000 / 60_000);
}

#[test]
fn event_orders_fire_once_for_the_events_since_and_never_for_their_own() {
    let mut harness = Harness::with_formula();
    harness.put_order("on-close", "gate = \"event\"\non = \"bead.created\"\n").expect("stored");
    // Nothing created since the order was stored... but the formula and order writes made no
    // bead events, so there is no event yet.
    assert!(harness.due().is_empty());
    harness.create("one");
    harness.create("two");
    assert_eq!(harness.due(), vec![("on-close".to_string(), 0)]);
    harness.fire("on-close", 0).expect("fires once for both");
    assert!(harness.due().is_empty(), "its own firing created beads, and does not trigger it again");
    harness.create("three");
    assert_eq!(harness.due(), vec![("on-close".to_string(), 1)]);
}

#[test]
fn condition_orders_count_beads() {
    let mut harness = Harness::with_formula();
    harness
        .put_order("backlog", "gate = \"condition\"\ninterval = \"1m\"\n[order.when]\nstatus = \"ready\"\nlabel = \"review\"\nat_least = 2\n")
        .expect("stored");
    let labelled = |title: &str| CreateBead {
        title: title.into(),
        labels: BTreeSet::from(["review".to_string()]),
        ..Default::default()
    };
    harness.create_with(labelled("a"));
    harness.create("unlabelled");
    assert!(harness.due().is_empty(), "one ready bead with the label is not enough");
    assert!(harness.fire("backlog", 0).is_err(), "the state judges the condition itself");
    harness.create_with(labelled("b"));
    assert_eq!(harness.due(), vec![("backlog".to_string(), 0)]);
    harness.fire("backlog", 0).expect("fires");
    assert!(harness.due().is_empty(), "not again within its interval");
}

#[test]
fn bad_orders_are_refused_and_store_nothing() {
    let mut harness = Harness::with_formula();
    for (body, field) in [
        ("gate = \"hourly\"\n", "gate"),
        ("gate = \"cron\"\nschedule = \"every day\"\n", "schedule"),
        ("gate = \"cooldown\"\n", "interval"),
        ("gate = \"condition\"\ncheck = \"test -f /tmp/x\"\n", "check"),
    ] {
        match harness.put_order("bad", body) {
            Err(Refusal::Invalid(message)) => assert!(message.contains(field), "{body}: {message}"),
            other => panic!("{body}: {other:?}"),
        }
    }
    let unknown_formula = "[order]\nformula = \"missing\"\ngate = \"manual\"\n";
    match harness
        .apply(Command::OrderPut(crate::command::OrderPut { name: "bad".into(), source: unknown_formula.into() }))
    {
        Err(Refusal::Invalid(message)) => {
            assert!(message.contains("formula") && message.contains("missing"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(harness.query(Query::from(OrderList { now: Timestamp(harness.now) })), Ok(Outcome::Orders(orders)) if orders.is_empty())
    );
}

#[test]
fn a_replaced_order_keeps_its_firings_and_a_deleted_one_is_gone() {
    let mut harness = Harness::with_formula();
    harness.put_order("sweep", "gate = \"cooldown\"\ninterval = \"1h\"\n").expect("stored");
    harness.fire("sweep", 0).expect("fires");
    harness.put_order("sweep", "gate = \"cooldown\"\ninterval = \"2h\"\n").expect("replaced");
    let info = harness.order("sweep");
    assert_eq!((info.fired, info.trigger.as_str()), (1, "cooldown 2h0m0s"));
    harness.apply(Command::OrderDelete(crate::command::OrderDelete { name: "sweep".into() })).expect("deleted");
    assert!(harness.query(Query::from(OrderGet { name: "sweep".into(), now: Timestamp(harness.now) })).is_err());
}

#[test]
fn controller_work_finds_old_wisps_and_finished_convoys() {
    let mut harness = Harness::with_formula();
    let wisp = harness.create_with(CreateBead { title: "w".into(), ephemeral: true, ..Default::default() });
    harness.close(&wisp).expect("closed");
    let due = |ttl: i64| crate::state::DutiesDue { wisp_ttl_ms: Some(ttl), convoys: true, ..Default::default() };
    let work = |harness: &Harness, ttl: i64| harness.state.controller_work(Timestamp(harness.now), due(ttl));
    assert!(work(&harness, 60_000).is_empty(), "younger than the TTL");
    harness.now += 60_000;
    assert!(work(&harness, 60_000)[0].1.wisps);
    let collected = harness.apply(Command::Controller(crate::command::Controller {
        term: 1,
        action: ControllerAction::CollectWisps { older_than_ms: 60_000 },
    }));
    assert_eq!(collected, Ok(Outcome::Purged { purged_count: 1 }));
    assert!(work(&harness, 60_000).is_empty());
}

#[test]
fn an_event_order_counts_only_later_events_and_a_new_kind_of_trigger_starts_afresh() {
    let mut harness = Harness::with_formula();
    harness.create("before the order");
    harness.put_order("watcher", "gate = \"event\"\non = \"bead.created\"\n").expect("stored");
    assert!(harness.due().is_empty(), "events from before the order was stored do not fire it");
    // A cooldown order that fired, turned into a cron order: its cooldown window (a time in ms)
    // must not stand for a cron minute, or it would never fire again.
    harness.put_order("turned", "gate = \"cooldown\"\ninterval = \"1h\"\n").expect("stored");
    harness.fire("turned", 0).expect("fires");
    harness.put_order("turned", "gate = \"cron\"\nschedule = \"* * * * *\"\n").expect("replaced");
    harness.now += 60_000;
    assert!(harness.due().contains(&("turned".to_string(), 1)), "{:?}", harness.due());
}
