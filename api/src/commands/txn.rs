//! `tx` (and `--if-revision`, and Gas City's graph plans): a transaction, etcd's `Txn` without an
//! else branch. If every condition and every lease fence holds, every write applies in order; if
//! one fails or a write is refused, none does: the namespace's journal
//! (`NamespaceState::begin_journal`, `roll_back`) undoes them. A later write may name a bead an
//! earlier create of the same transaction made, as `$N` (N counts writes from 0), so a whole
//! graph of new beads and their edges is one step; [`References`] resolves them, and each bead
//! write names where it carries ids.

use serde::{Deserialize, Serialize};

use super::{Command, Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::{TXN_CONDITIONS_MAX, TXN_FENCES_MAX, TXN_WRITES_MAX};
use crate::model::{Actor, BeadId};
use crate::outcome::{Answer, Outcome, Refusal};
use crate::state::NamespaceState;

registered!(write 32 Txn);

/// Bead writes applied all together or not at all, after every condition holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Txn {
    /// Revisions beads must still be at.
    pub conditions: Vec<Condition>,
    /// Leases beads must still be held under (a holder's writes carry its lease id).
    pub fences: Vec<Fence>,
    /// The writes, at most [`crate::limits::TXN_WRITES_MAX`]; each [`Command::is_bead_write`].
    pub writes: Vec<Command>,
}

/// A lease fence of a [`Txn`]: the bead is still held under this lease (a fencing token).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fence {
    /// The bead.
    pub id: BeadId,
    /// The lease id the writer holds ([`crate::model::Lease::id`]).
    pub lease_id: u64,
}

/// A condition of a [`Txn`]: the bead exists and is still at this revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// The bead.
    pub id: BeadId,
    /// Its revision when it was read ([`crate::model::Bead::revision`]).
    pub revision: u64,
}

impl Txn {
    /// One write, applied only if `id` is still at `revision` (`--if-revision`).
    pub fn conditional(id: BeadId, revision: u64, write: Command) -> Txn {
        Txn { conditions: vec![Condition { id, revision }], fences: Vec::new(), writes: vec![write] }
    }
}

impl WriteCommand for Txn {
    const NAME: &'static str = "txn";
    const ROLE: Role = Role::Agent;

    /// Checks the transaction and each of its writes as the cluster does before applying it.
    fn validate(&self) -> Result<(), Refusal> {
        if self.writes.is_empty() {
            return Err(Refusal::Invalid("a transaction needs at least one write".into()));
        }
        if self.writes.len() > TXN_WRITES_MAX {
            return Err(Refusal::Invalid(format!("a transaction holds at most {TXN_WRITES_MAX} writes; split it")));
        }
        if self.conditions.len() > TXN_CONDITIONS_MAX {
            return Err(Refusal::Invalid(format!("a transaction checks at most {TXN_CONDITIONS_MAX} conditions")));
        }
        if self.fences.len() > TXN_FENCES_MAX {
            return Err(Refusal::Invalid(format!("a transaction carries at most {TXN_FENCES_MAX} lease fences")));
        }
        for (index, write) in self.writes.iter().enumerate() {
            if !write.is_bead_write() {
                return Err(Refusal::Invalid(format!(
                    "write {} of the transaction is not a bead write; a transaction holds {}",
                    index + 1,
                    crate::printable::listed(&super::BeadWriteView::names())
                )));
            }
            write.validate().map_err(|refusal| Refusal::TxnWriteRefused { index, refusal: Box::new(refusal) })?;
        }
        Ok(())
    }

    fn other_actor<'a>(&'a self, own: &str) -> Option<&'a str> {
        self.writes.iter().find_map(|write| write.other_actor(own))
    }

    fn fill_claimants(&mut self, actor: &Actor) {
        self.writes.iter_mut().for_each(|write| write.fill_claimants(actor));
    }

    fn samples() -> Vec<Txn> {
        use super::samples::bead_id;
        vec![Txn {
            conditions: vec![Condition { id: bead_id(1), revision: 42 }],
            fences: vec![Fence { id: bead_id(1), lease_id: 41 }],
            writes: vec![
                super::CreateBead { title: "child".into(), ..super::CreateBead::default() }.into(),
                super::DepAdd {
                    issue_id: BeadId("$0".into()),
                    depends_on_id: bead_id(1),
                    dep_type: crate::model::DepType::blocks(),
                }
                .into(),
            ],
        }]
    }
}

impl NamespaceWrite for Txn {
    /// Checks the conditions, then applies every write or none.
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        for Condition { id, revision } in &self.conditions {
            let current = namespace.bead(id)?.revision;
            if current != *revision {
                return Err(Refusal::RevisionMismatch { id: id.clone(), expected: *revision, current });
            }
        }
        for Fence { id, lease_id } in &self.fences {
            let bead = namespace.bead(id)?;
            if bead.lease.as_ref().is_none_or(|lease| lease.id != *lease_id) {
                return Err(Refusal::lease_lost(&bead, *lease_id));
            }
        }
        namespace.begin_journal();
        let mut created: Vec<Option<BeadId>> = Vec::with_capacity(self.writes.len());
        let mut outcomes = Vec::with_capacity(self.writes.len());
        for (index, write) in self.writes.iter().enumerate() {
            let references = References::new(&created, index);
            let outcome = match write.as_bead_write() {
                Some(bead_write) => bead_write.apply_resolved(&references, namespace, context.now),
                None => Err(Refusal::Invalid(format!("{} is not a bead write", write.name()))),
            };
            match outcome {
                Ok(outcome) => {
                    let created_id = match (&outcome, write) {
                        (Outcome::Bead(bead), Command::Create(_)) => Some(bead.id.clone()),
                        _ => None,
                    };
                    created.push(created_id);
                    outcomes.push(outcome);
                }
                Err(refusal) => {
                    namespace.roll_back();
                    if self.writes.len() == 1 {
                        return Err(refusal);
                    }
                    return Err(Refusal::TxnWriteRefused { index, refusal: Box::new(refusal) });
                }
            }
        }
        namespace.end_journal();
        Ok(Outcome::Txn(outcomes))
    }
}

/// Resolves the `$N` references of write `index` of a transaction: `$N` names the bead write N
/// created.
pub struct References<'a> {
    created: &'a [Option<BeadId>],
    index: usize,
}

impl<'a> References<'a> {
    /// For write `index`, after the writes before it made `created` (the id of each create).
    pub(crate) fn new(created: &'a [Option<BeadId>], index: usize) -> References<'a> {
        References { created, index }
    }

    /// The id a `$N` reference names; any other id as it is.
    pub(crate) fn id(&self, bead_id: &BeadId) -> Result<BeadId, Refusal> {
        let Some(position) = bead_id.0.strip_prefix('$') else { return Ok(bead_id.clone()) };
        let earlier = position.parse::<usize>().ok().filter(|earlier| *earlier < self.index);
        match earlier.and_then(|earlier| self.created[earlier].clone()) {
            Some(created_id) => Ok(created_id),
            None => Err(Refusal::Invalid(format!(
                "{} names no bead: ${{N}} refers to an earlier create of the transaction, counting writes from 0",
                bead_id.0
            ))),
        }
    }

    /// A `needs` entry (`ID` or `TYPE:ID`) with its id resolved.
    pub(crate) fn need(&self, need: &str) -> Result<String, Refusal> {
        match need.rsplit_once(':') {
            Some((dep_type, target)) if target.starts_with('$') => {
                Ok(format!("{dep_type}:{}", self.id(&BeadId::from(target))?))
            }
            _ => Ok(self.id(&BeadId::from(need))?.0),
        }
    }

    /// A metadata value that is exactly `$N` (a reference to the bead write N created, as Gas
    /// City's graph plans point one node's metadata at another node) with the id resolved; any
    /// other value as it is.
    pub(crate) fn value(&self, value: &mut String) -> Result<(), Refusal> {
        let is_reference =
            value.strip_prefix('$').is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if is_reference {
            *value = self.id(&BeadId(value.clone()))?.0;
        }
        Ok(())
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::{Condition, Fence, Txn};
    use crate::commands::{txn_write_of, txn_write_to_proto};
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::BeadId;
    use crate::outcome::Refusal;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::TxnRequest, |request| {
        let conditions = request
            .conditions
            .into_iter()
            .map(|condition| Condition { id: BeadId(condition.id), revision: condition.revision })
            .collect();
        let writes = request
            .writes
            .into_iter()
            .enumerate()
            .map(|(index, write)| {
                txn_write_of(write).map_err(|refusal| Refusal::TxnWriteRefused { index, refusal: Box::new(refusal) })
            })
            .collect::<Result<_, _>>()?;
        let fences =
            request.fences.into_iter().map(|fence| Fence { id: BeadId(fence.id), lease_id: fence.lease_id }).collect();
        Ok(Txn { conditions, fences, writes }.into())
    });

    impl ToWriteRequest for Txn {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let request = pb::TxnRequest {
                header: Some(header),
                conditions: self
                    .conditions
                    .iter()
                    .map(|condition| pb::TxnCondition { id: condition.id.0.clone(), revision: condition.revision })
                    .collect(),
                // A write a transaction cannot hold is sent empty, and the server refuses it.
                writes: self.writes.iter().map(|write| txn_write_to_proto(write).unwrap_or_default()).collect(),
                fences: self
                    .fences
                    .iter()
                    .map(|fence| pb::TxnFence { id: fence.id.0.clone(), lease_id: fence.lease_id })
                    .collect(),
            };
            Some(request.into())
        }
    }
}
