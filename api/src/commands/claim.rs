//! `claim ID` (and a `claim` write of `strand tx`): claim one bead for an actor (docs/beads.md
//! §3), a compare-and-swap of exactly one winner, with a lease when `lease_ms` is set.

use serde::{Deserialize, Serialize};

use super::txn::References;
use super::{BeadWriteCommand, WriteCommand};
use crate::auth::Role;
use crate::model::{Actor, BeadId, Timestamp};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(bead_write 3 Claim);

/// Claim one bead for an actor, with a lease when `lease_ms` is set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The bead.
    pub id: BeadId,
    /// Who claims it.
    pub actor: Actor,
    /// The lease, in milliseconds ([`crate::limits::LEASE_MS_MIN`] to
    /// [`crate::limits::LEASE_MS_MAX`]); `None`: a claim without a lease, as before leases.
    pub lease_ms: Option<u64>,
}

/// Refuses a claim (or a claim of the next ready bead) that names no claimant or a malformed one.
pub(crate) fn check_claimant(actor: &Actor) -> Result<(), Refusal> {
    if actor.0.is_empty() {
        return Err(Refusal::Invalid("claim needs an actor; pass --actor or set STRAND_ACTOR".into()));
    }
    crate::validate::check_names(&[("actor", &actor.0)])?;
    crate::validate::check_identifier("actor", &actor.0)
}

impl WriteCommand for Claim {
    const NAME: &'static str = "claim";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        check_claimant(&self.actor)?;
        self.lease_ms.map_or(Ok(()), crate::validate::validate_lease)
    }

    fn other_actor<'a>(&'a self, own: &str) -> Option<&'a str> {
        super::claimant(&self.actor, own)
    }

    fn fill_claimants(&mut self, actor: &Actor) {
        super::fill_claimant(&mut self.actor, actor);
    }

    fn samples() -> Vec<Claim> {
        vec![Claim { id: super::samples::bead_id(1), actor: super::samples::ann(), lease_ms: Some(30_000) }]
    }
}

impl BeadWriteCommand for Claim {
    fn apply(&self, namespace: &mut NamespaceState, now: Timestamp) -> Answer {
        namespace.claim(&self.id, &self.actor, self.lease_ms, now)
    }

    fn resolved(&self, references: &References) -> Result<Claim, Refusal> {
        Ok(Claim { id: references.id(&self.id)?, ..self.clone() })
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::Claim;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::model::{Actor, BeadId};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ClaimRequest, |request| {
        Ok(Claim { id: BeadId(request.id), actor: Actor(request.actor), lease_ms: request.lease_ms }.into())
    });

    impl ToWriteRequest for Claim {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let (id, actor) = (self.id.0.clone(), self.actor.0.clone());
            Some(pb::ClaimRequest { header: Some(header), id, actor, lease_ms: self.lease_ms }.into())
        }
    }
}
