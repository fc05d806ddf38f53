//! `cluster check`: a consistency checkpoint on demand. Every replica takes a digest of its state
//! as it applies it, as at the checkpoints the leader proposes every
//! `consistency_check_interval` (`ControllerAction::Checkpoint`); the leader compares the
//! members' digests, and `strand cluster check` shows them. It changes nothing. An admin's
//! command; the proposal's namespace is ignored.

use serde::{Deserialize, Serialize};

use super::{ClusterWrite, WriteCommand};
use crate::auth::Role;
use crate::command::Proposal;
use crate::model::Timestamp;
use crate::outcome::{Answer, Outcome};
use crate::state::State;

registered!(cluster_write 38 ConsistencyCheck);

/// Take a consistency checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsistencyCheck {}

impl WriteCommand for ConsistencyCheck {
    const NAME: &'static str = "consistency_check";
    const ROLE: Role = Role::Admin;

    fn samples() -> Vec<ConsistencyCheck> {
        vec![ConsistencyCheck {}]
    }
}

impl ClusterWrite for ConsistencyCheck {
    fn apply(&self, _state: &mut State, _proposal: &Proposal, _now: Timestamp) -> Answer {
        Ok(Outcome::Done)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::ConsistencyCheck;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::ConsistencyCheckRequest, |_request| Ok(ConsistencyCheck {}.into()));

    impl ToWriteRequest for ConsistencyCheck {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::ConsistencyCheckRequest { header: Some(header) }.into())
        }
    }
}
