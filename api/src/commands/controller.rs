//! The leader's controller's actions (`node/src/leader/controller.rs` decides them): expiring
//! leases, collecting old closed wisps, closing finished convoys, firing due orders. Each is
//! fenced by the term it was decided in, and conditional on the state it judged, so applying it
//! twice is harmless. No client sends one: it has no RPC.

use serde::{Deserialize, Serialize};

use super::{ClusterWrite, WriteCommand};
use crate::auth::Role;
use crate::command::Proposal;
use crate::limits::EXPIRIES_PER_COMMAND_MAX;
use crate::model::Timestamp;
use crate::outcome::{Answer, Refusal};
use crate::state::State;

registered!(cluster_write 6 Controller);

pub use crate::input::{ControllerAction, JudgedLease};

/// An action of the leader's controller, fenced by the term it was decided in: refused when a
/// controller of a higher term has acted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controller {
    /// The Raft term of the leader that decided the action.
    pub term: u64,
    /// What to do.
    pub action: ControllerAction,
}

impl WriteCommand for Controller {
    const NAME: &'static str = "controller";
    const ROLE: Role = Role::Admin;

    fn validate(&self) -> Result<(), Refusal> {
        if let ControllerAction::ExpireLeases { leases } = &self.action
            && leases.len() > EXPIRIES_PER_COMMAND_MAX
        {
            return Err(Refusal::TooLarge {
                what: "a batch of lease expiries".into(),
                size: leases.len(),
                limit: EXPIRIES_PER_COMMAND_MAX,
            });
        }
        Ok(())
    }

    /// One per action, decided in term 9.
    fn samples() -> Vec<Controller> {
        use super::samples::bead_id;
        let actions = vec![
            ControllerAction::Begin,
            ControllerAction::ExpireLease { id: bead_id(1), lease_id: 41, renewed_at: 40 },
            ControllerAction::ExpireLeases {
                leases: vec![
                    JudgedLease { id: bead_id(1), lease_id: 41, renewed_at: 40 },
                    JudgedLease { id: bead_id(2), lease_id: 44, renewed_at: 44 },
                ],
            },
            ControllerAction::CollectWisps { older_than_ms: 3_600_000 },
            ControllerAction::CheckConvoys,
            ControllerAction::FireOrder { name: "nightly".into(), seen_fired: 3 },
            ControllerAction::SwitchApplyVersion { from: 1, to: 2 },
            ControllerAction::Checkpoint,
        ];
        actions.into_iter().map(|action| Controller { term: 9, action }).collect()
    }
}

impl ClusterWrite for Controller {
    fn apply(&self, state: &mut State, proposal: &Proposal, now: Timestamp) -> Answer {
        state.controller(&proposal.namespace, self.term, &self.action, now)
    }
}

/// No protobuf mapping: only a leader proposes a controller action.
mod wire {
    use super::Controller;
    use crate::convert::ToWriteRequest;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    impl ToWriteRequest for Controller {
        fn to_request(&self, _header: pb::WriteHeader) -> Option<ClientRpc> {
            None
        }
    }
}
