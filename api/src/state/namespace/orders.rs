//! Orders of one namespace ([`crate::order`]): storing them, judging whether one is due, and
//! firing one.
//!
//! A firing cooks the order's formula as a wisp, labels its root `order-run:<name>`, routes it
//! to the order's pool or agent, and records a closed tracking bead `order:<name>` (labels
//! `order-run:<name>` and `order-tracking`), as Gas City's controller does, all in one command:
//! it applies whole or not at all (a journal undoes a half-done firing). The order's
//! [`OrderRuns`] record the firing in the same command.
//!
//! Invariant: a trigger fires at most once per window. The controller's firing names how many
//! firings it saw ([`OrderRuns::fired`]) and is refused once that changed; the state then judges
//! the window itself at the proposal's time, so neither a second leader nor a replayed proposal
//! fires a window twice.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::NamespaceState;
use super::query::Source;
use crate::input::{Cook, CreateBead, FormulaSource, ListSort, Sling};
use crate::limits::ORDERS_PER_NAMESPACE_MAX;
use crate::model::{Bead, BeadId, Status, Timestamp};
use crate::order::{Order, OrderRuns, Target, Trigger};
use crate::outcome::{OrderInfo, Outcome, Refusal};
use crate::state::closed_index::Listing;
use crate::state::index::CreatedKey;

/// Label of every bead a firing of order `<name>` makes: `order-run:<name>`.
pub const ORDER_RUN_LABEL_PREFIX: &str = "order-run:";
/// Label of a firing's tracking bead.
pub const ORDER_TRACKING_LABEL: &str = "order-tracking";
/// Metadata key on a firing's wisp root and tracking bead: the order's name.
pub const ORDER_KEY: &str = "gc.order";

/// What is persisted of an order: its source and its firings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRecord {
    /// The TOML source.
    pub source: String,
    /// Its firings.
    pub runs: OrderRuns,
}

/// A stored order: its record, and its source parsed (a source that no longer parses keeps its
/// refusal, which a firing answers).
#[derive(Clone, Debug)]
pub struct StoredOrder {
    pub(in crate::state) record: OrderRecord,
    pub(in crate::state) parsed: Result<Order, Refusal>,
}

impl StoredOrder {
    /// Parses a loaded record.
    pub(in crate::state) fn new(name: &str, record: OrderRecord) -> StoredOrder {
        let parsed = Order::parse(name, &record.source);
        StoredOrder { record, parsed }
    }
}

/// Why a firing happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Firing {
    /// The controller judged the trigger due, having seen this many firings.
    Trigger { seen_fired: u64 },
    /// `strand order run`.
    Manual,
}

impl NamespaceState {
    fn order(&self, name: &str) -> Result<&StoredOrder, Refusal> {
        self.orders
            .get(name)
            .ok_or_else(|| Refusal::Invalid(format!("order {name:?} not found; see `strand order list`")))
    }

    /// Stores an order, replacing one of the same name (its firings are kept).
    pub(crate) fn order_put(&mut self, name: &str, source: &str, now: Timestamp) -> Result<Outcome, Refusal> {
        let order = Order::parse(name, source)?;
        if !self.formulas.contains_key(&order.formula) {
            return Err(Refusal::Invalid(format!(
                "order {name:?}: formula: no formula {:?} in this namespace; store it first with `strand formula put FILE`",
                order.formula
            )));
        }
        if !self.orders.contains_key(name) && self.orders.len() >= ORDERS_PER_NAMESPACE_MAX {
            return Err(Refusal::Invalid(format!(
                "namespace holds {ORDERS_PER_NAMESPACE_MAX} orders; delete some first"
            )));
        }
        let previous = self.orders.get(name);
        let mut runs = previous.map(|stored| stored.record.runs.clone()).unwrap_or_default();
        // A window means something else to another kind of trigger (a cron minute, an event
        // sequence number, a time): a new kind starts afresh, and an event order counts only
        // the events after it was stored.
        let same_kind = previous
            .and_then(|stored| stored.parsed.as_ref().ok())
            .is_some_and(|old| std::mem::discriminant(&old.trigger) == std::mem::discriminant(&order.trigger));
        if !same_kind {
            runs.last_window = match order.trigger {
                Trigger::Event { .. } => self.meta.last_event_seq(),
                _ => 0,
            };
        }
        let stored = StoredOrder { record: OrderRecord { source: source.to_string(), runs }, parsed: Ok(order) };
        let info = order_info(name, &stored, now, true);
        self.orders.insert(name.to_string(), stored);
        self.dirty_orders.insert(name.to_string());
        Ok(Outcome::Orders(vec![info]))
    }

    /// Removes an order.
    pub(crate) fn order_delete(&mut self, name: &str) -> Result<Outcome, Refusal> {
        self.order(name)?;
        self.orders.remove(name);
        self.dirty_orders.insert(name.to_string());
        Ok(Outcome::Done)
    }

    /// One order with its source and firings.
    pub(crate) fn order_get(&self, name: &str, now: Timestamp) -> Result<Outcome, Refusal> {
        Ok(Outcome::Orders(vec![order_info(name, self.order(name)?, now, true)]))
    }

    /// Every order, by name, without sources.
    pub(crate) fn order_list(&self, now: Timestamp) -> Outcome {
        Outcome::Orders(self.orders.iter().map(|(name, stored)| order_info(name, stored, now, false)).collect())
    }

    /// How many beads a condition's query counts, up to its `at_least`.
    fn condition_count<'a>(&'a self, when: &'a crate::order::Condition, now: Timestamp) -> u64 {
        let matches = |bead: &Bead| {
            when.label.as_ref().is_none_or(|label| bead.labels.contains(label))
                && when.bead_type.as_ref().is_none_or(|bead_type| &bead.bead_type == bead_type)
        };
        // Counting stops at `at_least`: that is all the condition asks.
        let enough = usize::try_from(when.at_least).unwrap_or(usize::MAX);
        let count = |ids: &mut dyn Iterator<Item = &'a BeadId>| {
            ids.filter(|bead_id| self.beads.get(bead_id).is_some_and(|bead| matches(&bead))).take(enough).count() as u64
        };
        match when.status.as_str() {
            "ready" => {
                let keys_of = |index: &'a crate::state::index::ReadyIndex| match &when.label {
                    Some(label) => index.by_label.get(label),
                    None => Some(&index.all),
                };
                let keys = keys_of(&self.indexes.ready).into_iter().chain(keys_of(&self.indexes.ready_ephemeral));
                let not_deferred =
                    |bead_id: &&BeadId| self.beads.at(bead_id).defer_until.is_none_or(|until| until <= now);
                count(&mut keys.flatten().map(|key| &*key.created.id).filter(not_deferred))
            }
            "blocked" => count(&mut self.indexes.blocked.iter()),
            status => {
                // Held beads are judged on the indexes alone, walking the smallest of the sets the
                // condition names; cold (closed) beads by walking the smallest of its listings on
                // disk, reading each back, until `at_least` is reached.
                let status = Status::parse(status).unwrap_or(Status::Open);
                let held = self.held_with_status_count(when, status, enough);
                if status != Status::Closed || held >= enough {
                    return held as u64;
                }
                let named = [when.label.as_deref().map(Listing::Label), when.bead_type.as_deref().map(Listing::Type)];
                let listing = named
                    .into_iter()
                    .flatten()
                    .min_by_key(|listing| self.cold_counts.get(*listing))
                    .unwrap_or(Listing::All);
                let source = Source { held: None, cold: Some(listing) };
                let cold = self
                    .source_keys(source, ListSort::CreatedAsc, None)
                    .filter(|key| matches(&self.beads.at(&key.id)))
                    .take(enough - held)
                    .count();
                (held + cold) as u64
            }
        }
    }

    /// How many held beads with `status` the condition's label and type name, up to `enough`,
    /// judged on the memory indexes alone.
    fn held_with_status_count(&self, when: &crate::order::Condition, status: Status, enough: usize) -> usize {
        fn set_of<'s>(
            index: &'s std::collections::HashMap<String, BTreeSet<CreatedKey>>,
            name: &Option<String>,
        ) -> Option<Option<&'s BTreeSet<CreatedKey>>> {
            name.as_ref().map(|name| index.get(name))
        }
        let named = [set_of(&self.indexes.by_label, &when.label), set_of(&self.indexes.by_type, &when.bead_type)];
        let mut sets: Vec<&BTreeSet<CreatedKey>> = Vec::new();
        for set in named.into_iter().flatten() {
            match set {
                Some(set) => sets.push(set),
                None => return 0,
            }
        }
        let Some(with_status) = self.indexes.by_status.get(&status) else { return 0 };
        sets.push(with_status);
        sets.sort_by_key(|set| set.len());
        let (smallest, others) = sets.split_first().expect("the status's set is in");
        smallest.iter().filter(|key| others.iter().all(|set| set.contains(*key))).take(enough).count()
    }

    /// The highest sequence number of an event of type `on` after `after` (events of earlier
    /// firings excluded by the cursor), if any is retained.
    fn newest_event_after(&self, on: &str, after: u64) -> Option<u64> {
        let after = after.max(self.meta.compacted_through);
        self.events
            .range(after.saturating_add(1)..)
            .rev()
            .find(|(_, event)| event.event_type == on)
            .map(|(seq, _)| *seq)
    }

    /// The window a firing of `order` at `now` takes, if its trigger is due: time, then the
    /// namespace's part (a matching event, a condition that holds).
    fn due_window(&self, order: &Order, runs: &OrderRuns, now: Timestamp) -> Option<u64> {
        let window = order.time_window(runs, now)?;
        match &order.trigger {
            Trigger::Event { on } => self.newest_event_after(on, runs.last_window).map(|_| window),
            Trigger::Condition { when, .. } => (self.condition_count(when, now) >= when.at_least).then_some(window),
            _ => Some(window),
        }
    }

    /// The enabled orders due at `now`, each with the firings seen (what the controller reads).
    pub(in crate::state) fn due_orders(&self, now: Timestamp) -> Vec<(String, u64)> {
        let mut due = Vec::new();
        for (name, stored) in &self.orders {
            let Ok(order) = &stored.parsed else { continue };
            if order.enabled && self.due_window(order, &stored.record.runs, now).is_some() {
                due.push((name.clone(), stored.record.runs.fired));
            }
        }
        due
    }

    /// Fires an order: refused when a trigger's firing is stale (another firing came first) or
    /// its trigger is not due at `now`.
    pub(crate) fn order_fire(&mut self, name: &str, firing: Firing, now: Timestamp) -> Result<Outcome, Refusal> {
        let stored = self.order(name)?;
        let order = stored.parsed.clone()?;
        let runs = stored.record.runs.clone();
        let window = match firing {
            Firing::Trigger { seen_fired } => {
                if seen_fired != runs.fired {
                    return Err(Refusal::Invalid(format!(
                        "order {name:?} fired since this firing was judged ({} firings, not {seen_fired}); nothing to do",
                        runs.fired
                    )));
                }
                if !order.enabled {
                    return Err(Refusal::Invalid(format!(
                        "order {name:?} is disabled; run it with `strand order run`"
                    )));
                }
                self.due_window(&order, &runs, now)
                    .ok_or_else(|| Refusal::Invalid(format!("order {name:?} is not due at {}", now.0)))?
            }
            Firing::Manual => match &order.trigger {
                Trigger::Cron { .. } => runs.last_window,
                _ => u64::try_from(now.0).unwrap_or(0),
            },
        };
        self.begin_journal();
        let fired = self.fire_beads(&order, window, now);
        let beads = match fired {
            Ok(beads) => {
                self.journal = None;
                beads
            }
            Err(refusal) => {
                self.roll_back();
                return Err(refusal);
            }
        };
        // An event order's cursor passes its own firing's events, so a firing never triggers
        // itself.
        let last_window = match (&order.trigger, firing) {
            (Trigger::Event { .. }, _) => self.meta.last_event_seq() + self.pending_events.len() as u64,
            (_, Firing::Manual) => runs.last_window.max(window),
            _ => window,
        };
        let stored = self.orders.get_mut(name).expect("checked above");
        stored.record.runs = OrderRuns {
            fired: runs.fired + 1,
            last_fired_at: Some(now),
            last_window,
            last_run: Some(beads[0].id.0.clone()),
        };
        self.dirty_orders.insert(name.to_string());
        Ok(Outcome::Beads(beads))
    }

    /// The beads of one firing: the tracking bead, then the wisp's root and steps.
    fn fire_beads(&mut self, order: &Order, window: u64, now: Timestamp) -> Result<Vec<Bead>, Refusal> {
        let run_label = format!("{ORDER_RUN_LABEL_PREFIX}{}", order.name);
        let cook = Cook {
            formula: FormulaSource::Named(order.formula.clone()),
            title: None,
            vars: order.vars.clone(),
            ephemeral: true,
        };
        let metadata = BTreeMap::from([(ORDER_KEY.to_string(), order.name.clone())]);
        let cooked = self.cook_beads(&cook, &metadata, now)?;
        let root_id = cooked[0].id.clone();
        self.modify(&root_id, now, |bead| {
            bead.labels.insert(run_label.clone());
        })?;
        let mut wisp = Vec::with_capacity(cooked.len());
        if let Some(target) = &order.target {
            let (target, pool) = match target {
                Target::Pool(pool) => (pool.clone(), true),
                Target::Agent(agent) => (agent.clone(), false),
            };
            let sling = Sling {
                subject: root_id.0.clone(),
                target,
                pool,
                formula: None,
                vars: BTreeMap::new(),
                no_convoy: true,
                owned: false,
                merge: None,
            };
            // Steps with the root, as a formula sling routes them, so the hook finds them.
            for bead in &cooked[1..] {
                self.route(&bead.id, &sling, now)?;
            }
            self.route(&root_id, &sling, now)?;
        }
        for bead in &cooked {
            wisp.push(self.beads.at(&bead.id).clone());
        }
        let tracking = CreateBead {
            title: format!("order:{}", order.name),
            labels: BTreeSet::from([run_label, ORDER_TRACKING_LABEL.to_string()]),
            metadata: BTreeMap::from([
                (ORDER_KEY.to_string(), order.name.clone()),
                ("order.window".to_string(), window.to_string()),
                ("order.wisp".to_string(), root_id.0.clone()),
            ]),
            ephemeral: true,
            ..Default::default()
        };
        let tracking = self.create_bead(&tracking, now)?;
        let tracking = self.close_one(&tracking.id, Some(format!("dispatched {root_id}")), now)?;
        let mut beads = vec![tracking];
        beads.extend(wisp);
        Ok(beads)
    }
}

/// An order as reads answer it.
fn order_info(name: &str, stored: &StoredOrder, now: Timestamp, with_source: bool) -> OrderInfo {
    let runs = &stored.record.runs;
    let (description, formula, trigger, target, enabled, next_due_ms, error) = match &stored.parsed {
        Ok(order) => (
            order.description.clone(),
            order.formula.clone(),
            order.trigger_text(),
            match &order.target {
                Some(Target::Pool(pool)) => format!("pool:{pool}"),
                Some(Target::Agent(agent)) => agent.clone(),
                None => String::new(),
            },
            order.enabled,
            order.next_due_ms(runs, now).filter(|_| order.enabled),
            String::new(),
        ),
        Err(refusal) => (String::new(), String::new(), String::new(), String::new(), false, None, refusal.to_string()),
    };
    OrderInfo {
        name: name.to_string(),
        description,
        formula,
        trigger,
        target,
        enabled,
        fired: runs.fired,
        last_fired_at: runs.last_fired_at,
        last_window: runs.last_window,
        last_run: runs.last_run.clone().unwrap_or_default(),
        next_due_ms,
        error,
        source: if with_source { stored.record.source.clone() } else { String::new() },
    }
}
