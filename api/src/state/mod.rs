//! The deterministic bead state machine.
//!
//! [`State::apply`] takes one [`Proposal`] from the Raft log and answers it; [`State::query`]
//! answers a read. Neither does I/O, reads a clock or draws a random number: the leader stamps
//! the time into the proposal, and the storage layer persists what [`State::take_changes`] hands
//! it. Replaying the same log on any node gives the same state and the same answers.
//!
//! Invariant: the state's clock never goes backwards (`now = max(clock, stamped time)`), even when
//! a new leader's clock is behind the old one's.
//! Invariant: a refused command changes nothing but the dedup table and the clock.

mod commands;
mod index;
mod namespace;
mod query;
mod session;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::command::{Command, Proposal, Query};
use crate::model::{Bead, BeadId, Namespace, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::validate::{validate_command, validate_namespace, validate_prefix};
pub use namespace::NamespaceMeta;
use namespace::NamespaceState;
pub use session::Session;
use session::{Seen, Sessions};

/// The key of one persisted record of the state.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RecordKey {
    /// The state's clock.
    Clock,
    /// A namespace's settings and counters.
    Namespace(Namespace),
    /// A bead.
    Bead(Namespace, BeadId),
    /// A client session of the dedup table.
    Session(u64),
}

/// One persisted record of the state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// The state's clock.
    Clock(Timestamp),
    /// A namespace's settings and counters.
    Namespace(NamespaceMeta),
    /// A bead.
    Bead(Box<Bead>),
    /// A client session.
    Session(Session),
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
    removed_namespaces: BTreeSet<Namespace>,
}

impl State {
    /// An empty state.
    pub fn new() -> State {
        State::default()
    }

    /// Rebuilds a state (indexes included) from its persisted records, in any order.
    pub fn from_records(records: impl IntoIterator<Item = (RecordKey, Record)>) -> Result<State, LoadError> {
        let mut state = State::new();
        let mut beads = Vec::new();
        for (key, record) in records {
            match (key, record) {
                (RecordKey::Clock, Record::Clock(clock)) => state.clock = clock,
                (RecordKey::Namespace(namespace), Record::Namespace(meta)) => {
                    state.namespaces.insert(namespace, NamespaceState::new(meta));
                }
                (RecordKey::Bead(namespace, _), Record::Bead(bead)) => beads.push((namespace, bead)),
                (RecordKey::Session(client_id), Record::Session(session)) => state.sessions.load(client_id, session),
                (key, _) => return Err(LoadError { key }),
            }
        }
        beads.sort_by_key(|(namespace, bead)| (namespace.clone(), bead.seq));
        for (namespace, bead) in beads {
            let Some(namespace_state) = state.namespaces.get_mut(&namespace) else {
                return Err(LoadError { key: RecordKey::Bead(namespace, bead.id.clone()) });
            };
            namespace_state.insert_unrefreshed(*bead);
        }
        for namespace_state in state.namespaces.values_mut() {
            namespace_state.refresh_all();
        }
        state.mark_clean();
        Ok(state)
    }

    fn mark_clean(&mut self) {
        for namespace_state in self.namespaces.values_mut() {
            namespace_state.dirty_beads.clear();
            namespace_state.meta_dirty = false;
        }
        self.sessions.dirty.clear();
        self.clock_dirty = false;
        self.removed_namespaces.clear();
    }

    /// The state's clock: the latest time any applied proposal carried.
    pub fn clock(&self) -> Timestamp {
        self.clock
    }

    /// Number of beads across namespaces.
    pub fn bead_count(&self) -> usize {
        self.namespaces.values().map(NamespaceState::len).sum()
    }

    /// Applies one proposal from the log and answers it.
    pub fn apply(&mut self, proposal: &Proposal) -> Answer {
        if proposal.timestamp > self.clock {
            self.clock = proposal.timestamp;
            self.clock_dirty = true;
        }
        let now = self.clock;
        self.sessions.evict(now);
        if let Some(request_id) = &proposal.request_id
            && let Seen::Answered(answer) = self.sessions.check(request_id)
        {
            return answer;
        }
        let answer = self.apply_command(proposal, now);
        if let Some(request_id) = &proposal.request_id {
            self.sessions.record(request_id, now, &answer);
        }
        answer
    }

    fn apply_command(&mut self, proposal: &Proposal, now: Timestamp) -> Answer {
        validate_command(&proposal.command)?;
        let is_new = !self.namespaces.contains_key(&proposal.namespace);
        let answer = self.run_command(proposal, now);
        if is_new && answer.is_err() {
            // A refused command leaves no namespace behind (and fixes no prefix).
            self.namespaces.remove(&proposal.namespace);
        }
        answer
    }

    fn run_command(&mut self, proposal: &Proposal, now: Timestamp) -> Answer {
        let namespace_state = self.namespace_for_write(&proposal.namespace, &proposal.default_prefix)?;
        match &proposal.command {
            Command::Create(create) => namespace_state.create(create, now),
            Command::Update(update) => namespace_state.update(update, now),
            Command::SetMetadata { id, entries } => namespace_state.set_metadata(id, entries, now),
            Command::Claim { id, actor } => namespace_state.claim(id, actor, now),
            Command::ClaimNext { actor, filter } => namespace_state.claim_next(actor, filter, now),
            Command::Close { ids, reason } => namespace_state.close(ids, reason, now),
            Command::Reopen { id } => namespace_state.reopen(id, now),
            Command::Delete { id } => namespace_state.delete(id, now),
            Command::DepAdd { issue_id, depends_on_id, dep_type } => {
                namespace_state.dep_add(issue_id, depends_on_id, dep_type, now)
            }
            Command::DepRemove { issue_id, depends_on_id } => namespace_state.dep_remove(issue_id, depends_on_id, now),
        }
    }

    /// The namespace a write goes to, created on first use with `default_prefix`.
    fn namespace_for_write(
        &mut self,
        namespace: &Namespace,
        default_prefix: &str,
    ) -> Result<&mut NamespaceState, Refusal> {
        validate_namespace(namespace)?;
        if !self.namespaces.contains_key(namespace) {
            validate_prefix(default_prefix)?;
            let meta = NamespaceMeta { prefix: default_prefix.to_string(), next_seq: 1 };
            self.removed_namespaces.remove(namespace);
            self.namespaces.insert(namespace.clone(), NamespaceState::new(meta));
        }
        Ok(self.namespaces.get_mut(namespace).expect("namespace inserted above"))
    }

    /// Answers a read. A namespace never written to reads as empty.
    pub fn query(&self, namespace: &Namespace, query: &Query) -> Answer {
        validate_namespace(namespace)?;
        let empty;
        let namespace_state = match self.namespaces.get(namespace) {
            Some(namespace_state) => namespace_state,
            None => {
                empty = NamespaceState::new(NamespaceMeta { prefix: String::new(), next_seq: 1 });
                &empty
            }
        };
        match query {
            Query::Get { ids } => namespace_state.get(ids),
            Query::List(filter) => namespace_state.list(filter),
            Query::Ready { filter, now } => namespace_state.ready(filter, *now),
            Query::Children { parent, include_closed } => namespace_state.children(parent, *include_closed),
            Query::ListByLabel { label, limit } => namespace_state.list_by_label(label, *limit),
            Query::DepList { id, direction } => Ok(namespace_state.dep_list(id, *direction)),
        }
    }

    /// Hands over every record changed since the last call: `None` means the record was removed.
    /// The storage layer writes them in the same atomic batch as the applied log index.
    pub fn take_changes(&mut self) -> Vec<(RecordKey, Option<Record>)> {
        let mut changes = Vec::new();
        if self.clock_dirty {
            changes.push((RecordKey::Clock, Some(Record::Clock(self.clock))));
        }
        for namespace in std::mem::take(&mut self.removed_namespaces) {
            changes.push((RecordKey::Namespace(namespace), None));
        }
        for (namespace, namespace_state) in &mut self.namespaces {
            if namespace_state.meta_dirty {
                let record = Record::Namespace(namespace_state.meta.clone());
                changes.push((RecordKey::Namespace(namespace.clone()), Some(record)));
            }
            for bead_id in std::mem::take(&mut namespace_state.dirty_beads) {
                let record = namespace_state.beads.get(&bead_id).map(|bead| Record::Bead(Box::new(bead.clone())));
                changes.push((RecordKey::Bead(namespace.clone(), bead_id), record));
            }
        }
        for client_id in std::mem::take(&mut self.sessions.dirty) {
            let record = self.sessions.by_client.get(&client_id).map(|session| Record::Session(session.clone()));
            changes.push((RecordKey::Session(client_id), record));
        }
        self.mark_clean();
        changes
    }

    /// Every record of the state, in key order (what a snapshot or a digest covers).
    pub fn records(&self) -> Vec<(RecordKey, Record)> {
        let mut records = vec![(RecordKey::Clock, Record::Clock(self.clock))];
        for (namespace, namespace_state) in &self.namespaces {
            records.push((RecordKey::Namespace(namespace.clone()), Record::Namespace(namespace_state.meta.clone())));
            let mut beads: Vec<&Bead> = namespace_state.beads.values().collect();
            beads.sort_by(|a, b| a.id.cmp(&b.id));
            for bead in beads {
                records
                    .push((RecordKey::Bead(namespace.clone(), bead.id.clone()), Record::Bead(Box::new(bead.clone()))));
            }
        }
        for (client_id, session) in &self.sessions.by_client {
            records.push((RecordKey::Session(*client_id), Record::Session(session.clone())));
        }
        records
    }

    /// A digest of the whole state: two replicas with the same applied log have the same digest.
    pub fn digest(&self) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for (key, record) in self.records() {
            key.hash(&mut hasher);
            serde_json::to_vec(&record).expect("records serialize to JSON").hash(&mut hasher);
        }
        hasher.finish()
    }
}

#[cfg(test)]
mod tests;
