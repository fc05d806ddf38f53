//! `namespace delete NS`: delete the proposal's namespace; refused while it holds beads unless
//! `--force`. An admin's command.

use serde::{Deserialize, Serialize};

use super::{ClusterWrite, WriteCommand};
use crate::auth::Role;
use crate::command::Proposal;
use crate::model::Timestamp;
use crate::outcome::Answer;
use crate::state::State;

registered!(cluster_write 15 NamespaceDelete);

/// Delete the proposal's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceDelete {
    /// Delete its beads, events and formulas too.
    pub force: bool,
}

impl WriteCommand for NamespaceDelete {
    const NAME: &'static str = "namespace_delete";
    const ROLE: Role = Role::Admin;

    fn samples() -> Vec<NamespaceDelete> {
        vec![NamespaceDelete { force: true }]
    }
}

impl ClusterWrite for NamespaceDelete {
    fn apply(&self, state: &mut State, proposal: &Proposal, _now: Timestamp) -> Answer {
        state.namespace_delete(&proposal.namespace, proposal.credential.as_ref(), self.force)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::NamespaceDelete;
    use crate::convert::{ToWriteRequest, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::NamespaceDeleteRequest, |request| Ok(NamespaceDelete { force: request.force }.into()));

    impl ToWriteRequest for NamespaceDelete {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            Some(pb::NamespaceDeleteRequest { header: Some(header), force: self.force }.into())
        }
    }
}
