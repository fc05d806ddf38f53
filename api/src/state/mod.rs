//! The deterministic bead state machine: the replicated state and the primitives it offers.
//!
//! [`State::apply`] takes one `Proposal` from the Raft log and answers it; [`State::query`]
//! answers a read. Both are defined with the dispatch above this module (`crate::commands`'s
//! `apply.rs`), which judges a command and hands it to its own file; the state offers the
//! primitives they use (the entry's clock and revision, the dedup table, the token a credential
//! names, a namespace to write or read, the events to settle), and keeps every field private. Nothing
//! here reads a clock or draws a random number, and the only I/O is reading a closed bead back
//! through the storage layer's [`BeadSource`] (`cold`), which answers what was written: the leader
//! stamps the time into the proposal, and the storage layer persists the records that
//! [`State::take_changed_keys`] names, encoding them in place through [`State::changed_records`],
//! then tells [`State::records_written`]. Replaying the same log on any node gives the same state
//! and the same answers.
//!
//! Invariant: nothing in this module imports the command dispatch (`crate::command`,
//! `crate::commands`, `crate::convert`): the state takes a command's plain data from
//! [`crate::input`] (`tests/tests/tidy.rs`, `api_modules_import_in_layers`).
//! Invariant: the state's clock never goes backwards (`now = max(clock, stamped time)`), even when
//! a new leader's clock is behind the old one's.
//! Invariant: a refused command changes nothing but the dedup table and the clock.

mod auth;
pub mod closed_index;
mod cold;
mod index;
mod namespace;
mod session;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::auth::{AuthCommand, Token, TokenHash};
use crate::input::{ControllerAction, JudgedLease, RequestId};
use crate::model::{Actor, Bead, BeadId, DepType, Event, Namespace, Timestamp};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::validate::{validate_namespace, validate_prefix};
pub(crate) use auth::audit;
use closed_index::IndexWrite;
pub use cold::{BeadSource, CacheStats, ColdStore};
pub use namespace::NamespaceMeta;
pub use namespace::NamespaceState;
pub(crate) use namespace::orders::Firing;
pub use namespace::orders::{ORDER_KEY, ORDER_RUN_LABEL_PREFIX, ORDER_TRACKING_LABEL, OrderRecord};
pub use session::Session;
use session::{Seen, Sessions};

/// The key of one persisted record of the state.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RecordKey {
    /// The state's clock.
    Clock,
    /// The highest term of a controller action applied.
    ControllerTerm,
    /// A namespace's settings and counters.
    Namespace(Namespace),
    /// A bead.
    Bead(Namespace, BeadId),
    /// A client session of the dedup table.
    Session(u64),
    /// An event of a namespace's event log.
    Event(Namespace, u64),
    /// A stored formula of a namespace.
    Formula(Namespace, String),
    /// The dependency edges of an id that is not a bead.
    LooseEdges(Namespace, BeadId),
    /// A stored order of a namespace.
    Order(Namespace, String),
    /// Whether auth is enabled.
    AuthEnabled,
    /// A token, by name.
    Token(String),
    /// The apply version, and whether it is pinned (absent: version 1, not pinned).
    ApplyVersion,
}

/// One persisted record of the state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// The state's clock.
    Clock(Timestamp),
    /// The highest term of a controller action applied.
    ControllerTerm(u64),
    /// A namespace's settings and counters.
    Namespace(NamespaceMeta),
    /// A bead.
    Bead(Box<Bead>),
    /// A client session.
    Session(Session),
    /// An event.
    Event(Event),
    /// A formula's TOML source.
    Formula(String),
    /// Dependency edges of an id that is not a bead: target to type.
    LooseEdges(BTreeMap<BeadId, DepType>),
    /// An order's TOML source and its firings.
    Order(OrderRecord),
    /// Whether auth is enabled.
    AuthEnabled(bool),
    /// A token (its hash and rights, never the token).
    Token(crate::auth::Token),
    /// The apply version, and whether it is pinned.
    ApplyVersion(ApplyVersionRecord),
}

/// One record borrowed from the state. It serializes exactly as the [`Record`] it stands for
/// (same variants in the same order; serde writes a `Box` or a reference as what it points to),
/// so the storage layer encodes changed records without cloning them.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename = "Record")]
pub enum RecordRef<'a> {
    /// The state's clock.
    Clock(Timestamp),
    /// The highest term of a controller action applied.
    ControllerTerm(u64),
    /// A namespace's settings and counters.
    Namespace(&'a NamespaceMeta),
    /// A bead.
    Bead(&'a Bead),
    /// A client session.
    Session(&'a Session),
    /// An event.
    Event(&'a Event),
    /// A formula's TOML source.
    Formula(&'a str),
    /// Dependency edges of an id that is not a bead.
    LooseEdges(&'a BTreeMap<BeadId, DepType>),
    /// An order.
    Order(&'a OrderRecord),
    /// Whether auth is enabled.
    AuthEnabled(bool),
    /// A token.
    Token(&'a crate::auth::Token),
    /// The apply version, and whether it is pinned.
    ApplyVersion(ApplyVersionRecord),
}

impl RecordRef<'_> {
    /// An owned copy.
    pub fn to_record(self) -> Record {
        match self {
            RecordRef::Clock(clock) => Record::Clock(clock),
            RecordRef::ControllerTerm(term) => Record::ControllerTerm(term),
            RecordRef::Namespace(meta) => Record::Namespace(meta.clone()),
            RecordRef::Bead(bead) => Record::Bead(Box::new(bead.clone())),
            RecordRef::Session(session) => Record::Session(session.clone()),
            RecordRef::Event(event) => Record::Event(event.clone()),
            RecordRef::Formula(source) => Record::Formula(source.to_string()),
            RecordRef::LooseEdges(edges) => Record::LooseEdges(edges.clone()),
            RecordRef::Order(order) => Record::Order(order.clone()),
            RecordRef::AuthEnabled(enabled) => Record::AuthEnabled(enabled),
            RecordRef::Token(token) => Record::Token(token.clone()),
            RecordRef::ApplyVersion(versions) => Record::ApplyVersion(versions),
        }
    }
}

/// The state's apply version (see [`crate::version`]) and whether it is pinned there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyVersionRecord {
    /// The version of the rules entries apply by.
    pub version: u32,
    /// Held where it is: the leader does not raise it (`strand cluster version pin`).
    pub pinned: bool,
    /// The log index of the entry that set it (0: never set, version 1 from the start); the
    /// entries after it apply by its rules.
    pub since: u64,
}

impl Default for ApplyVersionRecord {
    fn default() -> Self {
        ApplyVersionRecord { version: crate::version::FIRST_APPLY_VERSION, pinned: false, since: 0 }
    }
}

/// The keys of the records changed in one batch, from [`State::take_changed_keys`], and the
/// deletions of closed beads' index entries they bring ([`State::closed_index_writes`]).
#[derive(Debug, Default)]
pub struct ChangedKeys(Vec<RecordKey>, Vec<IndexWrite>);

impl ChangedKeys {
    /// How many keys changed.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The namespaces whose settings or event log changed (every new event changes both).
    pub fn namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.0.iter().filter_map(|key| match key {
            RecordKey::Namespace(namespace) => Some(namespace),
            _ => None,
        })
    }
}

/// Which of the controller's periodic duties are due, so [`State::controller_work`] looks only
/// for their work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DutiesDue {
    /// Judge the orders.
    pub orders: bool,
    /// Look for closed wisps older than this TTL (milliseconds).
    pub wisp_ttl_ms: Option<i64>,
    /// Look for finished convoys.
    pub convoys: bool,
}

/// What the controller's periodic duties find in one namespace ([`State::controller_work`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceWork {
    /// Enabled orders whose trigger is due, each with the firings seen.
    pub due_orders: Vec<(String, u64)>,
    /// Closed wisps older than the TTL wait to be collected.
    pub wisps: bool,
    /// An open, not owned convoy has only closed children.
    pub convoys: bool,
}

/// A record that does not fit its key, met while loading.
#[derive(Debug, thiserror::Error)]
#[error("state record {key:?} holds a value of another kind; the data directory is corrupt")]
pub struct LoadError {
    /// The key whose record did not fit.
    pub key: RecordKey,
}

/// The whole replicated state: every namespace, the dedup table and the clock.
#[derive(Clone, Debug, Default)]
pub struct State {
    namespaces: BTreeMap<Namespace, NamespaceState>,
    sessions: Sessions,
    clock: Timestamp,
    clock_dirty: bool,
    /// The highest term of a controller action applied: actions of lower terms are refused.
    controller_term: u64,
    controller_term_dirty: bool,
    removed_namespaces: BTreeSet<Namespace>,
    /// Records of deleted namespaces still to be removed from disk.
    removed_records: Vec<RecordKey>,
    /// Deleted namespaces whose closed beads' index entries are still to be removed from disk.
    removed_indexes: Vec<Namespace>,
    /// The log index of the proposal being applied.
    revision: u64,
    /// Whether auth is on, and the tokens.
    auth: auth::AuthState,
    /// The apply version every rule that changes an outcome is gated on.
    apply_version: ApplyVersionRecord,
    apply_version_dirty: bool,
    /// Where closed beads are read back from, when they are kept on disk.
    cold: Option<ColdStore>,
}

/// Rebuilds a state from its records, fed one at a time in any order (a scan of the disk), so
/// that a load that keeps closed beads on disk never holds them all.
pub struct StateLoader {
    state: State,
    /// Beads met before their namespace's record.
    waiting_beads: Vec<(Namespace, Box<Bead>)>,
    events: Vec<(Namespace, Event)>,
    formulas: Vec<(Namespace, String, String)>,
    loose: Vec<(Namespace, BeadId, BTreeMap<BeadId, DepType>)>,
    orders: Vec<(Namespace, String, OrderRecord)>,
}

impl StateLoader {
    /// A loader of a state that keeps closed beads on disk, read back through `cold` (the records
    /// fed are that disk's), or, without one, holds every bead in memory.
    pub fn new(cold: Option<ColdStore>) -> StateLoader {
        StateLoader {
            state: State { cold, ..State::default() },
            waiting_beads: Vec::new(),
            events: Vec::new(),
            formulas: Vec::new(),
            loose: Vec::new(),
            orders: Vec::new(),
        }
    }

    /// Takes one record.
    pub fn add(&mut self, key: RecordKey, record: Record) -> Result<(), LoadError> {
        let state = &mut self.state;
        match (key, record) {
            (RecordKey::Event(namespace, _), Record::Event(event)) => self.events.push((namespace, event)),
            (RecordKey::Formula(namespace, name), Record::Formula(source)) => {
                self.formulas.push((namespace, name, source))
            }
            (RecordKey::LooseEdges(namespace, source), Record::LooseEdges(edges)) => {
                self.loose.push((namespace, source, edges))
            }
            (RecordKey::Order(namespace, name), Record::Order(order)) => self.orders.push((namespace, name, order)),
            (RecordKey::Clock, Record::Clock(clock)) => state.clock = clock,
            (RecordKey::ControllerTerm, Record::ControllerTerm(term)) => state.controller_term = term,
            (RecordKey::Namespace(namespace), Record::Namespace(meta)) => {
                let namespace_state = state.new_namespace(&namespace, meta);
                state.namespaces.insert(namespace, namespace_state);
            }
            (RecordKey::Bead(namespace, _), Record::Bead(bead)) => match state.namespaces.get_mut(&namespace) {
                Some(namespace_state) => {
                    namespace_state.load_bead(*bead).map_err(|id| LoadError { key: RecordKey::Bead(namespace, id) })?
                }
                None => self.waiting_beads.push((namespace, bead)),
            },
            (RecordKey::Session(client_id), Record::Session(session)) => state.sessions.load(client_id, session),
            (RecordKey::AuthEnabled, Record::AuthEnabled(enabled)) => state.auth.enabled = enabled,
            (RecordKey::Token(name), Record::Token(token)) if token.name == name => state.auth.load(token),
            (RecordKey::ApplyVersion, Record::ApplyVersion(versions)) => state.apply_version = versions,
            (key, _) => return Err(LoadError { key }),
        }
        Ok(())
    }

    /// The state, once every record was added.
    pub fn finish(self) -> Result<State, LoadError> {
        let StateLoader { mut state, waiting_beads, events, formulas, loose, orders } = self;
        for (namespace, bead) in waiting_beads {
            let Some(namespace_state) = state.namespaces.get_mut(&namespace) else {
                return Err(LoadError { key: RecordKey::Bead(namespace, bead.id.clone()) });
            };
            if let Err(id) = namespace_state.load_bead(*bead) {
                return Err(LoadError { key: RecordKey::Bead(namespace, id) });
            }
        }
        for (namespace, event) in events {
            let Some(namespace_state) = state.namespaces.get_mut(&namespace) else {
                return Err(LoadError { key: RecordKey::Event(namespace, event.seq) });
            };
            namespace_state.load_event(event);
        }
        for (namespace, name, source) in formulas {
            let Some(namespace_state) = state.namespaces.get_mut(&namespace) else {
                return Err(LoadError { key: RecordKey::Formula(namespace, name) });
            };
            namespace_state.load_formula(name, source);
        }
        for (namespace, name, order) in orders {
            let Some(namespace_state) = state.namespaces.get_mut(&namespace) else {
                return Err(LoadError { key: RecordKey::Order(namespace, name) });
            };
            namespace_state.load_order(name, order);
        }
        for (namespace, source, edges) in loose {
            let Some(namespace_state) = state.namespaces.get_mut(&namespace) else {
                return Err(LoadError { key: RecordKey::LooseEdges(namespace, source) });
            };
            namespace_state.load_loose_edges(source, edges);
        }
        for namespace_state in state.namespaces.values_mut() {
            namespace_state.refresh_all();
        }
        state.mark_clean();
        Ok(state)
    }
}

impl State {
    /// An empty state.
    pub fn new() -> State {
        State::default()
    }

    /// Rebuilds a state (indexes included) from its persisted records, in any order, holding
    /// every bead in memory.
    pub fn from_records(records: impl IntoIterator<Item = (RecordKey, Record)>) -> Result<State, LoadError> {
        let mut loader = StateLoader::new(None);
        for (key, record) in records {
            loader.add(key, record)?;
        }
        loader.finish()
    }

    /// Keeps closed beads on disk from now on, read back through `cold`: those held now whose
    /// records are written go cold at once, and every bead written from now on goes cold once it
    /// is closed (see [`State::records_written`]).
    pub fn attach_cold_store(&mut self, cold: ColdStore) {
        for (namespace, namespace_state) in &mut self.namespaces {
            namespace_state.attach_cold(cold.for_namespace(namespace));
        }
        self.cold = Some(cold);
    }

    /// The storage layer wrote the records under `keys` (from [`State::take_changed_keys`], with
    /// nothing applied since): the closed beads among them leave memory, when closed beads are
    /// kept on disk.
    pub fn records_written(&mut self, keys: &ChangedKeys) {
        if self.cold.is_none() {
            return;
        }
        for key in &keys.0 {
            if let RecordKey::Bead(namespace, bead_id) = key
                && let Some(namespace_state) = self.namespaces.get_mut(namespace)
            {
                namespace_state.bead_written(bead_id);
            }
        }
    }

    /// Where this state reads its closed beads from, when it keeps them on disk.
    pub fn cold_store(&self) -> Option<&ColdStore> {
        self.cold.as_ref()
    }

    /// What the cache of cold beads holds and did, when closed beads are kept on disk.
    pub fn cold_cache_stats(&self) -> Option<CacheStats> {
        self.cold.as_ref().map(ColdStore::cache_stats)
    }

    /// How many beads are held in memory (the others are closed and kept on disk).
    pub fn held_bead_count(&self) -> usize {
        self.namespaces.values().map(NamespaceState::held_count).sum()
    }

    /// A new, empty namespace of this state, keeping closed beads on disk if the state does.
    fn new_namespace(&self, namespace: &Namespace, meta: NamespaceMeta) -> NamespaceState {
        let mut namespace_state = NamespaceState::new(meta);
        if let Some(cold) = &self.cold {
            namespace_state.attach_cold(cold.for_namespace(namespace));
        }
        namespace_state
    }

    fn mark_clean(&mut self) {
        for namespace_state in self.namespaces.values_mut() {
            namespace_state.mark_clean();
        }
        self.sessions.dirty.clear();
        self.clock_dirty = false;
        self.controller_term_dirty = false;
        self.apply_version_dirty = false;
        self.auth.enabled_dirty = false;
        self.auth.dirty_tokens.clear();
        self.removed_namespaces.clear();
        self.removed_records.clear();
        self.removed_indexes.clear();
    }

    /// The state's clock: the latest time any applied proposal carried.
    pub fn clock(&self) -> Timestamp {
        self.clock
    }

    /// Number of beads across namespaces.
    pub fn bead_count(&self) -> usize {
        self.namespaces.values().map(NamespaceState::len).sum()
    }

    /// Opens the entry at log index `revision`, stamped `timestamp`, and answers its `now`: every
    /// bead it changes takes `revision` as its revision, the clock moves up to the stamp (never
    /// back), and sessions idle for too long are evicted.
    pub(crate) fn begin_entry(&mut self, revision: u64, timestamp: Timestamp) -> Timestamp {
        self.revision = revision;
        if timestamp > self.clock {
            self.clock = timestamp;
            self.clock_dirty = true;
        }
        let now = self.clock;
        self.sessions.evict(now);
        now
    }

    /// Whether `command`, if it is not refused, changes auth: all but a disable while auth is off.
    pub(crate) fn auth_changes(&self, command: &AuthCommand) -> bool {
        self.auth.changes(command)
    }

    /// The answer the dedup table gives a request it has seen: its recorded answer, or a refusal
    /// when the request is too old or its session expired. `None`: the request is new.
    pub(crate) fn answered(&self, request_id: &RequestId) -> Option<Answer> {
        match self.sessions.check(request_id) {
            Seen::Answered(answer) => Some(answer),
            Seen::New => None,
        }
    }

    /// Settles the events an entry queued in `namespace`: an applied entry's are written, by
    /// `actor` at `now`, keeping the latest `event_retention`; a refused one changed nothing, so
    /// it has nothing to report and its queued events are dropped.
    pub(crate) fn settle_events(
        &mut self,
        namespace: &Namespace,
        applied: bool,
        now: Timestamp,
        actor: &Actor,
        event_retention: u64,
    ) {
        if let Some(namespace_state) = self.namespaces.get_mut(namespace) {
            if applied {
                namespace_state.flush_events(now, &actor.0, event_retention);
            } else {
                namespace_state.discard_pending_events();
            }
        }
    }

    /// Records a request's answer in its client's session, so a retry gets it again.
    pub(crate) fn record_answer(&mut self, request_id: &RequestId, now: Timestamp, answer: &Answer) {
        self.sessions.record(request_id, now, answer);
    }

    /// Applies `write`, which acts on `namespace`: if the namespace did not exist before and the
    /// write is refused, it leaves no namespace behind (and fixes no prefix). If the namespace
    /// was deleted earlier in this batch, its record is still deleted.
    pub(crate) fn apply_to_namespace(
        &mut self,
        namespace: &Namespace,
        write: impl FnOnce(&mut State) -> Answer,
    ) -> Answer {
        let is_new = !self.namespaces.contains_key(namespace);
        let was_removed = self.removed_namespaces.contains(namespace);
        let answer = write(self);
        if is_new && answer.is_err() {
            self.namespaces.remove(namespace);
            if was_removed {
                self.removed_namespaces.insert(namespace.clone());
            }
        }
        answer
    }

    /// The rule of the test-only apply-next mode's version ([`crate::version::NEXT_APPLY_VERSION`]):
    /// a create whose title starts with the canary prefix is refused. `create_title` is the title of the
    /// command being applied when it is a create (`None`: any other command). Gated on the
    /// state's apply version, as every rule that changes an outcome is; with
    /// `STRAND_TEST_UNGATED_CANARY` set, the test mode applies it whatever the version
    /// (`version::canary_next_applies`), the mistake the rolling-upgrade test must catch.
    pub(crate) fn canary_next(&self, create_title: Option<&str>) -> Result<(), Refusal> {
        if crate::version::canary_next_applies(self.apply_version.version)
            && let Some(title) = create_title
            && title.starts_with(crate::version::CANARY_NEXT_PREFIX)
        {
            return Err(canary_next_refusal());
        }
        Ok(())
    }

    /// How many leases are held, across namespaces.
    pub fn lease_count(&self) -> usize {
        self.namespaces.values().map(NamespaceState::lease_count).sum()
    }

    /// Every lease held, as the leader's lease sweep reads it: its namespace, and its bead, id,
    /// renewal and length, without the holder or anything else of the bead.
    pub fn lease_marks(&self) -> Vec<(Namespace, JudgedLease, u64)> {
        let mut marks = Vec::with_capacity(self.lease_count());
        for (namespace, namespace_state) in &self.namespaces {
            marks.extend(namespace_state.lease_marks().map(|(judged, ttl_ms)| (namespace.clone(), judged, ttl_ms)));
        }
        marks
    }

    /// What the due duties find to do at `now`, per namespace: the orders due (with the firings
    /// seen), whether closed wisps older than the TTL wait to be collected, and whether an open
    /// convoy's children are all closed. A duty that is not due is not looked at.
    pub fn controller_work(&self, now: Timestamp, due: DutiesDue) -> Vec<(Namespace, NamespaceWork)> {
        let mut work = Vec::new();
        for (namespace, namespace_state) in &self.namespaces {
            let found = NamespaceWork {
                due_orders: if due.orders { namespace_state.due_orders(now) } else { Vec::new() },
                wisps: due.wisp_ttl_ms.is_some_and(|ttl| namespace_state.has_purgeable(ttl, now)),
                convoys: due.convoys && namespace_state.has_closable_convoy(),
            };
            if !found.due_orders.is_empty() || found.wisps || found.convoys {
                work.push((namespace.clone(), found));
            }
        }
        work
    }

    /// How many orders are stored, across namespaces.
    pub fn order_count(&self) -> usize {
        self.namespaces.values().map(NamespaceState::order_count).sum()
    }

    /// Whether auth is enabled.
    pub fn auth_enabled(&self) -> bool {
        self.auth.enabled
    }

    /// The token a request's credential names: `Ok(None)` when auth is off, an `Unauthenticated`
    /// refusal when the credential is missing or names no token.
    pub fn authenticate(&self, credential: Option<&TokenHash>) -> Result<Option<&Token>, Refusal> {
        self.auth.authenticate(credential)
    }

    /// The highest term of a controller action applied.
    pub fn controller_term(&self) -> u64 {
        self.controller_term
    }

    /// The apply version entries apply by, and whether it is pinned (see [`crate::version`]).
    pub fn apply_version(&self) -> ApplyVersionRecord {
        self.apply_version
    }

    /// The log index of the entry being applied.
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    /// Applies a change of the apply version or its pin.
    pub(crate) fn change_apply_version(&mut self, change: ApplyVersionRecord) {
        if change != self.apply_version {
            self.apply_version = change;
            self.apply_version_dirty = true;
        }
    }

    /// Applies a controller action: refused when a controller of a higher term has acted, so a
    /// deposed leader cannot act late; once applied, its term becomes the fence (a refused
    /// action changes nothing, the fence included). An action never creates a namespace: on a
    /// namespace that does not exist, there is nothing to expire, collect or close.
    pub(crate) fn controller(
        &mut self,
        namespace: &Namespace,
        term: u64,
        action: &ControllerAction,
        now: Timestamp,
    ) -> Answer {
        if term < self.controller_term {
            return Err(Refusal::StaleControllerTerm { term, current: self.controller_term });
        }
        if let Some(namespace_state) = self.namespaces.get_mut(namespace) {
            namespace_state.set_revision(self.revision);
        }
        let answer = match (action, self.namespaces.get_mut(namespace)) {
            (ControllerAction::Begin | ControllerAction::Checkpoint, _) => Ok(Outcome::Done),
            (ControllerAction::SwitchApplyVersion { from, to }, _) => self.switch_apply_version(*from, *to),
            (ControllerAction::FireOrder { .. }, None) => {
                Err(Refusal::Invalid(format!("namespace {namespace} does not exist")))
            }
            (ControllerAction::CollectWisps { .. }, None) => Ok(Outcome::Purged { purged_count: 0 }),
            (_, None) => Ok(Outcome::Beads(Vec::new())),
            (ControllerAction::ExpireLease { id, lease_id, renewed_at }, Some(namespace_state)) => {
                namespace_state.expire_lease(id, *lease_id, *renewed_at, now)
            }
            (ControllerAction::ExpireLeases { leases }, Some(namespace_state)) => {
                namespace_state.expire_leases(leases, now)
            }
            (ControllerAction::CollectWisps { older_than_ms }, Some(namespace_state)) => {
                namespace_state.purge(*older_than_ms, now)
            }
            (ControllerAction::CheckConvoys, Some(namespace_state)) => namespace_state.convoy_check(now),
            (ControllerAction::FireOrder { name, seen_fired }, Some(namespace_state)) => {
                namespace_state.order_fire(name, namespace::orders::Firing::Trigger { seen_fired: *seen_fired }, now)
            }
        };
        if answer.is_ok() && term > self.controller_term {
            self.controller_term = term;
            self.controller_term_dirty = true;
        }
        answer
    }

    /// The leader's switch of the apply version from `from` to `to`.
    fn switch_apply_version(&mut self, from: u32, to: u32) -> Answer {
        let switched = self.switched(from, to)?;
        self.change_apply_version(switched);
        Ok(Outcome::Done)
    }

    /// The apply version record the leader's switch from `from` to `to` leaves the state at, or
    /// why it is refused. Applying it and predicting it (`State::version_after`) both read this.
    pub(crate) fn switched(&self, from: u32, to: u32) -> Result<ApplyVersionRecord, Refusal> {
        let current = self.apply_version;
        if current.version != from || to <= from {
            return Err(Refusal::Invalid(format!(
                "a switch of the apply version from {from} to {to}, and the state is at {}",
                current.version
            )));
        }
        if current.pinned {
            return Err(Refusal::Invalid(format!(
                "the apply version is pinned at {from}; `strand cluster version unpin` lets it rise"
            )));
        }
        Ok(ApplyVersionRecord { version: to, pinned: false, since: self.revision })
    }

    /// The namespace a write goes to, created on first use with `default_prefix` when the write
    /// `may_create` it (`Proposal::may_create_namespace`); otherwise the namespace must exist, and
    /// the refusal suggests one the credential's token may use.
    pub(crate) fn namespace_for_write(
        &mut self,
        namespace: &Namespace,
        default_prefix: &str,
        may_create: bool,
        credential: Option<&TokenHash>,
    ) -> Result<&mut NamespaceState, Refusal> {
        validate_namespace(namespace)?;
        if !self.namespaces.contains_key(namespace) {
            if !may_create {
                return Err(self.namespace_not_found(namespace, credential));
            }
            validate_prefix(default_prefix)?;
            let namespace_state = self.new_namespace(namespace, NamespaceMeta::new(default_prefix));
            self.removed_namespaces.remove(namespace);
            self.namespaces.insert(namespace.clone(), namespace_state);
        }
        let namespace_state = self.namespaces.get_mut(namespace).expect("namespace inserted above");
        namespace_state.set_revision(self.revision);
        Ok(namespace_state)
    }

    /// The refusal of a request for `namespace`, which does not exist, suggesting the existing
    /// namespace closest to its name among those the credential's token may use.
    fn namespace_not_found(&self, namespace: &Namespace, credential: Option<&TokenHash>) -> Refusal {
        let token = self.auth.authenticate(credential).ok().flatten();
        let visible = self.namespaces.keys().filter(|name| token.is_none_or(|token| token.covers(name)));
        let closest = crate::suggest::closest(&namespace.0, visible.map(|name| name.0.as_str()));
        Refusal::NamespaceNotFound { namespace: namespace.0.clone(), closest: closest.map(str::to_string) }
    }

    /// Refuses a request for `namespace` made with `credential` when the namespace does not exist.
    pub fn require_namespace(&self, credential: Option<&TokenHash>, namespace: &Namespace) -> Result<(), Refusal> {
        match self.namespaces.contains_key(namespace) {
            true => Ok(()),
            false => Err(self.namespace_not_found(namespace, credential)),
        }
    }

    /// Creates a namespace with an id prefix; creating it again with the same prefix is a no-op.
    pub(crate) fn namespace_create(&mut self, namespace: &Namespace, prefix: &str) -> Answer {
        // The prefix was checked with the command (`validate_command`).
        validate_namespace(namespace)?;
        if let Some(existing) = self.namespaces.get(namespace) {
            if existing.prefix() != prefix {
                return Err(Refusal::Invalid(format!(
                    "namespace {namespace} already exists with id prefix {:?}; a prefix is fixed at creation",
                    existing.prefix()
                )));
            }
            return Ok(Outcome::Namespaces(vec![existing.info(namespace)]));
        }
        self.removed_namespaces.remove(namespace);
        let namespace_state = self.new_namespace(namespace, NamespaceMeta::new(prefix));
        let info = namespace_state.info(namespace);
        self.namespaces.insert(namespace.clone(), namespace_state);
        Ok(Outcome::Namespaces(vec![info]))
    }

    /// Deletes a namespace with everything in it; refused while it holds beads unless `force`.
    pub(crate) fn namespace_delete(
        &mut self,
        namespace: &Namespace,
        credential: Option<&TokenHash>,
        force: bool,
    ) -> Answer {
        validate_namespace(namespace)?;
        let Some(namespace_state) = self.namespaces.get(namespace) else {
            return Err(self.namespace_not_found(namespace, credential));
        };
        if !namespace_state.is_empty() && !force {
            return Err(Refusal::Invalid(format!(
                "namespace {namespace} holds {}; pass --force to delete it with everything in it",
                crate::printable::counted(namespace_state.len() as u64, "bead")
            )));
        }
        let namespace_state = self.namespaces.remove(namespace).expect("checked above");
        let info = namespace_state.info(namespace);
        self.removed_records.extend(namespace_state.keys_on_disk(namespace));
        self.removed_namespaces.insert(namespace.clone());
        self.removed_indexes.push(namespace.clone());
        Ok(Outcome::Namespaces(vec![info]))
    }

    /// Applies a change of the cluster's auth settings or tokens.
    pub(crate) fn apply_auth(&mut self, command: &AuthCommand, now: Timestamp) -> Answer {
        self.auth.apply(command, now)
    }

    /// Every namespace, with its settings and counts (`Query::Namespaces`).
    pub(crate) fn namespace_listing(&self) -> Outcome {
        Outcome::Namespaces(self.namespaces.iter().map(|(name, state)| state.info(name)).collect())
    }

    /// Every token, by name (`Query::Tokens`).
    pub(crate) fn token_listing(&self) -> Outcome {
        self.auth.listing()
    }

    /// Answers a read of `namespace` by `read`. A namespace never written to reads as empty.
    /// Every answer of beads carries their counts (dependents, comments) from the indexes.
    pub(crate) fn read_namespace(
        &self,
        namespace: &Namespace,
        read: impl FnOnce(&NamespaceState) -> Result<Outcome, Refusal>,
    ) -> Answer {
        validate_namespace(namespace)?;
        let empty;
        let namespace_state = match self.namespaces.get(namespace) {
            Some(namespace_state) => namespace_state,
            None => {
                empty = NamespaceState::new(NamespaceMeta::new(""));
                &empty
            }
        };
        read(namespace_state).map(|outcome| namespace_state.with_counts(outcome))
    }

    /// Takes the keys of every record changed since the last call; [`State::changed_records`]
    /// reads their current values. The storage layer writes them in the same atomic batch as the
    /// applied log index.
    pub fn take_changed_keys(&mut self) -> ChangedKeys {
        let mut keys = Vec::new();
        let mut index_writes: Vec<IndexWrite> = std::mem::take(&mut self.removed_indexes)
            .iter()
            .map(|namespace| {
                let (from, to) = closed_index::namespace_range(namespace);
                IndexWrite::DeleteRange(from, to)
            })
            .collect();
        if self.clock_dirty {
            keys.push(RecordKey::Clock);
        }
        if self.controller_term_dirty {
            keys.push(RecordKey::ControllerTerm);
        }
        if self.auth.enabled_dirty {
            keys.push(RecordKey::AuthEnabled);
        }
        if self.apply_version_dirty {
            keys.push(RecordKey::ApplyVersion);
        }
        keys.extend(std::mem::take(&mut self.auth.dirty_tokens).into_iter().map(RecordKey::Token));
        keys.extend(std::mem::take(&mut self.removed_namespaces).into_iter().map(RecordKey::Namespace));
        keys.append(&mut self.removed_records);
        for (namespace, namespace_state) in &mut self.namespaces {
            namespace_state.take_changed_keys(namespace, &mut keys, &mut index_writes);
        }
        keys.extend(std::mem::take(&mut self.sessions.dirty).into_iter().map(RecordKey::Session));
        self.mark_clean();
        ChangedKeys(keys, index_writes)
    }

    /// The current record under each changed key, borrowed: `None` means it was removed. A key
    /// changed several times in a batch (removed, then written again) reads as its final value.
    pub fn changed_records<'a>(
        &'a self,
        keys: &'a ChangedKeys,
    ) -> impl Iterator<Item = (&'a RecordKey, Option<RecordRef<'a>>)> + 'a {
        keys.0.iter().map(|key| (key, self.record(key)))
    }

    /// The changes to the index entries of closed beads on disk ([`closed_index`]) that the
    /// records under `keys` bring, in the order to apply them in the same batch: the entries of
    /// deleted namespaces, then those of closed beads as they were written before they changed,
    /// then those of the changed beads that are closed now.
    pub fn closed_index_writes<'a>(&'a self, keys: &'a ChangedKeys) -> impl Iterator<Item = IndexWrite> + 'a {
        let puts = keys.0.iter().filter_map(|key| match key {
            RecordKey::Bead(namespace, bead_id) => {
                let bead = self.namespaces.get(namespace)?.held(bead_id)?;
                (bead.status == crate::model::Status::Closed).then(|| closed_index::entries(namespace, bead))
            }
            _ => None,
        });
        keys.1.iter().cloned().chain(puts.flatten().map(IndexWrite::Put))
    }

    /// Hands over every record changed since the last call, owned (`None`: removed).
    pub fn take_changes(&mut self) -> Vec<(RecordKey, Option<Record>)> {
        let keys = self.take_changed_keys();
        self.changed_records(&keys).map(|(key, record)| (key.clone(), record.map(RecordRef::to_record))).collect()
    }

    /// The record under `key`, borrowed, if the state holds one.
    pub fn record(&self, key: &RecordKey) -> Option<RecordRef<'_>> {
        match key {
            RecordKey::Clock => Some(RecordRef::Clock(self.clock)),
            RecordKey::ControllerTerm => Some(RecordRef::ControllerTerm(self.controller_term)),
            RecordKey::Namespace(namespace)
            | RecordKey::Bead(namespace, _)
            | RecordKey::Event(namespace, _)
            | RecordKey::Formula(namespace, _)
            | RecordKey::LooseEdges(namespace, _)
            | RecordKey::Order(namespace, _) => self.namespaces.get(namespace)?.record(key),
            RecordKey::Session(client_id) => self.sessions.by_client.get(client_id).map(RecordRef::Session),
            RecordKey::AuthEnabled => Some(RecordRef::AuthEnabled(self.auth.enabled)),
            RecordKey::Token(name) => self.auth.tokens.get(name).map(RecordRef::Token),
            RecordKey::ApplyVersion => Some(RecordRef::ApplyVersion(self.apply_version)),
        }
    }

    /// Every record of the state, in key order (what a snapshot or a digest covers).
    pub fn records(&self) -> Vec<(RecordKey, Record)> {
        let mut records = Vec::new();
        self.visit_records(&mut |key, record| records.push((key, record.to_record())));
        records
    }

    /// Hands every record of the state to `visit`, borrowed, in the order [`State::records`]
    /// lists them: what a digest reads without copying the state.
    pub fn visit_records(&self, visit: &mut dyn FnMut(RecordKey, RecordRef<'_>)) {
        visit(RecordKey::Clock, RecordRef::Clock(self.clock));
        visit(RecordKey::ControllerTerm, RecordRef::ControllerTerm(self.controller_term));
        for (namespace, namespace_state) in &self.namespaces {
            namespace_state.visit_records(namespace, visit);
        }
        for (client_id, session) in &self.sessions.by_client {
            visit(RecordKey::Session(*client_id), RecordRef::Session(session));
        }
        if self.auth.enabled || !self.auth.tokens.is_empty() {
            visit(RecordKey::AuthEnabled, RecordRef::AuthEnabled(self.auth.enabled));
        }
        for (name, token) in &self.auth.tokens {
            visit(RecordKey::Token(name.clone()), RecordRef::Token(token));
        }
        if self.apply_version != ApplyVersionRecord::default() {
            visit(RecordKey::ApplyVersion, RecordRef::ApplyVersion(self.apply_version));
        }
    }

    /// A digest of the whole state: two replicas with the same applied log have the same digest.
    /// A borrowed record serializes as its owned one, so this reads the state without copying it.
    pub fn digest(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.visit_records(&mut |key, record| {
            key.hash(&mut hasher);
            serde_json::to_vec(&record).expect("records serialize to JSON").hash(&mut hasher);
        });
        hasher.finish()
    }
}

/// The refusal of the canary rule of the next apply version (the test-only apply-next mode; see
/// [`crate::version::CANARY_NEXT_PREFIX`]), by which the simulator tells it from other refusals.
pub fn canary_next_refusal() -> Refusal {
    Refusal::Invalid(format!(
        "a title starting with {:?} is refused from apply version {} on",
        crate::version::CANARY_NEXT_PREFIX,
        crate::version::NEXT_APPLY_VERSION
    ))
}

#[cfg(test)]
pub(crate) mod tests;
