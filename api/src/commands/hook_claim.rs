//! `hook AGENT --claim`: the agent's in-progress bead, else a claim of the first ready bead
//! assigned to it, else of the first ready bead routed to its pool.

use serde::{Deserialize, Serialize};

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::model::Actor;
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;

registered!(write 23 HookClaim);

/// The agent's work query with `--claim`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookClaim {
    /// The agent.
    pub agent: Actor,
    /// Its pool, if any.
    pub pool: Option<String>,
    /// A lease for a new claim, as [`super::Claim`]'s (a bead already in progress is answered
    /// as it is).
    pub lease_ms: Option<u64>,
}

impl WriteCommand for HookClaim {
    const NAME: &'static str = "hook_claim";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        crate::validate::check_actor(&self.agent.0, "hook --claim")?;
        self.lease_ms.map_or(Ok(()), crate::validate::validate_lease)?;
        crate::validate::check_names(&[("pool", self.pool.as_deref().unwrap_or_default())])
    }

    fn other_actor<'a>(&'a self, own: &str) -> Option<&'a str> {
        super::claimant(&self.agent, own)
    }

    fn fill_claimants(&mut self, actor: &Actor) {
        super::fill_claimant(&mut self.agent, actor);
    }

    fn samples() -> Vec<HookClaim> {
        vec![HookClaim { agent: super::samples::ann(), pool: Some("web".into()), lease_ms: Some(30_000) }]
    }
}

impl NamespaceWrite for HookClaim {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.hook_claim(&self.agent, self.pool.as_deref(), self.lease_ms, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::HookClaim;
    use crate::convert::{ToWriteRequest, non_empty, write_request};
    use crate::model::Actor;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::HookClaimRequest, |request| {
        Ok(HookClaim { agent: Actor(request.agent), pool: non_empty(request.pool), lease_ms: request.lease_ms }.into())
    });

    impl ToWriteRequest for HookClaim {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let request = pb::HookClaimRequest {
                header: Some(header),
                agent: self.agent.0.clone(),
                pool: self.pool.clone().unwrap_or_default(),
                lease_ms: self.lease_ms,
            };
            Some(request.into())
        }
    }
}
