//! `ready --claim`: find the first ready bead matching a filter and claim it in the same step.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::command::ReadyFilter;
use crate::model::Actor;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 7 ClaimNext);

/// Find the first ready bead matching the filter and claim it in the same step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaimNext {
    /// Who claims it.
    pub actor: Actor,
    /// Which beads qualify; `limit` is ignored.
    pub filter: ReadyFilter,
    /// A lease for the claim, as [`super::Claim`]'s.
    pub lease_ms: Option<u64>,
}

impl WriteCommand for ClaimNext {
    const NAME: &'static str = "claim_next";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        super::claim::check_claimant(&self.actor)?;
        self.lease_ms.map_or(Ok(()), crate::validate::validate_lease)?;
        crate::validate::validate_ready_filter(&self.filter)
    }

    fn other_actor<'a>(&'a self, own: &str) -> Option<&'a str> {
        super::claimant(&self.actor, own)
    }

    fn fill_claimants(&mut self, actor: &Actor) {
        super::fill_claimant(&mut self.actor, actor);
    }

    fn samples() -> Vec<ClaimNext> {
        let (actor, filter) = (super::samples::ann(), super::samples::ready_filter());
        vec![ClaimNext { actor, filter, lease_ms: Some(60_000) }]
    }
}

impl NamespaceWrite for ClaimNext {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.claim_next(&self.actor, &self.filter, self.lease_ms, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ClaimNext;
    use crate::convert::{ToWriteRequest, ready_filter, ready_filter_to_proto, write_request};
    use crate::model::Actor;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ClaimNextRequest, |request| {
        let filter = ready_filter(request.filter)?;
        Ok(ClaimNext { actor: Actor(request.actor), filter, lease_ms: request.lease_ms }.into())
    });

    impl ToWriteRequest for ClaimNext {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let request = pb::ClaimNextRequest {
                header: Some(header),
                actor: self.actor.0.clone(),
                filter: Some(ready_filter_to_proto(&self.filter)),
                lease_ms: self.lease_ms,
            };
            Some(request.into())
        }
    }
}
